#include "kernels/registration/pipeline/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"

#include "common/status.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/pipeline/space.h"
#include "kernels/registration/pipeline/transform_params.h"

namespace tessera::registration {
namespace {

double MapIntensity(IntensityChange change, double x) {
  switch (change) {
    case IntensityChange::kGamma:
      return std::pow(x, 0.8);
    case IntensityChange::kNonMonotonic:
      return 4 * x * (1 - x);
    case IntensityChange::kInverted:
      return 1 - x;
    case IntensityChange::kT2Like:
      return (1 - x) * std::min(1.0, x / 0.1);
  }
  return x;
}

// Multiplies by exp(b) with b a random quadratic polynomial of the normalised
// coordinates (a smooth, scanner-like bias) scaled to max |b| = bias_fraction,
// then adds Gaussian noise of sigma noise_fraction * peak.
void AddAcquisitionEffects(const SyntheticOptions& options, const GridSpace& space, double peak, NDArray* image) {
  if (options.bias_fraction <= 0 && options.noise_fraction <= 0) return;
  std::mt19937_64 rng(options.seed ^ 0x5eed5eedULL);
  std::normal_distribution<double> gauss(0, 1);
  const int64_t nx = space.dims[0], ny = space.dims[1], nz = space.dims[2];
  float* p = image->data<float>();
  if (options.bias_fraction > 0) {
    double c[9];  // x, y, z, xx, yy, zz, xy, yz, zx
    for (double& v : c) v = gauss(rng);
    std::vector<double> b(static_cast<size_t>(nx * ny * nz));
    double peak_b = 0;
    for (int64_t k = 0; k < nz; ++k) {
      for (int64_t j = 0; j < ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) {
          const double x = nx > 1 ? 2.0 * i / (nx - 1) - 1 : 0, y = ny > 1 ? 2.0 * j / (ny - 1) - 1 : 0,
                       z = nz > 1 ? 2.0 * k / (nz - 1) - 1 : 0;
          const double v = c[0] * x + c[1] * y + c[2] * z + c[3] * x * x + c[4] * y * y + c[5] * z * z + c[6] * x * y +
                           c[7] * y * z + c[8] * z * x;
          b[i + nx * (j + ny * k)] = v;
          peak_b = std::max(peak_b, std::abs(v));
        }
      }
    }
    const double scale = peak_b > 0 ? options.bias_fraction / peak_b : 0;
    for (size_t i = 0; i < b.size(); ++i) p[i] = static_cast<float>(p[i] * std::exp(scale * b[i]));
  }
  if (options.noise_fraction > 0) {
    const double sigma = options.noise_fraction * peak;
    for (int64_t i = 0; i < nx * ny * nz; ++i) p[i] = static_cast<float>(p[i] + sigma * gauss(rng));
  }
}

}  // namespace

absl::StatusOr<IntensityChange> ParseIntensityChange(absl::string_view name) {
  if (name == "gamma") return IntensityChange::kGamma;
  if (name == "nonmonotonic") return IntensityChange::kNonMonotonic;
  if (name == "inverted") return IntensityChange::kInverted;
  if (name == "t2like") return IntensityChange::kT2Like;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown intensity change '", name, "': expected gamma, nonmonotonic, inverted or t2like"));
}

