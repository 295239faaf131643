#include "kernels/registration/pipeline/apply_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/memory_kind_for.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/registration/bspline_interpolation.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/pipeline/label_interpolation.h"
#include "kernels/registration/pipeline/point_set_csv.h"

namespace tessera::registration {
namespace {

using P3 = std::array<double, 3>;

P3 Apply(const Mat4& m, const P3& p) {
  return {m[0] * p[0] + m[1] * p[1] + m[2] * p[2] + m[3], m[4] * p[0] + m[5] * p[1] + m[6] * p[2] + m[7],
          m[8] * p[0] + m[9] * p[1] + m[10] * p[2] + m[11]};
}

// A chain ready for many points: each field's physical -> index map once.
class PreparedChain {
 public:
  static absl::StatusOr<PreparedChain> Make(const TransformChain& chain) {
    PreparedChain prepared;
    prepared.chain_ = &chain;
    for (const ChainTransform& t : chain) {
      Mat4 to_index{};
      if (t.is_field()) {
        const Shape& s = t.field.data.shape();
        if (s.size() != 4 || s[3] != 3 || t.field.data.dtype() != DType::kFloat32) {
          return absl::InvalidArgumentError(
              absl::StrCat(t.name, ": a displacement field must be float32 (nx, ny, nz, 3), got ", ShapeToString(s)));
        }
        TESSERA_ASSIGN_OR_RETURN(to_index, InvertAffine(t.field.geometry.IndexToWorld()));
      }
      prepared.to_index_.push_back(to_index);
    }
    return prepared;
  }

  P3 Map(P3 p) const {
    for (size_t i = 0; i < chain_->size(); ++i) {
      const ChainTransform& t = (*chain_)[i];
      if (!t.is_field()) {
        p = Apply(t.affine, p);
        continue;
      }
      const P3 d = Displacement(t.field.data, to_index_[i], p);
      for (int a = 0; a < 3; ++a) p[a] += d[a];
    }
    return p;
  }

 private:
  // ITK's DisplacementFieldTransform with its linear interpolator: zero
  // outside [-0.5, n - 0.5) per axis, trilinear with the corners clamped to
  // the buffer inside.
  static P3 Displacement(const NDArray& field, const Mat4& to_index, const P3& p) {
    const P3 c = Apply(to_index, p);
    const int64_t n[3] = {field.dim(0), field.dim(1), field.dim(2)};
    int64_t base[3];
    double frac[3];
    for (int a = 0; a < 3; ++a) {
      if (!(c[a] >= -0.5 && c[a] < n[a] - 0.5)) return {0, 0, 0};
      const double f = std::floor(c[a]);
      base[a] = static_cast<int64_t>(f);
      frac[a] = c[a] - f;
    }
    const int64_t voxels = n[0] * n[1] * n[2];
    const float* v = field.data<float>();
    P3 d = {0, 0, 0};
    for (int corner = 0; corner < 8; ++corner) {
      int64_t q[3];
      double w = 1;
      for (int a = 0; a < 3; ++a) {
        const int bit = (corner >> a) & 1;
        w *= bit ? frac[a] : 1 - frac[a];
        q[a] = std::clamp<int64_t>(base[a] + bit, 0, n[a] - 1);
      }
      if (w == 0) continue;
      const int64_t at = q[0] + n[0] * (q[1] + n[1] * q[2]);
      for (int k = 0; k < 3; ++k) d[k] += w * v[k * voxels + at];
    }
    return d;
  }

