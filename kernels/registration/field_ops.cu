// CUDA element-wise field operations: grid-stride loops, memory-bound.
#include "common/cuda_check.h"
#include "kernels/registration/field_ops.h"

namespace tessera {
namespace registration {
namespace cuda {
namespace {

constexpr int kThreads = 256;

int BlocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

__global__ void ScaleComponentsKernel(float* __restrict__ field, int64_t voxels, float f0, float f1, float f2) {
  const int64_t n = 3 * voxels;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) {
    const int64_t c = i / voxels;
    field[i] *= c == 0 ? f0 : (c == 1 ? f1 : f2);
  }
}

struct Mat3d {
  double m[9];
};

__global__ void MixComponentsKernel(float* __restrict__ field, int64_t voxels, Mat3d a) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < voxels; i += int64_t{gridDim.x} * kThreads) {
    const double x = field[i], y = field[voxels + i], z = field[2 * voxels + i];
    // Explicit roundings: no FMA contraction, the same results as the CPU.
    field[i] = static_cast<float>(__dadd_rn(__dadd_rn(__dmul_rn(a.m[0], x), __dmul_rn(a.m[1], y)), __dmul_rn(a.m[2], z)));
    field[voxels + i] =
        static_cast<float>(__dadd_rn(__dadd_rn(__dmul_rn(a.m[3], x), __dmul_rn(a.m[4], y)), __dmul_rn(a.m[5], z)));
    field[2 * voxels + i] =
        static_cast<float>(__dadd_rn(__dadd_rn(__dmul_rn(a.m[6], x), __dmul_rn(a.m[7], y)), __dmul_rn(a.m[8], z)));
  }
}

__global__ void AxpyKernel(float alpha, const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) {
    y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i]));  // no FMA: bit-identical to the CPU
  }
}

}  // namespace

absl::Status ScaleComponents(float* field, int64_t voxels, const std::array<float, 3>& factors, const Stream& stream) {
  ScaleComponentsKernel<<<BlocksFor(3 * voxels), kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(
      field, voxels, factors[0], factors[1], factors[2]);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ScaleComponentsKernel");
  return absl::OkStatus();
}

absl::Status MixComponents(float* field, int64_t voxels, const std::array<double, 9>& m, const Stream& stream) {
  Mat3d a;
  for (int i = 0; i < 9; ++i) a.m[i] = m[i];
  MixComponentsKernel<<<BlocksFor(voxels), kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(field, voxels, a);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("MixComponentsKernel");
  return absl::OkStatus();
}

absl::Status Axpy(float alpha, const float* x, float* y, int64_t n, const Stream& stream) {
  AxpyKernel<<<BlocksFor(n), kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(alpha, x, y, n);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("AxpyKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace registration
}  // namespace tessera
