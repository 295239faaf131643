// Ring sampler step kernel (ring_sampler_internal.h). Positions come from
// sampler_math.h in the same operation order as the single-GPU sampler
// (grid_sampler.cu: AffinePrefix of the column, then PositionFromPrefix with
// the global z), and the interpolation is its nested-lerp form, so the values
// equal the unsharded CUDA GridSample's and J equals the d out / d u its
// backward pass forms (before the multiplication by dL/dout).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/sharded/ring_sampler_internal.h"

namespace tessera {
namespace parallel {
namespace ring_internal {
namespace {

using registration::AffinePrefix;
using registration::OutputCoord;
using registration::Padding;
using registration::PositionFromPrefix;

constexpr int kTX = 32;
constexpr int kTY = 8;

__device__ __forceinline__ float Lerp(float a, float b, float t) { return fmaf(t, b - a, a); }

// SlabPartition::OwnerOf for the moving image's split.
__device__ __forceinline__ int OwnerOf(int64_t z, int64_t nz, int ranks) {
  const int64_t base = nz / ranks, extra = nz % ranks;
  const int64_t big = extra * (base + 1);
  if (z < big) return static_cast<int>(z / (base + 1));
  return static_cast<int>(extra + (z - big) / base);
}

__global__ void __launch_bounds__(kTX* kTY)
    RingStepKernel(RingStepParams p, const float* __restrict__ shard, int64_t shard_z0, int64_t shard_nz, int j,
                   bool first, uint8_t* __restrict__ owner, float* __restrict__ out, float* __restrict__ jac) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kTX + threadIdx.x;
  const int64_t jj = static_cast<int64_t>(blockIdx.y) * kTY + threadIdx.y;
  const int64_t kl = blockIdx.z;
  const auto& g = p.g;
  const int64_t nx = g.out_dims.nx, ny = g.out_dims.ny;
  if (i >= nx || jj >= ny) return;
  const int64_t v = i + nx * (jj + ny * kl);  // among own voxels
  if (!first && owner[v] != j) return;
  const int64_t k = p.z_begin + kl;
  const int64_t local = i + nx * (jj + ny * (k - p.disp_z0));  // in the local arrays
  const int64_t stride = p.disp_local_voxels;

