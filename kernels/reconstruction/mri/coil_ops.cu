// CUDA coil operations: grid-stride loops over pixels / samples; coils in an
// inner loop so each thread reuses x[p] (expand) or keeps one sum (combine,
// in coil order like the CPU).
#include <cuda_runtime.h>

#include <complex>
#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/reconstruction/mri/coil_ops.h"

namespace tessera {
namespace recon {
namespace mri {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

__device__ inline float2 Mul(float2 a, float2 b) { return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }

__global__ void ExpandKernel(int coils, int64_t npix, const float2* __restrict__ maps, const float2* __restrict__ x,
                             float2* __restrict__ out) {
  for (int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x; p < npix; p += int64_t{gridDim.x} * kThreads) {
    const float2 v = x[p];
    for (int c = 0; c < coils; ++c) out[c * npix + p] = Mul(maps[c * npix + p], v);
  }
}

__global__ void CombineKernel(int coils, int64_t npix, const float2* __restrict__ maps, const float2* __restrict__ in,
                              float2* __restrict__ x) {
  for (int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x; p < npix; p += int64_t{gridDim.x} * kThreads) {
    float2 sum = make_float2(0.f, 0.f);
    for (int c = 0; c < coils; ++c) {
      const float2 s = maps[c * npix + p], v = in[c * npix + p];
      sum.x += s.x * v.x + s.y * v.y;  // conj(s) * v
      sum.y += s.x * v.y - s.y * v.x;
    }
    x[p] = sum;
  }
}

__global__ void WeightKernel(int coils, int64_t m, const float* __restrict__ w, float2* __restrict__ data) {
  for (int64_t j = blockIdx.x * int64_t{kThreads} + threadIdx.x; j < m; j += int64_t{gridDim.x} * kThreads) {
    const float wj = w[j];
    for (int c = 0; c < coils; ++c) {
      float2 v = data[c * m + j];
      v.x *= wj;
      v.y *= wj;
      data[c * m + j] = v;
    }
  }
}

}  // namespace

absl::Status ExpandCoils(const Stream& stream, int coils, int64_t npix, const std::complex<float>* maps,
                         const std::complex<float>* x, std::complex<float>* out) {
  if (npix == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  ExpandKernel<<<Blocks(npix), kThreads, 0, Native(stream)>>>(coils, npix, reinterpret_cast<const float2*>(maps),
                                                              reinterpret_cast<const float2*>(x),
                                                              reinterpret_cast<float2*>(out));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ExpandKernel");
  return absl::OkStatus();
}

absl::Status CombineCoils(const Stream& stream, int coils, int64_t npix, const std::complex<float>* maps,
                          const std::complex<float>* in, std::complex<float>* x) {
  if (npix == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  CombineKernel<<<Blocks(npix), kThreads, 0, Native(stream)>>>(coils, npix, reinterpret_cast<const float2*>(maps),
                                                               reinterpret_cast<const float2*>(in),
                                                               reinterpret_cast<float2*>(x));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("CombineKernel");
  return absl::OkStatus();
}

absl::Status WeightSamples(const Stream& stream, int coils, int64_t m, const float* weights, std::complex<float>* data) {
  if (m == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  WeightKernel<<<Blocks(m), kThreads, 0, Native(stream)>>>(coils, m, weights, reinterpret_cast<float2*>(data));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("WeightKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace mri
}  // namespace recon
}  // namespace tessera
