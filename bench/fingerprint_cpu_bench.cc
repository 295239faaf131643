// MCC fingerprint matching on the CPU: accuracy and throughput on FVC2002
// DB1-DB4 set B (320 real ISO 19794-2 templates, ../shared/data/fingerprint).
//
//   fingerprint_cpu_bench [--reps=N] [--threads=N] [--data=DIR] [--lssr_only]
//                         [--one_many=DB1_B/101_2 [--load_factor=300]]
//                         [--cpu_paths=all|auto|scalar-popcnt,avx512-vpopcntdq,...]
//
// Per database: descriptor time, then all 80 x 80 comparisons (the 6320
// off-diagonal ones feed the metrics of services/fingerprint/eval/eval.h) with
// LSS-R and with LSS, single-threaded: matches per second of thread CPU time
// (robust on a shared machine; the per-core figure) and of wall time, best
// of N repetitions. LSS-R and LSS are timed on every CPU path of --cpu_paths
// (LssConstants::cpu_path; default: every path this CPU runs), side by side
// in one run, paths alternating within each database; the automatic path
// also counting each probe's preparation (PrepareProbe, once per probe per
// 80 comparisons), and with all threads. The "path" lines at the end are what
// bench/fingerprint_vs_openafis.sh reads. --one_many times OpenAFIS's own
// 1:N pair set instead (one probe against all 320 templates, repeated), so
// both programs can be compared on the same pairs: per-pair cost grows with
// the probe's size, and OpenAFIS's usual probe (101_2) has 16 minutiae where
// set B averages 32.
// The anchor is OpenAFIS on this data on the same 2-core machine: ~84 K
// matches/s on 1 thread, ~153 K on 2 (TARGETS.md) in its one-many test
// (probe 101_2, 16 minutiae), ~39 K on 1 thread over these all-pairs sets
// (its many-many per database; bench/fingerprint_vs_openafis.sh runs both),
// rank-1 100 / 98.75 / 93.75 / 100 % and EER 6.8 / 6.7 / 15.0 / 7.1 % for DB1-DB4.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/fingerprint_data.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/formats/fvc_data.h"

ABSL_FLAG(int, reps, 3, "repetitions per measurement (the best is reported)");
ABSL_FLAG(int, threads, 0, "threads for the multi-threaded LSS-R column (0: all hardware threads)");
ABSL_FLAG(std::string, data, "", "fingerprint data directory (default: ../shared/data/fingerprint etc.)");
ABSL_FLAG(bool, lssr_only, false, "only the single-thread LSS-R rate per path (for profilers)");
ABSL_FLAG(std::string, one_many, "",
          "DB/finger_impression (e.g. DB1_B/101_2): only OpenAFIS's one-many pair set, that probe against all 320 "
          "templates --load_factor times, per CPU path (what bench/fingerprint_vs_openafis.sh compares)");
ABSL_FLAG(int, load_factor, 300, "with --one_many: passes over the 320 templates (OpenAFIS's --load-factor)");
ABSL_FLAG(std::string, cpu_paths, "all",
          "comma-separated CPU paths to time (auto, scalar-popcnt, avx512-vpopcntdq), or all: every path this "
          "CPU runs");

namespace tessera {
namespace fingerprint {
namespace {

using bench::ThreadCpuSeconds;

struct Db {
  int db = 0;
  std::vector<int> labels;       // finger (101..110)
  std::vector<int> impressions;  // 1..8
  std::vector<MccTemplate> mcc;
  std::vector<LssProbe> probes;
  MccGallery gallery;
  double mean_minutiae = 0, mean_cylinders = 0, descriptor_ms = 0;
};

struct Rate {
  double cpu = 0;   // matches per CPU second (best repetition)
  double wall = 0;  // matches per wall second (best repetition)
};

// All probes against the whole gallery, `threads` threads; scores row-major.
// With `prepare`, each probe's preparation (PrepareProbe: pairwise relations,
// direction order) is timed too, as it would be for a 1:79 search.
Rate Run(const Db& d, MccScore kind, const LssConstants& c, int threads, int reps, std::vector<float>* scores,
         bool prepare = false) {
  const int n = d.gallery.num_templates();
  scores->assign(static_cast<size_t>(n) * n, 0.0f);
  Rate best;
  for (int rep = 0; rep < reps; ++rep) {
    const double w0 = bench::NowSeconds(), c0 = ThreadCpuSeconds();
    if (threads == 1) {
      for (int p = 0; p < n; ++p) {
        if (prepare) {
          const LssProbe probe = PrepareProbe(d.mcc[p]);
          cpu::ScoreGallery(probe, d.gallery, kind, c, &(*scores)[static_cast<size_t>(p) * n], 1);
        } else {
          cpu::ScoreGallery(d.probes[p], d.gallery, kind, c, &(*scores)[static_cast<size_t>(p) * n], 1);
        }
      }
    } else {
      std::vector<std::thread> pool;
      for (int w = 0; w < threads; ++w) {
        pool.emplace_back([&, w] {
          for (int p = w; p < n; p += threads) {
            cpu::ScoreGallery(d.probes[p], d.gallery, kind, c, &(*scores)[static_cast<size_t>(p) * n], 1);
          }
        });
      }
      for (auto& t : pool) t.join();
    }
    const double wall = bench::NowSeconds() - w0, cpu_s = ThreadCpuSeconds() - c0;
    const double matches = static_cast<double>(n) * n;
    best.wall = std::max(best.wall, matches / wall);
    if (threads == 1) best.cpu = std::max(best.cpu, matches / cpu_s);
  }
  return best;
}

// Matches per CPU second where each probe's row (its 80 comparisons, about a
// millisecond) counts with its fastest of `reps` passes, the paths given
// alternating within each row: on a shared machine the minimum of many
// short intervals is steadier than the best of a few long ones. One rate per
// entry of `constants`.
std::vector<double> RowMinimumRates(const Db& d, MccScore kind, const std::vector<LssConstants>& constants, int reps) {
  const int n = d.gallery.num_templates();
  std::vector<float> row(n);
  std::vector<double> seconds(constants.size(), 0.0);
  for (int p = 0; p < n; ++p) {
    std::vector<double> best(constants.size(), 1e30);
    for (int rep = 0; rep < reps; ++rep) {
      for (size_t i = 0; i < constants.size(); ++i) {
        const double c0 = ThreadCpuSeconds();
        cpu::ScoreGallery(d.probes[p], d.gallery, kind, constants[i], row.data(), 1);
        best[i] = std::min(best[i], ThreadCpuSeconds() - c0);
      }
    }
    for (size_t i = 0; i < constants.size(); ++i) seconds[i] += best[i];
  }
  std::vector<double> rates;
  for (double s : seconds) rates.push_back(static_cast<double>(n) * n / s);
  return rates;
}

void Metrics(const Db& d, const std::vector<float>& scores, VerificationMetrics* v, IdentificationMetrics* id) {
  const int n = static_cast<int>(d.labels.size());
  std::vector<double> genuine, impostor;
  for (int p = 0; p < n; ++p)
    for (int g = 0; g < n; ++g)
      if (p != g) (d.labels[p] == d.labels[g] ? genuine : impostor).push_back(scores[static_cast<size_t>(p) * n + g]);
  *v = ComputeVerificationMetrics(genuine, impostor);
  *id = ComputeIdentification(scores, d.labels);
}

// "DB1_B/101_2" -> (db 1, finger 101, impression 2).
absl::StatusOr<std::array<int, 3>> ParseProbeName(const std::string& name) {
  std::array<int, 3> v{};
  char tail = 0;
  if (std::sscanf(name.c_str(), "DB%d_B/%d_%d%c", &v[0], &v[1], &v[2], &tail) != 3 || v[0] < 1 || v[0] > 4) {
    return absl::InvalidArgumentError("--one_many wants DBn_B/FINGER_IMPRESSION (e.g. DB1_B/101_2), got '" + name +
                                      "'");
  }
  return v;
}

// OpenAFIS's one-many pair set: one probe against every template of the
// four databases, `load_factor` passes; matches per second of thread CPU
// time per path, best of `reps`, paths alternating.
std::vector<double> OneManyRates(const LssProbe& probe, const MccGallery& all, const std::vector<LssConstants>& constants,
                                 int load_factor, int reps) {
  const int n = all.num_templates();
  std::vector<float> row(n);
  std::vector<double> best(constants.size(), 0.0);
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t i = 0; i < constants.size(); ++i) {
      const double c0 = ThreadCpuSeconds();
      for (int pass = 0; pass < load_factor; ++pass) {
        cpu::ScoreGallery(probe, all, MccScore::kLssR, constants[i], row.data(), 1);
      }
      best[i] = std::max(best[i], static_cast<double>(n) * load_factor / (ThreadCpuSeconds() - c0));
    }
  }
  return best;
}

// The paths --cpu_paths names (kAuto kept as kAuto: its column is labelled
// with what it resolves to).
absl::StatusOr<std::vector<LssCpuPath>> PathsFromFlag(const std::string& flag) {
  if (flag == "all") return cpu::AvailableCpuPaths();
  std::vector<LssCpuPath> paths;
  for (absl::string_view name : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    auto path = cpu::ParseLssCpuPath(name);
    if (!path.ok()) return path.status();
    paths.push_back(*path);
  }
  if (paths.empty()) return absl::InvalidArgumentError("--cpu_paths names no path");
  return paths;
}

std::string PathLabel(LssCpuPath path) {
  std::string label = cpu::LssCpuPathName(cpu::ResolveCpuPath(path));
  return path == LssCpuPath::kAuto ? "auto=" + label : label;
}

int Main() {
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  const int threads = absl::GetFlag(FLAGS_threads) > 0
                          ? absl::GetFlag(FLAGS_threads)
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string data_dir = absl::GetFlag(FLAGS_data);
  const bool lssr_only = absl::GetFlag(FLAGS_lssr_only);
  const auto paths_or = PathsFromFlag(absl::GetFlag(FLAGS_cpu_paths));
  if (!paths_or.ok()) {
    std::fprintf(stderr, "%s\n", std::string(paths_or.status().message()).c_str());
    return 2;
  }
  const std::vector<LssCpuPath> paths = *paths_or;
  data_dir = FingerprintDataDirOrExit(data_dir);
  const MccParams mcc;
  const LssConstants c = MakeLssConstants(LssParams(), mcc);  // the automatic path (or the env's)
  std::vector<LssConstants> path_constants;
  std::string path_names;
  for (LssCpuPath path : paths) {
    path_constants.push_back(c);
    path_constants.back().cpu_path = path;
    path_names += (path_names.empty() ? "" : ", ") + PathLabel(path);
  }
  std::printf("fingerprint_cpu_bench: MCC bits (R=70, NS=16, ND=6) on FVC2002 set B, %u hardware threads, "
              "CPU paths timed: %s (default constants: %s), best of %d\n",
              std::thread::hardware_concurrency(), path_names.c_str(), cpu::PopcountPath(c), reps);
  std::vector<Db> dbs(4);
  for (int i = 0; i < 4; ++i) {
    Db& d = dbs[i];
    d.db = i + 1;
    auto imps = LoadFvc2002(data_dir, d.db);
    if (!imps.ok()) {
      std::fprintf(stderr, "%s\n", std::string(imps.status().message()).c_str());
      return 1;
    }
    std::vector<std::vector<MinutiaPoint>> points;
    for (const FvcImpression& imp : *imps) {
      points.push_back(ToMinutiaPoints(imp.view));
      d.labels.push_back(imp.finger);
      d.impressions.push_back(imp.impression);
      d.mean_minutiae += imp.view.minutiae.size();
    }
    const double t0 = ThreadCpuSeconds();
    auto built = BuildMccTemplates(Stream::Cpu(), points, mcc);
    d.descriptor_ms = 1e3 * (ThreadCpuSeconds() - t0) / points.size();
    if (!built.ok()) {
      std::fprintf(stderr, "%s\n", std::string(built.status().message()).c_str());
      return 1;
    }
    d.mcc = *std::move(built);
    for (const MccTemplate& t : d.mcc) {
      d.gallery.Append(t, mcc);
      d.probes.push_back(PrepareProbe(t, mcc));
      d.mean_cylinders += t.cylinders.size();
    }
    d.mean_minutiae /= points.size();
    d.mean_cylinders /= points.size();
  }

  if (!absl::GetFlag(FLAGS_one_many).empty()) {
    const auto name = ParseProbeName(absl::GetFlag(FLAGS_one_many));
    if (!name.ok()) {
      std::fprintf(stderr, "%s\n", std::string(name.status().message()).c_str());
      return 2;
    }
    MccGallery all;
    const MccTemplate* probe_template = nullptr;
    for (const Db& d : dbs) {
      for (size_t t = 0; t < d.mcc.size(); ++t) {
        all.Append(d.mcc[t], mcc);
        if (d.db == (*name)[0] && d.labels[t] == (*name)[1] && d.impressions[t] == (*name)[2]) {
          probe_template = &d.mcc[t];
        }
      }
    }
    if (probe_template == nullptr) {
      std::fprintf(stderr, "no template %s in %s\n", absl::GetFlag(FLAGS_one_many).c_str(), data_dir.c_str());
      return 1;
    }
    const LssProbe probe = PrepareProbe(*probe_template, mcc);
    const int load_factor = std::max(1, absl::GetFlag(FLAGS_load_factor));
    const std::vector<double> rates = OneManyRates(probe, all, path_constants, load_factor, reps);
    for (size_t i = 0; i < paths.size(); ++i) {
      std::printf("one-many %s: probe %s (%zu cylinders) against %d templates x %d: LSS-R %.1f K matches/s per core\n",
                  PathLabel(paths[i]).c_str(), absl::GetFlag(FLAGS_one_many).c_str(), probe_template->cylinders.size(),
                  all.num_templates(), load_factor, rates[i] / 1e3);
    }
    return 0;
  }

  std::vector<float> scores;
  if (lssr_only) {
    const size_t np = paths.size();
    std::vector<double> whole(np, 0.0), row_min(np, 0.0);  // seconds for all matches
    double matches = 0;
    for (const Db& d : dbs) {
      const double m = static_cast<double>(d.gallery.num_templates()) * d.gallery.num_templates();
      matches += m;
      for (size_t i = 0; i < np; ++i) whole[i] += m / Run(d, MccScore::kLssR, path_constants[i], 1, reps, &scores).cpu;
      const std::vector<double> rates = RowMinimumRates(d, MccScore::kLssR, path_constants, reps);
      for (size_t i = 0; i < np; ++i) row_min[i] += m / rates[i];
    }
    for (size_t i = 0; i < np; ++i) {
      std::printf("path %s: LSS-R %.1f K matches/s per core (%.1f K with each probe's row at its fastest of %d, "
                  "paths alternating)\n",
                  PathLabel(paths[i]).c_str(), matches / whole[i] / 1e3, matches / row_min[i] / 1e3, reps);
    }
    return 0;
  }

  std::printf("\nAccuracy (all 6320 ordered pairs per DB: 560 genuine, 5760 impostor; each impression as probe "
              "against the other 79)\n");
  std::printf("%-4s %-6s %7s %7s %8s %8s %8s %8s %8s\n", "DB", "score", "EER%", "FMR100%", "FMR1000%", "ZeroFMR%",
              "rank1%", "rank10%", "OpenAFIS");
  const char* anchor[4] = {"6.8/100", "6.7/98.75", "15.0/93.75", "7.1/100"};
  for (const Db& d : dbs) {
    for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
      Run(d, kind, c, 1, 1, &scores);
      VerificationMetrics v;
      IdentificationMetrics id;
      Metrics(d, scores, &v, &id);
      std::printf("DB%-2d %-6s %7.2f %7.2f %8.2f %8.2f %8.2f %8.2f %10s\n", d.db,
                  kind == MccScore::kLssR ? "LSS-R" : "LSS", 100 * v.eer, 100 * v.fmr100, 100 * v.fmr1000,
                  100 * v.zero_fmr, 100 * id.rank1, 100 * id.rank10, kind == MccScore::kLssR ? anchor[d.db - 1] : "");
    }
  }