absl::StatusOr<SyntheticPair> MakeSyntheticPair(const Volume& image, const Volume* labels,
                                                const SyntheticOptions& options) {
  if (image.data.rank() != 3) return absl::InvalidArgumentError("synthetic pairs need a 3-D image");
  if (!(options.bias_fraction >= 0) || !(options.noise_fraction >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("bias_fraction and noise_fraction must be >= 0, got ",
                                                   options.bias_fraction, " and ", options.noise_fraction));
  }
  for (int d = 0; d < 3; ++d) {
    if (!(options.crop_low[d] >= 0) || !(options.crop_high[d] >= 0) || options.crop_low[d] + options.crop_high[d] >= 1) {
      return absl::InvalidArgumentError(absl::StrCat("crop of axis ", d, " (low ", options.crop_low[d], ", high ",
                                                     options.crop_high[d], ") must be >= 0 and leave part of the axis"));
    }
  }
  std::mt19937_64 rng(options.seed);
  std::normal_distribution<double> gauss(0, 1);
  std::uniform_real_distribution<double> uniform(-1, 1);
  const GridSpace space = SpaceOf(image);
  const Dims3 dims = DimsOf(image.data);

  // Physical affine: rotation about the image centre plus a translation.
  std::array<double, 3> axis = {gauss(rng), gauss(rng), gauss(rng)}, shift = {gauss(rng), gauss(rng), gauss(rng)};
  const double axis_norm = std::sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]);
  const double shift_norm = std::sqrt(shift[0] * shift[0] + shift[1] * shift[1] + shift[2] * shift[2]);
  const double angle = options.rotation_deg * M_PI / 180.0;
  LinearTransform t;
  t.matrix = RotationFromAxisAngle({axis[0] / axis_norm * angle, axis[1] / axis_norm * angle, axis[2] / axis_norm * angle});
  const Mat4 to_world = NormalizedToWorld(space);
  for (int r = 0; r < 3; ++r) {
    t.center[r] = to_world[r * 4 + 3];  // normalized (0,0,0): the grid centre
    t.translation[r] = shift[r] / shift_norm * options.translation_mm;
  }
  TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t.ToMat4(), space, space));
  float affine[12];
  for (int i = 0; i < 12; ++i) affine[i] = static_cast<float>(a[i]);

  // Smooth random field: random control vectors on a coarse grid, upsampled
  // trilinearly and smoothed, scaled to the peak amplitude, in RAS mm, then
  // mapped to the sampler's normalised units (u = L v).
  const int cp = std::max(2, options.control_points);
  TESSERA_ASSIGN_OR_RETURN(NDArray coarse, NDArray::Allocate({cp, cp, cp, 3}, DType::kFloat32));
  for (int64_t i = 0; i < coarse.num_elements(); ++i) coarse.data<float>()[i] = static_cast<float>(uniform(rng));
  TESSERA_ASSIGN_OR_RETURN(NDArray field, NDArray::Allocate({dims.nx, dims.ny, dims.nz, 3}, DType::kFloat32));
  TESSERA_RETURN_IF_ERROR(UpsampleDisplacement(coarse, &field, DisplacementUnits::kNormalized, Stream::Cpu()));
  // Smooth out the trilinear kinks; the cap keeps the kernel radius within
  // GaussianSmooth's limit on large grids (the field is smooth anyway).
  const double sigma = std::min(0.5 * static_cast<double>(dims.nx) / cp, 16.0);
  TESSERA_RETURN_IF_ERROR(GaussianSmooth(field, &field, {sigma, sigma, sigma}, Stream::Cpu()));
  const int64_t n = dims.size();
  float* f = field.data<float>();
  double peak = 0;
  for (int64_t i = 0; i < n; ++i) {
    peak = std::max(peak, std::sqrt(double{f[i]} * f[i] + double{f[n + i]} * f[n + i] + double{f[2 * n + i]} * f[2 * n + i]));
  }
  TESSERA_ASSIGN_OR_RETURN(Mat3 l, PhysicalToNormalizedDisplacement(t.ToMat4(), space));
  const double scale = peak > 0 ? options.deformation_mm / peak : 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v[3] = {f[i] * scale, f[n + i] * scale, f[2 * n + i] * scale};
    for (int r = 0; r < 3; ++r) f[r * n + i] = static_cast<float>(l[r * 3] * v[0] + l[r * 3 + 1] * v[1] + l[r * 3 + 2] * v[2]);
  }

  GridSampleArgs args;
  args.image_dims = dims;
  args.affine = affine;
  args.disp = field.data<float>();
  args.out_dims = dims;
  args.padding = Padding::kZeros;

  SyntheticPair pair;
  TESSERA_ASSIGN_OR_RETURN(NDArray source, image.data.AsType(DType::kFloat32));
  args.image = source.data<float>();
  TESSERA_ASSIGN_OR_RETURN(pair.moving.data, NDArray::Allocate(image.data.shape(), DType::kFloat32));
  TESSERA_RETURN_IF_ERROR(GridSample(Stream::Cpu(), args, pair.moving.data.data<float>()));
  pair.moving.geometry = image.geometry;
  pair.moving.description = "tessera synthetic moving image";

  // Intensity change on [0, max], then the acquisition effects.
  float* m = pair.moving.data.data<float>();
  float hi = 0;
  for (int64_t i = 0; i < n; ++i) hi = std::max(hi, m[i]);
  if (hi > 0) {
    for (int64_t i = 0; i < n; ++i) m[i] = static_cast<float>(MapIntensity(options.intensity, std::clamp(m[i] / hi, 0.f, 1.f)) * hi);
  }
  AddAcquisitionEffects(options, space, hi, &pair.moving.data);

  if (labels != nullptr) {
    if (labels->data.shape() != image.data.shape()) {
      return absl::InvalidArgumentError("labels must be on the image's grid");
    }
    TESSERA_ASSIGN_OR_RETURN(NDArray labels32, labels->data.AsType(DType::kInt32));
    Volume out;
    TESSERA_ASSIGN_OR_RETURN(out.data, NDArray::Allocate(image.data.shape(), DType::kInt32));
    TESSERA_RETURN_IF_ERROR(GridSampleNearest(Stream::Cpu(), labels32.data<int32_t>(), args, out.data.data<int32_t>()));
    out.geometry = labels->geometry;
    pair.moving_labels = std::move(out);
  }
  // Partial field of view, then the stored orientation.
  std::array<int64_t, 3> lo{}, hi_idx{};
  for (int d = 0; d < 3; ++d) {
    const int64_t size = image.data.dim(d);
    lo[d] = static_cast<int64_t>(std::floor(options.crop_low[d] * size));
    hi_idx[d] = size - static_cast<int64_t>(std::floor(options.crop_high[d] * size));
  }
  TESSERA_ASSIGN_OR_RETURN(pair.moving, Crop(pair.moving, lo, hi_idx));
  TESSERA_ASSIGN_OR_RETURN(pair.moving, Reorient(pair.moving, options.axis_order, options.flip));
  if (pair.moving_labels) {
    TESSERA_ASSIGN_OR_RETURN(*pair.moving_labels, Crop(*pair.moving_labels, lo, hi_idx));
    TESSERA_ASSIGN_OR_RETURN(*pair.moving_labels, Reorient(*pair.moving_labels, options.axis_order, options.flip));
  }
  return pair;
}

