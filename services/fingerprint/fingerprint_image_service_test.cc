// FingerprintService with images where templates go: Enroll, EnrollStream,
// Search, SearchBatch and Verify take FingerprintImage; Extract returns the
// template, the quality and an overlay; the quality gate and the size limits
// answer with clear statuses. Synthetic prints (synthetic_print.h) as PNG.
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/extract/synthetic_print.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/image/image_decode.h"
#include "services/fingerprint/image/image_test_encoders.h"
#include "services/fingerprint/service_testing.h"

namespace tessera {
namespace fingerprint {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;

// A 500-ppi PNG of impression `impression` of synthetic finger `finger`.
std::string PrintPng(uint32_t finger, uint32_t impression, double noise = 8) {
  PngSpec spec = GrayPng(SyntheticPrint({.finger = finger, .impression = impression, .noise = noise}));
  spec.x_ppm = 19685;
  return EncodePng(spec);
}

v1::FingerprintTemplate Image(const std::string& bytes, int min_quality = 0) {
  v1::FingerprintTemplate t;
  t.mutable_image()->set_data(bytes);
  t.mutable_image()->set_min_quality(min_quality);
  return t;
}

grpc::Status Enroll(TestServer& s, const std::string& id, const v1::FingerprintTemplate& record,
                    v1::EnrollResponse* resp) {
  grpc::ClientContext ctx;
  v1::EnrollRequest req;
  req.set_id(id);
  *req.mutable_record() = record;
  return s.stub().Enroll(&ctx, req, resp);
}

std::unique_ptr<TestServer> Start(FingerprintServiceOptions options = {}) {
  auto s = TestServer::Start(std::move(options));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(FingerprintImageServiceTest, ImagesEnrollSearchAndVerifyLikeTemplates) {
  std::unique_ptr<TestServer> s = Start();
  ASSERT_NE(s, nullptr);
  for (uint32_t f = 1; f <= 3; ++f) {
    v1::EnrollResponse resp;
    grpc::Status st = Enroll(*s, absl::StrCat("f", f), Image(PrintPng(f, 0)), &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.format(), "iso19794-2:2005");
    EXPECT_GE(resp.minutiae(), 8);
    EXPECT_GT(resp.quality(), 0);
    EXPECT_LE(resp.quality(), 100);
  }
  {  // Bulk: two more fingers and one bad image, reported by index.
    grpc::ClientContext ctx;
    v1::EnrollStreamResponse resp;
    auto writer = s->stub().EnrollStream(&ctx, &resp);
    for (uint32_t f = 4; f <= 6; ++f) {
      v1::EnrollRequest req;
      req.set_id(absl::StrCat("f", f));
      *req.mutable_record() = Image(f == 5 ? std::string("\x89PNG\r\n\x1a\n-truncated") : PrintPng(f, 0));
      ASSERT_TRUE(writer->Write(req));
    }
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_EQ(resp.enrolled(), 2);
    ASSERT_EQ(resp.errors_size(), 1);
    EXPECT_EQ(resp.errors(0).index(), 1);
    EXPECT_EQ(resp.errors(0).code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_EQ(resp.gallery_size(), 5);
  }
  // The gallery keeps the extracted template, not the image.
  std::vector<std::string> ids = s->service().gallery().List("", 10);
  EXPECT_EQ(ids.size(), 5u);
  for (uint32_t f : {1u, 2u, 4u, 6u}) {
    grpc::ClientContext ctx;
    v1::SearchRequest req;
    *req.mutable_probe() = Image(PrintPng(f, 1));
    req.set_top_k(3);
    v1::SearchResponse resp;
    grpc::Status st = s->stub().Search(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_GT(resp.candidates_size(), 0);
    EXPECT_EQ(resp.candidates(0).id(), absl::StrCat("f", f));
  }
  {  // A batch mixing image probes; a bad one is named by index.
    grpc::ClientContext ctx;
    v1::SearchBatchRequest req;
    for (uint32_t f : {3u, 1u, 2u}) *req.add_probes() = Image(PrintPng(f, 2));
    req.set_top_k(1);
    v1::SearchBatchResponse resp;
    grpc::Status st = s->stub().SearchBatch(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(resp.results_size(), 3);
    EXPECT_EQ(resp.results(0).candidates(0).id(), "f3");
    EXPECT_EQ(resp.results(1).candidates(0).id(), "f1");
    EXPECT_EQ(resp.results(2).candidates(0).id(), "f2");
    grpc::ClientContext bad_ctx;
    *req.add_probes() = Image("not an image at all");
    st = s->stub().SearchBatch(&bad_ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("probe 3"));
  }
  {  // 1:1 between two images: mates score higher than non-mates.
    float mate = 0, other = 0;
    for (uint32_t g : {2u, 3u}) {
      grpc::ClientContext ctx;
      v1::VerifyRequest req;
      *req.mutable_probe() = Image(PrintPng(2, 1));
      *req.mutable_reference() = Image(PrintPng(g, 0));
      v1::VerifyResponse resp;
      grpc::Status st = s->stub().Verify(&ctx, req, &resp);
      ASSERT_TRUE(st.ok()) << st.error_message();
      (g == 2 ? mate : other) = resp.score();
    }
    EXPECT_GT(mate, other + 0.1f);
  }
}

TEST(FingerprintImageServiceTest, ExtractGivesTheTemplateQualityAndOverlay) {
  std::unique_ptr<TestServer> s = Start();
  ASSERT_NE(s, nullptr);
  grpc::ClientContext ctx;
  v1::ExtractRequest req;
  req.mutable_image()->set_data(PrintPng(7, 0));
  req.set_overlay(true);
  v1::ExtractResponse resp;
  grpc::Status st = s->stub().Extract(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.format(), "iso19794-2:2005");
  EXPECT_EQ(resp.image_format(), "png");
  EXPECT_EQ(resp.width(), 300);
  EXPECT_EQ(resp.height(), 360);
  EXPECT_NEAR(resp.ppi(), 500, 1);
  EXPECT_FALSE(resp.below_min_quality());
  absl::StatusOr<std::vector<Template>> views = ParseTemplateRecordAs(
      TemplateFormat::kIso19794, absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(resp.record().data()),
                                                           resp.record().size()));
  ASSERT_TRUE(views.ok()) << views.status();
  EXPECT_EQ(static_cast<int>((*views)[0].minutiae.size()), resp.minutiae());
  EXPECT_EQ((*views)[0].finger_quality, resp.quality());
  absl::StatusOr<GrayImage> overlay = DecodeGrayImage(resp.overlay_png(), {});
  ASSERT_TRUE(overlay.ok()) << overlay.status();
  EXPECT_EQ(overlay->width, 600);

  // The same image enrolled reports the same quality.
  v1::EnrollResponse enrolled;
  ASSERT_TRUE(Enroll(*s, "f7", Image(PrintPng(7, 0)), &enrolled).ok());
  EXPECT_EQ(enrolled.quality(), resp.quality());
  EXPECT_EQ(enrolled.minutiae(), resp.minutiae());

  grpc::ClientContext ansi_ctx;
  req.set_format(v1::TEMPLATE_FORMAT_ANSI378);
  req.set_overlay(false);
  ASSERT_TRUE(s->stub().Extract(&ansi_ctx, req, &resp).ok());
  EXPECT_EQ(resp.format(), "ansi378-2004");
  EXPECT_TRUE(resp.overlay_png().empty());
  grpc::ClientContext xyt_ctx;
  req.set_format(v1::TEMPLATE_FORMAT_XYT);
  EXPECT_EQ(s->stub().Extract(&xyt_ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(FingerprintImageServiceTest, QualityGateAndLimitsAnswerClearly) {
  FingerprintServiceOptions options;
  options.image.max_image_bytes = 200000;
  std::unique_ptr<TestServer> s = Start(options);
  ASSERT_NE(s, nullptr);
  const std::string clean = PrintPng(8, 0), noisy = PrintPng(8, 0, 70);
  v1::ExtractResponse clean_q, noisy_q;
  for (auto [bytes, out] : {std::pair{&clean, &clean_q}, std::pair{&noisy, &noisy_q}}) {
    grpc::ClientContext ctx;
    v1::ExtractRequest req;
    req.mutable_image()->set_data(*bytes);
    ASSERT_TRUE(s->stub().Extract(&ctx, req, out).ok());
  }
  ASSERT_LT(noisy_q.quality(), clean_q.quality());
  const int gate = clean_q.quality();

  v1::EnrollResponse resp;
  grpc::Status st = Enroll(*s, "noisy", Image(noisy, gate), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr(absl::StrCat("image quality ", noisy_q.quality())));
  EXPECT_TRUE(Enroll(*s, "clean", Image(clean, gate), &resp).ok());
  {  // Search refuses the same way; Extract flags instead.
    grpc::ClientContext ctx;
    v1::SearchRequest req;
    *req.mutable_probe() = Image(noisy, gate);
    v1::SearchResponse sr;
    EXPECT_EQ(s->stub().Search(&ctx, req, &sr).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    grpc::ClientContext ectx;
    v1::ExtractRequest er;
    er.mutable_image()->set_data(noisy);
    er.mutable_image()->set_min_quality(gate);
    v1::ExtractResponse eresp;
    ASSERT_TRUE(s->stub().Extract(&ectx, er, &eresp).ok());
    EXPECT_TRUE(eresp.below_min_quality());
  }
  // Too many bytes, both data and image, bad fields.
  EXPECT_EQ(Enroll(*s, "big", Image(std::string(200001, 'x')), &resp).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  v1::FingerprintTemplate both = Image(clean);
  both.set_data("12 34 90\n");
  EXPECT_EQ(Enroll(*s, "both", both, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Enroll(*s, "q", Image(clean, 101), &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::FingerprintTemplate unknown_ppi = Image(EncodePng(GrayPng(SyntheticPrint({.finger = 9}))));
  st = Enroll(*s, "ppi", unknown_ppi, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  unknown_ppi.mutable_image()->set_ppi(500);
  EXPECT_TRUE(Enroll(*s, "ppi", unknown_ppi, &resp).ok());
  v1::FingerprintTemplate raw = Image(std::string(100 * 100, '\x80'));
  raw.mutable_image()->set_format(v1::IMAGE_FORMAT_PNG);
  raw.mutable_image()->set_width(100);
  EXPECT_EQ(Enroll(*s, "raw", raw, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(FingerprintImageServiceTest, TheServersMinimumQualityAppliesUnlessTheRequestSetsOne) {
  const std::string noisy = PrintPng(10, 0, 70);
  int quality = 0;
  {
    std::unique_ptr<TestServer> s = Start();
    ASSERT_NE(s, nullptr);
    v1::EnrollResponse resp;
    ASSERT_TRUE(Enroll(*s, "n", Image(noisy), &resp).ok());
    quality = resp.quality();
  }
  FingerprintServiceOptions options;
  options.image.min_quality = quality + 1;
  std::unique_ptr<TestServer> s = Start(options);
  ASSERT_NE(s, nullptr);
  v1::EnrollResponse resp;
  EXPECT_EQ(Enroll(*s, "n", Image(noisy), &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(Enroll(*s, "n", Image(noisy, quality), &resp).ok());
}

// The service's own device (server device "auto": the GPU extractor on a GPU
// machine, the CPU elsewhere): bulk enroll and batch search of images.
TEST(FingerprintImageServiceTest, ImagesOnTheServersDevice) {
  auto started = TestServer::Start({}, "auto");
  ASSERT_TRUE(started.ok()) << started.status();
  TestServer& s = **started;
  {
    grpc::ClientContext ctx;
    v1::EnrollStreamResponse resp;
    auto writer = s.stub().EnrollStream(&ctx, &resp);
    for (uint32_t f = 11; f <= 18; ++f) {
      v1::EnrollRequest req;
      req.set_id(absl::StrCat("f", f));
      *req.mutable_record() = Image(PrintPng(f, 0));
      ASSERT_TRUE(writer->Write(req));
    }
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_EQ(resp.enrolled(), 8) << (resp.errors_size() > 0 ? resp.errors(0).message() : "");
  }
  grpc::ClientContext ctx;
  v1::SearchBatchRequest req;
  for (uint32_t f = 11; f <= 18; ++f) *req.add_probes() = Image(PrintPng(f, 3));
  req.set_top_k(1);
  v1::SearchBatchResponse resp;
  grpc::Status st = s.stub().SearchBatch(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.results_size(), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(resp.results(i).candidates(0).id(), absl::StrCat("f", 11 + i));
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
