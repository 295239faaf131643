#include "services/fingerprint/search/searcher.h"

#include <algorithm>
#include <iterator>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/device.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/status.h"
#include "common/text_checks.h"
#include "kernels/fingerprint/lss.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "kernels/fingerprint/dmc.h"
#include "services/fingerprint/search/dmc_final_stage.h"
#include "services/fingerprint/search/dmc_matcher.h"
#include "services/fingerprint/search/fusion_score.h"
#include "services/fingerprint/search/top_k.h"

namespace tessera {
namespace fingerprint {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Descriptors of many templates on all cores. With `stop`, workers give up
// once it says so (the caller then returns stop->status()): preparing 1024
// DMC probes alone takes about a CPU-second.
std::vector<MccTemplate> BuildAll(const std::vector<const std::vector<MinutiaPoint>*>& inputs, const MccParams& p,
                                  StopPoller* stop = nullptr) {
  std::vector<MccTemplate> out(inputs.size());
  ParallelForDynamic(static_cast<int64_t>(inputs.size()), 4, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      if (stop != nullptr && stop->ShouldStop()) return;
      out[i] = cpu::BuildMccTemplate(*inputs[i], p);
    }
  });
  return out;
}

size_t AlignTo16(size_t bytes) { return (bytes + 15) & ~size_t{15}; }
uint8_t* AlignTo16(uint8_t* p) {
  return p + (AlignTo16(reinterpret_cast<uintptr_t>(p)) - reinterpret_cast<uintptr_t>(p));
}

// `to` = the templates of `from` listed in `templates`, in that order (a
// template may repeat). MccGallery keeps each template's descriptors in
// contiguous blocks, so this is block copies on all cores, bit for bit what
// Append(from.Get(t)) gives.
void GatherTemplates(const MccGallery& from, const std::vector<int>& templates, MccGallery* to) {
  const int n = static_cast<int>(templates.size());
  to->start.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) to->start[i + 1] = to->start[i] + from.template_size(templates[i]);
  const size_t cylinders = static_cast<size_t>(to->start[n]);
  to->bits.resize(cylinders * kMccBitWords);
  to->mask.resize(cylinders * kMccMaskWords);
  to->x.resize(cylinders);
  to->y.resize(cylinders);
  to->theta.resize(cylinders);
  to->bit_count.resize(cylinders);
  to->full_mask.resize(cylinders);
  ParallelForDynamic(n, 16, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const size_t src = from.start[templates[i]], dst = to->start[i];
      const size_t len = from.template_size(templates[i]);
      std::copy_n(from.bits.begin() + src * kMccBitWords, len * kMccBitWords, to->bits.begin() + dst * kMccBitWords);
      std::copy_n(from.mask.begin() + src * kMccMaskWords, len * kMccMaskWords,
                  to->mask.begin() + dst * kMccMaskWords);
      std::copy_n(from.x.begin() + src, len, to->x.begin() + dst);
      std::copy_n(from.y.begin() + src, len, to->y.begin() + dst);
      std::copy_n(from.theta.begin() + src, len, to->theta.begin() + dst);
      std::copy_n(from.bit_count.begin() + src, len, to->bit_count.begin() + dst);
      std::copy_n(from.full_mask.begin() + src, len, to->full_mask.begin() + dst);
    }
  });
}

// kFusion: LSS-R and DMC of every template, fused (fusion_score.h).
// kCascade: LSS-R over the whole gallery (GPU pipeline or CPU), then DMC of
// the shortlist only, ranked by the fused score.
enum class Scorer { kLssR, kDmc, kFusion, kCascade };

constexpr const char* kScorerNames[] = {"lssr", "dmc", "fusion", "cascade"};

const char* ScorerName(Scorer s) { return kScorerNames[static_cast<int>(s)]; }

// INVALID_ARGUMENT naming the field and the known names.
absl::StatusOr<Scorer> ScorerFromName(absl::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kScorerNames)); ++i) {
    if (name == kScorerNames[i]) return static_cast<Scorer>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("matcher: unknown matcher '", name, "'; known: ",
                                                 absl::StrJoin(std::begin(kScorerNames), std::end(kScorerNames), ", ")));
}

bool NeedsLssr(Scorer s) { return s != Scorer::kDmc; }
bool NeedsDmc(Scorer s) { return s != Scorer::kLssR; }

class MccSearcher final : public GallerySearcher {
 public:
  MccSearcher(Scorer default_scorer, std::optional<Stream> gpu, DmcMatcher dmc, const SearcherOptions& options)
      : default_(default_scorer),
        gpu_(std::move(gpu)),
        constants_(MakeLssConstants({}, mcc_)),
        dmc_(std::move(dmc)),
        chunk_templates_(options.chunk_templates),
        fusion_weight_(options.fusion_weight),
        cascade_candidates_(options.cascade_candidates) {}

  std::string matcher() const override { return ScorerName(default_); }
  std::vector<std::string> matchers() const override { return SearcherMatchers(); }

