// CPU versions (plain loops, sums in index order) and backend dispatch.
#include "kernels/reconstruction/pet/em_ops.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

absl::Status CheckN(const char* op, int64_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(op, ": negative length ", n));
  return absl::OkStatus();
}

#if !TESSERA_WITH_CUDA
absl::Status NoCuda(const char* op) {
  return absl::FailedPreconditionError(
      absl::StrCat(op, ": CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
}
#endif

}  // namespace

#if TESSERA_WITH_CUDA
#define TESSERA_PET_DISPATCH(op, ...) \
  if (stream.backend() == Backend::kCuda) return cuda::op(__VA_ARGS__);
#else
#define TESSERA_PET_DISPATCH(op, ...) \
  if (stream.backend() == Backend::kCuda) return NoCuda(#op);
#endif

absl::StatusOr<double> PoissonRatio(const Stream& stream, const float* y, const float* fwd, const float* background,
                                    float* ratio, int64_t n) {
  if (auto s = CheckN("PoissonRatio", n); !s.ok()) return s;
  TESSERA_PET_DISPATCH(PoissonRatio, stream, y, fwd, background, ratio, n)
  double ll = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float ybar = background != nullptr ? fwd[i] + background[i] : fwd[i];
    const float yi = y[i];
    if (ybar > 0.0f) {
      ll += (yi > 0.0f ? static_cast<double>(yi) * std::log(static_cast<double>(ybar)) : 0.0) - ybar;
      ratio[i] = yi / ybar;
    } else {
      ratio[i] = 0.0f;
    }
  }
  return ll;
}

absl::Status EmUpdate(const Stream& stream, const float* back, const float* sens, float eps, float* image, int64_t n) {
  if (auto s = CheckN("EmUpdate", n); !s.ok()) return s;
  TESSERA_PET_DISPATCH(EmUpdate, stream, back, sens, eps, image, n)
  for (int64_t j = 0; j < n; ++j) {
    if (sens[j] > eps) image[j] = std::fmax(image[j] * back[j] / sens[j], 0.0f);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FirstInvalid(const Stream& stream, const float* x, int64_t n) {
  if (auto s = CheckN("FirstInvalid", n); !s.ok()) return s;
  TESSERA_PET_DISPATCH(FirstInvalid, stream, x, n)
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || x[i] < 0.0f) return i;
  }
  return int64_t{-1};
}

absl::Status ExpNegate(const Stream& stream, float* x, int64_t n) {
  if (auto s = CheckN("ExpNegate", n); !s.ok()) return s;
  TESSERA_PET_DISPATCH(ExpNegate, stream, x, n)
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(-x[i]);
  return absl::OkStatus();
}

#undef TESSERA_PET_DISPATCH

}  // namespace pet
}  // namespace recon
}  // namespace tessera
