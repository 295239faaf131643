// Latent-style identification on FVC2002 through the ALFI pipeline (protocol
// in services/fingerprint/eval/latent_eval.h): partial probes of 12-30
// minutiae against the real impressions padded with synthetic non-mates;
// prints rank-1 / rank-20 and more of the CMC per matcher and writes the CMC
// curves as a PNG.
//
//   bazel-bin/bench/fingerprint_latent_eval [--matchers=lssr,dmc] [--padding=10000] [--crops=1]
//       [--dbs=1,2,3,4] [--seed=S] [--max_rank=100] [--png=PATH]
//       [--min_minutiae=12] [--max_minutiae=30]
//       [--backend=cpu|cuda|auto] [--batch=N] [--latents_per_search=N]
//       [--threads=N] [--data=DIR]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/fingerprint_data.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/device.h"
#include "services/fingerprint/search/alfi_dmc_matcher.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/eval/cmc_plot.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/eval/latent_eval.h"

namespace tessera {
namespace fingerprint {
namespace {

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--matchers=lssr,lss,dmc] [--padding=N] [--crops=N] [--dbs=1,2,3,4] [--seed=S]\n"
               "          [--max_rank=R] [--png=PATH] [--min_minutiae=N] [--max_minutiae=N]\n"
               "          [--backend=cpu|cuda|auto] [--batch=N]\n"
               "          [--latents_per_search=N] [--threads=N] [--data=DIR]\n",
               argv0);
  return 2;
}

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

