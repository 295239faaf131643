#include "services/fingerprint/searcher.h"

#include <algorithm>
#include <atomic>
#include <chrono>
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
#include "kernels/fingerprint/lss.h"
#include "services/fingerprint/dmc_matcher.h"

namespace tessera {
namespace fingerprint {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Descriptors of many templates on all cores.
std::vector<MccTemplate> BuildAll(const std::vector<const std::vector<MinutiaPoint>*>& inputs, const MccParams& p) {
  std::vector<MccTemplate> out(inputs.size());
  ParallelForDynamic(static_cast<int64_t>(inputs.size()), 4, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) out[i] = cpu::BuildMccTemplate(*inputs[i], p);
  });
  return out;
}

enum class Scorer { kLssR, kDmc };

class MccSearcher final : public GallerySearcher {
 public:
  MccSearcher(Scorer default_scorer, std::optional<Stream> gpu, DmcMatcher dmc)
      : default_(default_scorer), gpu_(std::move(gpu)), constants_(MakeLssConstants({}, mcc_)), dmc_(std::move(dmc)) {}

  std::string matcher() const override { return default_ == Scorer::kDmc ? "dmc" : "lssr"; }
  std::vector<std::string> matchers() const override { return {"lssr", "dmc"}; }

  absl::Status Add(const std::vector<std::shared_ptr<const StoredTemplate>>& templates) override {
    std::vector<const std::vector<MinutiaPoint>*> inputs;
    for (const auto& t : templates) {
      TESSERA_RETURN_IF_ERROR(Annotate(ValidateMccInput(t->minutiae, mcc_), absl::StrCat("template '", t->id, "'")));
      inputs.push_back(&t->minutiae);
    }
    std::vector<MccTemplate> built = BuildAll(inputs, mcc_);
    std::unique_lock<std::shared_mutex> lock(mu_);
    for (size_t i = 0; i < templates.size(); ++i) AppendLocked(*templates[i], built[i]);
    return absl::OkStatus();
  }

  absl::Status AddWithCylinders(const std::shared_ptr<const StoredTemplate>& t, MccTemplate&& cylinders) override {
    std::unique_lock<std::shared_mutex> lock(mu_);
    AppendLocked(*t, cylinders);
    return absl::OkStatus();
  }

