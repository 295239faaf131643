// The training pipeline on the CPU backend: held-out rows measured and never
// trained on, the same result as TrainSom + ProjectDocuments by hand, the
// atlas on disk with its held-out quality, progress in order, stops that save
// nothing, and directories that are not replaced unless asked.
#include "services/som/atlas_training.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/temp_files.h"
#include "services/som/atlas.h"
#include "services/som/corpus.h"
#include "services/som/synthetic.h"
#include "services/som/testing/topic_corpus.h"

namespace tessera {
namespace som {
namespace {

using ::tessera::testing::PathExists;
using ::tessera::testing::TestTmpPath;

std::shared_ptr<const StoredCorpus> Corpus() {
  SyntheticCorpusOptions o = testing::TopicCorpus(300, 50, /*grid=*/3);
  o.features_per_topic = 6;
  auto corpus = std::make_shared<StoredCorpus>();
  corpus->matrix = GenerateSyntheticCorpus(o);
  for (int v = 0; v < 50; ++v) corpus->feature_names.push_back(absl::StrCat("term", v));
  for (int d = 0; d < 300; ++d) corpus->document_ids.push_back(d % 7 == 0 ? "" : absl::StrCat("doc", d));
  return corpus;
}

AtlasTrainingOptions Options(const std::string& directory) {
  AtlasTrainingOptions o;
  o.train.grid = GridShape{5, 4, Topology::kPlanar};
  o.train.max_epochs = 5;
  o.train.radius_decay_epochs = 3;
  o.train.init = InitMethod::kRandom;
  o.train.convergence_tolerance = 0;
  o.train.seed = 17;
  o.holdout_fraction = 0.1;
  o.directory = directory;
  return o;
}

TEST(AtlasTraining, HoldsOutMeasuresAndSavesWhatTrainSomGives) {
  const std::shared_ptr<const StoredCorpus> corpus = Corpus();
  AtlasTrainingInput input;
  input.corpus = corpus;
  const AtlasTrainingOptions options = Options(TestTmpPath("pipeline/atlas"));
  std::vector<AtlasTrainingProgress> events;
  AtlasTrainingCallbacks callbacks;
  callbacks.progress = [&](const AtlasTrainingProgress& p) { events.push_back(p); };
  absl::StatusOr<AtlasTrainingSummary> s = TrainAndSaveAtlas(input, options, callbacks);
  ASSERT_TRUE(s.ok()) << s.status();

  // The same split, training and projections by hand.
  const RowSplit split = SplitRows(300, 0.1, 17);
  ASSERT_EQ(split.held_out.size(), 30u);
  const SparseBinaryMatrix train = SelectRows(corpus->matrix, split.train);
  TrainOptions by_hand = options.train;
  absl::StatusOr<TrainResult> trained = TrainSom(train, by_hand);
  ASSERT_TRUE(trained.ok()) << trained.status();
  absl::StatusOr<Projection> cells = ProjectDocuments(trained->model, train, Backend::kCpu);
  absl::StatusOr<Projection> held =
      ProjectDocuments(trained->model, SelectRows(corpus->matrix, split.held_out), Backend::kCpu);
  ASSERT_TRUE(cells.ok() && held.ok());

  const Atlas& atlas = s->atlas;
  EXPECT_EQ(s->directory, options.directory);
  EXPECT_EQ(s->documents, 300);
  EXPECT_EQ(s->features, 50);
  EXPECT_EQ(s->nonzeros, corpus->matrix.nnz());
  EXPECT_EQ(s->held_out_documents, 30);
  EXPECT_EQ(atlas.model.weights_f32, trained->model.weights_f32);
  EXPECT_EQ(atlas.bmu, cells->bmu);
  EXPECT_EQ(atlas.epochs, 5);
  EXPECT_EQ(atlas.held_out_quality.docs, 30);
  EXPECT_EQ(atlas.held_out_quality.qe_euclidean, held->quality.qe_euclidean);
  EXPECT_EQ(atlas.held_out_quality.topographic_error, held->quality.topographic_error);
  EXPECT_EQ(atlas.held_out_quality.dead_units, held->quality.dead_units);
  EXPECT_GT(atlas.held_out_quality.qe_euclidean, 0);
  // Training rows keep their ids; rows without one are named by their row in the corpus.
  ASSERT_EQ(atlas.document_ids.size(), 270u);
  for (size_t k = 0; k < split.train.size(); ++k) {
    const int64_t row = split.train[k];
    EXPECT_EQ(atlas.document_ids[k], row % 7 == 0 ? absl::StrCat("d", row) : absl::StrCat("doc", row));
  }
  EXPECT_EQ(atlas.feature_names[3], "term3");
  // What a restart loads is what was returned.
  absl::StatusOr<Atlas> loaded = LoadAtlas(options.directory);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->held_out_quality.qe_euclidean, atlas.held_out_quality.qe_euclidean);
  EXPECT_EQ(loaded->bmu, atlas.bmu);

