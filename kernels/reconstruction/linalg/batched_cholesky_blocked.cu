// Batched Cholesky solves for 8 < n <= 128: one thread block per system, the
// lower triangle of A + lambda I in shared memory (odd leading dimension, so
// column and row walks are both free of bank conflicts), factored right-
// looking in panels of 16 columns:
//   - panel: column by column, scale below the diagonal, update the rest of
//     the panel (two barriers a column);
//   - trailing update A22 -= L21 L21^H: the panel is copied to a scratch
//     area with its rows permuted so that threads holding neighbouring 4 x 4
//     register tiles read neighbouring words, each thread accumulates its
//     tile over the 16 panel columns and writes it back once.
// Then forward and back substitution on up to 16 right-hand sides at a time
// (one barrier per row). A pivot that is not positive stops the block: info
// gets its 1-based index and X is zero.
#include <cuda_runtime.h>

#include <algorithm>
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

constexpr int kPanel = 16;  // panel width; also the most right-hand sides per pass
constexpr int kTile = 4;    // register tile edge of the trailing update

__host__ __device__ constexpr int RoundUp(int v, int m) { return (v + m - 1) / m * m; }

// Elements of the scratch area: the permuted panel or a block of B.
__host__ __device__ constexpr int WorkElements(int n) { return kPanel * RoundUp(n, kTile); }

template <typename T>
size_t SharedBytes(int n) {
  return (static_cast<size_t>(n) * (n | 1) + WorkElements(n)) * sizeof(T) + n * sizeof(float);
}

template <typename T>
__global__ void BlockedHpdSolveKernel(const T* __restrict__ a, const T* b, T* x, int* __restrict__ info, int n,
                                      int nrhs, float lambda) {
  extern __shared__ float4 shared[];  // float4: 16-byte alignment for any T
  const int ld = n | 1;
  T* sa = reinterpret_cast<T*>(shared);
  T* work = sa + n * ld;
  float* dinv = reinterpret_cast<float*>(work + WorkElements(n));
  const int tid = threadIdx.x;
  const int threads = blockDim.x;
  const int64_t sys = blockIdx.x;

  const T* ga = a + sys * n * n;
  for (int idx = tid; idx < n * n; idx += threads) {  // lower triangle, coalesced by columns
    const int c = idx / n;
    const int r = idx - c * n;
    if (r >= c) sa[r + c * ld] = r == c ? AddReal(ga[idx], lambda) : ga[idx];
  }
  __syncthreads();

  // Every thread reads the same pivot after a barrier, so `fail` and the
  // breaks below are uniform across the block.
  int fail = 0;
  for (int j0 = 0; j0 < n; j0 += kPanel) {
    const int j1 = min(j0 + kPanel, n);
    for (int j = j0; j < j1; ++j) {
      const float d = Re(sa[j + j * ld]);
      if (!(d > 0.0f) || !isfinite(d)) {
        fail = j + 1;
        break;
      }
      const float inv = 1.0f / sqrtf(d);
      for (int i = j + 1 + tid; i < n; i += threads) sa[i + j * ld] = Scale(sa[i + j * ld], inv);
      if (tid == 0) dinv[j] = inv;
      __syncthreads();
      const int rows = n - j - 1;
      const int cols = j1 - j - 1;
      for (int idx = tid; idx < rows * cols; idx += threads) {
        const int c = j + 1 + idx / rows;
        const int i = j + 1 + idx % rows;
        if (i >= c) sa[i + c * ld] = SubMulConj(sa[i + c * ld], sa[i + j * ld], sa[c + j * ld]);
      }
      __syncthreads();
    }
    if (fail != 0) break;
    const int m = n - j1;
    if (m <= 0) break;
    const int jb = j1 - j0;
    const int tiles = (m + kTile - 1) / kTile;
    const int mp = tiles * kTile;
    // Panel rows j1.. into work[k mp + (r % kTile) tiles + r / kTile], zero-padded to mp rows.
    for (int idx = tid; idx < jb * mp; idx += threads) {
      const int k = idx / mp;
      const int r = idx - k * mp;
      work[k * mp + (r % kTile) * tiles + r / kTile] = r < m ? sa[j1 + r + (j0 + k) * ld] : Zero<T>();
    }
    __syncthreads();
    for (int tile = tid; tile < tiles * tiles; tile += threads) {
      const int ti = tile / tiles;
      const int tc = tile - ti * tiles;
      if (ti < tc) continue;  // upper triangle
      T acc[kTile][kTile];
#pragma unroll
      for (int p = 0; p < kTile; ++p) {
#pragma unroll
        for (int q = 0; q < kTile; ++q) acc[p][q] = Zero<T>();
      }
      for (int k = 0; k < jb; ++k) {
        const T* pk = work + k * mp;
        T u[kTile], v[kTile];
#pragma unroll
        for (int q = 0; q < kTile; ++q) {
          u[q] = pk[q * tiles + ti];
          v[q] = pk[q * tiles + tc];
        }
#pragma unroll
        for (int p = 0; p < kTile; ++p) {
#pragma unroll
          for (int q = 0; q < kTile; ++q) acc[p][q] = AddMulConj(acc[p][q], u[p], v[q]);
        }
      }
#pragma unroll
      for (int p = 0; p < kTile; ++p) {
#pragma unroll
        for (int q = 0; q < kTile; ++q) {
          const int i = j1 + ti * kTile + p;
          const int c = j1 + tc * kTile + q;
          if (i < n && c <= i) sa[i + c * ld] = Sub(sa[i + c * ld], acc[p][q]);
        }
      }
    }
    __syncthreads();
  }

  const T* gb = b + sys * n * nrhs;
  T* gx = x + sys * n * nrhs;
  for (int k0 = 0; k0 < nrhs; k0 += kPanel) {
    const int kc = min(kPanel, nrhs - k0);
    if (fail != 0) {
      for (int idx = tid; idx < n * kc; idx += threads) gx[k0 * n + idx] = Zero<T>();
      continue;
    }
    __syncthreads();  // work is free (panel scratch or the previous block of B)
    for (int idx = tid; idx < n * kc; idx += threads) work[idx] = gb[k0 * n + idx];
    __syncthreads();
    // L z = b: at step j row j is final up to its scale, so rows below take
    // z_j = work[j] / L_jj on the fly; the scales are applied after.
    for (int j = 0; j < n - 1; ++j) {
      const float inv = dinv[j];
      const int rows = n - j - 1;
      for (int idx = tid; idx < rows * kc; idx += threads) {
        const int k = idx / rows;
        const int i = j + 1 + (idx - k * rows);
        work[i + k * n] = SubMul(work[i + k * n], sa[i + j * ld], Scale(work[j + k * n], inv));
      }
      __syncthreads();
    }
    for (int idx = tid; idx < n * kc; idx += threads) work[idx] = Scale(work[idx], dinv[idx % n]);
    __syncthreads();
    // L^H x = z, from the bottom, the same way.
    for (int j = n - 1; j > 0; --j) {
      const float inv = dinv[j];
      for (int idx = tid; idx < j * kc; idx += threads) {
        const int k = idx / j;
        const int i = idx - k * j;
        work[i + k * n] = SubConjMul(work[i + k * n], sa[j + i * ld], Scale(work[j + k * n], inv));
      }
      __syncthreads();
    }
    for (int idx = tid; idx < n * kc; idx += threads) gx[k0 * n + idx] = Scale(work[idx], dinv[idx % n]);
  }
  if (tid == 0) info[sys] = fail;
}

