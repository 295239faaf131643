// Argument checks and backend dispatch for the BMU search.
#include "kernels/som/bmu.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace som {

const char* BmuAlgorithmName(BmuAlgorithm algorithm) {
  switch (algorithm) {
    case BmuAlgorithm::kFeatureMajor:
      return "feature-major";
    case BmuAlgorithm::kNodeMajor:
      return "node-major";
    case BmuAlgorithm::kCusparseRowOrder:
      return "cusparse-row";
    case BmuAlgorithm::kCusparseColOrder:
      return "cusparse-col";
  }
  return "?";
}

CodebookLayout LayoutFor(BmuAlgorithm algorithm) {
  return algorithm == BmuAlgorithm::kFeatureMajor || algorithm == BmuAlgorithm::kCusparseRowOrder
             ? CodebookLayout::kFeatureMajor
             : CodebookLayout::kNodeMajor;
}

absl::Status CheckCodebook(const CodebookView& codebook, const char* who) {
  if (codebook.nodes <= 0 || codebook.features < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": codebook needs nodes > 0, got ", codebook.nodes, " x ", codebook.features));
  }
  if (codebook.nodes >= (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": too many nodes (", codebook.nodes, ")"));
  }
  if (codebook.weights == nullptr && codebook.features > 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": codebook weights are null"));
  }
  if (codebook.sq_norms == nullptr) return absl::InvalidArgumentError(absl::StrCat(who, ": sq_norms is null"));
  return absl::OkStatus();
}

absl::Status FindBmus(const Stream& stream, BmuAlgorithm algorithm, const DocumentSet& docs,
                      const CodebookView& codebook, const BmuOutput& out, SomWorkspace* workspace,
                      BmuTuning tuning, const BmuHints& hints) {
  TESSERA_RETURN_IF_ERROR(CheckCodebook(codebook, "FindBmus"));
  if (docs.csr().cols != codebook.features) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmus: documents have ", docs.csr().cols,
                                                   " features, the codebook ", codebook.features));
  }
  if (codebook.layout != LayoutFor(algorithm)) {
    return absl::InvalidArgumentError(absl::StrCat("FindBmus: ", BmuAlgorithmName(algorithm), " needs a ",
                                                   CodebookLayoutName(LayoutFor(algorithm)), " codebook"));
  }
  if (out.bmu == nullptr) return absl::InvalidArgumentError("FindBmus: bmu output is null");
  if (out.exact_rescans != nullptr) *out.exact_rescans = 0;
  if (docs.rows() == 0) return absl::OkStatus();
  if (stream.backend() == Backend::kCpu) {
    if (algorithm == BmuAlgorithm::kCusparseRowOrder || algorithm == BmuAlgorithm::kCusparseColOrder) {
      return absl::UnimplementedError(absl::StrCat("FindBmus: ", BmuAlgorithmName(algorithm), " is CUDA-only"));
    }
    cpu::FindBmus(docs.csr(), codebook, out);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::FindBmus(stream, algorithm, docs, codebook, out, workspace, tuning, hints);
#else
  (void)workspace;
  (void)tuning;
  (void)hints;
  return absl::FailedPreconditionError(
      absl::StrCat("FindBmus: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

absl::Status RarestFeatureKeys(const Stream& stream, const DocumentSet& docs, int32_t* keys) {
  const CsrView csr = docs.csr();
  const CscView csc = docs.csc();
  if (csc.offsets == nullptr) return absl::FailedPreconditionError("RarestFeatureKeys: needs DocumentParts::csc");
  if (keys == nullptr && docs.rows() > 0) return absl::InvalidArgumentError("RarestFeatureKeys: keys is null");
  if (docs.rows() == 0) return absl::OkStatus();
  if (stream.backend() == Backend::kCpu) {
    for (int64_t d = 0; d < csr.rows; ++d) {
      int32_t best = static_cast<int32_t>(csr.cols);
      int64_t best_count = INT64_MAX;
      for (int64_t k = csr.offsets[d]; k < csr.offsets[d + 1]; ++k) {
        const int32_t v = csr.indices[k];
        const int64_t count = csc.offsets[v + 1] - csc.offsets[v];
        if (count < best_count) {
          best_count = count;
          best = v;
        }
      }
      keys[d] = best;
    }
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::RarestFeatureKeys(stream, docs, keys);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("RarestFeatureKeys: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

absl::Status ComputeSqNorms(const Stream& stream, const CodebookView& codebook) {
  TESSERA_RETURN_IF_ERROR(CheckCodebook(codebook, "ComputeSqNorms"));
  if (stream.backend() == Backend::kCpu) {
    cpu::ComputeSqNorms(codebook);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::ComputeSqNorms(stream, codebook);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("ComputeSqNorms: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace som
}  // namespace tessera
