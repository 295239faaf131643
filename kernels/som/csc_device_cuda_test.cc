// The device transpose (cub radix sort) against the host counting sort:
// offsets and doc ids must be identical, on random corpora with empty rows,
// empty features and frequent features (exact integers: no tolerance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/som/documents.h"
#include "kernels/som/test_util.h"

namespace tessera {
namespace som {
namespace {

template <typename T>
std::vector<T> ToHost(const T* device, size_t n, const Stream& stream) {
  std::vector<T> v(n);
  EXPECT_TRUE(CopyBytes(v.data(), MemoryKind::kHost, device, MemoryKind::kDevice, n * sizeof(T), stream).ok());
  return v;
}

TEST(CscDeviceTest, MatchesHostTranspose) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda, 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const auto& shape : {std::make_pair(int64_t{1}, int64_t{1}), std::make_pair(int64_t{500}, int64_t{37}),
                            std::make_pair(int64_t{20000}, int64_t{3001}), std::make_pair(int64_t{70001}, int64_t{40000})}) {
    std::mt19937_64 rng(shape.first * 7 + shape.second);
    std::vector<int64_t> offsets{0};
    std::vector<int32_t> indices;
    std::uniform_int_distribution<int> count(0, 14);
    // Zipf-ish: small feature ids far more frequent; some features never occur.
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int64_t d = 0; d < shape.first; ++d) {
      std::vector<int32_t> row;
      const int k = d % 97 == 0 ? 0 : count(rng);
      for (int j = 0; j < k; ++j) row.push_back(static_cast<int32_t>(std::pow(u(rng), 3.0) * shape.second));
      std::sort(row.begin(), row.end());
      row.erase(std::unique(row.begin(), row.end()), row.end());
      indices.insert(indices.end(), row.begin(), row.end());
      offsets.push_back(static_cast<int64_t>(indices.size()));
    }
    CsrView csr{shape.first, shape.second, offsets.data(), indices.data()};
    const HostCsc expected = BuildCsc(csr);
    auto set = DocumentSet::Create(csr, *stream, DocumentParts{false, true});
    ASSERT_TRUE(set.ok()) << set.status();
    const CscView got = set->csc();
    ASSERT_EQ(got.features, shape.second);
    EXPECT_EQ(ToHost(got.offsets, shape.second + 1, *stream), expected.offsets) << shape.first << "x" << shape.second;
    EXPECT_EQ(ToHost(got.doc_ids, indices.size(), *stream), expected.doc_ids) << shape.first << "x" << shape.second;
  }
}

}  // namespace
}  // namespace som
}  // namespace tessera
