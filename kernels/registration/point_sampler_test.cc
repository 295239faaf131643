// The sparse sampler against the full-grid sampler it stands in for: with
// every voxel listed it must give GridSample's values and GridSampleBackward's
// affine gradient, on random images, affines and upstream gradients.
#include "kernels/registration/point_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/registration/grid_sampler.h"

namespace tessera::registration {
namespace {

struct Case {
  Dims3 image_dims{13, 11, 9}, grid_dims{10, 12, 8};
  std::vector<float> image, affine, grad_out;
};

Case RandomCase(uint64_t seed) {
  Case c;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(0.1f, 1.f), small(-0.15f, 0.15f);
  c.image.resize(c.image_dims.size());
  for (float& v : c.image) v = u(rng);
  // Near-identity affine with a shift that pushes part of the grid outside.
  c.affine = {1 + small(rng), small(rng), small(rng), 0.6f + small(rng), small(rng), 1 + small(rng),
              small(rng),     small(rng), small(rng), small(rng),         1 + small(rng), small(rng)};
  c.grad_out.resize(c.grid_dims.size());
  for (float& v : c.grad_out) v = u(rng) - 0.55f;
  return c;
}

TEST(PointSampler, AllVoxelsMatchTheGridSampler) {
  for (uint64_t seed : {1, 2, 3}) {
    Case c = RandomCase(seed);
    std::vector<int64_t> points(c.grid_dims.size());
    std::iota(points.begin(), points.end(), 0);
    PointSampleArgs args;
    args.image = c.image.data();
    args.image_dims = c.image_dims;
    args.affine = c.affine.data();
    args.grid_dims = c.grid_dims;
    args.points = points.data();
    args.count = static_cast<int64_t>(points.size());
    std::vector<float> sparse(points.size()), dense(points.size());
    ASSERT_TRUE(SamplePoints(args, sparse.data()).ok());

    GridSampleArgs grid;
    grid.image = c.image.data();
    grid.image_dims = c.image_dims;
    grid.affine = c.affine.data();
    grid.out_dims = c.grid_dims;
    grid.padding = Padding::kZeros;
    ASSERT_TRUE(GridSample(Stream::Cpu(), grid, dense.data()).ok());
    int zeros = 0;
    for (size_t k = 0; k < points.size(); ++k) {
      EXPECT_NEAR(sparse[k], dense[k], 1e-6f) << "voxel " << k;
      zeros += dense[k] == 0.f;
    }
    EXPECT_GT(zeros, 0) << "the case should reach outside the image";
    EXPECT_LT(zeros, static_cast<int>(points.size()) / 2);

    std::array<double, kAffineParams> sparse_grad;
    ASSERT_TRUE(SamplePointsAffineBackward(args, c.grad_out.data(), &sparse_grad).ok());
    float dense_grad[kAffineParams];
    GridSampleGrads grads;
    grads.grad_affine = dense_grad;
    ASSERT_TRUE(GridSampleBackward(Stream::Cpu(), grid, c.grad_out.data(), grads).ok());
    double scale = 0;
    for (float g : dense_grad) scale = std::max(scale, std::abs(double{g}));
    ASSERT_GT(scale, 0);
    for (int e = 0; e < kAffineParams; ++e) {
      EXPECT_NEAR(sparse_grad[e], dense_grad[e], 1e-4 * scale) << "affine entry " << e << ", seed " << seed;
    }
  }
}

TEST(PointSampler, SubsetGradientIsTheSumOverItsPoints) {
  Case c = RandomCase(4);
  const std::vector<int64_t> subset = RandomVoxelSubset(c.grid_dims.size(), 300, 42);
  // The same gradient from the full sampler with the upstream gradient
  // restricted to the subset (counting repeats).
  std::vector<float> masked(c.grid_dims.size(), 0.f), grad_values(subset.size());
  for (size_t k = 0; k < subset.size(); ++k) {
    masked[subset[k]] += c.grad_out[subset[k]];
    grad_values[k] = c.grad_out[subset[k]];
  }
  PointSampleArgs args;
  args.image = c.image.data();
  args.image_dims = c.image_dims;
  args.affine = c.affine.data();
  args.grid_dims = c.grid_dims;
  args.points = subset.data();
  args.count = static_cast<int64_t>(subset.size());
  std::array<double, kAffineParams> sparse_grad;
  ASSERT_TRUE(SamplePointsAffineBackward(args, grad_values.data(), &sparse_grad).ok());
  GridSampleArgs grid;
  grid.image = c.image.data();
  grid.image_dims = c.image_dims;
  grid.affine = c.affine.data();
  grid.out_dims = c.grid_dims;
  float dense_grad[kAffineParams];
  GridSampleGrads grads;
  grads.grad_affine = dense_grad;
  ASSERT_TRUE(GridSampleBackward(Stream::Cpu(), grid, masked.data(), grads).ok());
  double scale = 0;
  for (float g : dense_grad) scale = std::max(scale, std::abs(double{g}));
  for (int e = 0; e < kAffineParams; ++e) EXPECT_NEAR(sparse_grad[e], dense_grad[e], 1e-4 * scale) << e;
}

TEST(PointSampler, SubsetsAreDeterministicAndUniform) {
  const auto a = RandomVoxelSubset(1000, 20000, 7), b = RandomVoxelSubset(1000, 20000, 7);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, RandomVoxelSubset(1000, 20000, 8));
  std::vector<int> hist(10, 0);
  for (int64_t p : a) {
    ASSERT_GE(p, 0);
    ASSERT_LT(p, 1000);
    ++hist[p / 100];
  }
  for (int h : hist) EXPECT_NEAR(h, 2000, 200);  // ~4.7 sigma of a binomial(20000, 0.1)
}

TEST(PointSampler, RejectsBadArguments) {
  float image[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[1];
  int64_t point = 8;  // one past a 2x2x2 grid
  PointSampleArgs args;
  args.image = image;
  args.image_dims = {2, 2, 2};
  args.grid_dims = {2, 2, 2};
  args.points = &point;
  args.count = 1;
  absl::Status s = SamplePoints(args, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("voxel 8"), std::string::npos) << s;
  args.image = nullptr;
  EXPECT_EQ(SamplePoints(args, out).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::registration