absl::StatusOr<Volume> Reorient(const Volume& volume, const std::array<int, 3>& axis_order,
                                const std::array<bool, 3>& flip) {
  if (volume.data.rank() != 3) return absl::InvalidArgumentError("Reorient needs a 3-D volume");
  std::array<bool, 3> seen{};
  for (int d = 0; d < 3; ++d) {
    if (axis_order[d] < 0 || axis_order[d] > 2 || seen[axis_order[d]]) {
      return absl::InvalidArgumentError(absl::StrCat("axis_order must be a permutation of 0, 1, 2; got ", axis_order[0],
                                                     ",", axis_order[1], ",", axis_order[2]));
    }
    seen[axis_order[d]] = true;
  }
  const NDArray& in = volume.data;
  const std::array<int64_t, 3> n_in = {in.dim(0), in.dim(1), in.dim(2)};
  std::array<int64_t, 3> n_out;
  for (int d = 0; d < 3; ++d) n_out[d] = n_in[axis_order[d]];
  Volume out;
  out.description = volume.description;
  TESSERA_ASSIGN_OR_RETURN(out.data, NDArray::Allocate({n_out[0], n_out[1], n_out[2]}, in.dtype()));
  const size_t bytes = SizeOf(in.dtype());
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.data.raw_data());
  for (int64_t k = 0; k < n_out[2]; ++k) {
    for (int64_t j = 0; j < n_out[1]; ++j) {
      for (int64_t i = 0; i < n_out[0]; ++i) {
        const int64_t o[3] = {i, j, k};
        int64_t s[3];
        for (int d = 0; d < 3; ++d) s[axis_order[d]] = flip[d] ? n_out[d] - 1 - o[d] : o[d];
        std::memcpy(dst + bytes * (i + n_out[0] * (j + n_out[1] * k)),
                    src + bytes * (s[0] + n_in[0] * (s[1] + n_in[1] * s[2])), bytes);
      }
    }
  }
  // Stored axis d steps along input axis axis_order[d] (backwards where
  // flipped, starting from that axis' last voxel).
  const Geometry& g = volume.geometry;
  Geometry& h = out.geometry;
  h.origin = g.origin;
  for (int d = 0; d < 3; ++d) {
    const int a = axis_order[d];
    h.spacing[d] = g.spacing[a];
    for (int r = 0; r < 3; ++r) {
      h.direction[r * 3 + d] = flip[d] ? -g.direction[r * 3 + a] : g.direction[r * 3 + a];
      if (flip[d]) h.origin[r] += g.direction[r * 3 + a] * g.spacing[a] * static_cast<double>(n_in[a] - 1);
    }
  }
  return out;
}

