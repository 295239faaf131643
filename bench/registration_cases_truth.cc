#include "bench/registration_cases_truth.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "kernels/registration/label_metrics.h"

namespace tessera::registration {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

struct P3 {
  double x, y, z;
};

P3 Apply(const Mat4& m, P3 p) {
  return {m[0] * p.x + m[1] * p.y + m[2] * p.z + m[3], m[4] * p.x + m[5] * p.y + m[6] * p.z + m[7],
          m[8] * p.x + m[9] * p.y + m[10] * p.z + m[11]};
}

// The generator's output for one input image (gamma map undone: x^0.8 scaled
// by the output maximum, which the map keeps).
absl::StatusOr<std::vector<double>> Generate(const Volume& input, SyntheticOptions synth) {
  synth.intensity = IntensityChange::kGamma;
  synth.bias_fraction = synth.noise_fraction = 0;
  synth.crop_low = synth.crop_high = {0, 0, 0};
  synth.axis_order = {0, 1, 2};
  synth.flip = {false, false, false};
  TESSERA_ASSIGN_OR_RETURN(SyntheticPair pair, MakeSyntheticPair(input, nullptr, synth));
  const float* m = pair.moving.data.data<float>();
  const int64_t n = pair.moving.data.num_elements();
  double hi = 0;
  for (int64_t i = 0; i < n; ++i) hi = std::max(hi, double{m[i]});
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = hi > 0 ? hi * std::pow(std::max(0.0, double{m[i]}) / hi, 1.25) : 0;
  return out;
}

// Trilinear sample of `f` (nx, ny, nz) at continuous index p; false outside.
bool Trilinear(const std::vector<double>& f, const int64_t n[3], const double p[3], double* out) {
  int64_t lo[3];
  double t[3];
  for (int d = 0; d < 3; ++d) {
    if (!(p[d] >= 0 && p[d] <= n[d] - 1)) return false;
    lo[d] = std::min<int64_t>(static_cast<int64_t>(std::floor(p[d])), n[d] - 2);
    t[d] = p[d] - lo[d];
  }
  double s = 0;
  for (int c = 0; c < 8; ++c) {
    double w = 1;
    int64_t q[3];
    for (int d = 0; d < 3; ++d) {
      const int bit = (c >> d) & 1;
      q[d] = lo[d] + bit;
      w *= bit ? t[d] : 1 - t[d];
    }
    s += w * f[q[0] + n[0] * (q[1] + n[1] * q[2])];
  }
  *out = s;
  return true;
}

}  // namespace

