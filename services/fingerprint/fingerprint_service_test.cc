// tessera.v1.FingerprintService end to end over a real gRPC channel with
// FVC2002 DB1 templates (synthetic xyt templates when the shared data is
// missing): statuses for bad input, bulk enroll with per-item errors,
// search / batch search / verify, list paging, and a restart that reloads
// the gallery (before and after compaction).
#include "services/fingerprint/fingerprint_service.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/server/service_host.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

struct Impression {
  std::string id;  // "101_1"
  int finger = 0;
  std::string bytes;
};

// DB1 set B as ISO records, or 10 x 8 synthetic fingers as xyt text.
std::vector<Impression> LoadImpressions() {
  std::vector<Impression> out;
  auto dir = fingerprint::FindFingerprintDataDir();
  if (dir.ok()) {
    auto db = fingerprint::LoadFvc2002(*dir, 1);
    if (db.ok()) {
      for (const auto& imp : *db) {
        auto bytes = fingerprint::ReadFileBytes(imp.path);
        if (!bytes.ok()) continue;
        out.push_back({absl::StrCat(imp.finger, "_", imp.impression), imp.finger,
                       std::string(bytes->begin(), bytes->end())});
      }
      return out;
    }
  }
  std::srand(5);
  for (int f = 0; f < 10; ++f) {
    std::vector<std::array<int, 3>> base;
    for (int m = 0; m < 35; ++m) base.push_back({40 + std::rand() % 220, 40 + std::rand() % 300, std::rand() % 360});
    for (int i = 1; i <= 8; ++i) {
      std::string text;
      for (const auto& m : base) {
        if (std::rand() % 10 == 0) continue;
        absl::StrAppend(&text, m[0] + std::rand() % 3, " ", m[1] + std::rand() % 3, " ", m[2], " 60\n");
      }
      out.push_back({absl::StrCat(101 + f, "_", i), 101 + f, text});
    }
  }
  return out;
}

std::string TmpDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "_", getpid());
  std::system(("rm -rf '" + dir + "'").c_str());
  return dir;
}

class Server {
 public:
  explicit Server(FingerprintServiceOptions options) {
    ServerOptions server;
    server.grpc_port = 0;
    server.metrics_port = -1;
    server.device = "cpu";
    auto service = FingerprintServiceImpl::Create(server, options);
    EXPECT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    host_ = std::make_unique<ServiceHost>(server);
    host_->AddService(service_.get());
    EXPECT_TRUE(host_->Start().ok());
    stub_ = v1::FingerprintService::NewStub(host_->InProcessChannel());
  }
  ~Server() {
    host_->Drain();
    host_.reset();
  }
  v1::FingerprintService::Stub& stub() { return *stub_; }
  FingerprintServiceImpl& service() { return *service_; }

 private:
  std::unique_ptr<FingerprintServiceImpl> service_;
  std::unique_ptr<ServiceHost> host_;
  std::unique_ptr<v1::FingerprintService::Stub> stub_;
};

v1::FingerprintTemplate Record(const std::string& bytes) {
  v1::FingerprintTemplate t;
  t.set_data(bytes);
  return t;
}

grpc::Status Enroll(Server& s, const std::string& id, const std::string& bytes, bool replace = false) {
  grpc::ClientContext ctx;
  v1::EnrollRequest req;
  req.set_id(id);
  *req.mutable_record() = Record(bytes);
  req.set_replace(replace);
  v1::EnrollResponse resp;
  return s.stub().Enroll(&ctx, req, &resp);
}

grpc::Status Search(Server& s, const std::string& probe, int top_k, v1::SearchResponse* resp) {
  grpc::ClientContext ctx;
  v1::SearchRequest req;
  *req.mutable_probe() = Record(probe);
  req.set_top_k(top_k);
  return s.stub().Search(&ctx, req, resp);
}

// Impressions 1-6 of every finger enrolled by stream; 7 and 8 are probes.
v1::EnrollStreamResponse EnrollGallery(Server& s, const std::vector<Impression>& imps, bool with_bad_items) {
  grpc::ClientContext ctx;
  v1::EnrollStreamResponse resp;
  auto writer = s.stub().EnrollStream(&ctx, &resp);
  int n = 0;
  for (const Impression& imp : imps) {
    if (imp.id.back() == '7' || imp.id.back() == '8') continue;
    v1::EnrollRequest req;
    req.set_id(imp.id);
    *req.mutable_record() = Record(imp.bytes);
    EXPECT_TRUE(writer->Write(req));
    if (with_bad_items && ++n == 5) {
      v1::EnrollRequest bad;
      bad.set_id("truncated");
      *bad.mutable_record() = Record(imp.bytes.substr(0, imp.bytes.size() - 3));
      EXPECT_TRUE(writer->Write(bad));
      bad.set_id(imp.id);  // a duplicate id with other bytes (the same bytes would be a retry: OK)
      *bad.mutable_record() = Record(&imp == &imps.front() ? imps.back().bytes : imps.front().bytes);
      EXPECT_TRUE(writer->Write(bad));
    }
  }
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp;
}

