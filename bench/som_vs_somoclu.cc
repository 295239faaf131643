// Time to held-out QE, Tessera's CPU SOM against somoclu's sparse CPU kernel,
// side by side in one run (issue 16; bench/som_vs_somoclu.sh builds somoclu
// outside the repository and calls this). Same corpus (genes x GO from
// tools/som_data), same split (10 %, seed 2026: 18,656 training / 2,072
// held-out rows), same thread count; both maps are measured by the same code
// (ProjectDocuments: held-out QE = mean ||x - w_bmu||, TE over 4-neighbours).
//
// Per (edge, epochs), runs alternate somoclu / ours:
//   ours     TrainSom with `tessera som train`'s defaults (PCA init, the
//            narrow schedule: sigma edge/8 -> 0.45, D = DefaultRadiusDecayEpochs), a fixed epoch count
//            (no early stop); "conv" = the CLI's default run: at most 40
//            epochs with its convergence rule
//   somoclu  `somoclu -k 2 -e N -x E -y E` (its defaults: random init,
//            radius min(edge)/2 -> 1 linear, Gaussian sigma 0.5 radius with
//            compact support); for "conv", N = --somoclu_conv_epochs
//   --previous_schedule adds our schedule of 2026-12-01
//            (end-at-last-decay-epoch: sigma edge/2 -> 1) as another row.
// Seconds: ours = TrainSom's total (PCA init, epochs, final BMU pass); somoclu
// = the sum of the per-epoch times it prints (-v 2: file parsing, its random
// init and writing its outputs are not counted).
//
//   som_vs_somoclu --somoclu=/tmp/somoclu/somoclu [--data=DIR] [--work_dir=DIR]
//                  [--edges=16,32] [--epochs=3,10,conv] [--somoclu_conv_epochs=40]
//                  [--threads=2] [--repeat=1] [--previous_schedule]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/som/bmu.h"
#include "kernels/som/parallel.h"
#include "services/som/corpus.h"
#include "services/som/trainer.h"

ABSL_FLAG(std::string, somoclu, "", "the somoclu binary (built outside the repository)");
ABSL_FLAG(std::string, data, "", "corpus directory (default ~/.cache/tessera/som_data)");
ABSL_FLAG(std::string, work_dir, "/tmp/som_vs_somoclu", "where the training split and somoclu's outputs go");
ABSL_FLAG(std::vector<std::string>, edges, std::vector<std::string>({"16", "32"}), "square map edges");
ABSL_FLAG(std::vector<std::string>, epochs, std::vector<std::string>({"3", "10", "conv"}),
          "epoch counts; conv = ours to convergence (at most 40), somoclu --somoclu_conv_epochs");
ABSL_FLAG(int, somoclu_conv_epochs, 40, "somoclu's epochs for the conv rows");
ABSL_FLAG(int, threads, 2, "threads for both (OMP_NUM_THREADS, TESSERA_CPU_THREADS)");
ABSL_FLAG(int, repeat, 1, "runs of each (the fastest time is shown; quality is from the last run)");
ABSL_FLAG(bool, previous_schedule, false,
          "also our 2026-12-01 default schedule (end-at-last-decay-epoch: sigma edge/2 -> 1, exponential)");

