// The BMU search with distance bounds: argument checks, backend dispatch, the
// bound step of a codebook, and the CPU version (also the reference).
#include "kernels/som/bmu_bounds.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/status.h"
#include "kernels/som/parallel.h"

namespace tessera {
namespace som {

absl::StatusOr<BoundStep> MakeBoundStep(const Stream& stream, const float* node_shift, const float* sq_norms,
                                        int64_t nodes) {
  if (sq_norms == nullptr || nodes <= 0) return absl::InvalidArgumentError("MakeBoundStep: no norms");
  const MemoryKind kind = stream.backend() == Backend::kCpu ? MemoryKind::kHost : MemoryKind::kDevice;
  std::vector<float> norms(static_cast<size_t>(nodes)), shift;
  TESSERA_RETURN_IF_ERROR(CopyBytes(norms.data(), MemoryKind::kHost, sq_norms, kind, 4 * norms.size(), stream));
  if (node_shift != nullptr) {
    shift.resize(norms.size());
    TESSERA_RETURN_IF_ERROR(CopyBytes(shift.data(), MemoryKind::kHost, node_shift, kind, 4 * shift.size(), stream));
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  BoundStep step;
  step.node_shift = node_shift;
  step.have_bounds = node_shift != nullptr;
  // A NaN norm or shift must stop every skip: it becomes +inf here.
  auto widen = [](float x) { return x == x ? x : std::numeric_limits<float>::infinity(); };
  for (float n : norms) step.max_sq_norm = std::max(step.max_sq_norm, widen(n));
  for (int64_t j = 0; j < static_cast<int64_t>(shift.size()); ++j) {
    const float s = widen(shift[j]);
    if (step.max_node < 0 || s > step.max_shift) {
      step.other_max_shift = step.max_node < 0 ? 0.0f : step.max_shift;
      step.max_shift = s;
      step.max_node = static_cast<int32_t>(j);
    } else {
      step.other_max_shift = std::max(step.other_max_shift, s);
    }
  }
  return step;
}

namespace cpu {

float NodeScore(const CsrView& docs, const CodebookView& cb, int64_t d, int32_t node) {
  // As the search kernels: fp32 from 0 in ascending feature order, then n - 2 sum.
  float acc = 0.0f;
  const float* table = cb.type == WeightType::kFloat16 ? HalfTable() : nullptr;
  for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) {
    const int64_t at = cb.index(docs.indices[k], node);
    acc += table == nullptr ? static_cast<const float*>(cb.weights)[at]
                            : table[static_cast<const uint16_t*>(cb.weights)[at]];
  }
  return cb.sq_norms[node] - 2.0f * acc;
}

namespace {

// Bounds of the searched documents from their new BMU and second-best.
void Refresh(const CsrView& docs, const CodebookView& cb, const BmuOutput& out, const BmuBounds& bounds,
             float max_sq_norm, const int32_t* rows, int64_t count) {
  ParallelFor(count, [&](int64_t k0, int64_t k1, int) {
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t d = rows != nullptr ? rows[k] : k;
      const int64_t nnz = docs.offsets[d + 1] - docs.offsets[d];
      const double err = bounds::ScoreErrorBound(nnz, max_sq_norm);
      bounds.upper[d] = bounds::UpperFromScore(nnz, out.score[d], err);
      const int32_t second = out.second[d];
      bounds.lower[d] = second < 0 ? std::numeric_limits<float>::infinity()
                                   : bounds::LowerFromScore(nnz, NodeScore(docs, cb, d, second), err);
    }
  });
}

}  // namespace

absl::Status FindBmusBounded(const CsrView& docs, const CodebookView& cb, const BmuOutput& out,
                             const BmuBounds& bounds, const BoundStep& step, int64_t* searched) {
  const int64_t n = docs.rows;
  if (!step.have_bounds) {
    FindBmus(docs, cb, out);
    Refresh(docs, cb, out, bounds, step.max_sq_norm, nullptr, n);
    if (searched != nullptr) *searched = n;
    return absl::OkStatus();
  }
  // Shift the bounds; skipped documents get their score, the rest a flag.
  std::vector<char> search(static_cast<size_t>(n));
  ParallelFor(n, [&](int64_t d0, int64_t d1, int) {
    for (int64_t d = d0; d < d1; ++d) {
      const int32_t b = out.bmu[d];
      if (b < 0 || b >= cb.nodes) {
        search[d] = 1;
        continue;
      }
      const int64_t nnz = docs.offsets[d + 1] - docs.offsets[d];
      const double err = bounds::ScoreErrorBound(nnz, step.max_sq_norm);
      const float upper = bounds::ShiftedUpper(bounds.upper[d], step.node_shift[b]);
      const float lower = bounds::ShiftedLower(bounds.lower[d], bounds::OtherShift(step, b));
      bounds.lower[d] = lower;
      if (bounds::CanSkip(upper, lower, err)) {
        const float score = NodeScore(docs, cb, d, b);
        out.score[d] = score;
        bounds.upper[d] = bounds::UpperFromScore(nnz, score, err);  // tightened
        search[d] = 0;
      } else {
        search[d] = 1;
      }
    }
  });
  std::vector<int32_t> rows;
  for (int64_t d = 0; d < n; ++d) {
    if (search[d]) rows.push_back(static_cast<int32_t>(d));
  }
  const int64_t count = static_cast<int64_t>(rows.size());
  FindBmusAt(docs, cb, out, rows.data(), count);
  Refresh(docs, cb, out, bounds, step.max_sq_norm, rows.data(), count);
  if (searched != nullptr) *searched = count;
  return absl::OkStatus();
}

}  // namespace cpu

absl::Status FindBmusBounded(const Stream& stream, const DocumentSet& docs, const CodebookView& codebook,
                             const BmuOutput& out, const BmuBounds& bounds, const BoundStep& step,
                             SomWorkspace* workspace, BmuTuning tuning, const BmuHints& hints, int64_t* searched) {
  TESSERA_RETURN_IF_ERROR(CheckCodebook(codebook, "FindBmusBounded"));
  if (docs.csr().cols != codebook.features) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmusBounded: documents have ", docs.csr().cols,
                                                   " features, the codebook ", codebook.features));
  }
  if (codebook.layout != CodebookLayout::kFeatureMajor) {
    return absl::InvalidArgumentError("FindBmusBounded: needs a feature-major codebook");
  }
  if (out.bmu == nullptr || out.second == nullptr || out.score == nullptr) {
    return absl::InvalidArgumentError("FindBmusBounded: needs bmu, second and score outputs");
  }
  if (bounds.upper == nullptr || bounds.lower == nullptr) {
    return absl::InvalidArgumentError("FindBmusBounded: bounds are null");
  }
  if (step.have_bounds && step.node_shift == nullptr) {
    return absl::InvalidArgumentError("FindBmusBounded: a step with bounds needs node shifts");
  }
  if (docs.rows() >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError("FindBmusBounded: takes under 2^31 documents");
  }
  if (out.exact_rescans != nullptr) *out.exact_rescans = 0;
  if (searched != nullptr) *searched = 0;
  if (docs.rows() == 0) return absl::OkStatus();
  if (stream.backend() == Backend::kCpu) return cpu::FindBmusBounded(docs.csr(), codebook, out, bounds, step, searched);
#if TESSERA_WITH_CUDA
  SomWorkspace local;
  absl::Status status = cuda::FindBmusBounded(stream, docs, codebook, out, bounds, step,
                                              workspace != nullptr ? *workspace : local, tuning, hints, searched);
  if (workspace == nullptr && status.ok()) status = stream.Synchronize();  // the local workspace dies here
  return status;
#else
  (void)workspace;
  (void)tuning;
  (void)hints;
  return absl::FailedPreconditionError(
      absl::StrCat("FindBmusBounded: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace som
}  // namespace tessera