  absl::Status Add(const std::vector<std::shared_ptr<const StoredTemplate>>& templates) override {
    std::vector<const std::vector<MinutiaPoint>*> inputs;
    for (const auto& t : templates) {
      TESSERA_RETURN_IF_ERROR(Annotate(ValidateMccInput(t->minutiae, mcc_), absl::StrCat("template '", t->id, "'")));
      inputs.push_back(&t->minutiae);
    }
    std::vector<MccTemplate> built = BuildAll(inputs, mcc_);
    std::unique_lock<std::shared_mutex> lock(mu_);
    for (size_t i = 0; i < templates.size(); ++i) AppendLocked(templates[i], built[i]);
    return absl::OkStatus();
  }

  absl::Status AddWithCylinders(const std::shared_ptr<const StoredTemplate>& t, MccTemplate&& cylinders) override {
    std::unique_lock<std::shared_mutex> lock(mu_);
    AppendLocked(t, cylinders);
    return absl::OkStatus();
  }

  void Reserve(int64_t templates, int64_t cylinders) override {
    std::unique_lock<std::shared_mutex> lock(mu_);
    gallery_.Reserve(static_cast<size_t>(gallery_.num_templates() + templates),
                     static_cast<size_t>(gallery_.num_cylinders() + cylinders));
    ids_.reserve(ids_.size() + templates);
    seqs_.reserve(seqs_.size() + templates);
    deleted_.reserve(deleted_.size() + templates);
    finger_positions_.reserve(finger_positions_.size() + templates);
    impression_types_.reserve(impression_types_.size() + templates);
    metadata_.reserve(metadata_.size() + templates);
    slot_of_.reserve(slot_of_.size() + templates);
  }

  bool Remove(absl::string_view id) override {
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = slot_of_.find(std::string(id));
    if (it == slot_of_.end()) return false;
    deleted_[it->second] = 1;
    slot_of_.erase(it);
    // Rebuild once the dead weight is a quarter of the arrays.
    const int64_t dead = static_cast<int64_t>(ids_.size() - slot_of_.size());
    if (dead >= 64 && dead * 4 >= static_cast<int64_t>(ids_.size())) RebuildLocked();
    return true;
  }

  int64_t size() const override {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return static_cast<int64_t>(slot_of_.size());
  }

  std::vector<std::pair<std::string, uint64_t>> Entries() const override {
    std::shared_lock<std::shared_mutex> lock(mu_);
    std::vector<std::pair<std::string, uint64_t>> out;
    out.reserve(slot_of_.size());
    for (const auto& [id, slot] : slot_of_) out.emplace_back(id, seqs_[slot]);
    return out;
  }

  using GallerySearcher::Search;

