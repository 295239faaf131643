// The one device kernel the sharded LNCC adds to the single-GPU fused LNCC
// (kernels/registration/lncc.cu, which does all the volume work): the cc of
// the halo slices of a local slab as that kernel computes them there (windows
// truncated at the slab's ends, zero padding), so the caller can subtract it
// from the fused kernel's slab total and keep the own slices' sum.
//
// A thread owns one (x, y) column of one halo band (blockIdx.z: 0 below the
// own slices, 1 above) and walks z through the band plus r slices either
// side: each slice's xy window sums of F, W, F^2, W^2, FW (direct, in double;
// products in float as the fused kernel forms them), a w-slice ring of those
// in registers/local memory, running z sums, cc from lncc_math.h. Cost per
// column: (band + 2r) * w^2 * 2 loads, band = halo slices (2r on an inner
// side): small beside the slab.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/parallel/sharded_internal.h"
#include "kernels/registration/lncc_math.h"
#include "kernels/registration/reduce.cuh"

namespace tessera {
namespace parallel {
namespace sharded_internal {
namespace {

constexpr int kTX = 32;
constexpr int kTY = 8;
constexpr int kMaxWindow = kLnccMaxDeviceWindow;

struct Band {
  int64_t k_lo, k_hi;  // local slices whose cc is summed, [k_lo, k_hi)
};

__global__ void __launch_bounds__(kTX* kTY)
    HaloCcKernel(const float* __restrict__ fixed, const float* __restrict__ warped, int64_t nx, int64_t ny,
                 int64_t nz, int r, Band lower, Band upper, double inv_n, double eps, double* __restrict__ partials) {
  const int64_t x = static_cast<int64_t>(blockIdx.x) * kTX + threadIdx.x;
  const int64_t y = static_cast<int64_t>(blockIdx.y) * kTY + threadIdx.y;
  const Band band = blockIdx.z == 0 ? lower : upper;
  const bool inside = x < nx && y < ny;
  const int w = 2 * r + 1;
  const int64_t plane = nx * ny;
  double ring[kMaxWindow][5];
  for (int s = 0; s < w; ++s) {
    for (int q = 0; q < 5; ++q) ring[s][q] = 0.0;
  }
  double acc[5] = {0, 0, 0, 0, 0};
  double local = 0.0;
  int slot = 0;
  if (inside && band.k_hi > band.k_lo) {
    for (int64_t zin = band.k_lo - r; zin < band.k_hi + r; ++zin) {
      double xy[5] = {0, 0, 0, 0, 0};
      if (zin >= 0 && zin < nz) {
        for (int64_t yy = y - r; yy <= y + r; ++yy) {
          if (yy < 0 || yy >= ny) continue;
          const int64_t row = yy * nx + zin * plane;
          for (int64_t xx = x - r; xx <= x + r; ++xx) {
            if (xx < 0 || xx >= nx) continue;
            const float f = __ldg(fixed + row + xx), m = __ldg(warped + row + xx);
            xy[0] += f;
            xy[1] += m;
            xy[2] += f * f;
            xy[3] += m * m;
            xy[4] += f * m;
          }
        }
      }
      for (int q = 0; q < 5; ++q) {
        acc[q] += xy[q] - ring[slot][q];
        ring[slot][q] = xy[q];
      }
      slot = slot + 1 == w ? 0 : slot + 1;
      const int64_t k = zin - r;  // its window [k - r, k + r] is complete
      if (k >= band.k_lo) {
        local += registration::ComputeLnccTerms(acc[0], acc[1], acc[2], acc[3], acc[4], inv_n, eps).cc;
      }
    }
  }
  __shared__ double scratch[32];
  double v[1] = {local};
  registration::cuda_detail::BlockSum<1>(v, scratch);
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    partials[blockIdx.x + static_cast<int64_t>(gridDim.x) * (blockIdx.y + static_cast<int64_t>(gridDim.y) * blockIdx.z)] =
        v[0];
  }
}

}  // namespace

absl::StatusOr<double> LnccHaloCcSumCuda(const Stream& stream, const float* fixed, const float* warped,
                                         const SlabLayout& layout, int window, double eps) {
  if (layout.halo_lo == 0 && layout.halo_hi == 0) return 0.0;
  if (window > kMaxWindow) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharded LNCC (CUDA): window ", window, " exceeds the maximum of ", kMaxWindow));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const Dims3 d = layout.local_dims();
  const Band lower{0, layout.halo_lo};
  const Band upper{layout.halo_lo + layout.own_nz(), d.nz};
  const dim3 grid(static_cast<unsigned>((d.nx + kTX - 1) / kTX), static_cast<unsigned>((d.ny + kTY - 1) / kTY), 2);
  const size_t blocks = static_cast<size_t>(grid.x) * grid.y * grid.z;
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> partials,
                           Buffer::Allocate(MemoryKind::kDevice, blocks * sizeof(double), stream.ordinal()));
  const double inv_n = 1.0 / (static_cast<double>(window) * window * window);
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  HaloCcKernel<<<grid, dim3(kTX, kTY), 0, s>>>(fixed, warped, d.nx, d.ny, d.nz, window / 2, lower, upper, inv_n, eps,
                                              static_cast<double*>(partials->data()));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("sharded LNCC halo cc");
  std::vector<double> host(blocks);
  TESSERA_RETURN_IF_ERROR(CopyBytes(host.data(), MemoryKind::kHost, partials->data(), MemoryKind::kDevice,
                                    blocks * sizeof(double), stream));
  double sum = 0;
  for (double p : host) sum += p;  // fixed order
  return sum;
}

}  // namespace sharded_internal
}  // namespace parallel
}  // namespace tessera
