// The CPU composition's vector paths (lean_compose_cpu_rows.h) against its
// scalar reference (ComposeVoxel per voxel) on random inputs: the composed
// slab and Adam's moments bit for bit, for the scaled and Adam rules, float
// and bf16 gradients (a few NaN and infinite), whole fields, slabs, a slab of
// a larger grid, rows of fewer voxels than a vector, and steps that reach the
// edges.
#include <gtest/gtest.h>

#include <cstdint>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/registration/lean_compose_cpu_rows.h"
#include "kernels/registration/sampler_math.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace lean_internal {
namespace {

using testing::ExpectSameBits;
using testing::RandomUniform;

// The gradient as GradT, with a NaN and infinities among its first voxels.
template <typename GradT>
std::vector<GradT> Gradient(int64_t size, uint32_t seed) {
  std::vector<float> g = RandomUniform<float>(size, -1.0, 1.0, seed);
  const float special[3] = {std::nanf(""), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (int64_t t = 0; t < 3 && 5 * t + 3 < size; ++t) g[5 * t + 3] = special[t];
  std::vector<GradT> out(size);
  for (int64_t v = 0; v < size; ++v) out[v] = FromFloat<GradT>(g[v]);
  return out;
}

// dims: the field (a slab of a grid of grid_nz slices from grid_z0 when grid_nz > 0).
template <typename GradT = float>
void Check(Dims3 dims, int rule, int64_t z0, int64_t z1, int64_t grid_nz, int64_t grid_z0, uint32_t seed) {
  const int64_t n = dims.size();
  const std::vector<float> u = RandomUniform<float>(3 * n, -0.05, 0.05, seed);
  const std::vector<GradT> grad = Gradient<GradT>(3 * n, seed + 1);
  const std::vector<float> m0 = RandomUniform<float>(3 * n, -0.5, 0.5, seed + 2);
  const std::vector<float> v0 = RandomUniform<float>(3 * n, 0.01, 1.0, seed + 3);
  ComposeParams p;
  p.dims = dims;
  p.rule = rule;
  p.scale = 2.5f;  // up to 2.5 voxels: many cells at the edges
  p.beta1 = 0.9f;
  p.one_minus_beta1 = 0.1f;
  p.beta2 = 0.999f;
  p.one_minus_beta2 = 0.001f;
  p.adam_step = 1.7f;
  p.inv_sqrt_bc2 = 3.1f;
  p.eps = 1e-8f;
  Dims3 geometry = dims;
  if (grid_nz > 0) geometry.nz = grid_nz;
  const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 1};
  const SamplerGeometry<float> g = MakeSamplerGeometry<float>(geometry, geometry, lo, hi, Padding::kBorder);
  const int64_t gn[3] = {geometry.nx, geometry.ny, geometry.nz};
  for (int c = 0; c < 3; ++c) {
    p.to_normalized[c] = 2.f / static_cast<float>(gn[c] - 1);
    p.out_lo[c] = g.out_lo[c];
    p.out_step[c] = g.out_step[c];
    p.in_half[c] = g.in_half[c];
  }
  p.grid_nz = geometry.nz;
  p.grid_z0 = grid_nz > 0 ? grid_z0 : 0;
  const int64_t count = 3 * (z1 - z0) * dims.nx * dims.ny;
  std::vector<float> ref(count), m_ref = m0, v_ref = v0;
  p.m = m_ref.data();
  p.v = v_ref.data();
  ComposeSlabCpuOnPath(SamplerCpuPath::kScalar, p, u.data(), grad.data(), z0, z1, ref.data());
  for (SamplerCpuPath path : AvailableSamplerCpuPaths()) {
    SCOPED_TRACE(SamplerCpuPathName(path));
    std::vector<float> out(count, 7.f), m = m0, v = v0;
    p.m = m.data();
    p.v = v.data();
    ComposeSlabCpuOnPath(path, p, u.data(), grad.data(), z0, z1, out.data());
    ExpectSameBits(ref, out, "composed slab");
    if (rule == 1) {
      ExpectSameBits(m_ref, m, "Adam m");
      ExpectSameBits(v_ref, v, "Adam v");
    }
  }
}

TEST(LeanComposeCpuPathTest, ScaledRuleMatchesScalar) {
  Check({37, 11, 9}, 0, 0, 9, 0, 0, 1);
  Check({37, 11, 9}, 0, 3, 7, 0, 0, 2);
}

TEST(LeanComposeCpuPathTest, AdamRuleMatchesScalar) {
  Check({37, 11, 9}, 1, 0, 9, 0, 0, 3);
  Check({20, 6, 5}, 1, 1, 4, 0, 0, 4);
}

TEST(LeanComposeCpuPathTest, SlabOfALargerGridMatchesScalar) {
  Check({33, 7, 8}, 0, 0, 8, 21, 6, 5);
  Check({33, 7, 8}, 1, 2, 6, 21, 13, 6);
}

TEST(LeanComposeCpuPathTest, ShortAndWholeVectorRowsMatchScalar) {
  Check({5, 6, 5}, 0, 0, 5, 0, 0, 7);    // shorter than any vector: all scalar
  Check({16, 6, 5}, 1, 0, 5, 0, 0, 8);   // whole vectors, no remainder
  Check({48, 5, 4}, 0, 1, 4, 0, 0, 9);
}

TEST(LeanComposeCpuPathTest, Bf16GradientMatchesScalar) {
  Check<BFloat16>({37, 11, 9}, 0, 0, 9, 0, 0, 10);
  Check<BFloat16>({37, 11, 9}, 1, 2, 8, 0, 0, 11);
  Check<BFloat16>({33, 7, 8}, 1, 1, 7, 21, 13, 12);
}

}  // namespace
}  // namespace lean_internal
}  // namespace registration
}  // namespace tessera
