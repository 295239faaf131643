// CUDA MCC descriptors against the CPU reference: every bit, mask and
// validity decision must be identical (fp_math.h makes the arithmetic
// deterministic; see mcc.cu). Real FVC2002 templates when the data is found
// (TESSERA_FINGERPRINT_DATA), synthetic ones otherwise, plus edge cases.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/testing/gpu_test.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

void ExpectSameTemplates(const std::vector<MccTemplate>& gpu, const std::vector<MccTemplate>& cpu_ref) {
  ASSERT_EQ(gpu.size(), cpu_ref.size());
  long long cylinders = 0, differing_words = 0;
  for (size_t t = 0; t < gpu.size(); ++t) {
    ASSERT_EQ(gpu[t].cylinders.size(), cpu_ref[t].cylinders.size()) << "template " << t;
    EXPECT_EQ(gpu[t].num_minutiae, cpu_ref[t].num_minutiae);
    for (size_t i = 0; i < gpu[t].cylinders.size(); ++i) {
      const MccCylinder &a = gpu[t].cylinders[i], &b = cpu_ref[t].cylinders[i];
      ASSERT_EQ(a.minutia, b.minutia) << "template " << t;
      EXPECT_EQ(a.x, b.x);
      EXPECT_EQ(a.y, b.y);
      EXPECT_EQ(a.theta, b.theta);
      for (int w = 0; w < kMccBitWords; ++w) differing_words += a.bits[w] != b.bits[w];
      for (int w = 0; w < kMccMaskWords; ++w) differing_words += a.mask[w] != b.mask[w];
      ++cylinders;
    }
  }
  std::printf("%lld cylinders compared, %lld differing 64-bit words\n", cylinders, differing_words);
  EXPECT_EQ(differing_words, 0);
}

TEST(MccCuda, BitsEqualCpuOnFvcTemplates) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int db = 1; db <= 4; ++db) {
    const auto templates = testing::TestTemplates(db, 80, 100 + db);
    auto gpu = BuildMccTemplates(*stream, templates);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    auto cpu_ref = BuildMccTemplates(Stream::Cpu(), templates);
    ASSERT_TRUE(cpu_ref.ok());
    ExpectSameTemplates(*gpu, *cpu_ref);
  }
}

TEST(MccCuda, EdgeCases) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<std::vector<MinutiaPoint>> templates;
  templates.push_back({});                                          // empty
  templates.push_back({{100, 100, 1.0f}});                          // one minutia
  templates.push_back({{100, 100, 0}, {130, 100, 1}, {160, 100, 2}, {190, 100, 3}});  // collinear
  templates.push_back({{50, 50, -1.0f}, {60, 55, 7.5f}, {55, 70, 3.0f}, {70, 60, 12.0f}});  // unwrapped angles
  std::mt19937 rng(9);
  std::vector<MinutiaPoint> dense;  // the 255-minutia limit, non-integer coordinates
  for (int i = 0; i < kMccMaxMinutiae; ++i) {
    dense.push_back({std::uniform_real_distribution<float>(0, 300)(rng), std::uniform_real_distribution<float>(0, 400)(rng),
                     std::uniform_real_distribution<float>(0, 6.2831f)(rng)});
  }
  templates.push_back(dense);
  for (const auto& t : testing::SyntheticTemplates(20, 77)) templates.push_back(t);
  auto gpu = BuildMccTemplates(*stream, templates);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu_ref = BuildMccTemplates(Stream::Cpu(), templates);
  ASSERT_TRUE(cpu_ref.ok());
  ExpectSameTemplates(*gpu, *cpu_ref);
  EXPECT_TRUE((*gpu)[0].cylinders.empty());
  EXPECT_TRUE((*gpu)[1].cylinders.empty());
  EXPECT_GT((*gpu)[4].cylinders.size(), 200u);
  // Invalid input is rejected before any GPU work.
  EXPECT_EQ(BuildMccTemplates(*stream, {std::vector<MinutiaPoint>(256)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
