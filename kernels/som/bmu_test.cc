// CPU BMU search against the dense double-precision brute force.
#include "kernels/som/bmu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/som/codebook.h"
#include "kernels/som/half.h"
#include "kernels/som/test_util.h"

namespace tessera {
namespace som {
namespace {

using testutil::DyadicCodebook;
using testutil::HostCodebook;
using testutil::HostDocs;
using testutil::RandomCodebook;
using testutil::RandomDocs;

struct Result {
  std::vector<int32_t> bmu, second;
  std::vector<float> score;
};

Result RunCpu(const HostDocs& docs, HostCodebook& cb) {
  Result r;
  r.bmu.assign(docs.rows(), -7);
  r.second.assign(docs.rows(), -7);
  r.score.assign(docs.rows(), 0);
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu(), DocumentParts{false, false});
  EXPECT_TRUE(set.ok()) << set.status();
  const BmuAlgorithm algo =
      cb.layout == CodebookLayout::kFeatureMajor ? BmuAlgorithm::kFeatureMajor : BmuAlgorithm::kNodeMajor;
  absl::Status st = FindBmus(Stream::Cpu(), algo, *set, cb.view(), BmuOutput{r.bmu.data(), r.second.data(),
                                                                             r.score.data()});
  EXPECT_TRUE(st.ok()) << st;
  return r;
}

TEST(Half, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const bool nan = (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(HalfToFloat(bits)));
      continue;
    }
    ASSERT_EQ(FloatToHalf(HalfToFloat(bits)), bits) << h;
  }
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
}

TEST(Half, RoundsToNearestEven) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mag(-20.0f, 15.0f);
  for (int k = 0; k < 200000; ++k) {
    const float f = std::ldexp(1.0f + (rng() % 4096) / 4096.0f, static_cast<int>(mag(rng))) * (k % 2 ? -1 : 1);
    const uint16_t h = FloatToHalf(f);
    const double err = std::abs(static_cast<double>(HalfToFloat(h)) - f);
    // No neighbouring half is strictly closer; at an exact tie the mantissa is even.
    for (int delta : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + delta);
      if ((n & 0x7fffu) >= 0x7c00u || ((n ^ h) & 0x8000u)) continue;
      const double nerr = std::abs(static_cast<double>(HalfToFloat(n)) - f);
      ASSERT_LE(err, nerr) << f;
      if (err == nerr) {
        ASSERT_EQ(h & 1, 0) << f;
      }
    }
  }
}

// Random fp32 weights: the chosen BMU's exact distance equals the brute-force
// minimum up to fp32 rounding, and where the brute force has a clear winner the
// indices agree.
// RarestFeatureKeys (the visiting order's second key, BmuHints::document_key)
// against a direct count: per document, the feature in the fewest documents,
// ties to the lowest index, `features` for an empty document; it needs the CSC.
TEST(BmuCpu, RarestFeatureKeysPickTheRarestFeature) {
  std::mt19937 rng(3740);
  HostDocs docs = testutil::ZipfTopicDocs(2000, 500, 8, 11, rng);
  std::vector<int64_t> df(500, 0);
  for (int32_t v : docs.indices) ++df[v];
  DocumentParts parts;
  parts.csc = true;
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu(), parts);
  ASSERT_TRUE(set.ok()) << set.status();
  std::vector<int32_t> keys(docs.rows(), -1);
  ASSERT_TRUE(RarestFeatureKeys(Stream::Cpu(), *set, keys.data()).ok());
  int64_t nonempty = 0;
  for (int64_t d = 0; d < docs.rows(); ++d) {
    int32_t want = 500;
    for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) {
      const int32_t v = docs.indices[k];
      if (want == 500 || df[v] < df[want] || (df[v] == df[want] && v < want)) want = v;
    }
    nonempty += docs.offsets[d + 1] > docs.offsets[d];
    ASSERT_EQ(keys[d], want) << "doc " << d;
  }
  EXPECT_GT(nonempty, docs.rows() / 2);
  auto no_csc = DocumentSet::Create(docs.view(), Stream::Cpu());
  ASSERT_TRUE(no_csc.ok());
  EXPECT_FALSE(RarestFeatureKeys(Stream::Cpu(), *no_csc, keys.data()).ok());
}