absl::StatusOr<NDArray> TrueDisplacement(const Volume& fixed, const SyntheticOptions& synth) {
  const int64_t n[3] = {fixed.data.dim(0), fixed.data.dim(1), fixed.data.dim(2)};
  const int64_t voxels = n[0] * n[1] * n[2];
  // pos(p) per axis from index + 1 images; a constant one marks full support.
  std::vector<double> pos[3], support;
  for (int axis = 0; axis < 4; ++axis) {
    Volume coord{NDArray(), fixed.geometry, "coordinates"};
    TESSERA_ASSIGN_OR_RETURN(coord.data, NDArray::Allocate({n[0], n[1], n[2]}, DType::kFloat32));
    float* c = coord.data.data<float>();
    for (int64_t k = 0; k < n[2]; ++k) {
      for (int64_t j = 0; j < n[1]; ++j) {
        for (int64_t i = 0; i < n[0]; ++i) {
          const int64_t idx[3] = {i, j, k};
          c[i + n[0] * (j + n[1] * k)] = axis < 3 ? static_cast<float>(idx[axis] + 1) : 1.f;
        }
      }
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<double> g, Generate(coord, synth));
    if (axis < 3) {
      for (double& v : g) v -= 1;
      pos[axis] = std::move(g);
    } else {
      support = std::move(g);
    }
  }
  // Where the generator's sample had all 8 corners inside; elsewhere NaN.
  for (int axis = 0; axis < 3; ++axis) {
    for (int64_t v = 0; v < voxels; ++v) {
      if (!(std::abs(support[v] - 1) < 1e-4)) pos[axis][v] = std::numeric_limits<double>::quiet_NaN();
    }
  }
  // Invert: for fixed voxel q, p with pos(p) = q by fixed-point iteration
  // (pos is a small rotation plus a smooth field: a contraction).
  TESSERA_ASSIGN_OR_RETURN(NDArray d, NDArray::Allocate({n[0], n[1], n[2], 3}, DType::kFloat32));
  float* out = d.data<float>();
  const Mat4 w = fixed.geometry.IndexToWorld();
  for (int64_t k = 0; k < n[2]; ++k) {
    for (int64_t j = 0; j < n[1]; ++j) {
      for (int64_t i = 0; i < n[0]; ++i) {
        const int64_t at = i + n[0] * (j + n[1] * k);
        const double q[3] = {double(i), double(j), double(k)};
        double p[3] = {q[0], q[1], q[2]};
        bool ok = true;
        double residual = 0;
        for (int it = 0; it < 60 && ok; ++it) {
          double f[3];
          for (int a = 0; a < 3 && ok; ++a) ok = Trilinear(pos[a], n, p, &f[a]) && std::isfinite(f[a]);
          if (!ok) break;
          residual = 0;
          for (int a = 0; a < 3; ++a) {
            p[a] += q[a] - f[a];
            residual = std::max(residual, std::abs(q[a] - f[a]));
          }
          if (residual < 1e-5) break;
        }
        if (!ok || residual > 1e-3) {
          for (int c = 0; c < 3; ++c) out[c * voxels + at] = kNan;
          continue;
        }
        const P3 x = Apply(w, {q[0], q[1], q[2]}), y = Apply(w, {p[0], p[1], p[2]});
        out[at] = static_cast<float>(y.x - x.x);
        out[voxels + at] = static_cast<float>(y.y - x.y);
        out[2 * voxels + at] = static_cast<float>(y.z - x.z);
      }
    }
  }
  return d;
}

absl::StatusOr<NDArray> MapDisplacement(const Geometry& fixed, const Mat4& affine_ras, const NDArray& v) {
  if (v.rank() != 4 || v.dim(3) != 3 || v.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("displacement must be float32 (nx, ny, nz, 3), got ",
                                                   ShapeToString(v.shape())));
  }
  const int64_t n[3] = {v.dim(0), v.dim(1), v.dim(2)};
  const int64_t voxels = n[0] * n[1] * n[2];
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate(v.shape(), DType::kFloat32));
  const Mat4 w = fixed.IndexToWorld();
  const float* vv = v.data<float>();
  float* o = out.data<float>();
  for (int64_t k = 0; k < n[2]; ++k) {
    for (int64_t j = 0; j < n[1]; ++j) {
      for (int64_t i = 0; i < n[0]; ++i) {
        const int64_t at = i + n[0] * (j + n[1] * k);
        const P3 x = Apply(w, {double(i), double(j), double(k)});
        const P3 y = Apply(affine_ras, {x.x + vv[at], x.y + vv[voxels + at], x.z + vv[2 * voxels + at]});
        o[at] = static_cast<float>(y.x - x.x);
        o[voxels + at] = static_cast<float>(y.y - x.y);
        o[2 * voxels + at] = static_cast<float>(y.z - x.z);
      }
    }
  }
  return out;
}

