// Argument checks, kernel taps and backend dispatch for gaussian_smooth.h.
#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/gaussian_smooth_internal.h"
#include "kernels/registration/reg_checks.h"

namespace tessera {
namespace registration {
namespace {

using gs_internal::Grid;

constexpr double kMinSigma = 1e-6;

absl::StatusOr<Grid> GridOf(const NDArray& a, const char* name) {
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckArray(a, name, DType::kFloat32));
  if (a.rank() != 3 && a.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected (nx, ny, nz) or (nx, ny, nz, C), got ", ShapeToString(a.shape())));
  }
  Grid g;
  g.nx = a.dim(0);
  g.ny = a.dim(1);
  g.nz = a.dim(2);
  g.comps = a.rank() == 4 ? a.dim(3) : 1;
  return g;
}

bool Shrinks(int64_t n_in, int64_t n_out) { return n_out < n_in; }

}  // namespace

std::vector<float> GaussianTaps(double sigma) {
  if (!(sigma > kMinSigma)) return {1.f};
  const int r = static_cast<int>(std::ceil(kGaussianTruncate * sigma));
  std::vector<double> w(2 * r + 1);
  double sum = 0;
  for (int d = -r; d <= r; ++d) sum += (w[d + r] = std::exp(-0.5 * d * d / (sigma * sigma)));
  std::vector<float> taps(w.size());
  for (size_t i = 0; i < w.size(); ++i) taps[i] = static_cast<float>(w[i] / sum);
  return taps;
}

size_t GaussianSmoothScratchBytes(const Shape& shape, const std::array<double, 3>& sigma) {
  if (shape.size() < 3) return 0;
  if (!(sigma[1] > kMinSigma) && !(sigma[2] > kMinSigma)) return 0;
  return static_cast<size_t>(shape[0] * shape[1] * shape[2]) * sizeof(float);
}

absl::Status GaussianSmooth(const NDArray& in, NDArray* out, const std::array<double, 3>& sigma,
                            const Stream& stream, Buffer* scratch) {
  if (out == nullptr) return absl::InvalidArgumentError("GaussianSmooth: out is null");
  TESSERA_ASSIGN_OR_RETURN(Grid g, GridOf(in, "in"));
  TESSERA_RETURN_IF_ERROR(GridOf(*out, "out").status());
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckSameShape(in, "in", *out, "out"));
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckResidency(in, "in", stream));
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckResidency(*out, "out", stream));
  std::vector<float> taps[3];
  for (int a = 0; a < 3; ++a) {
    if (!std::isfinite(sigma[a])) return absl::InvalidArgumentError("GaussianSmooth: sigma must be finite");
    taps[a] = GaussianTaps(sigma[a]);
    if (static_cast<int>(taps[a].size() / 2) > kGaussianMaxRadius) {
      return absl::InvalidArgumentError(absl::StrCat("GaussianSmooth: sigma ", sigma[a], " on axis ", a,
                                                     " needs a radius above ", kGaussianMaxRadius));
    }
  }
  if (in.num_elements() == 0) return absl::OkStatus();
  if (stream.backend() == Backend::kCpu) {
    gs_internal::SmoothCpu(in.data<float>(), out->data<float>(), g, taps);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  const size_t need = GaussianSmoothScratchBytes(in.shape(), sigma);
  std::shared_ptr<Buffer> owned;
  float* tmp = nullptr;
  if (need > 0) {
    if (scratch == nullptr) {
      TESSERA_ASSIGN_OR_RETURN(owned, Buffer::Allocate(MemoryKind::kDevice, need, stream.ordinal()));
      tmp = static_cast<float*>(owned->data());
    } else {
      if (scratch->kind() != MemoryKind::kDevice || scratch->ordinal() != stream.ordinal() ||
          scratch->size() < need) {
        return absl::InvalidArgumentError(
            absl::StrCat("GaussianSmooth: scratch must be >= ", need, " bytes of device memory on the stream's GPU"));
      }
      tmp = static_cast<float*>(scratch->data());
    }
  }
  TESSERA_RETURN_IF_ERROR(gs_internal::SmoothCuda(in.data<float>(), out->data<float>(), g, taps, tmp, stream));
  if (owned) TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // before the scratch is freed
  return absl::OkStatus();
#else
  (void)scratch;
  return reg_internal::CudaUnavailable("GaussianSmooth");
#endif
}

