// The ALFI search pipeline (services/fingerprint/search/alfi_pipeline.h) on a large
// synthetic gallery: LSS-R matches per second through the pipeline vs the
// plain whole-gallery GPU path vs all CPU cores, search latency per latent,
// the measured overlap (pipelined wall time vs the serialized run's), and
// DMC through the same pipeline on the GPU and the CPU.
//
//   fingerprint_pipeline_bench [--sizes=10000,100000,1000000] [--latents=16]
//       [--batch=65536] [--top=100] [--cpu_templates=20000] [--dmc_templates=100000]
//       [--cpu_dmc_templates=2000] [--no_dmc] [--cascade_candidates=200] [--no_cascade]
//       [--kernels_only] [--repeats=2] [--seed=S] [--data=DIR]
//
// Gallery (services/fingerprint/eval/synthetic_gallery.h): 4 perturbed
// impressions of each real FVC2002 impression (rigid motion, Gaussian-bump
// distortion, jitter, drops, spurious minutiae; the mates), the rest
// impressions of synthetic (mirrored chimera) identities; descriptors on the
// GPU when there is one. Latents: crops of 12-30 minutiae of real impressions
// (latent_eval.h), and for comparison with fingerprint_gpu_bench the whole
// impressions ("full"). Sizes are built incrementally (the gallery of the
// largest size holds the smaller ones as prefixes).
//
// Rows (matches/s = templates x latents / wall time):
//   pipeline GPU     all latents in one Search: each batch uploaded once and
//                    scored for every latent (the default LSS-R kernel,
//                    LssCudaKernel::kWarpMma); ms/latent = wall / latents;
//   pipeline GPU blk the same with the block-per-comparison kernel
//                    (LssCudaKernel::kBlock), top-k checked against the above;
//   serialized GPU   the same with overlap off (one batch in flight, final
//                    stage inline): the sum of the stages; "overlap" is its
//                    wall over the pipelined wall;
//   resident GPU     the pipeline with the gallery kept on the GPU
//                    (PipelineOptions::resident: no uploads), default and
//                    block kernels; "resident 1-by-1": one latent per call;
//   pipeline 1-by-1  one latent per Search call: latency of a lone query
//                    (the whole gallery streamed per latent);
//   plain GPU        MccDeviceGallery resident on the GPU (uploaded once,
//                    time shown separately), ScoreGallery per latent + top-k
//                    on the host;
//   CPU all cores    the pipeline's CPU backend on the first cpu_templates;
//   DMC ...          DMC over every template through the pipeline (GPU on the
//                    first dmc_templates, 0: none; CPU on cpu_dmc_templates);
//   searcher lssr GPU / cascade GPU   the service's searcher (searcher.h) on
//                    the whole gallery (ids appended with their descriptors,
//                    as a snapshot reload does; its GPU pipeline built by a
//                    warm-up call): "lssr" with top_k = the shortlist length
//                    (the cascade's first stage alone), then "cascade" (LSS-R
//                    shortlist of max(top, cascade_candidates), DMC + fusion
//                    on it) with top_k = top. Where DMC over everything ran
//                    on the same gallery: mate at rank 1 under each, top-1
//                    agreement, and the throughput ratio;
//   ... CPU          the same on the CPU prefix (cpu_templates).
// Without a GPU only the CPU rows run.
// --kernels_only (GPU): instead of all the above, one markdown table per size
// of the CUDA LSS-R kernel variants side by side (LssCudaKernel kBlock, the
// old default and the reference; kWarpMma, tensor-core bit counts with warp
// scratch sized by the batch's 90th-percentile template, the default),
// gallery streamed and resident, crops and whole impressions: best wall of
// --repeats searches of all latents, M matches/s, the ratio to kBlock, top-k
// lists identical to kBlock's, mate at rank 1 (issue 16). A line before the
// table gives the template-size percentiles that size warp-mma's scratch.
#include <algorithm>
#include <chrono>
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
#include "bench/searcher_fill.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/parallel.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/alfi_dmc_matcher.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/search/fusion_score.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/eval/latent_eval.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/eval/synthetic_gallery.h"

