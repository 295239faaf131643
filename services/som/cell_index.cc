#include "services/som/cell_index.h"

#include "absl/strings/str_cat.h"

namespace tessera {
namespace som {

absl::StatusOr<CellIndex> CellIndex::Build(absl::Span<const int32_t> bmu, int64_t nodes) {
  if (nodes < 1) return absl::InvalidArgumentError(absl::StrCat("CellIndex: the map has ", nodes, " nodes"));
  if (bmu.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("CellIndex: ", bmu.size(), " documents exceed int32 ids"));
  }
  CellIndex index;
  index.offsets_.assign(static_cast<size_t>(nodes) + 1, 0);
  for (size_t d = 0; d < bmu.size(); ++d) {
    if (bmu[d] < 0 || bmu[d] >= nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("CellIndex: document ", d, " has BMU ", bmu[d], ", outside the ", nodes, "-node map"));
    }
    ++index.offsets_[bmu[d] + 1];
  }
  for (int64_t i = 0; i < nodes; ++i) index.offsets_[i + 1] += index.offsets_[i];
  // Documents in increasing order, so each cell's list is ascending.
  std::vector<int64_t> next(index.offsets_.begin(), index.offsets_.end() - 1);
  index.docs_.resize(bmu.size());
  for (size_t d = 0; d < bmu.size(); ++d) index.docs_[next[bmu[d]]++] = static_cast<int32_t>(d);
  return index;
}

absl::StatusOr<absl::Span<const int32_t>> CellIndex::Documents(int64_t node) const {
  if (node < 0 || node >= nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", node, " is off the map (0..", nodes() - 1, ")"));
  }
  return absl::MakeConstSpan(docs_).subspan(static_cast<size_t>(offsets_[node]),
                                            static_cast<size_t>(offsets_[node + 1] - offsets_[node]));
}

}  // namespace som
}  // namespace tessera
