#include "services/fingerprint/eval/latent_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"
#include "services/fingerprint/eval/cmc_plot.h"
#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void Accumulate(const PipelineStats& s, PipelineStats* total) {
  total->batches += s.batches;
  total->latents += s.latents;
  total->templates = s.templates;  // the same gallery every call
  total->wall_seconds += s.wall_seconds;
  total->setup_seconds += s.setup_seconds;
  total->upload_seconds += s.upload_seconds;
  total->kernel_seconds += s.kernel_seconds;
  total->download_seconds += s.download_seconds;
  total->final_stage_seconds += s.final_stage_seconds;
  total->slot_wait_seconds += s.slot_wait_seconds;
  total->upload_bytes += s.upload_bytes;
  total->download_bytes += s.download_bytes;
}

std::vector<MccTemplate> BuildAll(const std::vector<std::vector<MinutiaPoint>>& pts) {
  std::vector<MccTemplate> out(pts.size());
  ParallelForDynamic(static_cast<int64_t>(pts.size()), 16, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) out[i] = cpu::BuildMccTemplate(pts[i]);
  });
  return out;
}

}  // namespace

std::vector<MinutiaPoint> CropLatent(const std::vector<MinutiaPoint>& points, const LatentCropParams& params,
                                     SplitMix64& rng) {
  if (points.empty()) return {};
  const int n = static_cast<int>(points.size());
  const MinutiaPoint& c = points[rng.UniformInt(0, n - 1)];
  const double cx = c.x + rng.Uniform(-params.centre_jitter, params.centre_jitter);
  const double cy = c.y + rng.Uniform(-params.centre_jitter, params.centre_jitter);
  const int k = std::min(n, rng.UniformInt(params.min_minutiae, params.max_minutiae));
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto d2 = [&](int i) { return (points[i].x - cx) * (points[i].x - cx) + (points[i].y - cy) * (points[i].y - cy); };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return d2(a) < d2(b); });
  order.resize(std::max(0, k));
  std::sort(order.begin(), order.end());  // keep the template's minutia order
  std::vector<MinutiaPoint> out;
  for (int i : order) out.push_back(points[i]);
  return out;
}

absl::StatusOr<LatentEvalResult> EvaluateLatents(const std::vector<MccTemplate>& probes,
                                                 const std::vector<int64_t>& probe_identity,
                                                 const std::vector<int>& probe_source,
                                                 std::shared_ptr<const MccGallery> gallery,
                                                 const std::vector<int64_t>& gallery_identity,
                                                 const LatentEvalOptions& options, BatchMatcher& matcher) {
  if (gallery == nullptr) return absl::InvalidArgumentError("latent evaluation: no gallery");
  if (probe_identity.size() != probes.size() || probe_source.size() != probes.size()) {
    return absl::InvalidArgumentError("latent evaluation: one identity and one source per probe");
  }
  if (gallery_identity.size() != static_cast<size_t>(gallery->num_templates())) {
    return absl::InvalidArgumentError("latent evaluation: one identity per gallery template");
  }
  if (options.max_rank < 1 || options.latents_per_search < 1) {
    return absl::InvalidArgumentError("latent evaluation: max_rank and latents_per_search must be >= 1");
  }
  LatentEvalResult r;
  r.matcher = matcher.name();
  r.probes = static_cast<int>(probes.size());
  r.gallery_templates = gallery->num_templates();
  PipelineOptions po = options.pipeline;
  po.top_k = options.max_rank + 1;  // room for the probe's own source
  TESSERA_ASSIGN_OR_RETURN(auto pipeline, AlfiPipeline::Create(gallery, po));
  const double t0 = Now();
  for (size_t p0 = 0; p0 < probes.size(); p0 += options.latents_per_search) {
    const size_t p1 = std::min(probes.size(), p0 + options.latents_per_search);
    const std::vector<MccTemplate> chunk(probes.begin() + p0, probes.begin() + p1);
    PipelineStats stats;
    TESSERA_ASSIGN_OR_RETURN(auto candidates, pipeline->Search(matcher, chunk, &stats));
    Accumulate(stats, &r.stats);
    for (size_t i = p0; i < p1; ++i) {
      int rank = 0, position = 0;
      for (const Candidate& c : candidates[i - p0]) {
        if (c.template_index == probe_source[i]) continue;
        ++position;
        if (position > options.max_rank) break;
        if (gallery_identity[c.template_index] == probe_identity[i]) {
          rank = position;
          break;
        }
        (gallery_identity[c.template_index] >= kSyntheticIdentityBase ? r.ahead_synthetic : r.ahead_real) += 1;
      }
      r.ranks.push_back(rank);
    }
  }
  r.search_seconds = Now() - t0;
  for (const MccTemplate& p : probes) {
    r.mean_probe_cylinders += p.cylinders.size();
    r.mean_probe_minutiae += p.num_minutiae;
    r.probes_without_cylinders += p.cylinders.empty();
  }
  if (!probes.empty()) {
    r.mean_probe_cylinders /= probes.size();
    r.mean_probe_minutiae /= probes.size();
  }
  int64_t real_nonmates = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    for (int64_t id : gallery_identity) real_nonmates += id < kSyntheticIdentityBase && id != probe_identity[i];
    if (probe_source[i] >= 0 && gallery_identity[probe_source[i]] != probe_identity[i]) --real_nonmates;
  }
  r.real_nonmate_templates = probes.empty() ? 0 : real_nonmates / static_cast<int64_t>(probes.size());
  for (int64_t id : gallery_identity) r.synthetic_templates += id >= kSyntheticIdentityBase;
  r.cmc = ComputeCmc(r.ranks, options.max_rank);
  r.rank1 = r.cmc.empty() ? 0 : r.cmc[0];
  r.rank20 = r.cmc.empty() ? 0 : r.cmc[std::min<int>(20, r.cmc.size()) - 1];
  return r;
}