bool IsProbe(const Impression& imp) { return imp.id.back() == '7' || imp.id.back() == '8'; }

TEST(FingerprintServiceTest, EndToEnd) {
  const std::vector<Impression> imps = LoadImpressions();
  ASSERT_GE(imps.size(), 40u);
  const std::string dir = TmpDir("fp_service");
  FingerprintServiceOptions options;
  options.gallery_dir = dir;
  options.max_probes = 4;
  options.max_template_bytes = 8192;
  options.enroll_group = 16;
  std::vector<std::string> rank1_before;
  {
    Server s(options);
    // Empty gallery: OK, no candidates.
    v1::SearchResponse empty;
    ASSERT_TRUE(Search(s, imps[0].bytes, 5, &empty).ok());
    EXPECT_EQ(empty.candidates_size(), 0);

    const v1::EnrollStreamResponse bulk = EnrollGallery(s, imps, /*with_bad_items=*/true);
    const int gallery = static_cast<int>(imps.size() - std::count_if(imps.begin(), imps.end(), IsProbe));
    EXPECT_EQ(bulk.enrolled(), gallery);
    EXPECT_EQ(bulk.failed(), 2);
    ASSERT_EQ(bulk.errors_size(), 2);
    EXPECT_EQ(bulk.errors(0).index(), 5);
    EXPECT_EQ(bulk.errors(0).id(), "truncated");
    EXPECT_EQ(bulk.errors(0).code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(bulk.errors(1).code(), grpc::StatusCode::ALREADY_EXISTS);
    EXPECT_EQ(bulk.gallery_size(), gallery);

    // Single enroll statuses.
    EXPECT_EQ(Enroll(s, imps[0].id, imps[1].bytes).error_code(), grpc::StatusCode::ALREADY_EXISTS);
    // The same bytes again is a retry (issue 31): OK, the gallery unchanged.
    EXPECT_TRUE(Enroll(s, imps[0].id, imps[0].bytes).ok());
    EXPECT_TRUE(Enroll(s, imps[0].id, imps[0].bytes, /*replace=*/true).ok());
    grpc::Status truncated = Enroll(s, "bad", imps[0].bytes.substr(0, imps[0].bytes.size() / 2));
    EXPECT_EQ(truncated.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_FALSE(truncated.error_message().empty());
    EXPECT_EQ(Enroll(s, "bad", "").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(Enroll(s, "bad", std::string("\x01\x02\x03\xff", 4)).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(Enroll(s, "", imps[0].bytes).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    // Ids that would render misleadingly in evidence: NEXT LINE, a bidi override.
    for (const auto& [id, code_point] : {std::make_pair(std::string("case\xc2\x85" "42"), "U+0085"),
                                         std::make_pair(std::string("x\xe2\x80\xae" "gpj.exe"), "U+202E")}) {
      grpc::Status bad_id = Enroll(s, id, imps[0].bytes);
      EXPECT_EQ(bad_id.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << code_point;
      EXPECT_THAT(bad_id.error_message(), ::testing::HasSubstr(code_point));
    }
    EXPECT_EQ(Enroll(s, "huge", std::string(9000, '1')).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

    // Search: each held-out impression finds its finger first.
    int rank1 = 0, probes = 0;
    for (const Impression& imp : imps) {
      if (!IsProbe(imp)) continue;
      v1::SearchResponse resp;
      grpc::Status st = Search(s, imp.bytes, 5, &resp);
      ASSERT_TRUE(st.ok()) << st.error_message();
      ASSERT_EQ(resp.candidates_size(), 5);
      for (int i = 1; i < 5; ++i) EXPECT_GE(resp.candidates(i - 1).score(), resp.candidates(i).score());
      EXPECT_EQ(resp.timing().gallery_size(), gallery);
      EXPECT_EQ(resp.timing().matcher(), "lssr");
      ++probes;
      rank1 += resp.candidates(0).id().substr(0, 3) == imp.id.substr(0, 3);
      rank1_before.push_back(resp.candidates(0).id());
    }
    EXPECT_GE(rank1, probes * 9 / 10) << rank1 << " of " << probes;
    // The DMC matcher on request, over the same gallery.
    {
      grpc::ClientContext ctx;
      v1::SearchRequest req;
      *req.mutable_probe() = Record(imps[7].bytes);
      req.set_top_k(3);
      req.set_matcher("dmc");
      v1::SearchResponse dmc;
      grpc::Status st = s.stub().Search(&ctx, req, &dmc);
      ASSERT_TRUE(st.ok()) << st.error_message();
      EXPECT_EQ(dmc.timing().matcher(), "dmc");
      ASSERT_EQ(dmc.candidates_size(), 3);
      EXPECT_EQ(dmc.candidates(0).id().substr(0, 3), imps[7].id.substr(0, 3));
      grpc::ClientContext ctx2;
      req.set_matcher("bogus");
      EXPECT_EQ(s.stub().Search(&ctx2, req, &dmc).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    }
    v1::SearchResponse resp;
    EXPECT_EQ(Search(s, imps[0].bytes, 0, &resp).error_code(), grpc::StatusCode::OK);  // 0: default 10
    EXPECT_EQ(resp.candidates_size(), 10);
    EXPECT_EQ(Search(s, imps[0].bytes, -1, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(Search(s, imps[0].bytes, 1001, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(Search(s, "garbage!", 3, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

    // Batch: results in the order given, equal to single searches.
    {
      grpc::ClientContext ctx;
      v1::SearchBatchRequest req;
      req.set_top_k(3);
      std::vector<const Impression*> chosen;
      for (const Impression& imp : imps) {
        if (IsProbe(imp) && chosen.size() < 3) chosen.push_back(&imp);
      }
      for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) *req.add_probes() = Record((*it)->bytes);
      v1::SearchBatchResponse batch;
      ASSERT_TRUE(s.stub().SearchBatch(&ctx, req, &batch).ok());
      ASSERT_EQ(batch.results_size(), 3);
      for (int i = 0; i < 3; ++i) {
        v1::SearchResponse single;
        ASSERT_TRUE(Search(s, chosen[2 - i]->bytes, 3, &single).ok());
        ASSERT_EQ(batch.results(i).candidates_size(), 3);
        for (int r = 0; r < 3; ++r) {
          EXPECT_EQ(batch.results(i).candidates(r).id(), single.candidates(r).id());
          EXPECT_EQ(batch.results(i).candidates(r).score(), single.candidates(r).score());
        }
      }
      grpc::ClientContext ctx2;
      for (int i = 0; i < 3; ++i) *req.add_probes() = Record(chosen[0]->bytes);  // 6 > max_probes
      EXPECT_EQ(s.stub().SearchBatch(&ctx2, req, &batch).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      grpc::ClientContext ctx3;
      req.clear_probes();
      *req.add_probes() = Record(chosen[0]->bytes);
      *req.add_probes() = Record("not a template");
      grpc::Status bad = s.stub().SearchBatch(&ctx3, req, &batch);
      EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(bad.error_message(), HasSubstr("probe 1"));
    }

    // Verify by id and by template.
    {
      grpc::ClientContext ctx;
      v1::VerifyRequest req;
      *req.mutable_probe() = Record(imps[0].bytes);
      req.set_id(imps[1].id);
      v1::VerifyResponse resp;
      ASSERT_TRUE(s.stub().Verify(&ctx, req, &resp).ok());
      grpc::ClientContext ctx2;
      *req.mutable_reference() = Record(imps[1].bytes);
      v1::VerifyResponse resp2;
      ASSERT_TRUE(s.stub().Verify(&ctx2, req, &resp2).ok());
      EXPECT_EQ(resp.score(), resp2.score());
      EXPECT_GT(resp.score(), 0.0f);
      grpc::ClientContext ctx3;
      req.set_id("nobody");
      EXPECT_EQ(s.stub().Verify(&ctx3, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
      grpc::ClientContext ctx4;
      req.clear_against();
      EXPECT_EQ(s.stub().Verify(&ctx4, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    }

    // Delete and list.
    {
      grpc::ClientContext ctx;
      v1::DeleteRequest req;
      req.set_id("nobody");
      v1::DeleteResponse resp;
      EXPECT_EQ(s.stub().Delete(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
      grpc::ClientContext ctx2;
      req.set_id(imps[1].id);
      ASSERT_TRUE(s.stub().Delete(&ctx2, req, &resp).ok());
      EXPECT_EQ(resp.gallery_size(), gallery - 1);
      std::vector<std::string> listed;
      std::string token;
      do {
        grpc::ClientContext c;
        v1::ListRequest lr;
        lr.set_page_size(7);
        lr.set_page_token(token);
        v1::ListResponse page;
        ASSERT_TRUE(s.stub().List(&c, lr, &page).ok());
        EXPECT_LE(page.ids_size(), 7);
        listed.insert(listed.end(), page.ids().begin(), page.ids().end());
        token = page.next_page_token();
      } while (!token.empty());
      EXPECT_EQ(static_cast<int>(listed.size()), gallery - 1);
      EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end()));
      EXPECT_EQ(std::count(listed.begin(), listed.end(), imps[1].id), 0);
    }
  }
  // Restart: the gallery reloads from the log, then from a snapshot.
  for (int pass = 0; pass < 2; ++pass) {
    Server s(options);
    EXPECT_EQ(s.service().gallery().size(), static_cast<int64_t>(imps.size() - imps.size() / 4 - 1));
    size_t i = 0;
    for (const Impression& imp : imps) {
      if (!IsProbe(imp)) continue;
      v1::SearchResponse resp;
      ASSERT_TRUE(Search(s, imp.bytes, 1, &resp).ok());
      if (rank1_before[i] != imps[1].id) EXPECT_EQ(resp.candidates(0).id(), rank1_before[i]) << imp.id;
      ++i;
    }
    if (pass == 0) {
      ASSERT_TRUE(s.service().gallery().Compact().ok());
    } else {
      EXPECT_EQ(s.service().gallery().open_stats().snapshot_cylinder_templates,
                static_cast<int64_t>(imps.size() - imps.size() / 4 - 1));
    }
  }
}

}  // namespace
}  // namespace tessera