namespace tessera {
namespace som {
namespace {

struct Outcome {
  int epochs = 0;
  double seconds = 0;
  QualityMetrics held;
};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "som_vs_somoclu: %s\n", what.c_str());
  std::exit(1);
}

QualityMetrics HeldOut(SomModel& model, const SparseBinaryMatrix& held) {
  auto p = ProjectDocuments(model, held, Backend::kCpu);
  if (!p.ok()) Fail(absl::StrCat("projection: ", p.status().message()));
  return p->quality;
}

// `previous` selects the schedule that was the default on 2026-12-01.
Outcome RunOurs(const SparseBinaryMatrix& train, const SparseBinaryMatrix& held, int edge, int epochs,
                bool previous) {
  TrainOptions o;  // the service's and CLI's defaults, as `tessera som train` sets them
  o.grid = GridShape{edge, edge, Topology::kPlanar};
  o.backend = Backend::kCpu;
  const bool converge = epochs <= 0;
  o.max_epochs = converge ? 40 : epochs;
  o.radius_decay_epochs = DefaultRadiusDecayEpochs(o.max_epochs);
  if (!converge) o.convergence_tolerance = 0;
  if (previous) o.radius_schedule = RadiusSchedule::kEndAtLastDecayEpoch;
  auto result = TrainSom(train, o);
  if (!result.ok()) Fail(absl::StrCat("training: ", result.status().message()));
  Outcome out;
  out.epochs = result->epochs;
  out.seconds = result->total_seconds;
  out.held = HeldOut(result->model, held);
  return out;
}

// somoclu's text codebook ("%rows cols", "%dims", then one node per line,
// y-major) into a feature-major model; features somoclu never saw (beyond the
// training split's largest index) stay 0, as its batch update would make them.
SomModel ReadSomocluCodebook(const std::string& path, int edge, int64_t features) {
  std::ifstream in(path);
  if (!in) Fail(absl::StrCat("cannot read ", path));
  std::string line;
  int rows = 0, cols = 0;
  int64_t dims = 0;
  if (!std::getline(in, line) || std::sscanf(line.c_str(), "%%%d %d", &rows, &cols) != 2 || rows != edge ||
      cols != edge) {
    Fail(absl::StrCat(path, ": expected a '%", edge, " ", edge, "' header, got '", line, "'"));
  }
  if (!std::getline(in, line) || std::sscanf(line.c_str(), "%%%ld", &dims) != 1 || dims < 1 || dims > features) {
    Fail(absl::StrCat(path, ": bad dimension line '", line, "'"));
  }
  SomModel m;
  m.grid = GridShape{edge, edge, Topology::kPlanar};
  m.features = features;
  const int64_t nodes = m.grid.nodes();
  m.weights_f32.assign(features * nodes, 0.0f);
  for (int64_t node = 0; node < nodes; ++node) {
    if (!std::getline(in, line)) Fail(absl::StrCat(path, ": ends at node ", node));
    const char* p = line.c_str();
    for (int64_t d = 0; d < dims; ++d) {
      char* end = nullptr;
      const float w = std::strtof(p, &end);
      if (end == p) Fail(absl::StrCat(path, ": node ", node, " has fewer than ", dims, " values"));
      m.weights_f32[d * nodes + node] = w;
      p = end;
    }
  }
  m.sq_norms.assign(nodes, 0.0f);
  cpu::ComputeSqNorms(m.view());
  return m;
}

Outcome RunSomoclu(const std::string& binary, const std::string& train_svm, const std::string& work, int edge,
                   int epochs, int threads, int64_t features, const SparseBinaryMatrix& held) {
  const std::string prefix = absl::StrCat(work, "/somoclu_", edge, "_", epochs);
  const std::string log = prefix + ".log";
  const std::string command =
      absl::StrFormat("OMP_NUM_THREADS=%d '%s' -k 2 -v 2 -e %d -x %d -y %d '%s' '%s' >'%s' 2>&1", threads, binary,
                      epochs, edge, edge, train_svm, prefix, log);
  if (std::system(command.c_str()) != 0) Fail(absl::StrCat("somoclu failed: ", command, " (see ", log, ")"));
  // -v 2 prints "Time for epoch N: S" per epoch.
  Outcome out;
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "Time for epoch ";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    const size_t colon = text.find(':', at);
    double s = 0;
    if (colon == std::string::npos || std::sscanf(text.c_str() + colon + 1, "%lf", &s) != 1) {
      Fail(absl::StrCat(log, ": unreadable epoch time"));
    }
    out.seconds += s;
    ++out.epochs;
  }
  if (out.epochs != epochs) Fail(absl::StrCat(log, ": ", out.epochs, " epoch times for ", epochs, " epochs"));
  SomModel model = ReadSomocluCodebook(prefix + ".wts", edge, features);
  out.held = HeldOut(model, held);
  for (const char* ext : {".wts", ".bm", ".umx"}) std::remove((prefix + ext).c_str());
  return out;
}

std::vector<int> Counts(const std::vector<std::string>& values, const char* flag, bool allow_conv) {
  std::vector<int> out;
  for (const std::string& s : values) {
    int x = 0;
    if (allow_conv && s == "conv") {
      out.push_back(0);
    } else if (absl::SimpleAtoi(s, &x) && x >= 1) {
      out.push_back(x);
    } else {
      Fail(absl::StrCat("--", flag, ": '", s, "' is not a positive integer", allow_conv ? " or conv" : ""));
    }
  }
  return out;
}

