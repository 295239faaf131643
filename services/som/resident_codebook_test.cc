// ResidentCodebook's refusals, on any machine: a wrong feature count is
// INVALID_ARGUMENT before anything is uploaded; without a GPU a projection is
// FAILED_PRECONDITION naming the reason, and nothing is uploaded.
#include "services/som/resident_codebook.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/device.h"
#include "services/som/trainer.h"

namespace tessera {
namespace som {
namespace {

SomModel SmallModel() {
  SparseBinaryMatrix train(6);
  for (int d = 0; d < 12; ++d) {
    const int32_t a = d % 6, b = (d + 2) % 6;
    EXPECT_TRUE(train.AppendRow(std::vector<int32_t>{std::min(a, b), std::max(a, b)}).ok());
  }
  TrainOptions o;
  o.grid = GridShape{3, 2, Topology::kPlanar};
  auto model = InitializeModel(train, o);
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

TEST(ResidentCodebook, WrongFeatureCountIsInvalidArgument) {
  const SomModel model = SmallModel();
  ResidentCodebook resident(model);
  SparseBinaryMatrix docs(model.features + 2);
  ASSERT_TRUE(docs.AppendRow(std::vector<int32_t>{1}).ok());
  const absl::Status s = resident.Project(docs).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("8 features, the map 6"), absl::string_view::npos) << s;
  EXPECT_EQ(resident.uploads(), 0);
}

TEST(ResidentCodebook, WithoutAGpuIsFailedPrecondition) {
  if (DeviceRegistry::Get().cuda_available()) GTEST_SKIP() << "a GPU is present (resident_codebook_cuda_test)";
  const SomModel model = SmallModel();
  ResidentCodebook resident(model);
  SparseBinaryMatrix docs(model.features);
  ASSERT_TRUE(docs.AppendRow(std::vector<int32_t>{1, 2}).ok());
  const absl::Status s = resident.Project(docs).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(resident.uploads(), 0);
  EXPECT_EQ(resident.device_bytes(), 0u);
}

}  // namespace
}  // namespace som
}  // namespace tessera
