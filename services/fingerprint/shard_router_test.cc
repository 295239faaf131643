// FingerprintShardRouter over three real FingerprintService servers on
// loopback (each its own temporary gallery), against one server holding the
// same templates: every template lands on exactly the shard its id hashes to;
// EnrollStream's per-item errors come back as one server's (request order,
// the caller's indices); List pages equal one server's page for page;
// Search and SearchBatch (LSS-R and DMC, several top_k) give the same scores
// rank by rank and the same ids (as sets among equal scores: templates
// copied onto other shards make real cross-shard ties; exact order where
// scores are distinct); Verify, Delete, ALREADY_EXISTS pass through; a
// deadline shorter than the work gives DEADLINE_EXCEEDED and a client cancel
// CANCELLED, and in both cases the shards stop working (CPU stays flat); a
// stopped shard gives UNAVAILABLE naming it.
#include "services/fingerprint/shard_router.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/extract/synthetic_print.h"
#include "services/fingerprint/image/image_test_encoders.h"
#include "services/fingerprint/gallery_set.h"
#include "services/fingerprint/service_testing.h"
#include "services/fingerprint/shard_testing.h"
#include "services/server/service_host.h"

namespace tessera {
namespace fingerprint {
namespace {

using testing::ProcessCpuSeconds;
using testing::XytTemplate;

constexpr int kShards = 3;

using testing::Host;
using testing::Hosted;
using testing::HostFingerprintService;
using testing::StubTo;

v1::EnrollRequest Item(const std::string& id, const std::vector<MinutiaPoint>& points) {
  v1::EnrollRequest r;
  r.set_id(id);
  *r.mutable_record() = XytTemplate(points);
  return r;
}

// A copy of `original`'s id that lands on shard `shard`.
std::string CopyIdOnShard(const std::string& original, int shard) {
  for (int k = 0;; ++k) {
    std::string id = absl::StrCat("copy", k, "-of-", original);
    if (ShardForId(id, kShards) == shard) return id;
  }
}

class ShardRouterTest : public ::testing::Test {
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

    points_ = testing::SyntheticTemplates(150, 7);
    for (size_t i = 0; i < points_.size(); ++i) items_.push_back(Item(absl::StrCat("g", i), points_[i]));
    // Exact copies of g5 and g40 on the two shards their originals are not
    // on: their scores tie with the originals' across all three shards.
    for (const int original : {5, 40}) {
      const std::string id = absl::StrCat("g", original);
      for (int s = 0; s < kShards; ++s) {
        if (s != ShardForId(id, kShards)) items_.push_back(Item(CopyIdOnShard(id, s), points_[original]));
      }
    }
  }

  FingerprintServiceImpl& shard_service(int s) { return static_cast<FingerprintServiceImpl&>(*shards_[s].service); }

  // Enrolls items_ through `stub`: all but the last 4 by EnrollStream (with
  // three bad items among them), those 4 by Enroll.
  v1::EnrollStreamResponse EnrollAll(v1::FingerprintService::Stub& stub) {
    grpc::ClientContext ctx;
    v1::EnrollStreamResponse response;
    auto writer = stub.EnrollStream(&ctx, &response);
    for (size_t i = 0; i + 4 < items_.size(); ++i) {
      EXPECT_TRUE(writer->Write(items_[i]));
      if (i == 10) {
        v1::EnrollRequest bad = Item("bad-record", points_[0]);
        bad.mutable_record()->set_data("not a template");
        EXPECT_TRUE(writer->Write(bad));
      }
      if (i == 50) {
        EXPECT_TRUE(writer->Write(Item("", points_[1])));  // no id
      }
      if (i == 100) {
        v1::EnrollRequest other_bytes = items_[7];  // again, other bytes: ALREADY_EXISTS
        other_bytes.mutable_record()->set_data(items_[8].record().data());
        EXPECT_TRUE(writer->Write(other_bytes));
      }
    }
    writer->WritesDone();
    const grpc::Status s = writer->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (size_t i = items_.size() - 4; i < items_.size(); ++i) {
      grpc::ClientContext c;
      v1::EnrollResponse r;
      const grpc::Status e = stub.Enroll(&c, items_[i], &r);
      EXPECT_TRUE(e.ok()) << e.error_message();
      EXPECT_EQ(r.gallery_size(), static_cast<int64_t>(i + 1));
    }
    return response;
  }

