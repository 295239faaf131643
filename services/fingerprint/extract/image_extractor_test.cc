// Batches of images: the CPU extractor gives each image exactly what
// TemplateFromImage gives it (statuses in place); the GPU one (skipped
// without a GPU) the same statuses and templates within extract_cuda.h's
// parity tolerances.
#include "services/fingerprint/extract/image_extractor.h"

#include <cmath>

#include "common/testing/gpu_test.h"
#include "gtest/gtest.h"
#include "services/fingerprint/extract/synthetic_print.h"
#include "services/fingerprint/image/image_test_encoders.h"

namespace tessera {
namespace fingerprint {
namespace {

std::string PrintPng(uint32_t finger, int width, int height) {
  PngSpec spec = GrayPng(SyntheticPrint({.width = width, .height = height, .finger = finger}));
  spec.x_ppm = 19685;  // 500 ppi
  return EncodePng(spec);
}

// Six prints of three sizes and two bad images, in a mixed order.
std::vector<std::string> Batch() {
  return {PrintPng(1, 300, 360), "not an image", PrintPng(2, 256, 320), PrintPng(3, 320, 400),
          PrintPng(4, 300, 360), std::string("\x89PNG\r\n\x1a\n", 8), PrintPng(5, 256, 256), PrintPng(6, 288, 384)};
}

std::vector<absl::string_view> Views(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

TEST(ImageExtractorTest, CpuBatchEqualsOneByOne) {
  absl::StatusOr<std::unique_ptr<ImageExtractor>> extractor = ImageExtractor::Create("cpu");
  ASSERT_TRUE(extractor.ok()) << extractor.status();
  EXPECT_EQ((*extractor)->backend(), "cpu");
  const std::vector<std::string> images = Batch();
  std::vector<ImageInput> inputs(images.size());
  inputs[3].min_quality = 100;  // may refuse: whatever it says must match
  const auto results = (*extractor)->ExtractAll(Views(images), inputs);
  ASSERT_EQ(results.size(), images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    absl::StatusOr<ImageTemplate> one = TemplateFromImage(images[i], inputs[i]);
    ASSERT_EQ(results[i].status(), one.status()) << i;
    if (one.ok()) {
      EXPECT_EQ(results[i]->record, one->record) << i;
      EXPECT_EQ(results[i]->quality.score, one->quality.score) << i;
    }
  }
  EXPECT_FALSE(results[1].ok());
  EXPECT_FALSE(results[5].ok());
  EXPECT_TRUE(results[0].ok());
}

TEST(ImageExtractorTest, GpuBatchMatchesTheCpuWithinTolerance) {
  TESSERA_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<ImageExtractor>> gpu = ImageExtractor::Create("cuda");
  absl::StatusOr<std::unique_ptr<ImageExtractor>> cpu = ImageExtractor::Create("cpu");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*gpu)->backend(), "cuda");
  const std::vector<std::string> images = Batch();
  const std::vector<ImageInput> inputs(images.size());
  const auto g = (*gpu)->ExtractAll(Views(images), inputs, TemplateFormat::kIso19794, /*keep_enhanced=*/true);
  const auto c = (*cpu)->ExtractAll(Views(images), inputs);
  for (size_t i = 0; i < images.size(); ++i) {
    ASSERT_EQ(g[i].ok(), c[i].ok()) << i << ": " << g[i].status() << " vs " << c[i].status();
    if (!c[i].ok()) {
      EXPECT_EQ(g[i].status().code(), c[i].status().code()) << i;
      continue;
    }
    // extract_cuda.h's minutiae tolerance: unmatched <= 5 % of the CPU's + 1.
    const auto& gm = g[i]->extraction.view.minutiae;
    const auto& cm = c[i]->extraction.view.minutiae;
    int matched = 0;
    for (const Minutia& a : cm) {
      for (const Minutia& b : gm) {
        if (a.type == b.type && std::hypot(a.x - b.x, a.y - b.y) <= 3) {
          ++matched;
          break;
        }
      }
    }
    const int allowed = static_cast<int>(cm.size()) / 20 + 1;
    EXPECT_LE(static_cast<int>(cm.size()) - matched, allowed) << i;
    EXPECT_LE(std::abs(static_cast<int>(gm.size()) - static_cast<int>(cm.size())), allowed) << i;
    EXPECT_NEAR(g[i]->quality.score, c[i]->quality.score, 2) << i;
    EXPECT_EQ(g[i]->extraction.enhanced.v.size(), c[i]->extraction.enhanced.v.size()) << i;
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
