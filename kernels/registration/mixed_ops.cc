// Argument checks and backend dispatch of mixed_ops.h.
#include "kernels/registration/mixed_ops.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace registration {
namespace {

absl::Status CheckPointers(const char* what, const void* a, const void* b, int64_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": count must be >= 0, got ", n));
  if (n > 0 && (a == nullptr || b == nullptr)) return absl::InvalidArgumentError(absl::StrCat(what, ": null pointer"));
  return absl::OkStatus();
}

[[maybe_unused]] absl::Status NoCuda(const char* what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": CUDA stream in a build without CUDA"));
}

}  // namespace

absl::Status ConvertToHalf(const Stream& stream, const float* in, Half* out, int64_t n) {
  TESSERA_RETURN_IF_ERROR(CheckPointers("ConvertToHalf", in, out, n));
  if (n == 0) return absl::OkStatus();
  if (stream.backend() == Backend::kCpu) {
    mixed_internal::ConvertToHalfCpu(in, out, n);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return mixed_internal::ConvertToHalfCuda(in, out, n, stream);
#else
  return NoCuda("ConvertToHalf");
#endif
}

absl::Status ConvertToFloat(const Stream& stream, const Half* in, float* out, int64_t n) {
  TESSERA_RETURN_IF_ERROR(CheckPointers("ConvertToFloat", in, out, n));
  if (n == 0) return absl::OkStatus();
  if (stream.backend() == Backend::kCpu) {
    mixed_internal::ConvertToFloatCpu(in, out, n);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return mixed_internal::ConvertToFloatCuda(in, out, n, stream);
#else
  return NoCuda("ConvertToFloat");
#endif
}

absl::StatusOr<float> MaxAbs(const Stream& stream, const BFloat16* x, int64_t n, Workspace* workspace) {
  TESSERA_RETURN_IF_ERROR(CheckPointers("MaxAbs", x, x, n));
  if (n == 0) return 0.f;
  if (stream.backend() == Backend::kCpu) return mixed_internal::MaxAbsCpu(x, n);
#if TESSERA_WITH_CUDA
  return mixed_internal::MaxAbsCuda(x, n, workspace, stream);
#else
  (void)workspace;
  return NoCuda("MaxAbs");
#endif
}

absl::Status MseHalfFixed(const Stream& stream, const Half* fixed, float* warped, Dims3 dims, float* loss,
                          bool want_grad, Workspace* workspace) {
  if (dims.nx <= 0 || dims.ny <= 0 || dims.nz <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("MseHalfFixed: dims must be positive, got ", DimsToString(dims)));
  }
  if (fixed == nullptr || warped == nullptr) return absl::InvalidArgumentError("MseHalfFixed: fixed or warped is null");
  if (stream.backend() == Backend::kCpu) {
    const double value = mixed_internal::MseHalfFixedCpu(fixed, warped, dims.size(), want_grad);
    if (loss != nullptr) *loss = static_cast<float>(value);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return mixed_internal::MseHalfFixedCuda(fixed, warped, dims.size(), loss, want_grad, workspace, stream);
#else
  (void)workspace;
  return NoCuda("MseHalfFixed");
#endif
}

}  // namespace registration
}  // namespace tessera
