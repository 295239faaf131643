// CUDA block average: one thread per coarse voxel, the block summed in the
// CPU reference's order (z, y, x, in double), so both agree bit for bit.
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "kernels/reconstruction/grid_subdivision.h"

namespace tessera {
namespace recon {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void BlockAverageKernel(const float* fine, BlockShape s, float* out) {
  const int64_t n = s.nx * s.ny * s.nz;
  const int64_t fnx = s.nx * s.fx, fny = s.ny * s.fy;
  const double count = static_cast<double>(s.fx) * s.fy * s.fz;
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < n; v += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = v % s.nx, j = (v / s.nx) % s.ny, k = v / (s.nx * s.ny);
    double sum = 0;
    for (int c = 0; c < s.fz; ++c) {
      for (int b = 0; b < s.fy; ++b) {
        const float* row = fine + ((k * s.fz + c) * fny + j * s.fy + b) * fnx + i * s.fx;
        for (int a = 0; a < s.fx; ++a) sum += row[a];
      }
    }
    out[v] = static_cast<float>(sum / count);
  }
}

}  // namespace

absl::Status BlockAverage(const Stream& stream, const float* fine, const BlockShape& shape, float* out) {
  const int64_t n = shape.coarse_size();
  if (n == 0) return absl::OkStatus();
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  BlockAverageKernel<<<static_cast<int>(blocks < 65535 ? blocks : 65535), kThreads, 0,
                       static_cast<cudaStream_t>(stream.native())>>>(fine, shape, out);
  return CudaStatus(cudaGetLastError(), "recon block average");
}

}  // namespace cuda
}  // namespace recon
}  // namespace tessera
