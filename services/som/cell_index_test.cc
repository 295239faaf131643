// CellIndex against the scan it replaces (DocumentsInCell) on random atlases
// with many empty cells, and its refusals.
#include "services/som/cell_index.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "services/som/atlas.h"

namespace tessera {
namespace som {
namespace {

TEST(CellIndex, SameDocumentsAsTheScanOnRandomAtlases) {
  std::mt19937 rng(16);
  for (int trial = 0; trial < 20; ++trial) {
    Atlas atlas;
    std::uniform_int_distribution<int> edge(1, 24);
    atlas.model.grid = GridShape{edge(rng), edge(rng), Topology::kPlanar};
    const int64_t nodes = atlas.nodes();
    // Skewed: some cells crowded, most documents in a few, many cells empty.
    std::uniform_int_distribution<int64_t> docs_count(0, 3 * nodes);
    std::uniform_real_distribution<double> u(0, 1);
    atlas.bmu.resize(static_cast<size_t>(docs_count(rng)));
    for (int32_t& b : atlas.bmu) b = static_cast<int32_t>(u(rng) * u(rng) * u(rng) * nodes);
    auto index = CellIndex::Build(atlas.bmu, nodes);
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_EQ(index->nodes(), nodes);
    EXPECT_EQ(index->documents(), static_cast<int64_t>(atlas.bmu.size()));
    int64_t empty = 0;
    for (int64_t node = 0; node < nodes; ++node) {
      const std::vector<int64_t> scan = DocumentsInCell(atlas, node);
      auto cell = index->Documents(node);
      ASSERT_TRUE(cell.ok()) << cell.status();
      ASSERT_EQ(std::vector<int64_t>(cell->begin(), cell->end()), scan) << "trial " << trial << " node " << node;
      if (scan.empty()) ++empty;
    }
    if (nodes > 20) {
      EXPECT_GT(empty, 0) << "the test should cover empty cells";
    }
  }
}

TEST(CellIndex, OffTheMapIsInvalidArgument) {
  auto index = CellIndex::Build(std::vector<int32_t>{0, 3, 3, 1}, 6);
  ASSERT_TRUE(index.ok());
  for (int64_t node : {int64_t{-1}, int64_t{6}, int64_t{1} << 40}) {
    auto cell = index->Documents(node);
    EXPECT_EQ(cell.status().code(), absl::StatusCode::kInvalidArgument) << node;
    EXPECT_NE(cell.status().message().find("off the map (0..5)"), absl::string_view::npos) << cell.status();
  }
  EXPECT_TRUE(index->Documents(5)->empty());
  EXPECT_EQ(std::vector<int32_t>(index->Documents(3)->begin(), index->Documents(3)->end()),
            (std::vector<int32_t>{1, 2}));
}

TEST(CellIndex, RefusesBmusOutsideTheMap) {
  auto bad = CellIndex::Build(std::vector<int32_t>{0, 7}, 6);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("document 1 has BMU 7"), absl::string_view::npos) << bad.status();
  EXPECT_EQ(CellIndex::Build(std::vector<int32_t>{-1}, 6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CellIndex::Build({}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  auto no_docs = CellIndex::Build({}, 4);
  ASSERT_TRUE(no_docs.ok());
  EXPECT_TRUE(no_docs->Documents(3)->empty());
}

}  // namespace
}  // namespace som
}  // namespace tessera
