// Subjects, metadata, filters, explanations and ANSI/NIST transactions
// through FingerprintShardRouter: three real shard servers on loopback
// behind a router, against one server given the same calls (the scenario of
// fingerprint_subjects_service_test.cc). Metadata reaches the shards from
// Enroll and EnrollStream and comes back on merged candidates with their
// explanations; filters and explain reach every shard; GetSubject gathers a
// subject spread over shards; ListSubjects pages (page size 1, 2, default)
// equal one server's, counts summed; DeleteSubject removes the subject from
// every shard; EnrollTransaction puts each finger on its id's shard with one
// server's answer; ten-print and latent SearchTransaction give one server's
// answers; a stopped shard fails the new calls with UNAVAILABLE naming it.
#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/extract/transaction_testing.h"
#include "services/fingerprint/gallery_set.h"
#include "services/fingerprint/service_testing.h"
#include "services/fingerprint/shard_testing.h"
#include "services/fingerprint/shard_router.h"
#include "services/server/service_host.h"

namespace tessera {
namespace fingerprint {
namespace {

using testing::XytTemplate;
using transaction_testing::PrintRecord;
using transaction_testing::TransactionBytes;

constexpr int kShards = 3;

using testing::Host;
using testing::Hosted;
using testing::HostFingerprintService;
using testing::StubTo;

v1::TemplateMetadata Meta(const std::string& subject, int fgp, int imp) {
  v1::TemplateMetadata m;
  m.set_subject_id(subject);
  m.set_finger_position(fgp);
  m.set_impression_type(imp);
  m.set_capture_date("20261206");  // stored as 2026-12-06
  m.set_source_tcn("TCN-7");
  (*m.mutable_attributes())["agency"] = "lab 3";
  return m;
}

v1::EnrollRequest Item(const std::string& id, const std::vector<MinutiaPoint>& points,
                       const v1::TemplateMetadata* meta) {
  v1::EnrollRequest r;
  r.set_id(id);
  *r.mutable_record() = XytTemplate(points);
  if (meta != nullptr) *r.mutable_metadata() = *meta;
  return r;
}

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

std::string LatentCard() {  // a latent (Type-13, IMP 4) of subject 3's finger 2
  std::vector<ansi_nist::Record> records = {PrintRecord(1, 2, Finger(3, 2, 2), /*type=*/13, /*imp=*/4)};
  absl::StatusOr<std::string> bytes = TransactionBytes("LFS", "L-1", std::move(records));
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

// Equal scores in one order (score, then id): the router orders ties by
// shard, one server by enrolment; distinct scores keep their ranks.
void CanonicalTies(google::protobuf::RepeatedPtrField<v1::Candidate>* candidates) {
  std::stable_sort(candidates->begin(), candidates->end(), [](const v1::Candidate& a, const v1::Candidate& b) {
    return a.score() > b.score() || (a.score() == b.score() && a.id() < b.id());
  });
}
void CanonicalTies(v1::SearchResponse* r) { CanonicalTies(r->mutable_candidates()); }
void CanonicalTies(v1::SearchBatchResponse* r) {
  for (auto& p : *r->mutable_results()) CanonicalTies(p.mutable_candidates());
}
void CanonicalTies(v1::SearchTransactionResponse* r) {
  for (auto& p : *r->mutable_probes()) CanonicalTies(p.mutable_candidates());
}

// Both answers as text, for messages.
template <typename M>
void ExpectSameMessage(const M& got, const M& want, const std::string& what) {
  EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString())
      << what << "\nrouter:\n" << got.DebugString() << "\none server:\n" << want.DebugString();
}

class ShardRouterSubjectsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> addresses;
    for (int s = 0; s < kShards; ++s) {
      shards_.push_back(HostFingerprintService());
      addresses.push_back(shards_.back().address());
    }
    single_ = HostFingerprintService();
    auto router = FingerprintShardRouter::CreateForAddresses(addresses, 64 << 20);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = Host(std::move(*router));
    router_stub_ = StubTo(router_);
    single_stub_ = StubTo(single_);
  }

  FingerprintServiceImpl& shard_service(int s) { return static_cast<FingerprintServiceImpl&>(*shards_[s].service); }