namespace tessera {
namespace fingerprint {
namespace {

using bench::NowSeconds;

struct Config {
  std::vector<int64_t> sizes;
  int latents = 16;
  int batch = 65536;
  int top = 100;
  int64_t cpu_templates = 20000;
  int64_t dmc_templates = 100000;
  int64_t cpu_dmc_templates = 2000;
  bool dmc = true;
  bool cascade = true;
  int cascade_candidates = kDefaultCascadeCandidates;
  bool kernels_only = false;  // only the CUDA LSS-R kernel comparison (KernelComparisonRows)
  int repeats = 2;            // kernel comparison: best wall of this many searches
  uint64_t seed = 20261130;
  std::string data_dir;
};

void Header() {
  std::printf("%-9s %-17s %-5s %7s %8s %9s %10s %8s  %s\n", "templates", "path", "probe", "latents", "wall s",
              "M match/s", "ms/latent", "overlap", "stage sums (s): upload / kernels / download / final; slot wait");
}

void Row(int64_t templates, const char* path, const char* probe, int latents, double wall, double overlap,
         const PipelineStats* s) {
  std::printf("%-9lld %-17s %-5s %7d %8.3f %9.2f %10.2f ", static_cast<long long>(templates), path, probe, latents,
              wall, templates * static_cast<double>(latents) / wall / 1e6, 1e3 * wall / latents);
  if (overlap > 0) {
    std::printf("%8.2f  ", overlap);
  } else {
    std::printf("%8s  ", "-");
  }
  if (s != nullptr) {
    std::printf("%.3f / %.3f / %.3f / %.3f; %.3f", s->upload_seconds, s->kernel_seconds, s->download_seconds,
                s->final_stage_seconds, s->slot_wait_seconds);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// First mate's rank among the top-k (0: not there).
int MateRank(const std::vector<Candidate>& top, const std::vector<int64_t>& identity, int64_t probe_identity) {
  for (size_t r = 0; r < top.size(); ++r) {
    if (identity[top[r].template_index] == probe_identity) return static_cast<int>(r) + 1;
  }
  return 0;
}

// Copies the first n templates (the CPU rows use a prefix).
std::shared_ptr<MccGallery> Prefix(const MccGallery& g, int64_t n) {
  auto out = std::make_shared<MccGallery>();
  n = std::min<int64_t>(n, g.num_templates());
  const size_t c = g.start[n];
  out->start.assign(g.start.begin(), g.start.begin() + n + 1);
  out->bits.assign(g.bits.begin(), g.bits.begin() + c * kMccBitWords);
  out->mask.assign(g.mask.begin(), g.mask.begin() + c * kMccMaskWords);
  out->x.assign(g.x.begin(), g.x.begin() + c);
  out->y.assign(g.y.begin(), g.y.begin() + c);
  out->theta.assign(g.theta.begin(), g.theta.begin() + c);
  out->bit_count.assign(g.bit_count.begin(), g.bit_count.begin() + c);
  out->full_mask.assign(g.full_mask.begin(), g.full_mask.begin() + c);
  return out;
}

// Gallery index of a searcher id (AppendToSearcher's ids).
int IndexOf(const SearchCandidate& c) {
  int i = -1;
  return absl::SimpleAtoi(c.id, &i) ? i : -1;
}

// One searcher's rows: "lssr" with top_k = the cascade's shortlist (its first
// stage alone) and "cascade" with top_k = top; then, when `dmc_top` holds
// DMC over every template of this gallery (one list per latent), accuracy
// and agreement against it. Returns false on an error (printed).
bool CascadeRows(GallerySearcher& searcher, int64_t templates, const char* where,
                 const std::vector<std::vector<MinutiaPoint>>& probes, const std::vector<int64_t>& identity,
                 const std::vector<int64_t>& latent_identity, const Config& cfg,
                 const std::vector<std::vector<Candidate>>* dmc_top, double dmc_wall) {
  const int latents = static_cast<int>(probes.size());
  const int shortlist = std::max(cfg.top, cfg.cascade_candidates);
  const std::string lssr_path = absl::StrCat("searcher lssr ", where);
  const std::string cascade_path = absl::StrCat("cascade ", where);
  // Warm-up: the searcher's GPU pipeline is built by its first search.
  const double w0 = NowSeconds();
  if (auto s = searcher.Search({probes[0]}, 1, nullptr, "lssr"); !s.ok()) {
    std::fprintf(stderr, "searcher: %s\n", std::string(s.status().message()).c_str());
    return false;
  }
  const double warm = NowSeconds() - w0;
  SearchStats lssr_stats, cascade_stats;
  const double l0 = NowSeconds();
  auto lssr = searcher.Search(probes, shortlist, &lssr_stats, "lssr");
  const double lssr_wall = NowSeconds() - l0;
  SearchOptions options;
  options.top_k = cfg.top;
  options.matcher = "cascade";
  options.cascade_candidates = cfg.cascade_candidates;
  const double c0 = NowSeconds();
  auto cascade = searcher.Search(probes, options, &cascade_stats);
  const double cascade_wall = NowSeconds() - c0;
  if (!lssr.ok() || !cascade.ok()) {
    std::fprintf(stderr, "searcher: %s\n",
                 std::string((lssr.ok() ? cascade.status() : lssr.status()).message()).c_str());
    return false;
  }
  Row(templates, lssr_path.c_str(), "crop", latents, lssr_wall, 0, nullptr);
  Row(templates, cascade_path.c_str(), "crop", latents, cascade_wall, 0, nullptr);
  int cascade_rank1 = 0, lssr_rank1 = 0;
  for (int i = 0; i < latents; ++i) {
    const auto& c = (*cascade)[i];
    const auto& l = (*lssr)[i];
    cascade_rank1 += !c.empty() && IndexOf(c[0]) >= 0 && identity[IndexOf(c[0])] == latent_identity[i];
    lssr_rank1 += !l.empty() && IndexOf(l[0]) >= 0 && identity[IndexOf(l[0])] == latent_identity[i];
  }
  std::printf("%-9s cascade_candidates %d (shortlist %d per latent, top %d returned), backend %s; warm-up call "
              "(builds the searcher's pipeline) %.2f s; cascade wall / LSS-R-stage wall %.2f; mate at rank 1: "
              "LSS-R %d, cascade %d of %d\n",
              "", cfg.cascade_candidates, shortlist, cfg.top, cascade_stats.backend.c_str(), warm,
              cascade_wall / lssr_wall, lssr_rank1, cascade_rank1, latents);
  if (dmc_top == nullptr) return true;
  int dmc_rank1 = 0, same_template = 0, same_identity = 0, dmc_best_in_shortlist = 0;
  for (int i = 0; i < latents; ++i) {
    const std::vector<Candidate>& d = (*dmc_top)[i];
    const auto& c = (*cascade)[i];
    if (d.empty() || c.empty()) continue;
    dmc_rank1 += identity[d[0].template_index] == latent_identity[i];
    same_template += IndexOf(c[0]) == d[0].template_index;
    same_identity += IndexOf(c[0]) >= 0 && identity[IndexOf(c[0])] == identity[d[0].template_index];
    for (const SearchCandidate& l : (*lssr)[i]) dmc_best_in_shortlist += IndexOf(l) == d[0].template_index;
  }
  std::printf("\n| %lld templates, %d latents (%s) | DMC over every template | cascade (%d candidates) |\n"
              "|---|---:|---:|\n"
              "| wall s | %.3f | %.3f |\n"
              "| gallery matches/s (M) | %.2f | %.2f |\n"
              "| mate at rank 1 | %d / %d | %d / %d |\n\n"
              "cascade / DMC throughput: **%.1fx**; top-1 agreement: same template %d / %d, same identity %d / %d; "
              "DMC's rank-1 template in the LSS-R shortlist: %d / %d\n",
              static_cast<long long>(templates), latents, where, shortlist, dmc_wall, cascade_wall,
              templates * static_cast<double>(latents) / dmc_wall / 1e6,
              templates * static_cast<double>(latents) / cascade_wall / 1e6, dmc_rank1, latents, cascade_rank1,
              latents, dmc_wall / cascade_wall, same_template, latents, same_identity, latents,
              dmc_best_in_shortlist, latents);
  std::fflush(stdout);
  return true;
}

// An empty searcher ("cascade" by default) on `device` ("cuda" or "cpu").
std::unique_ptr<GallerySearcher> MakeSearcher(const char* device, const Config& cfg) {
  SearcherOptions o;
  o.matcher = "cascade";
  o.device = device;
  o.cascade_candidates = cfg.cascade_candidates;
  auto s = CreateSearcher(o);
  if (!s.ok()) {
    std::fprintf(stderr, "searcher: %s\n", std::string(s.status().message()).c_str());
    return nullptr;
  }
  return std::move(*s);
}

// --kernels_only: the CUDA LSS-R kernel variants side by side on one gallery
// (see the file comment). A variant that fails prints its error in its row;
// the others still run. Returns false when the pipelines cannot be built.
bool KernelComparisonRows(const std::shared_ptr<MccGallery>& gallery, int64_t size, const std::vector<MccTemplate>& crops,
                          const std::vector<MccTemplate>& fulls, const std::vector<int64_t>& identity,
                          const std::vector<int64_t>& latent_identity, const Config& cfg) {
  PipelineOptions po;
  po.backend = Backend::kCuda;
  po.batch_templates = cfg.batch;
  po.top_k = cfg.top;
  PipelineOptions ro = po;
  ro.resident = true;
  const double p0 = NowSeconds();
  auto streamed = AlfiPipeline::Create(gallery, po);
  auto resident = AlfiPipeline::Create(gallery, ro);
  if (!streamed.ok() || !resident.ok()) {
    std::fprintf(stderr, "pipeline: %s\n",
                 std::string((streamed.ok() ? resident.status() : streamed.status()).message()).c_str());
    return false;
  }
  std::printf("pipelines (streamed: pinned copy; resident: pinned copy + upload) set up in %.2f s\n\n", NowSeconds() - p0);
  {
    std::vector<int> sizes(gallery->num_templates());
    for (int t = 0; t < gallery->num_templates(); ++t) sizes[t] = gallery->start[t + 1] - gallery->start[t];
    std::sort(sizes.begin(), sizes.end());
    auto at = [&](double q) { return sizes.empty() ? 0 : sizes[std::min(sizes.size() - 1, static_cast<size_t>(q * sizes.size()))]; };
    std::printf("template sizes (cylinders): P50 %d, P90 %d, P95 %d, P99 %d, max %d; warp-mma sizes each "
                "batch's warp scratch for its P%.0f (LssScratchTemplateSize), the larger templates in a second "
                "launch\n\n",
                at(0.5), at(0.9), at(0.95), at(0.99), sizes.empty() ? 0 : sizes.back(), 100 * kLssScratchQuantile);
  }
  std::printf("| templates | latents | path | kernel | wall s (best of %d) | M matches/s | vs block | "
              "top-%d lists = block's | mate rank 1 |\n|---:|---|---|---|---:|---:|---:|---:|---:|\n",
              cfg.repeats, cfg.top);
  struct Case {
    const char* path;
    AlfiPipeline* pipeline;
    const std::vector<MccTemplate>* latents;
    const char* probe;
  };
  const Case cases[] = {{"streamed", streamed->get(), &crops, "crop"},
                        {"resident", resident->get(), &crops, "crop"},
                        {"resident", resident->get(), &fulls, "full"}};
  const cuda::LssCudaKernel kernels[] = {cuda::LssCudaKernel::kBlock, cuda::LssCudaKernel::kWarpMma};
  for (const Case& c : cases) {
    const std::vector<MccTemplate>& lat = *c.latents;
    const int n = static_cast<int>(lat.size());
    std::vector<std::vector<Candidate>> reference;
    double reference_wall = 0;
    for (cuda::LssCudaKernel k : kernels) {
      LssBatchMatcher matcher(MccScore::kLssR, LssParams(), MccParams(), k);
      std::printf("| %lld | %d %s | %s | %s | ", static_cast<long long>(size), n, c.probe, c.path,
                  cuda::LssCudaKernelName(k));
      auto warm = c.pipeline->Search(matcher, {lat[0]});  // module load, first allocations
      if (!warm.ok()) {
        std::printf("error: %s | | | | |\n", std::string(warm.status().message()).c_str());
        std::fflush(stdout);
        continue;
      }
      double best = 1e30;
      absl::StatusOr<std::vector<std::vector<Candidate>>> top;
      for (int r = 0; r < cfg.repeats; ++r) {
        const double t0 = NowSeconds();
        top = c.pipeline->Search(matcher, lat);
        best = std::min(best, NowSeconds() - t0);
        if (!top.ok()) break;
      }
      if (!top.ok()) {
        std::printf("error: %s | | | | |\n", std::string(top.status().message()).c_str());
        std::fflush(stdout);
        continue;
      }
      if (k == cuda::LssCudaKernel::kBlock) {
        reference = *top;
        reference_wall = best;
      }
      int same = 0, rank1 = 0;
      for (int i = 0; i < n; ++i) {
        same += i < static_cast<int>(reference.size()) && (*top)[i] == reference[i];
        rank1 += MateRank((*top)[i], identity, latent_identity[i]) == 1;
      }
      std::printf("%.3f | %.2f | %s | %s | %d / %d |\n", best, size * static_cast<double>(n) / best / 1e6,
                  reference_wall > 0 ? absl::StrFormat("**%.2fx**", reference_wall / best).c_str() : "-",
                  reference.empty() ? "-" : absl::StrCat(same, " / ", n, same == n ? "" : " MISMATCH").c_str(), rank1,
                  n);
      std::fflush(stdout);
    }
  }
  std::printf("\n");
  return true;
}

int Run(const Config& cfg) {
  const DeviceRegistry& devices = DeviceRegistry::Get();
  const bool gpu = devices.cuda_available();
  std::printf("fingerprint_pipeline_bench on %s, %d CPU threads\n", devices.Describe().c_str(), CpuThreads());
  if (cfg.kernels_only && !gpu) {
    std::printf("--kernels_only compares CUDA kernels and there is no GPU (%s): nothing to measure\n",
                devices.cuda_unavailable_reason().c_str());
    return 0;
  }
  // Real bases (or random ones without the data).
  const std::vector<BaseTemplate> bases = LoadBenchBases(cfg.data_dir, cfg.seed);
  // Latents: crops and whole impressions of bases spread over the set.
  std::vector<MccTemplate> crops, fulls;
  std::vector<std::vector<MinutiaPoint>> crop_points;  // the searcher's probes
  std::vector<int64_t> latent_identity;
  for (int i = 0; i < cfg.latents; ++i) {
    const BaseTemplate& b = bases[(static_cast<size_t>(i) * 37 + 3) % bases.size()];
    SplitMix64 rng(cfg.seed + 7919 * i);
    crop_points.push_back(CropLatent(b.points, LatentCropParams(), rng));
    crops.push_back(cpu::BuildMccTemplate(crop_points.back()));
    fulls.push_back(cpu::BuildMccTemplate(b.points));
    latent_identity.push_back(b.identity);
  }
  double crop_cyl = 0;
  for (const auto& c : crops) crop_cyl += c.cylinders.size();
  std::printf("latents: %d crops of 12-30 minutiae (%.1f valid cylinders on average) and the same %d whole "
              "impressions\n",
              cfg.latents, crop_cyl / cfg.latents, cfg.latents);

  const int64_t largest = *std::max_element(cfg.sizes.begin(), cfg.sizes.end());
  const SyntheticGalleryOptions so = BenchGalleryOptions(largest, cfg.seed, bases.size());
  auto synthetic = SyntheticGallery::Create(bases, so);
  if (!synthetic.ok()) {
    std::fprintf(stderr, "%s\n", std::string(synthetic.status().message()).c_str());
    return 1;
  }
  Stream cpu_stream = Stream::Cpu();
  std::unique_ptr<Stream> gpu_stream;
  if (gpu) {
    auto s = Stream::Create(Backend::kCuda);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.status().message()).c_str());
      return 1;
    }
    gpu_stream = std::make_unique<Stream>(std::move(*s));
  }
  const Stream& build_stream = gpu ? *gpu_stream : cpu_stream;
  auto gallery = std::make_shared<MccGallery>();
  std::vector<int64_t> identity;
  std::vector<int64_t> sizes = cfg.sizes;
  std::sort(sizes.begin(), sizes.end());
  LssBatchMatcher lssr(MccScore::kLssR);  // the default kernel (warp-mma)
  LssBatchMatcher lssr_block(MccScore::kLssR, LssParams(), MccParams(), cuda::LssCudaKernel::kBlock);
  const LssConstants constants = MakeLssConstants(LssParams());
  // The service's GPU searcher, grown with the gallery.
  std::unique_ptr<GallerySearcher> gpu_searcher;
  if (gpu && cfg.cascade) {
    gpu_searcher = MakeSearcher("cuda", cfg);
    if (gpu_searcher == nullptr) return 1;
  }

