// One greedy deformable iteration of the registrar's lean stage
// (kernels/registration/pipeline/deformable_stage.h) on H ranks, the fixed grid,
// displacement, Adam moments and (ring mode) the moving image split along z.
// This is THE sharded loop body: services/registration/sharded_deformable_stage
// runs it level by level, the tests and benches run it directly.
//
//   warped = M(A x + t + u(x))             ring sampler (with dwarped/du), or the
//                                          grid sampler on the whole moving image
//   loss, dL/dwarped                       sharded LNCC, MSE or Mattes MI
//   g = smooth(dL/dwarped * dwarped/du)     sharded Gaussian (grad sigma)
//   s = rule(g): normalized                 -lr g / max|g| (max all-reduced over ranks)
//                adam                       element-wise Adam (no communication)
//   u = s + u o (x + s)                    kernels/registration/lean_compose.h in place
//                                          on the local slab (halo exchanged first;
//                                          halo >= GreedyStepBoundVoxels + 1)
//   u = smooth(u)                          sharded Gaussian (warp sigma)
//
// CPU streams: equal to the single-rank lean iteration bit for bit, for any
// number of ranks (issue 39: per-slice sums of the losses, exact MI
// histograms, the sampler's backward products in the reference's order;
// sharded_greedy_step_test.cc). CUDA streams: up to float rounding of the
// reductions (see sharded_ops.h for tolerances).
//
// Backends: CPU and CUDA streams (several shards on one GPU, each rank with
// its own stream, or one rank per GPU), every metric, three samplers (the
// ring, the whole moving image, or a z-window of it: ring_sampler.h).
//
// Phases. The iteration is five phases (below) so that shards can also take
// turns on one device (kernels/registration/pipeline/out_of_core_stage.h): each
// phase starts with the halo exchanges of the arrays it reads and otherwise
// computes locally, ending at most with all-reduces of a few values. A
// caller that fills those halos itself (from host storage) and reduces the
// values itself runs a phase with a StagedCommunicator (staged_communicator.h).
//   sample:          warped (own slices; ring/window: J into grad_u)
//   metric:          [halos of warped] loss (all-reduced), dL/dwarped, dL/du into grad_u
//   smooth gradient: [halos of grad_u] smoothing, halos zeroed, normalized:
//                    largest_grad = max |grad_u| all-reduced
//   compose:         [halos of u] the step (largest_grad or Adam) and composition
//   smooth field:    [halos of u] warp smoothing
#ifndef TESSERA_KERNELS_REGISTRATION_SHARDED_SHARDED_GREEDY_STEP_H_
#define TESSERA_KERNELS_REGISTRATION_SHARDED_SHARDED_GREEDY_STEP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/parallel/communicator.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace parallel {

enum class GreedyMetric { kMse, kLncc, kMi };
// RegistrationOptions::deformable_step: "normalized" or "adam".
enum class GreedyRule { kNormalized, kAdam };

struct GreedyStepOptions {
  GreedyMetric metric = GreedyMetric::kLncc;
  registration::LnccOptions lncc;
  registration::MattesMiOptions mi;
  // Adam is what the traffic model (multi_gpu_model.h) counts; the registrar's
  // default is normalized (one more all-reduce of one value per iteration).
  GreedyRule rule = GreedyRule::kAdam;
  double lr_voxels = 0.5;          // RegistrationOptions::deformable_lr_voxels
  double smooth_grad_sigma = 1.0;  // voxels
  double smooth_warp_sigma = 0.5;
  // Voxels per composition slab (registration::GreedyStep::slab_depth, at
  // least the halo); 0 = ComposeSlabDepth's ~2^21. The composition workspace
  // holds two such slabs: the out-of-core stage asks for fewer, because for
  // thin shards of small planes 2^21 voxels is the whole local field twice.
  int64_t compose_slab_voxels = 0;
};

// The largest step (voxels) the rule can take at any iteration
// (GreedyStepBoundVoxels, over every Adam step number).
double GreedyStepBoundSup(const GreedyStepOptions& options);

// The halo every field of the state needs for these options: smoothing, the
// metric's windows and the composition's reach (floor(bound) + 1).
int64_t GreedyStepHalo(const GreedyStepOptions& options);

