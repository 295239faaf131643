// `tessera som` as users run it: a tiny synthetic corpus trained through the
// CLI, the atlas reloaded by `project`, `render` and `labels` (and by the
// library and SomAtlasService), and clear errors for bad flags and files.
#include <grpcpp/server_context.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/testing/run_tessera.h"
#include "absl/strings/str_split.h"
#include "common/png_io.h"
#include "services/som/atlas.h"
#include "services/som/corpus.h"
#include "services/som/som_service.h"
#include "services/som/synthetic.h"
#include "tessera/v1/som.pb.h"

namespace tessera {
namespace {

using cli::testing::CliResult;
using Result = CliResult;

std::string Tmp(const std::string& name) { return cli::testing::TestTmp(name); }
std::string ReadAll(const std::string& path) { return cli::testing::ReadWholeFile(path); }

// Runs `tessera som <args>` with stdout and stderr captured.
CliResult Som(std::vector<std::string> args) {
  args.insert(args.begin(), "som");
  return cli::testing::RunTessera(args);
}

class SomCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    som::SyntheticCorpusOptions o;
    o.docs = 600;
    o.features = 80;
    o.topic_grid_width = 3;
    o.topic_grid_height = 3;
    o.features_per_topic = 8;
    const som::SparseBinaryMatrix corpus = som::GenerateSyntheticCorpus(o);
    ASSERT_TRUE(som::WriteLibsvm(Tmp("corpus.svm"), corpus).ok());
    ASSERT_TRUE(som::WriteCsrBinary(Tmp("corpus.csr"), corpus).ok());
    std::vector<std::string> names, ids;
    // go_features.tsv style: "<id>\t<ontology>\t<name>".
    for (int v = 0; v < 80; ++v) names.push_back(absl::StrCat("T:", v, "\tBP\tterm number ", v));
    for (int d = 0; d < 600; ++d) ids.push_back(absl::StrCat("doc", d));
    ASSERT_TRUE(som::WriteLines(Tmp("features.tsv"), names).ok());
    ASSERT_TRUE(som::WriteLines(Tmp("ids.txt"), ids).ok());
    const Result r = Som({"train", "--corpus", Tmp("corpus.svm"), "--features", Tmp("features.tsv"), "--doc_ids",
                          Tmp("ids.txt"), "--map", "6x5", "--epochs", "6", "--init", "random", "--device", "cpu",
                          "--holdout", "0.1", "--out", Tmp("atlas")});
    train_ = new Result(r);
  }
  static void TearDownTestSuite() { delete train_; }
  static Result* train_;
};
Result* SomCliTest::train_ = nullptr;

TEST_F(SomCliTest, TrainPrintsProgressAndWritesTheAtlas) {
  ASSERT_EQ(train_->code, 0) << train_->out << train_->err;
  int epoch_lines = 0;
  for (absl::string_view line : absl::StrSplit(train_->out, '\n')) {
    if (absl::StartsWith(line, "epoch ")) {
      ++epoch_lines;
      EXPECT_TRUE(absl::StrContains(line, "radius") && absl::StrContains(line, "QE") && absl::StrContains(line, " s"))
          << line;
    }
  }
  EXPECT_GE(epoch_lines, 1);
  EXPECT_LE(epoch_lines, 6);
  EXPECT_TRUE(absl::StrContains(train_->out, "held-out (60 documents): QE ")) << train_->out;
  EXPECT_TRUE(absl::StrContains(train_->out, "dead units")) << train_->out;

  auto atlas = som::LoadAtlas(Tmp("atlas"));
  ASSERT_TRUE(atlas.ok()) << atlas.status();
  EXPECT_EQ(atlas->model.grid.width, 6);
  EXPECT_EQ(atlas->model.grid.height, 5);
  EXPECT_EQ(atlas->model.features, 80);
  EXPECT_EQ(atlas->bmu.size(), 540u);
  EXPECT_EQ(atlas->feature_names[7], "T:7 term number 7");
  EXPECT_EQ(atlas->options.max_epochs, 6);
  EXPECT_EQ(static_cast<int>(atlas->history.size()), atlas->epochs);
  std::set<std::string> ids(atlas->document_ids.begin(), atlas->document_ids.end());
  EXPECT_EQ(ids.size(), 540u);
  EXPECT_TRUE(ids.count("doc0") || ids.count("doc1"));

  for (const char* png : {"umatrix.png", "hits.png"}) {
    auto image = ReadPng(Tmp(absl::StrCat("atlas/", png)));
    ASSERT_TRUE(image.ok()) << image.status();
    EXPECT_EQ(image->width % 6, 0);
    EXPECT_EQ(image->width / 6, image->height / 5);
  }
}

