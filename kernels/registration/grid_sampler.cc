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

absl::Status ValidateGridSamplerTuning(const GridSamplerTuning& t) {
  if (t.forward_z != 1 && t.forward_z != 2 && t.forward_z != 4 && t.forward_z != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("grid sampler tuning: forward_z ", t.forward_z, " is not 1, 2, 4 or 8"));
  }
  if (t.backward_unroll != 1 && t.backward_unroll != 2 && t.backward_unroll != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("grid sampler tuning: backward_unroll ", t.backward_unroll, " is not 1, 2 or 4"));
  }
  if (t.block_x != 32 && t.block_x != 64 && t.block_x != 128 && t.block_x != 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("grid sampler tuning: block_x ", t.block_x, " is not 32, 64, 128 or 256"));
  }
  return absl::OkStatus();
}

absl::Status ValidateGridSampleArgs(const GridSampleArgs& args, bool needs_image) {
  TESSERA_RETURN_IF_ERROR(CheckDims(args.image_dims, "grid sampler: image"));
  TESSERA_RETURN_IF_ERROR(CheckDims(args.out_dims, "grid sampler: output"));
  if (needs_image && args.image == nullptr) return absl::InvalidArgumentError("grid sampler: image is null");
  if (args.padding != Padding::kZeros && args.padding != Padding::kBorder) {
    return absl::InvalidArgumentError("grid sampler: unknown padding mode");
  }
  if (args.grid_nz > 0 && (args.out_z0 < 0 || args.out_z0 + args.out_dims.nz > args.grid_nz)) {
    return absl::InvalidArgumentError(absl::StrCat("grid sampler: output slices [", args.out_z0, ", ",
                                                   args.out_z0 + args.out_dims.nz, ") are not inside the grid's ",
                                                   args.grid_nz));
  }
  return absl::OkStatus();
}

absl::Status GridSample(const Stream& stream, const GridSampleArgs& args, float* out, GridSamplerTuning tuning) {
  TESSERA_RETURN_IF_ERROR(ValidateGridSampleArgs(args, /*needs_image=*/true));
  TESSERA_RETURN_IF_ERROR(ValidateGridSamplerTuning(tuning));
  if (out == nullptr) return absl::InvalidArgumentError("grid sampler: out is null");
  if (stream.backend() == Backend::kCpu) {
    cpu::GridSampleForward(args, out);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::GridSampleForward(stream, args, out, tuning);
#else
  return NoCuda();
#endif
}

absl::Status GridSampleBackward(const Stream& stream, const GridSampleArgs& args, const float* grad_out,
                                const GridSampleGrads& grads, Workspace* workspace, GridSamplerTuning tuning) {
  TESSERA_RETURN_IF_ERROR(ValidateGridSampleArgs(args, /*needs_image=*/true));
  TESSERA_RETURN_IF_ERROR(ValidateGridSamplerTuning(tuning));
  if (grad_out == nullptr) return absl::InvalidArgumentError("grid sampler backward: grad_out is null");
  // The CUDA kernels sum the affine gradient over each column's unjittered x, y.
  if (args.voxel_jitter_key != 0 && grads.grad_affine != nullptr) {
    return absl::InvalidArgumentError("grid sampler backward: grad_affine is not supported with voxel_jitter_key");
  }
  if (stream.backend() == Backend::kCpu) {
    cpu::GridSampleBackward(args, grad_out, grads);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::GridSampleBackward(stream, args, grad_out, grads, workspace, tuning);
#else
  (void)workspace;
  return NoCuda();
#endif
}

absl::Status GridSampleNearest(const Stream& stream, const int32_t* labels, const GridSampleArgs& args,
                               int32_t* out, GridSamplerTuning tuning) {
  TESSERA_RETURN_IF_ERROR(ValidateGridSampleArgs(args, /*needs_image=*/false));
  TESSERA_RETURN_IF_ERROR(ValidateGridSamplerTuning(tuning));
  if (labels == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("grid sampler nearest: labels or out is null");
  }
  if (stream.backend() == Backend::kCpu) {
    cpu::GridSampleNearest(labels, args, out);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::GridSampleNearest(stream, labels, args, out, tuning);
#else
  return NoCuda();
#endif
}

absl::Status GridSampleHalfImage(const Stream& stream, const GridSampleArgs& args, const Half* image, float* out,
                                 GridSamplerTuning tuning) {
  TESSERA_RETURN_IF_ERROR(ValidateGridSampleArgs(args, /*needs_image=*/false));
  TESSERA_RETURN_IF_ERROR(ValidateGridSamplerTuning(tuning));
  if (args.image != nullptr) return absl::InvalidArgumentError("grid sampler (fp16 image): args.image must be null");
  if (image == nullptr || out == nullptr) return absl::InvalidArgumentError("grid sampler (fp16 image): image or out is null");
  if (stream.backend() == Backend::kCpu) {
    cpu::GridSampleForwardHalfImage(args, image, out);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::GridSampleForwardHalfImage(stream, args, image, out, tuning);
#else
  return NoCuda();
#endif
}

absl::Status GridSampleBackwardHalfImage(const Stream& stream, const GridSampleArgs& args, const Half* image,
                                         const float* grad_out, BFloat16* grad_disp, GridSamplerTuning tuning) {
  TESSERA_RETURN_IF_ERROR(ValidateGridSampleArgs(args, /*needs_image=*/false));
  TESSERA_RETURN_IF_ERROR(ValidateGridSamplerTuning(tuning));
  if (args.image != nullptr) {
    return absl::InvalidArgumentError("grid sampler backward (fp16 image): args.image must be null");
  }
  if (image == nullptr || grad_out == nullptr || grad_disp == nullptr) {
    return absl::InvalidArgumentError("grid sampler backward (fp16 image): image, grad_out or grad_disp is null");
  }
  if (stream.backend() == Backend::kCpu) {
    cpu::GridSampleBackwardHalfImage(args, image, grad_out, grad_disp);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::GridSampleBackwardHalfImage(stream, args, image, grad_out, grad_disp, tuning);
#else
  return NoCuda();
#endif
}

}  // namespace registration
}  // namespace tessera