  // The shards holding some of `subject`'s templates, checking that each
  // template is on its id's shard.
  std::set<int> ShardsOfSubject(const std::string& subject) {
    std::set<int> out;
    for (int s = 0; s < kShards; ++s) {
      for (const auto& t : shard_service(s).gallery().OfSubject(subject)) {
        EXPECT_EQ(ShardForId(t->id, kShards), s) << t->id;
        EXPECT_EQ(t->metadata.subject_id, subject);
        out.insert(s);
      }
    }
    return out;
  }

  // `call(stub, ctx, response)` through the router and one server: both OK
  // (or both failing with the same code and message) with the same answer.
  template <typename Response, typename Call>
  Response Same(Call call, const std::string& what, bool clear_timing = false) {
    Response got, want;
    grpc::ClientContext c1, c2;
    const grpc::Status r = call(*router_stub_, &c1, &got);
    const grpc::Status o = call(*single_stub_, &c2, &want);
    EXPECT_EQ(r.error_code(), o.error_code()) << what << ": router " << r.error_message() << "; one server "
                                              << o.error_message();
    EXPECT_EQ(r.error_message(), o.error_message()) << what;
    if constexpr (std::is_same_v<Response, v1::SearchResponse> || std::is_same_v<Response, v1::SearchBatchResponse> ||
                  std::is_same_v<Response, v1::SearchTransactionResponse>) {
      if (clear_timing) {
        got.clear_timing();
        want.clear_timing();
      }
      CanonicalTies(&got);
      CanonicalTies(&want);
    }
    ExpectSameMessage(got, want, what);
    return got;
  }

