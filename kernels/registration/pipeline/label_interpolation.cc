#include "kernels/registration/pipeline/label_interpolation.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace tessera::registration {
namespace {

constexpr double kAlpha = 4.0;  // ANTs' MultiLabel default: support of 4 sigmas

bool Inside(const std::array<double, 3>& p, Dims3 d) {
  const int64_t n[3] = {d.nx, d.ny, d.nz};
  for (int a = 0; a < 3; ++a) {
    if (!(p[a] >= -0.5 && p[a] < static_cast<double>(n[a]) - 0.5)) return false;
  }
  return true;
}

// Per-label weight sums; few labels per neighbourhood, so a small vector.
class Votes {
 public:
  void Add(int32_t label, double w) {
    for (auto& [l, s] : votes_) {
      if (l == label) {
        s += w;
        return;
      }
    }
    votes_.push_back({label, w});
  }
  int32_t Winner(int32_t fallback) const {
    int32_t best = fallback;
    double best_w = -1;
    for (const auto& [l, s] : votes_) {
      if (s > best_w || (s == best_w && l < best)) {
        best = l;
        best_w = s;
      }
    }
    return best;
  }

 private:
  std::vector<std::pair<int32_t, double>> votes_;
};

}  // namespace

int32_t GaussianLabelAt(const int32_t* labels, Dims3 d, const std::array<double, 3>& p,
                        const std::array<double, 3>& sigma, int32_t default_label) {
  if (!Inside(p, d)) return default_label;
  const int64_t n[3] = {d.nx, d.ny, d.nz};
  // ITK's ComputeErrorFunctionArray: voxel i spans [i - 0.5, i + 0.5].
  std::vector<double> w[3];
  int64_t lo[3];
  for (int a = 0; a < 3; ++a) {
    const double cut = sigma[a] * kAlpha;
    lo[a] = std::max<int64_t>(0, static_cast<int64_t>(std::floor(p[a] - cut + 0.5)));
    const int64_t hi = std::min<int64_t>(n[a] - 1, static_cast<int64_t>(std::ceil(p[a] + cut - 0.5)));
    const double scale = 1.0 / (std::sqrt(2.0) * sigma[a]);
    double e_last = std::erf((lo[a] - 0.5 - p[a]) * scale);
    for (int64_t i = lo[a]; i <= hi; ++i) {
      const double e_now = std::erf((i + 0.5 - p[a]) * scale);
      w[a].push_back(e_now - e_last);
      e_last = e_now;
    }
  }
  Votes votes;
  for (size_t k = 0; k < w[2].size(); ++k) {
    for (size_t j = 0; j < w[1].size(); ++j) {
      const double wkj = w[2][k] * w[1][j];
      const int32_t* row = labels + d.nx * ((lo[1] + j) + d.ny * (lo[2] + k));
      for (size_t i = 0; i < w[0].size(); ++i) votes.Add(row[lo[0] + i], wkj * w[0][i]);
    }
  }
  return votes.Winner(default_label);
}

int32_t LinearLabelAt(const int32_t* labels, Dims3 d, const std::array<double, 3>& p, int32_t default_label) {
  if (!Inside(p, d)) return default_label;
  const int64_t n[3] = {d.nx, d.ny, d.nz};
  int64_t base[3];
  double frac[3];
  for (int a = 0; a < 3; ++a) {
    const double f = std::floor(p[a]);
    base[a] = static_cast<int64_t>(f);
    frac[a] = p[a] - f;
  }
  Votes votes;
  for (int corner = 0; corner < 8; ++corner) {
    int64_t q[3];
    double w = 1;
    for (int a = 0; a < 3; ++a) {
      const int bit = (corner >> a) & 1;
      w *= bit ? frac[a] : 1 - frac[a];
      q[a] = std::clamp<int64_t>(base[a] + bit, 0, n[a] - 1);
    }
    if (w == 0) continue;
    votes.Add(labels[q[0] + d.nx * (q[1] + d.ny * q[2])], w);
  }
  return votes.Winner(default_label);
}

}  // namespace tessera::registration
