// Batch-SOM update with a box-blur neighbourhood, for a feature-major codebook.
//
// Given each training document's BMU:
//   counts[i]   = number of documents whose BMU is node i
//   sums[v][i]  = number of those documents that have feature v
// Both are blurred over the map grid by a Gaussian-like neighbourhood, and
//   w_i[v] = blurred_sums[v][i] / blurred_counts[i]
// wherever the blurred count is positive; nodes whose blurred count is 0 (no
// document anywhere in their neighbourhood) keep their old weights. Then
// ||w_i||^2 is recomputed (bmu.h: ComputeSqNorms, same on both backends).
//
// Neighbourhood: k = `passes` unnormalised box filters of half-width b along
// x, then k along y (separable: the axes commute); by the central limit
// theorem k boxes approximate a Gaussian of variance k ((2b+1)^2 - 1) / 12 per
// axis. Each pass
// is a running window sum, so the cost is independent of the radius. The
// normalisation cancels in sums / counts. Planar grids truncate the window at
// the border (sums and counts alike); toroidal grids wrap (a window wider than
// the map counts cells more than once, as a wrapped Gaussian would).
// Window sums are accumulated in double, so on integer-valued inputs (counts)
// they are exact and the CPU and CUDA results agree bit for bit. The 3-tap
// kernel for small radii computes c + a (l + r) in double without FMA
// contraction on both backends, so it agrees bit for bit too.
//
// Feature-at-a-time: the CPU backend builds, blurs and divides one feature
// plane (M floats) per worker; CUDA does the same for slabs of features sized
// to UpdateOptions::slab_bytes, so memory beyond the codebook stays bounded.
#ifndef TESSERA_KERNELS_SOM_BATCH_UPDATE_H_
#define TESSERA_KERNELS_SOM_BATCH_UPDATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/som/group_bounds.h"
#include "kernels/som/types.h"
#include "kernels/som/workspace.h"

namespace tessera {
namespace som {

struct BoxBlur {
  int half_width = 0;  // b: each box covers 2b + 1 cells
  int passes = 3;      // k
  // Radii too small for a box (b rounds to 0): one pass per axis of the
  // sampled Gaussian [a, 1, a], a = exp(-1 / (2 r^2)); 0 is the identity.
  double side_weight = 0;
};

// b = round((sqrt(12 r^2 / k + 1) - 1) / 2) for a Gaussian of standard
// deviation `radius` cells. Where that is 0 (r < ~0.87 for k = 3) and r >
// 0.25, the 3-tap kernel instead (side_weight); below 0.25, the identity.
BoxBlur BoxBlurForRadius(double radius, int passes = 3);
// The standard deviation the filter actually gives: sqrt(k ((2b+1)^2 - 1) / 12)
// for boxes, sqrt(2a / (1 + 2a)) for the 3-tap kernel.
double EffectiveSigma(const BoxBlur& blur);

struct UpdateOptions {
  // CUDA: bytes of each of the two per-slab buffers (features per slab =
  // slab_bytes / (4 M), at least 1).
  int64_t slab_bytes = int64_t{256} << 20;
  // When weight_rise and norm_change are set (the stream's backend memory):
  // per group of strip_nodes nodes, the largest rise of each feature's
  // weight and the smallest change of ||w||^2 (group_bounds.h), from the old
  // and new values the update holds (no second codebook).
  GroupDriftView group_drift;
};

// `bmu` has docs_by_feature.docs entries; all pointers in the stream's backend
// memory; the codebook must be feature-major with nodes == grid.nodes().
absl::Status BatchUpdate(const Stream& stream, const CscView& docs_by_feature, const int32_t* bmu,
                         const GridShape& grid, const BoxBlur& blur, const CodebookView& codebook,
                         SomWorkspace* workspace = nullptr, const UpdateOptions& options = UpdateOptions());

// Blurs `num_planes` consecutive width x height float planes in place.
absl::Status BoxBlurPlanes(const Stream& stream, float* planes, int64_t num_planes, const GridShape& grid,
                           const BoxBlur& blur, SomWorkspace* workspace = nullptr);

absl::Status CheckGrid(const GridShape& grid, const char* who);

namespace cpu {
// Working memory for BoxBlurPlane (grown on demand; one per thread).
struct BlurScratch {
  std::vector<float> a, b, zeros;
  std::vector<double> acc;
};
// One plane in place: k passes along x (on a transposed copy, so every axis
// pass is a running sum over whole rows of lanes), then k along y (or the
// 3-tap kernel once along x, then y).
void BoxBlurPlane(float* plane, const GridShape& grid, const BoxBlur& blur, BlurScratch& scratch);
// Plain reference: explicit window sums, k times along x then k times along
// y (or the 3-tap kernel along x then y), fp32 between axis passes as in
// BoxBlurPlane (O(M * window) per pass; tests only).
void BoxBlurPlaneDirect(const float* in, float* out, const GridShape& grid, const BoxBlur& blur);
void BatchUpdate(const CscView& docs_by_feature, const int32_t* bmu, const GridShape& grid, const BoxBlur& blur,
                 const CodebookView& codebook, const GroupDriftView* drift = nullptr);
}  // namespace cpu

namespace cuda {
absl::Status BatchUpdate(const Stream& stream, const CscView& docs_by_feature, const int32_t* bmu,
                         const GridShape& grid, const BoxBlur& blur, const CodebookView& codebook,
                         SomWorkspace* workspace, const UpdateOptions& options);
absl::Status BoxBlurPlanes(const Stream& stream, float* planes, int64_t num_planes, const GridShape& grid,
                           const BoxBlur& blur, SomWorkspace* workspace);
}  // namespace cuda

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_BATCH_UPDATE_H_
