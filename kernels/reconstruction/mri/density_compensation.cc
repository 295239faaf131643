#include "kernels/reconstruction/mri/density_compensation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Pipe-Menon keeps every (point, neighbour) pair: 12 bytes each, 1.5 GB at
// this limit (a 256^2 radial scan with 201 spokes has about 5 M).
constexpr int64_t kMaxStoredNeighbours = int64_t{1} << 27;

// Points grouped into square cells of side `radius`: a point's neighbours
// within the radius lie in its own and the 8 adjacent cells.
class CellIndex {
 public:
  CellIndex(const Trajectory2D& t, double radius) : radius_(radius) {
    const int64_t m = t.size();
    double lo_x = 0, lo_y = 0, hi_x = 0, hi_y = 0;
    for (int64_t j = 0; j < m; ++j) {
      lo_x = std::min<double>(lo_x, t.kx[j]), hi_x = std::max<double>(hi_x, t.kx[j]);
      lo_y = std::min<double>(lo_y, t.ky[j]), hi_y = std::max<double>(hi_y, t.ky[j]);
    }
    lo_x_ = lo_x, lo_y_ = lo_y;
    cells_x_ = static_cast<int64_t>((hi_x - lo_x) / radius) + 1;
    cells_y_ = static_cast<int64_t>((hi_y - lo_y) / radius) + 1;
    start_.assign(cells_x_ * cells_y_ + 1, 0);
    cell_of_.resize(m);
    for (int64_t j = 0; j < m; ++j) {
      cell_of_[j] = Cell(t.kx[j], t.ky[j]);
      ++start_[cell_of_[j] + 1];
    }
    for (size_t c = 1; c < start_.size(); ++c) start_[c] += start_[c - 1];
    order_.resize(m);
    std::vector<int64_t> fill(start_.begin(), start_.end() - 1);
    for (int64_t j = 0; j < m; ++j) order_[fill[cell_of_[j]]++] = j;
  }

  // fn(neighbour index) for every point in the 3 x 3 cells around point j.
  template <typename Fn>
  void ForCandidates(int64_t j, Fn fn) const {
    const int64_t cx = cell_of_[j] % cells_x_, cy = cell_of_[j] / cells_x_;
    for (int64_t y = std::max<int64_t>(cy - 1, 0); y <= std::min(cy + 1, cells_y_ - 1); ++y) {
      for (int64_t x = std::max<int64_t>(cx - 1, 0); x <= std::min(cx + 1, cells_x_ - 1); ++x) {
        const int64_t c = x + cells_x_ * y;
        for (int64_t p = start_[c]; p < start_[c + 1]; ++p) fn(order_[p]);
      }
    }
  }

 private:
  int64_t Cell(double x, double y) const {
    const int64_t cx = std::min(static_cast<int64_t>((x - lo_x_) / radius_), cells_x_ - 1);
    const int64_t cy = std::min(static_cast<int64_t>((y - lo_y_) / radius_), cells_y_ - 1);
    return cx + cells_x_ * cy;
  }
  double radius_, lo_x_ = 0, lo_y_ = 0;
  int64_t cells_x_ = 1, cells_y_ = 1;
  std::vector<int64_t> start_, cell_of_, order_;
};

}  // namespace

absl::StatusOr<std::vector<float>> RadialRampDensity(const Trajectory2D& trajectory) {
  if (trajectory.size() == 0 || trajectory.kx.size() != static_cast<size_t>(trajectory.size())) {
    return absl::InvalidArgumentError("radial ramp density: empty or inconsistent trajectory");
  }
  // Readout spacing from the first spoke (uniform along every spoke).
  const double dk = std::hypot(trajectory.kx[1] - trajectory.kx[0], trajectory.ky[1] - trajectory.ky[0]);
  const double spokes = static_cast<double>(trajectory.spokes);
  std::vector<float> w(trajectory.size());
  for (int64_t j = 0; j < trajectory.size(); ++j) {
    const double r = std::hypot(trajectory.kx[j], trajectory.ky[j]);
    w[j] = static_cast<float>(r < 0.5 * dk ? kPi * dk * dk / (4 * spokes) : kPi * r * dk / spokes);
  }
  return w;
}

