// `tessera som`: SOM atlases from the command line, without a server.
//   som train    --corpus C --map WxH --out DIR   train, save the atlas + umatrix.png, hits.png
//   som project  --atlas DIR --docs D [--json]     each document's cell and distance
//   som render   --atlas DIR --out PNG [--kind umatrix|hits|component --feature NAME]
//   som labels   --atlas DIR [--top 3]             each cell's label
// Flag names take '-' or '_' (--doc-ids, --doc_ids).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/types/optional.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "common/device.h"
#include "common/json.h"
#include "common/png_io.h"
#include "common/status.h"
#include "services/som/atlas.h"
#include "services/som/atlas_training.h"
#include "services/som/corpus.h"
#include "tools/som_data/genes_go_cache.h"
#include "services/som/labels.h"
#include "services/som/render.h"
#include "services/som/trainer.h"

namespace tessera::cli {
namespace {

using som::Atlas;

constexpr char kUsage[] =
    "usage: tessera som <train|project|render|labels> [flags]   (tessera som <subcommand> --help)\n"
    "  train    train a map on a sparse binary corpus and save the atlas\n"
    "  project  place documents on a saved atlas\n"
    "  render   draw an atlas's U-matrix, hit map or a component plane as PNG\n"
    "  labels   label each cell by its distinctive strongest features\n";

// "--doc_ids" -> "--doc-ids" (the name part only).
std::vector<std::string> NormalizeFlags(int argc, char** argv) {
  std::vector<std::string> out(argv, argv + argc);
  for (std::string& a : out) {
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      const size_t end = std::min(a.find('='), a.size());
      std::replace(a.begin() + 2, a.begin() + end, '_', '-');
    }
  }
  return out;
}

class Sub {
 public:
  Sub(const char* name, std::vector<FlagSpec> specs) : name_(name), specs_(std::move(specs)) {}

  // Parses; on --help or a bad flag prints usage and sets *exit_code.
  bool Parse(int argc, char** argv, int* exit_code) {
    std::vector<std::string> normalized = NormalizeFlags(argc, argv);
    std::vector<char*> ptrs;
    for (std::string& s : normalized) ptrs.push_back(s.data());
    auto args = Args::Parse(specs_, static_cast<int>(ptrs.size()), ptrs.data(), 1);
    if (!args.ok() || args->help() || !args->positional().empty()) {
      if (!args.ok()) std::fprintf(stderr, "tessera som %s: %s\n", name_, std::string(args.status().message()).c_str());
      if (args.ok() && !args->positional().empty()) {
        std::fprintf(stderr, "tessera som %s: unexpected argument '%s'\n", name_, args->positional()[0].c_str());
      }
      const bool help = args.ok() && args->help() && args->positional().empty();
      std::fprintf(help ? stdout : stderr, "usage: tessera som %s [flags]\n%s", name_, FlagsHelp(specs_).c_str());
      *exit_code = help ? 0 : 2;
      return false;
    }
    args_ = *std::move(args);
    return true;
  }
  std::string Get(const std::string& flag) const { return args_.Get(flag); }
  bool GetBool(const std::string& flag) const { return args_.GetBool(flag); }

  // A required flag; prints the error (exit code 2) when missing.
  bool Require(const std::string& flag) const {
    if (!args_.Get(flag).empty()) return true;
    std::fprintf(stderr, "tessera som %s: --%s is required\n", name_, flag.c_str());
    return false;
  }
  int Usage(const std::string& message) const {
    std::fprintf(stderr, "tessera som %s: %s\n", name_, message.c_str());
    return 2;
  }
  int Fail(const absl::Status& status) const {
    std::fprintf(stderr, "tessera som %s: %s\n", name_, std::string(status.message()).c_str());
    return 1;
  }

 private:
  const char* name_;
  std::vector<FlagSpec> specs_;
  Args args_;
};

absl::StatusOr<som::GridShape> ParseMap(const std::string& text, bool toroid) {
  std::vector<std::string> parts = absl::StrSplit(text, absl::ByAnyChar("xX"));
  som::GridShape grid;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &grid.width) || !absl::SimpleAtoi(parts[1], &grid.height) ||
      grid.width < 1 || grid.height < 1 || grid.width > 8192 || grid.height > 8192) {
    return absl::InvalidArgumentError(absl::StrCat("--map must be WIDTHxHEIGHT (1..8192 each), got '", text, "'"));
  }
  grid.topology = toroid ? som::Topology::kToroidal : som::Topology::kPlanar;
  return grid;
}

