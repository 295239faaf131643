// The scheduler's som.train engine on the CPU backend: a small synthetic
// corpus under a data root trained through the jobs::Engine interface, with
// progress per epoch, the atlas saved where SomAtlasService serves it, the
// AtlasSummary result; the service's request checks at Validate; uploads
// refused unless the engine has the store; cancellation and the deadline.
#include "services/som/training_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/testing/temp_files.h"
#include "services/jobs/engine.h"
#include "services/som/atlas.h"
#include "services/som/corpus.h"
#include "services/som/corpus_store.h"
#include "services/som/synthetic.h"
#include "services/som/testing/topic_corpus.h"
#include "tessera/v1/som.pb.h"

namespace tessera {
namespace som {
namespace {

using ::tessera::testing::PathExists;
using ::tessera::testing::TestTmpPath;

namespace fs = std::filesystem;

SparseBinaryMatrix SmallCorpus() {
  SyntheticCorpusOptions o = testing::TopicCorpus(400, 60, /*grid=*/3);
  o.mean_nnz = 6;
  o.features_per_topic = 6;
  return GenerateSyntheticCorpus(o);
}

// <TEST_TMPDIR>/<name>/data (the data root, holding c.csr and ids.txt) and
// <TEST_TMPDIR>/<name>/atlases.
class TrainingEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestTmpPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_ + "/data");
    corpus_ = SmallCorpus();
    ASSERT_TRUE(WriteCsrBinary(root_ + "/data/c.csr", corpus_).ok());
    std::vector<std::string> ids;
    for (int d = 0; d < 400; ++d) ids.push_back(absl::StrCat("gene", d));
    ASSERT_TRUE(WriteLines(root_ + "/data/ids.txt", ids).ok());
  }

  TrainingEngineOptions Options() {
    TrainingEngineOptions o;
    o.limits.data_roots = {root_ + "/data"};
    o.limits.atlas_dir = root_ + "/atlases";
    o.limits.default_device = "cpu";
    o.limits.max_nodes = 4096;
    o.limits.max_corpus_bytes = 64 << 20;
    o.on_saved = [this](const std::string& id, Atlas atlas) { saved_[id] = atlas.bmu.size(); };
    return o;
  }

  static google::protobuf::Any Spec(const v1::CreateAtlasRequest& request) {
    google::protobuf::Any any;
    any.PackFrom(request);
    return any;
  }

  static v1::CreateAtlasRequest Request(const std::string& atlas_id, int epochs) {
    v1::CreateAtlasRequest r;
    r.set_atlas_id(atlas_id);
    r.mutable_corpus()->set_path("c.csr");  // relative to the data root
    r.mutable_corpus()->set_document_ids_path("ids.txt");
    v1::AtlasOptions* o = r.mutable_options();
    o->set_width(5);
    o->set_height(4);
    o->set_epochs(epochs);
    o->set_radius_decay_epochs(std::max(1, epochs - 1));
    o->set_convergence_tolerance(0);  // every epoch
    o->set_init("random");
    o->set_holdout_fraction(0.1);
    return r;
  }

  std::string root_;
  SparseBinaryMatrix corpus_;
  std::map<std::string, size_t> saved_;  // on_saved: atlas id -> documents
};