int Main() {
  const std::string binary = absl::GetFlag(FLAGS_somoclu);
  if (binary.empty()) Fail("--somoclu=PATH is required (bench/som_vs_somoclu.sh builds it)");
  std::string data = absl::GetFlag(FLAGS_data);
  if (data.empty()) {
    const char* home = std::getenv("HOME");
    data = std::string(home != nullptr ? home : "/root") + "/.cache/tessera/som_data";
  }
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 1) Fail("--threads must be at least 1");
  setenv("TESSERA_CPU_THREADS", absl::StrCat(threads).c_str(), 1);
  const std::vector<int> edges = Counts(absl::GetFlag(FLAGS_edges), "edges", false);
  const std::vector<int> epoch_counts = Counts(absl::GetFlag(FLAGS_epochs), "epochs", true);
  const int conv_epochs = absl::GetFlag(FLAGS_somoclu_conv_epochs);
  const int repeat = std::max(1, absl::GetFlag(FLAGS_repeat));

  auto corpus = ReadCsrBinary(data + "/genes_go.csr");
  if (!corpus.ok()) {
    Fail(absl::StrCat(corpus.status().message(), " (tools/som_data/build_go_corpora.sh builds genes x GO)"));
  }
  const RowSplit split = SplitRows(corpus->rows(), 0.1, /*seed=*/2026);
  const SparseBinaryMatrix train = SelectRows(*corpus, split.train);
  const SparseBinaryMatrix held = SelectRows(*corpus, split.held_out);
  const std::string work = absl::GetFlag(FLAGS_work_dir);
  if (std::system(absl::StrCat("mkdir -p '", work, "'").c_str()) != 0) Fail("cannot create " + work);
  const std::string train_svm = work + "/train.svm";
  if (auto s = WriteLibsvm(train_svm, train); !s.ok()) Fail(std::string(s.message()));

  std::printf("corpus: genes x GO (%s/genes_go.csr), %lld training rows, %lld held out, %lld features; "
              "%d threads each; runs alternate somoclu / ours, fastest of %d\n\n",
              data.c_str(), static_cast<long long>(train.rows()), static_cast<long long>(held.rows()),
              static_cast<long long>(train.cols()), threads, repeat);
  std::printf("| edge | epochs | ours | ours s | somoclu s | speed-up | held-out QE ours | held-out QE somoclu "
              "| QE ours / somoclu | held-out TE ours | held-out TE somoclu |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int edge : edges) {
    for (int epochs : epoch_counts) {
      const int somoclu_epochs = epochs > 0 ? epochs : conv_epochs;
      Outcome theirs, ours, previous;
      theirs.seconds = ours.seconds = previous.seconds = 1e300;
      for (int k = 0; k < repeat; ++k) {
        Outcome t = RunSomoclu(binary, train_svm, work, edge, somoclu_epochs, threads, train.cols(), held);
        t.seconds = std::min(t.seconds, theirs.seconds);
        theirs = t;
        Outcome o = RunOurs(train, held, edge, epochs, /*previous=*/false);
        o.seconds = std::min(o.seconds, ours.seconds);
        ours = o;
        if (absl::GetFlag(FLAGS_previous_schedule)) {
          Outcome p = RunOurs(train, held, edge, epochs, /*previous=*/true);
          p.seconds = std::min(p.seconds, previous.seconds);
          previous = p;
        }
      }
      auto row = [&](const char* name, const Outcome& us) {
        const std::string count =
            epochs > 0 ? absl::StrCat(epochs) : absl::StrCat("conv (", us.epochs, " / ", somoclu_epochs, ")");
        std::printf("| %d | %s | %s | %.2f | %.2f | %.1fx | %.4f | %.4f | %.4f | %.4f | %.4f |\n", edge,
                    count.c_str(), name, us.seconds, theirs.seconds, theirs.seconds / us.seconds,
                    us.held.qe_euclidean, theirs.held.qe_euclidean, us.held.qe_euclidean / theirs.held.qe_euclidean,
                    us.held.topographic_error, theirs.held.topographic_error);
      };
      row(RadiusScheduleName(RadiusSchedule::kNarrow), ours);
      if (absl::GetFlag(FLAGS_previous_schedule)) row(RadiusScheduleName(RadiusSchedule::kEndAtLastDecayEpoch), previous);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace som
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::som::Main();
}
