// Batch SOM training on sparse binary corpora, on the CPU or CUDA backend.
//
// Each epoch: exact BMU search (kernels/som/bmu.h, feature-major) with the
// second-best unit, quality of the current codebook (QE, topographic error),
// then one batch update (kernels/som/batch_update.h) whose neighbourhood is a
// Gaussian of standard deviation r(e) approximated by box blurs:
//   r(e) = r0 * (r1 / r0)^t(e), t(e) = min(1, e / (D - 1)) (t = 1 when D = 1)
// with D = min(radius_decay_epochs, max_epochs): exponential decay from
// radius_start r0 to radius_end r1 that reaches r1 in epoch D - 1, so a run of
// max_epochs epochs always trains its last epoch at r1, whatever the count
// (somoclu's cooling does the same over its nEpoch); RadiusCooling::kLinear:
// r0 + (r1 - r0) t(e). Radii are Gaussian standard deviations in cells
// (somoclu's "radius" r is a Gaussian of sigma std_coeff * r, 0.5 r by
// default, cut off beyond r).
//
// Schedules (RadiusSchedule) differ in r0 and r1 when radius_start /
// radius_end are not given, and in t(e):
//   kNarrow (default since issue 16, 2026-12-02): r0 = max(width, height) / 8
//     after PCA initialisation (max / 2 after a random one, which has no
//     order to keep), r1 = 0.45: the 3-tap kernel [a, 1, a], a = 0.085,
//     per-axis sigma 0.38. somoclu ends at a Gaussian of sigma 0.5 cut off
//     beyond distance 1 (radius 1, std_coeff 0.5, compact support): the 4
//     neighbours at e^-2, per-axis sigma 0.42; our 3-tap at 0.5 is 0.46 and
//     left QE at convergence 0.5 % above somoclu's at edge 16. The PCA
//     initialisation already orders
//     the map globally, so a wide start only pulls every unit towards the
//     corpus mean and the epochs spent undoing that are lost: on genes x GO this is what made our
//     held-out QE worse than somoclu's at equal epochs (2.92 vs 2.78 at 32x32
//     after 10 epochs; now 2.72). Topographic error rises with it (0.06-0.08
//     -> 0.24-0.45 on genes x GO, as somoclu's maps: 0.25-0.65).
//   kEndAtLastDecayEpoch (the 2026-12-01 default): r0 = max(width, height) / 2,
//     r1 = 1 (the 3x3 box, sigma 1.41), same t(e).
//   kLegacy (before 2026-12-01): r0, r1 as kEndAtLastDecayEpoch but
//     t(e) = min(1, e / radius_decay_epochs), which reaches r1 only in epoch
//     D: 3 epochs at edge 32 trained at radii 16, 6.35, 2.52 and never at 1.
// Training stops at max_epochs, or earlier once the radius is small (r(e) <=
// small_radius) and the training QE's relative change has stayed below
// convergence_tolerance for convergence_patience consecutive epochs. A final
// BMU pass measures the returned codebook.
//
// Initialisation: kRandom draws w_i[v] uniformly in [0, 2 p_v] (p_v = the
// feature's document frequency), so every node starts near the corpus mean;
// kPca spans the plane of the two leading principal components (orthogonal
// power iteration on the sparse data, on at most pca_sample_rows evenly spaced
// rows; kernels/som/pca.h):
//   w(x, y) = mean + a(x) sqrt(l1) u1 + b(y) sqrt(l2) u2,  a, b in [-1, 1],
// with the first component along the longer map side. On CUDA
// (pca_on_device) the iteration and the fill run on the GPU and the codebook
// is written in place in device memory: a 1024 x 1024 map no longer waits for
// a host fill and a 64 GB upload (68 s on the H200 host, 2026-11-30); the
// host codebook is first allocated when training ends.
#ifndef TESSERA_SERVICES_SOM_TRAINER_H_
#define TESSERA_SERVICES_SOM_TRAINER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/device.h"
#include "kernels/som/bmu.h"
#include "kernels/som/quality.h"
#include "kernels/som/types.h"
#include "services/som/corpus.h"