bool ParseDouble(const std::string& s, double* out) { return absl::SimpleAtod(s, out) && std::isfinite(*out); }

// ------------------------------------------------------------------ train

int Train(int argc, char** argv) {
  Sub sub("train", {
                       {"corpus", "genes-go",
                        "corpus: .csr binary CSR, anything else libsvm/svmlight text; genes-go: Entrez genes x GO "
                        "terms (downloaded from Debian and built on first use, then cached; names and ids included)"},
                       {"features", "", "feature names, one per line (or go_features.tsv)"},
                       {"doc-ids", "", "document ids, one per corpus row (default d<row>)"},
                       {"map", "32x32", "map size WIDTHxHEIGHT"},
                       {"toroid", "", "wrap the map's edges (toroidal grid)", true},
                       {"epochs", "40", "at most this many epochs (training may converge earlier)"},
                       {"radius-epochs", "", "epochs over which the radius shrinks (default min(10, 3/4 epochs))"},
                       {"radius-schedule", "narrow",
                        "narrow (Gaussian sigma max(width, height)/8 -> 0.45, reached in the last of the radius "
                        "epochs: lowest QE), end-at-last-decay-epoch (sigma edge/2 -> 1, the same epochs: the "
                        "2026-12-01 default, better ordered maps) or legacy (edge/2 -> 1, reached only after them: "
                        "before 2026-12-01)"},
                       {"init", "pca", "initial codebook: pca or random"},
                       {"weights", "fp32", "codebook storage: fp32 or fp16"},
                       {"device", "auto", "compute backend: auto, cpu or cuda"},
                       {"holdout", "0.1", "fraction of documents held out to measure the map (0..0.9)"},
                       {"seed", "1", "random seed (split, initialisation)"},
                       {"out", "", "atlas directory to write"},
                   });
  int code = 0;
  if (!sub.Parse(argc, argv, &code)) return code;
  if (!sub.Require("corpus") || !sub.Require("out")) return 2;
  std::string corpus = sub.Get("corpus"), feature_names = sub.Get("features"), document_ids = sub.Get("doc-ids");
  if (corpus == "genes-go") {
    som::GenesGoCacheOptions cache;
    cache.progress = [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
    auto files = som::EnsureGenesGoCorpus(cache);
    if (!files.ok()) {
      return sub.Fail(absl::Status(files.status().code(),
                                   absl::StrCat("the genes x GO corpus cannot be built here (", files.status().message(),
                                                "); give a corpus file with --corpus")));
    }
    corpus = files->corpus;
    if (feature_names.empty()) feature_names = files->features;
    if (document_ids.empty()) document_ids = files->row_ids;
  }
  auto grid = ParseMap(sub.Get("map"), sub.GetBool("toroid"));
  if (!grid.ok()) return sub.Usage(std::string(grid.status().message()));
  som::TrainOptions options;
  options.grid = *grid;
  int epochs = 0;
  if (!absl::SimpleAtoi(sub.Get("epochs"), &epochs) || epochs < 1 || epochs > 100000) {
    return sub.Usage("--epochs must be a positive integer");
  }
  options.max_epochs = epochs;
  options.radius_decay_epochs = som::DefaultRadiusDecayEpochs(epochs);
  if (!sub.Get("radius-epochs").empty() &&
      (!absl::SimpleAtoi(sub.Get("radius-epochs"), &options.radius_decay_epochs) || options.radius_decay_epochs < 1)) {
    return sub.Usage("--radius-epochs must be a positive integer");
  }
  auto schedule = som::ParseRadiusSchedule(sub.Get("radius-schedule"));
  if (!schedule.ok()) return sub.Usage(absl::StrCat("--radius-schedule: ", schedule.status().message()));
  options.radius_schedule = *schedule;
  const std::string init = sub.Get("init");
  if (init != "pca" && init != "random") return sub.Usage("--init must be pca or random");
  options.init = init == "pca" ? som::InitMethod::kPca : som::InitMethod::kRandom;
  const std::string weights = sub.Get("weights");
  if (weights != "fp32" && weights != "fp16") return sub.Usage("--weights must be fp32 or fp16");
  options.weight_type = weights == "fp32" ? som::WeightType::kFloat32 : som::WeightType::kFloat16;
  double holdout = 0;
  if (!ParseDouble(sub.Get("holdout"), &holdout) || holdout < 0 || holdout > 0.9) {
    return sub.Usage("--holdout must be a number in [0, 0.9]");
  }
  if (!absl::SimpleAtoi(sub.Get("seed"), &options.seed)) return sub.Usage("--seed must be a non-negative integer");
  auto backend = ResolveBackend(sub.Get("device"));
  if (!backend.ok()) return backend.status().code() == absl::StatusCode::kInvalidArgument
                                ? sub.Usage(std::string(backend.status().message()))
                                : sub.Fail(backend.status());
  options.backend = *backend;

  som::AtlasTrainingInput input;
  input.files.corpus = corpus;
  input.files.feature_names = feature_names;
  input.files.document_ids = document_ids;
  som::AtlasTrainingOptions training;
  training.train = options;
  training.holdout_fraction = holdout;
  training.directory = sub.Get("out");
  training.replace = true;  // --out over an earlier atlas rewrites it
  som::AtlasTrainingCallbacks callbacks;
  callbacks.progress = [&](const som::AtlasTrainingProgress& p) {
    if (p.stage == "init") {
      std::printf("corpus %s: %lld documents x %lld features, %lld non-zeros\n", input.files.corpus.c_str(),
                  static_cast<long long>(p.documents), static_cast<long long>(p.features),
                  static_cast<long long>(p.nonzeros));
      std::printf("training a %s map on %lld documents (%lld held out), %s, %s init, at most %d epochs\n",
                  som::GridToString(options.grid).c_str(), static_cast<long long>(p.train_documents),
                  static_cast<long long>(p.held_out_documents), std::string(BackendName(options.backend)).c_str(),
                  som::InitMethodName(options.init), options.max_epochs);
    } else if (p.stage == "epoch") {
      const som::EpochReport& r = p.epoch;
      std::printf("epoch %3d  radius %7.3f  QE %.5f  TE %.4f  %.2f s\n", r.epoch + 1, r.radius, r.qe,
                  r.topographic_error, r.seconds);
    }
    std::fflush(stdout);
  };
  auto saved = som::TrainAndSaveAtlas(input, training, callbacks);
  if (!saved.ok()) return sub.Fail(saved.status());
  const Atlas& atlas = saved->atlas;
  const som::QualityMetrics& q = atlas.final_quality;
  std::printf("%d epochs%s in %.2f s; training QE %.5f  TE %.4f  dead units %lld (%.1f%%)\n", atlas.epochs,
              atlas.converged ? " (converged)" : "", saved->train_seconds, q.qe_euclidean, q.topographic_error,
              static_cast<long long>(q.dead_units), 100 * q.dead_unit_fraction);
  if (saved->held_out_documents > 0) {
    const som::QualityMetrics& h = atlas.held_out_quality;
    std::printf("held-out (%lld documents): QE %.5f  cosine QE %.5f  TE %.4f  dead units %lld (%.1f%%)\n",
                static_cast<long long>(h.docs), h.qe_euclidean, h.qe_cosine, h.topographic_error,
                static_cast<long long>(h.dead_units), 100 * h.dead_unit_fraction);
  }
  const std::string& out = saved->directory;
  som::RenderOptions render;
  render.cell_pixels = std::max(2, std::min(16, 512 / std::max(options.grid.width, options.grid.height)));
  auto umatrix = som::RenderUMatrix(atlas, render);
  absl::Status s = umatrix.ok() ? WritePng(*umatrix, out + "/umatrix.png") : umatrix.status();
  auto hits = s.ok() ? som::RenderHitMap(atlas, render) : absl::StatusOr<Image8>(s);
  if (s.ok()) s = hits.ok() ? WritePng(*hits, out + "/hits.png") : hits.status();
  if (!s.ok()) return sub.Fail(s);
  std::printf("atlas written to %s (manifest.json with the held-out quality, codebook.f32, bmu.i32, features.txt, "
              "documents.txt, umatrix.png, hits.png)\n",
              out.c_str());
  return 0;
}

// ---------------------------------------------------------------- project

absl::StatusOr<Atlas> LoadFlagAtlas(const Sub& sub) {
  auto atlas = som::LoadAtlas(sub.Get("atlas"));
  if (!atlas.ok()) return atlas.status();
  return atlas;
}

int Project(int argc, char** argv) {
  Sub sub("project", {
                         {"atlas", "", "atlas directory (from som train)"},
                         {"docs", "", "documents: .csr binary CSR or libsvm text over the atlas's features"},
                         {"json", "", "one JSON object per line instead of a table", true},
                         {"device", "cpu", "compute backend: auto, cpu or cuda"},
                     });
  int code = 0;
  if (!sub.Parse(argc, argv, &code)) return code;
  if (!sub.Require("atlas") || !sub.Require("docs")) return 2;
  auto backend = ResolveBackend(sub.Get("device"));
  if (!backend.ok()) return backend.status().code() == absl::StatusCode::kInvalidArgument
                                ? sub.Usage(std::string(backend.status().message()))
                                : sub.Fail(backend.status());
  auto atlas = LoadFlagAtlas(sub);
  if (!atlas.ok()) return sub.Fail(atlas.status());
  som::LibsvmOptions libsvm;
  libsvm.num_features = atlas->model.features;
  auto docs = som::ReadCorpus(sub.Get("docs"), libsvm);
  if (!docs.ok()) return sub.Fail(docs.status());
  auto p = som::ProjectDocuments(atlas->model, *docs, *backend);
  if (!p.ok()) return sub.Fail(p.status());
  const bool json = sub.GetBool("json");
  const int width = atlas->model.grid.width;
  if (!json) std::printf("%-8s %5s %5s %10s\n", "doc", "x", "y", "distance");
  for (int64_t d = 0; d < docs->rows(); ++d) {
    const int32_t node = p->bmu[d];
    // ||x - w||^2 = nnz(x) + score (kernels/som/types.h), >= 0 up to rounding.
    const double distance = std::sqrt(std::max(0.0, static_cast<double>(docs->row(d).size()) + p->score[d]));
    if (json) {
      std::printf("{\"doc\": %lld, \"node\": %d, \"x\": %d, \"y\": %d, \"distance\": %.6g}\n",
                  static_cast<long long>(d), node, node % width, node / width, distance);
    } else {
      std::printf("%-8lld %5d %5d %10.4f\n", static_cast<long long>(d), node % width, node / width, distance);
    }
  }
  std::fprintf(stderr, "projected %lld documents onto %s: QE %.5f  TE %.4f\n", static_cast<long long>(docs->rows()),
               som::GridToString(atlas->model.grid).c_str(), p->quality.qe_euclidean, p->quality.topographic_error);
  return 0;
}

// ----------------------------------------------------------------- render

int Render(int argc, char** argv) {
  Sub sub("render", {
                        {"atlas", "", "atlas directory"},
                        {"out", "", "PNG file to write"},
                        {"kind", "umatrix", "umatrix, hits or component"},
                        {"feature", "", "feature for --kind=component: name, its first word (GO id) or index"},
                        {"cell-pixels", "8", "pixels per map cell (1..256)"},
                        {"colour-bar", "", "add a colour scale on the right", true},
                    });
  int code = 0;
  if (!sub.Parse(argc, argv, &code)) return code;
  if (!sub.Require("atlas") || !sub.Require("out")) return 2;
  const std::string kind = sub.Get("kind");
  if (kind != "umatrix" && kind != "hits" && kind != "component") {
    return sub.Usage("--kind must be umatrix, hits or component");
  }
  if (kind == "component" && sub.Get("feature").empty()) return sub.Usage("--kind=component needs --feature");
  if (kind != "component" && !sub.Get("feature").empty()) return sub.Usage("--feature only goes with --kind=component");
  som::RenderOptions options;
  if (!absl::SimpleAtoi(sub.Get("cell-pixels"), &options.cell_pixels) || options.cell_pixels < 1 ||
      options.cell_pixels > 256) {
    return sub.Usage("--cell-pixels must be an integer in 1..256");
  }
  options.colour_bar = sub.GetBool("colour-bar");
  auto atlas = LoadFlagAtlas(sub);
  if (!atlas.ok()) return sub.Fail(atlas.status());
  absl::StatusOr<Image8> image = absl::UnknownError("unreachable");
  std::string what = kind;
  if (kind == "umatrix") {
    image = som::RenderUMatrix(*atlas, options);
  } else if (kind == "hits") {
    image = som::RenderHitMap(*atlas, options);
  } else {
    auto feature = som::FindFeature(*atlas, sub.Get("feature"));
    if (!feature.ok()) return sub.Fail(feature.status());
    what = absl::StrCat("component plane of \"", atlas->feature_names[*feature], "\"");
    image = som::RenderComponentPlane(*atlas, *feature, options);
  }
  absl::Status s = image.ok() ? WritePng(*image, sub.Get("out")) : image.status();
  if (!s.ok()) return sub.Fail(s);
  std::printf("%s: %s, %dx%d pixels\n", sub.Get("out").c_str(), what.c_str(), image->width, image->height);
  return 0;
}

// ----------------------------------------------------------------- labels

int Labels(int argc, char** argv) {
  Sub sub("labels", {
                        {"atlas", "", "atlas directory"},
                        {"top", "3", "features per label"},
                        {"min-hits", "0", "only cells with at least this many training documents"},
                        {"json", "", "one JSON object per line", true},
                    });
  int code = 0;
  if (!sub.Parse(argc, argv, &code)) return code;
  if (!sub.Require("atlas")) return 2;
  int top = 0;
  int64_t min_hits = 0;
  if (!absl::SimpleAtoi(sub.Get("top"), &top) || top < 1 || top > 1000) return sub.Usage("--top must be in 1..1000");
  if (!absl::SimpleAtoi(sub.Get("min-hits"), &min_hits) || min_hits < 0) {
    return sub.Usage("--min-hits must be a non-negative integer");
  }
  auto atlas = LoadFlagAtlas(sub);
  if (!atlas.ok()) return sub.Fail(atlas.status());
  const std::vector<int64_t> hits = som::HitCounts(*atlas);
  const std::vector<som::CellLabel> labels = som::LabelCells(*atlas, top);
  const bool json = sub.GetBool("json");
  const int width = atlas->model.grid.width;
  for (int64_t node = 0; node < atlas->nodes(); ++node) {
    if (hits[node] < min_hits) continue;
    const som::CellLabel& label = labels[node];
    if (json) {
      std::string features;
      for (const som::LabelFeature& f : label.features) {
        absl::StrAppend(&features, features.empty() ? "" : ", ", "{\"name\": ", JsonQuote(atlas->feature_names[f.feature]),
                        ", \"weight\": ", f.weight, ", \"lift\": ", f.lift, "}");
      }
      std::printf("{\"x\": %lld, \"y\": %lld, \"hits\": %lld, \"label\": %s, \"features\": [%s]}\n",
                  static_cast<long long>(node % width), static_cast<long long>(node / width),
                  static_cast<long long>(hits[node]), JsonQuote(label.text).c_str(), features.c_str());
    } else {
      std::printf("%4lld %4lld %7lld  %s\n", static_cast<long long>(node % width),
                  static_cast<long long>(node / width), static_cast<long long>(hits[node]), label.text.c_str());
    }
  }
  return 0;
}

}  // namespace

int RunSom(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::fprintf(argc < 2 ? stderr : stdout, "%s", kUsage);
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  if (sub == "train") return Train(argc - 1, argv + 1);
  if (sub == "project") return Project(argc - 1, argv + 1);
  if (sub == "render") return Render(argc - 1, argv + 1);
  if (sub == "labels") return Labels(argc - 1, argv + 1);
  std::fprintf(stderr, "tessera som: unknown subcommand '%s'\n%s", sub.c_str(), kUsage);
  return 2;
}

}  // namespace tessera::cli