  for (int64_t size : sizes) {
    const double g0 = NowSeconds();
    if (auto s = synthetic->AppendTo(build_stream, gallery->num_templates(), size, gallery.get(), &identity);
        !s.ok()) {
      std::fprintf(stderr, "gallery: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("\n== gallery of %lld templates (%d mated impressions of the real fingers), %d cylinders "
                "(%.1f per template), %.2f GB; generated + descriptors (%s) in %.1f s ==\n",
                static_cast<long long>(size), static_cast<int>(std::min(size, so.mated_templates)), gallery->num_cylinders(),
                static_cast<double>(gallery->num_cylinders()) / size, gallery->bytes() / 1e9,
                gpu ? "GPU" : "CPU", NowSeconds() - g0);
    if (gpu && cfg.kernels_only) {
      if (!KernelComparisonRows(gallery, size, crops, fulls, identity, latent_identity, cfg)) return 1;
      continue;
    }
    Header();
    if (gpu) {
      PipelineOptions po;
      po.backend = Backend::kCuda;
      po.batch_templates = cfg.batch;
      po.top_k = cfg.top;
      const double p0 = NowSeconds();
      auto pipeline = AlfiPipeline::Create(gallery, po);
      if (!pipeline.ok()) {
        std::fprintf(stderr, "pipeline: %s\n", std::string(pipeline.status().message()).c_str());
        return 1;
      }
      std::printf("pipeline set-up (pinned copy %.2f GB, 2 device slots %.2f GB): %.2f s; %d batches of %d\n",
                  (*pipeline)->host_bytes() / 1e9, (*pipeline)->device_bytes() / 1e9, NowSeconds() - p0,
                  (*pipeline)->num_batches(), cfg.batch);
      PipelineOptions resident_options = po;
      resident_options.resident = true;
      const double r0 = NowSeconds();
      auto resident = AlfiPipeline::Create(gallery, resident_options);
      if (!resident.ok()) {
        std::fprintf(stderr, "pipeline (resident): %s\n", std::string(resident.status().message()).c_str());
        return 1;
      }
      std::printf("resident pipeline set-up (pinned copy + one upload of %.2f GB): %.2f s\n",
                  (*resident)->device_bytes() / 1e9, NowSeconds() - r0);
      PipelineOptions serial_options = po;
      serial_options.overlap = false;
      auto serial = AlfiPipeline::Create(gallery, serial_options);
      if (!serial.ok()) {
        std::fprintf(stderr, "pipeline: %s\n", std::string(serial.status().message()).c_str());
        return 1;
      }
      // Plain resident path (also the parity reference).
      const double u0 = NowSeconds();
      auto device = MccDeviceGallery::Upload(*gallery, *gpu_stream);
      if (!device.ok()) {
        std::fprintf(stderr, "upload: %s\n", std::string(device.status().message()).c_str());
        return 1;
      }
      const double upload_s = NowSeconds() - u0;
      for (int which = 0; which < 2; ++which) {
        const std::vector<MccTemplate>& lat = which == 0 ? crops : fulls;
        const char* probe = which == 0 ? "crop" : "full";
        // Warm-up (module load, first allocations).
        (void)(*pipeline)->Search(lssr, {lat[0]});
        PipelineStats st, serial_st;
        const double t0 = NowSeconds();
        auto top = (*pipeline)->Search(lssr, lat, &st);
        const double wall = NowSeconds() - t0;
        if (!top.ok()) {
          std::fprintf(stderr, "pipeline: %s\n", std::string(top.status().message()).c_str());
          return 1;
        }
        const double s0 = NowSeconds();
        auto serial_top = (*serial)->Search(lssr, lat, &serial_st);
        const double serial_wall = NowSeconds() - s0;
        if (!serial_top.ok()) return 1;
        Row(size, "pipeline GPU", probe, cfg.latents, wall, serial_wall / wall, &st);
        Row(size, "serialized GPU", probe, cfg.latents, serial_wall, 0, &serial_st);
        std::printf("%-9s overlap ratio (stage sum / wall) pipelined %.2f, serialized %.2f; %.0f MB uploaded\n", "",
                    st.overlap_ratio(), serial_st.overlap_ratio(), st.upload_bytes / 1e6);
        // The block-per-comparison kernel through the same pipeline.
        (void)(*pipeline)->Search(lssr_block, {lat[0]});
        PipelineStats block_st;
        const double w0 = NowSeconds();
        auto block_top = (*pipeline)->Search(lssr_block, lat, &block_st);
        const double block_wall = NowSeconds() - w0;
        if (!block_top.ok()) {
          std::fprintf(stderr, "pipeline (block kernel): %s\n", std::string(block_top.status().message()).c_str());
          return 1;
        }
        Row(size, "pipeline GPU blk", probe, cfg.latents, block_wall, 0, &block_st);
        int block_same = 0;
        for (size_t i = 0; i < lat.size(); ++i) block_same += (*block_top)[i] == (*top)[i];
        std::printf("%-9s block-kernel top-%d lists identical to the default (warp-mma) kernel's: %d of %d\n", "",
                    cfg.top, block_same, cfg.latents);
        // Resident gallery: no uploads; kernels, downloads and final stage
        // still overlap.
        (void)(*resident)->Search(lssr, {lat[0]});
        for (LssBatchMatcher* m : {&lssr, &lssr_block}) {
          PipelineStats res_st;
          const double r1 = NowSeconds();
          auto res_top = (*resident)->Search(*m, lat, &res_st);
          const double res_wall = NowSeconds() - r1;
          if (!res_top.ok()) {
            std::fprintf(stderr, "pipeline (resident): %s\n", std::string(res_top.status().message()).c_str());
            return 1;
          }
          Row(size, m == &lssr ? "resident GPU" : "resident GPU blk", probe, cfg.latents, res_wall, 0, &res_st);
          int res_same = 0;
          for (size_t i = 0; i < lat.size(); ++i) res_same += (*res_top)[i] == (*top)[i];
          if (res_same != cfg.latents) std::printf("%-9s MISMATCH: %d of %d top lists equal\n", "", res_same, cfg.latents);
        }
        double resident_one = 0;
        for (const MccTemplate& l : lat) {
          const double o0 = NowSeconds();
          if (!(*resident)->Search(lssr, {l}).ok()) return 1;
          resident_one += NowSeconds() - o0;
        }
        Row(size, "resident 1-by-1", probe, cfg.latents, resident_one, 0, nullptr);
        // One latent per call.
        double one_by_one = 0;
        for (const MccTemplate& l : lat) {
          const double o0 = NowSeconds();
          if (!(*pipeline)->Search(lssr, {l}).ok()) return 1;
          one_by_one += NowSeconds() - o0;
        }
        Row(size, "pipeline 1-by-1", probe, cfg.latents, one_by_one, 0, nullptr);
        // Plain GPU: resident gallery, one ScoreGallery per latent + top-k.
        std::vector<float> scores(size);
        int same = 0, rank1 = 0;
        const double q0 = NowSeconds();
        std::vector<std::vector<Candidate>> plain;
        for (size_t i = 0; i < lat.size(); ++i) {
          if (auto s = ScoreGallery(*gpu_stream, PrepareProbe(lat[i]), *device, MccScore::kLssR, constants,
                                    scores.data());
              !s.ok()) {
            std::fprintf(stderr, "plain: %s\n", std::string(s.message()).c_str());
            return 1;
          }
          plain.push_back(TopK(scores.data(), static_cast<int>(size), cfg.top));
        }
        const double plain_wall = NowSeconds() - q0;
        for (size_t i = 0; i < lat.size(); ++i) {
          same += plain[i] == (*top)[i];
          rank1 += MateRank((*top)[i], identity, latent_identity[i]) == 1;
        }
        Row(size, "plain GPU", probe, cfg.latents, plain_wall, 0, nullptr);
        std::printf("%-9s plain GPU gallery upload %.2f s (once); top-%d lists identical to the pipeline's: %d of %d; "
                    "mate at rank 1: %d of %d\n",
                    "", upload_s, cfg.top, same, cfg.latents, rank1, cfg.latents);
      }
    }
    // CPU, all cores, on a prefix (the rate does not depend on the size).
    const int64_t cpu_n = std::min<int64_t>(size, cfg.cpu_templates);
    auto prefix = cpu_n == size ? gallery : Prefix(*gallery, cpu_n);
    for (int which = 0; which < 2; ++which) {
      const std::vector<MccTemplate>& lat = which == 0 ? crops : fulls;
      PipelineOptions po;
      po.batch_templates = std::max<int>(1, static_cast<int>(cpu_n / 8));
      po.top_k = cfg.top;
      auto p = AlfiPipeline::Create(prefix, po);
      if (!p.ok()) return 1;
      PipelineStats st;
      const double t0 = NowSeconds();
      if (!(*p)->Search(lssr, lat, &st).ok()) return 1;
      Row(cpu_n, "CPU all cores", which == 0 ? "crop" : "full", cfg.latents, NowSeconds() - t0, st.overlap_ratio(), &st);
    }
    // DMC through the pipeline; its top lists where it covered this gallery
    // (GPU) or the CPU prefix (CPU), for the cascade's agreement.
    std::vector<std::vector<Candidate>> dmc_gpu_top, dmc_cpu_top;
    double dmc_gpu_wall = 0, dmc_cpu_wall = 0;
    int64_t dmc_cpu_n = 0;
    if (cfg.dmc) {
      auto dmc = DmcBatchMatcher::Create();
      if (!dmc.ok()) {
        std::fprintf(stderr, "%s\n", std::string(dmc.status().message()).c_str());
        return 1;
      }
      if (gpu && cfg.dmc_templates > 0) {
        const int64_t n = std::min<int64_t>(size, cfg.dmc_templates);
        auto sub = n == size ? gallery : Prefix(*gallery, n);
        for (bool overlap : {true, false}) {
          PipelineOptions po;
          po.backend = Backend::kCuda;
          po.batch_templates = std::min(cfg.batch, 16384);  // DMC outputs are ~43 B per cylinder and latent
          po.top_k = cfg.top;
          po.overlap = overlap;
          auto p = AlfiPipeline::Create(sub, po);
          if (!p.ok()) return 1;
          (void)(*p)->Search(**dmc, {crops[0]});  // warm-up
          PipelineStats st;
          const double t0 = NowSeconds();
          auto top = (*p)->Search(**dmc, crops, &st);
          if (!top.ok()) {
            std::fprintf(stderr, "DMC: %s\n", std::string(top.status().message()).c_str());
            return 1;
          }
          const double wall = NowSeconds() - t0;
          Row(n, overlap ? "DMC pipeline GPU" : "DMC serialized", "crop", cfg.latents, wall,
              overlap ? st.overlap_ratio() : 0, &st);
          if (overlap && n == size) {
            dmc_gpu_top = std::move(*top);
            dmc_gpu_wall = wall;
          }
        }
      }
      const int64_t n = std::min<int64_t>(size, cfg.cpu_dmc_templates);
      auto sub = n == size ? gallery : Prefix(*gallery, n);
      PipelineOptions po;
      po.batch_templates = std::max<int>(1, static_cast<int>(n / 8));
      po.top_k = cfg.top;
      auto p = AlfiPipeline::Create(sub, po);
      if (!p.ok()) return 1;
      PipelineStats st;
      const double t0 = NowSeconds();
      auto top = (*p)->Search(**dmc, crops, &st);
      if (!top.ok()) return 1;
      dmc_cpu_wall = NowSeconds() - t0;
      Row(n, "DMC CPU all cores", "crop", cfg.latents, dmc_cpu_wall, st.overlap_ratio(), &st);
      dmc_cpu_top = std::move(*top);
      dmc_cpu_n = n;
    }
    // The cascade through the service's searcher.
    if (cfg.cascade) {
      if (gpu_searcher != nullptr) {
        const double a0 = NowSeconds();
        if (!AppendToSearcher(*gallery, gpu_searcher->size(), size, gpu_searcher.get())) return 1;
        std::printf("%-9s searcher: templates appended with their descriptors in %.2f s\n", "", NowSeconds() - a0);
        if (!CascadeRows(*gpu_searcher, size, "GPU", crop_points, identity, latent_identity, cfg,
                         dmc_gpu_top.empty() ? nullptr : &dmc_gpu_top, dmc_gpu_wall)) {
          return 1;
        }
      }
      auto cpu_searcher = MakeSearcher("cpu", cfg);
      if (cpu_searcher == nullptr || !AppendToSearcher(*gallery, 0, cpu_n, cpu_searcher.get())) return 1;
      const bool same_prefix = dmc_cpu_n == cpu_n && !dmc_cpu_top.empty();
      if (!CascadeRows(*cpu_searcher, cpu_n, "CPU", crop_points, identity, latent_identity, cfg,
                       same_prefix ? &dmc_cpu_top : nullptr, dmc_cpu_wall)) {
        return 1;
      }
    }
  }
  std::printf("\n(overlap: for LSS-R GPU rows the serialized wall over the pipelined wall; for DMC and CPU rows the "
              "stage sum over the wall)\n");
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera::fingerprint;
  Config cfg;
  const bool gpu = tessera::DeviceRegistry::Get().cuda_available();
  cfg.sizes = gpu ? std::vector<int64_t>{10000, 100000, 1000000} : std::vector<int64_t>{2000, 20000};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    int64_t n = 0;
    uint64_t u = 0;
    auto value = [&](const char* name) { return tessera::bench::FlagValue(a, name); };
    bool ok = true;
    if (const char* v = value("--sizes")) {
      ok = tessera::bench::ParseIntList(v, 1, (int64_t{1} << 31) - 3, &cfg.sizes);
    } else if (const char* v = value("--latents")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= 4096;
      cfg.latents = static_cast<int>(n);
    } else if (const char* v = value("--batch")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1;
      cfg.batch = static_cast<int>(n);
    } else if (const char* v = value("--top")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1;
      cfg.top = static_cast<int>(n);
    } else if (const char* v = value("--cpu_templates")) {
      ok = absl::SimpleAtoi(v, &cfg.cpu_templates) && cfg.cpu_templates >= 1;
    } else if (const char* v = value("--dmc_templates")) {
      ok = absl::SimpleAtoi(v, &cfg.dmc_templates) && cfg.dmc_templates >= 0;
    } else if (const char* v = value("--cpu_dmc_templates")) {
      ok = absl::SimpleAtoi(v, &cfg.cpu_dmc_templates) && cfg.cpu_dmc_templates >= 1;
    } else if (std::strcmp(a, "--no_dmc") == 0) {
      cfg.dmc = false;
    } else if (const char* v = value("--cascade_candidates")) {
      ok = absl::SimpleAtoi(v, &n) && ValidateCascadeCandidates(static_cast<int>(n)).ok() && n == static_cast<int>(n);
      cfg.cascade_candidates = static_cast<int>(n);
    } else if (std::strcmp(a, "--no_cascade") == 0) {
      cfg.cascade = false;
    } else if (std::strcmp(a, "--kernels_only") == 0) {
      cfg.kernels_only = true;
    } else if (const char* v = value("--repeats")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= 100;
      cfg.repeats = static_cast<int>(n);
    } else if (const char* v = value("--seed")) {
      ok = absl::SimpleAtoi(v, &u);
      cfg.seed = u;
    } else if (const char* v = value("--data")) {
      cfg.data_dir = v;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: %s [--sizes=N,N,...] [--latents=L] [--batch=B] [--top=K] [--cpu_templates=N]\n"
                   "          [--dmc_templates=N (0: no GPU DMC)] [--cpu_dmc_templates=N] [--no_dmc]\n"
                   "          [--cascade_candidates=N (1-%d)] [--no_cascade] [--kernels_only] [--repeats=R]\n"
                   "          [--seed=S] [--data=DIR]\n",
                   argv[0], kMaxCascadeCandidates);
      return 2;
    }
  }
  return Run(cfg);
}
