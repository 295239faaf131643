// CUDA PET projector: the lor_math.h arithmetic, one thread per sinogram
// element (forward), per LOR (scatter back projection, atomicAdd) or per voxel
// (gather back projection, fixed order).
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/reconstruction/pet/lor_math.h"
#include "kernels/reconstruction/pet/projector_kernels.h"

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
  TESSERA_RECON_HD void operator()(float* where, float what) const {
#if defined(__CUDA_ARCH__)
    atomicAdd(where, what);
#else
    *where += what;
#endif
  }
};

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
    BackScatterKernel(ProjectorParams p, ViewRange range, const float* __restrict__ y, float* image, int64_t lors) {
  const int64_t l = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (l >= lors) return;
  const int64_t det = static_cast<int64_t>(p.cols) * p.rows;
  const int64_t q = l / det, lor = l % det;
  const int view = range.first + static_cast<int>(q) * range.stride;
  const Lor L = MakeLor(p, view, static_cast<int>(lor % p.cols), static_cast<int>(lor / p.cols));
  const float scale = p.atten != nullptr ? p.atten[lor + det * view] : 1.0f;
  BackLor(p, L, y + q * det * p.tof.bins + lor, det, scale, image, AtomicAdd());
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
                         float* image) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(image, 0, GridSize(p.grid) * sizeof(float), Native(stream)));
  const int64_t lors = static_cast<int64_t>(p.cols) * p.rows * range.count;
  if (lors == 0) return absl::OkStatus();
  BackScatterKernel<<<BlocksFor(lors), kThreads, 0, Native(stream)>>>(p, range, y, image, lors);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("pet BackScatterKernel");
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
