// Deformable minutiae clustering (DMC, Medina-Perez et al., "Latent
// fingerprint identification using deformable minutiae clustering",
// Neurocomputing 175, 2016), GPU part as in ALFI: kernels 2-4 over a batch
// of gallery templates. The CPU final stage (cluster consolidation, thin-plate
// spline, final similarity) is services/fingerprint/search/dmc_final_stage.h.
//
// Terms: the latent L (probe) and the gallery templates are MCC templates
// (kernels/fingerprint/mcc.h); a "minutia" here is a valid cylinder. A batch
// is a contiguous range of gallery templates in MccGallery's structure of
// arrays with its own start table (start[0] = 0); i indexes the batch's
// cylinders, template t owns [start[t], start[t+1]).
//
// Kernel 2 (local matching), one thread per gallery minutia i:
//   best[i] = argmax over latent minutiae l with |dphi(theta_l, theta_i)| <=
//   delta_theta and lambda(l, i) > min_similarity of lambda(l, i), the MCC
//   local similarity of lss.h (common cells >= minME, popcounts); -1 when
//   there is none. Ties: the lowest l. Candidates come from LUT_D: the 256
//   directions bins b = floor(wrap(theta) * 256 / 2 pi); bin b lists (in
//   ascending order) the latent minutiae within delta_theta + 2 pi / 256 of
//   the bin centre - a superset of the matchable ones, so the result equals
//   the scan over all latent minutiae. Latent cylinders sit in shared memory.
// Kernel 3 (minutia quality), one thread per gallery minutia i of template t:
//   with N_i the other minutiae of t within quality_radius of i and
//   w_ij = exp(-d_ij^2 / (2 quality_sigma^2)),
//     C_i = sum_{j in N_i} w_ij cos(2 dphi(theta_j, theta_i)),  W_i = sum w_ij
//     q_i = 1/2 + 1/2 C_i / (W_i + quality_prior)           (in [0, 1])
//   i.e. how well the ridge flow around i (orientations mod pi, from the
//   neighbours' directions) agrees with i's own: 1/2 without neighbours, near
//   1 in a consistent neighbourhood, low for a minutia across the flow (often
//   spurious). The latent's qualities use the same definition (on the host).
// Kernel 4 (clusters), one thread per gallery minutia i with l = best[i]:
//   align L to the gallery by the pair (l, i): rotation a = dphi(theta_i,
//   theta_l) about the latent minutia, then translation onto i. A gallery
//   minutia k != i of the same template joins i's cluster when best[k] = l_k
//   exists, l_k != l, |T(p_lk) - p_k| <= cluster_distance, |dphi(theta_lk + a,
//   theta_k)| <= cluster_angle and |p_k - p_i| <= cluster_radius (the rigid
//   alignment only holds locally). Members (local indices within the
//   template, ascending, i itself first) are kept up to kDmcMaxClusterSize;
//   count[i] = members, 0 when i has no match. Unmatched minutiae run the same
//   instructions with the dummy latent minutia 0 ("virtual match", no warp
//   divergence) and their results are discarded by count = 0.
//
// Rotations: angles are counterclockwise on the displayed image with y down
// (template.h), so rotating (dx, dy) by a is (dx cos a + dy sin a,
// -dx sin a + dy cos a).
//
// Determinism: the CPU reference (namespace cpu) and the CUDA kernels run the
// same per-thread code (dmc_impl.h) with fp_math.h's rules (products through
// Mul, no FMA contraction, our own exp/cos/sin), so all outputs are identical
// bit for bit between backends.
#ifndef TESSERA_KERNELS_FINGERPRINT_DMC_H_
#define TESSERA_KERNELS_FINGERPRINT_DMC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/fingerprint/mcc.h"