  const TransformChain* chain_ = nullptr;
  std::vector<Mat4> to_index_;
};

bool SameGrid(const Volume& field, const GridSpace& reference) {
  for (int a = 0; a < 3; ++a) {
    if (field.data.dim(a) != reference.dims[a]) return false;
    const Geometry& f = field.geometry;
    const Geometry& r = reference.geometry;
    if (std::fabs(f.origin[a] - r.origin[a]) > 1e-4) return false;
    if (std::fabs(f.spacing[a] - r.spacing[a]) > 1e-6 * std::fabs(r.spacing[a])) return false;
  }
  for (int i = 0; i < 9; ++i) {
    if (std::fabs(field.geometry.direction[i] - reference.geometry.direction[i]) > 1e-6) return false;
  }
  return true;
}

// The registration's form: p -> T(p + v(p)) with v on the reference grid.
struct RegistrationForm {
  Mat4 affine{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  const NDArray* field = nullptr;  // null: affine only
};

std::optional<RegistrationForm> AsRegistrationForm(const TransformChain& chain, const GridSpace& reference) {
  RegistrationForm form;
  size_t first = 0;
  if (!chain.empty() && chain[0].is_field()) {
    if (!SameGrid(chain[0].field, reference)) return std::nullopt;
    form.field = &chain[0].field.data;
    first = 1;
  }
  bool have_affine = false;
  for (size_t i = first; i < chain.size(); ++i) {
    if (chain[i].is_field()) return std::nullopt;
    // One affine is used as it is (no product with the identity), so the
    // sampler sees exactly the registration's matrix.
    form.affine = have_affine ? Multiply(chain[i].affine, form.affine) : chain[i].affine;
    have_affine = true;
  }
  return form;
}

int64_t Voxels(const GridSpace& g) { return g.dims[0] * g.dims[1] * g.dims[2]; }

// Every reference voxel's mapped point as a displacement from it (RAS mm,
// planar float32): the dense route's field, with T = identity.
absl::StatusOr<NDArray> DenseDisplacement(const PreparedChain& chain, const GridSpace& reference) {
  const int64_t n[3] = {reference.dims[0], reference.dims[1], reference.dims[2]};
  const int64_t voxels = Voxels(reference);
  TESSERA_ASSIGN_OR_RETURN(NDArray v, NDArray::Allocate({n[0], n[1], n[2], 3}, DType::kFloat32));
  float* out = v.data<float>();
  const Mat4 to_world = reference.geometry.IndexToWorld();
  ParallelFor(n[2], [&](int64_t k0, int64_t k1, int) {
    for (int64_t k = k0; k < k1; ++k) {
      for (int64_t j = 0; j < n[1]; ++j) {
        for (int64_t i = 0; i < n[0]; ++i) {
          const int64_t at = i + n[0] * (j + n[1] * k);
          const P3 p = Apply(to_world, {double(i), double(j), double(k)});
          const P3 q = chain.Map(p);
          for (int a = 0; a < 3; ++a) out[a * voxels + at] = static_cast<float>(q[a] - p[a]);
        }
      }
    }
  });
  return v;
}

// The grid sampler route (linear or nearest): exactly the registration's
// sampling (in_core_run.cc Output, WarpLabels) for affine T and field v on
// the reference grid.
absl::StatusOr<NDArray> SampleWithGridSampler(const Stream& stream, const Volume& input, const GridSpace& reference,
                                              const Mat4& affine, const NDArray* v, bool nearest,
                                              double default_value, const GridSamplerTuning& sampler) {
  const MemoryKind kind = MemoryKindFor(stream);
  const GridSpace input_space = SpaceOf(input);
  TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(affine, reference, input_space));
  float host_affine[12];
  for (int i = 0; i < 12; ++i) host_affine[i] = static_cast<float>(a[i]);
  TESSERA_ASSIGN_OR_RETURN(NDArray affine_dev, NDArray::Allocate({12}, DType::kFloat32, kind, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(affine_dev.raw_data(), kind, host_affine, MemoryKind::kHost, sizeof(host_affine), stream));
  NDArray u_dev;
  if (v != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(Mat3 l, PhysicalToNormalizedDisplacement(affine, input_space));
    TESSERA_ASSIGN_OR_RETURN(u_dev, v->CopyTo(kind, stream, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(MixComponents(u_dev, l, stream));
  }
  GridSampleArgs args;
  args.image_dims = Dims3{input.data.dim(0), input.data.dim(1), input.data.dim(2)};
  args.affine = affine_dev.data<float>();
  args.disp = u_dev.empty() ? nullptr : u_dev.data<float>();
  args.out_dims = Dims3{reference.dims[0], reference.dims[1], reference.dims[2]};
  args.padding = Padding::kZeros;
  const Shape out_shape = {reference.dims[0], reference.dims[1], reference.dims[2]};
  const int64_t voxels = Voxels(reference);
  if (!nearest) {
    // Zeros padding blends toward 0 at the border; a default value d is
    // sampling (I - d) then adding d back (the same blend toward d).
    TESSERA_ASSIGN_OR_RETURN(NDArray image, input.data.dtype() == DType::kFloat32 && default_value == 0
                                                ? input.data.Clone()
                                                : input.data.AsType(DType::kFloat32));
    if (default_value != 0) {
      for (int64_t i = 0; i < image.num_elements(); ++i) {
        image.data<float>()[i] = static_cast<float>(image.data<float>()[i] - default_value);
      }
    }
    TESSERA_ASSIGN_OR_RETURN(NDArray image_dev, image.CopyTo(kind, stream, stream.ordinal()));
    image = NDArray();
    args.image = image_dev.data<float>();
    TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate(out_shape, DType::kFloat32, kind, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(GridSample(stream, args, out.data<float>(), sampler));
    TESSERA_ASSIGN_OR_RETURN(NDArray host, out.CopyTo(MemoryKind::kHost, stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    if (default_value != 0) {
      for (int64_t i = 0; i < voxels; ++i) host.data<float>()[i] = static_cast<float>(host.data<float>()[i] + default_value);
    }
    return host;
  }
  // Nearest: integer labels as int32 (the registration's WarpLabels); a float
  // image travels as its bits (nearest copies values, and 0 bits are 0.0f).
  const bool is_float = input.data.dtype() == DType::kFloat32 || input.data.dtype() == DType::kFloat64;
  NDArray labels;
  if (is_float) {
    TESSERA_ASSIGN_OR_RETURN(NDArray f, input.data.AsType(DType::kFloat32));
    TESSERA_ASSIGN_OR_RETURN(labels, NDArray::Allocate(f.shape(), DType::kInt32));
    std::memcpy(labels.raw_data(), f.raw_data(), f.nbytes());
  } else {
    TESSERA_ASSIGN_OR_RETURN(labels, input.data.AsType(DType::kInt32));
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray labels_dev, labels.CopyTo(kind, stream, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate(out_shape, DType::kInt32, kind, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(GridSampleNearest(stream, labels_dev.data<int32_t>(), args, out.data<int32_t>(), sampler));
  NDArray inside;
  if (default_value != 0) {
    // Which voxels fell inside: the same sampling of a map of ones.
    TESSERA_ASSIGN_OR_RETURN(NDArray ones, NDArray::Allocate(labels.shape(), DType::kInt32));
    for (int64_t i = 0; i < ones.num_elements(); ++i) ones.data<int32_t>()[i] = 1;
    TESSERA_ASSIGN_OR_RETURN(NDArray ones_dev, ones.CopyTo(kind, stream, stream.ordinal()));
    TESSERA_ASSIGN_OR_RETURN(NDArray inside_dev, NDArray::Allocate(out_shape, DType::kInt32, kind, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(GridSampleNearest(stream, ones_dev.data<int32_t>(), args, inside_dev.data<int32_t>(), sampler));
    TESSERA_ASSIGN_OR_RETURN(inside, inside_dev.CopyTo(MemoryKind::kHost, stream));
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray host, out.CopyTo(MemoryKind::kHost, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  if (is_float) {
    TESSERA_ASSIGN_OR_RETURN(NDArray f, NDArray::Allocate(out_shape, DType::kFloat32));
    std::memcpy(f.raw_data(), host.raw_data(), host.nbytes());
    if (!inside.empty()) {
      for (int64_t i = 0; i < voxels; ++i) {
        if (inside.data<int32_t>()[i] == 0) f.data<float>()[i] = static_cast<float>(default_value);
      }
    }
    return f;
  }
  if (!inside.empty()) {
    for (int64_t i = 0; i < voxels; ++i) {
      if (inside.data<int32_t>()[i] == 0) host.data<int32_t>()[i] = static_cast<int32_t>(default_value);
    }
  }
  return host;
}

// Integer labels of a label-map input: INVALID_ARGUMENT for values that are
// not integers (a label interpolation of an intensity image).
absl::StatusOr<NDArray> IntegerLabels(const NDArray& data) {
  TESSERA_ASSIGN_OR_RETURN(NDArray f64, data.AsType(DType::kFloat64));
  for (int64_t i = 0; i < f64.num_elements(); ++i) {
    const double v = f64.data<double>()[i];
    if (!(v == std::floor(v)) || std::fabs(v) > 2147483647.0) {
      return absl::InvalidArgumentError(
          absl::StrCat("label interpolation needs integer labels; voxel ", i, " is ", v));
    }
  }
  return data.AsType(DType::kInt32);
}

}  // namespace

absl::StatusOr<ApplyInterpolation> ParseApplyInterpolation(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n.empty() || n == "linear") return ApplyInterpolation::kLinear;
  if (n == "nearest" || n == "nearestneighbor") return ApplyInterpolation::kNearest;
  if (n == "bspline") return ApplyInterpolation::kBspline;
  if (n == "label" || n == "multilabel") return ApplyInterpolation::kLabel;
  if (n == "generic-label" || n == "genericlabel") return ApplyInterpolation::kGenericLabel;
  return absl::InvalidArgumentError(absl::StrCat("interpolation '", name,
                                                 "' is not one of linear, nearest, bspline, label, generic-label"));
}

const char* ApplyInterpolationName(ApplyInterpolation interpolation) {
  switch (interpolation) {
    case ApplyInterpolation::kLinear: return "linear";
    case ApplyInterpolation::kNearest: return "nearest";
    case ApplyInterpolation::kBspline: return "bspline";
    case ApplyInterpolation::kLabel: return "label";
    case ApplyInterpolation::kGenericLabel: return "generic-label";
  }
  return "linear";
}

absl::StatusOr<ChainTransform> AffineTransformFromBytes(absl::string_view bytes, absl::string_view name,
                                                        bool inverse) {
  ChainTransform t;
  t.name = inverse ? absl::StrCat("[", name, ",1]") : std::string(name);
  TESSERA_ASSIGN_OR_RETURN(t.affine, ParseItkAffine(bytes, name));
  if (inverse) {
    absl::StatusOr<Mat4> inv = InvertAffine(t.affine);
    if (!inv.ok()) return absl::InvalidArgumentError(absl::StrCat(name, ": a singular affine has no inverse"));
    t.affine = *inv;
  }
  return t;
}

absl::StatusOr<ChainTransform> LoadTransformFile(const std::string& path, bool inverse) {
  if (absl::EndsWith(path, ".nii") || absl::EndsWith(path, ".nii.gz")) {
    if (inverse) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": a displacement field cannot be inverted on the fly; give its inverse file (e.g. 0InverseWarp.nii.gz)"));
    }
    ChainTransform t;
    t.name = path;
    TESSERA_ASSIGN_OR_RETURN(t.field, ReadAntsWarp(path));
    return t;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return AffineTransformFromBytes(data, path, inverse);
}

absl::StatusOr<std::pair<std::string, bool>> ParseAntsTransformArg(absl::string_view arg) {
  absl::string_view s = absl::StripAsciiWhitespace(arg);
  if (!absl::ConsumePrefix(&s, "[")) {
    if (s.empty()) return absl::InvalidArgumentError("empty transform");
    return std::make_pair(std::string(s), false);
  }
  if (!absl::ConsumeSuffix(&s, "]")) return absl::InvalidArgumentError(absl::StrCat("'", arg, "': missing ']'"));
  const size_t comma = s.rfind(',');
  if (comma == absl::string_view::npos) return std::make_pair(std::string(absl::StripAsciiWhitespace(s)), false);
  const absl::string_view flag = absl::StripAsciiWhitespace(s.substr(comma + 1));
  const std::string file(absl::StripAsciiWhitespace(s.substr(0, comma)));
  if (file.empty() || (flag != "0" && flag != "1")) {
    return absl::InvalidArgumentError(absl::StrCat("'", arg, "': expected [file,0] or [file,1]"));
  }
  return std::make_pair(file, flag == "1");
}

std::array<double, 3> MapPoint(const TransformChain& chain, std::array<double, 3> p) {
  absl::StatusOr<PreparedChain> prepared = PreparedChain::Make(chain);
  if (!prepared.ok()) return p;
  return prepared->Map(p);
}

absl::StatusOr<AppliedVolume> ApplyTransformsToVolume(const Volume& input, const GridSpace& reference,
                                                      const TransformChain& chain,
                                                      const ApplyTransformsOptions& options) {
  if (chain.empty()) return absl::InvalidArgumentError("no transforms to apply");
  if (input.data.rank() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("the input must be a 3-D scalar volume, got ", ShapeToString(input.data.shape())));
  }
  if (input.data.memory_kind() == MemoryKind::kDevice) return absl::InvalidArgumentError("input must be in host memory");
  for (int a = 0; a < 3; ++a) {
    if (reference.dims[a] < 1) return absl::InvalidArgumentError("the reference grid is empty");
  }
  if (!std::isfinite(options.default_value)) return absl::InvalidArgumentError("default_value must be finite");
  TESSERA_ASSIGN_OR_RETURN(PreparedChain prepared, PreparedChain::Make(chain));
  for (const ChainTransform& t : chain) {
    if (!t.is_field()) TESSERA_RETURN_IF_ERROR(InvertAffine(t.affine).status());
  }
  const ApplyInterpolation interp = options.interpolation;
  const bool labels_on_cpu = interp == ApplyInterpolation::kLabel || interp == ApplyInterpolation::kGenericLabel;
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(options.device));
  AppliedVolume result;
  if (labels_on_cpu && backend == Backend::kCuda) {
    result.log.push_back(absl::StrCat(ApplyInterpolationName(interp), " interpolation runs on the CPU (no CUDA path)"));
    backend = Backend::kCpu;
  }
  TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(backend));
  result.backend = std::string(BackendName(backend));
  const std::optional<RegistrationForm> form = AsRegistrationForm(chain, reference);
  if (form.has_value()) {
    result.log.push_back(form->field != nullptr
                             ? "route: affine + field on the reference grid (the registration's sampling)"
                             : "route: affine (the registration's sampling)");
  } else {
    result.log.push_back("route: chain composed on the CPU on the reference grid");
  }
  result.volume.geometry = reference.geometry;
  if (interp == ApplyInterpolation::kLinear || interp == ApplyInterpolation::kNearest) {
    Mat4 affine{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    const NDArray* field = nullptr;
    NDArray dense;
    if (form.has_value()) {
      affine = form->affine;
      field = form->field;
    } else {
      TESSERA_ASSIGN_OR_RETURN(dense, DenseDisplacement(prepared, reference));
      field = &dense;
    }
    TESSERA_ASSIGN_OR_RETURN(result.volume.data,
                             SampleWithGridSampler(stream, input, reference, affine, field,
                                                   interp == ApplyInterpolation::kNearest, options.default_value,
                                                   options.sampler));
    result.volume.description = absl::StrCat("tessera apply-transforms (", ApplyInterpolationName(interp), ")");
    return result;
  }

  // Continuous input indices of every reference voxel (double, CPU).
  const int64_t n[3] = {reference.dims[0], reference.dims[1], reference.dims[2]};
  const int64_t voxels = Voxels(reference);
  const Mat4 to_world = reference.geometry.IndexToWorld();
  TESSERA_ASSIGN_OR_RETURN(const Mat4 input_to_index, InvertAffine(input.geometry.IndexToWorld()));
  // The registration's form as it samples (v at the voxel itself), any other
  // chain point by point in double.
  const float* fv = form.has_value() && form->field != nullptr ? form->field->data<float>() : nullptr;
  auto position = [&](int64_t i, int64_t j, int64_t k) {
    const int64_t at = i + n[0] * (j + n[1] * k);
    P3 p = Apply(to_world, {double(i), double(j), double(k)});
    if (!form.has_value()) return Apply(input_to_index, prepared.Map(p));
    if (fv != nullptr) {
      for (int a = 0; a < 3; ++a) p[a] += fv[a * voxels + at];
    }
    return Apply(input_to_index, Apply(form->affine, p));
  };
  const Dims3 in_dims{input.data.dim(0), input.data.dim(1), input.data.dim(2)};
  const Shape out_shape = {n[0], n[1], n[2]};

  if (interp == ApplyInterpolation::kBspline) {
    TESSERA_ASSIGN_OR_RETURN(NDArray image, input.data.AsType(DType::kFloat32));
    TESSERA_ASSIGN_OR_RETURN(NDArray coefficients, BsplineCoefficients(image));
    TESSERA_ASSIGN_OR_RETURN(result.volume.data, NDArray::Allocate(out_shape, DType::kFloat32));
    float* out = result.volume.data.data<float>();
    const float dv = static_cast<float>(options.default_value);
    if (backend == Backend::kCpu) {
      ParallelFor(n[2], [&](int64_t k0, int64_t k1, int) {
        for (int64_t k = k0; k < k1; ++k) {
          for (int64_t j = 0; j < n[1]; ++j) {
            for (int64_t i = 0; i < n[0]; ++i) {
              const P3 c = position(i, j, k);
              const bool inside = InsideBuffer(c[0], in_dims.nx) && InsideBuffer(c[1], in_dims.ny) &&
                                  InsideBuffer(c[2], in_dims.nz);
              out[i + n[0] * (j + n[1] * k)] =
                  inside ? static_cast<float>(cpu::BsplineValue(coefficients.data<float>(), in_dims, c[0], c[1], c[2]))
                         : dv;
            }
          }
        }
      });
    } else {
      // Positions on the CPU (float), the spline on the device.
      TESSERA_ASSIGN_OR_RETURN(NDArray positions, NDArray::Allocate({voxels, 3}, DType::kFloat32));
      float* pos = positions.data<float>();
      ParallelFor(n[2], [&](int64_t k0, int64_t k1, int) {
        for (int64_t k = k0; k < k1; ++k) {
          for (int64_t j = 0; j < n[1]; ++j) {
            for (int64_t i = 0; i < n[0]; ++i) {
              const int64_t at = i + n[0] * (j + n[1] * k);
              const P3 c = position(i, j, k);
              for (int a = 0; a < 3; ++a) pos[a * voxels + at] = static_cast<float>(c[a]);
            }
          }
        }
      });
      const MemoryKind kind = MemoryKindFor(stream);
      TESSERA_ASSIGN_OR_RETURN(NDArray c_dev, coefficients.CopyTo(kind, stream, stream.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(NDArray pos_dev, positions.CopyTo(kind, stream, stream.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(NDArray out_dev, NDArray::Allocate(out_shape, DType::kFloat32, kind, stream.ordinal()));
      BsplineSampleArgs args{c_dev.data<float>(), in_dims, pos_dev.data<float>(), voxels, dv};
      TESSERA_RETURN_IF_ERROR(BsplineSample(stream, args, out_dev.data<float>()));
      TESSERA_ASSIGN_OR_RETURN(result.volume.data, out_dev.CopyTo(MemoryKind::kHost, stream));
      TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    }
    result.volume.description = "tessera apply-transforms (bspline)";
    return result;
  }

  // label / generic-label (CPU).
  TESSERA_ASSIGN_OR_RETURN(NDArray labels, IntegerLabels(input.data));
  P3 sigma{};
  double mean_spacing = 0;
  for (int a = 0; a < 3; ++a) mean_spacing += input.geometry.spacing[a] / 3;
  const double sigma_mm = options.label_sigma_mm > 0 ? options.label_sigma_mm : mean_spacing;
  for (int a = 0; a < 3; ++a) sigma[a] = sigma_mm / input.geometry.spacing[a];
  if (interp == ApplyInterpolation::kLabel) {
    result.log.push_back(absl::StrFormat("label: Gaussian sigma %.4g mm", sigma_mm));
  }
  TESSERA_ASSIGN_OR_RETURN(result.volume.data, NDArray::Allocate(out_shape, DType::kInt32));
  int32_t* out = result.volume.data.data<int32_t>();
  const int32_t dv = static_cast<int32_t>(options.default_value);
  const int32_t* in = labels.data<int32_t>();
  ParallelFor(n[2], [&](int64_t k0, int64_t k1, int) {
    for (int64_t k = k0; k < k1; ++k) {
      for (int64_t j = 0; j < n[1]; ++j) {
        for (int64_t i = 0; i < n[0]; ++i) {
          const P3 c = position(i, j, k);
          out[i + n[0] * (j + n[1] * k)] = interp == ApplyInterpolation::kLabel ? GaussianLabelAt(in, in_dims, c, sigma, dv)
                                                                                : LinearLabelAt(in, in_dims, c, dv);
        }
      }
    }
  });
  result.volume.description = absl::StrCat("tessera apply-transforms (", ApplyInterpolationName(interp), ")");
  return result;
}

absl::StatusOr<AppliedPoints> ApplyTransformsToPoints(absl::string_view csv, absl::string_view name,
                                                      const TransformChain& chain) {
  if (chain.empty()) return absl::InvalidArgumentError("no transforms to apply");
  TESSERA_ASSIGN_OR_RETURN(PreparedChain prepared, PreparedChain::Make(chain));
  TESSERA_ASSIGN_OR_RETURN(PointSetCsv points, ParsePointSetCsv(csv, name));
  AppliedPoints out;
  out.points = static_cast<int64_t>(points.rows.size());
  out.csv = MapPointSet(std::move(points), [&prepared](std::array<double, 3> p) { return prepared.Map(p); });
  return out;
}

}  // namespace tessera::registration
