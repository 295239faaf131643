// CUDA PET projector: the lor_math.h arithmetic, one thread per sinogram
// element (forward), per LOR (scatter back projection: float atomicAdd, or
// 64-bit integer atomics in fixed point, fixed_point.h) or per voxel (gather
// back projection, fixed order).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/reconstruction/pet/fixed_point.h"
#include "kernels/reconstruction/pet/lor_math.h"
#include "kernels/reconstruction/pet/projector_kernels.h"
#include "kernels/registration/reduce.cuh"

namespace tessera {
namespace recon {
namespace pet {
namespace cuda {
namespace {

constexpr int kThreads = 256;

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

int64_t BlocksFor(int64_t n) { return (n + kThreads - 1) / kThreads; }

// The host pass of lor_math.h's templates never runs; the device pass adds atomically.
struct AtomicAdd {
  float* image;
  TESSERA_RECON_HD void operator()(int64_t voxel, float what) const {
#if defined(__CUDA_ARCH__)
    atomicAdd(image + voxel, what);
#else
    image[voxel] += what;
#endif
  }
};

// Integer atomics: two's complement addition mod 2^64 is associative, so the
// order the atomics land in cannot change the sum. Zero terms cost no atomic.
struct FixedAtomicAdd {
  unsigned long long* acc;
  float scale;
  TESSERA_RECON_HD void operator()(int64_t voxel, float what) const {
    const long long q = ToFixed(what, scale);
#if defined(__CUDA_ARCH__)
    if (q != 0) atomicAdd(acc + voxel, static_cast<unsigned long long>(q));
#else
    if (q != 0) acc[voxel] += static_cast<unsigned long long>(q);
#endif
  }
};

// The LOR of scatter thread l and its back projection through `add`.
template <typename Add>
__device__ __forceinline__ void ScatterLor(const ProjectorParams& p, const ViewRange& range, const float* y,
                                           const int64_t* order, int64_t l, const Add& add) {
  if (order != nullptr) l = order[l];
  const int64_t det = static_cast<int64_t>(p.cols) * p.rows;
  const int64_t q = l / det, lor = l % det;
  const int view = range.first + static_cast<int>(q) * range.stride;
  const Lor L = MakeLor(p, view, static_cast<int>(lor % p.cols), static_cast<int>(lor / p.cols));
  const float scale = p.atten != nullptr ? p.atten[lor + det * view] : 1.0f;
  BackLor(p, L, y + q * det * p.tof.bins + lor, det, scale, add);
}

__global__ void __launch_bounds__(kThreads)
    ForwardKernel(ProjectorParams p, ViewRange range, const float* __restrict__ image, float* __restrict__ y,
                  int64_t n) {
  const int64_t e = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (e >= n) return;
  const int64_t det = static_cast<int64_t>(p.cols) * p.rows;
  const int64_t lor = e % det;
  const int64_t kq = e / det;
  const int k = static_cast<int>(kq % p.tof.bins);
  const int view = range.first + static_cast<int>(kq / p.tof.bins) * range.stride;
  const int col = static_cast<int>(lor % p.cols), row = static_cast<int>(lor / p.cols);
  const Lor L = MakeLor(p, view, col, row);
  float value = ForwardBin(p, image, L, k);
  if (p.atten != nullptr) value *= p.atten[lor + det * view];
  y[e] = value;
}

__global__ void __launch_bounds__(kThreads)
    BackScatterKernel(ProjectorParams p, ViewRange range, const float* __restrict__ y,
                      const int64_t* __restrict__ order, float* image, int64_t lors) {
  const int64_t l = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (l >= lors) return;
  ScatterLor(p, range, y, order, l, AtomicAdd{image});
}

// Fixed point, pass 1: block partials of sum |y| over a fixed grid
// (kFixedPointPartials blocks at most, a grid-stride loop), so the sum's
// order depends only on n.
__global__ void __launch_bounds__(kThreads) AbsSumKernel(const float* __restrict__ y, int64_t n, double* partials) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) {
    s += fabs(static_cast<double>(y[i]));
  }
  double v[1] = {s};
  registration::cuda_detail::BlockSum<1>(v, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = v[0];
}

// Pass 2: the partials in a fixed order, then S (fixed_point.h).
__global__ void __launch_bounds__(kThreads)
    ChooseScaleKernel(const double* __restrict__ partials, int count, double weight_bound, FixedPointScale* out) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) s += partials[i];
  double v[1] = {s};
  registration::cuda_detail::BlockSum<1>(v, scratch);
  if (threadIdx.x == 0) *out = ChooseFixedPointScale(v[0] * weight_bound);
}

// Pass 3: the scatter in integers.
__global__ void __launch_bounds__(kThreads)
    BackFixedKernel(ProjectorParams p, ViewRange range, const float* __restrict__ y, const int64_t* __restrict__ order,
                    const FixedPointScale* __restrict__ scale, unsigned long long* acc, int64_t lors) {
  const int64_t l = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (l >= lors) return;
  const FixedPointScale f = *scale;
  if (!f.finite) return;  // pass 4 writes NaN
  ScatterLor(p, range, y, order, l, FixedAtomicAdd{acc, f.scale});
}

// Pass 4: integers to floats.
__global__ void __launch_bounds__(kThreads)
    FromFixedKernel(const unsigned long long* __restrict__ acc, const FixedPointScale* __restrict__ scale,
                    float* __restrict__ image, int64_t voxels) {
  const int64_t v = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (v >= voxels) return;
  image[v] = FromFixed(acc[v], *scale);
}

__global__ void __launch_bounds__(kThreads)
    BackGatherKernel(ProjectorParams p, ViewRange range, const float* __restrict__ y, float* __restrict__ image,
                     int64_t voxels) {
  const int64_t v = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (v >= voxels) return;
  const GridParams& g = p.grid;
  const int idx[3] = {static_cast<int>(v % g.n[0]), static_cast<int>((v / g.n[0]) % g.n[1]),
                      static_cast<int>(v / (static_cast<int64_t>(g.n[0]) * g.n[1]))};
  image[v] = GatherVoxel(p, range, y, idx);
}

}  // namespace

absl::Status Forward(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* image,
                     float* y) {
  const int64_t n = RangeSize(p, range);
  if (n == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  ForwardKernel<<<BlocksFor(n), kThreads, 0, Native(stream)>>>(p, range, image, y, n);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet ForwardKernel");
  return absl::OkStatus();
}

absl::Status BackScatter(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* y,
                         float* image, const int64_t* order) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(image, 0, GridSize(p.grid) * sizeof(float), Native(stream)));
  const int64_t lors = static_cast<int64_t>(p.cols) * p.rows * range.count;
  if (lors == 0) return absl::OkStatus();
  BackScatterKernel<<<BlocksFor(lors), kThreads, 0, Native(stream)>>>(p, range, y, order, image, lors);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet BackScatterKernel");
  return absl::OkStatus();
}

