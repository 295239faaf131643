// The greedy deformable stage OUT OF CORE on one device (issue 13): for pairs
// whose lean stage (deformable_stage.h, 36 B per voxel) does not fit the
// device, or a RegistrationOptions::device_memory_budget_bytes.
//
// The level is split along z into H shards exactly as the sharded stage
// splits it over H ranks (sharded_deformable_stage.h), and the shards take
// turns on ONE device: every iteration runs the sharded loop body's phases
// (kernels/registration/sharded/sharded_greedy_step.h: sample, metric, smooth gradient,
// compose, smooth field), each phase over shards 0..H-1 in turn. The state
// lives in whole host arrays (pinned on CUDA); a phase uploads what it reads
// of shard r (own slices or own slices + halos: the halos ARE the halo
// exchange, the neighbours' own slices as the previous phase left them),
// runs, and downloads its outputs' own slices. All-reduces are folded on the
// host in shard order (StagedCommunicator: the in-process communicator's
// arithmetic). So the result equals the in-core sharded stage's with the
// same H: bit for bit on the CPU backend (tested), up to the device
// sampler's arithmetic on CUDA (the window sampler is the ring sampler's
// kernel: ring_sampler.h).
// Overlap (CUDA): two device working sets and two copy streams; while shard
// r computes, shard r + 1's inputs upload and shard r - 1's outputs download.
// The moving image stays whole on the host; a shard uploads only the window
// of moving slices its warped points can reach (MovingWindowFor: the own
// slab through the affine, widened by the field's current range).
//
// Memory model, N voxels of the level, normalized rule (Adam: + m, v):
//   host   u 12 + warped 4 + grad 12 = 28 B/voxel (+24 Adam), pinned on CUDA,
//          less what stays resident (below); the images are read where the
//          caller keeps them: a SlabImage converts the caller's volume (any
//          dtype) slab by slab on upload, so a bounded run holds no
//          normalised copy of a full-resolution image.
//   device two working sets, each for the largest local slab of L voxels
//          (own + halos) and one moving window of W voxels:
//          fixed 4 + warped 4 + dL/dwarped 4 + u 12 + grad 12 (+24 Adam)
//          + CUDA LNCC's a, b, c 12 = 48 B per slab voxel, + the
//          composition workspace C (two 3-component slabs of 2^18 voxels,
//          at least the compose halo deep), + 4 W; and one smoothing
//          scratch of 4 L: 2 (48 L + C + 4 W) + 4 L in all
//          (OutOfCoreWorkingSetBytes; the log line reports the tracked peak),
//          + the whole arrays kept RESIDENT in device memory where the limit
//          allows beside the working set (ChooseResidency: grad 12, then
//          u 12, then warped 4 B/voxel): a resident array's slabs move
//          device to device, and its host copy does not exist.
// Transfer per iteration (halos add 2 halo / own per shard):
//   sample           up u 12 + window ~4      down warped 4 + J 12
//   metric           up fixed 4 + warped 4 + J 12      down dL/du 12   (MI prepass: up 8)
//   smooth gradient  up 12                    down 12
//   compose          up u 12 + grad 12 (+ m, v 24)     down u 12 (+ m, v 24)
//   smooth field     up 12                    down 12
//   = ~84 B up + 64 B down per voxel (normalized LNCC): at 1024^3 about
//   160 GB per iteration, so PCIe, not the GPU, sets the pace.
// Progress reports and cancellation checks run every iteration.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_OUT_OF_CORE_STAGE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_OUT_OF_CORE_STAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/types.h"
#include "kernels/registration/pipeline/deformable_stage.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration {

// Bytes of `backend`'s memory the in-core lean stage holds for a level of
// `dims`: deformable_stage.h's model (36 B per voxel, 26 B mixed, +24 B
// Adam, +4 B MI) plus the composition's two slab buffers as
// ComposeGreedyStepInPlace sizes them for the stage's largest step
// (ComposeSlabBuffersBytes at ComposeSlabDepth(dims,
// LeanStageStepBoundVoxels(options)): 201 MB at 512^3 and at 1024^3), plus
// on the CPU the metric's kept scratch (LeanMetricCpuScratchBytes: LNCC's
// five float volumes, 20 B per voxel).
int64_t LeanStageDeviceBytes(const RegistrationOptions& options, Dims3 dims, Backend backend);

