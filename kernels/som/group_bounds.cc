// The BMU search with score-space group bounds (group_bounds.h): argument
// checks, backend dispatch and the CPU version (also the reference).
#include "kernels/som/group_bounds.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/som/cpu_clones.h"
#include "kernels/som/parallel.h"

namespace tessera {
namespace som {

const char* GroupBoundsUnsupportedReason(Backend backend, const CodebookView& cb, int strip_nodes) {
  if (cb.layout != CodebookLayout::kFeatureMajor) return "group bounds need a feature-major codebook";
  if (strip_nodes < 1) return "group bounds need at least one node per group";
  if (backend == Backend::kCuda) {
    const int s = strip_nodes;
    if (s != 4 && s != 8 && s != 16 && s != 32 && s != 64 && s != 128) {
      return "CUDA group bounds take 4, 8, 16, 32, 64 or 128 nodes per group";
    }
    if (cb.nodes % 4 != 0) return "CUDA group bounds need a node count that is a multiple of 4";
  }
  return "";
}

namespace cpu {

float MaxSqNorm(const CodebookView& cb) {
  float max_norm = 0;
  for (int64_t i = 0; i < cb.nodes; ++i) {
    const float n = cb.sq_norms[i];
    if (n != n) return std::numeric_limits<float>::infinity();
    max_norm = std::max(max_norm, n);
  }
  return max_norm;
}

namespace {

TESSERA_SOM_CLONES void AddStrip(float* __restrict acc, const float* __restrict row, int n) {
  for (int i = 0; i < n; ++i) acc[i] += row[i];
}

TESSERA_SOM_CLONES void AddHalfStrip(float* __restrict acc, const uint16_t* __restrict row, int n,
                                     const float* __restrict table) {
  for (int i = 0; i < n; ++i) acc[i] += table[row[i]];
}

TESSERA_SOM_CLONES void AddRises(double* __restrict sums, const float* __restrict row, int64_t n) {
  for (int64_t g = 0; g < n; ++g) sums[g] += row[g];
}

// Scores of group g's nodes for one document, with the search kernels'
// operations (fp32 from 0 over the features in ascending order, then
// n - 2 sum: the same bits); inserted into `best`; returns their minimum
// (-inf when one is NaN).
float SearchGroup(const CodebookView& cb, const float* table, const int32_t* f, int64_t nnz, int64_t g, int strip,
                  float* acc, Top2& best) {
  const int64_t j0 = g * strip;
  const int n = static_cast<int>(std::min<int64_t>(strip, cb.nodes - j0));
  std::fill(acc, acc + n, 0.0f);
  for (int64_t k = 0; k < nnz; ++k) {
    const int64_t start = static_cast<int64_t>(f[k]) * cb.nodes + j0;
    if (table == nullptr) {
      AddStrip(acc, static_cast<const float*>(cb.weights) + start, n);
    } else {
      AddHalfStrip(acc, static_cast<const uint16_t*>(cb.weights) + start, n, table);
    }
  }
  float minimum = std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) {
    const float s = cb.sq_norms[j0 + i] - 2.0f * acc[i];
    best.Insert(s, static_cast<int32_t>(j0 + i));
    minimum = group_bounds::MinimumOrNan(minimum, s);
  }
  return minimum;
}

}  // namespace

void FindBmusGroupBounded(const CsrView& docs, const CodebookView& cb, const BmuOutput& out,
                          const GroupBoundsView& bounds, const GroupDriftView* drift, GroupSearchStats* stats) {
  const int strip = bounds.strip_nodes;
  const int64_t groups = bounds.groups;
  const float* table = cb.type == WeightType::kFloat16 ? HalfTable() : nullptr;
  const float max_norm = MaxSqNorm(cb);
  struct Counts {
    int64_t searched = 0, skipped = 0;
  };
  std::vector<Counts> counts(CpuThreads());
  ParallelForDynamic(docs.rows, 64, [&](int64_t d0, int64_t d1, int worker) {
    std::vector<float> acc(static_cast<size_t>(strip));
    std::vector<double> rises(drift != nullptr ? static_cast<size_t>(groups) : 0);
    Counts& c = counts[worker];
    for (int64_t d = d0; d < d1; ++d) {
      const int32_t* f = docs.indices + docs.offsets[d];
      const int64_t nnz = docs.offsets[d + 1] - docs.offsets[d];
      const double err = group_bounds::ScoreErrorBound(nnz, max_norm);
      float* lower = bounds.lower + d * groups;
      Top2 best = Top2::Empty();
      const int32_t b = drift != nullptr ? out.bmu[d] : -1;
      if (b < 0 || b >= cb.nodes) {
        // A full search (also a bounded one's document without a valid BMU).
        for (int64_t g = 0; g < groups; ++g) {
          lower[g] = group_bounds::BoundFromMinimum(SearchGroup(cb, table, f, nnz, g, strip, acc.data(), best), err);
        }
        c.searched += groups;
      } else {
        // b's group first: it gives b's new score (the same bits as any search).
        const int64_t gb = b / strip;
        lower[gb] = group_bounds::BoundFromMinimum(SearchGroup(cb, table, f, nnz, gb, strip, acc.data(), best), err);
        const float bmu_score = cb.sq_norms[b] - 2.0f * acc[b - gb * strip];
        std::fill(rises.begin(), rises.end(), 0.0);
        for (int64_t k = 0; k < nnz; ++k) AddRises(rises.data(), drift->weight_rise + int64_t{f[k]} * groups, groups);
        int64_t searched = 1;
        for (int64_t g = 0; g < groups; ++g) {
          if (g == gb) continue;
          const float moved = group_bounds::BoundAfterDrift(lower[g], drift->norm_change[g], rises[g]);
          if (group_bounds::GroupExcluded(moved, err, bmu_score)) {
            lower[g] = moved;
          } else {
            lower[g] =
                group_bounds::BoundFromMinimum(SearchGroup(cb, table, f, nnz, g, strip, acc.data(), best), err);
            ++searched;
          }
        }
        c.searched += searched;
        if (searched == 1) ++c.skipped;
      }
      out.bmu[d] = best.i1;
      if (out.second != nullptr) out.second[d] = best.i2 == kNoNode ? -1 : best.i2;
      if (out.score != nullptr) out.score[d] = best.s1;
    }
  });
  if (stats != nullptr) {
    stats->documents = docs.rows;
    stats->pairs = docs.rows * groups;
    for (const Counts& c : counts) {
      stats->pairs_searched += c.searched;
      stats->documents_skipped += c.skipped;
    }
  }
}

}  // namespace cpu

absl::Status FindBmusGroupBounded(const Stream& stream, const DocumentSet& docs, const CodebookView& codebook,
                                  const BmuOutput& out, const GroupBoundsView& bounds, const GroupDriftView* drift,
                                  SomWorkspace* workspace, const BmuHints& hints, GroupSearchStats* stats) {
  TESSERA_RETURN_IF_ERROR(CheckCodebook(codebook, "FindBmusGroupBounded"));
  const char* unsupported = GroupBoundsUnsupportedReason(stream.backend(), codebook, bounds.strip_nodes);
  if (*unsupported != '\0') return absl::InvalidArgumentError(absl::StrCat("FindBmusGroupBounded: ", unsupported));
  if (docs.csr().cols != codebook.features) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmusGroupBounded: documents have ", docs.csr().cols,
                                                   " features, the codebook ", codebook.features));
  }
  if (bounds.groups != GroupCount(codebook.nodes, bounds.strip_nodes) || bounds.lower == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("FindBmusGroupBounded: bounds need ", GroupCount(codebook.nodes, bounds.strip_nodes),
                     " groups per document, got ", bounds.groups));
  }
  if (drift != nullptr && (drift->strip_nodes != bounds.strip_nodes || drift->groups != bounds.groups ||
                           drift->weight_rise == nullptr || drift->norm_change == nullptr)) {
    return absl::InvalidArgumentError("FindBmusGroupBounded: the drift's groups are not the bounds' groups");
  }
  if (out.bmu == nullptr || out.score == nullptr) {
    return absl::InvalidArgumentError("FindBmusGroupBounded: needs bmu and score outputs");
  }
  if (docs.rows() >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError("FindBmusGroupBounded: takes under 2^31 documents");
  }
  if (out.exact_rescans != nullptr) *out.exact_rescans = 0;
  if (stats != nullptr) *stats = GroupSearchStats();
  if (docs.rows() == 0) return absl::OkStatus();
  if (stream.backend() == Backend::kCpu) {
    cpu::FindBmusGroupBounded(docs.csr(), codebook, out, bounds, drift, stats);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  SomWorkspace local;
  SomWorkspace& ws = workspace != nullptr ? *workspace : local;
  TESSERA_RETURN_IF_ERROR(cuda::FindBmusGroupBounded(stream, docs, codebook, out, bounds, drift, ws, hints, stats));
  if (workspace == nullptr) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
#else
  (void)workspace;
  (void)hints;
  return absl::FailedPreconditionError(absl::StrCat("FindBmusGroupBounded: CUDA stream given but ",
                                                    DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace som
}  // namespace tessera
