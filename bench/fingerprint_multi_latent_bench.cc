// Multi-latent LSS-R on the GPU (issue 37 item 4): one launch scoring every
// latent of a batch (cuda::EnqueueScoreGalleryMulti) against the
// single-latent kernel launched once per latent (cuda::EnqueueScoreGallery,
// kWarpMma, today's search path), side by side in one process on one
// device-resident gallery.
//
//   fingerprint_multi_latent_bench [--templates=1000000] [--latents=1,4,16,64]
//       [--repeats=2] [--kinds=lssr,lss] [--lss_latents=16] [--step_clock_latents=16] [--cpu_check=2000]
//       [--variants=multi,multi+bal2,...] [--data=DIR] [--seed=S]
//
// Gallery: the throughput benches' synthetic gallery (bench/fingerprint_bases.h:
// perturbed impressions of the FVC2002 templates, or of random bases without
// the data; descriptors built on the GPU), uploaded once. Latents: crops of
// 12-30 minutiae of real impressions (latent_eval.h), as in
// fingerprint_pipeline_bench. Per latent count L and kernel variant: the best
// wall time of --repeats passes (enqueue of every latent + synchronize; scores
// stay on the device), M matches/s = templates x L / wall, the ratio to the
// single-latent row, and parity:
//   - every multi-latent score equals the single-latent kernel's, bit for bit
//     (all L x templates scores compared);
//   - the first --cpu_check templates x the first 4 latents equal the CPU
//     matcher (cpu::ScoreGallery), bit for bit.
// Variants: "single x L" (L launches, the baseline, always first), then names
// built from tokens: "multi" (one launch, cuda::LssMultiOptions' defaults) or
// "sets" (one single-probe set per latent, launched once per latent like the
// baseline but through the multi entry point with the options: the
// single-latent path with them), then optionally +balN
// (LssMultiOptions::templates_per_warp = N; 0: one wave), e.g. "multi+bal2".
// Without --variants: multi, multi+bal2, multi+bal3, multi+bal8, multi+bal0,
// sets. (Compact rho is always on since round 7; compact lambda was deleted.)
// Kind lss (no rho / relaxation; --lss_latents counts only) is a diagnostic:
// LSS-R minus LSS is the cost of step 3 (rho + relaxation + efficiency pick).
// Then, at --step_clock_latents, the share of each step of a comparison in
// the clock cycles (LssMultiOptions::stage_cycles) with the default options.
// Without a GPU it prints why and exits 0.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/fingerprint_bases.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/status.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/eval/latent_eval.h"
#include "services/fingerprint/eval/synthetic_gallery.h"

