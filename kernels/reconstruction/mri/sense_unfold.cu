// CUDA SENSE steps: one thread per aliased pixel; the reduction factor is a
// template parameter so S^H S (R (R + 1) / 2 complex sums) and S^H a stay in
// registers. Consecutive threads read consecutive pixels of every map.
#include <cuComplex.h>
#include <cuda_runtime.h>

#include <complex>
#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/reconstruction/mri/sense_geometry.h"
#include "kernels/reconstruction/mri/sense_unfold.h"

namespace tessera {
namespace recon {
namespace mri {
namespace cuda {
namespace {

constexpr int kThreads = 128;

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

FoldIndex IndexOf(const SenseShape& shape) {
  return {shape.nx, (shape.axis == 0 ? shape.nx : shape.ny) / shape.reduction, shape.axis};
}

// conj(a) * b
__device__ inline float2 ConjMul(float2 a, float2 b) {
  return make_float2(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x);
}

template <int R>
__global__ void __launch_bounds__(kThreads)
    NormalEquationsKernel(FoldIndex fold, int64_t batch, int64_t npix, int coils, const float2* __restrict__ maps,
                          const float2* __restrict__ aliased, float2* __restrict__ normal, float2* __restrict__ rhs) {
  const int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (p >= batch) return;
  float2 a[R * (R + 1) / 2], b[R];
#pragma unroll
  for (int k = 0; k < R * (R + 1) / 2; ++k) a[k] = make_float2(0.f, 0.f);
#pragma unroll
  for (int k = 0; k < R; ++k) b[k] = make_float2(0.f, 0.f);
  int64_t pixel[R];
#pragma unroll
  for (int r = 0; r < R; ++r) pixel[r] = fold.Pixel(p, r);
  for (int c = 0; c < coils; ++c) {
    float2 s[R];
#pragma unroll
    for (int r = 0; r < R; ++r) s[r] = maps[pixel[r] + npix * c];
    const float2 y = aliased[p + batch * c];
    int k = 0;
#pragma unroll
    for (int col = 0; col < R; ++col) {
#pragma unroll
      for (int row = col; row < R; ++row, ++k) {
        const float2 t = ConjMul(s[row], s[col]);
        a[k].x += t.x;
        a[k].y += t.y;
      }
      const float2 t = ConjMul(s[col], y);
      b[col].x += t.x;
      b[col].y += t.y;
    }
  }
  int k = 0;
#pragma unroll
  for (int col = 0; col < R; ++col) {
#pragma unroll
    for (int row = col; row < R; ++row, ++k) normal[p * R * R + row + R * col] = a[k];
    rhs[p * R + col] = b[col];
  }
}

__global__ void ScatterKernel(FoldIndex fold, int64_t batch, int reduction, const float2* __restrict__ solution,
                              float2* __restrict__ image) {
  const int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (p >= batch) return;
  for (int r = 0; r < reduction; ++r) image[fold.Pixel(p, r)] = solution[p * reduction + r];
}

template <int R>
absl::Status LaunchNormal(const Stream& stream, const SenseShape& shape, const float2* maps, const float2* aliased,
                          float2* normal, float2* rhs) {
  const int64_t batch = shape.aliased_pixels();
  NormalEquationsKernel<R><<<Blocks(batch), kThreads, 0, Native(stream)>>>(
      IndexOf(shape), batch, shape.nx * shape.ny, shape.coils, maps, aliased, normal, rhs);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SENSE NormalEquationsKernel");
  return absl::OkStatus();
}

}  // namespace

absl::Status FormSenseNormalEquations(const Stream& stream, const SenseShape& shape, const std::complex<float>* maps,
                                      const std::complex<float>* aliased, std::complex<float>* normal,
                                      std::complex<float>* rhs) {
  if (shape.aliased_pixels() == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const auto* m = reinterpret_cast<const float2*>(maps);
  const auto* a = reinterpret_cast<const float2*>(aliased);
  auto* n = reinterpret_cast<float2*>(normal);
  auto* b = reinterpret_cast<float2*>(rhs);
  switch (shape.reduction) {
    case 1: return LaunchNormal<1>(stream, shape, m, a, n, b);
    case 2: return LaunchNormal<2>(stream, shape, m, a, n, b);
    case 3: return LaunchNormal<3>(stream, shape, m, a, n, b);
    case 4: return LaunchNormal<4>(stream, shape, m, a, n, b);
    case 5: return LaunchNormal<5>(stream, shape, m, a, n, b);
    case 6: return LaunchNormal<6>(stream, shape, m, a, n, b);
    case 7: return LaunchNormal<7>(stream, shape, m, a, n, b);
    case 8: return LaunchNormal<8>(stream, shape, m, a, n, b);
    default: return absl::InvalidArgumentError("SENSE: reduction out of range");
  }
}

absl::Status ScatterSenseSolution(const Stream& stream, const SenseShape& shape, const std::complex<float>* solution,
                                  std::complex<float>* image) {
  const int64_t batch = shape.aliased_pixels();
  if (batch == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  ScatterKernel<<<Blocks(batch), kThreads, 0, Native(stream)>>>(
      IndexOf(shape), batch, shape.reduction, reinterpret_cast<const float2*>(solution),
      reinterpret_cast<float2*>(image));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SENSE ScatterKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace mri
}  // namespace recon
}  // namespace tessera