// One rank's state. Fields are local planar arrays of `layout` (halo >=
// GreedyStepHalo) in the stream's memory, u in normalized units as in the
// registrar; u (and m, v with Adam) start at zero and may be overwritten by
// the caller (a level initialised from the coarser one).
struct ShardedGreedyState {
  SlabLayout layout;          // fixed grid
  NDArray fixed;              // local, halos filled
  // The moving image: a ring shard (moving_layout = RingMovingLayout) or,
  // with moving_whole, the whole image (moving_layout unused), which ranks on
  // one device may share (it is only read).
  SlabLayout moving_layout;
  NDArray moving;
  bool moving_whole = false;
  // Or (moving_window) the whole image's global slices [moving_z0, moving_z0
  // + moving.dim(2)) with the window sampler (the out-of-core stage).
  bool moving_window = false;
  int64_t moving_z0 = 0;
  // The normalized rule's all-reduced max |smoothed dL/du| (smooth gradient
  // phase -> compose phase).
  double largest_grad = 0;
  // The sampler's grid jitter for the next sample phase (the ring's
  // RingSampleArgs::grid_lo/hi, voxel_jitter_key, or the whole moving image's
  // GridSampleArgs); the caller moves it and fills `fixed` with the fixed
  // image on the same points.
  double grid_lo[3] = {-1.0, -1.0, -1.0};
  double grid_hi[3] = {1.0, 1.0, 1.0};
  uint64_t voxel_jitter_key = 0;
  float affine[12];           // sampler affine [A | t], host
  NDArray affine_stream;      // the same in stream memory (whole-moving sampler)
  NDArray u, m, v;            // (local, 3); m, v empty unless Adam
  NDArray grad_u;             // (local, 3): sampling Jacobian (ring), then dL/du
  NDArray warped, grad_w;     // (local): warped image, dL/dwarped
  int64_t adam_step = 0;
  // Scratch of the sampler's backward pass and of the composition (held so
  // iterations do not reallocate; pointers keep the state movable).
  std::unique_ptr<registration::Workspace> sampler_workspace = std::make_unique<registration::Workspace>();
  std::unique_ptr<registration::Workspace> compose_workspace = std::make_unique<registration::Workspace>();
};

// Allocates the fields for `layout` in `stream`'s memory with a ring moving
// shard (RingMovingLayout, in the stream's memory).
absl::StatusOr<ShardedGreedyState> MakeShardedGreedyState(const SlabLayout& layout, NDArray fixed,
                                                          const SlabLayout& moving_layout, NDArray moving,
                                                          const float affine[12],
                                                          const GreedyStepOptions& options = GreedyStepOptions(),
                                                          const Stream& stream = Stream::Cpu());
// The same with the whole moving image on this rank.
absl::StatusOr<ShardedGreedyState> MakeShardedGreedyStateWholeMoving(const SlabLayout& layout, NDArray fixed,
                                                                     NDArray moving, const float affine[12],
                                                                     const GreedyStepOptions& options,
                                                                     const Stream& stream);

// The first half of an iteration (sample + metric phases): warp and the
// global loss (identical on every rank), dL/du in state.grad_u. Collective.
absl::StatusOr<double> ShardedGreedyEvaluate(Communicator& comm, ShardedGreedyState& state,
                                             const GreedyStepOptions& options, const Stream& stream);

// The second half, after ShardedGreedyEvaluate (smooth gradient, compose,
// smooth field phases): smoothing, the step and the composition, warp
// smoothing. Collective.
absl::Status ShardedGreedyUpdate(Communicator& comm, ShardedGreedyState& state, const GreedyStepOptions& options,
                                 const Stream& stream);

// The phases (see the top of this file). Collective over `comm`.
absl::Status GreedySamplePhase(Communicator& comm, ShardedGreedyState& state, const GreedyStepOptions& options,
                               const Stream& stream);
absl::StatusOr<double> GreedyMetricPhase(Communicator& comm, ShardedGreedyState& state,
                                         const GreedyStepOptions& options, const Stream& stream);
absl::Status GreedySmoothGradientPhase(Communicator& comm, ShardedGreedyState& state,
                                       const GreedyStepOptions& options, const Stream& stream);
absl::Status GreedyComposePhase(Communicator& comm, ShardedGreedyState& state, const GreedyStepOptions& options,
                                const Stream& stream);
absl::Status GreedySmoothFieldPhase(Communicator& comm, ShardedGreedyState& state, const GreedyStepOptions& options,
                                    const Stream& stream);
// MI's metric phase needs the all-reduced joint histogram before any
// gradient: a caller that reduces values itself runs this first (the
// histogram only, one all-reduce of B^2 values) and hands the sum to the
// metric phase's all-reduce. True for kMi.
bool GreedyMetricNeedsPrepass(const GreedyStepOptions& options);
absl::Status GreedyMetricPrepass(Communicator& comm, ShardedGreedyState& state, const GreedyStepOptions& options,
                                 const Stream& stream);

// The loss from the metric phase's first all-reduce summed by the caller
// (LNCC, MSE: the per-slice sums, nz values, on either backend, or their
// sum, 1 value; what ShardedLncc/ShardedMse turn into the loss). MI's loss comes out of the metric phase itself (its
// histogram is handed in): INVALID_ARGUMENT.
absl::StatusOr<double> GreedyLossFromReducedSum(const GreedyStepOptions& options, const std::vector<double>& reduced,
                                                Dims3 global);

// Evaluate then Update; returns the loss before the update (what the
// registrar reports for the iteration).
absl::StatusOr<double> ShardedGreedyStep(Communicator& comm, ShardedGreedyState& state,
                                         const GreedyStepOptions& options, const Stream& stream);

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_SHARDED_SHARDED_GREEDY_STEP_H_
