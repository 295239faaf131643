// OSEM over a LinearOperator with recon::vector_ops and the fused EM steps.
#include "kernels/reconstruction/pet/osem.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/pet/em_ops.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

absl::Status CheckValues(const Stream& stream, const char* what, const float* x, int64_t n) {
  TESSERA_ASSIGN_OR_RETURN(const int64_t bad, FirstInvalid(stream, x, n));
  if (bad < 0) return absl::OkStatus();
  float value = 0;
  const MemoryKind kind = MemoryKindFor(stream);
  TESSERA_RETURN_IF_ERROR(CopyBytes(&value, MemoryKind::kHost, x + bad, kind, sizeof(float), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::InvalidArgumentError(
      absl::StrCat(what, "[", bad, "] = ", value, ": must be finite and >= 0"));
}

class Scratch {
 public:
  explicit Scratch(const Stream& stream) : stream_(stream) {}
  absl::StatusOr<float*> Take(int64_t n) {
    const MemoryKind kind = MemoryKindFor(stream_);
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b,
                             Buffer::Allocate(kind, static_cast<size_t>(n) * sizeof(float), stream_.ordinal()));
    buffers_.push_back(b);
    return static_cast<float*>(b->data());
  }

 private:
  const Stream& stream_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
};

}  // namespace

absl::Status Osem(LinearOperator& op, const float* measured, float* image, const OsemOptions& options) {
  const Stream& stream = op.stream();
  if (measured == nullptr || image == nullptr) return absl::InvalidArgumentError("osem: measured or image is null");
  if (options.iterations < 0) {
    return absl::InvalidArgumentError(absl::StrCat("iterations must be >= 0, got ", options.iterations));
  }
  const int op_subsets = op.num_subsets();
  const int subsets = options.num_subsets == 0 ? op_subsets : options.num_subsets;
  if (subsets != 1 && subsets != op_subsets) {
    return absl::InvalidArgumentError(absl::StrCat("subsets must be 1 (MLEM) or the operator's ", op_subsets,
                                                   ", got ", options.num_subsets));
  }
  const int64_t n_image = op.domain_size();
  const int64_t n_full = op.range_size(kAllSubsets);
  const int64_t per_view = op.elements_per_view();
  TESSERA_RETURN_IF_ERROR(CheckValues(stream, "measured", measured, n_full));
  if (options.background != nullptr) {
    TESSERA_RETURN_IF_ERROR(CheckValues(stream, "background", options.background, n_full));
  }
  TESSERA_RETURN_IF_ERROR(CheckValues(stream, "image", image, n_image));

  auto subset_id = [&](int s) { return subsets == 1 ? kAllSubsets : s; };
  int64_t max_range = 0;
  for (int s = 0; s < subsets; ++s) max_range = std::max(max_range, op.range_size(subset_id(s)));

  Scratch scratch(stream);
  TESSERA_ASSIGN_OR_RETURN(float* fwd, scratch.Take(std::max(max_range, options.full_log_likelihood ? n_full : 0)));
  TESSERA_ASSIGN_OR_RETURN(float* back, scratch.Take(n_image));
  TESSERA_ASSIGN_OR_RETURN(float* sens, scratch.Take(n_image * subsets));
  float* y_s = nullptr;
  float* r_s = nullptr;
  if (subsets > 1) {
    TESSERA_ASSIGN_OR_RETURN(y_s, scratch.Take(max_range));
    if (options.background != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(r_s, scratch.Take(max_range));
    }
  }
  // Sensitivities A_s^T 1 (fwd holds the ones).
  TESSERA_RETURN_IF_ERROR(Fill(stream, fwd, max_range, 1.0f));
  for (int s = 0; s < subsets; ++s) {
    TESSERA_RETURN_IF_ERROR(op.Back(fwd, sens + n_image * s, subset_id(s)));
  }

  const int total = options.iterations * subsets;
  for (int it = 0; it < options.iterations; ++it) {
    for (int s = 0; s < subsets; ++s) {
      const int subset = subset_id(s);
      const int64_t n = op.range_size(subset);
      const float* y = measured;
      const float* r = options.background;
      if (subsets > 1) {
        TESSERA_RETURN_IF_ERROR(CopySubset(stream, op.num_views(), per_view, subsets, s, SubsetCopy::kFullToCompact,
                                           measured, y_s));
        y = y_s;
        if (r_s != nullptr) {
          TESSERA_RETURN_IF_ERROR(CopySubset(stream, op.num_views(), per_view, subsets, s,
                                             SubsetCopy::kFullToCompact, options.background, r_s));
          r = r_s;
        }
      }
      TESSERA_RETURN_IF_ERROR(op.Forward(image, fwd, subset));
      TESSERA_ASSIGN_OR_RETURN(double ll, PoissonRatio(stream, y, fwd, r, fwd, n));
      TESSERA_RETURN_IF_ERROR(op.Back(fwd, back, subset));
      TESSERA_RETURN_IF_ERROR(EmUpdate(stream, back, sens + n_image * s, options.sensitivity_eps, image, n_image));
      if (options.full_log_likelihood) {
        TESSERA_RETURN_IF_ERROR(op.Forward(image, fwd, kAllSubsets));
        TESSERA_ASSIGN_OR_RETURN(ll, PoissonRatio(stream, measured, fwd, options.background, fwd, n_full));
      }
      if (options.progress) {
        TESSERA_RETURN_IF_ERROR(stream.Synchronize());
        TESSERA_RETURN_IF_ERROR(options.progress(it * subsets + s + 1, total, ll));
      }
    }
  }
  return stream.Synchronize();
}

}  // namespace pet
}  // namespace recon
}  // namespace tessera
