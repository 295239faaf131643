// CUDA beamforming steps (beamform_kernels.h), same formulas as
// beamform_cpu.cc through delay_model.h.
//
//   DelayAndSum      one thread per pixel, channel loop, transmit loop inside;
//                    threads of a warp are consecutive depths of one column,
//                    so they read neighbouring samples of one channel line.
//   DelayedChannels  32 pixels x 32 channels per block, transposed through
//                    shared memory so X[c + N q] is written channel-fastest.
//   Covariance       one block per pixel, one thread per diagonal of R
//                    (sliding window over subarrays, double accumulation),
//                    the pixel's 2K+1 channel vectors staged in shared memory.
//   ApplyWeights     one thread per pixel.
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "kernels/reconstruction/ultrasound/beamform_kernels.h"

namespace tessera {
namespace recon {
namespace ultrasound {
namespace detail {
namespace cuda {
namespace {

struct Sm90Policy {
  static constexpr int kDasThreads = 128;        // depths per block
  static constexpr int kTile = 32;               // pixels and channels per DelayedChannels block
  static constexpr int kTileRows = 8;            // thread rows of that block (4 channels each)
  static constexpr int kElementwiseThreads = 256;
};
static_assert(Sm90Policy::kTile % Sm90Policy::kTileRows == 0, "tile rows must divide the tile");

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

// ---------------------------------------------------------------------------
// Delay-and-sum
// ---------------------------------------------------------------------------
__global__ void __launch_bounds__(Sm90Policy::kDasThreads)
    DasKernel(BeamformParams p, const CFloat* __restrict__ data, CFloat* __restrict__ image) {
  const int iz = blockIdx.x * blockDim.x + threadIdx.x;
  const int ix = blockIdx.y;
  if (iz >= p.nz) return;
  const double x = p.x0 + ix * p.dx, z = p.z0 + iz * p.dz;
  CFloat acc = {0.0f, 0.0f};
  float weight_sum = 0.0f;
  for (int c = 0; c < p.channels; ++c) {
    const float w = ReceiveWeight(p, c, x, z);
    if (w == 0.0f) continue;
    acc = CAdd(acc, CScale(CompoundedChannel(data, p, c, x, z), w));
    weight_sum += w;
  }
  image[ix + static_cast<int64_t>(p.nx) * iz] = weight_sum > 0 ? CScale(acc, 1.0f / weight_sum) : CFloat{0.0f, 0.0f};
}

// ---------------------------------------------------------------------------
// Minimum variance
// ---------------------------------------------------------------------------
__global__ void __launch_bounds__(Sm90Policy::kTile* Sm90Policy::kTileRows)
    DelayedChannelsKernel(BeamformParams p, MvChunk chunk, const CFloat* __restrict__ data, CFloat* __restrict__ x) {
  constexpr int kTile = Sm90Policy::kTile, kRows = Sm90Policy::kTileRows;
  __shared__ CFloat tile[kTile][kTile + 1];  // [channel][pixel]
  const int64_t pixels = chunk.pixels(p);
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int c0 = blockIdx.y * kTile;
  {
    const int64_t q = q0 + threadIdx.x;
    if (q < pixels) {
      const int iz = static_cast<int>(q % p.nz);
      const int64_t ix = chunk.col_begin + q / p.nz;
      const double px = p.x0 + ix * p.dx, pz = p.z0 + iz * p.dz;
      for (int k = threadIdx.y; k < kTile; k += kRows) {
        const int c = c0 + k;
        if (c < p.channels) tile[k][threadIdx.x] = CompoundedChannel(data, p, c, px, pz);
      }
    }
  }
  __syncthreads();
  const int c = c0 + threadIdx.x;
  if (c >= p.channels) return;
  for (int k = threadIdx.y; k < kTile; k += kRows) {
    const int64_t q = q0 + k;
    if (q < pixels) x[c + static_cast<int64_t>(p.channels) * q] = tile[threadIdx.x][k];
  }
}

// Dynamic shared memory: (2K+1) x N CFloat rows.
__global__ void CovarianceKernel(BeamformParams p, MvChunk chunk, const CFloat* __restrict__ x,
                                 CFloat* __restrict__ r) {
  extern __shared__ CFloat rows[];
  __shared__ double diagonal[kMaxCovarianceSize];
  const int n = p.channels, l = chunk.subarray, m = n - l + 1;
  const int64_t q = blockIdx.x;
  const int iz = static_cast<int>(q % p.nz);
  const int k_lo = iz - chunk.temporal_half < 0 ? -iz : -chunk.temporal_half;
  const int k_hi = iz + chunk.temporal_half >= p.nz ? p.nz - 1 - iz : chunk.temporal_half;
  const int nrows = k_hi - k_lo + 1;
  const CFloat* first = x + (q + k_lo) * n;  // the rows are contiguous in X
  for (int i = threadIdx.x; i < nrows * n; i += blockDim.x) rows[i] = first[i];
  __syncthreads();

  CFloat* rq = r + q * l * l;
  const int d = threadIdx.x;
  if (d < l) {
    double sr = 0, si = 0;
    for (int k = 0; k < nrows; ++k) {
      const CFloat* xk = rows + k * n;
      for (int i = 0; i < m; ++i) {
        const CFloat a = xk[i + d], b = xk[i];  // a conj(b)
        sr += static_cast<double>(a.re) * b.re + static_cast<double>(a.im) * b.im;
        si += static_cast<double>(a.im) * b.re - static_cast<double>(a.re) * b.im;
      }
    }
    for (int j = 0; j + d < l; ++j) {
      if (j > 0) {
        for (int k = 0; k < nrows; ++k) {
          const CFloat* xk = rows + k * n;
          const CFloat a = xk[j - 1 + m + d], b = xk[j - 1 + m];
          const CFloat e = xk[j - 1 + d], f = xk[j - 1];
          sr += static_cast<double>(a.re) * b.re + static_cast<double>(a.im) * b.im;
          si += static_cast<double>(a.im) * b.re - static_cast<double>(a.re) * b.im;
          sr -= static_cast<double>(e.re) * f.re + static_cast<double>(e.im) * f.im;
          si -= static_cast<double>(e.im) * f.re - static_cast<double>(e.re) * f.im;
        }
      }
      if (d == 0) {
        diagonal[j] = sr;
      } else {
        rq[j + d + static_cast<int64_t>(j) * l] = {static_cast<float>(sr), static_cast<float>(si)};
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double trace = 0;
    for (int j = 0; j < l; ++j) trace += diagonal[j];
    const double load = chunk.loading * trace / l;
    for (int j = 0; j < l; ++j) rq[j + static_cast<int64_t>(j) * l] = {static_cast<float>(diagonal[j] + load), 0.0f};
  }
}

__global__ void FillOnesKernel(int64_t count, CFloat* v) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    v[i] = {1.0f, 0.0f};
  }
}

__global__ void ApplyWeightsKernel(BeamformParams p, MvChunk chunk, const CFloat* __restrict__ x,
                                   const CFloat* __restrict__ v, const int* __restrict__ info,
                                   CFloat* __restrict__ image) {
  const int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (q >= chunk.pixels(p)) return;
  const int n = p.channels, l = chunk.subarray, m = n - l + 1;
  const CFloat* xq = x + q * n;
  const CFloat* vq = v + q * l;
  double norm = 0;
  for (int i = 0; i < l; ++i) norm += vq[i].re;
  const bool adaptive = info[q] == 0 && isfinite(norm) && norm > 0;
  double wr = 0, wi = 0;  // the sliding subarray sum
  for (int i = 0; i < m; ++i) {
    wr += xq[i].re;
    wi += xq[i].im;
  }
  double yr = 0, yi = 0;
  for (int i = 0; i < l; ++i) {
    if (i > 0) {
      wr += static_cast<double>(xq[i - 1 + m].re) - xq[i - 1].re;
      wi += static_cast<double>(xq[i - 1 + m].im) - xq[i - 1].im;
    }
    const double cr = adaptive ? vq[i].re / norm : 1.0 / l;
    const double ci = adaptive ? vq[i].im / norm : 0.0;
    yr += cr * wr + ci * wi;  // conj(w) * window
    yi += cr * wi - ci * wr;
  }
  const int iz = static_cast<int>(q % p.nz);
  const int64_t ix = chunk.col_begin + q / p.nz;
  image[ix + static_cast<int64_t>(p.nx) * iz] = {static_cast<float>(yr / m), static_cast<float>(yi / m)};
}

int Blocks(int64_t n, int threads) { return static_cast<int>((n + threads - 1) / threads); }

}  // namespace

absl::Status DelayAndSum(const Stream& stream, const BeamformParams& p, const CFloat* data, CFloat* image) {
  const dim3 grid(Blocks(p.nz, Sm90Policy::kDasThreads), p.nx);
  DasKernel<<<grid, Sm90Policy::kDasThreads, 0, Native(stream)>>>(p, data, image);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("DasKernel");
  return absl::OkStatus();
}

absl::Status DelayedChannels(const Stream& stream, const BeamformParams& p, const MvChunk& chunk, const CFloat* data,
                             CFloat* x) {
  const dim3 grid(Blocks(chunk.pixels(p), Sm90Policy::kTile), Blocks(p.channels, Sm90Policy::kTile));
  const dim3 block(Sm90Policy::kTile, Sm90Policy::kTileRows);
  DelayedChannelsKernel<<<grid, block, 0, Native(stream)>>>(p, chunk, data, x);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("DelayedChannelsKernel");
  return absl::OkStatus();
}

absl::Status Covariance(const Stream& stream, const BeamformParams& p, const MvChunk& chunk, const CFloat* x,
                        CFloat* r) {
  const int threads = (chunk.subarray + 31) / 32 * 32;
  const size_t shared = static_cast<size_t>(2 * chunk.temporal_half + 1) * p.channels * sizeof(CFloat);
  CovarianceKernel<<<static_cast<unsigned>(chunk.pixels(p)), threads, shared, Native(stream)>>>(p, chunk, x, r);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("CovarianceKernel");
  return absl::OkStatus();
}

absl::Status FillOnes(const Stream& stream, const BeamformParams& p, const MvChunk& chunk, CFloat* v) {
  const int64_t count = chunk.pixels(p) * chunk.subarray;
  const int threads = Sm90Policy::kElementwiseThreads;
  const int blocks = Blocks(count, threads) < 4096 ? Blocks(count, threads) : 4096;
  FillOnesKernel<<<blocks, threads, 0, Native(stream)>>>(count, v);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FillOnesKernel");
  return absl::OkStatus();
}

absl::Status ApplyWeights(const Stream& stream, const BeamformParams& p, const MvChunk& chunk, const CFloat* x,
                          const CFloat* v, const int* info, CFloat* image) {
  const int threads = Sm90Policy::kElementwiseThreads;
  ApplyWeightsKernel<<<Blocks(chunk.pixels(p), threads), threads, 0, Native(stream)>>>(p, chunk, x, v, info, image);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ApplyWeightsKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace detail
}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera
