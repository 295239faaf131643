// CUDA group-bounded BMU search (group_bounds.cu) and the CUDA update's group
// drift (batch_update.cu) against the CPU reference.
//
// Tolerances: BMU and score bit for bit (the same fp32 sums in the same
// order), second-best too after a full search; the bounds differ from the
// CPU's in their last bits (the device moves them in fp32 with directed
// rounding, the CPU in double), so they are checked against the exact group
// minima instead, and the searched pair counts within 1 %. The update's drift is checked against the exact
// changes of the device codebook (>= and within 1e-6 relative).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/som/batch_update.h"
#include "kernels/som/group_bounds.h"
#include "kernels/som/device_test_util.h"
#include "kernels/som/test_util.h"

namespace tessera {
namespace som {
namespace {

using testutil::DyadicCodebook;
using testutil::HostCodebook;
using testutil::ToDevice;
using testutil::ToHost;
using testutil::HostDocs;
using testutil::RandomCodebook;
using testutil::ZipfTopicDocs;

double ExactScore(const HostDocs& docs, const HostCodebook& cb, int64_t d, int64_t node) {
  double dot = 0;
  for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) dot += cb.Weight(docs.indices[k], node);
  return static_cast<double>(cb.norms[node]) - 2.0 * dot;
}

// Both backends search the same documents against the same codebooks: a full
// search, then bounded ones after each update (the CPU update and its drift,
// uploaded), from the same previous BMUs and bounds (the CPU's, so both decide
// from the same bounds).
void CheckAgainstCpu(HostCodebook cb, const HostDocs& docs, const GridShape& grid, int strip, int epochs) {
  auto stream = Stream::Create(Backend::kCuda, 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const int64_t n = docs.rows(), m = cb.nodes, groups = GroupCount(m, strip);
  auto host_set = DocumentSet::Create(docs.view(), Stream::Cpu(), DocumentParts{false, true, false});
  auto device_set = DocumentSet::Create(docs.view(), *stream, DocumentParts{false, false, false});
  ASSERT_TRUE(host_set.ok() && device_set.ok());
  std::vector<int32_t> bmu(n, -1), second(n, -1);
  std::vector<float> score(n, 0), lower(n * groups, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> rise(cb.features * groups), change(groups);
  const GroupBoundsView host_bounds{strip, groups, lower.data()};
  const GroupDriftView host_drift{strip, groups, rise.data(), change.data()};
  for (int epoch = 0; epoch < epochs; ++epoch) {
    SCOPED_TRACE(testing::Message() << "epoch " << epoch);
    const bool bounded = epoch > 0;
    // The device gets the CPU's state before the search.
    auto d_weights = cb.type == WeightType::kFloat32 ? ToDevice(cb.f32, *stream) : ToDevice(cb.f16, *stream);
    auto d_norms = ToDevice(cb.norms, *stream);
    auto d_bmu = ToDevice(bmu, *stream);
    auto d_second = ToDevice(std::vector<int32_t>(n, -9), *stream);
    auto d_score = ToDevice(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()), *stream);
    auto d_lower = ToDevice(lower, *stream);
    auto d_rise = ToDevice(rise, *stream);
    auto d_change = ToDevice(change, *stream);
    CodebookView dcb = cb.view();
    dcb.weights = d_weights->data();
    dcb.sq_norms = static_cast<float*>(d_norms->data());
    const GroupBoundsView device_bounds{strip, groups, static_cast<float*>(d_lower->data())};
    const GroupDriftView device_drift{strip, groups, static_cast<float*>(d_rise->data()),
                                      static_cast<float*>(d_change->data())};
    BmuHints hints;
    hints.previous_bmu = bounded ? static_cast<const int32_t*>(d_bmu->data()) : nullptr;  // aliased, as the trainer
    GroupSearchStats device_stats, host_stats;
    SomWorkspace ws;
    ASSERT_TRUE(FindBmusGroupBounded(*stream, *device_set, dcb,
                                     BmuOutput{static_cast<int32_t*>(d_bmu->data()),
                                               static_cast<int32_t*>(d_second->data()),
                                               static_cast<float*>(d_score->data())},
                                     device_bounds, bounded ? &device_drift : nullptr, &ws, hints, &device_stats)
                    .ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    ASSERT_TRUE(FindBmusGroupBounded(Stream::Cpu(), *host_set, cb.view(),
                                     BmuOutput{bmu.data(), second.data(), score.data()}, host_bounds,
                                     bounded ? &host_drift : nullptr, nullptr, BmuHints(), &host_stats)
                    .ok());
    const auto cuda_bmu = ToHost<int32_t>(d_bmu, n, *stream);
    const auto cuda_second = ToHost<int32_t>(d_second, n, *stream);
    const auto cuda_score = ToHost<float>(d_score, n, *stream);
    const auto cuda_lower = ToHost<float>(d_lower, n * groups, *stream);
    ASSERT_EQ(cuda_bmu, bmu);
    ASSERT_EQ(std::memcmp(cuda_score.data(), score.data(), 4 * n), 0);
    if (!bounded) {
      ASSERT_EQ(cuda_second, second);
      EXPECT_EQ(device_stats.pairs_searched, n * groups);
    }
    for (int64_t d = 0; d < n; ++d) {
      for (int64_t g = 0; g < groups; ++g) {
        double minimum = std::numeric_limits<double>::infinity();
        for (int64_t j = g * strip; j < std::min(m, (g + 1) * strip); ++j) {
          minimum = std::min(minimum, ExactScore(docs, cb, d, j));
        }
        ASSERT_LE(cuda_lower[d * groups + g], minimum) << "document " << d << " group " << g;
      }
    }
    EXPECT_NEAR(static_cast<double>(device_stats.pairs_searched), static_cast<double>(host_stats.pairs_searched),
                0.01 * host_stats.pairs_searched);
    std::printf("  strip %d epoch %d: pairs searched cuda %lld cpu %lld of %lld, documents skipped %lld / %lld\n",
                strip, epoch, static_cast<long long>(device_stats.pairs_searched),
                static_cast<long long>(host_stats.pairs_searched), static_cast<long long>(n * groups),
                static_cast<long long>(device_stats.documents_skipped),
                static_cast<long long>(host_stats.documents_skipped));
    // The CPU update with its drift for the next epoch.
    UpdateOptions options;
    options.group_drift = host_drift;
    ASSERT_TRUE(BatchUpdate(Stream::Cpu(), host_set->csc(), bmu.data(), grid,
                            BoxBlurForRadius(epoch < 1 ? 1.5 : 0.45, 3), cb.view(), nullptr, options)
                    .ok());
  }
}

TEST(GroupBoundsCuda, MatchesCpuFp32) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  const HostDocs docs = ZipfTopicDocs(3000, 300, 10, 8, rng);
  const GridShape grid{16, 12, Topology::kPlanar};
  for (int strip : {4, 16, 32, 64}) {
    CheckAgainstCpu(RandomCodebook(grid.nodes(), 300, rng, 0.0f, 0.2f), docs, grid, strip, 5);
    if (testing::Test::HasFatalFailure()) return;
  }
}

TEST(GroupBoundsCuda, MatchesCpuFp16NegativeWeightsRaggedGroup) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  const HostDocs docs = ZipfTopicDocs(2000, 200, 8, 8, rng);
  const GridShape grid{10, 10, Topology::kToroidal};  // 100 nodes: groups of 16, the last of 4
  CheckAgainstCpu(testutil::ToHalf(RandomCodebook(grid.nodes(), 200, rng, -0.2f, 0.3f)), docs, grid, 16, 5);
  if (testing::Test::HasFatalFailure()) return;
  CheckAgainstCpu(RandomCodebook(grid.nodes(), 200, rng, -0.2f, 0.3f), docs, grid, 8, 5);
}

// Many exact ties (dyadic weights): the fused kernel's lanes and passes meet
// tied scores in another order than the CPU, and Top2's (score, index) order
// must still give the CPU's BMU and second.
TEST(GroupBoundsCuda, MatchesCpuWithTiedScores) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  const HostDocs docs = ZipfTopicDocs(2000, 64, 8, 8, rng);
  const GridShape grid{8, 8, Topology::kPlanar};
  for (int strip : {4, 16}) {
    CheckAgainstCpu(DyadicCodebook(grid.nodes(), 64, rng, 3), docs, grid, strip, 4);
    if (testing::Test::HasFatalFailure()) return;
  }
}

// The device update's drift bounds the device codebook's true changes.
TEST(GroupBoundsCuda, UpdateDriftBoundsTheChanges) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda, 0);
  ASSERT_TRUE(stream.ok());
  std::mt19937 rng(23);
  const HostDocs docs = ZipfTopicDocs(2000, 150, 6, 6, rng);
  const GridShape grid{12, 8, Topology::kPlanar};
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    HostCodebook before = RandomCodebook(grid.nodes(), 150, rng, 0.0f, 0.3f);
    if (type == WeightType::kFloat16) before = testutil::ToHalf(before);
    const int strip = 16;
    const int64_t m = grid.nodes(), groups = GroupCount(m, strip);
    std::vector<int32_t> bmu(docs.rows());
    std::uniform_int_distribution<int32_t> node(0, static_cast<int32_t>(m - 1));
    for (int32_t& b : bmu) b = node(rng);
    auto set = DocumentSet::Create(docs.view(), *stream, DocumentParts{false, true, false});
    ASSERT_TRUE(set.ok());
    auto d_weights = type == WeightType::kFloat32 ? ToDevice(before.f32, *stream) : ToDevice(before.f16, *stream);
    auto d_norms = ToDevice(before.norms, *stream);
    auto d_bmu = ToDevice(bmu, *stream);
    auto d_rise = ToDevice(std::vector<float>(150 * groups, -1.0f), *stream);
    auto d_change = ToDevice(std::vector<float>(groups, 1e30f), *stream);
    CodebookView dcb = before.view();
    dcb.weights = d_weights->data();
    dcb.sq_norms = static_cast<float*>(d_norms->data());
    UpdateOptions options;
    options.slab_bytes = 4 * m * 40;  // several slabs
    options.group_drift = GroupDriftView{strip, groups, static_cast<float*>(d_rise->data()),
                                         static_cast<float*>(d_change->data())};
    ASSERT_TRUE(BatchUpdate(*stream, set->csc(), static_cast<const int32_t*>(d_bmu->data()), grid,
                            BoxBlurForRadius(0.45, 3), dcb, nullptr, options)
                    .ok());
    HostCodebook after = before;
    if (type == WeightType::kFloat32) {
      after.f32 = ToHost<float>(d_weights, before.f32.size(), *stream);
    } else {
      after.f16 = ToHost<uint16_t>(d_weights, before.f16.size(), *stream);
    }
    after.norms = ToHost<float>(d_norms, m, *stream);
    const auto rise = ToHost<float>(d_rise, 150 * groups, *stream);
    const auto change = ToHost<float>(d_change, groups, *stream);
    for (int64_t g = 0; g < groups; ++g) {
      double least = std::numeric_limits<double>::infinity();
      for (int64_t j = g * strip; j < std::min(m, (g + 1) * strip); ++j) {
        least = std::min(least, static_cast<double>(after.norms[j]) - before.norms[j]);
      }
      ASSERT_LE(change[g], least) << g;
      ASSERT_GE(change[g], least - 1e-6 * std::abs(least) - 1e-30) << g;
      for (int64_t v = 0; v < 150; ++v) {
        double largest = 0;
        for (int64_t j = g * strip; j < std::min(m, (g + 1) * strip); ++j) {
          largest = std::max(largest, static_cast<double>(after.Weight(v, j)) - before.Weight(v, j));
        }
        ASSERT_GE(rise[v * groups + g], largest) << v << " " << g;
        ASSERT_LE(rise[v * groups + g], largest * (1 + 1e-6)) << v << " " << g;
      }
    }
  }
}

}  // namespace
}  // namespace som
}  // namespace tessera
