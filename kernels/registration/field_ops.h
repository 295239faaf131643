// Element-wise operations on images and planar vector fields that the
// registration pipeline strings between the fused kernels: scaling each
// component of a displacement (unit changes), accumulation, zeroing.
// CPU reference in field_ops_cpu.cc; CUDA in field_ops.cu. Arrays are float32
// in the stream's backend memory.
#ifndef TESSERA_KERNELS_REGISTRATION_FIELD_OPS_H_
#define TESSERA_KERNELS_REGISTRATION_FIELD_OPS_H_

#include <array>

#include "absl/status/status.h"
#include "common/device.h"
#include "common/ndarray.h"

namespace tessera {
namespace registration {

// field (nx, ny, nz, 3) planar: component c *= factors[c].
absl::Status ScaleComponents(NDArray& field, const std::array<float, 3>& factors, const Stream& stream);

// field (nx, ny, nz, 3) planar, in place: each voxel's vector u becomes m u
// (m row-major 3x3, evaluated in double). Unit and frame changes of a whole
// displacement field without a second field-sized buffer.
absl::Status MixComponents(NDArray& field, const std::array<double, 9>& m, const Stream& stream);

// y += alpha * x (same element count).
absl::Status Axpy(float alpha, const NDArray& x, NDArray& y, const Stream& stream);

// Every element = 0.
absl::Status FillZero(NDArray& array, const Stream& stream);

namespace cpu {
void ScaleComponents(float* field, int64_t voxels, const std::array<float, 3>& factors);
void MixComponents(float* field, int64_t voxels, const std::array<double, 9>& m);
void Axpy(float alpha, const float* x, float* y, int64_t n);
}  // namespace cpu

namespace cuda {
absl::Status ScaleComponents(float* field, int64_t voxels, const std::array<float, 3>& factors, const Stream& stream);
absl::Status MixComponents(float* field, int64_t voxels, const std::array<double, 9>& m, const Stream& stream);
absl::Status Axpy(float alpha, const float* x, float* y, int64_t n, const Stream& stream);
}  // namespace cuda

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_FIELD_OPS_H_