int Main(int argc, char** argv) {
  LatentEvalOptions options;
  std::vector<std::string> matchers = {"lssr", "dmc"};
  std::string png = "fingerprint_latent_cmc.png", data_dir, backend = "cpu";
  options.pipeline.batch_templates = 4096;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    int64_t n = 0;
    uint64_t u = 0;
    if (Flag(argv[i], "--matchers", &v)) {
      matchers = absl::StrSplit(v, ',', absl::SkipEmpty());
    } else if (Flag(argv[i], "--padding", &v) && absl::SimpleAtoi(v, &n) && n >= 0) {
      options.padding = n;
    } else if (Flag(argv[i], "--crops", &v) && absl::SimpleAtoi(v, &n) && n >= 1) {
      options.crops_per_impression = static_cast<int>(n);
    } else if (Flag(argv[i], "--dbs", &v)) {
      options.dbs.clear();
      for (absl::string_view d : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        int db = 0;
        if (!absl::SimpleAtoi(d, &db) || db < 1 || db > 4) return Usage(argv[0]);
        options.dbs.push_back(db);
      }
    } else if (Flag(argv[i], "--seed", &v) && absl::SimpleAtoi(v, &u)) {
      options.seed = u;
    } else if (Flag(argv[i], "--max_rank", &v) && absl::SimpleAtoi(v, &n) && n >= 2) {
      options.max_rank = static_cast<int>(n);
    } else if (Flag(argv[i], "--min_minutiae", &v) && absl::SimpleAtoi(v, &n) && n >= 1 && n <= 255) {
      options.crop.min_minutiae = static_cast<int>(n);
    } else if (Flag(argv[i], "--max_minutiae", &v) && absl::SimpleAtoi(v, &n) && n >= 1 && n <= 255) {
      options.crop.max_minutiae = static_cast<int>(n);
    } else if (Flag(argv[i], "--png", &v)) {
      png = v;
    } else if (Flag(argv[i], "--backend", &v)) {
      backend = v;
    } else if (Flag(argv[i], "--batch", &v) && absl::SimpleAtoi(v, &n) && n >= 1) {
      options.pipeline.batch_templates = static_cast<int>(n);
    } else if (Flag(argv[i], "--latents_per_search", &v) && absl::SimpleAtoi(v, &n) && n >= 1) {
      options.latents_per_search = static_cast<int>(n);
    } else if (Flag(argv[i], "--threads", &v) && absl::SimpleAtoi(v, &n) && n >= 0) {
      options.pipeline.threads = static_cast<int>(n);
    } else if (Flag(argv[i], "--data", &v)) {
      data_dir = v;
    } else {
      return Usage(argv[0]);
    }
  }
  auto resolved = ResolveBackend(backend);
  if (!resolved.ok()) {
    std::fprintf(stderr, "%s\n", std::string(resolved.status().message()).c_str());
    return 1;
  }
  options.pipeline.backend = *resolved;
  data_dir = FingerprintDataDirOrExit(data_dir);
  std::printf("latent-style evaluation: FVC2002 DB");
  for (size_t i = 0; i < options.dbs.size(); ++i) std::printf("%s%d", i ? "," : "", options.dbs[i]);
  std::printf(" set B, %d crop(s) of %d-%d minutiae per impression, %lld synthetic non-mates, seed %llu, "
              "backend %s, batch %d templates\n",
              options.crops_per_impression, options.crop.min_minutiae, options.crop.max_minutiae,
              static_cast<long long>(options.padding), static_cast<unsigned long long>(options.seed),
              std::string(BackendName(options.pipeline.backend)).c_str(), options.pipeline.batch_templates);
  std::vector<CmcCurve> curves;
  std::printf("%-6s %6s %8s %7s %6s %6s %7s %7s %7s %7s %7s %7s %9s %12s %14s\n", "match", "probes", "gallery",
              "min", "cyl", "no-cyl", "rank1%", "rank5%", "rank10%", "rank20%", "rank50%", "rank100%", "search s",
              "matches/s", "ahead real/syn");
  for (const std::string& name : matchers) {
    std::unique_ptr<BatchMatcher> matcher;
    if (name == "lssr") {
      matcher = std::make_unique<LssBatchMatcher>(MccScore::kLssR);
    } else if (name == "lss") {
      matcher = std::make_unique<LssBatchMatcher>(MccScore::kLss);
    } else if (name == "dmc") {
      auto m = DmcBatchMatcher::Create();
      if (!m.ok()) {
        std::fprintf(stderr, "%s\n", std::string(m.status().message()).c_str());
        return 1;
      }
      matcher = std::move(*m);
    } else {
      return Usage(argv[0]);
    }
    auto r = RunLatentEvaluation(data_dir, options, *matcher);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(r.status().message()).c_str());
      return 1;
    }
    auto at = [&](int k) { return 100.0 * r->cmc[std::min<int>(k, r->cmc.size()) - 1]; };
    // Non-mates ahead of the mate per probe and per 1000 templates of each kind.
    const double real_rate = r->real_nonmate_templates > 0
                                 ? 1e3 * r->ahead_real / (static_cast<double>(r->probes) * r->real_nonmate_templates)
                                 : 0;
    const double syn_rate = r->synthetic_templates > 0
                                ? 1e3 * r->ahead_synthetic / (static_cast<double>(r->probes) * r->synthetic_templates)
                                : 0;
    std::printf("%-6s %6d %8d %7.1f %6.1f %6d %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %9.2f %12.0f %6.2f/%-6.2f\n",
                name.c_str(), r->probes, r->gallery_templates, r->mean_probe_minutiae, r->mean_probe_cylinders,
                r->probes_without_cylinders, at(1), at(5), at(10), at(20), at(50), at(100), r->search_seconds,
                static_cast<double>(r->probes) * r->gallery_templates / r->search_seconds, real_rate, syn_rate);
    std::printf("       pipeline: %s; gallery + probes built in %.2f s\n", r->stats.ToString().c_str(),
                r->gallery_seconds);
    curves.push_back({matcher->name(), r->cmc});
  }
  std::printf("(ahead real/syn: non-mates ranked above the mate, per probe and per 1000 real non-mate / synthetic "
              "templates)\n");
  CmcPlotOptions po;
  po.max_rank = options.max_rank;
  // Zoom the y axis to the interesting range (steps of 10 %).
  double lowest = 1;
  for (const CmcCurve& c : curves) lowest = std::min(lowest, c.rates.front());
  po.y_min = std::max(0.0, std::floor(lowest * 10 - 1e-9) / 10);
  if (po.y_min >= 1) po.y_min = 0.9;
  if (auto s = WriteCmcPlot(curves, png, po); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("CMC (ranks 1..%d, hit rate %.0f-100 %%) written to %s:", options.max_rank, 100 * po.y_min, png.c_str());
  for (size_t i = 0; i < curves.size(); ++i) {
    std::printf(" %s = %s", curves[i].label.c_str(), CmcCurveColorName(static_cast<int>(i)));
  }
  std::printf("\n");
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) { return tessera::fingerprint::Main(argc, argv); }