TEST_F(SomCliTest, ProjectMatchesTheStoredCells) {
  ASSERT_EQ(train_->code, 0);
  auto atlas = som::LoadAtlas(Tmp("atlas"));
  ASSERT_TRUE(atlas.ok());
  for (const char* docs : {"corpus.svm", "corpus.csr"}) {
    const Result r = Som({"project", "--atlas", Tmp("atlas"), "--docs", Tmp(docs), "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), 600u);
    // The training documents land where the atlas says they did.
    std::map<std::string, int32_t> stored;
    for (size_t i = 0; i < atlas->bmu.size(); ++i) stored[atlas->document_ids[i]] = atlas->bmu[i];
    int checked = 0;
    for (int d = 0; d < 600; ++d) {
      // {"doc": 3, "node": 17, "x": 5, "y": 2, "distance": 2.1}
      std::vector<std::string> f = absl::StrSplit(lines[d], absl::ByAnyChar(":,}"));
      ASSERT_EQ(f.size(), 11u) << lines[d];
      int doc = -1, node = -1, x = -1, y = -1;
      double distance = -1;
      ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f[1]), &doc));
      ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f[3]), &node));
      ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f[5]), &x));
      ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(f[7]), &y));
      ASSERT_TRUE(absl::SimpleAtod(absl::StripAsciiWhitespace(f[9]), &distance));
      EXPECT_EQ(doc, d);
      EXPECT_EQ(node, x + 6 * y);
      EXPECT_TRUE(x >= 0 && x < 6 && y >= 0 && y < 5) << lines[d];
      EXPECT_GT(distance, 0);
      auto it = stored.find(absl::StrCat("doc", d));
      if (it != stored.end()) {
        EXPECT_EQ(node, it->second) << "doc" << d;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 540);
    EXPECT_TRUE(absl::StrContains(r.err, "projected 600 documents")) << r.err;
  }
  const Result table = Som({"project", "--atlas", Tmp("atlas"), "--docs", Tmp("corpus.svm")});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_TRUE(absl::StartsWith(table.out, "doc")) << table.out.substr(0, 100);
}