TEST(BmuCpu, FeatureMajorMatchesBruteForce) {
  std::mt19937 rng(11);
  for (int64_t nodes : {1, 2, 63, 2100, 4500}) {
    HostDocs docs = RandomDocs(150, 97, 40, rng);
    HostCodebook cb = RandomCodebook(nodes, 97, rng, 0.0f, 0.6f);
    Result got = RunCpu(docs, cb);
    std::vector<int32_t> bf(docs.rows()), bf2(docs.rows());
    std::vector<double> bfd(docs.rows());
    cpu::BruteForceBmus(docs.view(), cb.view(), bf.data(), bf2.data(), bfd.data());
    int clear = 0;
    for (int64_t d = 0; d < docs.rows(); ++d) {
      SCOPED_TRACE(testing::Message() << "nodes " << nodes << " doc " << d);
      const double chosen = testutil::Dist2(docs, d, cb, got.bmu[d]);
      EXPECT_NEAR(chosen, bfd[d], 1e-4 * (1 + bfd[d]));
      const double nnz = docs.offsets[d + 1] - docs.offsets[d];
      EXPECT_NEAR(nnz + got.score[d], chosen, 1e-4 * (1 + chosen));
      if (nodes == 1) {
        EXPECT_EQ(got.second[d], -1);
        EXPECT_EQ(got.bmu[d], 0);
        continue;
      }
      const double second = testutil::Dist2(docs, d, cb, bf2[d]);
      if (second - bfd[d] > 1e-3) {
        ++clear;
        EXPECT_EQ(got.bmu[d], bf[d]);
      }
      EXPECT_NE(got.second[d], got.bmu[d]);
      EXPECT_NEAR(testutil::Dist2(docs, d, cb, got.second[d]), second, 1e-3 * (1 + second));
    }
    if (nodes > 2) {
      EXPECT_GT(clear, docs.rows() / 2);
    }
  }
}

// Dyadic weights: all arithmetic is exact, so the answers must be identical to
// the brute force including the tie rule (lowest index first). Duplicate
// nodes force exact ties.
TEST(BmuCpu, ExactWithTiesOnDyadicWeights) {
  std::mt19937 rng(3);
  HostDocs docs = RandomDocs(300, 50, 12, rng);
  HostCodebook cb = DyadicCodebook(700, 50, rng, 3);
  // Make nodes 10, 400 and 699 copies of node 5.
  for (int64_t v = 0; v < 50; ++v) {
    for (int64_t copy : {10, 400, 699}) cb.f32[v * 700 + copy] = cb.f32[v * 700 + 5];
  }
  cb.UpdateNorms();
  Result got = RunCpu(docs, cb);
  std::vector<int32_t> bf(docs.rows()), bf2(docs.rows());
  cpu::BruteForceBmus(docs.view(), cb.view(), bf.data(), bf2.data(), nullptr);
  int ties = 0;
  for (int64_t d = 0; d < docs.rows(); ++d) {
    ASSERT_EQ(got.bmu[d], bf[d]) << d;
    ASSERT_EQ(got.second[d], bf2[d]) << d;
    ties += testutil::Dist2(docs, d, cb, bf[d]) == testutil::Dist2(docs, d, cb, bf2[d]);
  }
  EXPECT_GT(ties, 10);  // the test really exercises ties
}

TEST(BmuCpu, NodeMajorAndFp16AgreeWithFeatureMajor) {
  std::mt19937 rng(8);
  HostDocs docs = RandomDocs(200, 120, 30, rng);
  HostCodebook fm = RandomCodebook(530, 120, rng);
  Result ref = RunCpu(docs, fm);
  HostCodebook nm = testutil::WithLayout(fm, CodebookLayout::kNodeMajor);
  Result got = RunCpu(docs, nm);
  EXPECT_EQ(got.bmu, ref.bmu);
  EXPECT_EQ(got.second, ref.second);
  EXPECT_EQ(got.score, ref.score);  // same summation order: bit-identical

  // fp16 storage of dyadic weights is exact: same answers as fp32.
  HostCodebook dy = DyadicCodebook(530, 120, rng, 4);
  Result dref = RunCpu(docs, dy);
  HostCodebook half = testutil::ToHalf(dy);
  EXPECT_EQ(half.norms, dy.norms);
  Result hgot = RunCpu(docs, half);
  EXPECT_EQ(hgot.bmu, dref.bmu);
  EXPECT_EQ(hgot.second, dref.second);
  EXPECT_EQ(hgot.score, dref.score);
  HostCodebook half_nm = testutil::WithLayout(half, CodebookLayout::kNodeMajor);
  Result hnm = RunCpu(docs, half_nm);
  EXPECT_EQ(hnm.bmu, dref.bmu);
}