TEST_F(TrainingEngineTest, TrainsReportsEveryEpochAndSavesWhereTheServiceLooks) {
  auto engine = NewTrainingEngine(Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->kind(), "som.train");
  EXPECT_EQ((*engine)->spec_type(), "tessera.v1.CreateAtlasRequest");
  jobs::EngineRegistry registry;
  ASSERT_TRUE(registry.Add(*engine).ok());
  const google::protobuf::Any spec = Spec(Request("genes", 6));
  auto found = registry.Find("", spec);  // by the spec's type
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->get(), engine->get());
  ASSERT_TRUE((*engine)->Validate(spec).ok()) << (*engine)->Validate(spec);
  EXPECT_FALSE((*engine)->Needs(spec).needs_gpu);

  std::vector<jobs::JobProgress> events;
  std::atomic<bool> cancel{false};
  jobs::EngineContext ctx("job-1", root_ + "/work", &cancel, absl::InfiniteFuture(),
                          [&](const jobs::JobProgress& p) { events.push_back(p); });
  auto out = (*engine)->Run(spec, ctx);
  ASSERT_TRUE(out.ok()) << out.status();

  // One "epoch" event per epoch, in order, with its figures; fractions rise.
  std::vector<const jobs::JobProgress*> epochs;
  for (const jobs::JobProgress& p : events) {
    if (p.stage == "epoch") epochs.push_back(&p);
  }
  ASSERT_EQ(epochs.size(), 6u);
  for (size_t e = 0; e < epochs.size(); ++e) {
    const jobs::JobProgress& p = *epochs[e];
    EXPECT_EQ(p.step, static_cast<int64_t>(e + 1));
    EXPECT_EQ(p.total_steps, 6);
    EXPECT_EQ(p.metrics.at("epoch"), e + 1);
    EXPECT_GT(p.metrics.at("qe"), 0);
    EXPECT_GE(p.metrics.at("topographic_error"), 0);
    EXPECT_GT(p.metrics.at("radius"), 0);
    if (e > 0) EXPECT_LE(p.metrics.at("radius"), epochs[e - 1]->metrics.at("radius"));
    EXPECT_GT(p.fraction, 0);
    EXPECT_LE(p.fraction, 0.95);
  }
  EXPECT_EQ(events.front().stage, "input");
  EXPECT_EQ(events.back().stage, "save");
  for (size_t k = 1; k < events.size(); ++k) EXPECT_GE(events[k].fraction, events[k - 1].fraction);

  // The typed result.
  v1::AtlasSummary summary;
  ASSERT_TRUE(out->result.UnpackTo(&summary)) << out->result.type_url();
  EXPECT_EQ(summary.atlas_id(), "genes");
  EXPECT_EQ(summary.directory(), root_ + "/atlases/genes");
  EXPECT_EQ(summary.width(), 5);
  EXPECT_EQ(summary.features(), 60);
  EXPECT_EQ(summary.documents(), 360);
  EXPECT_EQ(summary.epochs(), 6);
  EXPECT_EQ(summary.history_size(), 6);
  EXPECT_EQ(summary.held_out_quality().documents(), 40);
  EXPECT_GT(summary.held_out_quality().qe_euclidean(), 0);
  EXPECT_DOUBLE_EQ(summary.history(5).qe(), epochs[5]->metrics.at("qe"));

  // On disk where SomAtlasService looks, with the held-out quality; handed to on_saved.
  auto atlas = LoadAtlas(root_ + "/atlases/genes");
  ASSERT_TRUE(atlas.ok()) << atlas.status();
  EXPECT_EQ(atlas->held_out_quality.docs, 40);
  EXPECT_EQ(atlas->held_out_quality.qe_euclidean, summary.held_out_quality().qe_euclidean());
  EXPECT_TRUE(absl::StartsWith(atlas->document_ids[0], "gene"));
  EXPECT_EQ(saved_["genes"], 360u);

  // The same id again is refused at submit, as CreateAtlas refuses it, and
  // when another job runs it.
  absl::Status again = (*engine)->Validate(spec);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  jobs::EngineContext other("job-2", root_ + "/work2", &cancel, absl::InfiniteFuture(), nullptr);
  EXPECT_EQ((*engine)->Run(spec, other).status().code(), absl::StatusCode::kAlreadyExists);
  // A retry of job-1 (whose success was not recorded) takes the atlas it saved.
  auto retried = (*engine)->Run(spec, ctx);
  ASSERT_TRUE(retried.ok()) << retried.status();
  v1::AtlasSummary adopted;
  ASSERT_TRUE(retried->result.UnpackTo(&adopted));
  EXPECT_EQ(adopted.created(), summary.created());
}