absl::Status BackFixedPoint(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* y,
                            float* image, const FixedPointScratch& scratch, const int64_t* order) {
  cudaStream_t s = Native(stream);
  const int64_t voxels = GridSize(p.grid);
  const int64_t n = RangeSize(p, range);
  const int64_t lors = static_cast<int64_t>(p.cols) * p.rows * range.count;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch.acc, 0, voxels * sizeof(unsigned long long), s));
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min(kFixedPointPartials, BlocksFor(n))));
  AbsSumKernel<<<blocks, kThreads, 0, s>>>(y, n, scratch.partials);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet AbsSumKernel");
  ChooseScaleKernel<<<1, kThreads, 0, s>>>(scratch.partials, blocks, FixedPointParamsBound(p), scratch.scale);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet ChooseScaleKernel");
  if (lors > 0) {
    BackFixedKernel<<<BlocksFor(lors), kThreads, 0, s>>>(p, range, y, order, scratch.scale, scratch.acc, lors);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet BackFixedKernel");
  }
  FromFixedKernel<<<BlocksFor(voxels), kThreads, 0, s>>>(scratch.acc, scratch.scale, image, voxels);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet FromFixedKernel");
  return absl::OkStatus();
}

absl::Status BackGather(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* y,
                        float* image) {
  const int64_t voxels = GridSize(p.grid);
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  BackGatherKernel<<<BlocksFor(voxels), kThreads, 0, Native(stream)>>>(p, range, y, image, voxels);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet BackGatherKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace pet
}  // namespace recon
}  // namespace tessera