absl::StatusOr<Volume> Crop(const Volume& volume, const std::array<int64_t, 3>& lo, const std::array<int64_t, 3>& hi) {
  if (volume.data.rank() != 3) return absl::InvalidArgumentError("Crop needs a 3-D volume");
  const NDArray& in = volume.data;
  std::array<int64_t, 3> n_out;
  for (int d = 0; d < 3; ++d) {
    if (lo[d] < 0 || hi[d] > in.dim(d) || hi[d] - lo[d] < 2) {
      return absl::InvalidArgumentError(absl::StrCat("crop of axis ", d, " to [", lo[d], ", ", hi[d],
                                                     ") leaves fewer than 2 of its ", in.dim(d), " voxels"));
    }
    n_out[d] = hi[d] - lo[d];
  }
  Volume out;
  out.description = volume.description;
  TESSERA_ASSIGN_OR_RETURN(out.data, NDArray::Allocate({n_out[0], n_out[1], n_out[2]}, in.dtype()));
  const size_t bytes = SizeOf(in.dtype());
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.data.raw_data());
  for (int64_t k = 0; k < n_out[2]; ++k) {
    for (int64_t j = 0; j < n_out[1]; ++j) {
      const int64_t s = lo[0] + in.dim(0) * ((lo[1] + j) + in.dim(1) * (lo[2] + k));
      std::memcpy(dst + bytes * n_out[0] * (j + n_out[1] * k), src + bytes * s, bytes * n_out[0]);
    }
  }
  out.geometry = volume.geometry;
  const Geometry& g = volume.geometry;
  for (int r = 0; r < 3; ++r) {
    for (int d = 0; d < 3; ++d) out.geometry.origin[r] += g.direction[r * 3 + d] * g.spacing[d] * static_cast<double>(lo[d]);
  }
  return out;
}