absl::StatusOr<MapError> CompareMaps(const NDArray& estimate, const NDArray& truth, const NDArray& fixed_labels,
                                     int64_t min_voxels) {
  if (estimate.shape() != truth.shape() || fixed_labels.rank() != 3 || fixed_labels.dim(0) != truth.dim(0) ||
      fixed_labels.dim(1) != truth.dim(1) || fixed_labels.dim(2) != truth.dim(2)) {
    return absl::InvalidArgumentError(absl::StrCat("CompareMaps: shapes differ: estimate ", ShapeToString(estimate.shape()),
                                                   ", truth ", ShapeToString(truth.shape()), ", labels ",
                                                   ShapeToString(fixed_labels.shape())));
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray labels, fixed_labels.AsType(DType::kInt32));
  const int32_t* l = labels.data<int32_t>();
  const int64_t voxels = labels.num_elements();
  std::map<int32_t, int64_t> size;
  for (int64_t v = 0; v < voxels; ++v) ++size[l[v]];
  const float* e = estimate.data<float>();
  const float* t = truth.data<float>();
  MapError out;
  double sum2 = 0, sum2_small = 0;
  double bin_sum2[5] = {0, 0, 0, 0, 0};
  int64_t bin_count[5] = {0, 0, 0, 0, 0};
  const int64_t bin_edges[4] = {30, 100, 300, 1000};
  std::vector<double> norms;
  for (int64_t v = 0; v < voxels; ++v) {
    if (l[v] <= 0 || !std::isfinite(t[v])) continue;
    double d[3], n2 = 0;
    for (int c = 0; c < 3; ++c) {
      d[c] = double{e[c * voxels + v]} - t[c * voxels + v];
      out.mean_ras[c] += d[c];
      n2 += d[c] * d[c];
    }
    sum2 += n2;
    norms.push_back(std::sqrt(n2));
    ++out.voxels;
    if (size[l[v]] < min_voxels) sum2_small += n2, ++out.voxels_small;
    int bin = 0;
    while (bin < 4 && size[l[v]] >= bin_edges[bin]) ++bin;
    bin_sum2[bin] += n2;
    ++bin_count[bin];
  }
  for (int b = 0; b < 5; ++b) out.rms_by_size[b] = bin_count[b] > 0 ? std::sqrt(bin_sum2[b] / double(bin_count[b])) : 0;
  if (out.voxels == 0) return absl::InvalidArgumentError("CompareMaps: no labelled voxel with a known truth");
  for (double& m : out.mean_ras) m /= double(out.voxels);
  out.rms = std::sqrt(sum2 / double(out.voxels));
  out.rms_small = out.voxels_small > 0 ? std::sqrt(sum2_small / double(out.voxels_small)) : 0;
  const int64_t large = out.voxels - out.voxels_small;
  out.rms_large = large > 0 ? std::sqrt((sum2 - sum2_small) / double(large)) : 0;
  out.p95 = label_metrics_internal::Percentile(norms, 95);
  return out;
}

absl::StatusOr<std::string> DiceBySize(const NDArray& fixed_labels, const std::vector<NDArray>& maps,
                                       const std::vector<std::string>& names, const Geometry& geometry) {
  const int64_t edges[] = {1, 2, 4, 10, 30, 100, 300, 1000, std::numeric_limits<int64_t>::max()};
  constexpr int kBins = 8;
  std::vector<std::vector<double>> sum(maps.size(), std::vector<double>(kBins + 1, 0.0));
  std::vector<int> count(kBins + 1, 0);
  std::vector<std::vector<int>> lost(maps.size(), std::vector<int>(kBins + 1, 0));
  LabelMetricsOptions options;
  options.hausdorff = false;
  options.spacing_mm = geometry.spacing;
  for (size_t m = 0; m < maps.size(); ++m) {
    TESSERA_ASSIGN_OR_RETURN(LabelMetrics metrics, ComputeLabelMetrics(fixed_labels, maps[m], options));
    for (const LabelScore& s : metrics.labels) {
      int bin = 0;
      while (bin < kBins - 1 && s.voxels_a >= edges[bin + 1]) ++bin;
      if (s.voxels_a == 0) bin = kBins;  // only in the scored map
      sum[m][bin] += s.dice;
      lost[m][bin] += s.voxels_b == 0;
      if (m == 0) ++count[bin];
    }
  }
  std::string out = "| fixed label voxels | labels |";
  for (const std::string& name : names) absl::StrAppend(&out, " ", name, " Dice (lost) |");
  absl::StrAppend(&out, "\n|---|---|");
  for (size_t m = 0; m < names.size(); ++m) absl::StrAppend(&out, "---|");
  absl::StrAppend(&out, "\n");
  for (int bin = 0; bin <= kBins; ++bin) {
    if (count[bin] == 0) continue;
    const std::string range = bin == kBins ? "absent from fixed"
                              : bin == kBins - 1 ? absl::StrCat(">= ", edges[bin])
                                                 : absl::StrCat(edges[bin], "-", edges[bin + 1] - 1);
    absl::StrAppend(&out, "| ", range, " | ", count[bin], " |");
    for (size_t m = 0; m < maps.size(); ++m) {
      absl::StrAppend(&out, absl::StrFormat(" %.3f (%d) |", sum[m][bin] / count[bin], lost[m][bin]));
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace tessera::registration
