#include "kernels/registration/pipeline/label_dice.h"

#include <limits>

#include "common/status.h"

namespace tessera::registration {

DiceMeans SummarizeDice(const LabelMetrics& metrics, int64_t min_voxels) {
  DiceMeans out;
  double all = 0, large = 0;
  for (const LabelScore& s : metrics.labels) {
    all += s.dice;
    ++out.labels;
    if (s.voxels_a >= min_voxels) {
      large += s.dice;
      ++out.large_labels;
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.mean_all = out.labels > 0 ? all / out.labels : nan;
  out.mean_large = out.large_labels > 0 ? large / out.large_labels : nan;
  return out;
}

absl::StatusOr<DiceMeans> ComputeDiceMeans(const NDArray& fixed_labels, const NDArray& moving_on_fixed,
                                           const Geometry& geometry, int64_t min_voxels) {
  LabelMetricsOptions options;
  options.hausdorff = false;
  options.spacing_mm = geometry.spacing;
  TESSERA_ASSIGN_OR_RETURN(LabelMetrics m, ComputeLabelMetrics(fixed_labels, moving_on_fixed, options));
  return SummarizeDice(m, min_voxels);
}

void LabelOverlapCounts::Merge(const LabelOverlapCounts& other) {
  for (size_t l = 0; l < fixed.size() && l < other.fixed.size(); ++l) {
    fixed[l] += other.fixed[l];
    moving[l] += other.moving[l];
    both[l] += other.both[l];
  }
}

DiceMeans SummarizeDice(const LabelOverlapCounts& counts, int64_t min_voxels) {
  // The LabelMetrics ComputeLabelMetrics would build (Dice only): a label is
  // listed when either map has it; the background (0) never is.
  LabelMetrics metrics;
  for (size_t l = 1; l < counts.fixed.size(); ++l) {
    const int64_t a = counts.fixed[l], b = counts.moving[l];
    if (a + b == 0) continue;
    LabelScore s;
    s.label = static_cast<int64_t>(l);
    s.voxels_a = a;
    s.voxels_b = b;
    s.intersection = counts.both[l];
    s.dice = 2.0 * double(s.intersection) / double(a + b);
    metrics.labels.push_back(s);
  }
  return SummarizeDice(metrics, min_voxels);
}

}  // namespace tessera::registration