namespace tessera {
namespace fingerprint {

inline constexpr int kDmcLutBins = 256;          // z, quantized directions of LUT_D
inline constexpr int kDmcMaxClusterSize = 32;    // K, members kept per cluster (centre included)
inline constexpr int kDmcMaxLatentMinutiae = 255;

struct DmcParams {
  float delta_theta = 1.57079633f;  // pi/2: directions of matchable minutiae (as LSS)
  double min_matchable = 0.6;       // minME: common valid cells / cells in the circle (as LSS)
  float min_similarity = 0.0f;      // a best match needs lambda above this
  float cluster_distance = 15.0f;   // pixels, after the local alignment
  float cluster_angle = 0.5235988f;  // pi/6
  float cluster_radius = 130.0f;    // pixels from the cluster centre (gallery side)
  float quality_radius = 60.0f;     // pixels
  float quality_sigma = 30.0f;      // pixels
  float quality_prior = 1.0f;       // pseudo-weight of "no information"
};

// The floats both backends use (derived once on the host).
struct DmcConstants {
  float delta_theta;     // + 1e-5 rad slack, as lss.h
  int min_common_cells;  // ceil(minME * cells in circle)
  float min_similarity;
  float cluster_distance2, cluster_angle, cluster_radius2;
  float quality_radius2, quality_exp_scale;  // -1 / (2 sigma^2)
  float quality_prior;
  float lut_margin;  // delta_theta + 2 pi / kDmcLutBins
};
// INVALID_ARGUMENT for non-finite or out-of-range parameters.
absl::StatusOr<DmcConstants> MakeDmcConstants(const DmcParams& params, const MccParams& mcc = {});

// ---------------------------------------------------------------------------
// The latent, prepared once per search (host), and its device copy.
struct DmcLatentView {
  const uint64_t* bits = nullptr;  // n x kMccBitWords, cylinder-major
  const uint64_t* mask = nullptr;  // n x kMccMaskWords
  const float* x = nullptr;
  const float* y = nullptr;
  const float* theta = nullptr;
  const uint16_t* bit_count = nullptr;
  const float* quality = nullptr;      // kernel 3's definition on the latent
  const int32_t* lut_offset = nullptr;  // kDmcLutBins + 1: bin b lists lut_index[lut_offset[b] .. lut_offset[b+1])
  const int16_t* lut_index = nullptr;
  int n = 0;
};

struct DmcLatent {
  MccTemplate cylinders;  // as given (the final stage reads it)
  std::vector<uint64_t> bits, mask;
  std::vector<float> x, y, theta, quality;
  std::vector<uint16_t> bit_count;
  std::vector<int32_t> lut_offset;
  std::vector<int16_t> lut_index;
  int n() const { return static_cast<int>(x.size()); }
  DmcLatentView view() const;  // host pointers into this object
};
// INVALID_ARGUMENT for more than kDmcMaxLatentMinutiae cylinders or
// non-finite coordinates.
absl::StatusOr<DmcLatent> PrepareDmcLatent(const MccTemplate& latent, const DmcConstants& constants);

// The latent in device memory (one buffer). The view's pointers are device
// pointers, valid while this object lives.
class DmcDeviceLatent {
 public:
  // Copies asynchronously on `stream` (CUDA); `latent` must stay alive and
  // unchanged until the stream has passed the copy. FAILED_PRECONDITION
  // without CUDA.
  static absl::StatusOr<DmcDeviceLatent> Upload(const DmcLatent& latent, const Stream& stream);
  const DmcLatentView& view() const { return view_; }

