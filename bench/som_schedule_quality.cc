// Held-out quality of the SOM radius schedules side by side (issue 16): the
// legacy schedule (radius_end only in epoch D, so 3 epochs at edge 32 train at
// sigma 16, 6.35, 2.52), the 2026-12-01 one (radius_end in the last decay
// epoch, as somoclu's cooling) and the default since 2026-12-02 (narrow:
// sigma edge/8 -> 0.45), on the genes x GO corpus (tools/som_data) or,
// without it, a synthetic corpus of its shape. Same split (10 %, seed 2026),
// PCA init, fp32, CPU, fixed epoch counts (no early stop), exponential
// cooling, sigma max(edge)/2 -> 1 unless said. Rows per (edge, epochs):
//   legacy       D = `tessera som train`'s default decay (min(10, 3/4 epochs))
//   end-at-last  the same D, end-at-last-decay-epoch (the 2026-12-01 default)
//   ... D=E      the same decaying over all epochs (somoclu's shape)
//   ... end 0.5  the same with sigma_end 0.5, somoclu's final Gaussian (its
//                radius 1 at std_coeff 0.5): the 3-tap kernel in the last epoch
//   narrow       the default: sigma edge/8 -> 0.45, D as `tessera som train`
//
//   som_schedule_quality [--data=DIR] [--edges=16,32] [--epochs=3,10]
// Threads: TESSERA_CPU_THREADS or all cores.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "kernels/som/parallel.h"
#include "services/som/corpus.h"
#include "services/som/synthetic.h"
#include "services/som/trainer.h"

ABSL_FLAG(std::string, data, "", "corpus directory (default ~/.cache/tessera/som_data)");
ABSL_FLAG(std::vector<std::string>, edges, std::vector<std::string>({"16", "32"}), "square map edges");
ABSL_FLAG(std::vector<std::string>, epochs, std::vector<std::string>({"3", "10"}), "epoch counts");

namespace tessera {
namespace som {
namespace {

struct Variant {
  const char* name;
  RadiusSchedule schedule;
  bool decay_over_all_epochs;
  double radius_end;
};

struct Outcome {
  std::vector<double> radii;
  double train_qe = 0;
  QualityMetrics held;
  double seconds = 0;
};

Outcome TrainAndMeasure(const SparseBinaryMatrix& train, const SparseBinaryMatrix& held, int edge, int epochs,
                        const Variant& v) {
  TrainOptions o;
  o.grid = GridShape{edge, edge, Topology::kPlanar};
  o.backend = Backend::kCpu;
  o.init = InitMethod::kPca;
  o.max_epochs = epochs;
  o.radius_end = v.radius_end;
  o.radius_decay_epochs = v.decay_over_all_epochs ? epochs : DefaultRadiusDecayEpochs(epochs);
  o.radius_schedule = v.schedule;
  o.convergence_tolerance = 0;  // fixed epoch counts
  Outcome out;
  o.progress = [&](const EpochReport& r) { out.radii.push_back(r.radius); };
  auto result = TrainSom(train, o);
  if (!result.ok()) {
    std::fprintf(stderr, "training failed: %s\n", std::string(result.status().message()).c_str());
    std::exit(1);
  }
  out.train_qe = result->final_quality.qe_euclidean;
  out.seconds = result->total_seconds;
  auto projected = ProjectDocuments(result->model, held, Backend::kCpu);
  if (!projected.ok()) {
    std::fprintf(stderr, "projection failed: %s\n", std::string(projected.status().message()).c_str());
    std::exit(1);
  }
  out.held = projected->quality;
  return out;
}

std::vector<int> Ints(const std::vector<std::string>& values, const char* flag) {
  std::vector<int> out;
  for (const std::string& s : values) {
    int x = 0;
    if (!absl::SimpleAtoi(s, &x) || x < 1) {
      std::fprintf(stderr, "--%s: '%s' is not a positive integer\n", flag, s.c_str());
      std::exit(2);
    }
    out.push_back(x);
  }
  return out;
}

int Main() {
  std::string data = absl::GetFlag(FLAGS_data);
  if (data.empty()) {
    const char* home = std::getenv("HOME");
    data = std::string(home != nullptr ? home : "/root") + "/.cache/tessera/som_data";
  }
  const std::vector<int> edges = Ints(absl::GetFlag(FLAGS_edges), "edges");
  const std::vector<int> epoch_counts = Ints(absl::GetFlag(FLAGS_epochs), "epochs");
  SparseBinaryMatrix corpus;
  std::string corpus_name;
  if (auto genes = ReadCsrBinary(data + "/genes_go.csr"); genes.ok()) {
    corpus = std::move(*genes);
    corpus_name = absl::StrCat("genes x GO (", data, "/genes_go.csr)");
  } else {
    std::printf("genes x GO not available (%s); using a synthetic corpus of its shape "
                "(tools/som_data/build_go_corpora.sh builds the real one)\n",
                std::string(genes.status().message()).c_str());
    SyntheticCorpusOptions o;
    o.docs = 20728;
    o.features = 18933;
    o.mean_nnz = 14.5;
    corpus = GenerateSyntheticCorpus(o);
    corpus_name = "synthetic, genes x GO shape";
  }
  const RowSplit split = SplitRows(corpus.rows(), 0.1, /*seed=*/2026);
  const SparseBinaryMatrix train = SelectRows(corpus, split.train);
  const SparseBinaryMatrix held = SelectRows(corpus, split.held_out);
  std::printf("corpus: %s: %lld training rows, %lld held out, %lld features; PCA init, fp32, CPU, %d threads\n\n",
              corpus_name.c_str(), static_cast<long long>(train.rows()), static_cast<long long>(held.rows()),
              static_cast<long long>(train.cols()), CpuThreads());

  const Variant variants[] = {
      {"legacy", RadiusSchedule::kLegacy, false, 1.0},
      {"end-at-last", RadiusSchedule::kEndAtLastDecayEpoch, false, 1.0},
      {"end-at-last D=E", RadiusSchedule::kEndAtLastDecayEpoch, true, 1.0},
      {"end-at-last D=E, end 0.5", RadiusSchedule::kEndAtLastDecayEpoch, true, 0.5},
      {"narrow (default)", RadiusSchedule::kNarrow, false, -1},  // the schedule's radii
  };
  std::printf("| edge | epochs | schedule | D | radii (sigma per epoch) | train QE | held-out QE | held-out QE / legacy "
              "| held-out TE | held-out dead units | s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int edge : edges) {
    for (int epochs : epoch_counts) {
      double legacy_qe = 0;
      for (const Variant& v : variants) {
        const Outcome r = TrainAndMeasure(train, held, edge, epochs, v);
        if (v.schedule == RadiusSchedule::kLegacy) legacy_qe = r.held.qe_euclidean;
        std::vector<std::string> radii;
        for (double x : r.radii) radii.push_back(absl::StrFormat("%.3g", x));
        std::printf("| %d | %d | %s | %d | %s | %.4f | %.4f | %.4f | %.4f | %lld | %.2f |\n", edge, epochs, v.name,
                    v.decay_over_all_epochs ? epochs : DefaultRadiusDecayEpochs(epochs),
                    absl::StrJoin(radii, ", ").c_str(), r.train_qe, r.held.qe_euclidean,
                    r.held.qe_euclidean / legacy_qe, r.held.topographic_error,
                    static_cast<long long>(r.held.dead_units), r.seconds);
        std::fflush(stdout);
      }
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