Shape DownsampledShape(const Shape& shape, double factor) {
  Shape out = shape;
  for (size_t a = 0; a < std::min<size_t>(3, shape.size()); ++a) {
    out[a] = std::max<int64_t>(1, static_cast<int64_t>(std::llround(static_cast<double>(shape[a]) / factor)));
  }
  return out;
}

namespace {

absl::Status Resample(const NDArray& in, const Grid& gi, NDArray* out, const Grid& go, const float scale[3],
                      const Stream& stream) {
  if (stream.backend() == Backend::kCpu) {
    gs_internal::ResampleCpu(in.data<float>(), gi, out->data<float>(), go, scale);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return gs_internal::ResampleCuda(in.data<float>(), gi, out->data<float>(), go, scale, stream);
#else
  return reg_internal::CudaUnavailable("resampling");
#endif
}

}  // namespace

absl::Status DownsampleVolume(const NDArray& in, NDArray* out, const Stream& stream) {
  if (out == nullptr) return absl::InvalidArgumentError("DownsampleVolume: out is null");
  TESSERA_ASSIGN_OR_RETURN(Grid gi, GridOf(in, "in"));
  TESSERA_ASSIGN_OR_RETURN(Grid go, GridOf(*out, "out"));
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckResidency(in, "in", stream));
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckResidency(*out, "out", stream));
  if (in.rank() != out->rank() || gi.comps != go.comps || go.nx > gi.nx || go.ny > gi.ny || go.nz > gi.nz ||
      go.voxels() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("DownsampleVolume: cannot downsample ", ShapeToString(in.shape()),
                                                   " to ", ShapeToString(out->shape())));
  }
  if (in.num_elements() == 0) return absl::InvalidArgumentError("DownsampleVolume: empty input");
  const int64_t ni[3] = {gi.nx, gi.ny, gi.nz}, no[3] = {go.nx, go.ny, go.nz};
  std::array<double, 3> sigma{};
  for (int a = 0; a < 3; ++a) sigma[a] = Shrinks(ni[a], no[a]) ? 0.5 * double(ni[a]) / double(no[a]) : 0.0;
  TESSERA_ASSIGN_OR_RETURN(NDArray blurred,
                           NDArray::Allocate(in.shape(), DType::kFloat32,
                                             stream.backend() == Backend::kCuda ? MemoryKind::kDevice
                                                                                : MemoryKind::kHost,
                                             stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(GaussianSmooth(in, &blurred, sigma, stream));
  const float ones[3] = {1.f, 1.f, 1.f};
  TESSERA_RETURN_IF_ERROR(Resample(blurred, gi, out, go, ones, stream));
  return stream.Synchronize();  // `blurred` is freed on return
}

absl::Status UpsampleDisplacement(const NDArray& in, NDArray* out, DisplacementUnits units, const Stream& stream) {
  if (out == nullptr) return absl::InvalidArgumentError("UpsampleDisplacement: out is null");
  TESSERA_ASSIGN_OR_RETURN(Grid gi, GridOf(in, "in"));
  TESSERA_ASSIGN_OR_RETURN(Grid go, GridOf(*out, "out"));
  if (in.rank() != 4 || gi.comps != 3 || go.comps != 3) {
    return absl::InvalidArgumentError(absl::StrCat("UpsampleDisplacement: expected (nx, ny, nz, 3) fields, got ",
                                                   ShapeToString(in.shape()), " -> ", ShapeToString(out->shape())));
  }
  if (in.num_elements() == 0 || out->num_elements() == 0) {
    return absl::InvalidArgumentError("UpsampleDisplacement: empty field");
  }
  if (in.raw_data() == out->raw_data()) return absl::InvalidArgumentError("UpsampleDisplacement: out aliases in");
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckResidency(in, "in", stream));
  TESSERA_RETURN_IF_ERROR(reg_internal::CheckResidency(*out, "out", stream));
  const int64_t ni[3] = {gi.nx, gi.ny, gi.nz}, no[3] = {go.nx, go.ny, go.nz};
  float scale[3] = {1.f, 1.f, 1.f};
  if (units == DisplacementUnits::kVoxels) {
    for (int a = 0; a < 3; ++a) {
      if (ni[a] > 1 && no[a] > 1) scale[a] = float(double(no[a] - 1) / double(ni[a] - 1));
    }
  }
  return Resample(in, gi, out, go, scale, stream);
}

}  // namespace registration
}  // namespace tessera
