#include "kernels/reconstruction/solvers/dense_operator.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace recon {
namespace testing {

DenseOperator::DenseOperator(std::vector<float> matrix, int64_t num_views, int64_t per_view, int64_t cols,
                             int num_subsets)
    : stream_(Stream::Cpu()),
      a_(std::move(matrix)),
      num_views_(num_views),
      per_view_(per_view),
      cols_(cols),
      num_subsets_(num_subsets) {}

absl::Status DenseOperator::Forward(const float* x, float* y, int subset) {
  if (subset != kAllSubsets && (subset < 0 || subset >= num_subsets_)) {
    return absl::InvalidArgumentError(absl::StrCat("dense: subset ", subset));
  }
  ++forward_calls_;
  const std::vector<int64_t> views = SubsetViews(num_views_, num_subsets_, subset);
  for (size_t k = 0; k < views.size(); ++k) {
    for (int64_t e = 0; e < per_view_; ++e) {
      const float* row = a_.data() + (views[k] * per_view_ + e) * cols_;
      double sum = 0;
      for (int64_t c = 0; c < cols_; ++c) sum += static_cast<double>(row[c]) * x[c];
      y[k * per_view_ + e] = static_cast<float>(sum);
    }
  }
  return absl::OkStatus();
}

absl::Status DenseOperator::Back(const float* y, float* x, int subset) {
  if (subset != kAllSubsets && (subset < 0 || subset >= num_subsets_)) {
    return absl::InvalidArgumentError(absl::StrCat("dense: subset ", subset));
  }
  ++back_calls_;
  std::vector<double> acc(cols_, 0.0);
  const std::vector<int64_t> views = SubsetViews(num_views_, num_subsets_, subset);
  for (size_t k = 0; k < views.size(); ++k) {
    for (int64_t e = 0; e < per_view_; ++e) {
      const float* row = a_.data() + (views[k] * per_view_ + e) * cols_;
      const double w = y[k * per_view_ + e];
      for (int64_t c = 0; c < cols_; ++c) acc[c] += w * row[c];
    }
  }
  for (int64_t c = 0; c < cols_; ++c) x[c] = static_cast<float>(acc[c]);
  return absl::OkStatus();
}

std::vector<float> ParallelBeamMatrix(int64_t n, int64_t views, int64_t cols, double width) {
  constexpr double kPi = 3.14159265358979323846;
  const double step = 0.02, half = 0.5 * static_cast<double>(n), reach = half * std::sqrt(2.0) + 1;
  std::vector<float> a(views * cols * n * n, 0.0f);
  for (int64_t v = 0; v < views; ++v) {
    const double theta = kPi * static_cast<double>(v) / static_cast<double>(views);
    const double dx = std::sin(theta), dy = -std::cos(theta);  // ray direction (ASTRA's parallel convention)
    for (int64_t c = 0; c < cols; ++c) {
      const double s = (static_cast<double>(c) - 0.5 * static_cast<double>(cols - 1)) * width;
      const double px = s * std::cos(theta), py = s * std::sin(theta);
      float* row = a.data() + (v * cols + c) * n * n;
      for (double t = -reach; t < reach; t += step) {
        const double x = px + t * dx + half, y = py + t * dy + half;
        if (x < 0 || y < 0 || x >= static_cast<double>(n) || y >= static_cast<double>(n)) continue;
        row[static_cast<int64_t>(y) * n + static_cast<int64_t>(x)] += static_cast<float>(step);
      }
    }
  }
  return a;
}

}  // namespace testing
}  // namespace recon
}  // namespace tessera
