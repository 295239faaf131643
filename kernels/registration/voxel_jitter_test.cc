// The grid sampler's per-voxel jitter (voxel_jitter.h): the offsets are
// sub-voxel, deterministic and spread; a jittered sample equals the plain
// sampler given the offsets as an explicit displacement (through the affine's
// linear part: the offset moves the output point before the map), for the
// forward pass and dL/du; the affine gradient is refused with a jitter.
#include "kernels/registration/voxel_jitter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace {

using testing::RandomUniform;
using testing::RelL2;

TEST(VoxelJitter, SubVoxelDeterministicAndSpread) {
  double sum = 0, sum_sq = 0;
  int differ_by_key = 0;
  const int n = 30000;
  for (int v = 0; v < n; ++v) {
    for (int c = 0; c < 3; ++c) {
      const double d = VoxelJitter<double>(12345, v, c);
      ASSERT_GE(d, -0.5);
      ASSERT_LT(d, 0.5);
      EXPECT_EQ(d, VoxelJitter<double>(12345, v, c));
      differ_by_key += d != VoxelJitter<double>(12346, v, c);
      sum += d;
      sum_sq += d * d;
    }
  }
  EXPECT_NEAR(sum / (3 * n), 0.0, 0.01);
  EXPECT_NEAR(sum_sq / (3 * n), 1.0 / 12, 0.005);  // uniform on [-1/2, 1/2)
  EXPECT_GT(differ_by_key, 3 * n - 10);
}

// The jitter as an explicit displacement in the sampler's input units:
// A_lin (step * d(v)) + u(v).
std::vector<float> JitterAsDisplacement(uint64_t key, Dims3 od, const std::vector<float>* affine,
                                        const std::vector<float>* disp) {
  const int64_t n = od.size();
  const double step[3] = {2.0 / (od.nx - 1), 2.0 / (od.ny - 1), 2.0 / (od.nz - 1)};
  std::vector<float> out(3 * n);
  for (int64_t v = 0; v < n; ++v) {
    double dx[3];
    for (int c = 0; c < 3; ++c) dx[c] = step[c] * VoxelJitter<double>(key, v, c);
    for (int r = 0; r < 3; ++r) {
      double p = affine ? (*affine)[4 * r] * dx[0] + (*affine)[4 * r + 1] * dx[1] + (*affine)[4 * r + 2] * dx[2]
                        : dx[r];
      if (disp) p += (*disp)[v + r * n];
      out[v + r * n] = static_cast<float>(p);
    }
  }
  return out;
}

TEST(VoxelJitter, SamplerEqualsExplicitDisplacement) {
  const Dims3 id{17, 13, 11}, od{15, 14, 9};
  const int64_t n = od.size();
  const auto image = RandomUniform<float>(id.size(), 0.5, 1.5, 7);
  std::vector<float> affine = RandomUniform<float>(kAffineParams, -0.1, 0.1, 8);
  affine[0] += 1;
  affine[5] += 1;
  affine[10] += 1;
  const auto disp = RandomUniform<float>(3 * n, -0.1, 0.1, 9);
  const auto grad_out = RandomUniform<float>(n, -1.0, 1.0, 10);
  const uint64_t key = 0x5eed;
  for (Padding padding : {Padding::kZeros, Padding::kBorder}) {
    for (bool with_affine : {false, true}) {
      SCOPED_TRACE(with_affine ? "affine" : "no affine");
      GridSampleArgs jittered;
      jittered.image = image.data();
      jittered.image_dims = id;
      jittered.affine = with_affine ? affine.data() : nullptr;
      jittered.disp = disp.data();
      jittered.out_dims = od;
      jittered.padding = padding;
      jittered.voxel_jitter_key = key;
      const auto explicit_disp = JitterAsDisplacement(key, od, with_affine ? &affine : nullptr, &disp);
      GridSampleArgs plain = jittered;
      plain.voxel_jitter_key = 0;
      plain.disp = explicit_disp.data();

      std::vector<float> got(n), want(n), unjittered(n);
      ASSERT_TRUE(GridSample(Stream::Cpu(), jittered, got.data()).ok());
      ASSERT_TRUE(GridSample(Stream::Cpu(), plain, want.data()).ok());
      EXPECT_LT(RelL2(got, want), 1e-5);
      GridSampleArgs no_jitter = jittered;
      no_jitter.voxel_jitter_key = 0;
      ASSERT_TRUE(GridSample(Stream::Cpu(), no_jitter, unjittered.data()).ok());
      EXPECT_GT(RelL2(got, unjittered), 1e-2);  // the jitter moves the samples

      std::vector<float> gd(3 * n), gd_want(3 * n);
      ASSERT_TRUE(GridSampleBackward(Stream::Cpu(), jittered, grad_out.data(), GridSampleGrads{gd.data()}).ok());
      ASSERT_TRUE(GridSampleBackward(Stream::Cpu(), plain, grad_out.data(), GridSampleGrads{gd_want.data()}).ok());
      EXPECT_LT(RelL2(gd, gd_want), 1e-4);

      std::vector<float> ga(kAffineParams);
      EXPECT_EQ(GridSampleBackward(Stream::Cpu(), jittered, grad_out.data(), GridSampleGrads{nullptr, ga.data()}).code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera
