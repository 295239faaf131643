#include "kernels/som/documents.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/som/test_util.h"

namespace tessera {
namespace som {
namespace {

TEST(DocTiles, MasksReconstructTheDocuments) {
  std::mt19937 rng(1);
  testutil::HostDocs docs = testutil::RandomDocs(1000, 300, 40, rng);
  for (int tile_docs : {1, 7, 32}) {
    HostDocTiles tiles = BuildDocTiles(docs.view(), tile_docs);
    const DocTilesView v = tiles.view();
    ASSERT_EQ(v.num_tiles, (1000 + tile_docs - 1) / tile_docs);
    ASSERT_EQ(v.doc_begin[v.num_tiles], 1000);
    ASSERT_EQ(v.entry_begin[v.num_tiles], v.num_entries);
    std::vector<std::vector<int32_t>> rebuilt(1000);
    for (int64_t t = 0; t < v.num_tiles; ++t) {
      ASSERT_LE(v.doc_begin[t + 1] - v.doc_begin[t], tile_docs);
      for (int64_t e = v.entry_begin[t]; e < v.entry_begin[t + 1]; ++e) {
        if (e > v.entry_begin[t]) {
          ASSERT_LT(v.features[e - 1], v.features[e]);  // distinct, ascending
        }
        ASSERT_NE(v.masks[e], 0u);
        for (int j = 0; j < 32; ++j) {
          if (v.masks[e] >> j & 1u) rebuilt[v.doc_begin[t] + j].push_back(v.features[e]);
        }
      }
    }
    for (int64_t d = 0; d < 1000; ++d) {
      std::vector<int32_t> row(docs.indices.begin() + docs.offsets[d], docs.indices.begin() + docs.offsets[d + 1]);
      ASSERT_EQ(rebuilt[d], row) << d;
    }
    // Tiles share features: fewer entries than non-zeros.
    if (tile_docs == 32) {
      EXPECT_LT(v.num_entries, static_cast<int64_t>(docs.indices.size()));
    }
  }
}

TEST(Csc, IsTheTranspose) {
  std::mt19937 rng(2);
  testutil::HostDocs docs = testutil::RandomDocs(200, 50, 10, rng);
  HostCsc csc = BuildCsc(docs.view());
  const CscView v = csc.view(200);
  ASSERT_EQ(v.features, 50);
  ASSERT_EQ(v.offsets[50], static_cast<int64_t>(docs.indices.size()));
  for (int64_t f = 0; f < 50; ++f) {
    std::vector<int32_t> expected;
    for (int64_t d = 0; d < 200; ++d) {
      for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) {
        if (docs.indices[k] == f) expected.push_back(static_cast<int32_t>(d));
      }
    }
    std::vector<int32_t> got(v.doc_ids + v.offsets[f], v.doc_ids + v.offsets[f + 1]);
    ASSERT_EQ(got, expected) << f;
  }
}

TEST(DocumentSet, HostCopyOnTheCpuBackend) {
  std::mt19937 rng(3);
  testutil::HostDocs docs = testutil::RandomDocs(70, 30, 9, rng);
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu(), DocumentParts{true, true});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->rows(), 70);
  EXPECT_EQ(set->csr().nnz(), static_cast<int64_t>(docs.indices.size()));
  EXPECT_EQ(set->tiles().num_tiles, 3);
  EXPECT_EQ(set->csc().features, 30);
  EXPECT_EQ(set->host_offsets(), docs.offsets);
  EXPECT_GT(set->bytes(), 0u);
  // Empty corpus.
  testutil::HostDocs empty;
  empty.cols = 5;
  auto none = DocumentSet::Create(empty.view(), Stream::Cpu(), DocumentParts{true, true});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->rows(), 0);
}

}  // namespace
}  // namespace som
}  // namespace tessera