// The largest GreedyStepBoundVoxels of the lean stage's steps: the scaled
// rule moves at most its learning rate (deformable_lr_voxels, which
// StepControl only halves), Adam at most its bound for a late step (it grows
// with t toward ~7.3 lr at AdamOptions' default betas, which the stage uses).
double LeanStageStepBoundVoxels(const RegistrationOptions& options);

// Bytes per voxel of host memory the out-of-core stage holds with nothing
// resident (u, warped, grad: 28, +24 Adam; the images are the caller's).
int64_t OutOfCoreHostBytesPerVoxel(const RegistrationOptions& options);

// Which whole arrays of a level the out-of-core stage keeps in device memory
// (resident) instead of host memory.
struct OutOfCoreResidency {
  bool grad = false;    // dL/du and the sampling Jacobian, 12 B/voxel: the most traffic
  bool u = false;       // the field, 12 B/voxel (Adam's m, v stay on the host)
  bool warped = false;  // 4 B/voxel
  int64_t device_bytes = 0;  // what the resident arrays hold
  int64_t host_bytes = 0;    // what the others hold
  std::string ToString() const;
};

// The largest arrays that fit `limit_bytes` beside the working set of
// `shards` (greedy: grad, u with its coarser level while it is upsampled,
// warped). limit_bytes <= 0: nothing resident (the all-host stage).
// window_slices: the moving window the level's shards will need
// (PlannedWindowSlices), or -1 for the working-set model's estimate.
OutOfCoreResidency ChooseResidency(const RegistrationOptions& options, Dims3 fixed, Dims3 moving, int shards,
                                   int64_t limit_bytes, int64_t window_slices = -1);

// A whole host image that the out-of-core passes read slab by slab, converted
// to float on the way to the device: float(data[i]) (normalize false: the
// original intensities of the output warp), or
// clamp((float(data[i]) - low) * scale, 0, 1): the registrar's normalisation
// (host_setup.h NormalizedIntensitiesParallel) bit for bit, so a bounded run
// keeps no normalised copy of a full-resolution image. data: any dtype, host
// memory (a float32 array without normalisation is copied as it is, and may
// be device memory).
struct SlabImage {
  NDArray data;
  float low = 0, scale = 1;
  bool normalize = false;
};

// Converts values [offset, offset + n) of `image` into host floats `out`
// (parallel over the host's cores).
absl::Status ConvertSlab(const SlabImage& image, int64_t offset, int64_t n, float* out);

// A pyramid level of the out-of-core stage: DeformableLevel with SlabImages.
struct OutOfCoreLevel {
  int factor = 1;
  GridSpace fixed_space, moving_space;
  SlabImage fixed, moving;
};

// The out-of-core stage's device working set for a level with `shards`
// shards (the model above). window_slices: the moving slices one shard's
// window holds, known once the level's affine and field are
// (PlannedWindowSlices); -1 estimates it as the shard's own slices + halos
// + 8, which a tilted affine or a large field exceeds.
int64_t OutOfCoreWorkingSetBytes(const RegistrationOptions& options, Dims3 fixed, Dims3 moving, int shards,
                                 int64_t window_slices = -1);

// The most moving slices any shard's window needs at a level whose shards
// sample through `affine` (the sampler's normalised affine) with a field in
// [disp_min, disp_max] (normalised units), widened for the field's growth
// during the level (a quarter of its reach, and 2 slices).
int64_t PlannedWindowSlices(Dims3 fixed, Dims3 moving, int shards, int64_t halo, const float affine[12],
                            double disp_min, double disp_max);

// The fewest shards (>= min_shards, >= 2) whose working set fits a quarter
// of `budget_bytes` at this level (the rest for resident arrays:
// ChooseResidency), else the whole budget; RESOURCE_EXHAUSTED naming the
// budget when even the thinnest slabs the halos allow do not fit.
absl::StatusOr<int> OutOfCoreShards(const RegistrationOptions& options, Dims3 fixed, Dims3 moving,
                                    int64_t budget_bytes, int min_shards);