  absl::StatusOr<std::vector<std::vector<SearchCandidate>>> Search(const std::vector<std::vector<MinutiaPoint>>& probes,
                                                                   const SearchOptions& options,
                                                                   SearchStats* stats) override {
    TESSERA_ASSIGN_OR_RETURN(const Scorer scorer, PickScorer(options.matcher));
    const int top_k = options.top_k;
    if (top_k < 1) return absl::InvalidArgumentError(absl::StrCat("top_k must be at least 1, got ", top_k));
    if (options.cascade_candidates != 0) TESSERA_RETURN_IF_ERROR(ValidateCascadeCandidates(options.cascade_candidates));
    TESSERA_RETURN_IF_ERROR(ValidateTemplateFilter(options.filter));
    if (!options.probe_filters.empty() && options.probe_filters.size() != probes.size()) {
      return absl::InvalidArgumentError(absl::StrCat("probe_filters: ", options.probe_filters.size(),
                                                     " filters for ", probes.size(), " probes"));
    }
    for (const TemplateFilter& f : options.probe_filters) TESSERA_RETURN_IF_ERROR(ValidateTemplateFilter(f));
    for (size_t i = 0; i < probes.size(); ++i) {
      TESSERA_RETURN_IF_ERROR(Annotate(ValidateMccInput(probes[i], mcc_), absl::StrCat("probe ", i)));
    }
    StopPoller stop(options.control);
    if (stop.StopNow()) return stop.status();
    auto t0 = std::chrono::steady_clock::now();
    std::vector<const std::vector<MinutiaPoint>*> inputs;
    for (const auto& p : probes) inputs.push_back(&p);
    std::vector<MccTemplate> built = BuildAll(inputs, mcc_, &stop);
    if (stop.stopped()) return stop.status();
    std::vector<LssProbe> prepared(NeedsLssr(scorer) ? built.size() : 0);
    std::vector<DmcLatent> latents;
    if (NeedsLssr(scorer)) {
      ParallelForDynamic(static_cast<int64_t>(built.size()), 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end && !stop.ShouldStop(); ++i) prepared[i] = PrepareProbe(built[i], mcc_);
      });
    }
    if (NeedsDmc(scorer)) {
      // On all cores, stopping with the search.
      std::vector<absl::StatusOr<DmcLatent>> made(built.size(), absl::CancelledError("not prepared"));
      ParallelForDynamic(static_cast<int64_t>(built.size()), 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end && !stop.ShouldStop(); ++i) made[i] = dmc_.Prepare(built[i]);
      });
      if (stop.stopped()) return stop.status();
      for (size_t i = 0; i < made.size(); ++i) {
        if (!made[i].ok()) return Annotate(made[i].status(), absl::StrCat("probe ", i));
        latents.push_back(*std::move(made[i]));
      }
    }
    if (stop.stopped()) return stop.status();
    const double prepare_seconds = Seconds(t0);
    if (stop.StopNow()) return stop.status();

    t0 = std::chrono::steady_clock::now();
    const int num_probes = static_cast<int>(probes.size());
    std::vector<std::vector<Candidate>> tops(num_probes);
    Run run{options.control, &stop, top_k, std::vector<int>(num_probes, 0), &tops};
    std::string backend = "cpu";
    std::shared_lock<std::shared_mutex> lock(mu_);
    // Per probe: deleted_, or deleted_ plus what its filter leaves out (one
    // list per distinct filter).
    std::map<std::string, std::vector<uint8_t>> filtered;
    run.exclude.assign(num_probes, deleted_.data());
    for (int p = 0; p < num_probes; ++p) {
      const TemplateFilter& f = options.probe_filters.empty() ? options.filter : options.probe_filters[p];
      if (f.empty()) continue;
      auto [it, fresh] = filtered.try_emplace(f.Key());
      if (fresh) {
        it->second.resize(deleted_.size());
        for (size_t t = 0; t < it->second.size(); ++t) {
          it->second[t] = deleted_[t] || !f.Accepts(finger_positions_[t], impression_types_[t]);
        }
      }
      run.exclude[p] = it->second.data();
    }
    if (!slot_of_.empty() && num_probes > 0) {
      if (scorer == Scorer::kLssR || scorer == Scorer::kCascade) {
        // The cascade's first stage keeps a shortlist of at least top_k.
        if (scorer == Scorer::kCascade) run.top_k = std::max(top_k, options.cascade_candidates > 0
                                                                        ? options.cascade_candidates
                                                                        : cascade_candidates_);
        if (gpu_ && ScoreOnGpuLocked(built, run)) backend = "cuda";
        if (stop.stopped()) return stop.status();
        TESSERA_RETURN_IF_ERROR(ScoreLssrOnCpuLocked(prepared, run));
        if (scorer == Scorer::kCascade) {
          run.top_k = top_k;
          TESSERA_RETURN_IF_ERROR(RescoreShortlistLocked(latents, run));
        }
      } else if (scorer == Scorer::kDmc) {
        TESSERA_RETURN_IF_ERROR(ScoreDmcLocked(latents, run));
        if (gpu_) backend = "cuda";
      } else {
        TESSERA_RETURN_IF_ERROR(ScoreFusionLocked(prepared, latents, run));
        if (gpu_) backend = "cuda";
      }
    }
    std::vector<std::vector<SearchCandidate>> results(num_probes);
    for (int p = 0; p < num_probes; ++p) {
      for (const Candidate& c : tops[p]) {
        results[p].push_back({ids_[c.template_index], c.score, metadata_[c.template_index]});
      }
    }
    if (stats != nullptr) {
      stats->gallery_templates = static_cast<int64_t>(slot_of_.size());
      stats->prepare_seconds = prepare_seconds;
      stats->score_seconds = Seconds(t0);
      stats->backend = backend;
      stats->matcher = ScorerName(scorer);
      stats->chunks = run.chunks;
    }
    return results;
  }

  absl::StatusOr<float> VerifyId(const std::vector<MinutiaPoint>& probe, absl::string_view id,
                                 absl::string_view matcher) override {
    TESSERA_ASSIGN_OR_RETURN(const Scorer scorer, PickScorer(matcher));
    TESSERA_RETURN_IF_ERROR(Annotate(ValidateMccInput(probe, mcc_), "probe"));
    const MccTemplate a = cpu::BuildMccTemplate(probe, mcc_);
    MccTemplate b;
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      auto it = slot_of_.find(std::string(id));
      if (it == slot_of_.end()) return absl::NotFoundError(absl::StrCat("no template ", QuoteBounded(id), " in the gallery"));
      b = gallery_.Get(it->second);
    }
    return ScorePair(scorer, a, b);
  }

  absl::StatusOr<float> Compare(const std::vector<MinutiaPoint>& a, const std::vector<MinutiaPoint>& b,
                                absl::string_view matcher) override {
    TESSERA_ASSIGN_OR_RETURN(const Scorer scorer, PickScorer(matcher));
    TESSERA_RETURN_IF_ERROR(Annotate(ValidateMccInput(a, mcc_), "probe"));
    TESSERA_RETURN_IF_ERROR(Annotate(ValidateMccInput(b, mcc_), "reference"));
    return ScorePair(scorer, cpu::BuildMccTemplate(a, mcc_), cpu::BuildMccTemplate(b, mcc_));
  }

  bool ExportCylinders(const StoredTemplate& t, MccTemplate* out) const override {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = slot_of_.find(t.id);
    if (it == slot_of_.end() || seqs_[it->second] != t.seq) return false;
    *out = gallery_.Get(it->second);
    out->num_minutiae = static_cast<int>(t.minutiae.size());
    return true;
  }

  void Compact() override {
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (slot_of_.size() != ids_.size()) RebuildLocked();
  }

 private:
  absl::StatusOr<Scorer> PickScorer(absl::string_view matcher) const {
    if (matcher.empty()) return default_;
    return ScorerFromName(matcher);
  }

  // 1:1 on the CPU: the probe `a` against the reference `b`.
  absl::StatusOr<float> ScorePair(Scorer scorer, const MccTemplate& a, const MccTemplate& b) const {
    const float lssr = NeedsLssr(scorer) ? cpu::Score(a, b, MccScore::kLssR, constants_) : 0.0f;
    if (scorer == Scorer::kLssR) return lssr;
    MccGallery one;
    one.Append(b, mcc_);
    TESSERA_ASSIGN_OR_RETURN(std::vector<float> scores, dmc_.ScoreGallery(cpu_stream_, a, one));
    // 1:1, a cascade is its fusion.
    return scorer == Scorer::kDmc ? scores[0] : FuseScores(lssr, scores[0], fusion_weight_);
  }

  void AppendLocked(const std::shared_ptr<const StoredTemplate>& stored, const MccTemplate& cylinders) {
    const StoredTemplate& t = *stored;
    auto it = slot_of_.find(t.id);
    if (it != slot_of_.end()) deleted_[it->second] = 1;  // replaced
    const int slot = gallery_.num_templates();
    gallery_.Append(cylinders, mcc_);
    ids_.push_back(t.id);
    seqs_.push_back(t.seq);
    deleted_.push_back(0);
    finger_positions_.push_back(static_cast<uint8_t>(t.metadata.finger_position));
    impression_types_.push_back(static_cast<int16_t>(t.metadata.impression_type));
    // Shares the template's ownership; only templates that have metadata
    // (galleries without any keep nothing more alive).
    metadata_.push_back(t.metadata.empty() ? nullptr : std::shared_ptr<const TemplateMetadata>(stored, &stored->metadata));
    slot_of_[t.id] = slot;
  }

  // New arrays holding only the live templates (enrolment order kept).
  void RebuildLocked() {
    MccGallery fresh;
    std::vector<std::string> ids;
    std::vector<uint64_t> seqs;
    std::vector<uint8_t> fgps;
    std::vector<int16_t> imps;
    std::vector<std::shared_ptr<const TemplateMetadata>> metadata;
    fresh.Reserve(slot_of_.size(), static_cast<size_t>(gallery_.num_cylinders()));
    for (int t = 0; t < gallery_.num_templates(); ++t) {
      if (deleted_[t]) continue;
      fresh.Append(gallery_.Get(t), mcc_);
      ids.push_back(std::move(ids_[t]));
      seqs.push_back(seqs_[t]);
      fgps.push_back(finger_positions_[t]);
      imps.push_back(impression_types_[t]);
      metadata.push_back(std::move(metadata_[t]));
    }
    gallery_ = std::move(fresh);
    ids_ = std::move(ids);
    seqs_ = std::move(seqs);
    finger_positions_ = std::move(fgps);
    impression_types_ = std::move(imps);
    metadata_ = std::move(metadata);
    deleted_.assign(ids_.size(), 0);
    slot_of_.clear();
    for (size_t i = 0; i < ids_.size(); ++i) slot_of_[ids_[i]] = static_cast<int>(i);
    ++generation_;
  }

  // The state of one Search call shared by its scoring steps.
  struct Run {
    const SearchControl* control;
    StopPoller* stop;
    int top_k;
    std::vector<int> cpu_begin;  // per probe: templates before this were scored on the GPU
    std::vector<std::vector<Candidate>>* tops;
    // Per probe, per slot: never a candidate (deleted, or filtered out).
    std::vector<const uint8_t*> exclude;
    int64_t chunks = 0;

    bool Wanted(int p) const { return control == nullptr || !control->probe_wanted || control->probe_wanted(p); }
    void Progress(int64_t done, int64_t total) const {
      if (control != nullptr && control->progress) control->progress(done, total);
    }
  };

  // LSS-R of templates [run.cpu_begin[p], n) for every wanted probe p, chunk
  // by chunk; each chunk is scored template-major (one template against all
  // probes in turn) on all cores.
  absl::Status ScoreLssrOnCpuLocked(const std::vector<LssProbe>& prepared, Run& run) {
    const int n = gallery_.num_templates();
    const int num_probes = static_cast<int>(prepared.size());
    int from = n;
    for (int p = 0; p < num_probes; ++p) from = std::min(from, run.cpu_begin[p]);
    const int chunk = chunk_templates_ > 0 ? chunk_templates_
                                           : static_cast<int>(std::clamp<int64_t>(
                                                 kScoresPerChunk / std::max(1, num_probes), 256, 65536));
    std::vector<float> scores;
    std::vector<int> active;
    StopPoller& stop = *run.stop;
    for (int b = from; b < n; b += chunk) {
      const int e = std::min(n, b + chunk);
      if (stop.StopNow()) return stop.status();
      active.clear();
      bool any_left = false;
      for (int p = 0; p < num_probes; ++p) {
        if (run.cpu_begin[p] >= n || !run.Wanted(p)) continue;
        any_left = true;
        if (run.cpu_begin[p] < e) active.push_back(p);
      }
      if (!any_left) break;
      if (active.empty()) continue;
      const int len = e - b;
      const int num_active = static_cast<int>(active.size());
      scores.assign(static_cast<size_t>(num_active) * len, 0.0f);
      ParallelForDynamic(static_cast<int64_t>(num_active) * len, 64, [&](int64_t lo, int64_t hi, int) {
        if (stop.ShouldStop()) return;
        for (int64_t i = lo; i < hi; ++i) {
          const int t = static_cast<int>(i / num_active), a = static_cast<int>(i % num_active);
          const int p = active[a];
          // Excluded templates (deleted, or outside the probe's filter) are never candidates: not scored.
          if (b + t < run.cpu_begin[p] || run.exclude[p][b + t]) continue;
          scores[static_cast<size_t>(a) * len + t] = cpu::Score(prepared[p], gallery_, b + t, MccScore::kLssR, constants_);
        }
      });
      if (stop.stopped()) return stop.status();
      for (int a = 0; a < num_active; ++a) {
        const int p = active[a];
        const int lo = std::max(b, run.cpu_begin[p]);
        MergeTopK(scores.data() + static_cast<size_t>(a) * len + (lo - b), e - lo, lo, run.top_k, &(*run.tops)[p],
                  run.exclude[p]);
      }
      ++run.chunks;
      run.Progress(e, n);
    }
    return absl::OkStatus();
  }

  // Templates per chunk of the DMC scans and per piece of the re-scoring.
  int DmcChunkTemplates() const {
    return chunk_templates_ > 0 ? chunk_templates_ : std::max(1, dmc_.options().batch_templates);
  }

  // The gallery chunk by chunk, every wanted probe per chunk:
  // score_chunk(p, b, e) scores templates [b, e) for probe p into its top-k.
  // Ends early once no probe is wanted.
  absl::Status ForEachWantedProbeChunk(int num_probes, Run& run,
                                       const std::function<absl::Status(int p, int b, int e)>& score_chunk) {
    const int n = gallery_.num_templates();
    const int chunk = DmcChunkTemplates();
    StopPoller& stop = *run.stop;
    for (int b = 0; b < n; b += chunk) {
      const int e = std::min(n, b + chunk);
      bool any = false;
      for (int p = 0; p < num_probes; ++p) {
        if (stop.StopNow()) return stop.status();
        if (!run.Wanted(p)) continue;
        any = true;
        TESSERA_RETURN_IF_ERROR(score_chunk(p, b, e));
      }
      if (!any) break;
      ++run.chunks;
      run.Progress(e, n);
    }
    return absl::OkStatus();
  }

  // DMC of the whole gallery for every wanted probe, chunk by chunk (kernels
  // on the GPU stream when there is one, one user at a time).
  absl::Status ScoreDmcLocked(const std::vector<DmcLatent>& latents, Run& run) {
    std::vector<float> scores(std::min(gallery_.num_templates(), DmcChunkTemplates()));
    return ForEachWantedProbeChunk(static_cast<int>(latents.size()), run, [&](int p, int b, int e) -> absl::Status {
      TESSERA_RETURN_IF_ERROR(DmcRangeLocked(latents[p], b, e, scores.data(), run.stop));
      MergeTopK(scores.data(), e - b, b, run.top_k, &(*run.tops)[p], run.exclude[p]);
      return absl::OkStatus();
    });
  }

  // DMC (kernels on the GPU stream when there is one) of templates [b, e)
  // for probe p into scores[0 .. e - b).
  absl::Status DmcRangeLocked(const DmcLatent& latent, int b, int e, float* scores, StopPoller* stop) {
    std::unique_lock<std::mutex> device_lock(device_mu_, std::defer_lock);
    if (gpu_) device_lock.lock();
    return dmc_.ScoreRange(gpu_ ? *gpu_ : cpu_stream_, latent, gallery_, b, e, scores, stop);
  }

  // Fusion over the whole gallery, chunk by chunk: LSS-R of the chunk on all
  // CPU cores and DMC of the same chunk, fused per template.
  absl::Status ScoreFusionLocked(const std::vector<LssProbe>& prepared, const std::vector<DmcLatent>& latents,
                                 Run& run) {
    const int chunk = std::min(gallery_.num_templates(), DmcChunkTemplates());
    std::vector<float> lssr(chunk), dmc(chunk);
    StopPoller& stop = *run.stop;
    return ForEachWantedProbeChunk(static_cast<int>(latents.size()), run, [&](int p, int b, int e) -> absl::Status {
      ParallelForDynamic(e - b, 64, [&](int64_t lo, int64_t hi, int) {
        if (stop.ShouldStop()) return;
        for (int64_t t = lo; t < hi; ++t) {
          lssr[t] = cpu::Score(prepared[p], gallery_, b + static_cast<int>(t), MccScore::kLssR, constants_);
        }
      });
      if (stop.stopped()) return stop.status();
      TESSERA_RETURN_IF_ERROR(DmcRangeLocked(latents[p], b, e, dmc.data(), &stop));
      for (int t = 0; t < e - b; ++t) lssr[t] = FuseScores(lssr[t], dmc[t], fusion_weight_);
      MergeTopK(lssr.data(), e - b, b, run.top_k, &(*run.tops)[p], run.exclude[p]);
      return absl::OkStatus();
    });
  }

  // The cascade's second stage: every wanted probe's LSS-R shortlist (in
  // run.tops, scores LSS-R) re-scored with DMC, ranked by the fused score and
  // cut to run.top_k. The shortlists of all probes of the call are scored
  // together. Without a GPU: one parallel loop over every (probe, candidate)
  // pair, kernels and final stage per pair straight from the gallery's arrays
  // (no copies). With one: the shortlists are cut into pieces of at most
  // DMC's batch_templates and scored in rounds of up to
  // kRescoreRoundTemplates templates (a typical call, 16 probes x 200, is one
  // round of 16 pieces): see RescoreRoundLocked.
  absl::Status RescoreShortlistLocked(const std::vector<DmcLatent>& latents, Run& run) {
    const int num_probes = static_cast<int>(latents.size());
    std::vector<std::vector<float>> dmc(num_probes);
    if (gpu_) {
      TESSERA_RETURN_IF_ERROR(RescoreOnGpuLocked(latents, run, &dmc));
    } else {
      TESSERA_RETURN_IF_ERROR(RescoreOnCpuLocked(latents, run, &dmc));
    }
    for (int p = 0; p < num_probes; ++p) {
      std::vector<Candidate>& top = (*run.tops)[p];
      if (dmc[p].empty()) continue;
      for (size_t c = 0; c < top.size(); ++c) {
        top[c].score = SanitizeScore(FuseScores(top[c].score, dmc[p][c], fusion_weight_));
      }
      std::sort(top.begin(), top.end(), CandidateBefore);
      if (static_cast<int>(top.size()) > run.top_k) top.resize(run.top_k);
    }
    return absl::OkStatus();
  }

  // DMC of every wanted probe's shortlist into (*dmc)[probe][candidate] on
  // all CPU cores: each pair's kernels (one-template batch viewing the
  // gallery's arrays, per-worker output scratch) and final stage in turn.
  absl::Status RescoreOnCpuLocked(const std::vector<DmcLatent>& latents, Run& run,
                                  std::vector<std::vector<float>>* dmc) {
    StopPoller& stop = *run.stop;
    std::vector<std::pair<int, int>> pairs;  // (probe, candidate)
    for (int p = 0; p < static_cast<int>(latents.size()); ++p) {
      const int len = static_cast<int>((*run.tops)[p].size());
      if (!run.Wanted(p) || len == 0) continue;
      (*dmc)[p].assign(len, 0.0f);
      for (int c = 0; c < len; ++c) pairs.emplace_back(p, c);
    }
    const DmcFinalStageParams& final_stage = dmc_.options().final_stage;
    const size_t scratch_bytes = DmcResultsBytes(std::max(1, gallery_.max_template_size())) + 16;
    std::vector<std::vector<uint8_t>> scratch(CpuThreads());
    ParallelForDynamic(static_cast<int64_t>(pairs.size()), 4, [&](int64_t lo, int64_t hi, int worker) {
      std::vector<uint8_t>& block = scratch[worker];
      if (block.size() < scratch_bytes) block.resize(scratch_bytes);
      std::vector<int32_t> start;
      for (int64_t k = lo; k < hi; ++k) {
        if (stop.ShouldStop()) return;
        const auto [p, c] = pairs[k];
        const int t = (*run.tops)[p][c].template_index;
        const DmcBatchView one = HostBatchView(gallery_, t, t + 1, &start);
        const DmcKernelResults results = DmcResultsAt(AlignTo16(block.data()), one.num_cylinders);
        cpu::RunDmcKernels(latents[p].view(), one, dmc_.constants(), results, 1);
        (*dmc)[p][c] =
            ScoreTemplateFinalStage(latents[p], one, results, 0, dmc_.lss_constants(), final_stage).score;
      }
    });
    if (stop.stopped()) return stop.status();
    return absl::OkStatus();
  }

  // The GPU's share of RescoreShortlistLocked: pieces and rounds.
  absl::Status RescoreOnGpuLocked(const std::vector<DmcLatent>& latents, Run& run,
                                  std::vector<std::vector<float>>* dmc) {
    const int num_probes = static_cast<int>(latents.size());
    // Small chunk_templates (tests) make small pieces and rounds of three.
    const int piece_limit = DmcChunkTemplates();
    const int round_limit = chunk_templates_ > 0 ? 3 * chunk_templates_ : kRescoreRoundTemplates;
    std::vector<ShortlistPiece> round;
    int round_templates = 0;
    for (int p = 0; p < num_probes; ++p) {
      const int len = static_cast<int>((*run.tops)[p].size());
      if (!run.Wanted(p) || len == 0) continue;
      (*dmc)[p].assign(len, 0.0f);
      for (int b = 0; b < len; b += piece_limit) {
        const ShortlistPiece piece{p, b, std::min(len, b + piece_limit)};
        if (!round.empty() && round_templates + (piece.end - piece.begin) > round_limit) {
          TESSERA_RETURN_IF_ERROR(RescoreRoundLocked(latents, round, run, dmc));
          round.clear();
          round_templates = 0;
        }
        round.push_back(piece);
        round_templates += piece.end - piece.begin;
      }
    }
    if (!round.empty()) TESSERA_RETURN_IF_ERROR(RescoreRoundLocked(latents, round, run, dmc));
    return absl::OkStatus();
  }

  // Candidates [begin, end) of probe `probe`'s shortlist.
  struct ShortlistPiece {
    int probe;
    int begin;
    int end;
  };

  // DMC of the pieces' candidates into (*dmc)[probe][candidate]. Their
  // templates are gathered into one small gallery (piece i at [first[i],
  // first[i + 1])); kernels 2-4 run per piece on the GPU stream (one upload
  // of the piece); then the final stage of every candidate of the
  // round runs in one parallel loop over all cores, rather than one small
  // loop per probe. Scores equal DmcMatcher::ScoreRange's (same kernels, same
  // per-template final stage).
  absl::Status RescoreRoundLocked(const std::vector<DmcLatent>& latents, const std::vector<ShortlistPiece>& pieces,
                                  Run& run, std::vector<std::vector<float>>* dmc) {
    StopPoller& stop = *run.stop;
    const int num_pieces = static_cast<int>(pieces.size());
    std::vector<int> first{0};
    std::vector<int> templates;
    for (const ShortlistPiece& piece : pieces) {
      const std::vector<Candidate>& top = (*run.tops)[piece.probe];
      for (int c = piece.begin; c < piece.end; ++c) templates.push_back(top[c].template_index);
      first.push_back(static_cast<int>(templates.size()));
    }
    MccGallery gathered;
    GatherTemplates(gallery_, templates, &gathered);
    if (stop.StopNow()) return stop.status();

    // Outputs per piece in one block (the member-major cluster layout
    // depends on the piece's cylinder count).
    std::vector<size_t> result_offset(num_pieces + 1, 0);
    for (int i = 0; i < num_pieces; ++i) {
      const int cylinders = gathered.start[first[i + 1]] - gathered.start[first[i]];
      result_offset[i + 1] = result_offset[i] + AlignTo16(DmcResultsBytes(cylinders));
    }
    std::vector<uint8_t> result_block(result_offset.back() + 16);
    uint8_t* const result_base = AlignTo16(result_block.data());
    std::vector<DmcKernelResults> results(num_pieces);
    std::vector<std::vector<int32_t>> starts(num_pieces);
    std::vector<DmcBatchView> views(num_pieces);
    {
      std::lock_guard<std::mutex> device_lock(device_mu_);
      for (int i = 0; i < num_pieces; ++i) {
        if (stop.StopNow()) return stop.status();
        const int cylinders = gathered.start[first[i + 1]] - gathered.start[first[i]];
        results[i] = DmcResultsAt(result_base + result_offset[i], cylinders);
        views[i] = HostBatchView(gathered, first[i], first[i + 1], &starts[i]);
        TESSERA_RETURN_IF_ERROR(RunDmcKernelsOnGallery(*gpu_, latents[pieces[i].probe], gathered, first[i],
                                                       first[i + 1], dmc_.constants(), results[i],
                                                       dmc_.options().threads));
      }
    }

    const DmcFinalStageParams& final_stage = dmc_.options().final_stage;
    ParallelForDynamic(static_cast<int64_t>(templates.size()), 8, [&](int64_t lo, int64_t hi, int) {
      int i = static_cast<int>(std::upper_bound(first.begin(), first.end(), static_cast<int>(lo)) - first.begin()) - 1;
      for (int64_t k = lo; k < hi; ++k) {
        if (stop.ShouldStop()) return;
        while (k >= first[i + 1]) ++i;
        const ShortlistPiece& piece = pieces[i];
        const int t = static_cast<int>(k) - first[i];
        (*dmc)[piece.probe][piece.begin + t] =
            ScoreTemplateFinalStage(latents[piece.probe], views[i], results[i], t, dmc_.lss_constants(), final_stage)
                .score;
      }
    });
    if (stop.stopped()) return stop.status();
    return absl::OkStatus();
  }

  // LSS-R through the ALFI pipeline on the GPU: templates [0, T) of the
  // pipeline's gallery for every wanted probe that fits the CUDA kernel
  // (run.cpu_begin becomes T for those; the CPU scores the rest). False when
  // the GPU scored nothing (no pipeline, or it failed: the CPU takes over).
  bool ScoreOnGpuLocked(const std::vector<MccTemplate>& built, Run& run) {
    std::lock_guard<std::mutex> device_lock(device_mu_);
    if (!EnsurePipelineLocked()) return false;
    const int limit = kLssCudaMaxMatrixEntries / std::max(1, pipeline_max_template_size_);
    std::vector<int> on_gpu;
    for (int p = 0; p < static_cast<int>(built.size()); ++p) {
      if (run.Wanted(p) && static_cast<int>(built[p].cylinders.size()) <= limit) on_gpu.push_back(p);
    }
    bool scored = false;
    // Groups bound the pipeline's output buffers (latents x batch templates).
    for (size_t g = 0; g < on_gpu.size(); g += kPipelineLatentsPerCall) {
      const size_t g_end = std::min(on_gpu.size(), g + kPipelineLatentsPerCall);
      std::vector<MccTemplate> latents;
      for (size_t i = g; i < g_end; ++i) latents.push_back(built[on_gpu[i]]);
      // The tensor-core kernel: H200, 10^6 templates x 16 latent crops, 51.1 M
      // matches/s resident vs 28.4 for kBlock (1.80x), same scores (issue 16).
      LssBatchMatcher matcher(MccScore::kLssR, {}, mcc_, cuda::LssCudaKernel::kWarpMma);
      PipelineSearchOptions search;
      search.top_k = run.top_k;
      for (size_t i = g; i < g_end; ++i) search.latent_exclude.push_back(run.exclude[on_gpu[i]]);
      search.stop = run.stop;
      absl::StatusOr<std::vector<std::vector<Candidate>>> got = pipeline_->Search(matcher, latents, search);
      if (run.stop->stopped()) return scored;
      if (!got.ok()) {
        TESSERA_LOG(WARNING) << "fingerprint search: the GPU pipeline failed, scoring on the CPU: " << got.status();
        pipeline_.reset();
        return scored;
      }
      for (size_t i = g; i < g_end; ++i) {
        (*run.tops)[on_gpu[i]] = std::move((*got)[i - g]);
        run.cpu_begin[on_gpu[i]] = pipeline_templates_;
      }
      scored = true;
      ++run.chunks;
      run.Progress(pipeline_templates_, gallery_.num_templates());
    }
    return scored;
  }

  // A pipeline over the current arrays, rebuilt after a compaction or once
  // more than max(1024, 1/8) of its templates have been appended since.
  // Under device_mu_ and a shared mu_. False: none (the CPU scores).
  bool EnsurePipelineLocked() {
    const int n = gallery_.num_templates();
    const int stale = n - pipeline_templates_;
    if (pipeline_ && pipeline_generation_ == generation_ && stale <= std::max(1024, pipeline_templates_ / 8)) {
      return true;
    }
    pipeline_.reset();
    if (n == 0) return false;
    PipelineOptions po;
    po.backend = Backend::kCuda;
    po.ordinal = gpu_->ordinal();
    po.batch_templates = kPipelineBatchTemplates;
    po.top_k = 1;  // each search sets its own
    po.resident = true;
    // The CUDA pipeline copies the arrays during Create and never reads them
    // again, so a non-owning pointer is enough (mu_ is held).
    std::shared_ptr<const MccGallery> arrays(&gallery_, [](const MccGallery*) {});
    absl::StatusOr<std::unique_ptr<AlfiPipeline>> created = AlfiPipeline::Create(arrays, po);
    if (!created.ok()) {
      TESSERA_LOG(INFO) << "fingerprint search: gallery not resident on the GPU (" << created.status()
                        << "); streaming it from pinned memory";
      po.resident = false;
      created = AlfiPipeline::Create(arrays, po);
    }
    if (!created.ok()) {
      TESSERA_LOG(WARNING) << "fingerprint search: no GPU pipeline, scoring on the CPU: " << created.status();
      return false;
    }
    pipeline_ = std::move(*created);
    pipeline_templates_ = n;
    pipeline_generation_ = generation_;
    pipeline_max_template_size_ = gallery_.max_template_size();
    return true;
  }

  // CPU LSS-R: scores held per chunk (probes x templates) at most.
  static constexpr int64_t kScoresPerChunk = int64_t{1} << 21;
  static constexpr int kPipelineBatchTemplates = 65536;
  static constexpr size_t kPipelineLatentsPerCall = 256;
  // Cascade: templates gathered per re-scoring round (~30 cylinders of ~240
  // bytes each: ~120 MB at most, whatever cascade_candidates x probes).
  static constexpr int kRescoreRoundTemplates = 16384;

  const MccParams mcc_;
  const Scorer default_;
  std::optional<Stream> gpu_;
  const Stream cpu_stream_ = Stream::Cpu();
  const LssConstants constants_;
  const DmcMatcher dmc_;
  const int chunk_templates_;
  const double fusion_weight_;
  const int cascade_candidates_;
  mutable std::shared_mutex mu_;  // everything below, except the device state
  MccGallery gallery_;
  std::vector<std::string> ids_;  // per slot (template index of gallery_)
  std::vector<uint64_t> seqs_;
  std::vector<uint8_t> deleted_;
  // Per slot, for SearchOptions::filter: the template's FGP and IMP.
  std::vector<uint8_t> finger_positions_;
  std::vector<int16_t> impression_types_;
  std::vector<std::shared_ptr<const TemplateMetadata>> metadata_;  // null: none
  std::unordered_map<std::string, int> slot_of_;  // live ids
  uint64_t generation_ = 0;                       // bumped by RebuildLocked

  std::mutex device_mu_;  // the GPU stream and pipeline (under a shared mu_ lock)
  std::unique_ptr<AlfiPipeline> pipeline_;
  int pipeline_templates_ = 0;
  uint64_t pipeline_generation_ = 0;
  int pipeline_max_template_size_ = 0;
};

}  // namespace

std::vector<std::string> SearcherMatchers() { return {std::begin(kScorerNames), std::end(kScorerNames)}; }

absl::StatusOr<std::unique_ptr<GallerySearcher>> CreateSearcher(const SearcherOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(const Scorer scorer, ScorerFromName(options.matcher));
  TESSERA_RETURN_IF_ERROR(ValidateFusionWeight(options.fusion_weight));
  TESSERA_RETURN_IF_ERROR(ValidateCascadeCandidates(options.cascade_candidates));
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(options.device));
  std::optional<Stream> gpu;
  if (backend == Backend::kCuda) {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, 0));
    gpu.emplace(std::move(stream));
  }
  DmcMatcherOptions dmc_options;
  dmc_options.threads = 0;  // all cores for the CPU kernels and the final stage
  TESSERA_ASSIGN_OR_RETURN(DmcMatcher dmc, DmcMatcher::Create(dmc_options));
  if (options.chunk_templates < 0) return absl::InvalidArgumentError("chunk_templates must be >= 0");
  return std::unique_ptr<GallerySearcher>(new MccSearcher(scorer, std::move(gpu), std::move(dmc), options));
}

}  // namespace fingerprint
}  // namespace tessera