namespace tessera {
namespace som {

enum class InitMethod { kRandom, kPca };
const char* InitMethodName(InitMethod init);

// How the radius goes from radius_start to radius_end over radius_decay_epochs.
enum class RadiusCooling { kExponential, kLinear };
// Default radii and where in the run radius_end is reached (see the comment
// at the top).
enum class RadiusSchedule {
  kNarrow,               // max(w, h) / 8 (PCA init) -> 0.45, r1 in epoch min(radius_decay_epochs, max_epochs) - 1
  kEndAtLastDecayEpoch,  // max(w, h) / 2 -> 1, the same epochs (atlases saved on 2026-12-01)
  kLegacy,               // max(w, h) / 2 -> 1, r1 in epoch radius_decay_epochs (atlases saved before)
};
const char* RadiusScheduleName(RadiusSchedule schedule);  // "narrow", "end-at-last-decay-epoch", "legacy"
// The schedule named `name`; INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<RadiusSchedule> ParseRadiusSchedule(absl::string_view name);

// `tessera som train`'s decay length when none is given: three quarters of
// the epochs, at most 10 (the rest settle at radius_end).
int DefaultRadiusDecayEpochs(int max_epochs);

struct EpochReport {
  int epoch = 0;                 // 0-based
  double radius = 0;             // r(e), grid cells
  int box_half_width = 0;        // the box blur it became (0: none, or the 3-tap kernel)
  double tap_weight = 0;         // side weight of the 3-tap kernel for radii below a box
  double qe = 0;                 // training QE (Euclidean) of the codebook entering this epoch
  double qe_relative_change = 0; // |qe - previous| / previous (0 for epoch 0)
  double topographic_error = 0;  // training TE, 4-neighbour adjacency
  double bmu_seconds = 0;
  double quality_seconds = 0;    // QE/TE of the BMU results (download and host pass, or the device pass)
  double update_seconds = 0;
  int64_t bmu_exact_rescans = 0; // BmuTuning::screen_fp16: documents the exact kernel searched again
  // TrainOptions::group_bounds: 0 plain search, 1 full search setting the
  // bounds, 2 bounded search; (document, group) pairs searched exactly of
  // all, and documents that searched their previous BMU's group only.
  int bmu_bound_mode = 0;
  int64_t bmu_pairs_searched = 0;
  int64_t bmu_pairs = 0;
  int64_t bmu_documents_skipped = 0;
  double seconds = 0;            // the whole epoch, quality included
};

// Score-space group bounds for the training BMU searches
// (kernels/som/group_bounds.h, issue 37): from the first epoch whose radius
// is at most `max_radius`, each document keeps a lower bound on the scores of
// every strip of strip_nodes nodes; the update reports how far each strip
// could have come closer, and later epochs search only the strips that could
// hold the BMU. Same BMUs, scores, codebooks and final quality, bit for bit;
// the per-epoch topographic error of a bounded epoch is approximate (second
// best over the searched strips), the final pass is exhaustive. Memory: 4 x
// ceil(nodes / strip_nodes) bytes per document (1 KB at 64x64: 30.6 GB at
// 29.9 M documents) plus 4 x features x groups; when that cannot be had, or
// the backend cannot take the strip, training goes on without bounds (logged).
// Off until measured on a GPU. Not persisted.
struct GroupBoundOptions {
  bool enabled = false;
  int strip_nodes = 16;     // nodes per group (CUDA: 4, 8, 16, 32, 64 or 128)
  double max_radius = -1;   // <= 0: the convergence rule's small radius
};

struct TrainOptions {
  GridShape grid{32, 32, Topology::kPlanar};
  Backend backend = Backend::kCpu;
  int gpu_ordinal = 0;
  WeightType weight_type = WeightType::kFloat32;
  InitMethod init = InitMethod::kPca;
  int64_t pca_sample_rows = 200000;
  int pca_iterations = 40;
  // With backend kCuda and init kPca: PCA and codebook fill on the GPU (the
  // same iteration as the CPU reference, kernels/som/pca.h); false: on the
  // host, then uploaded (bit-identical training trajectories across
  // backends, trainer_cuda_test). Not persisted.
  bool pca_on_device = true;
  uint64_t seed = 1;
  int max_epochs = 40;
  double radius_start = -1;    // <= 0: the schedule's (StartRadius)
  double radius_end = -1;      // < 0: the schedule's (EndRadius)
  int radius_decay_epochs = 10;
  RadiusCooling cooling = RadiusCooling::kExponential;
  RadiusSchedule radius_schedule = RadiusSchedule::kNarrow;
  int blur_passes = 3;
  double convergence_tolerance = 1e-3;  // <= 0 disables early stopping
  int convergence_patience = 3;
  double small_radius = -1;    // <= 0: 1.25 * EndRadius
  int64_t update_slab_bytes = int64_t{256} << 20;  // CUDA update working set
  // CUDA: QE and TE of each epoch from the BMU results where they are
  // (kernels/som/quality_device.h), instead of downloading three values per
  // document (360 MB at 29.9 M documents) for the host pass. Same terms,
  // summed in another order (~1e-15 relative). Not persisted.
  bool quality_on_device = true;
  // BMU search: kFeatureMajor (fused kernel, any backend and weight type) or,
  // on CUDA with fp32 weights, kCusparseRowOrder (cuSPARSE SpMM + top-2 pass,
  // faster on an H200 today; see bench/results/2026-11-30-h200-som.md).
  BmuAlgorithm bmu_algorithm = BmuAlgorithm::kFeatureMajor;
  // How the CUDA BMU kernels run (benchmarks sweep it; same results whatever
  // it is). Not persisted.
  BmuTuning bmu_tuning;
  GroupBoundOptions group_bounds;
  std::function<void(const EpochReport&)> progress;
  // Asked before each epoch; true stops training with CANCELLED (a service's
  // CancelJob). Not persisted.
  std::function<bool()> should_stop;
};

// A trained map: feature-major codebook on the host.
struct SomModel {
  GridShape grid;
  int64_t features = 0;
  WeightType type = WeightType::kFloat32;
  std::vector<float> weights_f32;      // features x nodes when type is fp32
  std::vector<uint16_t> weights_f16;   // ... when fp16 (IEEE half bits)
  std::vector<float> sq_norms;
  CodebookView view();  // host view (const-cast for kernel calls)
  float Weight(int64_t feature, int64_t node) const;
};

struct TrainResult {
  SomModel model;
  std::vector<EpochReport> history;
  int epochs = 0;
  bool converged = false;         // stopped by the convergence rule
  QualityMetrics final_quality;   // of the returned codebook on the training rows
  double init_seconds = 0;        // mean, PCA, codebook fill, norms (on the GPU with pca_on_device)
  double setup_seconds = 0;       // documents, tiles, CSC (and a host-initialised codebook) into the backend's memory
  double final_seconds = 0;       // the final BMU pass, its quality and the codebook's download
  double total_seconds = 0;       // upload, init, epochs and the final pass
};

// r0 and r1 with the schedule's defaults filled in (r1 <= r0).
double StartRadius(const TrainOptions& options);
double EndRadius(const TrainOptions& options);
double RadiusAt(const TrainOptions& options, int epoch);

absl::StatusOr<TrainResult> TrainSom(const SparseBinaryMatrix& train, const TrainOptions& options);

// Projects documents onto a trained map: BMU and second-best unit per document
// and the quality measures (held-out evaluation).
struct Projection {
  std::vector<int32_t> bmu;
  std::vector<int32_t> second;
  std::vector<float> score;
  QualityMetrics quality;
};
absl::StatusOr<Projection> ProjectDocuments(SomModel& model, const SparseBinaryMatrix& docs, Backend backend,
                                            int gpu_ordinal = 0, Adjacency adjacency = Adjacency::kFour);

// The initial codebook alone (tests and tools), on the host; with backend
// kCuda, init kPca and pca_on_device it is computed on the GPU and copied back.
absl::StatusOr<SomModel> InitializeModel(const SparseBinaryMatrix& train, const TrainOptions& options);

// The PCA initial codebook written into `codebook` (feature-major, in the
// stream's backend memory, options.grid's nodes x train.cols() features) with
// its sq_norms: mean of all rows, components of the sample (pca.h) on the
// stream's backend, then the fill there.
absl::Status InitializePcaCodebook(const Stream& stream, const SparseBinaryMatrix& train,
                                   const TrainOptions& options, const CodebookView& codebook);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_TRAINER_H_
