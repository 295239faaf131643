#include "services/reconstruction/formats/recon_nifti.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dicom/volume_file.h"
#include "common/nifti_io.h"
#include "common/status.h"

namespace tessera::recon::formats {
namespace {

Shape WithoutSingletons(const Shape& shape) {
  Shape out;
  for (int64_t d : shape) {
    if (d != 1) out.push_back(d);
  }
  return out;
}

// "384x720" for a stored (384, 720, 1).
std::string Shown(Shape shape) {
  while (shape.size() > 1 && shape.back() == 1) shape.pop_back();
  return ShapeToString(shape);
}

std::string ValueProblem(float v) { return std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"; }

absl::StatusOr<NDArray> AsHostFloat(const NDArray& data, absl::string_view what) {
  if (data.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (data.memory_kind() == MemoryKind::kDevice) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be in host memory"));
  }
  if (data.dtype() == DType::kFloat32) return data;
  return data.AsType(DType::kFloat32);
}

std::string SinogramWhere(const ProjectionGeometry& p, int64_t tof_bins, int64_t index) {
  const int64_t col = index % p.det_cols;
  int64_t rest = index / p.det_cols;
  const int64_t row = rest % p.det_rows;
  rest /= p.det_rows;
  std::string out = absl::StrCat("(col ", col);
  if (!p.is_2d || p.det_rows != 1) absl::StrAppend(&out, ", row ", row);
  if (tof_bins > 0) {
    absl::StrAppend(&out, ", TOF bin ", rest % tof_bins);
    rest /= tof_bins;
  }
  absl::StrAppend(&out, ", projection ", rest, ")");
  return out;
}

bool Near(double a, double b, double tolerance) { return std::fabs(a - b) <= tolerance; }

}  // namespace

Shape SinogramShape(const ProjectionGeometry& projection, int64_t tof_bins) {
  if (tof_bins > 0) return {projection.det_cols, projection.det_rows, tof_bins, projection.num_views()};
  return {projection.det_cols, projection.det_rows, projection.num_views()};
}

absl::StatusOr<NDArray> CheckSinogram(const NDArray& data, const ProjectionGeometry& p,
                                      const SinogramOptions& options) {
  if (options.tof_bins < 0) {
    return absl::InvalidArgumentError(absl::StrCat("TOF bins must be >= 0, got ", options.tof_bins));
  }
  const Shape expected = SinogramShape(p, options.tof_bins);
  if (data.empty() || WithoutSingletons(data.shape()) != WithoutSingletons(expected)) {
    std::string want = absl::StrCat(p.det_cols, " columns");
    if (!p.is_2d || p.det_rows != 1) absl::StrAppend(&want, " x ", p.det_rows, " rows");
    if (options.tof_bins > 0) absl::StrAppend(&want, " x ", options.tof_bins, " TOF bins");
    absl::StrAppend(&want, " x ", p.num_views(), " projections");
    return absl::InvalidArgumentError(absl::StrCat(options.what, " is ", data.empty() ? "empty" : Shown(data.shape()),
                                                   " but proj_geom has ", want));
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray converted, AsHostFloat(data, options.what));
  TESSERA_ASSIGN_OR_RETURN(NDArray out, converted.Reshaped(expected));
  const float* v = out.data<float>();
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) {
      return absl::InvalidArgumentError(absl::StrCat(options.what, " value at ",
                                                     SinogramWhere(p, options.tof_bins, i), " is ",
                                                     ValueProblem(v[i])));
    }
    if (options.counts && v[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(options.what, " value at ", SinogramWhere(p, options.tof_bins, i),
                                                     " is negative (", v[i], "); counts must be >= 0"));
    }
  }
  return out;
}

absl::StatusOr<NDArray> ReadSinogram(const std::string& path, const ProjectionGeometry& projection,
                                     const SinogramOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(Volume volume, ReadNifti(path));
  absl::StatusOr<NDArray> out = CheckSinogram(volume.data, projection, options);
  if (!out.ok()) return Annotate(out.status(), path);
  return out;
}

