// SearchEngine ("fingerprint.search"): validates like SearchBatch, returns
// the searcher's results as a SearchBatchResponse, reports progress per
// gallery chunk, and stops with CANCELLED when the job's cancel flag is set
// after the first chunk (no second chunk is reported) or DEADLINE_EXCEEDED.
#include "services/fingerprint/search_engine.h"

#include <atomic>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/service_testing.h"

namespace tessera {
namespace fingerprint {
namespace {

class SearchEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SearcherOptions o;
    o.device = "cpu";
    o.chunk_templates = 25;  // 8 chunks
    auto s = CreateSearcher(o);
    ASSERT_TRUE(s.ok());
    searcher_ = std::move(*s);
    points_ = fingerprint::testing::SyntheticTemplates(200, 111);
    std::vector<std::shared_ptr<const StoredTemplate>> entries;
    for (size_t i = 0; i < points_.size(); ++i) {
      auto t = std::make_shared<StoredTemplate>();
      t->id = absl::StrCat("e", i);
      // As the service stores it: minutiae parsed back from the xyt record.
      auto parsed = ParseProbeOrTemplate(fingerprint::testing::XytRecord(points_[i]), TemplateFormat::kXyt);
      ASSERT_TRUE(parsed.ok());
      t->minutiae = parsed->minutiae;
      t->seq = i + 1;
      t->metadata.subject_id = absl::StrCat("s", i / 10);
      t->metadata.finger_position = 1 + static_cast<int>(i % 10);
      entries.push_back(t);
    }
    ASSERT_TRUE(searcher_->Add(entries).ok());
    engine_ = std::make_unique<SearchEngine>(searcher_.get(), SearchLimits{100, 8, 1 << 20});
    for (int p : {3, 77, 150}) *request_.add_probes() = fingerprint::testing::XytTemplate(points_[p]);
    request_.set_top_k(4);
  }

  google::protobuf::Any Spec(const v1::SearchBatchRequest& r) const {
    google::protobuf::Any any;
    any.PackFrom(r);
    return any;
  }

  std::unique_ptr<GallerySearcher> searcher_;
  std::unique_ptr<SearchEngine> engine_;
  std::vector<std::vector<MinutiaPoint>> points_;
  v1::SearchBatchRequest request_;
};

TEST_F(SearchEngineTest, KindAndValidation) {
  EXPECT_EQ(engine_->kind(), "fingerprint.search");
  EXPECT_EQ(engine_->spec_type(), "tessera.v1.SearchBatchRequest");
  EXPECT_TRUE(engine_->Validate(Spec(request_)).ok());
  v1::SearchBatchRequest bad = request_;
  bad.set_top_k(101);
  EXPECT_EQ(engine_->Validate(Spec(bad)).code(), absl::StatusCode::kInvalidArgument);
  bad = request_;
  bad.set_matcher("bozorth");
  EXPECT_EQ(engine_->Validate(Spec(bad)).code(), absl::StatusCode::kInvalidArgument);
  bad = request_;
  bad.mutable_probes(1)->set_data("not a template");
  absl::Status s = engine_->Validate(Spec(bad));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("probe 1"), absl::string_view::npos) << s;
  bad = request_;
  for (int i = 0; i < 6; ++i) *bad.add_probes() = request_.probes(0);
  EXPECT_EQ(engine_->Validate(Spec(bad)).code(), absl::StatusCode::kResourceExhausted);
  google::protobuf::Any other;
  other.PackFrom(v1::SearchRequest());
  EXPECT_EQ(engine_->Validate(other).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SearchEngineTest, RunsTheSearchAndReportsEveryChunk) {
  std::vector<jobs::JobProgress> reports;
  jobs::EngineContext ctx("job-1", "/nonexistent", nullptr, absl::InfiniteFuture(),
                          [&](const jobs::JobProgress& p) { reports.push_back(p); });
  // Checked at submit, then run: the probes are parsed once (TypedEngine's plan).
  ASSERT_TRUE(engine_->Validate(Spec(request_)).ok());
  EXPECT_FALSE(engine_->Needs(Spec(request_)).needs_gpu);
  auto out = engine_->Run(Spec(request_), ctx);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(engine_->plans_made(), 1);
  v1::SearchBatchResponse response;
  ASSERT_TRUE(out->result.UnpackTo(&response));
  ASSERT_EQ(response.results_size(), 3);
  std::vector<std::vector<MinutiaPoint>> probes;
  for (const auto& p : request_.probes()) probes.push_back(ParseProbeOrTemplate(p.data(), TemplateFormat::kXyt)->minutiae);
  auto want = searcher_->Search(probes, 4);
  ASSERT_TRUE(want.ok());
  for (int p = 0; p < 3; ++p) {
    ASSERT_EQ(response.results(p).candidates_size(), 4);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(response.results(p).candidates(r).id(), (*want)[p][r].id);
      EXPECT_EQ(response.results(p).candidates(r).score(), (*want)[p][r].score);
    }
  }
  EXPECT_EQ(response.results(0).candidates(0).id(), "e3");
  EXPECT_EQ(response.timing().gallery_size(), 200);
  EXPECT_EQ(response.timing().matcher(), "lssr");
  ASSERT_EQ(reports.size(), 8u);
  EXPECT_EQ(reports[0].stage, "search");
  EXPECT_EQ(reports[0].step, 25);
  EXPECT_EQ(reports.back().fraction, 1.0);
}

// A job's spec filters as SearchBatch does; candidates carry their metadata.
TEST_F(SearchEngineTest, FiltersByFingerPositionAndReturnsMetadata) {
  jobs::EngineContext ctx("job-4", "/nonexistent", nullptr, absl::InfiniteFuture(), nullptr);
  v1::SearchBatchRequest r = request_;
  r.add_finger_positions(4);  // probe 0 is e3: finger 4
  auto out = engine_->Run(Spec(r), ctx);
  ASSERT_TRUE(out.ok()) << out.status();
  v1::SearchBatchResponse response;
  ASSERT_TRUE(out->result.UnpackTo(&response));
  ASSERT_EQ(response.results(0).candidates_size(), 4);
  EXPECT_EQ(response.results(0).candidates(0).id(), "e3");
  for (const auto& result : response.results()) {
    for (const auto& c : result.candidates()) EXPECT_EQ(c.metadata().finger_position(), 4) << c.id();
  }
  EXPECT_EQ(response.results(0).candidates(0).metadata().subject_id(), "s0");
  r.add_finger_positions(-3);
  EXPECT_EQ(engine_->Validate(Spec(r)).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SearchEngineTest, CancelAfterTheFirstChunkStopsTheJob) {
  for (const std::string matcher : {"lssr", "dmc"}) {
    std::atomic<bool> cancel{false};
    int reports = 0;
    jobs::EngineContext ctx("job-2", "/nonexistent", &cancel, absl::InfiniteFuture(),
                            [&](const jobs::JobProgress&) {
                              ++reports;
                              cancel = true;  // set after the first chunk
                            });
    v1::SearchBatchRequest r = request_;
    r.set_matcher(matcher);
    auto out = engine_->Run(Spec(r), ctx);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << matcher << ": " << out.status();
    EXPECT_EQ(reports, 1) << matcher;
  }
}

TEST_F(SearchEngineTest, PastDeadlineStops) {
  jobs::EngineContext ctx("job-3", "/nonexistent", nullptr, absl::Now() - absl::Seconds(1), nullptr);
  EXPECT_EQ(engine_->Run(Spec(request_), ctx).status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
