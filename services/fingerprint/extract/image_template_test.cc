// Image in, template out: the path every front end takes for images, on
// synthetic prints (image_test_encoders.h makes the files).
#include "services/fingerprint/extract/image_template.h"

#include <random>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"
#include "services/fingerprint/extract/minutiae_overlay.h"
#include "services/fingerprint/extract/synthetic_print.h"
#include "services/fingerprint/image/image_test_encoders.h"

namespace tessera {
namespace fingerprint {
namespace {

absl::Span<const uint8_t> Bytes(const std::vector<uint8_t>& v) { return absl::MakeConstSpan(v); }

// A 500-ppi PNG (pHYs 19685 pixels per metre) of a synthetic print.
std::string PrintPng(uint32_t finger, uint32_t impression = 0, double noise = 8) {
  PngSpec spec = GrayPng(SyntheticPrint({.finger = finger, .impression = impression, .noise = noise}));
  spec.x_ppm = 19685;
  return EncodePng(spec);
}

TEST(ImageTemplateTest, APrintBecomesAnIsoTemplateWithItsQuality) {
  absl::StatusOr<ImageTemplate> t = TemplateFromImage(PrintPng(3), {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->image_format, ImageFormat::kPng);
  EXPECT_EQ(t->width, 300);
  EXPECT_EQ(t->height, 360);
  EXPECT_NEAR(t->ppi, 500, 1);
  absl::StatusOr<std::vector<Template>> views = ParseTemplateRecordAs(TemplateFormat::kIso19794, Bytes(t->record));
  ASSERT_TRUE(views.ok()) << views.status();
  ASSERT_EQ(views->size(), 1u);
  const Template& v = (*views)[0];
  // 18 dislocations drawn; the extractor finds most of them, plus ridges
  // running out at the print's fading edge.
  EXPECT_GE(v.minutiae.size(), 9u);
  EXPECT_LE(v.minutiae.size(), 40u);
  EXPECT_EQ(v.minutiae.size(), t->extraction.view.minutiae.size());
  EXPECT_GT(t->quality.score, 20);
  EXPECT_EQ(v.finger_quality, t->quality.score);
  EXPECT_EQ(v.width, 300);
}

TEST(ImageTemplateTest, AnsiOnRequestAndOnlyIsoOrAnsi) {
  absl::StatusOr<ImageTemplate> t = TemplateFromImage(PrintPng(4), {}, TemplateFormat::kAnsi378);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(ParseTemplateRecordAs(TemplateFormat::kAnsi378, Bytes(t->record)).ok());
  EXPECT_EQ(TemplateFromImage(PrintPng(4), {}, TemplateFormat::kXyt).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ImageTemplateTest, TheQualityGateNamesTheQuality) {
  absl::StatusOr<ImageTemplate> clean = TemplateFromImage(PrintPng(5), {});
  absl::StatusOr<ImageTemplate> noisy = TemplateFromImage(PrintPng(5, 0, 70), {});
  ASSERT_TRUE(clean.ok()) << clean.status();
  ASSERT_TRUE(noisy.ok()) << noisy.status();
  ASSERT_LT(noisy->quality.score, clean->quality.score);
  ImageInput strict;
  strict.min_quality = clean->quality.score;
  EXPECT_TRUE(TemplateFromImage(PrintPng(5), strict).ok());
  absl::Status s = TemplateFromImage(PrintPng(5, 0, 70), strict).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find(absl::StrCat("image quality ", noisy->quality.score)), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find(absl::StrCat("minimum ", clean->quality.score)), absl::string_view::npos) << s;
  ImageInput bad;
  bad.min_quality = 101;
  EXPECT_EQ(TemplateFromImage(PrintPng(5), bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckImageQuality(40, 40).ok());
  EXPECT_EQ(CheckImageQuality(39, 40).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(CheckImageQuality(0, 0).ok());
}

TEST(ImageTemplateTest, UnknownResolutionMustBeGiven) {
  const std::string png = EncodePng(GrayPng(SyntheticPrint({.finger = 6})));  // no pHYs
  absl::Status s = TemplateFromImage(png, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  ImageInput given;
  given.decode.ppi = 500;
  EXPECT_TRUE(TemplateFromImage(png, given).ok());
}

TEST(ImageTemplateTest, NoPrintOrNoImageIsAClearError) {
  GrayImage blank;
  blank.width = 200;
  blank.height = 200;
  blank.ppi = 500;
  blank.pixels.assign(200 * 200, 200);
  PngSpec spec = GrayPng(blank);
  spec.x_ppm = 19685;
  absl::Status s = TemplateFromImage(EncodePng(spec), {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("no minutiae"), absl::string_view::npos) << s;
  std::mt19937 rng(9);
  std::string noise(4000, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  EXPECT_EQ(TemplateFromImage(noise, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TemplateFromImage("", {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ImageTemplateTest, ImagesAreToldFromTemplates) {
  EXPECT_TRUE(LooksLikeImage(PrintPng(1)));
  absl::StatusOr<ImageTemplate> t = TemplateFromImage(PrintPng(1), {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(LooksLikeImage(std::string(t->record.begin(), t->record.end())));
  EXPECT_FALSE(LooksLikeImage("12 34 90\n"));
}

TEST(ImageTemplateTest, TheOverlayMarksEachMinutiaOnTheEnhancedImage) {
  absl::StatusOr<ImageTemplate> t = TemplateFromImage(PrintPng(2), {});
  ASSERT_TRUE(t.ok()) << t.status();
  const Image8 overlay = DrawMinutiaeOverlay(t->extraction, 2);
  EXPECT_EQ(overlay.width, 600);
  EXPECT_EQ(overlay.height, 720);
  EXPECT_EQ(overlay.channels, 3);
  // A coloured (not gray) pixel within a few pixels of every minutia.
  for (const Minutia& m : t->extraction.view.minutiae) {
    bool marked = false;
    for (int dy = -8; dy <= 8 && !marked; ++dy) {
      for (int dx = -8; dx <= 8 && !marked; ++dx) {
        const int x = m.x * 2 + dx, y = m.y * 2 + dy;
        if (x < 0 || y < 0 || x >= overlay.width || y >= overlay.height) continue;
        marked = overlay.at(x, y, 0) != overlay.at(x, y, 1);
      }
    }
    EXPECT_TRUE(marked) << "minutia at " << m.x << "," << m.y;
  }
  absl::StatusOr<std::string> png = EncodePngBytes(overlay);
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(DetectImageFormat(*png), ImageFormat::kPng);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