absl::StatusOr<int64_t> StackedSinogramSlices(const Shape& dims, const ProjectionGeometry& projection,
                                              const SinogramOptions& options) {
  const Shape one = WithoutSingletons(SinogramShape(projection, options.tof_bins));
  Shape got = WithoutSingletons(dims);
  if (got == one) return 1;
  const int64_t slices = got.empty() ? 1 : got.back();
  if (!got.empty()) got.pop_back();
  if (got == one && projection.is_2d && options.tof_bins == 0) return slices;
  std::string want = absl::StrCat(projection.det_cols, " columns");
  if (!projection.is_2d || projection.det_rows != 1) absl::StrAppend(&want, " x ", projection.det_rows, " rows");
  if (options.tof_bins > 0) absl::StrAppend(&want, " x ", options.tof_bins, " TOF bins");
  absl::StrAppend(&want, " x ", projection.num_views(), " projections");
  if (projection.is_2d && options.tof_bins == 0) absl::StrAppend(&want, " (x slices)");
  return absl::InvalidArgumentError(absl::StrCat(options.what, " is ", Shown(dims), " but proj_geom has ", want));
}

absl::StatusOr<NDArray> ReadSinogramStack(const std::string& path, const ProjectionGeometry& projection,
                                          const SinogramOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(Volume volume, ReadNifti(path));
  absl::StatusOr<int64_t> slices = StackedSinogramSlices(volume.data.shape(), projection, options);
  if (!slices.ok()) return Annotate(slices.status(), path);
  absl::StatusOr<NDArray> all = AsHostFloat(volume.data, options.what);
  if (!all.ok()) return Annotate(all.status(), path);
  const int64_t per_slice = projection.sinogram_size();
  Shape shape = SinogramShape(projection);
  shape.push_back(*slices);
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate(shape, DType::kFloat32));
  for (int64_t s = 0; s < *slices; ++s) {
    TESSERA_ASSIGN_OR_RETURN(NDArray one, NDArray::Allocate(SinogramShape(projection), DType::kFloat32));
    std::copy_n(all->data<float>() + s * per_slice, per_slice, one.data<float>());
    absl::StatusOr<NDArray> checked = CheckSinogram(one, projection, options);
    if (!checked.ok()) return Annotate(checked.status(), absl::StrCat(path, ": slice ", s));
    std::copy_n(checked->data<float>(), per_slice, out.data<float>() + s * per_slice);
  }
  return out;
}

absl::Status WriteSinogram(const NDArray& sinogram, const ProjectionGeometry& p, const std::string& path,
                           int64_t tof_bins, const std::string& description) {
  if (tof_bins < 0) return absl::InvalidArgumentError(absl::StrCat(path, ": TOF bins must be >= 0, got ", tof_bins));
  if (sinogram.empty() || sinogram.dtype() != DType::kFloat32 || sinogram.memory_kind() == MemoryKind::kDevice) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": sinogram must be a host float32 array"));
  }
  const Shape expected = SinogramShape(p, tof_bins);
  if (sinogram.num_elements() != NumElements(expected)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": sinogram has ", sinogram.num_elements(),
                                                   " elements but the geometry needs ", ShapeToString(expected)));
  }
  Shape stored = expected;
  if (p.is_2d && p.det_rows == 1 && tof_bins == 0) stored = {p.det_cols, p.num_views()};
  Volume volume;
  TESSERA_ASSIGN_OR_RETURN(volume.data, sinogram.Reshaped(stored));
  const ProjectionVectors& w = p.views.at(0);
  const double su = std::sqrt(w.u.x * w.u.x + w.u.y * w.u.y + w.u.z * w.u.z);
  const double sv = std::sqrt(w.v.x * w.v.x + w.v.y * w.v.y + w.v.z * w.v.z);
  volume.geometry.spacing = {su > 0 ? su : 1.0, (!p.is_2d && sv > 0) ? sv : 1.0, 1.0};
  volume.description = description;
  NiftiWriteOptions options;
  options.qform_code = 0;  // detector space, not world space
  options.sform_code = 0;
  return WriteNifti(volume, path, options);
}

Geometry VolumeNiftiGeometry(const VolumeGeometry& v) {
  Geometry g;
  g.spacing = {v.dx(), v.dy(), v.dz()};
  const Vec3 first = v.VoxelCenter(0, 0, 0);
  g.origin = {first.x, first.y, first.z};
  return g;
}

