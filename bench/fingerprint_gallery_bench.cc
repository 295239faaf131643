// The durable fingerprint gallery at scale (CPU): bulk enroll of N
// perturbed copies of the FVC2002 DB1-DB4 templates (rigid motion, jitter,
// dropped and spurious minutiae) as ISO 19794-2 records through
// FingerprintGallery::EnrollBatch (group commit), compaction into a snapshot
// with the MCC cylinders, then reload in a fresh gallery object (what a
// server restart does), and one search. A second reload can be measured
// with descriptors rebuilt instead of read (--rebuild_sample=K times the
// rebuild of K templates and extrapolates).
//
//   bazel run -c opt //bench:fingerprint_gallery_bench -- --templates=1000000 --dir=/tmp/fp_gallery
//   (--phase=enroll|reload|all; reload alone reopens an existing --dir)
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/parallel.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template_io.h"

namespace tessera {
namespace fingerprint {
namespace {

using bench::NowSeconds;

double PeakRssGiB() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / (1024.0 * 1024.0);
}

// Rotation up to 20 degrees about the image centre, translation up to 30
// px, 3 px jitter, 5 degree angle noise, 10% dropped, up to 3 spurious.
Template Perturb(const Template& in, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const double rot = 20.0 * M_PI / 180 * u(rng);
  const double tx = 30.0 * u(rng), ty = 30.0 * u(rng);
  const double c = std::cos(rot), s = std::sin(rot);
  const double cx = in.width / 2.0, cy = in.height / 2.0;
  Template out = in;
  out.minutiae.clear();
  out.extended_data.clear();
  auto inside = [&](double x, double y) { return x >= 0 && y >= 0 && x < in.width && y < in.height; };
  for (const Minutia& m : in.minutiae) {
    if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) continue;
    const double dx = m.x - cx, dy = m.y - cy;
    const double x = std::round(cx + c * dx + s * dy + tx + 3.0 * u(rng));
    const double y = std::round(cy - s * dx + c * dy + ty + 3.0 * u(rng));
    if (!inside(x, y)) continue;
    Minutia p = m;
    p.x = static_cast<int>(x);
    p.y = static_cast<int>(y);
    p.angle = NormalizeAngle(m.angle + rot + 5.0 * M_PI / 180 * u(rng));
    out.minutiae.push_back(p);
  }
  for (int k = std::uniform_int_distribution<int>(0, 3)(rng); k > 0; --k) {
    Minutia p;
    p.x = std::uniform_int_distribution<int>(0, in.width - 1)(rng);
    p.y = std::uniform_int_distribution<int>(0, in.height - 1)(rng);
    p.angle = NormalizeAngle(std::uniform_real_distribution<double>(0, 2 * M_PI)(rng));
    p.type = MinutiaType::kEnding;
    out.minutiae.push_back(p);
  }
  return out;
}

int Main(int argc, char** argv) {
  long long n = 1000000;
  std::string dir = "/tmp/fp_gallery_bench";
  std::string phase = "all";
  int rebuild_sample = 20000;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--templates=", 12) == 0) {
      n = std::max(1LL, std::atoll(argv[i] + 12));
    } else if (std::strncmp(argv[i], "--dir=", 6) == 0) {
      dir = argv[i] + 6;
    } else if (std::strncmp(argv[i], "--phase=", 8) == 0) {
      phase = argv[i] + 8;
    } else if (std::strncmp(argv[i], "--rebuild_sample=", 17) == 0) {
      rebuild_sample = std::max(0, std::atoi(argv[i] + 17));
    } else {
      std::fprintf(stderr, "usage: %s [--templates=N] [--dir=DIR] [--phase=enroll|reload|all] [--rebuild_sample=K]\n",
                   argv[0]);
      return 2;
    }
  }
  std::printf("fingerprint_gallery_bench: %lld templates in %s, %d CPU threads\n", n, dir.c_str(), CpuThreads());
  std::vector<Template> bases;
  {
    auto data = FindFingerprintDataDir();
    if (!data.ok()) {
      std::fprintf(stderr, "%s\n", std::string(data.status().message()).c_str());
      return 1;
    }
    for (int db = 1; db <= 4; ++db) {
      auto imps = LoadFvc2002(*data, db);
      if (!imps.ok()) {
        std::fprintf(stderr, "%s\n", std::string(imps.status().message()).c_str());
        return 1;
      }
      for (const auto& imp : *imps) bases.push_back(imp.view);
    }
  }
  FingerprintServiceOptions options;
  options.gallery_dir = dir;
  options.device = "cpu";
  options.compact_log_bytes = int64_t{1} << 62;  // compaction only when asked, to time it

  if (phase == "enroll" || phase == "all") {
    if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) return 1;
    auto gallery = FingerprintGallery::Open(options);
    if (!gallery.ok()) {
      std::fprintf(stderr, "%s\n", gallery.status().ToString().c_str());
      return 1;
    }
    (*gallery)->Reserve(n, n * 40);
    const long long group = 8192;
    double t_make = 0, t_enroll = 0;
    const double t0 = NowSeconds();
    for (long long begin = 0; begin < n; begin += group) {
      const long long end = std::min(n, begin + group);
      double t = NowSeconds();
      std::vector<EnrollItem> items(end - begin);
      ParallelFor(end - begin, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
          const long long k = begin + i;
          std::mt19937 rng(static_cast<uint32_t>(k * 2654435761u + 17));
          const Template& base = bases[k % bases.size()];
          auto bytes = WriteTemplateRecord(TemplateFormat::kIso19794, {k < static_cast<long long>(bases.size())
                                                                           ? base
                                                                           : Perturb(base, rng)});
          items[i] = {absl::StrCat("p", k), bytes.ok() ? std::string(bytes->begin(), bytes->end()) : std::string(),
                      TemplateFormat::kIso19794, 0};
        }
      });
      t_make += NowSeconds() - t;
      t = NowSeconds();
      auto statuses = (*gallery)->EnrollBatch(items);
      t_enroll += NowSeconds() - t;
      if (!statuses.ok()) {
        std::fprintf(stderr, "%s\n", statuses.status().ToString().c_str());
        return 1;
      }
      for (const auto& s : *statuses) {
        if (!s.ok()) {
          std::fprintf(stderr, "enroll: %s\n", s.ToString().c_str());
          return 1;
        }
      }
      if ((end / group) % 16 == 0 || end == n) {
        std::printf("  %lld enrolled, %.0f templates/s (enroll only), %.1f s\n", end, end / t_enroll, NowSeconds() - t0);
        std::fflush(stdout);
      }
    }
    std::printf("bulk enroll: %lld templates in %.1f s (%.0f/s; making the records %.1f s more), peak RSS %.1f GiB\n",
                n, t_enroll, n / t_enroll, t_make, PeakRssGiB());
    const double tc = NowSeconds();
    absl::Status compacted = (*gallery)->Compact();
    if (!compacted.ok()) {
      std::fprintf(stderr, "%s\n", compacted.ToString().c_str());
      return 1;
    }
    std::printf("compaction (snapshot with cylinders): %.1f s\n", NowSeconds() - tc);
    std::fflush(stdout);
  }
  if (phase == "reload" || phase == "all") {
    // A cold-ish reload would need dropping the page cache (root); this is
    // the warm figure plus the read rate of the file.
    const double t = NowSeconds();
    auto gallery = FingerprintGallery::Open(options);
    if (!gallery.ok()) {
      std::fprintf(stderr, "%s\n", gallery.status().ToString().c_str());
      return 1;
    }
    const double reload = NowSeconds() - t;
    std::printf("reload: %lld templates (%lld with persisted cylinders) in %.1f s, peak RSS %.1f GiB\n",
                static_cast<long long>((*gallery)->size()),
                static_cast<long long>((*gallery)->open_stats().snapshot_cylinder_templates), reload, PeakRssGiB());
    std::mt19937 rng(99);
    std::vector<std::vector<MinutiaPoint>> probes;
    for (int i = 0; i < 1; ++i) {
      Template p = Perturb(bases[i * 37 % bases.size()], rng);
      std::vector<MinutiaPoint> pts;
      for (const Minutia& m : p.minutiae) pts.push_back({float(m.x), float(m.y), float(m.angle)});
      probes.push_back(pts);
    }
    SearchStats stats;
    const double ts = NowSeconds();
    auto results = (*gallery)->Search(probes, 10, &stats);
    if (results.ok()) {
      std::printf("search: %zu probes x %lld templates in %.2f s (%.2f M matches/s on %d threads)\n", probes.size(),
                  static_cast<long long>(stats.gallery_templates), NowSeconds() - ts,
                  probes.size() * stats.gallery_templates / (NowSeconds() - ts) / 1e6, CpuThreads());
    }
  }
  if (rebuild_sample > 0) {
    // Rebuilding descriptors instead of reading them: time K and scale.
    std::vector<std::vector<MinutiaPoint>> sample;
    std::mt19937 rng(5);
    for (int i = 0; i < rebuild_sample; ++i) {
      Template p = Perturb(bases[i % bases.size()], rng);
      std::vector<MinutiaPoint> pts;
      for (const Minutia& m : p.minutiae) pts.push_back({float(m.x), float(m.y), float(m.angle)});
      sample.push_back(pts);
    }
    const double t = NowSeconds();
    ParallelForDynamic(rebuild_sample, 64, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) cpu::BuildMccTemplate(sample[i]);
    });
    const double per = (NowSeconds() - t) / rebuild_sample;
    std::printf("rebuild instead: %d descriptors in %.2f s on %d threads -> %.0f s for %lld templates\n",
                rebuild_sample, per * rebuild_sample, CpuThreads(), per * n, n);
  }
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) { return tessera::fingerprint::Main(argc, argv); }
