// Batched Cholesky solves for n <= 8: one thread per system, the factor L
// (packed lower triangle) and 1 / diag(L) in registers, every loop unrolled
// for the compile-time N. A block of 64 systems first copies its A matrices
// (contiguous in memory) into shared memory with coalesced loads, each thread
// then reads its own; B and X take the same path, up to N right-hand sides at
// a time. The per-system stride in shared memory is odd (in 32-bit words),
// so the threads' reads fall in different banks.
#include <cuda_runtime.h>

#include <complex>

#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/reconstruction/linalg/batched_cholesky_cuda.h"
#include "kernels/reconstruction/linalg/hpd_scalar.cuh"

namespace tessera {
namespace recon {
namespace linalg {
namespace cuda_detail {
namespace {

constexpr int kSystemsPerBlock = 64;

// Index of L(r, c), r >= c, in the packed lower triangle (column by column).
template <int N>
__host__ __device__ constexpr int Packed(int r, int c) {
  return c * N - c * (c - 1) / 2 + (r - c);
}

template <typename T, int N>
__global__ void __launch_bounds__(kSystemsPerBlock)
    SmallHpdSolveKernel(const T* __restrict__ a, const T* b, T* x, int* __restrict__ info, int64_t batch, int nrhs,
                        float lambda) {
  constexpr int kWords = sizeof(T) / sizeof(float);
  constexpr int kMatWords = N * N * kWords;
  constexpr int kStride = kMatWords | 1;
  __shared__ float stage[kSystemsPerBlock * kStride];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kSystemsPerBlock;
  const int count = static_cast<int>(min(static_cast<int64_t>(kSystemsPerBlock), batch - first));
  const int t = threadIdx.x;

  const float* ga = reinterpret_cast<const float*>(a) + first * kMatWords;
  for (int i = t; i < count * kMatWords; i += kSystemsPerBlock) {
    const int s = i / kMatWords;
    stage[s * kStride + (i - s * kMatWords)] = ga[i];
  }
  __syncthreads();

  T l[N * (N + 1) / 2];
  float dinv[N];
  int fail = 0;
  if (t < count) {
    const float* mine = stage + t * kStride;
#pragma unroll
    for (int c = 0; c < N; ++c) {
#pragma unroll
      for (int r = c; r < N; ++r) l[Packed<N>(r, c)] = LoadWords<T>(mine + (r + c * N) * kWords);
    }
#pragma unroll
    for (int j = 0; j < N; ++j) {
      float d = Re(l[Packed<N>(j, j)]) + lambda;
#pragma unroll
      for (int k = 0; k < j; ++k) d -= Abs2(l[Packed<N>(j, k)]);
      if (!(d > 0.0f) || !isfinite(d)) {
        if (fail == 0) fail = j + 1;
        d = 1.0f;  // keep going with finite numbers; the result is discarded
      }
      dinv[j] = 1.0f / sqrtf(d);
#pragma unroll
      for (int i = j + 1; i < N; ++i) {
        T acc = l[Packed<N>(i, j)];
#pragma unroll
        for (int k = 0; k < j; ++k) acc = SubMulConj(acc, l[Packed<N>(i, k)], l[Packed<N>(j, k)]);
        l[Packed<N>(i, j)] = Scale(acc, dinv[j]);
      }
    }
  }

  const float* gb = reinterpret_cast<const float*>(b);
  float* gx = reinterpret_cast<float*>(x);
  for (int k0 = 0; k0 < nrhs; k0 += N) {
    const int kc = min(N, nrhs - k0);
    const int words = N * kc * kWords;  // <= kMatWords
    __syncthreads();                    // the stage is free again
    for (int i = t; i < count * words; i += kSystemsPerBlock) {
      const int s = i / words;
      const int w = i - s * words;
      stage[s * kStride + w] = gb[((first + s) * N * nrhs + static_cast<int64_t>(k0) * N) * kWords + w];
    }
    __syncthreads();
    if (t < count) {
      float* mine = stage + t * kStride;
      for (int k = 0; k < kc; ++k) {
        T z[N];
#pragma unroll
        for (int i = 0; i < N; ++i) {  // L z = b
          T acc = LoadWords<T>(mine + (i + k * N) * kWords);
#pragma unroll
          for (int m = 0; m < i; ++m) acc = SubMul(acc, l[Packed<N>(i, m)], z[m]);
          z[i] = Scale(acc, dinv[i]);
        }
#pragma unroll
        for (int i = N - 1; i >= 0; --i) {  // L^H x = z
          T acc = z[i];
#pragma unroll
          for (int m = i + 1; m < N; ++m) acc = SubConjMul(acc, l[Packed<N>(m, i)], z[m]);
          z[i] = Scale(acc, dinv[i]);
        }
#pragma unroll
        for (int i = 0; i < N; ++i) StoreWords(mine + (i + k * N) * kWords, fail != 0 ? Zero<T>() : z[i]);
      }
    }
    __syncthreads();
    for (int i = t; i < count * words; i += kSystemsPerBlock) {
      const int s = i / words;
      const int w = i - s * words;
      gx[((first + s) * N * nrhs + static_cast<int64_t>(k0) * N) * kWords + w] = stage[s * kStride + w];
    }
  }
  if (t < count) info[first + t] = fail;
}

template <typename D, int N>
absl::Status Launch(const Stream& stream, const BatchedSolveShape& shape, float lambda, const D* a, const D* b, D* x,
                    int* info) {
  const int64_t blocks = (shape.batch + kSystemsPerBlock - 1) / kSystemsPerBlock;
  if (blocks > 0x7fffffff)
    return absl::InvalidArgumentError(absl::StrCat("batched solve: batch ", shape.batch, " too large"));
  SmallHpdSolveKernel<D, N>
      <<<static_cast<unsigned>(blocks), kSystemsPerBlock, 0, static_cast<cudaStream_t>(stream.native())>>>(
          a, b, x, info, shape.batch, shape.nrhs, lambda);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("batched cholesky (small)");
  return absl::OkStatus();
}

template <typename D>
absl::Status Dispatch(const Stream& stream, const BatchedSolveShape& shape, float lambda, const D* a, const D* b, D* x,
                      int* info) {
  switch (shape.n) {
    case 1:
      return Launch<D, 1>(stream, shape, lambda, a, b, x, info);
    case 2:
      return Launch<D, 2>(stream, shape, lambda, a, b, x, info);
    case 3:
      return Launch<D, 3>(stream, shape, lambda, a, b, x, info);
    case 4:
      return Launch<D, 4>(stream, shape, lambda, a, b, x, info);
    case 5:
      return Launch<D, 5>(stream, shape, lambda, a, b, x, info);
    case 6:
      return Launch<D, 6>(stream, shape, lambda, a, b, x, info);
    case 7:
      return Launch<D, 7>(stream, shape, lambda, a, b, x, info);
    case 8:
      return Launch<D, 8>(stream, shape, lambda, a, b, x, info);
  }
  return absl::InvalidArgumentError(absl::StrCat("batched solve: n = ", shape.n, " is not in [1, 8]"));
}

}  // namespace

template <>
absl::Status SolveSmall<float>(const Stream& stream, const BatchedSolveShape& shape, float lambda, const float* a,
                               const float* b, float* x, int* info) {
  return Dispatch<float>(stream, shape, lambda, a, b, x, info);
}

template <>
absl::Status SolveSmall<std::complex<float>>(const Stream& stream, const BatchedSolveShape& shape, float lambda,
                                             const std::complex<float>* a, const std::complex<float>* b,
                                             std::complex<float>* x, int* info) {
  return Dispatch<float2>(stream, shape, lambda, reinterpret_cast<const float2*>(a), reinterpret_cast<const float2*>(b),
                          reinterpret_cast<float2*>(x), info);
}

}  // namespace cuda_detail
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