TEST(BmuCpu, SqNormsInDoubleAscending) {
  std::mt19937 rng(2);
  HostCodebook cb = RandomCodebook(37, 1000, rng);
  for (int64_t i = 0; i < 37; ++i) {
    double acc = 0;
    for (int64_t v = 0; v < 1000; ++v) acc += static_cast<double>(cb.f32[v * 37 + i]) * cb.f32[v * 37 + i];
    EXPECT_EQ(cb.norms[i], static_cast<float>(acc));
  }
  HostCodebook nm = testutil::WithLayout(cb, CodebookLayout::kNodeMajor);
  nm.UpdateNorms();
  EXPECT_EQ(nm.norms, cb.norms);
}

TEST(CodebookCpu, RandomFillIsLayoutAndTypeIndependent) {
  HostCodebook fm;
  fm.nodes = 37;
  fm.features = 23;
  fm.f32.resize(37 * 23);
  fm.norms.resize(37);
  std::vector<float> scale(23);
  for (int v = 0; v < 23; ++v) scale[v] = 0.1f * (v + 1);
  ASSERT_TRUE(FillRandomCodebook(Stream::Cpu(), fm.view(), 99, scale.data()).ok());
  HostCodebook nm = fm;
  nm.layout = CodebookLayout::kNodeMajor;
  ASSERT_TRUE(FillRandomCodebook(Stream::Cpu(), nm.view(), 99, scale.data()).ok());
  HostCodebook half = fm;
  half.type = WeightType::kFloat16;
  half.f16.resize(37 * 23);
  ASSERT_TRUE(FillRandomCodebook(Stream::Cpu(), half.view(), 99, scale.data()).ok());
  double mean = 0;
  for (int64_t v = 0; v < 23; ++v) {
    for (int64_t i = 0; i < 37; ++i) {
      const float w = fm.Weight(v, i);
      ASSERT_EQ(nm.Weight(v, i), w);
      ASSERT_EQ(half.f16[v * 37 + i], FloatToHalf(w));
      ASSERT_GE(w, 0.0f);
      ASSERT_LT(w, scale[v]);
      mean += w / scale[v];
    }
  }
  EXPECT_NEAR(mean / (37 * 23), 0.5, 0.05);
  EXPECT_EQ(nm.norms, fm.norms);
  HostCodebook other = fm;
  ASSERT_TRUE(FillRandomCodebook(Stream::Cpu(), other.view(), 100, scale.data()).ok());
  EXPECT_NE(other.f32, fm.f32);
}

TEST(BmuCpu, RejectsBadArguments) {
  std::mt19937 rng(1);
  HostDocs docs = RandomDocs(10, 20, 5, rng);
  HostCodebook cb = RandomCodebook(9, 20, rng);
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu());
  ASSERT_TRUE(set.ok());
  std::vector<int32_t> bmu(10);
  BmuOutput out{bmu.data(), nullptr, nullptr};
  EXPECT_EQ(FindBmus(Stream::Cpu(), BmuAlgorithm::kNodeMajor, *set, cb.view(), out).code(),
            absl::StatusCode::kInvalidArgument);  // layout mismatch
  EXPECT_EQ(FindBmus(Stream::Cpu(), BmuAlgorithm::kCusparseRowOrder, *set, cb.view(), out).code(),
            absl::StatusCode::kUnimplemented);
  HostCodebook other = RandomCodebook(9, 21, rng);
  EXPECT_EQ(FindBmus(Stream::Cpu(), BmuAlgorithm::kFeatureMajor, *set, other.view(), out).code(),
            absl::StatusCode::kInvalidArgument);  // feature count
  EXPECT_EQ(FindBmus(Stream::Cpu(), BmuAlgorithm::kFeatureMajor, *set, cb.view(), BmuOutput{}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(FindBmus(Stream::Cpu(), BmuAlgorithm::kFeatureMajor, *set, cb.view(), out).ok());
}

}  // namespace
}  // namespace som
}  // namespace tessera