absl::StatusOr<Phantom> MakePhantom(int64_t n, double spacing_mm) {
  if (n < 8 || n > 512) return absl::InvalidArgumentError("phantom size must be in 8..512");
  if (!(spacing_mm > 0)) return absl::InvalidArgumentError("phantom spacing must be positive");
  struct Ellipsoid {
    double centre[3], radii[3];  // fractions of the half-extent
    float intensity;
  };
  // The head first; later ellipsoids replace what they cover.
  const Ellipsoid shapes[] = {{{0, 0, 0}, {0.80, 0.70, 0.75}, 0.45f},
                              {{-0.30, 0.10, 0.05}, {0.22, 0.30, 0.25}, 0.95f},
                              {{0.32, -0.05, -0.10}, {0.18, 0.25, 0.30}, 0.15f},
                              {{0.05, -0.35, 0.30}, {0.25, 0.15, 0.20}, 0.70f}};
  Phantom p;
  TESSERA_ASSIGN_OR_RETURN(p.image.data, NDArray::Allocate({n, n, n}, DType::kFloat32));
  TESSERA_ASSIGN_OR_RETURN(p.labels.data, NDArray::Allocate({n, n, n}, DType::kInt32));
  float* image = p.image.data.data<float>();
  int32_t* labels = p.labels.data.data<int32_t>();
  const double half = 0.5 * static_cast<double>(n - 1), edge = 2.0 / static_cast<double>(n);  // ~1 voxel ramp
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < n; ++i) {
        const double x[3] = {(i - half) / half, (j - half) / half, (k - half) / half};
        float value = 0.f;
        int32_t label = 0;
        for (int s = 0; s < 4; ++s) {
          double r2 = 0;
          for (int d = 0; d < 3; ++d) {
            const double t = (x[d] - shapes[s].centre[d]) / shapes[s].radii[d];
            r2 += t * t;
          }
          // Smooth step across the boundary r = 1, so the image has gradients.
          const double inside = std::clamp((1.0 - std::sqrt(r2)) / edge + 0.5, 0.0, 1.0);
          value = static_cast<float>((1 - inside) * value + inside * shapes[s].intensity);
          if (r2 <= 1) label = s + 1;
        }
        image[i + n * (j + n * k)] = value;
        labels[i + n * (j + n * k)] = label;
      }
    }
  }
  Geometry g;
  g.spacing = {spacing_mm, spacing_mm, spacing_mm};
  g.origin = {-half * spacing_mm, -half * spacing_mm, -half * spacing_mm};
  p.image.geometry = g;
  p.labels.geometry = g;
  p.image.description = "tessera phantom";
  p.labels.description = "tessera phantom labels";
  return p;
}

absl::StatusOr<Volume> DownsampleImage(const Volume& image, int factor) {
  TESSERA_ASSIGN_OR_RETURN(NDArray f, image.data.AsType(DType::kFloat32));
  const Shape shape = DownsampledShape(f.shape(), factor);
  Volume out;
  TESSERA_ASSIGN_OR_RETURN(out.data, NDArray::Allocate(shape, DType::kFloat32));
  TESSERA_RETURN_IF_ERROR(DownsampleVolume(f, &out.data, Stream::Cpu()));
  out.geometry = DownsampledSpace(SpaceOf(image), shape).geometry;
  return out;
}

absl::StatusOr<Volume> DownsampleLabels(const Volume& labels, int factor) {
  TESSERA_ASSIGN_OR_RETURN(NDArray l, labels.data.AsType(DType::kInt32));
  const Shape shape = DownsampledShape(l.shape(), factor);
  Volume out;
  TESSERA_ASSIGN_OR_RETURN(out.data, NDArray::Allocate(shape, DType::kInt32));
  // Nearest voxel of the aligned-corner grid.
  for (int64_t k = 0; k < shape[2]; ++k) {
    for (int64_t j = 0; j < shape[1]; ++j) {
      for (int64_t i = 0; i < shape[0]; ++i) {
        const int64_t idx[3] = {i, j, k};
        int64_t src[3];
        for (int d = 0; d < 3; ++d) {
          src[d] = shape[d] > 1 ? std::llround(static_cast<double>(idx[d]) * (l.dim(d) - 1) / (shape[d] - 1)) : 0;
        }
        out.data.data<int32_t>()[i + shape[0] * (j + shape[1] * k)] =
            l.data<int32_t>()[src[0] + l.dim(0) * (src[1] + l.dim(1) * src[2])];
      }
    }
  }
  out.geometry = DownsampledSpace(SpaceOf(labels), shape).geometry;
  return out;
}

}  // namespace tessera::registration
