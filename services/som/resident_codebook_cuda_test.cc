// ResidentCodebook on the GPU: projections equal the CPU backend's bit for bit
// (BMU, second unit, score; quality exactly), the codebook is uploaded once
// however many calls follow (the uploads() seam), also under concurrent
// calls, for fp32 and fp16 maps.
#include "services/som/resident_codebook.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "common/testing/gpu_test.h"
#include "services/som/synthetic.h"
#include "services/som/testing/topic_corpus.h"
#include "services/som/trainer.h"

namespace tessera {
namespace som {
namespace {

SparseBinaryMatrix Corpus(int64_t docs, uint64_t seed) {
  return GenerateSyntheticCorpus(testing::TopicCorpus(docs, 700, /*grid=*/5, seed));
}

void ExpectSameAsCpu(SomModel& model, const SparseBinaryMatrix& docs, const Projection& gpu) {
  auto cpu = ProjectDocuments(model, docs, Backend::kCpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(gpu.bmu, cpu->bmu);
  EXPECT_EQ(gpu.second, cpu->second);
  EXPECT_EQ(gpu.score, cpu->score);
  EXPECT_EQ(gpu.quality.qe_euclidean, cpu->quality.qe_euclidean);
  EXPECT_EQ(gpu.quality.topographic_error, cpu->quality.topographic_error);
}

TEST(ResidentCodebookCuda, SameAsCpuAndUploadedOnce) {
  TESSERA_SKIP_WITHOUT_GPU();
  const SparseBinaryMatrix train = Corpus(4000, 1);
  for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
    SCOPED_TRACE(WeightTypeName(type));
    TrainOptions o;
    o.grid = GridShape{19, 13, Topology::kPlanar};
    o.weight_type = type;
    o.max_epochs = 3;
    auto trained = TrainSom(train, o);
    ASSERT_TRUE(trained.ok()) << trained.status();
    SomModel& model = trained->model;
    ResidentCodebook resident(model);
    EXPECT_EQ(resident.uploads(), 0);
    EXPECT_EQ(resident.device_bytes(), 0u);
    const SparseBinaryMatrix first = Corpus(1500, 2), second = Corpus(333, 3);
    auto p1 = resident.Project(first);
    ASSERT_TRUE(p1.ok()) << p1.status();
    EXPECT_EQ(resident.uploads(), 1);
    ExpectSameAsCpu(model, first, *p1);
    auto p2 = resident.Project(second);
    ASSERT_TRUE(p2.ok()) << p2.status();
    EXPECT_EQ(resident.uploads(), 1) << "the second call re-uploaded the codebook";
    ExpectSameAsCpu(model, second, *p2);
    EXPECT_EQ(resident.device_bytes(),
              static_cast<size_t>(WeightBytes(type)) * model.features * model.grid.nodes() + 4 * model.grid.nodes());
    // A bad request does not disturb the resident copy.
    SparseBinaryMatrix wrong(model.features + 1);
    ASSERT_TRUE(wrong.AppendRow(std::vector<int32_t>{0}).ok());
    EXPECT_EQ(resident.Project(wrong).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(resident.uploads(), 1);
  }
}

TEST(ResidentCodebookCuda, ConcurrentCallsShareOneUpload) {
  TESSERA_SKIP_WITHOUT_GPU();
  const SparseBinaryMatrix train = Corpus(3000, 4);
  TrainOptions o;
  o.grid = GridShape{16, 16, Topology::kToroidal};
  o.max_epochs = 2;
  auto trained = TrainSom(train, o);
  ASSERT_TRUE(trained.ok()) << trained.status();
  const SparseBinaryMatrix docs = Corpus(800, 5);
  auto cpu = ProjectDocuments(trained->model, docs, Backend::kCpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ResidentCodebook resident(trained->model);
  constexpr int kThreads = 8;
  std::vector<std::vector<int32_t>> bmus(kThreads);
  std::vector<absl::Status> statuses(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) {
        auto p = resident.Project(docs);
        statuses[t] = p.status();
        if (!p.ok()) return;
        bmus[t] = p->bmu;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(statuses[t].ok()) << statuses[t];
    EXPECT_EQ(bmus[t], cpu->bmu) << "thread " << t;
  }
  EXPECT_EQ(resident.uploads(), 1);
}

}  // namespace
}  // namespace som
}  // namespace tessera