TEST_F(SomCliTest, RenderKinds) {
  ASSERT_EQ(train_->code, 0);
  Result r = Som({"render", "--atlas", Tmp("atlas"), "--out", Tmp("u.png"), "--cell-pixels", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto u = ReadPng(Tmp("u.png"));
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->width, 18);
  EXPECT_EQ(u->height, 15);
  EXPECT_EQ(u->channels, 3);
  // The atlas's own umatrix.png was drawn the same way (at its own scale).
  auto own = ReadPng(Tmp("atlas/umatrix.png"));
  ASSERT_TRUE(own.ok());
  const int s = own->width / 6;
  for (int y = 0; y < 5; ++y) {
    for (int x = 0; x < 6; ++x) {
      for (int c = 0; c < 3; ++c) EXPECT_EQ(u->at(3 * x, 3 * y, c), own->at(s * x, s * y, c));
    }
  }
  r = Som({"render", "--atlas", Tmp("atlas"), "--out", Tmp("h.png"), "--kind", "hits"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Som({"render", "--atlas", Tmp("atlas"), "--out", Tmp("c.png"), "--kind", "component", "--feature", "T:3",
           "--colour-bar"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "term number 3")) << r.out;
  auto c = ReadPng(Tmp("c.png"));
  ASSERT_TRUE(c.ok());
  EXPECT_GT(c->width, 48);  // the colour bar

  r = Som({"render", "--atlas", Tmp("atlas"), "--out", Tmp("c.png"), "--kind", "component", "--feature", "nope"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "no feature named \"nope\"")) << r.err;
  r = Som({"render", "--atlas", Tmp("atlas"), "--out", Tmp("c.png"), "--kind", "component"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "needs --feature")) << r.err;
  r = Som({"render", "--atlas", Tmp("atlas"), "--out", Tmp("c.png"), "--kind", "pie"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--kind must be")) << r.err;
}

TEST_F(SomCliTest, Labels) {
  ASSERT_EQ(train_->code, 0);
  Result r = Som({"labels", "--atlas", Tmp("atlas"), "--top", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 30u);
  std::set<std::string> distinct;
  for (const std::string& line : lines) {
    EXPECT_TRUE(absl::StrContains(line, "term number")) << line;
    distinct.insert(line.substr(line.find("T:")));
  }
  EXPECT_GT(distinct.size(), 5u);  // not one frequent term everywhere
  r = Som({"labels", "--atlas", Tmp("atlas"), "--json", "--min-hits", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  EXPECT_GE(lines.size(), 1u);
  EXPECT_LE(lines.size(), 30u);
  for (const std::string& line : lines) EXPECT_TRUE(absl::StartsWith(line, "{\"x\": ")) << line;
}

// The CLI and the service train through one pipeline: an atlas from `som
// train` is served with its held-out quality, by a service started on its
// directory and by one that was already running (found when first asked for).
TEST_F(SomCliTest, TheServiceReportsTheHeldOutQualityOfCliAtlases) {
  const std::string dir = Tmp("served");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ServerOptions options;
  options.grpc_port = 0;
  options.metrics_port = -1;
  options.device = "cpu";
  options.atlas_dir = dir;
  options.max_volume_bytes = 64 << 20;
  auto running = SomAtlasServiceImpl::Create(options);
  ASSERT_TRUE(running.ok()) << running.status();

  const Result r = Som({"train", "--corpus", Tmp("corpus.csr"), "--map", "4x4", "--epochs", "3", "--device", "cpu",
                        "--holdout", "0.2", "--out", dir + "/from-cli"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // "held-out (120 documents): QE 2.12345  cosine QE ..."
  const size_t at = r.out.find("held-out (120 documents): QE ");
  ASSERT_NE(at, std::string::npos) << r.out;
  double printed_qe = 0;
  ASSERT_TRUE(absl::SimpleAtod(r.out.substr(at + 29, r.out.find(' ', at + 29) - at - 29), &printed_qe)) << r.out;

  auto expect_held_out = [&](SomAtlasServiceImpl& service, const char* which) {
    SCOPED_TRACE(which);
    grpc::ServerContext context;
    v1::AtlasRequest request;
    request.set_atlas_id("from-cli");
    v1::AtlasSummary summary;
    const grpc::Status s = service.GetAtlas(&context, &request, &summary);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(summary.documents(), 480);
    EXPECT_EQ(summary.held_out_quality().documents(), 120);
    EXPECT_NEAR(summary.held_out_quality().qe_euclidean(), printed_qe, 1e-5);
    EXPECT_GT(summary.held_out_quality().topographic_error() + summary.held_out_quality().qe_cosine(), 0);
  };
  expect_held_out(**running, "the service that was running");
  auto restarted = SomAtlasServiceImpl::Create(options);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  expect_held_out(**restarted, "a service started afterwards");
}

TEST_F(SomCliTest, ClearErrors) {
  Result r = Som({"train", "--corpus", Tmp("missing.svm"), "--out", Tmp("x")});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "missing.svm")) << r.err;
  r = Som({"train", "--corpus", Tmp("corpus.svm"), "--map", "0x5", "--out", Tmp("x")});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--map")) << r.err;
  r = Som({"train", "--corpus", Tmp("corpus.svm")});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--out is required")) << r.err;
  r = Som({"train", "--corpus", Tmp("corpus.svm"), "--out", Tmp("x"), "--init", "kmeans"});
  EXPECT_EQ(r.code, 2);
  r = Som({"train", "--corpus", Tmp("corpus.svm"), "--out", Tmp("x"), "--device", "tpu"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "unknown device")) << r.err;
  ASSERT_TRUE(som::WriteLines(Tmp("few.txt"), {"a", "b", "c"}).ok());
  r = Som({"train", "--corpus", Tmp("corpus.svm"), "--features", Tmp("few.txt"), "--out", Tmp("x")});
  EXPECT_EQ(r.code, 1);  // libsvm indices beyond the named features
  EXPECT_TRUE(absl::StrContains(r.err, "exceeds the 3 features")) << r.err;
  r = Som({"train", "--corpus", Tmp("corpus.csr"), "--features", Tmp("few.txt"), "--out", Tmp("x")});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "has 3 feature names; the corpus has 80 features")) << r.err;
  r = Som({"train", "--bogus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "unknown flag --bogus")) << r.err;
  r = Som({"project", "--atlas", Tmp("no_atlas"), "--docs", Tmp("corpus.svm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "no SOM atlas")) << r.err;
  r = Som({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "unknown subcommand")) << r.err;
  r = Som({"train", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(absl::StrContains(r.out, "--doc-ids")) << r.out;
}

}  // namespace
}  // namespace tessera