 private:
  std::shared_ptr<Buffer> buffer_;
  DmcLatentView view_;
};

// ---------------------------------------------------------------------------
// A batch of gallery templates (host or device pointers): MccGallery's layout
// (see mcc.h) for templates [begin, end), rebased so start[0] = 0.
struct DmcBatchView {
  const int32_t* start = nullptr;  // num_templates + 1
  const uint64_t* bits = nullptr;  // kMccBitWords per cylinder, template-blocked, word-major
  const uint64_t* mask = nullptr;  // kMccMaskWords per cylinder, likewise
  const float* x = nullptr;
  const float* y = nullptr;
  const float* theta = nullptr;
  const uint16_t* bit_count = nullptr;
  int num_templates = 0;
  int num_cylinders = 0;
};

// Host view of templates [begin, end) of `gallery`: pointers into `gallery`
// (offset by gallery.start[begin]) and into `*start`, which receives the
// rebased start table (both must outlive the view). For a device batch copy
// the same element ranges - cylinders [s0, s1) = [gallery.start[begin],
// gallery.start[end]): bits/mask elements [kMccBitWords * s0, kMccBitWords *
// s1) / [kMccMaskWords * s0, ...), x/y/theta/bit_count [s0, s1) - and the
// rebased table.
DmcBatchView HostBatchView(const MccGallery& gallery, int begin, int end, std::vector<int32_t>* start);

// ---------------------------------------------------------------------------
// Kernel outputs for a batch of N cylinders (caller-provided; host or device).
//   best_latent[i]: kernel 2's best latent minutia or -1;
//   similarity[i]: its lambda (0 when none);
//   quality[i]:    kernel 3's q_i;
//   cluster_count[i]: kernel 4's member count (0: no match);
//   cluster_members[j * N + i], j < cluster_count[i]: member j's index within
//     i's template (member-major so a warp's stores coalesce).
struct DmcKernelResults {
  int16_t* best_latent = nullptr;
  float* similarity = nullptr;
  float* quality = nullptr;
  uint8_t* cluster_count = nullptr;
  uint8_t* cluster_members = nullptr;  // kDmcMaxClusterSize * N
};

// One contiguous block for all outputs of N cylinders (one allocation, one
// device-to-host copy): DmcResultsBytes(N) bytes, carved by DmcResultsAt.
size_t DmcResultsBytes(int num_cylinders);
DmcKernelResults DmcResultsAt(void* base, int num_cylinders);  // base: 16-byte aligned

// Checks sizes (latent <= 255, template sizes 0..255, N consistent). Reads
// `batch.start` so host views only (the device entry point checks sizes
// given on the host).
absl::Status ValidateDmcBatch(const DmcLatentView& latent, const DmcBatchView& batch);

namespace cpu {
// The reference and CPU backend of kernels 2, 3, 4 (in that order; 4 reads
// 2's outputs) over the batch with `threads` threads (0 = all).
void RunDmcKernels(const DmcLatentView& latent, const DmcBatchView& batch, const DmcConstants& constants,
                   const DmcKernelResults& out, int threads = 1);
// The kernels one at a time (single-threaded).
void LocalMatching(const DmcLatentView& latent, const DmcBatchView& batch, const DmcConstants& constants,
                   int16_t* best_latent, float* similarity);
void MinutiaQuality(const DmcBatchView& batch, const DmcConstants& constants, float* quality);
void FindClusters(const DmcLatentView& latent, const DmcBatchView& batch, const DmcConstants& constants,
                  const int16_t* best_latent, uint8_t* cluster_count, uint8_t* cluster_members);
// q_i of kernel 3 for a template given as coordinate arrays (the latent's).
void TemplateQuality(int n, const float* x, const float* y, const float* theta, const DmcConstants& constants,
                     float* quality);
}  // namespace cpu

// ---------------------------------------------------------------------------
// CUDA entry point for pipelines: ENQUEUES kernels 2, 3, 4 on `cuda_stream`
// (a cudaStream_t) for a batch already in device memory, writing `out`
// (device memory, sized for batch.num_cylinders). No host synchronisation, no
// allocation: the call returns once the kernels are queued. `latent` and
// `batch` hold device pointers; their n / num_templates / num_cylinders and
// `max_template_size` (largest template of the batch, <= 255) are host
// values. FAILED_PRECONDITION without CUDA; INVALID_ARGUMENT for sizes out of
// range.
absl::Status EnqueueDmcKernels(void* cuda_stream, const DmcLatentView& latent, const DmcBatchView& batch,
                               int max_template_size, const DmcConstants& constants, const DmcKernelResults& out);

// Convenience for tests and single searches: kernels 2-4 for templates
// [begin, end) of a host gallery on `stream`'s backend (CUDA: upload, enqueue,
// download, synchronize), results into host memory.
absl::Status RunDmcKernelsOnGallery(const Stream& stream, const DmcLatent& latent, const MccGallery& gallery,
                                    int begin, int end, const DmcConstants& constants,
                                    const DmcKernelResults& host_out, int threads = 1);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_DMC_H_
