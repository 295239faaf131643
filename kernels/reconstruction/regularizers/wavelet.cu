// CUDA wavelet passes: one block per line for the filter bank (the line is
// staged in shared memory so the in-place update reads old values), grid-
// stride loops for the shift copies and thresholding. Same arithmetic order
// as wavelet_cpu.cc (taps summed in index order).
#include <cuda_runtime.h>

#include <complex>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "kernels/reconstruction/regularizers/wavelet_passes.h"

namespace tessera {
namespace recon {
namespace regularizers {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;
constexpr int64_t kMaxSharedLine = 6144;  // complex values (48 KiB of shared memory)

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

struct Shift3 {
  int64_t s[3];
};

__device__ inline int64_t Wrap(int64_t i, int64_t n) { return i >= n ? i - n : i; }

__global__ void ShiftCopyKernel(Dims3 dims, Shift3 shift, bool unshift, const float2* __restrict__ src,
                                float2* __restrict__ dst) {
  const int64_t nx = dims.n[0], ny = dims.n[1], total = dims.n[0] * dims.n[1] * dims.n[2];
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t x = i % nx, y = (i / nx) % ny, z = i / (nx * ny);
    const int64_t j = Wrap(x + shift.s[0], nx) + nx * (Wrap(y + shift.s[1], ny) + ny * Wrap(z + shift.s[2], dims.n[2]));
    if (unshift) {
      dst[j] = src[i];
    } else {
      dst[i] = src[j];
    }
  }
}

__global__ void FilterAxisKernel(Dims3 dims, Dims3 block, int axis, WaveletTaps taps, bool inverse, float2* data) {
  extern __shared__ float2 line[];
  const int64_t stride[3] = {1, dims.n[0], dims.n[0] * dims.n[1]};
  const int b = axis == 0 ? 1 : 0, c = axis == 2 ? 1 : 2;
  const int64_t m = block.n[axis], half = m / 2, s = stride[axis];
  const int64_t lines = block.n[b] * block.n[c];
  for (int64_t q = blockIdx.x; q < lines; q += gridDim.x) {
    float2* p = data + (q % block.n[b]) * stride[b] + (q / block.n[b]) * stride[c];
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) line[i] = p[i * s];
    __syncthreads();
    if (!inverse) {
      for (int64_t k = threadIdx.x; k < half; k += blockDim.x) {
        float2 lo = make_float2(0, 0), hi = make_float2(0, 0);
        for (int j = 0; j < taps.taps; ++j) {
          int64_t idx = 2 * k + j;
          if (idx >= m) idx -= m;
          if (idx >= m) idx %= m;
          const float2 v = line[idx];
          lo.x += taps.h[j] * v.x;
          lo.y += taps.h[j] * v.y;
          hi.x += taps.g[j] * v.x;
          hi.y += taps.g[j] * v.y;
        }
        p[k * s] = lo;
        p[(half + k) * s] = hi;
      }
    } else {
      for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
        float2 sum = make_float2(0, 0);
        for (int j = static_cast<int>(i % 2); j < taps.taps; j += 2) {
          const int64_t k = ((i - j) % m + m) % m / 2;
          const float2 a = line[k], d = line[half + k];
          sum.x += taps.h[j] * a.x + taps.g[j] * d.x;
          sum.y += taps.h[j] * a.y + taps.g[j] * d.y;
        }
        p[i * s] = sum;
      }
    }
    __syncthreads();  // the next line reuses the shared buffer
  }
}

__global__ void SoftThresholdKernel(Dims3 dims, Dims3 coarse, float threshold, float2* data) {
  const int64_t nx = dims.n[0], ny = dims.n[1], total = dims.n[0] * dims.n[1] * dims.n[2];
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    const int64_t x = i % nx, y = (i / nx) % ny, z = i / (nx * ny);
    if (x < coarse.n[0] && y < coarse.n[1] && z < coarse.n[2]) continue;
    const float2 v = data[i];
    const float mag = sqrtf(v.x * v.x + v.y * v.y);
    const float f = mag > threshold ? (mag - threshold) / mag : 0.f;
    data[i] = make_float2(v.x * f, v.y * f);
  }
}

}  // namespace

absl::Status ShiftCopy(const Stream& stream, const Dims3& dims, const int64_t shift[3], bool unshift,
                       const std::complex<float>* src, std::complex<float>* dst) {
  const int64_t total = dims.n[0] * dims.n[1] * dims.n[2];
  const Shift3 s{{shift[0], shift[1], shift[2]}};
  ShiftCopyKernel<<<Blocks(total), kThreads, 0, Native(stream)>>>(dims, s, unshift,
                                                                 reinterpret_cast<const float2*>(src),
                                                                 reinterpret_cast<float2*>(dst));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("wavelet ShiftCopyKernel");
  return absl::OkStatus();
}

absl::Status FilterAxis(const Stream& stream, const Dims3& dims, const Dims3& block, int axis,
                        const WaveletTaps& taps, bool inverse, std::complex<float>* data) {
  const int64_t m = block.n[axis];
  if (m > kMaxSharedLine) {
    return absl::InvalidArgumentError(
        absl::StrCat("wavelet (CUDA): a band of ", m, " values along an axis exceeds ", kMaxSharedLine));
  }
  const int b = axis == 0 ? 1 : 0, c = axis == 2 ? 1 : 2;
  const int64_t lines = block.n[b] * block.n[c];
  const int threads = m >= 256 ? 256 : (m >= 64 ? 64 : 32);
  const int blocks = static_cast<int>(lines < kMaxBlocks ? lines : kMaxBlocks);
  FilterAxisKernel<<<blocks, threads, m * sizeof(float2), Native(stream)>>>(dims, block, axis, taps, inverse,
                                                                            reinterpret_cast<float2*>(data));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("wavelet FilterAxisKernel");
  return absl::OkStatus();
}

absl::Status SoftThresholdOutside(const Stream& stream, const Dims3& dims, const Dims3& coarse, float threshold,
                                  std::complex<float>* data) {
  const int64_t total = dims.n[0] * dims.n[1] * dims.n[2];
  SoftThresholdKernel<<<Blocks(total), kThreads, 0, Native(stream)>>>(dims, coarse, threshold,
                                                                     reinterpret_cast<float2*>(data));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("wavelet SoftThresholdKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera
