// MCC fingerprint matching on the CPU: accuracy and throughput on FVC2002
// DB1-DB4 set B (320 real ISO 19794-2 templates, ../shared/data/fingerprint).
//
//   fingerprint_cpu_bench [--reps=N] [--threads=N] [--data=DIR] [--lssr_only]
//
// Per database: descriptor time, then all 80 x 80 comparisons (the 6320
// off-diagonal ones feed the metrics of services/fingerprint/eval.h) with
// LSS-R and with LSS, single-threaded: matches per second of thread CPU time
// (robust on a shared machine; the per-core figure) and of wall time, best
// of N repetitions; for LSS-R also counting each probe's preparation
// (PrepareProbe, once per probe per 80 comparisons), with both popcount
// paths (AVX-512 VPOPCNTQ where the CPU has it, and scalar POPCNT), and with
// all threads.
// The anchor is OpenAFIS on this data on the same 2-core machine: ~84 K
// matches/s on 1 thread, ~153 K on 2 (TARGETS.md), rank-1 100 / 98.75 /
// 93.75 / 100 % and EER 6.8 / 6.7 / 15.0 / 7.1 % for DB1-DB4.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/eval.h"
#include "services/fingerprint/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Db {
  int db = 0;
  std::vector<int> labels;
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
    const double w0 = WallSeconds(), c0 = ThreadCpuSeconds();
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
    const double wall = WallSeconds() - w0, cpu_s = ThreadCpuSeconds() - c0;
    const double matches = static_cast<double>(n) * n;
    best.wall = std::max(best.wall, matches / wall);
    if (threads == 1) best.cpu = std::max(best.cpu, matches / cpu_s);
  }
  return best;
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

int Main(int argc, char** argv) {
  int reps = 3;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string data_dir;
  bool lssr_only = false;  // for profilers: only the single-thread LSS-R rate
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--reps=", 7) == 0) {
      reps = std::max(1, std::atoi(argv[i] + 7));
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      threads = std::max(1, std::atoi(argv[i] + 10));
    } else if (std::strncmp(argv[i], "--data=", 7) == 0) {
      data_dir = argv[i] + 7;
    } else if (std::strcmp(argv[i], "--lssr_only") == 0) {
      lssr_only = true;
    } else {
      std::fprintf(stderr, "usage: %s [--reps=N] [--threads=N] [--data=DIR] [--lssr_only]\n", argv[0]);
      return 2;
    }
  }
  if (data_dir.empty()) {
    auto found = FindFingerprintDataDir();
    if (!found.ok()) {
      std::fprintf(stderr, "%s\n", std::string(found.status().message()).c_str());
      return 1;
    }
    data_dir = *found;
  }
  const MccParams mcc;
  const LssConstants c = MakeLssConstants(LssParams(), mcc);
  std::printf("fingerprint_cpu_bench: MCC bits (R=70, NS=16, ND=6) on FVC2002 set B, %u hardware threads, "
              "popcount path %s, best of %d\n",
              std::thread::hardware_concurrency(), cpu::PopcountPath(), reps);
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

  std::vector<float> scores;
  if (lssr_only) {
    double matches = 0, seconds = 0;
    for (const Db& d : dbs) {
      const Rate r = Run(d, MccScore::kLssR, c, 1, reps, &scores);
      const double m = static_cast<double>(d.gallery.num_templates()) * d.gallery.num_templates();
      matches += m;
      seconds += m / r.cpu;
    }
    std::printf("all  LSS-R %.1f K matches/s per core (%s)\n", matches / seconds / 1e3, cpu::PopcountPath());
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

  std::printf("\nThroughput (80 x 80 comparisons per DB, single thread unless noted; K matches/s)\n");
  std::printf("%-4s %6s %6s %8s %12s %12s %12s %12s %12s %14s\n", "DB", "min", "cyl", "desc ms", "LSS-R cpu",
              "+probe prep", "LSS-R wall", "LSS-R scalar", "LSS cpu", "LSS-R x threads");
  double total_matches = 0, total_cpu = 0, total_scalar = 0, total_threads = 0, total_lss = 0, total_prep = 0;
  for (const Db& d : dbs) {
    cpu::ForceScalarPopcount(false);
    const Rate r = Run(d, MccScore::kLssR, c, 1, reps, &scores);
    const Rate rp = Run(d, MccScore::kLssR, c, 1, reps, &scores, /*prepare=*/true);
    const Rate lss = Run(d, MccScore::kLss, c, 1, reps, &scores);
    cpu::ForceScalarPopcount(true);
    const Rate scalar = Run(d, MccScore::kLssR, c, 1, reps, &scores);
    cpu::ForceScalarPopcount(false);
    const Rate mt = Run(d, MccScore::kLssR, c, threads, reps, &scores);
    std::printf("DB%-2d %6.1f %6.1f %8.2f %12.1f %12.1f %12.1f %12.1f %12.1f %10.1f (%d)\n", d.db, d.mean_minutiae,
                d.mean_cylinders, d.descriptor_ms, r.cpu / 1e3, rp.cpu / 1e3, r.wall / 1e3, scalar.cpu / 1e3,
                lss.cpu / 1e3, mt.wall / 1e3, threads);
    const double m = static_cast<double>(d.gallery.num_templates()) * d.gallery.num_templates();
    total_matches += m;
    total_cpu += m / r.cpu;
    total_scalar += m / scalar.cpu;
    total_threads += m / mt.wall;
    total_lss += m / lss.cpu;
    total_prep += m / rp.cpu;
  }
  std::printf("all  LSS-R %.1f K matches/s per core (%s; %.1f K counting probe preparation), %.1f K scalar popcount, "
              "%.1f K on %d threads; LSS %.1f K per core; OpenAFIS here: ~84 K per core, ~153 K on 2\n",
              total_matches / total_cpu / 1e3, cpu::PopcountPath(), total_matches / total_prep / 1e3,
              total_matches / total_scalar / 1e3, total_matches / total_threads / 1e3, threads,
              total_matches / total_lss / 1e3);
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) { return tessera::fingerprint::Main(argc, argv); }
