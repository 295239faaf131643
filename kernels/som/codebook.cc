// Dispatch and the CPU version of the codebook helpers.
#include "kernels/som/codebook.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/som/bmu.h"
#include "kernels/som/half.h"
#include "kernels/som/parallel.h"

namespace tessera {
namespace som {
namespace cpu {

void FillRandomCodebook(const CodebookView& cb, uint64_t seed, const float* scale) {
  ParallelFor(cb.features, [&](int64_t v0, int64_t v1, int) {
    for (int64_t v = v0; v < v1; ++v) {
      const float s = scale != nullptr ? scale[v] : 1.0f;
      for (int64_t i = 0; i < cb.nodes; ++i) {
        const float w = RandomUnit(seed, v, i) * s;
        const int64_t k = cb.index(v, i);
        if (cb.type == WeightType::kFloat32) {
          static_cast<float*>(cb.weights)[k] = w;
        } else {
          static_cast<uint16_t*>(cb.weights)[k] = FloatToHalf(w);
        }
      }
    }
  });
}

}  // namespace cpu

absl::Status FillRandomCodebook(const Stream& stream, const CodebookView& codebook, uint64_t seed,
                                const float* feature_scale) {
  TESSERA_RETURN_IF_ERROR(CheckCodebook(codebook, "FillRandomCodebook"));
  if (stream.backend() == Backend::kCpu) {
    cpu::FillRandomCodebook(codebook, seed, feature_scale);
    return ComputeSqNorms(stream, codebook);
  }
#if TESSERA_WITH_CUDA
  TESSERA_RETURN_IF_ERROR(cuda::FillRandomCodebook(stream, codebook, seed, feature_scale));
  return ComputeSqNorms(stream, codebook);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("FillRandomCodebook: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace som
}  // namespace tessera
