// Subjects over gRPC: metadata enrolled with templates, returned with
// candidates, filtered on, listed and deleted by subject, kept across a
// restart; match explanations; ANSI/NIST transactions enrolled per finger
// and searched as a card (ten-print, fused per subject) or as a latent.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/extract/transaction_testing.h"
#include "services/fingerprint/search/match_explain.h"
#include "services/fingerprint/service_testing.h"
#include "services/fingerprint/store/gallery_test_util.h"

namespace tessera {
namespace fingerprint {
namespace {

using testing::TestServer;
using testing::XytTemplate;

v1::TemplateMetadata Meta(const std::string& subject, int fgp, int imp) {
  v1::TemplateMetadata m;
  m.set_subject_id(subject);
  m.set_finger_position(fgp);
  m.set_impression_type(imp);
  m.set_capture_date("20261206");  // ANSI/NIST style: stored as 2026-12-06
  m.set_source_tcn("TCN-7");
  (*m.mutable_attributes())["agency"] = "lab 3";
  return m;
}

grpc::Status Enroll(v1::FingerprintService::Stub& stub, const std::string& id,
                    const std::vector<MinutiaPoint>& points, const v1::TemplateMetadata* meta) {
  grpc::ClientContext ctx;
  v1::EnrollRequest req;
  req.set_id(id);
  *req.mutable_record() = XytTemplate(points);
  if (meta != nullptr) *req.mutable_metadata() = *meta;
  v1::EnrollResponse resp;
  return stub.Enroll(&ctx, req, &resp);
}

v1::SearchResponse Search(v1::FingerprintService::Stub& stub, const std::vector<MinutiaPoint>& probe,
                          std::vector<int> fgps = {}, bool explain = false) {
  grpc::ClientContext ctx;
  v1::SearchRequest req;
  *req.mutable_probe() = XytTemplate(probe);
  req.set_top_k(10);
  req.set_explain(explain);
  for (int f : fgps) req.add_finger_positions(f);
  v1::SearchResponse resp;
  const grpc::Status s = stub.Search(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp;
}

TEST(FingerprintSubjectsServiceTest, MetadataTravelsWithTemplatesAndSubjects) {
  const std::string dir = gallery_testing::FreshDir("fp_subjects");
  // One impression of six different fingers (the real templates come 8 per finger).
  const auto all = fingerprint::testing::TestTemplates(1, 48, 41);
  std::vector<std::vector<MinutiaPoint>> points;
  for (int i = 0; i < 6; ++i) points.push_back(all[8 * i]);
  {
    auto server = TestServer::Start({.gallery_dir = dir});
    ASSERT_TRUE(server.ok()) << server.status();
    auto& stub = (*server)->stub();
    // A: fingers 1-3 (impression 1); B: fingers 1-2 (impression 0); one without metadata.
    for (int f = 1; f <= 3; ++f) {
      const v1::TemplateMetadata m = Meta("A", f, 1);
      ASSERT_TRUE(Enroll(stub, absl::StrCat("A_", f), points[f - 1], &m).ok());
    }
    for (int f = 1; f <= 2; ++f) {
      const v1::TemplateMetadata m = Meta("B", f, 0);
      ASSERT_TRUE(Enroll(stub, absl::StrCat("B_", f), points[2 + f], &m).ok());
    }
    ASSERT_TRUE(Enroll(stub, "loose", points[5], nullptr).ok());
    v1::TemplateMetadata bad = Meta("C", 1, 0);
    bad.set_capture_date("2026-13-01");
    grpc::Status refused = Enroll(stub, "C_1", points[0], &bad);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(refused.error_message().find("metadata: capture date"), std::string::npos) << refused.error_message();

    v1::SearchResponse r = Search(stub, points[1]);
    ASSERT_GT(r.candidates_size(), 0);
    EXPECT_EQ(r.candidates(0).id(), "A_2");
    EXPECT_EQ(r.candidates(0).metadata().subject_id(), "A");
    EXPECT_EQ(r.candidates(0).metadata().finger_position(), 2);
    EXPECT_EQ(r.candidates(0).metadata().impression_type(), 1);
    EXPECT_EQ(r.candidates(0).metadata().capture_date(), "2026-12-06");
    EXPECT_EQ(r.candidates(0).metadata().attributes().at("agency"), "lab 3");
    for (const auto& c : r.candidates()) {
      if (c.id() == "loose") EXPECT_FALSE(c.has_metadata());
    }
    // Only right thumbs (FGP 1).
    r = Search(stub, points[1], {1});
    EXPECT_EQ(r.candidates_size(), 2);
    for (const auto& c : r.candidates()) EXPECT_EQ(c.metadata().finger_position(), 1) << c.id();
    // Only impression type 0 (B's).
    {
      grpc::ClientContext ctx;
      v1::SearchRequest req;
      *req.mutable_probe() = XytTemplate(points[1]);
      req.add_impression_types(0);
      v1::SearchResponse resp;
      ASSERT_TRUE(stub.Search(&ctx, req, &resp).ok());
      EXPECT_EQ(resp.candidates_size(), 2);
      for (const auto& c : resp.candidates()) EXPECT_EQ(c.metadata().subject_id(), "B");
      grpc::ClientContext bad_ctx;
      req.add_finger_positions(999);
      EXPECT_EQ(stub.Search(&bad_ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    }
    // Explanations: a template against itself pairs its minutiae in place.
    r = Search(stub, points[1], {2}, /*explain=*/true);
    ASSERT_GT(r.candidates_size(), 0);
    const v1::MatchExplanation& e = r.candidates(0).explanation();
    EXPECT_GE(e.pairs_size(), 3);
    EXPECT_LT(e.rms_residual(), 1.0);
    EXPECT_NEAR(e.score(), r.candidates(0).score(), 1e-5);  // lssr: the searcher's score
    {
      grpc::ClientContext ctx;
      v1::VerifyRequest req;
      *req.mutable_probe() = XytTemplate(points[1]);
      req.set_id("A_2");
      req.set_explain(true);
      v1::VerifyResponse resp;
      ASSERT_TRUE(stub.Verify(&ctx, req, &resp).ok());
      EXPECT_EQ(resp.explanation().pairs_size(), e.pairs_size());
    }
    // Subjects: one, all (a page at a time), deleting one.
    {
      grpc::ClientContext ctx;
      v1::GetSubjectRequest req;
      req.set_subject_id("A");
      v1::GetSubjectResponse resp;
      ASSERT_TRUE(stub.GetSubject(&ctx, req, &resp).ok());
      ASSERT_EQ(resp.templates_size(), 3);
      EXPECT_EQ(resp.templates(2).id(), "A_3");
      EXPECT_EQ(resp.templates(2).metadata().finger_position(), 3);
    }
    {
      grpc::ClientContext ctx;
      v1::ListSubjectsRequest req;
      req.set_page_size(1);
      v1::ListSubjectsResponse resp;
      ASSERT_TRUE(stub.ListSubjects(&ctx, req, &resp).ok());
      ASSERT_EQ(resp.subjects_size(), 1);
      EXPECT_EQ(resp.subjects(0).subject_id(), "A");
      EXPECT_EQ(resp.subjects(0).templates(), 3);
      grpc::ClientContext next_ctx;
      req.set_page_token(resp.next_page_token());
      ASSERT_TRUE(stub.ListSubjects(&next_ctx, req, &resp).ok());
      ASSERT_EQ(resp.subjects_size(), 1);
      EXPECT_EQ(resp.subjects(0).subject_id(), "B");
      EXPECT_TRUE(resp.next_page_token().empty());
    }
    {
      grpc::ClientContext ctx;
      v1::DeleteSubjectRequest req;
      req.set_subject_id("A");
      v1::DeleteSubjectResponse resp;
      ASSERT_TRUE(stub.DeleteSubject(&ctx, req, &resp).ok());
      EXPECT_EQ(resp.deleted(), 3);
      EXPECT_EQ(resp.gallery_size(), 3);
      grpc::ClientContext again;
      EXPECT_EQ(stub.DeleteSubject(&again, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
      grpc::ClientContext get_ctx;
      v1::GetSubjectRequest get;
      get.set_subject_id("A");
      v1::GetSubjectResponse got;
      EXPECT_EQ(stub.GetSubject(&get_ctx, get, &got).error_code(), grpc::StatusCode::NOT_FOUND);
    }
    const v1::SearchResponse after = Search(stub, points[1]);
    for (const auto& c : after.candidates()) EXPECT_NE(c.metadata().subject_id(), "A") << c.id();
  }
  // After a restart: what was enrolled, with its metadata.
  auto server = TestServer::Start({.gallery_dir = dir});
  ASSERT_TRUE(server.ok()) << server.status();
  v1::SearchResponse r = Search((*server)->stub(), points[3]);
  ASSERT_GT(r.candidates_size(), 0);
  EXPECT_EQ(r.candidates(0).id(), "B_1");
  EXPECT_EQ(r.candidates(0).metadata().source_tcn(), "TCN-7");
  EXPECT_EQ((*server)->service().gallery().size(), 3);
}

using transaction_testing::PrintRecord;
using transaction_testing::TransactionBytes;

// Subject s's finger f as a synthetic print (impression i).
SyntheticPrintOptions Finger(int s, int f, int i) {
  SyntheticPrintOptions o;
  o.finger = static_cast<uint32_t>(100 * s + f);
  o.impression = static_cast<uint32_t>(i);
  return o;
}

std::string Card(const std::string& tcn, int subject, int impression) {
  std::vector<ansi_nist::Record> records;
  for (int f = 1; f <= 3; ++f) records.push_back(PrintRecord(f, f, Finger(subject, f, impression)));
  absl::StatusOr<std::string> bytes = TransactionBytes("CAR", tcn, std::move(records));
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

TEST(FingerprintSubjectsServiceTest, TransactionsEnrollPerFingerAndSearchAsCardOrLatent) {
  auto server = TestServer::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  auto& stub = (*server)->stub();
  for (int s = 1; s <= 3; ++s) {
    grpc::ClientContext ctx;
    v1::EnrollTransactionRequest req;
    req.set_transaction(Card(absl::StrCat("CARD-", s), s, 0));
    if (s == 2) {
      req.set_subject_id("person-2");
      (*req.mutable_attributes())["case"] = "K-9";
    }
    v1::EnrollTransactionResponse resp;
    ASSERT_TRUE(stub.EnrollTransaction(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.enrolled(), 3) << resp.DebugString();
    EXPECT_EQ(resp.subject_id(), s == 2 ? "person-2" : absl::StrCat("CARD-", s));
    EXPECT_EQ(resp.tcn(), absl::StrCat("CARD-", s));
    EXPECT_EQ(resp.fingers(0).id(), absl::StrCat(resp.subject_id(), "_1"));
    EXPECT_EQ(resp.fingers(2).finger_position(), 3);
    EXPECT_GT(resp.fingers(0).quality(), 0);
  }
  {
    grpc::ClientContext ctx;
    v1::GetSubjectRequest req;
    req.set_subject_id("person-2");
    v1::GetSubjectResponse resp;
    ASSERT_TRUE(stub.GetSubject(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.templates_size(), 3);
    EXPECT_EQ(resp.templates(0).metadata().source_tcn(), "CARD-2");
    EXPECT_EQ(resp.templates(0).metadata().capture_date(), "2026-12-06");
    EXPECT_EQ(resp.templates(0).metadata().attributes().at("case"), "K-9");
  }
  // A second card of subject 2's fingers: ten-print search.
  {
    grpc::ClientContext ctx;
    v1::SearchTransactionRequest req;
    req.set_transaction(Card("Q-1", 2, 1));
    req.set_top_k(3);
    v1::SearchTransactionResponse resp;
    const grpc::Status s = stub.SearchTransaction(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.mode(), "ten-print");
    EXPECT_EQ(resp.probes_size(), 3);
    ASSERT_GE(resp.subjects_size(), 1);
    EXPECT_EQ(resp.subjects(0).subject_id(), "person-2");
    EXPECT_EQ(resp.subjects(0).fingers_size(), 3);
    if (resp.subjects_size() > 1) EXPECT_GT(resp.subjects(0).score(), resp.subjects(1).score());
  }
  // A latent (Type-13, IMP 4) of subject 3's finger 2.
  {
    std::vector<ansi_nist::Record> records = {PrintRecord(1, 2, Finger(3, 2, 2), /*type=*/13, /*imp=*/4)};
    absl::StatusOr<std::string> latent = TransactionBytes("LFS", "L-1", std::move(records));
    ASSERT_TRUE(latent.ok()) << latent.status();
    grpc::ClientContext ctx;
    v1::SearchTransactionRequest req;
    req.set_transaction(*latent);
    req.set_explain(true);
    v1::SearchTransactionResponse resp;
    const grpc::Status s = stub.SearchTransaction(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.mode(), "latent");
    ASSERT_EQ(resp.probes_size(), 1);
    ASSERT_GT(resp.probes(0).candidates_size(), 0);
    EXPECT_EQ(resp.probes(0).candidates(0).id(), "CARD-3_2");
    EXPECT_EQ(resp.probes(0).candidates(0).metadata().subject_id(), "CARD-3");
    EXPECT_GT(resp.probes(0).candidates(0).explanation().pairs_size(), 0);
  }
  // Bad transactions.
  for (const std::string& bytes : {std::string(), std::string("1.001:12\x1d" "1.002:0500\x1c"), std::string("garbage")}) {
    grpc::ClientContext ctx;
    v1::EnrollTransactionRequest req;
    req.set_transaction(bytes);
    v1::EnrollTransactionResponse resp;
    EXPECT_EQ(stub.EnrollTransaction(&ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bytes;
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