absl::Status WriteVolume(const NDArray& data, const VolumeGeometry& geometry, const std::string& path,
                         const std::string& description) {
  if (data.empty() || data.dtype() != DType::kFloat32 || data.memory_kind() == MemoryKind::kDevice) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": volume must be a host float32 array"));
  }
  if (data.num_elements() != geometry.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": volume has ", data.num_elements(),
                                                   " elements but vol_geom has ", geometry.nx, "x", geometry.ny, "x",
                                                   geometry.nz));
  }
  Volume volume;
  TESSERA_ASSIGN_OR_RETURN(volume.data, data.Reshaped({geometry.nx, geometry.ny, geometry.nz}));
  volume.geometry = VolumeNiftiGeometry(geometry);
  volume.description = description;
  return WriteNifti(volume, path);
}

absl::StatusOr<NDArray> CheckVolume(const Volume& volume, const VolumeGeometry& geometry,
                                    const VolumeReadOptions& options) {
  const Shape expected = {geometry.nx, geometry.ny, geometry.nz};
  const NDArray& data = volume.data;
  if (data.empty() || WithoutSingletons(data.shape()) != WithoutSingletons(expected)) {
    return absl::InvalidArgumentError(absl::StrCat(options.what, " is ", data.empty() ? "empty" : Shown(data.shape()),
                                                   " but vol_geom has ", ShapeToString(expected), " voxels"));
  }
  if (options.check_affine) {
    const Geometry want = VolumeNiftiGeometry(geometry);
    const Geometry& got = volume.geometry;
    const double tol = options.tolerance;
    for (int i = 0; i < 9; ++i) {
      if (!Near(got.direction[i], want.direction[i], 1e-4)) {
        return absl::InvalidArgumentError(absl::StrCat(
            options.what, " axes point ", got.AxisCodes(), " (NIfTI affine) but vol_geom's index axes are ",
            want.AxisCodes(), " (x, y, z); resample or reorient it to the reconstruction grid"));
      }
    }
    for (int i = 0; i < 3; ++i) {
      if (expected[i] > 1 && !Near(got.spacing[i], want.spacing[i], tol * want.spacing[i])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s voxel size is %gx%gx%g mm but vol_geom has %gx%gx%g mm", options.what, got.spacing[0],
            got.spacing[1], got.spacing[2], want.spacing[0], want.spacing[1], want.spacing[2]));
      }
    }
    const double min_spacing = std::min({want.spacing[0], want.spacing[1], want.spacing[2]});
    for (int i = 0; i < 3; ++i) {
      if (!Near(got.origin[i], want.origin[i], tol * min_spacing)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s voxel (0, 0, 0) is centred at (%g, %g, %g) mm but vol_geom puts it at (%g, %g, %g) mm", options.what,
            got.origin[0], got.origin[1], got.origin[2], want.origin[0], want.origin[1], want.origin[2]));
      }
    }
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray converted, AsHostFloat(data, options.what));
  TESSERA_ASSIGN_OR_RETURN(NDArray out, converted.Reshaped(expected));
  const float* v = out.data<float>();
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(v[i]) && !(options.nonnegative && v[i] < 0)) continue;
    const int64_t x = i % geometry.nx, y = (i / geometry.nx) % geometry.ny, z = i / (geometry.nx * geometry.ny);
    const std::string where = absl::StrCat(options.what, " value at voxel (", x, ", ", y, ", ", z, ") is ");
    if (!std::isfinite(v[i])) return absl::InvalidArgumentError(where + ValueProblem(v[i]));
    return absl::InvalidArgumentError(absl::StrCat(where, "negative (", v[i], "); it must be >= 0"));
  }
  return out;
}

absl::StatusOr<NDArray> ReadVolume(const std::string& path, const VolumeGeometry& geometry,
                                   const VolumeReadOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(Volume volume, ReadVolumeFile(path));  // NIfTI or a DICOM series
  absl::StatusOr<NDArray> out = CheckVolume(volume, geometry, options);
  if (!out.ok()) return Annotate(out.status(), path);
  return out;
}

}  // namespace tessera::recon::formats