  void Reserve(int64_t templates, int64_t cylinders) override {
    std::unique_lock<std::shared_mutex> lock(mu_);
    gallery_.Reserve(static_cast<size_t>(gallery_.num_templates() + templates),
                     static_cast<size_t>(gallery_.num_cylinders() + cylinders));
    ids_.reserve(ids_.size() + templates);
    seqs_.reserve(seqs_.size() + templates);
    deleted_.reserve(deleted_.size() + templates);
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

  absl::StatusOr<std::vector<std::vector<SearchCandidate>>> Search(const std::vector<std::vector<MinutiaPoint>>& probes,
                                                                   int top_k, SearchStats* stats,
                                                                   absl::string_view matcher) override {
    TESSERA_ASSIGN_OR_RETURN(const Scorer scorer, PickScorer(matcher));
    if (top_k < 1) return absl::InvalidArgumentError(absl::StrCat("top_k must be at least 1, got ", top_k));
    for (size_t i = 0; i < probes.size(); ++i) {
      TESSERA_RETURN_IF_ERROR(Annotate(ValidateMccInput(probes[i], mcc_), absl::StrCat("probe ", i)));
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<const std::vector<MinutiaPoint>*> inputs;
    for (const auto& p : probes) inputs.push_back(&p);
    std::vector<MccTemplate> built = BuildAll(inputs, mcc_);
    std::vector<LssProbe> prepared(scorer == Scorer::kLssR ? built.size() : 0);
    std::vector<DmcLatent> latents;
    if (scorer == Scorer::kLssR) {
      ParallelForDynamic(static_cast<int64_t>(built.size()), 1, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) prepared[i] = PrepareProbe(built[i], mcc_);
      });
    } else {
      for (size_t i = 0; i < built.size(); ++i) {
        absl::StatusOr<DmcLatent> latent = dmc_.Prepare(built[i]);
        if (!latent.ok()) return Annotate(latent.status(), absl::StrCat("probe ", i));
        latents.push_back(std::move(*latent));
      }
    }
    const double prepare_seconds = Seconds(t0);

    t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<SearchCandidate>> results(probes.size());
    std::string backend = "cpu";
    std::shared_lock<std::shared_mutex> lock(mu_);
    const int n = gallery_.num_templates();
    std::vector<float> scores(n);
    std::vector<std::pair<float, int>> ranked;
    for (size_t p = 0; p < probes.size() && !slot_of_.empty(); ++p) {
      if (scorer == Scorer::kDmc) {
        std::lock_guard<std::mutex> device_lock(device_mu_);  // one user of the GPU stream at a time
        TESSERA_RETURN_IF_ERROR(dmc_.ScoreGallery(gpu_ ? *gpu_ : cpu_stream_, latents[p], gallery_, scores.data()));
        if (gpu_) backend = "cuda";
      } else if (ScoreOnGpuLocked(prepared[p], scores.data())) {
        backend = "cuda";
      } else {
        cpu::ScoreGallery(prepared[p], gallery_, MccScore::kLssR, constants_, scores.data(), /*threads=*/0);
      }
      ranked.clear();
      for (int t = 0; t < n; ++t) {
        if (!deleted_[t]) ranked.emplace_back(scores[t], t);
      }
      const size_t k = std::min<size_t>(top_k, ranked.size());
      std::partial_sort(ranked.begin(), ranked.begin() + k, ranked.end(),
                        [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
                          return a.first != b.first ? a.first > b.first : a.second < b.second;
                        });
      for (size_t i = 0; i < k; ++i) results[p].push_back({ids_[ranked[i].second], ranked[i].first});
    }
    if (stats != nullptr) {
      stats->gallery_templates = static_cast<int64_t>(slot_of_.size());
      stats->prepare_seconds = prepare_seconds;
      stats->score_seconds = Seconds(t0);
      stats->backend = backend;
      stats->matcher = scorer == Scorer::kDmc ? "dmc" : "lssr";
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
      if (it == slot_of_.end()) return absl::NotFoundError(absl::StrCat("no template '", id, "' in the gallery"));
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
    if (matcher == "lssr") return Scorer::kLssR;
    if (matcher == "dmc") return Scorer::kDmc;
    return absl::InvalidArgumentError(absl::StrCat("unknown matcher '", matcher, "'; known: lssr, dmc"));
  }

  // 1:1 on the CPU: the probe `a` against the reference `b`.
  absl::StatusOr<float> ScorePair(Scorer scorer, const MccTemplate& a, const MccTemplate& b) const {
    if (scorer == Scorer::kLssR) return cpu::Score(a, b, MccScore::kLssR, constants_);
    MccGallery one;
    one.Append(b, mcc_);
    TESSERA_ASSIGN_OR_RETURN(std::vector<float> scores, dmc_.ScoreGallery(cpu_stream_, a, one));
    return scores[0];
  }

  void AppendLocked(const StoredTemplate& t, const MccTemplate& cylinders) {
    auto it = slot_of_.find(t.id);
    if (it != slot_of_.end()) deleted_[it->second] = 1;  // replaced
    const int slot = gallery_.num_templates();
    gallery_.Append(cylinders, mcc_);
    ids_.push_back(t.id);
    seqs_.push_back(t.seq);
    deleted_.push_back(0);
    slot_of_[t.id] = slot;
  }

  // New arrays holding only the live templates (enrolment order kept).
  void RebuildLocked() {
    MccGallery fresh;
    std::vector<std::string> ids;
    std::vector<uint64_t> seqs;
    fresh.Reserve(slot_of_.size(), static_cast<size_t>(gallery_.num_cylinders()));
    for (int t = 0; t < gallery_.num_templates(); ++t) {
      if (deleted_[t]) continue;
      fresh.Append(gallery_.Get(t), mcc_);
      ids.push_back(std::move(ids_[t]));
      seqs.push_back(seqs_[t]);
    }
    gallery_ = std::move(fresh);
    ids_ = std::move(ids);
    seqs_ = std::move(seqs);
    deleted_.assign(ids_.size(), 0);
    slot_of_.clear();
    for (size_t i = 0; i < ids_.size(); ++i) slot_of_[ids_[i]] = static_cast<int>(i);
    ++generation_;
  }

  // Scores on the GPU when there is one: templates [0, uploaded) from the
  // device copy, the rest on the CPU. False: use the CPU for everything.
  bool ScoreOnGpuLocked(const LssProbe& probe, float* scores) {
    if (!gpu_) return false;
    std::lock_guard<std::mutex> device_lock(device_mu_);
    const int n = gallery_.num_templates();
    const int stale = n - device_templates_;
    if (!device_ || device_generation_ != generation_ || stale > std::max(1024, device_templates_ / 8)) {
      device_.reset();
      absl::StatusOr<MccDeviceGallery> uploaded = MccDeviceGallery::Upload(gallery_, *gpu_);
      if (!uploaded.ok()) {
        TESSERA_LOG(WARNING) << "fingerprint search: gallery upload failed, scoring on the CPU: "
                             << uploaded.status();
        return false;
      }
      device_.emplace(std::move(*uploaded));
      device_templates_ = n;
      device_generation_ = generation_;
    }
    absl::Status s = ScoreGallery(*gpu_, probe, *device_, MccScore::kLssR, constants_, scores);
    if (!s.ok()) {
      // e.g. a probe too large for the kernel's shared-memory matrix.
      TESSERA_LOG(DEBUG) << "fingerprint search on the GPU failed, using the CPU: " << s;
      return false;
    }
    ParallelFor(n - device_templates_, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = device_templates_ + begin; t < device_templates_ + end; ++t) {
        scores[t] = cpu::Score(probe, gallery_, static_cast<int>(t), MccScore::kLssR, constants_);
      }
    }, 64);
    return true;
  }

  const MccParams mcc_;
  const Scorer default_;
  std::optional<Stream> gpu_;
  const Stream cpu_stream_ = Stream::Cpu();
  const LssConstants constants_;
  const DmcMatcher dmc_;
  mutable std::shared_mutex mu_;  // everything below, except the device state
  MccGallery gallery_;
  std::vector<std::string> ids_;  // per slot (template index of gallery_)
  std::vector<uint64_t> seqs_;
  std::vector<uint8_t> deleted_;
  std::unordered_map<std::string, int> slot_of_;  // live ids
  uint64_t generation_ = 0;                       // bumped by RebuildLocked

  std::mutex device_mu_;  // the GPU copy (under a shared mu_ lock)
  std::optional<MccDeviceGallery> device_;
  int device_templates_ = 0;
  uint64_t device_generation_ = 0;
};

}  // namespace

std::vector<std::string> SearcherMatchers() { return {"lssr", "dmc"}; }

absl::StatusOr<std::unique_ptr<GallerySearcher>> CreateSearcher(const SearcherOptions& options) {
  if (options.matcher != "lssr" && options.matcher != "dmc") {
    return absl::InvalidArgumentError(absl::StrCat("unknown matcher '", options.matcher,
                                                   "'; known: ", absl::StrJoin(SearcherMatchers(), ", ")));
  }
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(options.device));
  std::optional<Stream> gpu;
  if (backend == Backend::kCuda) {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, 0));
    gpu.emplace(std::move(stream));
  }
  DmcMatcherOptions dmc_options;
  dmc_options.threads = 0;  // all cores for the CPU kernels and the final stage
  TESSERA_ASSIGN_OR_RETURN(DmcMatcher dmc, DmcMatcher::Create(dmc_options));
  return std::unique_ptr<GallerySearcher>(new MccSearcher(
      options.matcher == "dmc" ? Scorer::kDmc : Scorer::kLssR, std::move(gpu), std::move(dmc)));
}

}  // namespace fingerprint
}  // namespace tessera
