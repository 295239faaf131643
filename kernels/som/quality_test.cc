#include "kernels/som/quality.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tessera {
namespace som {
namespace {

TEST(Quality, Neighbours) {
  const GridShape planar{4, 3, Topology::kPlanar};
  const GridShape torus{4, 3, Topology::kToroidal};
  // Node i at (i % 4, i / 4).
  EXPECT_TRUE(AreNeighbours(0, 1, planar, Adjacency::kFour));
  EXPECT_TRUE(AreNeighbours(0, 4, planar, Adjacency::kFour));
  EXPECT_FALSE(AreNeighbours(0, 5, planar, Adjacency::kFour));
  EXPECT_TRUE(AreNeighbours(0, 5, planar, Adjacency::kEight));
  EXPECT_FALSE(AreNeighbours(0, 3, planar, Adjacency::kFour));  // (0,0)-(3,0)
  EXPECT_TRUE(AreNeighbours(0, 3, torus, Adjacency::kFour));    // wraps in x
  EXPECT_TRUE(AreNeighbours(0, 8, torus, Adjacency::kFour));    // (0,0)-(0,2) wraps in y
  EXPECT_FALSE(AreNeighbours(0, 8, planar, Adjacency::kEight));
  EXPECT_TRUE(AreNeighbours(0, 11, torus, Adjacency::kEight));  // (0,0)-(3,2): diagonal across both seams
  EXPECT_FALSE(AreNeighbours(0, 11, torus, Adjacency::kFour));
  EXPECT_FALSE(AreNeighbours(2, 2, planar, Adjacency::kEight));
  EXPECT_FALSE(AreNeighbours(2, -1, planar, Adjacency::kEight));
}

TEST(Quality, HandComputed) {
  const GridShape grid{3, 1, Topology::kPlanar};
  // Three documents: nnz 4, 1, 0.
  const std::vector<int64_t> offsets = {0, 4, 5, 5};
  const std::vector<float> norms = {1.0f, 4.0f, 0.0f};
  const std::vector<int32_t> bmu = {0, 0, 2};
  const std::vector<int32_t> second = {1, 2, 1};
  // doc 0: ||x - w0||^2 = 1, so score = 1 - 4 = -3 and x.w = (1 + 3) / 2 = 2,
  //        cos = 2 / (2 * 1) = 1.
  // doc 1: ||x - w0||^2 = 0.25 -> score -0.75, x.w = 0.875, cos = 0.875.
  // doc 2: empty document, zero prototype: distance 0, cosine distance 1.
  const std::vector<float> score = {-3.0f, -0.75f, 0.0f};
  QualityMetrics q = ComputeQuality(offsets.data(), 3, bmu.data(), second.data(), score.data(), norms.data(), grid);
  EXPECT_EQ(q.docs, 3);
  EXPECT_NEAR(q.qe_euclidean, (1.0 + 0.5 + 0.0) / 3, 1e-12);
  EXPECT_NEAR(q.qe_cosine, (0.0 + 0.125 + 1.0) / 3, 1e-12);
  EXPECT_NEAR(q.topographic_error, 1.0 / 3, 1e-12);  // doc 1: nodes 0 and 2 are not adjacent
  EXPECT_EQ(q.dead_units, 1);
  EXPECT_NEAR(q.dead_unit_fraction, 1.0 / 3, 1e-12);
  QualityMetrics no_second =
      ComputeQuality(offsets.data(), 3, bmu.data(), nullptr, score.data(), norms.data(), grid);
  EXPECT_EQ(no_second.topographic_error, 0);
}

}  // namespace
}  // namespace som
}  // namespace tessera
