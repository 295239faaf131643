#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "kernels/registration/point_sampler.h"
#include "kernels/registration/reg_parallel.h"
#include "kernels/registration/sampler_math.h"

namespace tessera {
namespace registration {
namespace {

constexpr int64_t kMinPointsPerThread = 4096;

struct Sample {
  float value;
  float dv[3];  // d(value)/d(ix), voxel units
  float x[3];   // normalized fixed coordinate
};

float Fetch(const float* image, const Dims3& d, int64_t i, int64_t j, int64_t k) {
  if (i < 0 || j < 0 || k < 0 || i >= d.nx || j >= d.ny || k >= d.nz) return 0.f;
  return image[d.index(i, j, k)];
}

// The grid sampler's trilinear value (and derivative) with zeros padding.
Sample SampleOne(const PointSampleArgs& args, const SamplerGeometry<float>& g, int64_t voxel, bool derivative) {
  const Dims3& gd = args.grid_dims;
  const int64_t i = voxel % gd.nx, j = (voxel / gd.nx) % gd.ny, k = voxel / (gd.nx * gd.ny);
  Sample s{};
  OutputCoord(g, i, j, k, s.x);
  float ix[3];
  SamplePosition(g, args.affine, s.x, static_cast<const float*>(nullptr), ix);
  const int64_t m[3] = {args.image_dims.nx, args.image_dims.ny, args.image_dims.nz};
  for (int c = 0; c < 3; ++c) {
    if (!(ix[c] > -1.f && ix[c] < static_cast<float>(m[c]))) return s;  // all corners are padding
  }
  int64_t i0[3];
  float w1[3];
  for (int c = 0; c < 3; ++c) {
    const float f = std::floor(ix[c]);
    i0[c] = static_cast<int64_t>(f);
    w1[c] = ix[c] - f;
  }
  float v[2][2][2];
  for (int c = 0; c < 2; ++c) {
    for (int b = 0; b < 2; ++b) {
      for (int a = 0; a < 2; ++a) v[c][b][a] = Fetch(args.image, args.image_dims, i0[0] + a, i0[1] + b, i0[2] + c);
    }
  }
  const float wx[2] = {1.f - w1[0], w1[0]}, wy[2] = {1.f - w1[1], w1[1]}, wz[2] = {1.f - w1[2], w1[2]};
  for (int c = 0; c < 2; ++c) {
    for (int b = 0; b < 2; ++b) {
      for (int a = 0; a < 2; ++a) s.value += wx[a] * wy[b] * wz[c] * v[c][b][a];
    }
  }
  if (derivative) {
    for (int c = 0; c < 2; ++c) {
      for (int b = 0; b < 2; ++b) {
        s.dv[0] += wy[b] * wz[c] * (v[c][b][1] - v[c][b][0]);
        s.dv[1] += wx[b] * wz[c] * (v[c][1][b] - v[c][0][b]);
        s.dv[2] += wx[b] * wy[c] * (v[1][c][b] - v[0][c][b]);
      }
    }
  }
  return s;
}

SamplerGeometry<float> GeometryOf(const PointSampleArgs& args) {
  const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 1};
  return MakeSamplerGeometry<float>(args.grid_dims, args.image_dims, lo, hi, Padding::kZeros);
}

}  // namespace

absl::Status ValidatePointSampleArgs(const PointSampleArgs& args) {
  if (args.image == nullptr || args.points == nullptr) {
    return absl::InvalidArgumentError("point sampler: image and points must not be null");
  }
  if (args.image_dims.size() <= 0 || args.grid_dims.size() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("point sampler: empty image ", DimsToString(args.image_dims),
                                                   " or grid ", DimsToString(args.grid_dims)));
  }
  if (args.count < 0) return absl::InvalidArgumentError(absl::StrCat("point sampler: count ", args.count, " < 0"));
  const int64_t voxels = args.grid_dims.size();
  for (int64_t k = 0; k < args.count; ++k) {
    if (args.points[k] < 0 || args.points[k] >= voxels) {
      return absl::InvalidArgumentError(absl::StrCat("point sampler: point ", k, " is voxel ", args.points[k],
                                                     ", outside the grid's ", voxels, " voxels"));
    }
  }
  return absl::OkStatus();
}

absl::Status SamplePoints(const PointSampleArgs& args, float* values) {
  if (absl::Status s = ValidatePointSampleArgs(args); !s.ok()) return s;
  if (values == nullptr) return absl::InvalidArgumentError("point sampler: values must not be null");
  const SamplerGeometry<float> g = GeometryOf(args);
  reg_internal::ParallelFor(args.count, kMinPointsPerThread, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) values[k] = SampleOne(args, g, args.points[k], false).value;
  });
  return absl::OkStatus();
}

absl::Status SamplePointsAffineBackward(const PointSampleArgs& args, const float* grad_values,
                                        std::array<double, kAffineParams>* grad_affine) {
  if (absl::Status s = ValidatePointSampleArgs(args); !s.ok()) return s;
  if (grad_values == nullptr || grad_affine == nullptr) {
    return absl::InvalidArgumentError("point sampler: grad_values and grad_affine must not be null");
  }
  const SamplerGeometry<float> g = GeometryOf(args);
  const int chunks = std::max(1, reg_internal::NumChunks(args.count, kMinPointsPerThread));
  std::vector<std::array<double, kAffineParams>> partial(chunks);
  for (auto& p : partial) p.fill(0.0);
  reg_internal::ParallelChunks(args.count, kMinPointsPerThread, [&](int c, int64_t begin, int64_t end) {
    std::array<double, kAffineParams>& acc = partial[c];
    for (int64_t k = begin; k < end; ++k) {
      const float go = grad_values[k];
      if (go == 0.f) continue;
      const Sample s = SampleOne(args, g, args.points[k], true);
      for (int r = 0; r < 3; ++r) {
        // dL/dp_r = go * dI/dix_r * dix_r/dp_r, dix/dp = (m - 1) / 2.
        const double dp = static_cast<double>(go) * s.dv[r] * g.in_half[r];
        acc[4 * r + 0] += dp * s.x[0];
        acc[4 * r + 1] += dp * s.x[1];
        acc[4 * r + 2] += dp * s.x[2];
        acc[4 * r + 3] += dp;
      }
    }
  });
  grad_affine->fill(0.0);
  for (const auto& p : partial) {
    for (int e = 0; e < kAffineParams; ++e) (*grad_affine)[e] += p[e];
  }
  return absl::OkStatus();
}

std::vector<int64_t> RandomVoxelSubset(int64_t voxels, int64_t count, uint64_t seed) {
  std::vector<int64_t> points(static_cast<size_t>(std::max<int64_t>(0, count)));
  if (voxels <= 0) return {};
  std::mt19937_64 rng(seed);  // mt19937_64's sequence is fixed by the standard
  for (int64_t& p : points) {
    // Multiply-shift maps 64 random bits onto [0, voxels) without modulo bias worth noticing.
    p = static_cast<int64_t>((static_cast<unsigned __int128>(rng()) * static_cast<uint64_t>(voxels)) >> 64);
  }
  return points;
}

}  // namespace registration
}  // namespace tessera
