// The device half of the ring sampler (ring_sampler.cu): one launch per ring
// step samples the own output points whose cell starts in the shard in hand.
// Internal to kernels/parallel (ring_sampler.cc drives the ring).
#ifndef TESSERA_KERNELS_REGISTRATION_SHARDED_RING_SAMPLER_INTERNAL_H_
#define TESSERA_KERNELS_REGISTRATION_SHARDED_RING_SAMPLER_INTERNAL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/sampler_math.h"

namespace tessera {
namespace parallel {
namespace ring_internal {

inline constexpr uint8_t kNoOwner = 255;  // zeros padding, every corner outside: value 0

// What every step of one RingGridSample call shares (passed by value to the kernel).
struct RingStepParams {
  registration::SamplerGeometry<float> g;  // the whole output grid on the whole moving image
  float affine[12];                        // [A | t]; the identity when the caller gave none
  const float* disp = nullptr;             // local planar field or null
  int64_t disp_local_voxels = 0;           // voxels per component of the local field (and of out/jacobian)
  int64_t disp_z0 = 0;                     // global z of local slice 0 of disp/out/jacobian
  int64_t z_begin = 0;                     // own output slices [z_begin, z_begin + own_nz), global
  int64_t own_nz = 0;
  int ranks = 1;                           // the moving image's z split (SlabPartition of g.in_dims.nz)
};

#if TESSERA_WITH_CUDA
// Step with the shard of moving rank `shard_index` in hand (global slices
// [shard_z0, shard_z0 + shard_nz), overlap slice included). first: decide
// every own point's owner (owner: one byte per own voxel) and write the
// points outside the image; later steps touch only the points they own.
// out/jacobian are local arrays (jacobian may be null). Asynchronous on `stream`.
absl::Status RingSampleStepCuda(const Stream& stream, const RingStepParams& p, const float* shard, int64_t shard_z0,
                                int64_t shard_nz, int shard_index, bool first, uint8_t* owner, float* out,
                                float* jacobian);

// field[c] = grad_out * field[c] * half[c] on the own slices (device pointers).
absl::Status ApplySampleJacobianCuda(const SlabLayout& layout, const float half[3], const float* grad_out, float* field,
                                     const Stream& stream);
#endif

}  // namespace ring_internal
}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_SHARDED_RING_SAMPLER_INTERNAL_H_