  void EnrollEverywhere() {
    const v1::EnrollStreamResponse via_router = EnrollAll(*router_stub_);
    const v1::EnrollStreamResponse via_single = EnrollAll(*single_stub_);
    EXPECT_EQ(via_router.received(), via_single.received());
    EXPECT_EQ(via_router.enrolled(), via_single.enrolled());
    EXPECT_EQ(via_router.failed(), 3);
    EXPECT_EQ(via_router.gallery_size(), static_cast<int64_t>(items_.size()) - 4);
    ASSERT_EQ(via_router.errors_size(), via_single.errors_size());
    for (int i = 0; i < via_single.errors_size(); ++i) {
      EXPECT_EQ(via_router.errors(i).index(), via_single.errors(i).index()) << i;
      EXPECT_EQ(via_router.errors(i).id(), via_single.errors(i).id()) << i;
      EXPECT_EQ(via_router.errors(i).code(), via_single.errors(i).code()) << i;
      EXPECT_EQ(via_router.errors(i).message(), via_single.errors(i).message()) << i;
    }
  }

  int64_t total() const { return static_cast<int64_t>(items_.size()); }

  std::vector<Hosted> shards_;
  Hosted single_;
  Hosted router_;
  std::unique_ptr<v1::FingerprintService::Stub> router_stub_;
  std::unique_ptr<v1::FingerprintService::Stub> single_stub_;
  std::vector<std::vector<MinutiaPoint>> points_;
  std::vector<v1::EnrollRequest> items_;
};

TEST(ShardHashTest, Fnv1a64IsTheStandardOneAndSpreadsIds) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(ShardForId("anything", 1), 0);
  std::vector<int> counts(kShards);
  for (int i = 0; i < 3000; ++i) ++counts[ShardForId(absl::StrCat("subject-", i), kShards)];
  for (int c : counts) {
    EXPECT_GT(c, 850);
    EXPECT_LT(c, 1150);
  }
}

TEST(ShardRouterCreateTest, RejectsBadShardLists) {
  EXPECT_EQ(FingerprintShardRouter::CreateForAddresses({}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FingerprintShardRouter::CreateForAddresses({"localhost"}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FingerprintShardRouter::CreateForAddresses({"localhost:x"}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FingerprintShardRouter::CreateForAddresses({"a:1", "b:2", "a:1"}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto ok = FingerprintShardRouter::CreateForAddresses({"a:1", "b:2"}, 0);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)->shard_count(), 2);
  EXPECT_EQ((*ok)->shard_name(1), "b:2");
}

// Shards started with --token-file: the router sends its peer token, and
// without one every forwarded call fails naming the shard.
TEST(ShardRouterTokenTest, ThePeerTokenReachesTheShards) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string tokens = std::string(base ? base : "/tmp") + "/shard-tokens";
  std::ofstream(tokens) << "0123456789abcdef0123456789abcdef scheduler reader,enroller\n";
  ServerOptions server;
  server.device = "cpu";
  FingerprintServiceOptions options;
  options.metrics_registry = std::make_shared<prometheus::Registry>();
  auto service = FingerprintServiceImpl::Create(server, options);
  ASSERT_TRUE(service.ok());
  Hosted shard = Host(std::move(*service), tokens);
  for (const bool with_token : {true, false}) {
    auto router = FingerprintShardRouter::CreateForAddresses(
        {shard.address()}, 64 << 20,
        PeerChannelSecurity{nullptr, "", with_token ? "0123456789abcdef0123456789abcdef" : ""});
    ASSERT_TRUE(router.ok());
    Hosted front = Host(std::move(*router));
    grpc::ClientContext ctx;
    v1::ListRequest req;
    v1::ListResponse resp;
    const grpc::Status s = StubTo(front)->List(&ctx, req, &resp);
    if (with_token) {
      EXPECT_TRUE(s.ok()) << s.error_message();
    } else {
      EXPECT_FALSE(s.ok());
      EXPECT_THAT(s.error_message(), ::testing::HasSubstr(shard.address()));
    }
    front.host->Drain();
  }
  shard.host->Drain();
}

TEST_F(ShardRouterTest, EachTemplateLandsOnItsHashShardAndListsAsOneGallery) {
  EnrollEverywhere();
  std::set<std::string> all;
  for (int s = 0; s < kShards; ++s) {
    const std::vector<std::string> held = shard_service(s).gallery().List("", 100000);
    EXPECT_GT(held.size(), 20u) << "shard " << s;
    for (const std::string& id : held) {
      EXPECT_EQ(ShardForId(id, kShards), s) << id;
      EXPECT_TRUE(all.insert(id).second) << id << " on two shards";
    }
  }
  std::set<std::string> want;
  for (const auto& item : items_) want.insert(item.id());
  EXPECT_EQ(all, want);

  // Page by page the same as one server (page tokens included).
  std::vector<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    v1::ListRequest req;
    req.set_page_size(7);
    req.set_page_token(token);
    v1::ListResponse got, expected;
    grpc::ClientContext c1, c2;
    ASSERT_TRUE(router_stub_->List(&c1, req, &got).ok());
    ASSERT_TRUE(single_stub_->List(&c2, req, &expected).ok());
    ASSERT_EQ(std::vector<std::string>(got.ids().begin(), got.ids().end()),
              std::vector<std::string>(expected.ids().begin(), expected.ids().end()))
        << "page " << pages;
    EXPECT_EQ(got.next_page_token(), expected.next_page_token());
    EXPECT_EQ(got.gallery_size(), total());
    listed.insert(listed.end(), got.ids().begin(), got.ids().end());
    token = got.next_page_token();
    ++pages;
  } while (!token.empty() && pages < 1000);
  EXPECT_EQ(listed, std::vector<std::string>(want.begin(), want.end()));  // byte order, each once
  EXPECT_EQ(pages, (static_cast<int>(want.size()) + 6) / 7);

  v1::ListRequest bad;
  bad.set_page_size(10001);
  v1::ListResponse unused;
  grpc::ClientContext c;
  EXPECT_EQ(router_stub_->List(&c, bad, &unused).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// `got` (router) against `want` (one server, same top_k) and `want_all`
// (one server, the whole gallery ranked).
void ExpectSameCandidates(const google::protobuf::RepeatedPtrField<v1::Candidate>& got,
                          const google::protobuf::RepeatedPtrField<v1::Candidate>& want,
                          const google::protobuf::RepeatedPtrField<v1::Candidate>& want_all, const std::string& what,
                          int* cross_shard_ties) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::map<float, std::set<std::string>> all_by_score, got_by_score, want_by_score;
  for (const auto& c : want_all) all_by_score[c.score()].insert(c.id());
  std::set<std::string> seen;
  for (int r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].score(), want[r].score()) << what << " rank " << r;
    EXPECT_TRUE(seen.insert(got[r].id()).second) << what << ": " << got[r].id() << " twice";
    EXPECT_EQ(all_by_score[got[r].score()].count(got[r].id()), 1u)
        << what << " rank " << r << ": " << got[r].id() << " does not score " << got[r].score();
    if (all_by_score[got[r].score()].size() == 1) {
      EXPECT_EQ(got[r].id(), want[r].id()) << what << " rank " << r;  // distinct scores: exact order
    }
    got_by_score[got[r].score()].insert(got[r].id());
    want_by_score[want[r].score()].insert(want[r].id());
  }
  // Ties wholly inside the list hold the same ids; the last score may be cut
  // by top_k, and which of its equal ids make the cut depends on the shards.
  const float last = got.empty() ? 0.f : got[got.size() - 1].score();
  for (const auto& [score, ids] : want_by_score) {
    if (score == last && all_by_score[score].size() > ids.size()) continue;
    EXPECT_EQ(got_by_score[score], ids) << what << " at score " << score;
    if (ids.size() > 1 && score > 0) {
      std::set<int> shards;
      for (const std::string& id : ids) shards.insert(ShardForId(id, kShards));
      *cross_shard_ties += shards.size() > 1;
    }
  }
}

TEST_F(ShardRouterTest, SearchesEqualOneGallery) {
  EnrollEverywhere();
  std::vector<std::vector<MinutiaPoint>> probes = {points_[5], points_[40], points_[77]};
  std::vector<MinutiaPoint> partial = points_[20];
  partial.resize(partial.size() * 2 / 3);
  for (MinutiaPoint& m : partial) m.x += 2;
  probes.push_back(partial);
  for (const auto& p : testing::SyntheticTemplates(2, 99)) probes.push_back(p);

  int cross_shard_ties = 0;
  for (const std::string matcher : {"lssr", "dmc"}) {
    v1::SearchBatchRequest req;
    for (const auto& p : probes) *req.add_probes() = XytTemplate(p);
    req.set_matcher(matcher);
    req.set_top_k(1000);
    v1::SearchBatchResponse all;
    {
      grpc::ClientContext c;
      ASSERT_TRUE(single_stub_->SearchBatch(&c, req, &all).ok());
    }
    for (const int top_k : {1, 3, 10, 1000}) {
      req.set_top_k(top_k);
      v1::SearchBatchResponse got, want;
      grpc::ClientContext c1, c2;
      const grpc::Status s = router_stub_->SearchBatch(&c1, req, &got);
      ASSERT_TRUE(s.ok()) << s.error_message();
      ASSERT_TRUE(single_stub_->SearchBatch(&c2, req, &want).ok());
      ASSERT_EQ(got.results_size(), static_cast<int>(probes.size()));
      for (size_t p = 0; p < probes.size(); ++p) {
        ExpectSameCandidates(got.results(p).candidates(), want.results(p).candidates(), all.results(p).candidates(),
                             absl::StrCat("SearchBatch ", matcher, " top ", top_k, " probe ", p), &cross_shard_ties);
      }
      EXPECT_EQ(got.timing().gallery_size(), total());
      EXPECT_EQ(got.timing().matcher(), matcher);
      EXPECT_GT(got.timing().total_ms(), 0);
      EXPECT_GE(got.timing().total_ms(), got.timing().score_ms());
    }
    for (const int top_k : {1, 5}) {
      for (size_t p = 0; p < probes.size(); ++p) {
        v1::SearchRequest one;
        *one.mutable_probe() = XytTemplate(probes[p]);
        one.set_matcher(matcher);
        one.set_top_k(top_k);
        v1::SearchResponse got, want;
        grpc::ClientContext c1, c2;
        const grpc::Status s = router_stub_->Search(&c1, one, &got);
        ASSERT_TRUE(s.ok()) << s.error_message();
        ASSERT_TRUE(single_stub_->Search(&c2, one, &want).ok());
        ExpectSameCandidates(got.candidates(), want.candidates(), all.results(p).candidates(),
                             absl::StrCat("Search ", matcher, " top ", top_k, " probe ", p), &cross_shard_ties);
        EXPECT_EQ(got.timing().gallery_size(), total());
      }
    }
  }
  // g5 and g40 with their copies: ties across all three shards, both matchers.
  EXPECT_GE(cross_shard_ties, 4);

  // Errors a probe causes are one server's.
  v1::SearchRequest bad;
  bad.mutable_probe()->set_data("garbage");
  bad.mutable_probe()->set_format(v1::TEMPLATE_FORMAT_XYT);
  v1::SearchResponse r1, r2;
  grpc::ClientContext c1, c2;
  const grpc::Status got = router_stub_->Search(&c1, bad, &r1);
  const grpc::Status want = single_stub_->Search(&c2, bad, &r2);
  EXPECT_EQ(got.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(got.error_code(), want.error_code());
  EXPECT_EQ(got.error_message(), want.error_message());
}

// Image probes: extracted once (by one shard) and searched on all; the
// answers, errors included, are one server's.
TEST_F(ShardRouterTest, ImageProbesSearchLikeOneServer) {
  const auto png = [](uint32_t finger, uint32_t impression, double noise = 8) {
    PngSpec spec = GrayPng(SyntheticPrint({.finger = finger, .impression = impression, .noise = noise}));
    spec.x_ppm = 19685;  // 500 ppi
    return EncodePng(spec);
  };
  const auto image = [](const std::string& bytes, int min_quality = 0) {
    v1::FingerprintTemplate t;
    t.mutable_image()->set_data(bytes);
    t.mutable_image()->set_min_quality(min_quality);
    return t;
  };
  for (uint32_t f = 1; f <= 6; ++f) {
    v1::EnrollRequest req;
    req.set_id(absl::StrCat("print", f));
    *req.mutable_record() = image(png(f, 0));
    for (v1::FingerprintService::Stub* stub : {router_stub_.get(), single_stub_.get()}) {
      grpc::ClientContext c;
      v1::EnrollResponse r;
      const grpc::Status s = stub->Enroll(&c, req, &r);
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
  }
  v1::SearchBatchRequest batch;
  for (uint32_t f : {4u, 1u, 6u}) *batch.add_probes() = image(png(f, 1));
  batch.set_top_k(3);
  v1::SearchBatchResponse got, want;
  {
    grpc::ClientContext c1, c2;
    const grpc::Status s = router_stub_->SearchBatch(&c1, batch, &got);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_TRUE(single_stub_->SearchBatch(&c2, batch, &want).ok());
  }
  ASSERT_EQ(got.results_size(), 3);
  for (int p = 0; p < 3; ++p) {
    ASSERT_GT(got.results(p).candidates_size(), 0);
    EXPECT_EQ(got.results(p).candidates(0).id(), want.results(p).candidates(0).id()) << p;
    EXPECT_FLOAT_EQ(got.results(p).candidates(0).score(), want.results(p).candidates(0).score()) << p;
  }
  EXPECT_EQ(got.results(0).candidates(0).id(), "print4");
  {
    v1::SearchRequest one;
    *one.mutable_probe() = image(png(2, 1));
    v1::SearchResponse r;
    grpc::ClientContext c;
    ASSERT_TRUE(router_stub_->Search(&c, one, &r).ok());
    EXPECT_EQ(r.candidates(0).id(), "print2");
  }
  // A bad image and a quality gate: the same codes as one server, naming the probe.
  *batch.add_probes() = image("\x89PNG\r\n\x1a\n and nothing");
  *batch.add_probes() = image(png(3, 2, 70), 100);
  for (v1::FingerprintService::Stub* stub : {router_stub_.get(), single_stub_.get()}) {
    grpc::ClientContext c;
    const grpc::Status s = stub->SearchBatch(&c, batch, &got);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr("probe 3")) << s.error_message();
  }
  batch.mutable_probes()->SwapElements(3, 4);
  batch.mutable_probes()->RemoveLast();  // the bad one: the low-quality one is probe 3 now
  for (v1::FingerprintService::Stub* stub : {router_stub_.get(), single_stub_.get()}) {
    grpc::ClientContext c;
    const grpc::Status s = stub->SearchBatch(&c, batch, &got);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr("probe 3: image quality")) << s.error_message();
  }
}

TEST_F(ShardRouterTest, VerifyDeleteAndReEnrollGoToTheOwningShard) {
  EnrollEverywhere();
  std::vector<MinutiaPoint> probe = points_[20];
  probe.resize(probe.size() * 2 / 3);
  for (const bool by_id : {true, false}) {
    v1::VerifyRequest req;
    *req.mutable_probe() = XytTemplate(probe);
    if (by_id) {
      req.set_id("g20");
    } else {
      *req.mutable_reference() = XytTemplate(points_[20]);
    }
    for (int i = 0; i < kShards; ++i) {  // round robin over the shards for references
      v1::VerifyResponse got, want;
      grpc::ClientContext c1, c2;
      ASSERT_TRUE(router_stub_->Verify(&c1, req, &got).ok());
      ASSERT_TRUE(single_stub_->Verify(&c2, req, &want).ok());
      EXPECT_EQ(got.score(), want.score());
      EXPECT_GT(got.score(), 0);
    }
  }

  const std::string victim = "g9";
  const int owner = ShardForId(victim, kShards);
  const int64_t on_owner = shard_service(owner).gallery().size();
  {
    v1::DeleteRequest req;
    req.set_id(victim);
    v1::DeleteResponse resp;
    grpc::ClientContext c;
    ASSERT_TRUE(router_stub_->Delete(&c, req, &resp).ok());
    EXPECT_EQ(resp.gallery_size(), total() - 1);
    grpc::ClientContext again;
    EXPECT_EQ(router_stub_->Delete(&again, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(shard_service(owner).gallery().size(), on_owner - 1);
  for (int s = 0; s < kShards; ++s) {
    const auto ids = shard_service(s).gallery().List("", 100000);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), victim), 0) << "shard " << s;
  }
  {
    v1::ListRequest req;
    v1::ListResponse resp;
    grpc::ClientContext c;
    ASSERT_TRUE(router_stub_->List(&c, req, &resp).ok());
    EXPECT_EQ(resp.ids_size(), total() - 1);
    EXPECT_EQ(std::count(resp.ids().begin(), resp.ids().end(), victim), 0);
    EXPECT_TRUE(resp.next_page_token().empty());
  }
  {
    v1::VerifyRequest req;
    *req.mutable_probe() = XytTemplate(probe);
    req.set_id(victim);
    v1::VerifyResponse resp;
    grpc::ClientContext c;
    EXPECT_EQ(router_stub_->Verify(&c, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // ALREADY_EXISTS passes through; replace goes to the same shard.
  v1::EnrollRequest again = items_[3];
  again.mutable_record()->set_data(items_[4].record().data());  // other bytes (the same would be a retry)
  v1::EnrollResponse resp;
  grpc::ClientContext c1;
  EXPECT_EQ(router_stub_->Enroll(&c1, again, &resp).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  again.set_replace(true);
  grpc::ClientContext c2;
  ASSERT_TRUE(router_stub_->Enroll(&c2, again, &resp).ok());
  EXPECT_EQ(resp.gallery_size(), total() - 1);
  v1::VerifyRequest none;
  *none.mutable_probe() = XytTemplate(probe);
  v1::VerifyResponse unused;
  grpc::ClientContext c3;
  EXPECT_EQ(router_stub_->Verify(&c3, none, &unused).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// CPU seconds the process (all servers are in it) burns in `seconds`.
double CpuOver(double seconds) {
  const double c0 = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return ProcessCpuSeconds() - c0;
}

TEST_F(ShardRouterTest, DeadlineAndCancelReachTheShards) {
  EnrollEverywhere();
  {
    // More gallery, so that the work outlasts the measurements below.
    grpc::ClientContext ctx;
    v1::EnrollStreamResponse resp;
    auto writer = router_stub_->EnrollStream(&ctx, &resp);
    const auto fillers = testing::SyntheticTemplates(600, 11);
    for (size_t i = 0; i < fillers.size(); ++i) writer->Write(Item(absl::StrCat("f", i), fillers[i]));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    ASSERT_EQ(resp.enrolled(), 600);
  }
  // 128 probes: the shards' probe preparation (MCC descriptors, DMC
  // latents) does not poll for cancellation yet (searcher.cc), so many
  // more probes would keep them busy past the deadline for that phase.
  v1::SearchBatchRequest req;
  for (const auto& p : testing::SyntheticTemplates(128, 4)) *req.add_probes() = XytTemplate(p);
  req.set_matcher("dmc");
  req.set_top_k(5);
  // What the whole call would cost: 8 of its 128 probes, run to the end.
  v1::SearchBatchRequest sample = req;
  sample.mutable_probes()->DeleteSubrange(8, 120);
  const double c0 = ProcessCpuSeconds();
  {
    grpc::ClientContext ctx;
    v1::SearchBatchResponse resp;
    ASSERT_TRUE(router_stub_->SearchBatch(&ctx, sample, &resp).ok());
  }
  const double full_cost = (ProcessCpuSeconds() - c0) * 128 / 8;
  EXPECT_GT(full_cost, 2.0);  // the work is worth stopping

  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(150));
    v1::SearchBatchResponse resp;
    const grpc::Status s = router_stub_->SearchBatch(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double after = CpuOver(1.0);
    std::printf("full call ~%.1f CPU-s; CPU after the deadline (+0.3 s .. +1.3 s): %.3f s\n", full_cost, after);
    EXPECT_LT(after, 0.2);
  }
  {
    grpc::ClientContext ctx;
    v1::SearchBatchResponse resp;
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      ctx.TryCancel();
    });
    const grpc::Status s = router_stub_->SearchBatch(&ctx, req, &resp);
    canceller.join();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double after = CpuOver(1.0);
    std::printf("CPU after the cancel (+0.3 s .. +1.3 s): %.3f s\n", after);
    EXPECT_LT(after, 0.2);
  }
  {
    v1::SearchRequest one;
    *one.mutable_probe() = req.probes(0);
    one.set_matcher("dmc");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
    v1::SearchResponse resp;
    EXPECT_EQ(router_stub_->Search(&ctx, one, &resp).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
}

// A named gallery through the router: created on every shard, its templates spread over the
// shards' parts of it, searched, listed and sized apart from the default gallery.
TEST_F(ShardRouterTest, NamedGalleryThroughTheRouter) {
  {
    grpc::ClientContext ctx;
    v1::CreateGalleryRequest req;
    req.set_gallery("lab");
    v1::GalleryInfo info;
    ASSERT_TRUE(router_stub_->CreateGallery(&ctx, req, &info).ok());
    grpc::ClientContext again;
    EXPECT_EQ(router_stub_->CreateGallery(&again, req, &info).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  }
  for (int s = 0; s < kShards; ++s) EXPECT_TRUE(shard_service(s).galleries().Get("lab").ok()) << s;
  {
    grpc::ClientContext ctx;
    v1::EnrollStreamResponse response;
    auto writer = router_stub_->EnrollStream(&ctx, &response);
    for (int i = 0; i < 30; ++i) {
      v1::EnrollRequest item = items_[i];
      item.set_gallery("lab");
      ASSERT_TRUE(writer->Write(item));
    }
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_EQ(response.enrolled(), 30);
    EXPECT_EQ(response.gallery_size(), 30);
  }
  for (const char* gallery : {"lab", ""}) {
    grpc::ClientContext ctx;
    v1::SearchRequest req;
    req.set_gallery(gallery);
    *req.mutable_probe() = XytTemplate(points_[3]);
    v1::SearchResponse resp;
    ASSERT_TRUE(router_stub_->Search(&ctx, req, &resp).ok());
    if (std::string(gallery) == "lab") {
      ASSERT_GT(resp.candidates_size(), 0);
      EXPECT_EQ(resp.candidates(0).id(), "g3");
    } else {
      EXPECT_EQ(resp.candidates_size(), 0);  // nothing went to the default gallery
    }
  }
  grpc::ClientContext ctx;
  v1::ListGalleriesResponse list;
  ASSERT_TRUE(router_stub_->ListGalleries(&ctx, v1::ListGalleriesRequest(), &list).ok());
  ASSERT_EQ(list.galleries_size(), 2);
  EXPECT_EQ(list.galleries(0).gallery(), "default");
  EXPECT_EQ(list.galleries(0).size(), 0);
  EXPECT_EQ(list.galleries(1).gallery(), "lab");
  EXPECT_EQ(list.galleries(1).size(), 30);
  grpc::ClientContext page_ctx;
  v1::ListRequest page;
  page.set_gallery("lab");
  v1::ListResponse ids;
  ASSERT_TRUE(router_stub_->List(&page_ctx, page, &ids).ok());
  EXPECT_EQ(ids.ids_size(), 30);
  EXPECT_EQ(ids.gallery_size(), 30);
}

TEST_F(ShardRouterTest, AStoppedShardFailsTheCallNamingIt) {
  EnrollEverywhere();
  const int stopped = 1;
  shards_[stopped].host->Drain();
  const std::string name = shards_[stopped].address();
  auto expect_unavailable = [&](const grpc::Status& s, const std::string& what) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << what << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(absl::StrCat("shard 1 of 3 (", name, ")")), std::string::npos)
        << what << ": " << s.error_message();
  };
  {
    v1::SearchRequest req;
    *req.mutable_probe() = XytTemplate(points_[5]);
    v1::SearchResponse resp;
    grpc::ClientContext c;
    const grpc::Status s = router_stub_->Search(&c, req, &resp);
    expect_unavailable(s, "Search");
    EXPECT_NE(s.error_message().find("miss the mate"), std::string::npos) << s.error_message();
    EXPECT_EQ(resp.candidates_size(), 0);
  }
  {
    v1::SearchBatchRequest req;
    *req.add_probes() = XytTemplate(points_[5]);
    v1::SearchBatchResponse resp;
    grpc::ClientContext c;
    expect_unavailable(router_stub_->SearchBatch(&c, req, &resp), "SearchBatch");
  }
  {
    v1::ListResponse resp;
    grpc::ClientContext c;
    expect_unavailable(router_stub_->List(&c, v1::ListRequest(), &resp), "List");
  }
  {
    v1::EnrollResponse resp;
    grpc::ClientContext c1;
    expect_unavailable(router_stub_->Enroll(&c1, Item(CopyIdOnShard("g1", stopped), points_[1]), &resp), "Enroll");
    // Ids of the other shards still enroll.
    grpc::ClientContext c2;
    EXPECT_TRUE(router_stub_->Enroll(&c2, Item(CopyIdOnShard("g1", 0), points_[1]), &resp).ok());
  }
  {
    grpc::ClientContext c;
    v1::EnrollStreamResponse resp;
    auto writer = router_stub_->EnrollStream(&c, &resp);
    writer->Write(Item(CopyIdOnShard("g2", 0), points_[2]));
    writer->Write(Item(CopyIdOnShard("g2", stopped), points_[2]));
    writer->WritesDone();
    expect_unavailable(writer->Finish(), "EnrollStream");
  }
  {
    // A reference Verify is stateless: the other shards answer it.
    v1::VerifyRequest req;
    *req.mutable_probe() = XytTemplate(points_[5]);
    *req.mutable_reference() = XytTemplate(points_[5]);
    for (int i = 0; i < kShards; ++i) {
      v1::VerifyResponse resp;
      grpc::ClientContext c;
      const grpc::Status s = router_stub_->Verify(&c, req, &resp);
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