bool IsRadialDiameters(const Trajectory2D& t) {
  const int64_t n = t.samples;
  if (n < 2 || t.spokes < 1 || t.kx.size() != static_cast<size_t>(t.size()) ||
      t.ky.size() != static_cast<size_t>(t.size())) {
    return false;
  }
  const double dk = std::hypot(t.kx[1] - t.kx[0], t.ky[1] - t.ky[0]);
  if (!(dk > 0)) return false;
  const double tolerance = 1e-3 * dk;
  for (int64_t s = 0; s < t.spokes; ++s) {
    const float* x = t.kx.data() + s * n;
    const float* y = t.ky.data() + s * n;
    const double ux = x[n - 1] - x[0], uy = y[n - 1] - y[0], length = std::hypot(ux, uy);
    if (!(length > 0)) return false;
    for (int64_t i = 0; i < n; ++i) {
      // Distance of the sample from the line through 0 along the spoke.
      if (std::fabs(x[i] * uy - y[i] * ux) / length > tolerance) return false;
      if (i > 0 && std::fabs(std::hypot(x[i] - x[i - 1], y[i] - y[i - 1]) - dk) > tolerance) return false;
    }
  }
  return true;
}

absl::StatusOr<std::vector<float>> PipeMenonDensity(const Trajectory2D& trajectory, const PipeMenonOptions& options) {
  const int64_t m = trajectory.size();
  if (m == 0 || trajectory.kx.size() != static_cast<size_t>(m) || trajectory.ky.size() != static_cast<size_t>(m)) {
    return absl::InvalidArgumentError("Pipe-Menon density: empty or inconsistent trajectory");
  }
  if (options.iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("Pipe-Menon density: iterations = ", options.iterations, " < 1"));
  }
  const double radius = options.kernel_radius;
  if (!(radius > 0) || !std::isfinite(radius)) {
    return absl::InvalidArgumentError(absl::StrCat("Pipe-Menon density: kernel_radius = ", radius, " <= 0"));
  }
  const CellIndex cells(trajectory, radius);
  // Cone of unit integral: C(d) = 3 (1 - d / R) / (pi R^2) for d < R. The
  // neighbours and their cone values do not change between iterations: find
  // them once (a sparse matrix, rows in the cell-scan order the sums keep),
  // then each iteration is one sparse product.
  const double norm = 3.0 / (kPi * radius * radius);
  // Distances in double from float coordinates (their differences are exact);
  // the square root only for the candidates inside the radius.
  const double radius_squared = radius * radius;
  auto for_neighbours = [&](int64_t l, auto fn) {
    const double xl = trajectory.kx[l], yl = trajectory.ky[l];
    cells.ForCandidates(l, [&](int64_t j) {
      const double dx = xl - trajectory.kx[j], dy = yl - trajectory.ky[j];
      const double d2 = dx * dx + dy * dy;
      if (d2 < radius_squared) fn(j, 1 - std::sqrt(d2) / radius);
    });
  };
  std::vector<int64_t> row_start(m + 1, 0);
  ParallelFor(m, [&](int64_t begin, int64_t end, int) {
    for (int64_t l = begin; l < end; ++l) for_neighbours(l, [&](int64_t, double) { ++row_start[l + 1]; });
  }, 256);
  for (int64_t l = 0; l < m; ++l) row_start[l + 1] += row_start[l];
  if (row_start[m] > kMaxStoredNeighbours || m > INT32_MAX) {
    return absl::ResourceExhaustedError(absl::StrCat("Pipe-Menon density: ", row_start[m],
                                                     " neighbour pairs within the kernel radius (limit ",
                                                     kMaxStoredNeighbours, "); the trajectory is too dense"));
  }
  // Filled below, pair by pair: left uninitialised (zeroing them first costed
  // as much as the search at 256^2).
  std::unique_ptr<int32_t[]> column(new int32_t[row_start[m]]);
  std::unique_ptr<double[]> cone(new double[row_start[m]]);
  ParallelFor(m, [&](int64_t begin, int64_t end, int) {
    for (int64_t l = begin; l < end; ++l) {
      int64_t e = row_start[l];
      for_neighbours(l, [&](int64_t j, double c) { column[e] = static_cast<int32_t>(j), cone[e++] = c; });
    }
  }, 256);
  std::vector<double> w(m, 1.0), conv(m);
  for (int it = 0; it < options.iterations; ++it) {
    ParallelFor(m, [&](int64_t begin, int64_t end, int) {
      for (int64_t l = begin; l < end; ++l) {
        double sum = 0;
        for (int64_t e = row_start[l]; e < row_start[l + 1]; ++e) sum += w[column[e]] * cone[e];
        conv[l] = sum * norm;
      }
    }, 256);
    for (int64_t l = 0; l < m; ++l) w[l] /= conv[l];  // conv >= w_l C(0) > 0
  }
  return std::vector<float>(w.begin(), w.end());
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
