// Argument checks and backend dispatch for the grid sampler.
#include "kernels/registration/grid_sampler.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace registration {
namespace {

absl::Status CheckDims(const Dims3& d, absl::string_view what) {
  if (d.nx <= 0 || d.ny <= 0 || d.nz <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " dims must be positive, got ", DimsToString(d)));
  }
  return absl::OkStatus();
}

#if !TESSERA_WITH_CUDA
absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      absl::StrCat("grid sampler: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
}
#endif

}  // namespace

absl::Status ValidateGridSampleArgs(const GridSampleArgs& args, bool needs_image) {
  TESSERA_RETURN_IF_ERROR(CheckDims(args.image_dims, "grid sampler: image"));
  TESSERA_RETURN_IF_ERROR(CheckDims(args.out_dims, "grid sampler: output"));
  if (needs_image && args.image == nullptr) return absl::InvalidArgumentError("grid sampler: image is null");
  if (args.padding != Padding::kZeros && args.padding != Padding::kBorder) {
    return absl::InvalidArgumentError("grid sampler: unknown padding mode");
  }
  return absl::OkStatus();
}

absl::Status GridSample(const Stream& stream, const GridSampleArgs& args, float* out) {
  TESSERA_RETURN_IF_ERROR(ValidateGridSampleArgs(args, /*needs_image=*/true));
  if (out == nullptr) return absl::InvalidArgumentError("grid sampler: out is null");
  if (stream.backend() == Backend::kCpu) {
    cpu::GridSampleForward(args, out);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::GridSampleForward(stream, args, out);
#else
  return NoCuda();
#endif
}

absl::Status GridSampleBackward(const Stream& stream, const GridSampleArgs& args, const float* grad_out,
                                const GridSampleGrads& grads, Workspace* workspace) {
  TESSERA_RETURN_IF_ERROR(ValidateGridSampleArgs(args, /*needs_image=*/true));
  if (grad_out == nullptr) return absl::InvalidArgumentError("grid sampler backward: grad_out is null");
  if (stream.backend() == Backend::kCpu) {
    cpu::GridSampleBackward(args, grad_out, grads);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::GridSampleBackward(stream, args, grad_out, grads, workspace);
#else
  (void)workspace;
  return NoCuda();
#endif
}

absl::Status GridSampleNearest(const Stream& stream, const int32_t* labels, const GridSampleArgs& args,
                               int32_t* out) {
  TESSERA_RETURN_IF_ERROR(ValidateGridSampleArgs(args, /*needs_image=*/false));
  if (labels == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("grid sampler nearest: labels or out is null");
  }
  if (stream.backend() == Backend::kCpu) {
    cpu::GridSampleNearest(labels, args, out);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::GridSampleNearest(stream, labels, args, out);
#else
  return NoCuda();
#endif
}

#if !TESSERA_WITH_CUDA
namespace cuda {
void SetForce64BitIndexForTesting(bool) {}
absl::Status SetSamplerKernelConfig(const SamplerKernelConfig&) { return NoCuda(); }
SamplerKernelConfig GetSamplerKernelConfig() { return SamplerKernelConfig(); }
}  // namespace cuda
#endif

}  // namespace registration
}  // namespace tessera