TEST_F(TrainingEngineTest, AnUnnamedAtlasIsNamedAfterItsJob) {
  auto engine = NewTrainingEngine(Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::atomic<bool> cancel{false};
  jobs::EngineContext ctx("job/7", root_ + "/work", &cancel, absl::InfiniteFuture(), nullptr);
  auto out = (*engine)->Run(Spec(Request("", 2)), ctx);
  ASSERT_TRUE(out.ok()) << out.status();
  v1::AtlasSummary summary;
  ASSERT_TRUE(out->result.UnpackTo(&summary));
  EXPECT_EQ(summary.atlas_id(), "atlas-job-7");
  EXPECT_TRUE(PathExists(root_ + "/atlases/atlas-job-7/manifest.json"));
}

TEST_F(TrainingEngineTest, ValidateRefusesWhatCreateAtlasRefuses) {
  auto engine = NewTrainingEngine(Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::ofstream(root_ + "/outside.svm") << "1 1:1\n";
  struct Case {
    const char* what;
    std::function<void(v1::CreateAtlasRequest&)> edit;
    absl::StatusCode code;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"an upload", [](auto& r) { r.mutable_corpus()->set_corpus_id("corpus-1"); }, absl::StatusCode::kInvalidArgument,
       "server path"},
      {"no corpus", [](auto& r) { r.clear_corpus(); }, absl::StatusCode::kInvalidArgument, "corpus"},
      {"zero width", [](auto& r) { r.mutable_options()->set_width(0); }, absl::StatusCode::kInvalidArgument, "width"},
      {"map over the limit",
       [](auto& r) {
         r.mutable_options()->set_width(100);
         r.mutable_options()->set_height(100);
       },
       absl::StatusCode::kInvalidArgument, "limit"},
      {"holdout of everything", [](auto& r) { r.mutable_options()->set_holdout_fraction(1); },
       absl::StatusCode::kInvalidArgument, "holdout"},
      {"bad device", [](auto& r) { r.mutable_options()->set_device("tpu"); }, absl::StatusCode::kInvalidArgument,
       "device"},
      {"bad atlas id", [](auto& r) { r.set_atlas_id("../escape"); }, absl::StatusCode::kInvalidArgument, "atlas_id"},
      {"path outside the roots", [this](auto& r) { r.mutable_corpus()->set_path(root_ + "/outside.svm"); },
       absl::StatusCode::kPermissionDenied, "corpus path"},
      {"missing file", [](auto& r) { r.mutable_corpus()->set_path("missing.csr"); }, absl::StatusCode::kNotFound,
       "missing.csr"},
      {"missing ids", [](auto& r) { r.mutable_corpus()->set_document_ids_path("nope.txt"); },
       absl::StatusCode::kNotFound, "document_ids_path"},
      {"bad index base", [](auto& r) { r.mutable_corpus()->set_index_base(2); }, absl::StatusCode::kInvalidArgument,
       "index_base"},
  };
  for (const Case& c : cases) {
    v1::CreateAtlasRequest request = Request("bad", 2);
    c.edit(request);
    const absl::Status s = (*engine)->Validate(Spec(request));
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), c.says)) << c.what << ": " << s;
  }
  // Not a CreateAtlasRequest at all.
  google::protobuf::Any other;
  other.PackFrom(v1::AtlasSummary());
  EXPECT_EQ((*engine)->Validate(other).code(), absl::StatusCode::kInvalidArgument);
  // Without an atlas directory nothing can be saved.
  TrainingEngineOptions no_dir = Options();
  no_dir.limits.atlas_dir.clear();
  auto homeless = NewTrainingEngine(no_dir);
  ASSERT_TRUE(homeless.ok());
  EXPECT_EQ((*homeless)->Validate(Spec(Request("x", 2))).code(), absl::StatusCode::kFailedPrecondition);
  // Limits that cannot work are refused when the engine is made.
  TrainingEngineOptions bad = Options();
  bad.limits.max_nodes = 0;
  EXPECT_EQ(NewTrainingEngine(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Options();
  bad.limits.data_roots = {root_ + "/no-such-root"};
  EXPECT_FALSE(NewTrainingEngine(bad).ok());
}

TEST_F(TrainingEngineTest, UploadsWorkWhenTheEngineHasTheStore) {
  CorpusStore uploads(CorpusStore::Options{64 << 20, absl::Minutes(5), 16});
  auto stored = std::make_shared<StoredCorpus>();
  stored->matrix = corpus_;
  auto entry = uploads.Put(stored);
  ASSERT_TRUE(entry.ok()) << entry.status();
  TrainingEngineOptions options = Options();
  options.uploads = &uploads;
  auto engine = NewTrainingEngine(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  v1::CreateAtlasRequest request = Request("uploaded", 2);
  request.mutable_corpus()->set_corpus_id(entry->id);  // replaces the path
  request.mutable_corpus()->clear_document_ids_path();   // an upload carries its own ids
  ASSERT_TRUE((*engine)->Validate(Spec(request)).ok()) << (*engine)->Validate(Spec(request));
  std::atomic<bool> cancel{false};
  jobs::EngineContext ctx("job-2", root_ + "/work", &cancel, absl::InfiniteFuture(), nullptr);
  auto out = (*engine)->Run(Spec(request), ctx);
  ASSERT_TRUE(out.ok()) << out.status();
  v1::AtlasSummary summary;
  ASSERT_TRUE(out->result.UnpackTo(&summary));
  EXPECT_EQ(summary.documents(), 360);
  request.set_atlas_id("another");
  request.mutable_corpus()->set_corpus_id("corpus-unknown");
  EXPECT_EQ((*engine)->Validate(Spec(request)).code(), absl::StatusCode::kNotFound);
}

TEST_F(TrainingEngineTest, CancellationStopsBetweenEpochsAndSavesNothing) {
  auto engine = NewTrainingEngine(Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::atomic<bool> cancel{false};
  int epochs = 0;
  // The client cancels while the third epoch is reported.
  jobs::EngineContext ctx("job-3", root_ + "/work", &cancel, absl::InfiniteFuture(), [&](const jobs::JobProgress& p) {
    if (p.stage == "epoch" && ++epochs == 3) cancel = true;
  });
  auto out = (*engine)->Run(Spec(Request("stopped", 1000)), ctx);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_EQ(epochs, 3);  // no epoch after the one that saw the cancel
  EXPECT_FALSE(PathExists(root_ + "/atlases/stopped"));
  EXPECT_TRUE(saved_.empty());
  if (PathExists(root_ + "/atlases")) {
    for (const auto& e : fs::directory_iterator(root_ + "/atlases")) ADD_FAILURE() << "left behind: " << e.path();
  }

  // A deadline already past: stopped before the corpus is read.
  std::atomic<bool> never{false};
  std::vector<std::string> stages;
  jobs::EngineContext late("job-4", root_ + "/work", &never, absl::Now() - absl::Seconds(1),
                           [&](const jobs::JobProgress& p) { stages.push_back(p.stage); });
  EXPECT_EQ((*engine)->Run(Spec(Request("late", 3)), late).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(stages.empty());
  EXPECT_FALSE(PathExists(root_ + "/atlases/late"));
}

}  // namespace
}  // namespace som
}  // namespace tessera
