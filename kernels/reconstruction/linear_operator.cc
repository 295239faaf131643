#include "kernels/reconstruction/linear_operator.h"

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"

namespace tessera {
namespace recon {

int64_t LinearOperator::range_size(int subset) const {
  return static_cast<int64_t>(SubsetViews(num_views(), num_subsets(), subset).size()) * elements_per_view();
}

std::vector<int64_t> SubsetViews(int64_t num_views, int num_subsets, int subset) {
  std::vector<int64_t> views;
  if (subset == kAllSubsets || num_subsets <= 1) {
    views.resize(num_views);
    for (int64_t i = 0; i < num_views; ++i) views[i] = i;
    return views;
  }
  for (int64_t v = subset; v < num_views; v += num_subsets) views.push_back(v);
  return views;
}

absl::Status CopySubset(const Stream& stream, int64_t num_views, int64_t per_view, int num_subsets, int subset,
                        SubsetCopy direction, const float* from, float* to) {
  if (subset != kAllSubsets && (subset < 0 || subset >= num_subsets)) {
    return absl::InvalidArgumentError(absl::StrCat("subset ", subset, " out of range [0, ", num_subsets, ")"));
  }
  const MemoryKind kind = MemoryKindFor(stream);
  const std::vector<int64_t> views = SubsetViews(num_views, num_subsets, subset);
  const size_t bytes = static_cast<size_t>(per_view) * sizeof(float);
  for (size_t k = 0; k < views.size(); ++k) {
    const int64_t full = views[k] * per_view, compact = static_cast<int64_t>(k) * per_view;
    const float* src = from + (direction == SubsetCopy::kFullToCompact ? full : compact);
    float* dst = to + (direction == SubsetCopy::kFullToCompact ? compact : full);
    if (absl::Status s = CopyBytes(dst, kind, src, kind, bytes, stream); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace recon
}  // namespace tessera