absl::StatusOr<LatentEvalResult> RunLatentEvaluation(const std::string& data_dir, const LatentEvalOptions& options,
                                                     BatchMatcher& matcher) {
  if (options.crops_per_impression < 1) {
    return absl::InvalidArgumentError("latent evaluation: crops_per_impression must be >= 1");
  }
  if (options.crop.min_minutiae < 1 || options.crop.max_minutiae < options.crop.min_minutiae ||
      options.crop.max_minutiae > kMccMaxMinutiae || !(options.crop.centre_jitter >= 0)) {
    return absl::InvalidArgumentError("latent evaluation: crop sizes must satisfy 1 <= min <= max <= 255");
  }
  if (options.padding < 0) return absl::InvalidArgumentError("latent evaluation: negative padding");
  const double g0 = Now();
  std::vector<BaseTemplate> real;
  for (int db : options.dbs) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<FvcImpression> imps, LoadFvc2002(data_dir, db));
    for (const FvcImpression& imp : imps) real.push_back({ToMinutiaPoints(imp.view), db * 1000 + imp.finger});
  }
  if (real.empty()) return absl::InvalidArgumentError("latent evaluation: no databases");
  // Probes.
  std::vector<std::vector<MinutiaPoint>> probe_points;
  std::vector<int64_t> probe_identity;
  std::vector<int> probe_source;
  for (size_t j = 0; j < real.size(); ++j) {
    for (int c = 0; c < options.crops_per_impression; ++c) {
      SplitMix64 rng(options.seed * 0x9E3779B97F4A7C15ULL + j * 1000003ULL + c);
      rng.Next();
      probe_points.push_back(CropLatent(real[j].points, options.crop, rng));
      probe_identity.push_back(real[j].identity);
      probe_source.push_back(static_cast<int>(j));
    }
  }
  // Gallery: the real impressions, then the synthetic non-mates.
  std::vector<std::vector<MinutiaPoint>> real_points;
  for (const BaseTemplate& b : real) real_points.push_back(b.points);
  auto gallery = std::make_shared<MccGallery>();
  std::vector<int64_t> identity;
  for (const MccTemplate& t : BuildAll(real_points)) gallery->Append(t);
  for (const BaseTemplate& b : real) identity.push_back(b.identity);
  SyntheticGalleryOptions so;
  so.seed = options.seed;
  so.size = options.padding;
  so.mated_templates = 0;
  TESSERA_ASSIGN_OR_RETURN(SyntheticGallery synthetic, SyntheticGallery::Create(real, so));
  TESSERA_RETURN_IF_ERROR(synthetic.AppendTo(Stream::Cpu(), 0, options.padding, gallery.get(), &identity));
  const std::vector<MccTemplate> probes = BuildAll(probe_points);
  const double gallery_seconds = Now() - g0;
  TESSERA_ASSIGN_OR_RETURN(LatentEvalResult r, EvaluateLatents(probes, probe_identity, probe_source, gallery,
                                                               identity, options, matcher));
  r.real_templates = static_cast<int>(real.size());
  r.gallery_seconds = gallery_seconds;
  return r;
}

}  // namespace fingerprint
}  // namespace tessera
