// The ring sampler (FFDP): the composite grid sampler out(x) = M(A x + t + u(x))
// (kernels/registration/grid_sampler.h) when the fixed grid AND the moving
// image M are both split along z over the H ranks.
//
// A warped point may land anywhere in M, so M's shards travel around the
// ring: at step t = 0..H-1 rank r holds shard (r - t) mod H, samples the
// points whose interpolation cell starts in that shard, and passes the shard
// on to rank r + 1 while it computes (a helper thread drives the transfer, so
// transfer and compute overlap). Each shard carries one overlap slice (the
// first slice of the next shard), so a cell starting in the shard has both of
// its z corners in hand: every point is interpolated completely by exactly
// one shard, with the reference's arithmetic (sampler_math.h), and the result
// equals the unsharded sampler. Points outside M follow the padding rule of
// the unsharded sampler (zeros: value 0; border: clamped position).
//
// Memory per rank: its own shard, the shard in hand and the one in flight
// (the own shard is the one in hand at step 0), plus one byte per output
// voxel naming the shard that owns its cell (computed at step 0 so later
// steps skip foreign points without recomputing them).
// Communication per call: H - 1 shifts of one shard (about N_moving / H
// floats each), i.e. (H - 1) / H of M received per rank.
//
// The backward pass needs the same cells, so the forward pass can also
// return the sampling Jacobian with respect to the voxel position,
// J_c(x) = d out(x) / d ix_c (3 planar components; d u_c in normalized units
// is J_c times (m_c - 1) / 2); then dL/du = (dL/dout * J) * (m - 1) / 2
// (ApplySampleJacobian) needs no second ring. It equals GridSampleBackward's
// grad_disp bit for bit (same products in the same order).
//
// Backends. CPU streams: host shards, the transfer on a helper thread while
// the rank's threads sample (the reference's arithmetic, grid_sampler_cpu.cc).
// CUDA streams: device shards; each step is one kernel on `stream` while the
// next shard moves on a second stream of the same GPU (comm.SendRecv on device
// memory: the in-process communicator's device-to-device copy, or NCCL), so
// transfer and compute overlap; the step ends when both are done. The device
// kernel uses the single-GPU CUDA sampler's arithmetic (grid_sampler.cu), so
// values equal the unsharded CUDA GridSample's.
#ifndef TESSERA_KERNELS_REGISTRATION_SHARDED_RING_SAMPLER_H_
#define TESSERA_KERNELS_REGISTRATION_SHARDED_RING_SAMPLER_H_

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/parallel/communicator.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/sampler_math.h"

namespace tessera {
namespace parallel {

// The layout of `rank`'s moving shard: own slices plus one overlap slice
// above (none on the last rank). Fill the overlap with HaloExchange.
absl::StatusOr<SlabLayout> RingMovingLayout(Dims3 moving_dims, int rank, int ranks);

struct RingSampleArgs {
  SlabLayout out_layout;                 // this rank's part of the fixed (output) grid; any halos
  const float* disp = nullptr;           // planar local field (out_layout.LocalShape(3)), normalized units; null = none
  const float* affine = nullptr;         // 12 host floats [A | t]; null = identity
  registration::Padding padding = registration::Padding::kZeros;
  SlabLayout moving_layout;              // RingMovingLayout of the moving image
  const float* moving = nullptr;         // local moving shard, overlap slice filled
  // The sampler's grid jitter (GridSampleArgs::grid_lo/hi, voxel_jitter_key;
  // kernels/registration/pipeline/grid_jitter.h), CPU streams only (UNIMPLEMENTED on
  // CUDA): the same points as the unsharded sampler.
  double grid_lo[3] = {-1.0, -1.0, -1.0};
  double grid_hi[3] = {1.0, 1.0, 1.0};
  uint64_t voxel_jitter_key = 0;
};

// out: local output array (out_layout.LocalShape(1)); its own slices are
// written. jacobian: optional planar local field (out_layout.LocalShape(3))
// receiving J on the own slices. Collective over `comm`.
absl::Status RingGridSample(Communicator& comm, const RingSampleArgs& args, float* out, float* jacobian,
                            const Stream& stream);

// The ring sampler's arithmetic with ONE z-window of the moving image in hand
// instead of a ring (the out-of-core stage: shards take turns on one device
// and each brings only the moving slices its warped points reach). `window`
// holds the whole image's global slices [window_z0, window_z0 + window_nz);
// the own slices of out_layout are sampled (out, and J when jacobian is not
// null), with the values RingGridSample gives. Corners outside the window
// read 0: size it with MovingWindowFor. No communication.
struct WindowSampleArgs {
  SlabLayout out_layout;
  const float* disp = nullptr;           // planar local field (out_layout.LocalShape(3)), normalized; null = none
  const float* affine = nullptr;         // 12 host floats [A | t]; null = identity
  registration::Padding padding = registration::Padding::kZeros;
  Dims3 moving_dims;                     // the whole moving image
  const float* window = nullptr;         // stream memory
  int64_t window_z0 = 0;
  int64_t window_nz = 0;
  // GridSampleArgs::grid_lo/hi and voxel_jitter_key; CPU streams only.
  double grid_lo[3] = {-1.0, -1.0, -1.0};
  double grid_hi[3] = {1.0, 1.0, 1.0};
  uint64_t voxel_jitter_key = 0;
};
absl::Status WindowGridSample(const WindowSampleArgs& args, float* out, float* jacobian, const Stream& stream);

// The moving slices [z0, z0 + nz) that every interpolation cell of the own
// slices of `out_layout` lies in, for any displacement whose normalized
// components all lie in [disp_min, disp_max] (one slice of margin for
// rounding), clamped to the image (nz >= 1).
struct MovingWindow {
  int64_t z0 = 0;
  int64_t nz = 0;
};
MovingWindow MovingWindowFor(const SlabLayout& out_layout, Dims3 moving_dims, const float affine[12],
                             double disp_min, double disp_max);

// In place on the own slices: field[c] = grad_out * field[c] * (m_c - 1) / 2
// (field holds J and becomes dL/du; m = moving_dims, the whole moving image).
absl::Status ApplySampleJacobian(const SlabLayout& layout, Dims3 moving_dims, const float* grad_out, float* field,
                                 const Stream& stream);

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_SHARDED_RING_SAMPLER_H_
