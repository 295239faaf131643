#include "kernels/registration/lean_smooth.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/gaussian_smooth_internal.h"
#include "kernels/registration/parallel.h"

namespace tessera {
namespace registration {
#if TESSERA_WITH_CUDA
namespace {

gs_internal::PassKernels Kernels(LeanSmoothTuning tuning) {
  gs_internal::PassKernels k;
  k.run_kernel = tuning.run_kernel;
  k.fixed_radius = tuning.fixed_radius;
  return k;
}

}  // namespace
#endif

absl::Status SmoothInPlaceWithScratch(NDArray& field, const std::array<double, 3>& sigma, float* scratch,
                                      int64_t scratch_floats, const Stream& stream, LeanSmoothTuning tuning) {
  (void)tuning;  // CUDA only
  if (stream.backend() == Backend::kCpu) return GaussianSmooth(field, &field, sigma, stream);
  if (field.dtype() != DType::kFloat32 || (field.rank() != 3 && field.rank() != 4)) {
    return absl::InvalidArgumentError(absl::StrCat("SmoothInPlaceWithScratch: field must be float32 rank 3 or 4, got ",
                                                   ShapeToString(field.shape())));
  }
  if (field.memory_kind() != MemoryKind::kDevice) {
    return absl::InvalidArgumentError("SmoothInPlaceWithScratch: field is not in device memory");
  }
  gs_internal::Grid g;
  g.nx = field.dim(0);
  g.ny = field.dim(1);
  g.nz = field.dim(2);
  g.comps = field.rank() == 4 ? field.dim(3) : 1;
  if (scratch == nullptr || scratch_floats < g.voxels()) {
    return absl::InvalidArgumentError(absl::StrCat("SmoothInPlaceWithScratch: scratch must hold ", g.voxels(),
                                                   " floats, got ", scratch == nullptr ? 0 : scratch_floats));
  }
  std::vector<float> taps[3];
  for (int a = 0; a < 3; ++a) {
    if (!std::isfinite(sigma[a])) return absl::InvalidArgumentError("SmoothInPlaceWithScratch: sigma must be finite");
    taps[a] = GaussianTaps(sigma[a]);
    if (static_cast<int>(taps[a].size() / 2) > kGaussianMaxRadius) {
      return absl::InvalidArgumentError(absl::StrCat("SmoothInPlaceWithScratch: sigma ", sigma[a], " on axis ", a,
                                                     " needs a radius above ", kGaussianMaxRadius));
    }
  }
  if (field.num_elements() == 0) return absl::OkStatus();
#if TESSERA_WITH_CUDA
  return gs_internal::SmoothCuda(field.data<float>(), field.data<float>(), g, taps, scratch, stream, Kernels(tuning));
#else
  return absl::FailedPreconditionError("SmoothInPlaceWithScratch: CUDA stream in a build without CUDA");
#endif
}

absl::Status SmoothBf16InPlaceWithScratch(BFloat16* field, Dims3 dims, int comps,
                                          const std::array<double, 3>& sigma, float* scratch,
                                          int64_t scratch_floats, const Stream& stream, LeanSmoothTuning tuning) {
  (void)tuning;  // CUDA only
  if (dims.nx <= 0 || dims.ny <= 0 || dims.nz <= 0 || comps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("SmoothBf16InPlaceWithScratch: dims must be positive and comps >= 1, got ",
                                                   DimsToString(dims), " x ", comps));
  }
  if (field == nullptr) return absl::InvalidArgumentError("SmoothBf16InPlaceWithScratch: field is null");
  gs_internal::Grid g;
  g.nx = dims.nx;
  g.ny = dims.ny;
  g.nz = dims.nz;
  g.comps = comps;
  if (scratch == nullptr || scratch_floats < g.voxels()) {
    return absl::InvalidArgumentError(absl::StrCat("SmoothBf16InPlaceWithScratch: scratch must hold ", g.voxels(),
                                                   " floats, got ", scratch == nullptr ? 0 : scratch_floats));
  }
  std::vector<float> taps[3];
  for (int a = 0; a < 3; ++a) {
    if (!std::isfinite(sigma[a])) return absl::InvalidArgumentError("SmoothBf16InPlaceWithScratch: sigma must be finite");
    taps[a] = GaussianTaps(sigma[a]);
    if (static_cast<int>(taps[a].size() / 2) > kGaussianMaxRadius) {
      return absl::InvalidArgumentError(absl::StrCat("SmoothBf16InPlaceWithScratch: sigma ", sigma[a], " on axis ", a,
                                                     " needs a radius above ", kGaussianMaxRadius));
    }
  }
  const int64_t v = g.voxels();
  if (stream.backend() == Backend::kCpu) {
    gs_internal::Grid one = g;
    one.comps = 1;
    for (int c = 0; c < comps; ++c) {
      BFloat16* comp = field + c * v;
      ParallelFor(v, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) scratch[i] = ToFloat(comp[i]);
      });
      gs_internal::SmoothCpu(scratch, scratch, one, taps);
      ParallelFor(v, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) comp[i] = FromFloat<BFloat16>(scratch[i]);
      });
    }
    return absl::OkStatus();
  }
  if (dims.nx > 8192) {
    return absl::InvalidArgumentError(
        absl::StrCat("SmoothBf16InPlaceWithScratch: rows of ", dims.nx, " voxels exceed the CUDA limit of 8192"));
  }
#if TESSERA_WITH_CUDA
  return gs_internal::SmoothBf16InPlaceCuda(field, g, taps, scratch, stream, Kernels(tuning));
#else
  return absl::FailedPreconditionError("SmoothBf16InPlaceWithScratch: CUDA stream in a build without CUDA");
#endif
}

}  // namespace registration
}  // namespace tessera