namespace tessera {
namespace fingerprint {
namespace {

using bench::NowSeconds;

struct Config {
  int64_t templates = 1000000;
  std::vector<int64_t> latents = {1, 4, 16, 64};
  int repeats = 2;
  std::vector<MccScore> kinds = {MccScore::kLssR, MccScore::kLss};
  std::vector<int64_t> lss_latents = {16};  // latent counts of the (diagnostic) LSS rows
  int64_t step_clock_latents = 16;          // LSS-R latent count of the step-clock rows (0: none)
  std::vector<std::string> variants;        // names to run (empty: all); "single x L" always runs first
  int cpu_check = 2000;
  std::string data_dir;
  uint64_t seed = 20261207;
};

#if TESSERA_WITH_CUDA
struct Variant {
  std::string name;
  bool multi;
  cuda::LssMultiOptions options;
  bool per_latent_sets = false;  // "sets": one launch per latent through the multi entry point
};

// A variant from its name (see the header comment); false if a token is unknown.
bool ParseVariant(const std::string& name, Variant* out) {
  std::vector<std::string> tokens = absl::StrSplit(name, '+');
  Variant v{name, true, {}};
  if (tokens.empty()) return false;
  if (tokens[0] == "sets") {
    v.per_latent_sets = true;
  } else if (tokens[0] != "multi") {
    return false;
  }
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    int n = 0;
    if (t.rfind("bal", 0) == 0 && absl::SimpleAtoi(t.substr(3), &n) && n >= 0) {
      v.options.templates_per_warp = n;
    } else {
      return false;
    }
  }
  *out = v;
  return true;
}

std::vector<Variant> Variants() {
  std::vector<Variant> v;
  v.push_back({"single x L", false, {}});
  for (const char* name : {"multi", "multi+bal2", "multi+bal3", "multi+bal8", "multi+bal0", "sets"}) {
    Variant parsed;
    if (!ParseVariant(name, &parsed)) {  // a built-in name this parser no longer knows: a bench bug
      std::fprintf(stderr, "built-in variant %s does not parse\n", name);
      std::abort();
    }
    v.push_back(parsed);
  }
  return v;
}

// One pass of `variant` for latents [0, L): every score at out + l * stride.
absl::Status Pass(const Stream& stream, const Variant& variant, const std::vector<cuda::DeviceLssProbe>& singles,
                  const std::vector<cuda::DeviceLssProbeSet>& single_sets, const cuda::DeviceLssProbeSet& set,
                  const MccDeviceGalleryView& view, MccScore kind, const LssConstants& c, float* out, size_t stride) {
  if (variant.per_latent_sets) {
    for (int l = 0; l < set.size(); ++l) {
      TESSERA_RETURN_IF_ERROR(
          cuda::EnqueueScoreGalleryMulti(stream, single_sets[l], view, kind, c, out + l * stride, stride, variant.options));
    }
  } else if (variant.multi) {
    TESSERA_RETURN_IF_ERROR(cuda::EnqueueScoreGalleryMulti(stream, set, view, kind, c, out, stride, variant.options));
  } else {
    for (int l = 0; l < set.size(); ++l) {
      TESSERA_RETURN_IF_ERROR(cuda::EnqueueScoreGallery(stream, singles[l], view, kind, c, out + l * stride));
    }
  }
  return stream.Synchronize();
}

// One multi-latent LSS-R pass with the step clock (the default options): a
// table row of each step's share of the cycles.
std::string StepClockRow(const Stream& stream, const cuda::DeviceLssProbeSet& set, const MccDeviceGalleryView& view,
                         const LssConstants& c, float* out, size_t stride) {
  const std::string name = "multi";
  auto counters = Buffer::Allocate(MemoryKind::kDevice, sizeof(unsigned long long) * cuda::kLssStageCount, stream.ordinal());
  if (!counters.ok()) return absl::StrCat("| ", name, " | ", counters.status().ToString(), " |");
  std::vector<unsigned long long> host(cuda::kLssStageCount, 0);
  cuda::LssMultiOptions o;
  o.stage_cycles = static_cast<unsigned long long*>((*counters)->data());
  absl::Status st = CopyBytes((*counters)->data(), MemoryKind::kDevice, host.data(), MemoryKind::kHost,
                              sizeof(unsigned long long) * cuda::kLssStageCount, stream);
  if (st.ok()) st = cuda::EnqueueScoreGalleryMulti(stream, set, view, MccScore::kLssR, c, out, stride, o);
  if (st.ok()) {
    st = CopyBytes(host.data(), MemoryKind::kHost, (*counters)->data(), MemoryKind::kDevice,
                   sizeof(unsigned long long) * cuda::kLssStageCount, stream);
  }
  if (st.ok()) st = stream.Synchronize();
  if (!st.ok()) return absl::StrCat("| ", name, " | ", st.ToString(), " |");
  double total = 0;
  for (unsigned long long v : host) total += static_cast<double>(v);
  std::string row = absl::StrCat("| ", name, " |");
  for (unsigned long long v : host) absl::StrAppend(&row, absl::StrFormat(" %.1f %% |", total > 0 ? 100.0 * v / total : 0.0));
  absl::StrAppend(&row, absl::StrFormat(" %.0f |", total / (static_cast<double>(view.num_templates) * set.size())));
  return row;
}

int Run(const Config& cfg) {
  const DeviceRegistry& devices = DeviceRegistry::Get();
  if (!devices.cuda_available()) {
    std::printf("fingerprint_multi_latent_bench: no GPU (%s); nothing to measure\n",
                devices.cuda_unavailable_reason().c_str());
    return 0;
  }
  std::printf("fingerprint_multi_latent_bench on %s\n", devices.Describe().c_str());
  auto stream_or = Stream::Create(Backend::kCuda);
  if (!stream_or.ok()) {
    std::fprintf(stderr, "%s\n", stream_or.status().ToString().c_str());
    return 1;
  }
  const Stream& stream = *stream_or;
  const std::vector<BaseTemplate> bases = LoadBenchBases(cfg.data_dir, cfg.seed);
  const int max_latents = static_cast<int>(*std::max_element(cfg.latents.begin(), cfg.latents.end()));
  std::vector<LssProbe> probes;
  double cylinders = 0;
  for (int i = 0; i < max_latents; ++i) {
    const BaseTemplate& b = bases[(static_cast<size_t>(i) * 37 + 3) % bases.size()];
    SplitMix64 rng(cfg.seed + 7919 * i);
    probes.push_back(PrepareProbe(cpu::BuildMccTemplate(CropLatent(b.points, LatentCropParams(), rng))));
    cylinders += probes.back().cylinders.cylinders.size();
  }
  std::printf("latents: up to %d crops of 12-30 minutiae (%.1f valid cylinders on average)\n", max_latents,
              cylinders / max_latents);

  const double g0 = NowSeconds();
  auto synthetic = SyntheticGallery::Create(bases, BenchGalleryOptions(cfg.templates, cfg.seed, bases.size()));
  if (!synthetic.ok()) {
    std::fprintf(stderr, "%s\n", synthetic.status().ToString().c_str());
    return 1;
  }
  MccGallery gallery;
  std::vector<int64_t> identity;
  if (absl::Status s = synthetic->AppendTo(stream, 0, cfg.templates, &gallery, &identity); !s.ok()) {
    std::fprintf(stderr, "gallery: %s\n", s.ToString().c_str());
    return 1;
  }
  const double g1 = NowSeconds();
  auto device = MccDeviceGallery::Upload(gallery, stream);
  if (!device.ok()) {
    std::fprintf(stderr, "upload: %s\n", device.status().ToString().c_str());
    return 1;
  }
  const int n = device->num_templates();
  std::printf("gallery: %d templates, %d cylinders (%.1f per template, max %d, warp scratch for %d), %.2f GB; "
              "generated + descriptors (GPU) in %.1f s, uploaded in %.1f s\n",
              n, gallery.num_cylinders(), static_cast<double>(gallery.num_cylinders()) / n,
              device->max_template_size(), device->scratch_template_size(), device->bytes() / 1e9, g1 - g0,
              NowSeconds() - g1);

  const LssConstants c = MakeLssConstants(LssParams());
  const size_t stride = (static_cast<size_t>(n) + 63) / 64 * 64;
  auto reference = Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * stride * max_latents, stream.ordinal());
  auto trial = Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * stride * max_latents, stream.ordinal());
  if (!reference.ok() || !trial.ok()) {
    std::fprintf(stderr, "score buffers: %s\n", (reference.ok() ? trial : reference).status().ToString().c_str());
    return 1;
  }
  std::vector<cuda::DeviceLssProbe> singles;
  for (const LssProbe& p : probes) {
    auto d = cuda::DeviceLssProbe::Upload(stream, p);
    if (!d.ok()) {
      std::fprintf(stderr, "probe: %s\n", d.status().ToString().c_str());
      return 1;
    }
    singles.push_back(std::move(*d));
  }
  std::vector<cuda::DeviceLssProbeSet> single_sets;  // "set x L" variants
  for (const LssProbe& p : probes) {
    auto d = cuda::DeviceLssProbeSet::Upload(stream, {p});
    if (!d.ok()) {
      std::fprintf(stderr, "probe set: %s\n", d.status().ToString().c_str());
      return 1;
    }
    single_sets.push_back(std::move(*d));
  }
  std::vector<Variant> variants;
  if (cfg.variants.empty()) {
    variants = Variants();
  } else {
    variants.push_back(Variants()[0]);
    for (const std::string& name : cfg.variants) {
      Variant v;
      if (!ParseVariant(name, &v)) {
        std::fprintf(stderr, "unknown variant %s\n", name.c_str());
        return 2;
      }
      variants.push_back(v);
    }
  }
  std::vector<std::string> steps;  // step-clock table rows
  std::printf("\n| kind | latents | variant | wall s (best of %d) | M matches/s | vs single x L | scores = single's | "
              "first %d templates x %d latents = CPU |\n|---|---:|---|---:|---:|---:|---|---|\n",
              cfg.repeats, std::min(cfg.cpu_check, n), std::min<int>(4, max_latents));
  for (MccScore kind : cfg.kinds) {
    const char* kind_name = kind == MccScore::kLssR ? "LSS-R" : "LSS";
    // The CPU reference on the first templates for the first 4 latents.
    const int check_n = std::min(cfg.cpu_check, n), check_l = std::min(4, max_latents);
    std::vector<float> cpu_scores(static_cast<size_t>(check_n) * check_l);
    for (int l = 0; l < check_l; ++l) {
      for (int t = 0; t < check_n; ++t) cpu_scores[l * check_n + t] = cpu::Score(probes[l], gallery, t, kind, c);
    }
    for (int64_t latents : kind == MccScore::kLssR ? cfg.latents : cfg.lss_latents) {
      const int L = static_cast<int>(latents);
      if (L > max_latents) continue;
      const std::vector<LssProbe> subset(probes.begin(), probes.begin() + L);
      auto set = cuda::DeviceLssProbeSet::Upload(stream, subset);
      if (!set.ok()) {
        std::fprintf(stderr, "probe set: %s\n", set.status().ToString().c_str());
        return 1;
      }
      const int check_l_here = std::min(check_l, L);
      double single_wall = 0;
      std::vector<float> ref_host;
      for (const Variant& v : variants) {
        float* out = static_cast<float*>((v.multi ? *trial : *reference)->data());
        std::printf("| %s | %d | %s | ", kind_name, L, v.name.c_str());
        absl::Status st = Pass(stream, v, singles, single_sets, *set, device->view(), kind, c, out, stride);  // warm-up
        double best = 1e30;
        for (int r = 0; r < cfg.repeats && st.ok(); ++r) {
          const double t0 = NowSeconds();
          st = Pass(stream, v, singles, single_sets, *set, device->view(), kind, c, out, stride);
          best = std::min(best, NowSeconds() - t0);
        }
        if (!st.ok()) {
          std::printf("error: %s | | | | |\n", st.ToString().c_str());
          std::fflush(stdout);
          continue;
        }
        std::vector<float> host(stride * L);
        if (absl::Status s = CopyBytes(host.data(), MemoryKind::kHost, out, MemoryKind::kDevice,
                                       sizeof(float) * host.size(), stream);
            !s.ok() || !stream.Synchronize().ok()) {
          std::printf("download failed | | | | |\n");
          continue;
        }
        std::string same = "-", cpu = "-";
        if (!v.multi) {
          single_wall = best;
          ref_host = host;
          long long exact = 0;
          for (int l = 0; l < check_l_here; ++l) {
            for (int t = 0; t < check_n; ++t) exact += cpu_scores[l * check_n + t] == host[l * stride + t];
          }
          cpu = absl::StrCat(exact, " / ", static_cast<long long>(check_n) * check_l_here,
                             exact == static_cast<long long>(check_n) * check_l_here ? "" : " MISMATCH");
        } else if (!ref_host.empty()) {
          long long exact = 0;
          for (int l = 0; l < L; ++l) {
            for (int t = 0; t < n; ++t) exact += host[l * stride + t] == ref_host[l * stride + t];
          }
          same = absl::StrCat(exact, " / ", static_cast<long long>(n) * L,
                              exact == static_cast<long long>(n) * L ? "" : " MISMATCH");
        }
        std::printf("%.3f | %.2f | %s | %s | %s |\n", best, static_cast<double>(n) * L / best / 1e6,
                    single_wall > 0 ? absl::StrFormat("**%.2fx**", single_wall / best).c_str() : "-", same.c_str(),
                    cpu.c_str());
        std::fflush(stdout);
      }
      if (kind == MccScore::kLssR && L == cfg.step_clock_latents) {
        steps.push_back(StepClockRow(stream, *set, device->view(), c, static_cast<float*>((*trial)->data()), stride));
        std::printf("(step clock, %d latents: %s)\n", L, steps.back().c_str());  // also in the table at the end
        std::fflush(stdout);
      }
    }
  }
  if (!steps.empty()) {
    std::printf("\nWhere an LSS-R comparison's time goes (%d latents, LssMultiOptions::stage_cycles: clock64() "
                "cycles per step summed over every warp's comparisons; the clock slows the pass):\n\n| variant |",
                static_cast<int>(cfg.step_clock_latents));
    for (const char* name : cuda::kLssStageNames) std::printf(" %s |", name);
    std::printf(" cycles per comparison |\n|---|");
    for (int i = 0; i <= cuda::kLssStageCount; ++i) std::printf("---:|");
    std::printf("\n");
    for (const std::string& row : steps) std::printf("%s\n", row.c_str());
  }
  return 0;
}
#else
int Run(const Config&) {
  std::printf("fingerprint_multi_latent_bench: built without CUDA; nothing to measure\n");
  return 0;
}
#endif  // TESSERA_WITH_CUDA

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) {
  using tessera::bench::FlagValue;
  tessera::fingerprint::Config cfg;
  for (int i = 1; i < argc; ++i) {
    bool ok = true;
    if (const char* v = FlagValue(argv[i], "--templates")) {
      ok = absl::SimpleAtoi(v, &cfg.templates) && cfg.templates >= 1 && cfg.templates < (int64_t{1} << 31) - 2;
    } else if (const char* v = FlagValue(argv[i], "--latents")) {
      ok = tessera::bench::ParseIntList(v, 1, 1024, &cfg.latents);
    } else if (const char* v = FlagValue(argv[i], "--variants")) {
      cfg.variants = absl::StrSplit(v, ',', absl::SkipEmpty());
    } else if (const char* v = FlagValue(argv[i], "--step_clock_latents")) {
      ok = absl::SimpleAtoi(v, &cfg.step_clock_latents) && cfg.step_clock_latents >= 0;
    } else if (const char* v = FlagValue(argv[i], "--lss_latents")) {
      ok = tessera::bench::ParseIntList(v, 1, 1024, &cfg.lss_latents);
    } else if (const char* v = FlagValue(argv[i], "--repeats")) {
      ok = absl::SimpleAtoi(v, &cfg.repeats) && cfg.repeats >= 1;
    } else if (const char* v = FlagValue(argv[i], "--cpu_check")) {
      ok = absl::SimpleAtoi(v, &cfg.cpu_check) && cfg.cpu_check >= 0;
    } else if (const char* v = FlagValue(argv[i], "--kinds")) {
      cfg.kinds.clear();
      for (absl::string_view k : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        if (k == "lssr") {
          cfg.kinds.push_back(tessera::fingerprint::MccScore::kLssR);
        } else if (k == "lss") {
          cfg.kinds.push_back(tessera::fingerprint::MccScore::kLss);
        } else {
          ok = false;
        }
      }
      ok = ok && !cfg.kinds.empty();
    } else if (const char* v = FlagValue(argv[i], "--data")) {
      cfg.data_dir = v;
    } else if (const char* v = FlagValue(argv[i], "--seed")) {
      ok = absl::SimpleAtoi(v, &cfg.seed);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: %s [--templates=N] [--latents=1,4,16,64] [--repeats=R] [--kinds=lssr,lss] [--lss_latents=16] "
                   "[--step_clock_latents=16] [--variants=NAME,...] "
                   "[--cpu_check=T] [--data=DIR] [--seed=S]\n",
                   argv[0]);
      return 2;
    }
  }
  return tessera::fingerprint::Run(cfg);
}