  // input, init, 5 epochs, save; fractions never go back.
  ASSERT_EQ(events.size(), 8u);
  EXPECT_EQ(events[0].stage, "input");
  EXPECT_EQ(events[1].stage, "init");
  EXPECT_EQ(events[1].train_documents, 270);
  EXPECT_EQ(events[1].held_out_documents, 30);
  EXPECT_TRUE(absl::StrContains(events[1].message, "270 documents (30 held out)")) << events[1].message;
  for (int e = 0; e < 5; ++e) {
    const AtlasTrainingProgress& p = events[2 + e];
    EXPECT_EQ(p.stage, "epoch");
    EXPECT_EQ(p.epoch.epoch, e);
    EXPECT_EQ(p.max_epochs, 5);
    EXPECT_EQ(p.epoch.qe, atlas.history[e].qe);
  }
  EXPECT_EQ(events[7].stage, "save");
  for (size_t k = 1; k < events.size(); ++k) EXPECT_GE(events[k].fraction, events[k - 1].fraction);
}

TEST(AtlasTraining, ReadsFilesAndReplacesOnlyWhenAsked) {
  const std::shared_ptr<const StoredCorpus> corpus = Corpus();
  const std::string dir = TestTmpPath("files");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteCsrBinary(dir + "/c.csr", corpus->matrix).ok());
  std::vector<std::string> tsv;  // go_features.tsv style
  for (int v = 0; v < 50; ++v) tsv.push_back(absl::StrCat("T:", v, "\tBP\tterm", v));
  ASSERT_TRUE(WriteLines(dir + "/names.tsv", tsv).ok());
  AtlasTrainingInput input;
  input.files.corpus = dir + "/c.csr";
  input.files.feature_names = dir + "/names.tsv";
  AtlasTrainingOptions options = Options(dir + "/atlas");
  options.holdout_fraction = 0;
  absl::StatusOr<AtlasTrainingSummary> first = TrainAndSaveAtlas(input, options);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->atlas.bmu.size(), 300u);
  EXPECT_EQ(first->atlas.held_out_quality.docs, 0);
  EXPECT_EQ(first->atlas.document_ids[5], "d5");
  EXPECT_EQ(first->atlas.feature_names[7], "T:7 term7");

  // The directory exists: refused before any work, unless replacing.
  int reports = 0;
  AtlasTrainingCallbacks count;
  count.progress = [&](const AtlasTrainingProgress&) { ++reports; };
  absl::StatusOr<AtlasTrainingSummary> again = TrainAndSaveAtlas(input, options, count);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  EXPECT_EQ(reports, 0);
  options.replace = true;
  options.train.seed = 18;
  options.train.init = InitMethod::kPca;
  absl::StatusOr<AtlasTrainingSummary> replaced = TrainAndSaveAtlas(input, options);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(LoadAtlas(dir + "/atlas")->options.init, InitMethod::kPca);

  // Reading errors name the file.
  input.files.feature_names = "";
  input.files.corpus = dir + "/missing.csr";
  absl::StatusOr<AtlasTrainingSummary> missing = TrainAndSaveAtlas(input, Options(dir + "/other"));
  EXPECT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "missing.csr")) << missing.status();
  EXPECT_FALSE(PathExists(dir + "/other"));
}

TEST(AtlasTraining, AStopSavesNothingAndReturnsItsStatus) {
  AtlasTrainingInput input;
  input.corpus = Corpus();
  const std::string dir = TestTmpPath("stopped");
  AtlasTrainingOptions options = Options(dir + "/atlas");
  options.train.max_epochs = 50;
  int epochs = 0;
  AtlasTrainingCallbacks callbacks;
  callbacks.progress = [&](const AtlasTrainingProgress& p) { epochs += p.stage == "epoch"; };
  callbacks.check_continue = [&] {
    return epochs >= 2 ? absl::DeadlineExceededError("past the deadline") : absl::OkStatus();
  };
  absl::StatusOr<AtlasTrainingSummary> s = TrainAndSaveAtlas(input, options, callbacks);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded) << s.status();
  EXPECT_EQ(epochs, 2);
  EXPECT_FALSE(PathExists(dir + "/atlas"));

  // Bad inputs: a holdout of everything, a codebook over the limit.
  options = Options(dir + "/atlas");
  options.holdout_fraction = 1;
  EXPECT_EQ(TrainAndSaveAtlas(input, options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Options(dir + "/atlas");
  options.max_codebook_bytes = 1000;  // 20 nodes x 50 features x 4 bytes = 4000
  absl::StatusOr<AtlasTrainingSummary> big = TrainAndSaveAtlas(input, options);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(big.status().message(), "codebook")) << big.status();
  EXPECT_FALSE(PathExists(dir + "/atlas"));
}

}  // namespace
}  // namespace som
}  // namespace tessera
