// CUDA ESPIRiT Gram volumes: the phased kernels are scattered to d mod n (one
// thread per pair, offsets in the CPU's order, so sums over wrapped offsets
// match), then one batched in-place cuFFT over all pairs.
#include <cuda_runtime.h>

#include <complex>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/espirit_volume.h"
#include "kernels/reconstruction/nufft/cufft_plan.h"

namespace tessera {
namespace recon {
namespace mri {
namespace cuda {
namespace {

__global__ void ScatterKernels(int pairs, int64_t nx, int64_t ny, int64_t nz, int hx, int hy, int hz,
                               const float2* __restrict__ phased, float2* __restrict__ gram) {
  const int l = blockIdx.x * blockDim.x + threadIdx.x;
  if (l >= pairs) return;
  const int sx = 2 * hx + 1, sy = 2 * hy + 1, sz = 2 * hz + 1;
  const float2* k = phased + static_cast<int64_t>(l) * sx * sy * sz;
  float2* out = gram + static_cast<int64_t>(l) * nx * ny * nz;
  for (int dz = -hz; dz <= hz; ++dz) {
    const int64_t z = ((dz % nz) + nz) % nz;
    for (int dy = -hy; dy <= hy; ++dy) {
      const int64_t y = ((dy % ny) + ny) % ny;
      for (int dx = -hx; dx <= hx; ++dx) {
        const int64_t x = ((dx % nx) + nx) % nx;
        const float2 v = k[(dx + hx) + sx * ((dy + hy) + sy * (dz + hz))];
        float2& o = out[x + nx * (y + ny * z)];
        o.x += v.x;
        o.y += v.y;
      }
    }
  }
}

}  // namespace

absl::Status EspiritGramVolumes(const Stream& stream, std::array<int64_t, 3> dims, std::array<int, 3> half, int pairs,
                                const std::vector<std::complex<float>>& phased, std::complex<float>* gram) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const auto native = static_cast<cudaStream_t>(stream.native());
  const int64_t voxels = dims[0] * dims[1] * dims[2];
  TESSERA_ASSIGN_OR_RETURN(auto d_phased, UploadVector(phased, stream));
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(gram, 0, static_cast<size_t>(pairs) * voxels * sizeof(std::complex<float>), native));
  constexpr int kThreads = 64;
  ScatterKernels<<<(pairs + kThreads - 1) / kThreads, kThreads, 0, native>>>(
      pairs, dims[0], dims[1], dims[2], half[0], half[1], half[2], static_cast<const float2*>(d_phased->data()),
      reinterpret_cast<float2*>(gram));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("EspiritScatterKernels");
  TESSERA_ASSIGN_OR_RETURN(auto plan, nufft::CufftBatchPlan<float>::Create(dims, pairs, stream));
  TESSERA_RETURN_IF_ERROR(plan->Execute(gram, +1));
  // The uploaded kernels and the plan's work area are freed on return.
  return stream.Synchronize();
}

}  // namespace cuda
}  // namespace mri
}  // namespace recon
}  // namespace tessera