  std::printf("\nThroughput (80 x 80 comparisons per DB, single thread unless noted; K matches/s; the last four "
              "columns: default constants, %s)\n",
              cpu::PopcountPath(c));
  std::printf("%-4s %6s %6s %8s", "DB", "min", "cyl", "desc ms");
  for (LssCpuPath path : paths) {
    std::printf(" %20s %20s", ("LSS-R " + PathLabel(path)).c_str(), ("LSS " + PathLabel(path)).c_str());
  }
  std::printf(" %12s %12s %14s\n", "+probe prep", "LSS-R wall", "LSS-R x threads");
  const size_t np = paths.size();
  std::vector<double> path_lssr(np, 0.0), path_lss(np, 0.0);  // seconds per all matches
  double total_matches = 0, total_threads = 0, total_prep = 0, total_wall = 0;
  for (const Db& d : dbs) {
    std::vector<Rate> lssr(np), lss(np);
    for (size_t i = 0; i < np; ++i) {
      lssr[i] = Run(d, MccScore::kLssR, path_constants[i], 1, reps, &scores);
      lss[i] = Run(d, MccScore::kLss, path_constants[i], 1, reps, &scores);
    }
    const Rate rp = Run(d, MccScore::kLssR, c, 1, reps, &scores, /*prepare=*/true);
    const Rate wall = Run(d, MccScore::kLssR, c, 1, reps, &scores);
    const Rate mt = Run(d, MccScore::kLssR, c, threads, reps, &scores);
    std::printf("DB%-2d %6.1f %6.1f %8.2f", d.db, d.mean_minutiae, d.mean_cylinders, d.descriptor_ms);
    for (size_t i = 0; i < np; ++i) std::printf(" %20.1f %20.1f", lssr[i].cpu / 1e3, lss[i].cpu / 1e3);
    std::printf(" %12.1f %12.1f %10.1f (%d)\n", rp.cpu / 1e3, wall.wall / 1e3, mt.wall / 1e3, threads);
    const double m = static_cast<double>(d.gallery.num_templates()) * d.gallery.num_templates();
    total_matches += m;
    for (size_t i = 0; i < np; ++i) {
      path_lssr[i] += m / lssr[i].cpu;
      path_lss[i] += m / lss[i].cpu;
    }
    total_threads += m / mt.wall;
    total_prep += m / rp.cpu;
    total_wall += m / wall.wall;
  }
  std::printf("all  LSS-R default constants (%s): %.1f K counting probe preparation, %.1f K wall, %.1f K on %d "
              "threads; OpenAFIS on the 2-core dev VM over these pairs: ~39 K per core (its many-many per DB)\n",
              cpu::PopcountPath(c), total_matches / total_prep / 1e3, total_matches / total_wall / 1e3,
              total_matches / total_threads / 1e3, threads);
  for (size_t i = 0; i < np; ++i) {
    std::printf("path %s: LSS-R %.1f K matches/s per core, LSS %.1f K per core\n", PathLabel(paths[i]).c_str(),
                total_matches / path_lssr[i] / 1e3, total_matches / path_lss[i] / 1e3);
  }
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::fingerprint::Main();
}
