// One greedy deformable iteration of services/registration/registrar.cc
// (RunDeformableStage) on H ranks, the fixed grid, displacement, Adam moments
// and moving image all split along z:
//
//   warped = M(A x + t + u(x))             ring sampler, with dwarped/du
//   loss, dL/dwarped                       sharded LNCC or MSE
//   g = smooth(dL/dwarped * dwarped/du)     sharded Gaussian (grad sigma)
//   s = Adam(g) in voxels -> normalized    element-wise (no communication)
//   u = s + u o (x + s)                    composition: border sampling of the
//                                          local u slab (halo >= |s_z| + 1)
//   u = smooth(u)                          sharded Gaussian (warp sigma)
//
// Equal to the single-rank iteration up to float rounding (the composition
// samples the local slab, whose normalized z coordinates differ from the
// whole grid's by a scale; see sharded_greedy_step_test.cc for tolerances).
// CPU streams (the ring sampler and sharded LNCC are CPU-only for now).
#ifndef TESSERA_KERNELS_PARALLEL_SHARDED_GREEDY_STEP_H_
#define TESSERA_KERNELS_PARALLEL_SHARDED_GREEDY_STEP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/parallel/communicator.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/lncc.h"

namespace tessera {
namespace parallel {

enum class GreedyMetric { kMse, kLncc };

struct GreedyStepOptions {
  GreedyMetric metric = GreedyMetric::kLncc;
  registration::LnccOptions lncc;
  double lr_voxels = 0.5;          // RegistrationOptions::deformable_lr_voxels
  double smooth_grad_sigma = 1.0;  // voxels
  double smooth_warp_sigma = 0.5;
};

// The halo every field of the state needs for these options.
int64_t GreedyStepHalo(const GreedyStepOptions& options);

// One rank's state. Fields are local planar arrays of `layout` (halo >=
// GreedyStepHalo), in normalized units as in registrar.cc; u, m and v start
// at zero. The scratch arrays are allocated by MakeShardedGreedyState.
struct ShardedGreedyState {
  SlabLayout layout;          // fixed grid
  NDArray fixed;              // local, halos filled
  SlabLayout moving_layout;   // RingMovingLayout
  NDArray moving;             // local moving shard, overlap slice filled
  float affine[12];           // sampler affine [A | t]
  NDArray u, m, v;            // (local, 3)
  NDArray grad_u, step;       // scratch (local, 3)
  NDArray warped, grad_w;     // scratch (local)
  int64_t adam_step = 0;
};

// Allocates the fields (u, m, v zero) for `layout` on the host.
absl::StatusOr<ShardedGreedyState> MakeShardedGreedyState(const SlabLayout& layout, NDArray fixed,
                                                          const SlabLayout& moving_layout, NDArray moving,
                                                          const float affine[12]);

// Runs one iteration; returns the loss before the update (what registrar.cc
// reports for the iteration).
absl::StatusOr<double> ShardedGreedyStep(Communicator& comm, ShardedGreedyState& state,
                                         const GreedyStepOptions& options, const Stream& stream);

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_PARALLEL_SHARDED_GREEDY_STEP_H_