  std::vector<Hosted> shards_;
  Hosted single_;
  Hosted router_;
  std::unique_ptr<v1::FingerprintService::Stub> router_stub_;
  std::unique_ptr<v1::FingerprintService::Stub> single_stub_;
};

TEST_F(ShardRouterSubjectsTest, MetadataFiltersExplanationsAndSubjectsAsOneServer) {
  // One impression of eight different fingers (the real templates come 8 per finger).
  const auto all = fingerprint::testing::TestTemplates(1, 64, 41);
  std::vector<std::vector<MinutiaPoint>> points;
  for (int i = 0; i < 8; ++i) points.push_back(all[8 * i]);
  for (v1::FingerprintService::Stub* stub : {router_stub_.get(), single_stub_.get()}) {
    // A: fingers 1-3 (impression 1) by Enroll; B: fingers 1-2 (impression 0)
    // and C: finger 4 by EnrollStream; one without metadata.
    for (int f = 1; f <= 3; ++f) {
      const v1::TemplateMetadata m = Meta("A", f, 1);
      grpc::ClientContext ctx;
      v1::EnrollResponse resp;
      const grpc::Status s = stub->Enroll(&ctx, Item(absl::StrCat("A_", f), points[f - 1], &m), &resp);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(resp.gallery_size(), f);
    }
    grpc::ClientContext ctx;
    v1::EnrollStreamResponse resp;
    auto writer = stub->EnrollStream(&ctx, &resp);
    for (int f = 1; f <= 2; ++f) {
      const v1::TemplateMetadata m = Meta("B", f, 0);
      ASSERT_TRUE(writer->Write(Item(absl::StrCat("B_", f), points[2 + f], &m)));
    }
    const v1::TemplateMetadata c = Meta("C", 4, 1);
    ASSERT_TRUE(writer->Write(Item("C_4", points[5], &c)));
    ASSERT_TRUE(writer->Write(Item("loose", points[6], nullptr)));
    v1::TemplateMetadata bad = Meta("D", 1, 0);
    bad.set_capture_date("2026-13-01");
    ASSERT_TRUE(writer->Write(Item("D_1", points[7], &bad)));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_EQ(resp.enrolled(), 4);
    ASSERT_EQ(resp.errors_size(), 1);
    EXPECT_THAT(resp.errors(0).message(), ::testing::HasSubstr("metadata: capture date"));
    EXPECT_EQ(resp.gallery_size(), 7);
  }
  // The metadata reached the shards: each template on its id's shard, with it.
  EXPECT_EQ(ShardsOfSubject("A"), (std::set<int>{0, 1}));  // A_1, A_2 on 1; A_3 on 0
  EXPECT_EQ(ShardsOfSubject("B"), (std::set<int>{2}));
  {
    auto t = shard_service(ShardForId("A_2", kShards)).gallery().Get("A_2");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->metadata.finger_position, 2);
    EXPECT_EQ(t->metadata.impression_type, 1);
    EXPECT_EQ(t->metadata.capture_date, "2026-12-06");
    EXPECT_EQ(t->metadata.source_tcn, "TCN-7");
  }
  {
    // A bad metadata by Enroll: the shard's INVALID_ARGUMENT, as one server's.
    v1::TemplateMetadata bad = Meta("D", 1, 0);
    bad.set_capture_date("2026-13-01");
    Same<v1::EnrollResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::EnrollResponse* resp) {
          return stub.Enroll(ctx, Item("D_1", points[7], &bad), resp);
        },
        "Enroll with bad metadata");
  }

  // Searches: candidates whole (metadata, explanations) as one server's.
  auto search = [&](const std::vector<MinutiaPoint>& probe, std::vector<int> fgps, std::vector<int> imps,
                    bool explain, const std::string& what) {
    v1::SearchRequest req;
    *req.mutable_probe() = XytTemplate(probe);
    req.set_top_k(10);
    req.set_explain(explain);
    for (int f : fgps) req.add_finger_positions(f);
    for (int i : imps) req.add_impression_types(i);
    return Same<v1::SearchResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::SearchResponse* resp) {
          return stub.Search(ctx, req, resp);
        },
        what, /*clear_timing=*/true);
  };
  v1::SearchResponse r = search(points[1], {}, {}, false, "Search");
  ASSERT_EQ(r.candidates_size(), 7);
  EXPECT_EQ(r.candidates(0).id(), "A_2");
  EXPECT_EQ(r.candidates(0).metadata().subject_id(), "A");
  EXPECT_EQ(r.candidates(0).metadata().attributes().at("agency"), "lab 3");
  for (const auto& c : r.candidates()) {
    if (c.id() == "loose") {
      EXPECT_FALSE(c.has_metadata());
    }
  }
  r = search(points[1], {1}, {}, false, "Search FGP 1");
  EXPECT_EQ(r.candidates_size(), 2);  // A_1, B_1: on two shards
  r = search(points[1], {}, {0}, false, "Search IMP 0");
  EXPECT_EQ(r.candidates_size(), 2);
  for (const auto& c : r.candidates()) EXPECT_EQ(c.metadata().subject_id(), "B");
  r = search(points[1], {1, 2, 4}, {1}, true, "Search FGP 1,2,4 IMP 1 explained");
  ASSERT_EQ(r.candidates_size(), 3);  // A_1, A_2, C_4
  for (const auto& c : r.candidates()) EXPECT_GE(c.explanation().pairs_size(), 1) << c.id();
  EXPECT_EQ(r.candidates(0).id(), "A_2");
  EXPECT_LT(r.candidates(0).explanation().rms_residual(), 1.0);
  search(points[1], {999}, {}, false, "Search with a bad filter");  // INVALID_ARGUMENT from the shards
  {
    v1::SearchBatchRequest req;
    *req.add_probes() = XytTemplate(points[0]);
    *req.add_probes() = XytTemplate(points[3]);
    req.add_finger_positions(1);
    const v1::SearchBatchResponse b = Same<v1::SearchBatchResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::SearchBatchResponse* resp) {
          return stub.SearchBatch(ctx, req, resp);
        },
        "SearchBatch FGP 1", /*clear_timing=*/true);
    ASSERT_EQ(b.results_size(), 2);
    ASSERT_EQ(b.results(1).candidates_size(), 2);
    EXPECT_EQ(b.results(1).candidates(0).id(), "B_1");
    EXPECT_EQ(b.results(1).candidates(0).metadata().impression_type(), 0);
  }
  {
    v1::VerifyRequest req;
    *req.mutable_probe() = XytTemplate(points[1]);
    req.set_id("A_2");
    req.set_explain(true);
    const v1::VerifyResponse v = Same<v1::VerifyResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::VerifyResponse* resp) {
          return stub.Verify(ctx, req, resp);
        },
        "Verify explained");
    EXPECT_GE(v.explanation().pairs_size(), 3);
  }

  // Subjects.
  auto get = [&](const std::string& subject) {
    v1::GetSubjectRequest req;
    req.set_subject_id(subject);
    return Same<v1::GetSubjectResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::GetSubjectResponse* resp) {
          return stub.GetSubject(ctx, req, resp);
        },
        absl::StrCat("GetSubject ", subject));
  };
  v1::GetSubjectResponse a = get("A");
  ASSERT_EQ(a.templates_size(), 3);  // from two shards, by id
  EXPECT_EQ(a.templates(0).id(), "A_1");
  EXPECT_EQ(a.templates(2).id(), "A_3");
  EXPECT_EQ(a.templates(2).metadata().finger_position(), 3);
  EXPECT_EQ(get("B").templates_size(), 2);
  get("nobody");  // NOT_FOUND, one server's message
  get("");        // INVALID_ARGUMENT

  auto list_all = [&](int page_size) {
    std::vector<std::pair<std::string, int64_t>> listed;
    std::string token;
    int pages = 0;
    do {
      v1::ListSubjectsRequest req;
      req.set_page_size(page_size);
      req.set_page_token(token);
      const v1::ListSubjectsResponse page = Same<v1::ListSubjectsResponse>(
          [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::ListSubjectsResponse* resp) {
            return stub.ListSubjects(ctx, req, resp);
          },
          absl::StrCat("ListSubjects page ", pages, " of size ", page_size));
      for (const auto& s : page.subjects()) listed.emplace_back(s.subject_id(), s.templates());
      token = page.next_page_token();
      ++pages;
    } while (!token.empty() && pages < 100);
    return listed;
  };
  const std::vector<std::pair<std::string, int64_t>> want = {{"A", 3}, {"B", 2}, {"C", 1}};
  EXPECT_EQ(list_all(1), want);  // each subject once, its counts summed over the shards
  EXPECT_EQ(list_all(2), want);
  EXPECT_EQ(list_all(0), want);
  {
    v1::ListSubjectsRequest req;
    req.set_page_size(10001);
    Same<v1::ListSubjectsResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::ListSubjectsResponse* resp) {
          return stub.ListSubjects(ctx, req, resp);
        },
        "ListSubjects page_size 10001");
  }

  auto delete_subject = [&](const std::string& subject) {
    v1::DeleteSubjectRequest req;
    req.set_subject_id(subject);
    return Same<v1::DeleteSubjectResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::DeleteSubjectResponse* resp) {
          return stub.DeleteSubject(ctx, req, resp);
        },
        absl::StrCat("DeleteSubject ", subject));
  };
  const v1::DeleteSubjectResponse deleted = delete_subject("A");
  EXPECT_EQ(deleted.deleted(), 3);
  EXPECT_EQ(deleted.gallery_size(), 4);
  EXPECT_TRUE(ShardsOfSubject("A").empty());
  delete_subject("A");  // NOT_FOUND from every shard
  delete_subject("");   // INVALID_ARGUMENT
  get("A");             // NOT_FOUND
  EXPECT_EQ(list_all(1), (std::vector<std::pair<std::string, int64_t>>{{"B", 2}, {"C", 1}}));
  r = search(points[1], {}, {}, false, "Search after DeleteSubject");
  for (const auto& c : r.candidates()) EXPECT_NE(c.metadata().subject_id(), "A") << c.id();
}

