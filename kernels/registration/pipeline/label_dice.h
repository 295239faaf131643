// The two Dice summaries `tessera register` reports for a pair of label maps
// (fixed labels vs moving labels on the fixed grid), because one mean hides
// what the other shows:
//   mean_all    mean Dice over every label present in either map (label 0,
//               the background, excluded): LabelMetrics::mean_dice, the
//               definition of dice_before/dice_after since the start. Tiny
//               labels (a few voxels, where one voxel of misalignment costs
//               most of the overlap) weigh as much as large ones.
//   mean_large  mean Dice over the labels with at least kLargeLabelMinVoxels
//               voxels in the *fixed* map (the reference), so the label set is
//               the same before and after registration. 1000 voxels = 1 ml at
//               1 mm isotropic: the size below which anatomical atlases' labels
//               are mostly partial-volume slivers.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_LABEL_DICE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_LABEL_DICE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "common/volume.h"
#include "kernels/registration/label_metrics.h"

namespace tessera::registration {

constexpr int64_t kLargeLabelMinVoxels = 1000;

struct DiceMeans {
  double mean_all = 0;    // NaN when no label is present
  double mean_large = 0;  // NaN when no label reaches min_voxels
  int labels = 0;         // labels in mean_all
  int large_labels = 0;   // labels in mean_large
};

// From per-label scores (LabelScore::voxels_a is the fixed map's count).
DiceMeans SummarizeDice(const LabelMetrics& metrics, int64_t min_voxels = kLargeLabelMinVoxels);

// Dice only (no Hausdorff) of `fixed_labels` vs `moving_on_fixed`, same shape.
absl::StatusOr<DiceMeans> ComputeDiceMeans(const NDArray& fixed_labels, const NDArray& moving_on_fixed,
                                           const Geometry& geometry, int64_t min_voxels = kLargeLabelMinVoxels);

// Per-label voxel counts of a fixed and a warped label map (labels 0..labels-1),
// accumulated piece by piece, so that volumes too large to hold twice (slabs of
// a gigavoxel grid) are scored without whole label maps. SummarizeDice of the
// counts equals ComputeDiceMeans of the whole maps exactly: same counts, same
// per-label Dice 2|A n B| / (|A| + |B|), same summation order (ascending label).
struct LabelOverlapCounts {
  explicit LabelOverlapCounts(int labels = 256) : fixed(labels), moving(labels), both(labels) {}
  // The caller keeps labels in [0, labels); 0 is the background and not scored.
  void Add(int32_t fixed_label, int32_t moving_label) {
    ++fixed[fixed_label];
    ++moving[moving_label];
    both[fixed_label] += fixed_label == moving_label;
  }
  void Merge(const LabelOverlapCounts& other);
  std::vector<int64_t> fixed, moving, both;  // indexed by label value
};

DiceMeans SummarizeDice(const LabelOverlapCounts& counts, int64_t min_voxels = kLargeLabelMinVoxels);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_LABEL_DICE_H_