// Whether the greedy lean stage runs out of core, and on how many shards:
// when options.force_out_of_core, or when its device need at the finest
// level (LeanStageDeviceBytes) exceeds device_memory_budget_bytes (> 0) or,
// on CUDA, the GPU's free memory now. shards = 0: in core. The reason is
// one log line. RESOURCE_EXHAUSTED when even the thinnest shards exceed the
// budget. B-spline and memory_mode standard stay in core.
struct OutOfCoreChoice {
  int shards = 0;
  std::string reason;
  // The device bytes the run may hold: the budget, the GPU's free memory if
  // less, or no limit (forced without a budget).
  int64_t limit_bytes = 0;
};
absl::StatusOr<OutOfCoreChoice> ChooseOutOfCore(const RegistrationOptions& options, const Stream& stream,
                                                Dims3 fixed, Dims3 moving);

// RunLeanDeformableStage's contract out of core with `shards` shards (each
// level: ShardsForLevel as the sharded stage). Levels must be float
// (not mixed precision), on the host or the device. Returns u in normalised
// sampler units on the finest level's grid, in `stream`'s memory, or with
// result_on_host in host memory (pinned on CUDA: the bounded run's outputs).
absl::StatusOr<NDArray> RunOutOfCoreDeformableStage(const Stream& stream, const RegistrationOptions& options,
                                                    const DeformableStageHooks& hooks, const Mat4& t,
                                                    const std::vector<DeformableLevel>& levels, int shards,
                                                    std::vector<std::string>* log, bool result_on_host = false);
// The same over OutOfCoreLevels; each level keeps resident what
// ChooseResidency gives for `device_limit_bytes` (0: nothing, the all-host
// stage; the result is the same either way: tested).
absl::StatusOr<NDArray> RunOutOfCoreDeformableStage(const Stream& stream, const RegistrationOptions& options,
                                                    const DeformableStageHooks& hooks, const Mat4& t,
                                                    const std::vector<OutOfCoreLevel>& levels, int shards,
                                                    std::vector<std::string>* log, bool result_on_host,
                                                    int64_t device_limit_bytes);

// The full-resolution passes of a run bounded by the budget (registrar.cc),
// by the same shards, working sets and phases as the stage, so the device
// holds no more than OutOfCoreWorkingSetBytes:
//   loss      the metric at (t, u) (the sample and metric phases; the
//             sharded metric: equal to the whole-volume metric up to the
//             order of its float sums);
//   warped    `intensities` (the original moving image: a SlabImage without
//             normalisation, any dtype) through (t, u), slab by slab with the
//             window sampler (the whole-volume sampler's values);
//   jacobian  det J of x + u, summarised over the shards (ShardedJacobian).
// `full` is the finest level (normalising SlabImages); u a host field on its
// grid in normalised units, or empty (a zero field: the initial loss, runs
// without a deformable stage; then jacobian.voxels = 0). The gradient
// scratch is resident when `device_limit_bytes` allows (ChooseResidency).
struct OutOfCoreOutputs {
  double loss = 0;
  NDArray warped;  // host (pinned on CUDA), the fixed grid
  JacobianSummary jacobian;
};
absl::StatusOr<OutOfCoreOutputs> RunOutOfCoreOutputs(const Stream& stream, const RegistrationOptions& options,
                                                     const Mat4& t, const OutOfCoreLevel& full,
                                                     const SlabImage& intensities, const NDArray& u, int shards,
                                                     int64_t device_limit_bytes = 0);
// The loss alone (the initial loss of a bounded run, u empty).
absl::StatusOr<double> OutOfCoreLoss(const Stream& stream, const RegistrationOptions& options, const Mat4& t,
                                     const OutOfCoreLevel& full, const NDArray& u, int shards,
                                     int64_t device_limit_bytes = 0);

// Device bytes the linear stages hold for one pyramid level on the device
// (registrar.cc's engine: fixed, moving, warped, dL/dwarped and the metric's
// scratch, ~32 B per fixed voxel + 4 per moving voxel): a bounded run puts
// a level on the device for the linear stages only when it fits.
int64_t LinearLevelDeviceBytes(int64_t fixed_voxels, int64_t moving_voxels);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_OUT_OF_CORE_STAGE_H_