TEST_F(ShardRouterSubjectsTest, TransactionsAsOneServer) {
  for (int s = 1; s <= 3; ++s) {
    v1::EnrollTransactionRequest req;
    req.set_transaction(Card(absl::StrCat("CARD-", s), s, 0));
    if (s == 2) {
      req.set_subject_id("person-2");
      (*req.mutable_attributes())["case"] = "K-9";
    }
    const v1::EnrollTransactionResponse resp = Same<v1::EnrollTransactionResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::EnrollTransactionResponse* out) {
          return stub.EnrollTransaction(ctx, req, out);
        },
        absl::StrCat("EnrollTransaction ", s));
    EXPECT_EQ(resp.enrolled(), 3);
    EXPECT_EQ(resp.gallery_size(), 3 * s);
    EXPECT_EQ(resp.fingers(0).id(), absl::StrCat(resp.subject_id(), "_1"));
    EXPECT_GT(resp.fingers(0).quality(), 0);
    // Each finger on its id's shard; a card spread over several.
    EXPECT_GT(ShardsOfSubject(resp.subject_id()).size(), 1u) << resp.subject_id();
  }
  {
    // Another card of the same subject (other impressions, the same ids)
    // without replace: each finger ALREADY_EXISTS, as on one server. (The
    // same card again would be a retry: OK.)
    v1::EnrollTransactionRequest req;
    req.set_transaction(Card("CARD-1", 1, 1));
    const v1::EnrollTransactionResponse resp = Same<v1::EnrollTransactionResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::EnrollTransactionResponse* out) {
          return stub.EnrollTransaction(ctx, req, out);
        },
        "EnrollTransaction again");
    EXPECT_EQ(resp.failed(), 3);
    EXPECT_EQ(resp.fingers(1).code(), static_cast<int>(grpc::StatusCode::ALREADY_EXISTS));
    req.set_replace(true);
    EXPECT_EQ(Same<v1::EnrollTransactionResponse>(
                  [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx,
                      v1::EnrollTransactionResponse* out) { return stub.EnrollTransaction(ctx, req, out); },
                  "EnrollTransaction replace")
                  .enrolled(),
              3);
  }
  {
    v1::GetSubjectRequest req;
    req.set_subject_id("person-2");
    const v1::GetSubjectResponse resp = Same<v1::GetSubjectResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::GetSubjectResponse* out) {
          return stub.GetSubject(ctx, req, out);
        },
        "GetSubject person-2");
    ASSERT_EQ(resp.templates_size(), 3);
    EXPECT_EQ(resp.templates(0).metadata().source_tcn(), "CARD-2");
    EXPECT_EQ(resp.templates(0).metadata().attributes().at("case"), "K-9");
  }
  auto search = [&](const v1::SearchTransactionRequest& req, const std::string& what) {
    return Same<v1::SearchTransactionResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::SearchTransactionResponse* out) {
          return stub.SearchTransaction(ctx, req, out);
        },
        what, /*clear_timing=*/true);
  };
  // A second card of subject 2's fingers: ten-print, fused per subject.
  for (const auto fusion : {v1::TEN_PRINT_FUSION_DEFAULT, v1::TEN_PRINT_FUSION_MAX}) {
    v1::SearchTransactionRequest req;
    req.set_transaction(Card("Q-1", 2, 1));
    req.set_top_k(3);
    req.set_fusion(fusion);
    const v1::SearchTransactionResponse resp = search(req, absl::StrCat("ten-print, fusion ", fusion));
    EXPECT_EQ(resp.mode(), "ten-print");
    EXPECT_EQ(resp.probes_size(), 3);
    ASSERT_GE(resp.subjects_size(), 1);
    EXPECT_EQ(resp.subjects(0).subject_id(), "person-2");
    EXPECT_EQ(resp.subjects(0).fingers_size(), 3);
  }
  {
    v1::SearchTransactionRequest req;
    req.set_transaction(LatentCard());
    req.set_explain(true);
    const v1::SearchTransactionResponse resp = search(req, "latent, explained");
    EXPECT_EQ(resp.mode(), "latent");
    ASSERT_EQ(resp.probes_size(), 1);
    ASSERT_GT(resp.probes(0).candidates_size(), 0);
    EXPECT_EQ(resp.probes(0).candidates(0).id(), "CARD-3_2");
    EXPECT_EQ(resp.probes(0).candidates(0).metadata().subject_id(), "CARD-3");
    EXPECT_GT(resp.probes(0).candidates(0).explanation().pairs_size(), 0);
  }
  {
    // Request errors: one server's status and message.
    v1::SearchTransactionRequest req;
    req.set_transaction(LatentCard());
    req.set_top_k(1001);
    search(req, "top_k 1001");
    req.set_top_k(0);
    req.set_matcher("nope");
    search(req, "unknown matcher");
    req.set_matcher("");
    req.set_gallery("no-such");
    search(req, "unknown gallery");
    req.set_gallery("bad/name");
    search(req, "bad gallery name");
  }
  for (const std::string& bytes : {std::string(), std::string("1.001:12\x1d" "1.002:0500\x1c"), std::string("garbage")}) {
    v1::EnrollTransactionRequest req;
    req.set_transaction(bytes);
    Same<v1::EnrollTransactionResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::EnrollTransactionResponse* out) {
          return stub.EnrollTransaction(ctx, req, out);
        },
        absl::StrCat("bad transaction '", bytes, "'"));
  }
  {
    v1::EnrollTransactionRequest req;
    req.set_transaction(Card("CARD-9", 9, 0));
    req.set_gallery("no-such");
    Same<v1::EnrollTransactionResponse>(
        [&](v1::FingerprintService::Stub& stub, grpc::ClientContext* ctx, v1::EnrollTransactionResponse* out) {
          return stub.EnrollTransaction(ctx, req, out);
        },
        "EnrollTransaction to an unknown gallery");
  }
  // The caller's deadline reaches the shards (and comes back as it is).
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
    v1::SearchTransactionRequest req;
    req.set_transaction(Card("Q-2", 2, 1));
    v1::SearchTransactionResponse resp;
    EXPECT_EQ(router_stub_->SearchTransaction(&ctx, req, &resp).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
}