int ThreadsFor(int n) { return n <= 32 ? 64 : (n <= 64 ? 128 : 256); }

template <typename D>
absl::Status Launch(const Stream& stream, const BatchedSolveShape& shape, float lambda, const D* a, const D* b, D* x,
                    int* info) {
  if (shape.batch > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("batched solve: batch ", shape.batch, " too large"));
  }
  const size_t bytes = SharedBytes<D>(shape.n);
  if (bytes > 48 * 1024) {
    int optin = 0;
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, stream.ordinal()));
    if (bytes > static_cast<size_t>(optin)) {
      return absl::ResourceExhaustedError(absl::StrCat("batched solve: n = ", shape.n, " needs ", bytes,
                                                       " bytes of shared memory per block, the GPU allows ", optin));
    }
    TESSERA_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        BlockedHpdSolveKernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
  BlockedHpdSolveKernel<D>
      <<<static_cast<unsigned>(shape.batch), ThreadsFor(shape.n), bytes, static_cast<cudaStream_t>(stream.native())>>>(
          a, b, x, info, shape.n, shape.nrhs, lambda);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("batched cholesky (blocked)");
  return absl::OkStatus();
}

}  // namespace

template <>
absl::Status SolveBlocked<float>(const Stream& stream, const BatchedSolveShape& shape, float lambda, const float* a,
                                 const float* b, float* x, int* info) {
  return Launch<float>(stream, shape, lambda, a, b, x, info);
}

template <>
absl::Status SolveBlocked<std::complex<float>>(const Stream& stream, const BatchedSolveShape& shape, float lambda,
                                               const std::complex<float>* a, const std::complex<float>* b,
                                               std::complex<float>* x, int* info) {
  return Launch<float2>(stream, shape, lambda, reinterpret_cast<const float2*>(a), reinterpret_cast<const float2*>(b),
                        reinterpret_cast<float2*>(x), info);
}

}  // namespace cuda_detail
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