  float x[3], pre[3], ix[3];
  OutputCoord(g, i, jj, k, x);
  AffinePrefix(p.affine, x[0], x[1], pre);
  if (p.disp != nullptr) {
    const float u[3] = {__ldg(p.disp + local), __ldg(p.disp + local + stride), __ldg(p.disp + local + 2 * stride)};
    PositionFromPrefix(g, p.affine, pre, x[2], u, ix);
  } else {
    PositionFromPrefix<float>(g, p.affine, pre, x[2], nullptr, ix);
  }
  const int64_t m[3] = {g.in_dims.nx, g.in_dims.ny, g.in_dims.nz};
  float dclamp[3];
  bool inside = true;
#pragma unroll
  for (int c = 0; c < 3; ++c) {
    const float hi = static_cast<float>(m[c] - 1);
    if (g.padding == Padding::kBorder) {
      const bool below = !(ix[c] >= 0.0f), above = ix[c] > hi;
      dclamp[c] = (below || above) ? 0.0f : 1.0f;
      ix[c] = below ? 0.0f : (above ? hi : ix[c]);
    } else {
      dclamp[c] = 1.0f;
      inside = inside && (ix[c] > -1.0f && ix[c] < static_cast<float>(m[c]));
    }
  }
  if (first) {
    if (!inside) {
      owner[v] = kNoOwner;
      out[local] = 0.0f;
      if (jac != nullptr) {
#pragma unroll
        for (int c = 0; c < 3; ++c) jac[local + c * stride] = 0.0f;
      }
      return;
    }
    // The cell's lower z corner; -1 (zeros padding) belongs to shard 0.
    int64_t z0 = static_cast<int64_t>(floorf(ix[2]));
    z0 = z0 < 0 ? 0 : (z0 > m[2] - 1 ? m[2] - 1 : z0);
    const int o = OwnerOf(z0, m[2], p.ranks);
    owner[v] = static_cast<uint8_t>(o);
    if (o != j) return;
  }
  const float f0 = floorf(ix[0]), f1 = floorf(ix[1]), f2 = floorf(ix[2]);
  const int64_t i0 = static_cast<int64_t>(f0), j0 = static_cast<int64_t>(f1), k0 = static_cast<int64_t>(f2);
  const float fx = ix[0] - f0, fy = ix[1] - f1, fz = ix[2] - f2;
  float c8[8];
#pragma unroll
  for (int cz = 0; cz < 2; ++cz) {
#pragma unroll
    for (int cy = 0; cy < 2; ++cy) {
#pragma unroll
      for (int cx = 0; cx < 2; ++cx) {
        const int64_t a = i0 + cx, b = j0 + cy, c = k0 + cz;
        // Corners outside the image are padding zeros; the owned cell's
        // corners inside it are in this shard (own slices + overlap).
        const bool ok = a >= 0 && a < m[0] && b >= 0 && b < m[1] && c >= 0 && c < m[2] && c >= shard_z0 &&
                        c < shard_z0 + shard_nz;
        c8[4 * cz + 2 * cy + cx] = ok ? __ldg(shard + (a + m[0] * (b + m[1] * (c - shard_z0)))) : 0.0f;
      }
    }
  }
  // grid_sampler.cu's Interpolate / InterpolateGrad.
  const float c00 = Lerp(c8[0], c8[1], fx), c01 = Lerp(c8[2], c8[3], fx);
  const float c10 = Lerp(c8[4], c8[5], fx), c11 = Lerp(c8[6], c8[7], fx);
  const float e0 = Lerp(c00, c01, fy), e1 = Lerp(c10, c11, fy);
  out[local] = Lerp(e0, e1, fz);
  if (jac != nullptr) {
    float dv[3];
    dv[0] = Lerp(Lerp(c8[1] - c8[0], c8[3] - c8[2], fy), Lerp(c8[5] - c8[4], c8[7] - c8[6], fy), fz);
    dv[1] = Lerp(c01 - c00, c11 - c10, fz);
    dv[2] = e1 - e0;
#pragma unroll
    for (int c = 0; c < 3; ++c) jac[local + c * stride] = __fmul_rn(dv[c], dclamp[c]);
  }
}

// (grad_out * dv * dclamp) * half: grid_sampler.cu's backward association.
__global__ void ApplyJacobianKernel(const float* __restrict__ grad_out, float* __restrict__ field, int64_t begin,
                                    int64_t end, int64_t stride, float h0, float h1, float h2) {
  const float half[3] = {h0, h1, h2};
  for (int64_t v = begin + blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < end;
       v += int64_t{gridDim.x} * blockDim.x) {
    const float go = grad_out[v];
#pragma unroll
    for (int c = 0; c < 3; ++c) field[v + c * stride] = __fmul_rn(__fmul_rn(go, field[v + c * stride]), half[c]);
  }
}

}  // namespace

absl::Status RingSampleStepCuda(const Stream& stream, const RingStepParams& p, const float* shard, int64_t shard_z0,
                                int64_t shard_nz, int shard_index, bool first, uint8_t* owner, float* out,
                                float* jacobian) {
  if (p.own_nz <= 0) return absl::OkStatus();
  if (p.own_nz > 65535 || p.g.out_dims.ny > int64_t{65535} * kTY) {
    return absl::InvalidArgumentError("ring sampler (CUDA): slab exceeds the launch grid");
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const dim3 grid(static_cast<unsigned>((p.g.out_dims.nx + kTX - 1) / kTX),
                  static_cast<unsigned>((p.g.out_dims.ny + kTY - 1) / kTY), static_cast<unsigned>(p.own_nz));
  RingStepKernel<<<grid, dim3(kTX, kTY), 0, static_cast<cudaStream_t>(stream.native())>>>(
      p, shard, shard_z0, shard_nz, shard_index, first, owner, out, jacobian);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ring sampler step");
  return absl::OkStatus();
}

absl::Status ApplySampleJacobianCuda(const SlabLayout& layout, const float half[3], const float* grad_out, float* field,
                                     const Stream& stream) {
  const int64_t n = layout.own_voxels();
  if (n <= 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 4096));
  ApplyJacobianKernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream.native())>>>(
      grad_out, field, layout.own_offset(), layout.own_offset() + n, layout.local_voxels(), half[0], half[1], half[2]);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ring sampler ApplySampleJacobian");
  return absl::OkStatus();
}

}  // namespace ring_internal
}  // namespace parallel
}  // namespace tessera