TEST_F(ShardRouterSubjectsTest, AStoppedShardFailsTheSubjectCallsNamingIt) {
  const v1::TemplateMetadata m = Meta("A", 1, 1);
  for (int i = 0; i < 12; ++i) {  // templates of A on every shard
    grpc::ClientContext ctx;
    v1::EnrollResponse resp;
    ASSERT_TRUE(router_stub_->Enroll(&ctx, Item(absl::StrCat("A_", i), testing::SyntheticTemplates(1, i)[0], &m), &resp).ok());
  }
  ASSERT_EQ(ShardsOfSubject("A").size(), 3u);
  const std::string card = Card("CARD-1", 1, 0);
  const int stopped = 1;
  shards_[stopped].host->Drain();
  auto expect_unavailable = [&](const grpc::Status& s, const std::string& what) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << what << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr(absl::StrCat("shard 1 of 3 (", shards_[stopped].address(), ")")))
        << what;
  };
  {
    grpc::ClientContext ctx;
    v1::GetSubjectRequest req;
    req.set_subject_id("A");
    v1::GetSubjectResponse resp;
    expect_unavailable(router_stub_->GetSubject(&ctx, req, &resp), "GetSubject");
  }
  {
    grpc::ClientContext ctx;
    v1::ListSubjectsResponse resp;
    expect_unavailable(router_stub_->ListSubjects(&ctx, v1::ListSubjectsRequest(), &resp), "ListSubjects");
  }
  {
    grpc::ClientContext ctx;
    v1::DeleteSubjectRequest req;
    req.set_subject_id("A");
    v1::DeleteSubjectResponse resp;
    const grpc::Status s = router_stub_->DeleteSubject(&ctx, req, &resp);
    expect_unavailable(s, "DeleteSubject");
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr("retry to complete the delete"));
    // The running shards deleted their part; the stopped one still holds its own.
    EXPECT_TRUE(shard_service(0).gallery().OfSubject("A").empty());
    EXPECT_TRUE(shard_service(2).gallery().OfSubject("A").empty());
    EXPECT_FALSE(shard_service(stopped).gallery().OfSubject("A").empty());
  }
  {
    // person-2_1 goes to shard 2, _2 to shard 0, _3 to the stopped shard 1.
    grpc::ClientContext ctx;
    v1::EnrollTransactionRequest req;
    req.set_transaction(card);
    req.set_subject_id("person-2");
    v1::EnrollTransactionResponse resp;
    const grpc::Status s = router_stub_->EnrollTransaction(&ctx, req, &resp);
    expect_unavailable(s, "EnrollTransaction");
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr("re-send with replace"));
  }
  {
    grpc::ClientContext ctx;
    v1::SearchTransactionRequest req;
    req.set_transaction(card);
    v1::SearchTransactionResponse resp;
    const grpc::Status s = router_stub_->SearchTransaction(&ctx, req, &resp);
    expect_unavailable(s, "SearchTransaction");
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr("miss the mate"));
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
