// Physical-space image registration: centre-of-mass initialisation, then
// rigid, affine (Adam on the transform parameters) and greedy deformable
// stages, each multi-scale (default 4, 2, 1) with a convergence rule that ends
// a scale when the loss stops improving. Runs on the CPU or one GPU through
// the fused kernels of kernels/registration.
//
// The model (space.h): moving_point(x) = T(x + v(x)) for fixed points x (RAS
// mm); T affine, v a displacement on the fixed grid. Fixed and moving may
// differ in size, spacing, origin and direction.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_REGISTRAR_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_REGISTRAR_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/volume.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/jacobian.h"
#include "kernels/registration/pipeline/metric.h"
#include "kernels/registration/pipeline/option_enums.h"

namespace tessera::parallel {
class Communicator;
}  // namespace tessera::parallel

namespace tessera::registration {

struct RegistrationPlan;  // registration_plan.h

// RegistrationOptions::dense_finest_linear: the finest linear level is
// skipped only when the next coarser one has at least this many voxels
// (64^3; the native macaque's x2 level has 554k, the 2 mm cases' 110k).
inline constexpr int64_t kSkipFinestLinearCoarserVoxels = int64_t{1} << 18;

// RegistrationOptions::full_finest_deformable: on the CPU, the greedy
// deformable stage's finest level runs at most this many iterations when the
// next coarser level holds at least kCapFinestDeformableCoarserVoxels voxels
// (the same depth as above: such a level already registers at 2 mm quality).
inline constexpr int kCappedFinestDeformableIterations = 40;
inline constexpr int64_t kCapFinestDeformableCoarserVoxels = kSkipFinestLinearCoarserVoxels;

struct RegistrationOptions {
  Metric metric = Metric::kLncc;
  // Initial transform: "com" aligns the intensity centres of mass (ANTs'
  // --initial-moving-transform [F,M,1]); "none" starts from the identity in
  // physical space (trust the headers).
  Init init = Init::kCentreOfMass;
  // Issue 34: a start transform T0 (fixed RAS -> moving RAS, e.g. an ANTs
  // 0GenericAffine.mat read with ReadItkAffine) used instead of `init`
  // (ANTs' --initial-moving-transform FILE, elastix's -t0). The rigid stage
  // then optimises R M0 around it, the affine stage M0 + delta; with only a
  // deformable stage it is the affine T. Its log line says "given transform".
  std::optional<Mat4> initial_transform;
  // Issue 34: masks (nonzero = inside; 3-D volumes on any grid, in the fixed
  // and the moving image's physical space). A voxel x of the fixed grid counts
  // in every metric (mse, lncc, mi; CPU and CUDA; linear, greedy lean and
  // standard, mixed precision, B-spline stages) when the fixed mask is set at
  // x and the moving mask at T(x + v(x)), both nearest neighbour
  // (metric_mask.h). Null = none; results without masks are unchanged. Not
  // supported (INVALID_ARGUMENT) with shards > 1 or out of core yet.
  std::shared_ptr<const Volume> fixed_mask, moving_mask;
  // Which stages run (always in the order rigid, affine, deformable).
  std::vector<Stage> stages = {Stage::kRigid, Stage::kAffine, Stage::kDeformable};
  std::vector<int> scales = {4, 2, 1};                           // downsampling factors, coarse to fine
  std::vector<int> rigid_iterations = {100, 50, 25};             // per scale (last value repeats)
  std::vector<int> affine_iterations = {100, 50, 25};
  // 100 at the finest scale, not 50 (issue 17): with 50 the finest level
  // ended on its last, best loss on every bench/registration_cases case (a
  // budget, not a convergence stop); 100 gains on 7 of 7 with MI
  // (bench/results/2026-12-03-*). The plateau rule still ends it early.
  std::vector<int> deformable_iterations = {200, 100, 100};
  double linear_lr = 0.02;           // Adam step at the coarsest scale; halves with each finer scale
  double translation_scale_mm = 50;  // one unit of a translation parameter, mm
  double matrix_scale = 0.1;         // one unit of an affine matrix parameter
  double deformable_lr_voxels = 0.5; // greedy step per iteration, in voxels of the current scale
  // Gaussian smoothing of the deformable gradient, voxels of each level (the
  // update field's regularisation). 3, not 1 (issue 17): MI's per-voxel
  // gradient is noisy, and at sigma 1 the field followed it (a lower final
  // MI loss than at sigma 3, with a lower Dice). Measured on
  // bench/registration_cases (mi, CPU): Dice +0.005..+0.07 on all 7 cases;
  // lncc on the same-modality case 0.961 -> 0.972. 6, not 3 (issue 17,
  // scored against the generator's true map with `registration_cases
  // truth`, mi, with the step halving below): map rms down on all 7 cases
  // (e.g. macaque 0.44 -> 0.25 mm, ch2bet 0.53 -> 0.40, same-modality
  // 0.42 -> 0.25) and Dice up on all 7; 2 is worse on 6 of 7, 8 worse on
  // ch2bet and macaque (bench/results/2026-12-02-*-elastix-v3.md).
  double smooth_grad_sigma = 6.0;    // voxels
  // Gaussian smoothing of the whole displacement field after every greedy
  // iteration, voxels (Thirion's elastic regularisation; it compounds over
  // the iterations). < 0 = auto (issue 17): with MI, proportional to the
  // images' estimated noise (noise_estimate.h: ~0 on clean images, 0.5 at
  // 2% noise), else 0.5. Measured on bench/registration_cases: the fixed 0.5
  // kept the noisy cases' fields off the noise (+0.01 Dice there) but cost
  // the clean macaque case 0.01 Dice; the log says what was chosen.
  double smooth_warp_sigma = -1;
  // How a deformable iteration turns the smoothed gradient into a step:
  //   "normalized": steepest descent scaled so the largest component moves
  //     deformable_lr_voxels (ANTs' greedy step): voxels move in proportion
  //     to their evidence, so weak or noisy gradients barely move anything.
  //   "adam": per-voxel Adam (FireANTs). Adam divides each voxel's gradient by
  //     its own running RMS, so where the metric has almost no signal (flat
  //     regions, noise; above all with a global metric such as MI) the field
  //     still moves a full step; with MI that lets the field chase noise and
  //     non-injective intensity maps (measured in the registrar tests:
  //     multimodal Dice 0.78-0.81 with adam, 0.92-0.94 normalized).
  DeformableStep deformable_step = DeformableStep::kNormalized;
  // Step control within a scale (step_control.h): the step halves after this
  // many iterations without a new best loss, down to
  // deformable_min_step_fraction of deformable_lr_voxels; 0 = a fixed step.
  // 3 (issue 17): the fixed step's last iterate oscillates around the
  // optimum; halving lowers the map error on 6 of 7 bench cases at the same
  // iteration budget (macaque 0.33 -> 0.25 mm rms at sigma 6).
  int deformable_halve_after = 3;
  double deformable_min_step_fraction = 0.125;
  // The deformable stage's transform model (issue 17): "greedy" (a dense
  // field with greedy compositional steps, as above) or "bspline" (a cubic
  // B-spline of a control grid, additive as elastix's: bspline_stage.h; the
  // grid is the regularisation, the smoothing sigmas are not used). Both give
  // the same outputs (a dense displacement on the fixed grid).
  DeformableModel deformable_model = DeformableModel::kGreedy;
  // B-spline control spacing at the finest level, mm; each coarser level
  // doubles it (elastix's grid schedule). 10 mm, the final grid of the
  // elastix configuration bench/registration_vs_elastix.sh compares with:
  // on its cases finer grids reach a lower MI loss and a lower Dice (4 mm
  // folds on two of them; see bench/results/2026-12-02-*-bspline.md).
  double bspline_spacing_mm = 10.0;
  // Rigid/affine iterations on the CPU backend with a pointwise metric (mse,
  // mi) evaluate the metric on this many fixed voxels drawn at random for
  // each iteration (elastix's random sampler) instead of on every voxel;
  // 0 = every voxel. Levels with fewer than twice as many voxels, the GPU
  // backend (exact full-volume mode) and lncc always use every voxel.
  int64_t linear_samples = 8192;
  // Issue 38: on the CPU backend, rigid and affine skip the finest level
  // when its metric cannot be sampled (lncc: every voxel, every iteration;
  // their 25 dense iterations each took 9.8 of 32.5 s on one thread on the
  // native macaque case) and the next coarser level holds at least
  // kSkipFinestLinearCoarserVoxels voxels; smaller pyramids (the 2 mm
  // cases, tests) keep it. true restores it. Dice (all labels) with the
  // finest linear levels skipped, lncc, seed 1
  // (bench/results/2026-12-07-cpu-registration-sixth-slice.md): macaque
  // 0.5 mm 0.9114 -> 0.9135, Colin27 1 mm reoriented 0.9870 -> 0.9874,
  // t2like 0.9682 -> 0.9682; the 7 cases at 2 mm (not skipped by default)
  // -0.0007..+0.0152: the coarser levels alone determine the affine.
  bool dense_finest_linear = false;
  // Issue 38: on the CPU backend, the in-core greedy deformable stage's
  // finest level runs at most kCappedFinestDeformableIterations iterations
  // when the next coarser level holds at least
  // kCapFinestDeformableCoarserVoxels voxels (1 mm Colin27: 903k; the native
  // macaque: 554k; the 2 mm cases' 110k keep their budget). Such a finest
  // level refines what a 2 mm-sized level found; its loss still falls (no
  // plateau rule sees it) while Dice moves by 0.001-0.003 in its last 40-60
  // iterations. MI, the 7 full-resolution cases against elastix
  // (bench/results/2026-12-08-cpu-registration-vs-elastix-full.md): Dice
  // -0.0006..-0.0027 against the full budget, above elastix's on every case,
  // wall 0.41-0.74x of elastix's (0.47-0.96x before); the default LNCC's Dice
  // within 0.001. GPU runs, B-spline and out-of-core stages keep the budget.
  // true restores it.
  bool full_finest_deformable = false;
  uint64_t sampling_seed = 1;        // same seed, same subsets, same result
  MetricOptions metric_options;
  // Convergence: a scale ends when the best loss has not improved by more
  // than tolerance * |best| over `patience` iterations.
  double tolerance = 1e-4;
  int patience = 15;
  // Deformable stages only (plateau_stop.h, issue 38): a scale also ends when
  // the mean loss of the last plateau_window iterations is confidently (by
  // its own noise) less than tolerance * |loss| per iteration below the mean
  // of the plateau_window before: the patience rule's rate, judged on means.
  // 0 = off. 20 (40 iterations before it can fire): with the per-iteration
  // loss noise measured on bench/registration_cases' 2 mm levels (MI,
  // jittered voxels: 0.03-1.0 % of |loss|) the noise term 2 se is 0.02-0.64 %
  // against the rate's 1e-4 * 20 = 0.2 %: quiet levels stop on their trend,
  // the noisiest keep the patience rule.
  // plateau_window_finest: the rule on the finest level too (default since
  // bench/results/2026-12-07-cpu-registration-level-stop.md; false restores
  // the finest level's full budget + patience rule). Measured, seed 1: 2 mm,
  // all 7 bench/registration_cases within -0.0006 Dice (x1 stops at 62-100 of
  // 100); 1 mm Colin27 MI reoriented / t2like x1 100 -> 76 / 81 iterations,
  // Dice +0.0001 / -0.0003; macaque 0.5 mm LNCC 67 -> 51, +0.0011. The
  // macaque 2 mm case's seed-2 drop (0.9301 -> 0.9248, x1 86 of 100) is within
  // that case's last-iterate noise: its Dice over budgets 86..100 (seed 1)
  // ranges 0.9247-0.9312 with no trend.
  int plateau_window = 20;
  bool plateau_window_finest = true;
  // The finest level's remaining-gain rule (plateau_stop.h, issue 38): it
  // ends once the confident bound on its loss's decrease per iteration
  // (plateau_window statistics), continued to the end of its budget, would
  // gain less than this fraction of |loss|. 0 = off. 0.001 (Dice gained per
  // unit of relative loss measured <= ~1.5 on the 2 mm cases' blocks of 25
  // iterations past 50) stopped the 2 mm cases at 80-99 of 100 and the 1 mm
  // reoriented case later than the window rule, so it is not the default.
  double finest_remaining_gain = 0;
  std::string device = "auto";       // auto, cpu or cuda
  // Device memory of the deformable stage (issue 13): "lean" (about 37 B per
  // voxel at the finest level: the step fused with an in-place composition by
  // slabs, the metric's scratch and gradient in two shared work buffers; see
  // deformable_stage.h) or "standard" (the original loop: ~68 B normalized,
  // ~92 B Adam). Same algorithm, same Dice.
  MemoryMode memory_mode = MemoryMode::kLean;
  // Storage precision of the lean deformable stage (issue 13, see
  // deformable_stage.h): "mixed" (default: fp16 images, bf16 gradient field,
  // float math and displacement: 26 B per voxel, the whole run 26.6 B on an
  // H200 at 1024^3 and 1550^3 with the same Dice and time per iteration as
  // full, bench/results/2026-12-02-h200-gigavoxel-mixed-out-of-core.md) or
  // "full" (float images and gradient field, 36 B per voxel). Mixed applies to
  // lncc with memory_mode "lean", shards = 1, in core; MSE, MI, the standard
  // loop, sharded and out-of-core runs use full precision.
  Precision precision = Precision::kMixed;
  // Issue 13: run the deformable stage sharded along z over this many
  // in-process ranks (threads on the CPU; streams sharing one GPU), the same
  // algorithm as shards = 1 (sharded_deformable_stage.h). 1 = unsharded.
  int shards = 1;
  // GPU ordinals of the sharded ranks (rank r on gpus[r % gpus.size()]);
  // empty: every rank on the stream's GPU. CUDA only.
  std::vector<int> gpus;
  // Issue 13, ranks in several processes: this process is rank
  // process_group->rank() of process_group->size() (NCCL, made through the
  // rendezvous: services/parallel/nccl_rendezvous.h) and runs that one shard
  // of the sharded greedy stage on its stream's GPU, every process having
  // computed the same set-up (sharded_deformable_stage.h). Null: in-process
  // ranks only. Needs shards = 1 and empty gpus; runs at full precision.
  std::shared_ptr<parallel::Communicator> process_group;
  // Issue 13, out of core on one device (out_of_core_stage.h): the device
  // memory the greedy lean deformable stage may hold, bytes; 0 = no limit.
  // When its need at the finest level (36 B/voxel, deformable_stage.h)
  // exceeds this or the GPU's free memory, the stage runs out of core: z-slab
  // shards in host memory take turns on the device (same result as shards =
  // H in core), and the log says so. Mixed precision then does not apply.
  int64_t device_memory_budget_bytes = 0;
  // Out of core whatever the sizes (tests, benchmarks), on max(2, shards)
  // shards or as many as the budget needs.
  bool force_out_of_core = false;
  // Launch shape of the CUDA sampler kernels (same results for every valid
  // setting); travels with the job, so concurrent jobs never share it.
  GridSamplerTuning sampler;
};

// Whether `options` runs `stage`.
inline bool HasStage(const RegistrationOptions& options, Stage stage) {
  return std::find(options.stages.begin(), options.stages.end(), stage) != options.stages.end();
}

struct RegistrationProgress {
  std::string stage;   // "init", "rigid", "affine", "deformable", "output"
  int scale = 1;
  int iteration = 0;
  int max_iterations = 0;
  double loss = 0;
};

struct RegistrationResult {
  Mat4 affine_ras;                  // T: fixed RAS -> moving RAS
  NDArray displacement_ras;         // v: (nx, ny, nz, 3) float32 RAS mm on the fixed grid; empty without deformable
  Volume warped;                    // moving resampled on the fixed grid (float32)
  double initial_loss = 0;          // after the initialisation (centre of mass, none or given), finest scale
  double final_loss = 0;            // finest scale
  JacobianSummary jacobian;         // of x + v(x); voxels == 0 without deformable
  double seconds = 0;
  size_t peak_device_bytes = 0;     // of this registration's own allocations (DeviceMemoryTracker)
  std::string backend;              // "cpu" or "cuda"
  std::vector<std::string> log;     // one line per stage and scale
};

using ProgressCallback = std::function<void(const RegistrationProgress&)>;

// Errors: INVALID_ARGUMENT (not 3-D, 2-D vs 3-D mismatch, non-finite voxels,
// constant image, bad options), FAILED_PRECONDITION (no overlap after
// initialisation; cuda requested without a GPU), CANCELLED (via `cancel`),
// DEADLINE_EXCEEDED (past `deadline`); both are checked every iteration.
// Device memory is charged to a tracker of its own, inside the calling
// thread's current one (common/buffer.h): the caller's job sees it too.
// Safe to run concurrently from several threads. The one driver of every
// residency (registration_plan.h; run_phases.h has the phases).
absl::StatusOr<RegistrationResult> Register(const Volume& fixed, const Volume& moving, const RegistrationPlan& plan,
                                            const ProgressCallback& progress = nullptr,
                                            const std::atomic<bool>* cancel = nullptr,
                                            absl::Time deadline = absl::InfiniteFuture());
// PlanRegistration(options), then Register(plan).
absl::StatusOr<RegistrationResult> Register(const Volume& fixed, const Volume& moving,
                                            const RegistrationOptions& options,
                                            const ProgressCallback& progress = nullptr,
                                            const std::atomic<bool>* cancel = nullptr,
                                            absl::Time deadline = absl::InfiniteFuture());

// Resamples a label map of the moving image onto the fixed grid with a result's
// transforms (nearest neighbour). Labels: any integer dtype; output int32.
absl::StatusOr<NDArray> WarpLabels(const Volume& moving_labels, const Volume& fixed_like,
                                   const RegistrationResult& result, const std::string& device = "auto",
                                   GridSamplerTuning sampler = {});

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_REGISTRAR_H_
