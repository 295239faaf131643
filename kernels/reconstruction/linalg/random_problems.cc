// Seeded generators for the linalg tests and benchmark.
#include "kernels/reconstruction/linalg/random_problems.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace tessera {
namespace recon {
namespace linalg {
namespace {

float NonZero(std::mt19937& rng) {
  std::uniform_real_distribution<float> d(0.05f, 1.0f);
  const float v = d(rng);
  return (rng() & 1) ? v : -v;
}

template <typename T>
T RandomScalar(std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  if constexpr (std::is_same_v<T, float>) {
    return d(rng);
  } else {
    const float re = d(rng);
    return T(re, d(rng));
  }
}

template <typename T>
T Conj(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return std::conj(v);
  }
}

template <typename T>
std::vector<T> HpdBatch(int64_t batch, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> out(static_cast<size_t>(batch) * n * n);
  std::vector<T> m(static_cast<size_t>(n) * n);
  for (int64_t b = 0; b < batch; ++b) {
    for (T& v : m) v = RandomScalar<T>(rng);
    T* a = out.data() + b * n * n;
    for (int c = 0; c < n; ++c) {
      for (int r = 0; r < n; ++r) {
        // (M M^H)(r, c) = sum_k M(r, k) conj(M(c, k)), M column-major.
        std::complex<double> s = 0;
        for (int k = 0; k < n; ++k) {
          s += std::complex<double>(m[r + k * n]) * std::conj(std::complex<double>(m[c + k * n]));
        }
        if (r == c) s = std::complex<double>(s.real() + n, 0.0);
        if constexpr (std::is_same_v<T, float>) {
          a[r + c * n] = static_cast<float>(s.real());
        } else {
          a[r + c * n] = T(static_cast<float>(s.real()), static_cast<float>(s.imag()));
        }
      }
    }
  }
  return out;
}

template <typename T>
std::vector<T> DominantBatch(int64_t batch, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<T> out(static_cast<size_t>(batch) * n * n);
  for (int64_t b = 0; b < batch; ++b) {
    T* a = out.data() + b * n * n;
    for (int c = 0; c < n; ++c) {
      // Complex entries reach |v| = sqrt(2): 1.5 n keeps the diagonal dominant.
      const float diag = (std::is_same_v<T, float> ? 1.0f : 1.5f) * static_cast<float>(n);
      a[c + c * n] = T(diag + unit(rng));
      for (int r = c + 1; r < n; ++r) {
        const T v = RandomScalar<T>(rng);
        a[r + c * n] = v;
        a[c + r * n] = Conj(v);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<int64_t> UniformRowLengths(int64_t rows, int64_t length) { return std::vector<int64_t>(rows, length); }

std::vector<int64_t> PowerLawRowLengths(int64_t rows, double mean, int64_t max_length, double exponent,
                                        double empty_fraction, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> raw(rows);
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    raw[r] = u(rng) < empty_fraction ? 0.0 : std::pow(1.0 - u(rng), -1.0 / exponent);  // Pareto, minimum 1
    sum += std::min(raw[r], static_cast<double>(max_length));
  }
  const double scale = sum > 0 ? mean * static_cast<double>(rows) / sum : 0.0;
  std::vector<int64_t> lengths(rows);
  for (int64_t r = 0; r < rows; ++r) {
    lengths[r] = raw[r] == 0.0 ? 0 : std::clamp<int64_t>(std::llround(raw[r] * scale), 1, max_length);
  }
  return lengths;
}

HostCsr RandomCsr(int64_t rows, int64_t cols, const std::vector<int64_t>& row_lengths, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> col(0, static_cast<int32_t>(cols - 1));
  HostCsr m;
  m.rows = rows;
  m.cols = cols;
  m.row_ptr.reserve(rows + 1);
  int64_t nnz = 0;
  for (int64_t l : row_lengths) nnz += l;
  m.col_idx.reserve(nnz);
  m.values.reserve(nnz);
  for (int64_t r = 0; r < rows; ++r) {
    const size_t begin = m.col_idx.size();
    for (int64_t k = 0; k < row_lengths[r]; ++k) {
      m.col_idx.push_back(col(rng));
      m.values.push_back(NonZero(rng));
    }
    std::sort(m.col_idx.begin() + begin, m.col_idx.end());
    m.row_ptr.push_back(static_cast<int32_t>(m.col_idx.size()));
  }
  return m;
}

HostCsr RandomSpdCsr(int64_t n, int per_row, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> col(0, n - 1);
  std::uniform_real_distribution<double> w(0.2, 1.0);
  // Symmetric pattern: pairs (i, j) with weights, then rows scaled so that
  // each row's off-diagonal |sum| <= (hi - lo) / 2.
  std::vector<std::vector<std::pair<int64_t, double>>> rows(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < (per_row + 1) / 2; ++k) {
      const int64_t j = col(rng);
      if (j == i) continue;
      const double v = (rng() & 1) ? w(rng) : -w(rng);
      rows[i].push_back({j, v});
      rows[j].push_back({i, v});
    }
  }
  double max_sum = 0;
  for (const auto& row : rows) {
    double s = 0;
    for (const auto& [j, v] : row) s += std::fabs(v);
    max_sum = std::max(max_sum, s);
  }
  const double scale = max_sum > 0 ? 0.5 * (hi - lo) / max_sum : 0.0;
  HostCsr m;
  m.rows = m.cols = n;
  for (int64_t i = 0; i < n; ++i) {
    rows[i].push_back({i, 0.0});
    std::sort(rows[i].begin(), rows[i].end());
    for (size_t k = 0; k < rows[i].size(); ++k) {
      const int64_t j = rows[i][k].first;
      double v = rows[i][k].second;
      while (k + 1 < rows[i].size() && rows[i][k + 1].first == j) v += rows[i][++k].second;  // merge repeats
      m.col_idx.push_back(static_cast<int32_t>(j));
      m.values.push_back(static_cast<float>(j == i ? 0.5 * (lo + hi) : v * scale));
    }
    m.row_ptr.push_back(static_cast<int32_t>(m.col_idx.size()));
  }
  return m;
}

HostCsr Laplacian2d(int64_t g) {
  HostCsr m;
  m.rows = m.cols = g * g;
  m.col_idx.reserve(5 * g * g);
  m.values.reserve(5 * g * g);
  for (int64_t y = 0; y < g; ++y) {
    for (int64_t x = 0; x < g; ++x) {
      const int64_t i = x + g * y;
      auto add = [&](int64_t j, float v) {
        m.col_idx.push_back(static_cast<int32_t>(j));
        m.values.push_back(v);
      };
      if (y > 0) add(i - g, -1.0f);
      if (x > 0) add(i - 1, -1.0f);
      add(i, 4.0f);
      if (x + 1 < g) add(i + 1, -1.0f);
      if (y + 1 < g) add(i + g, -1.0f);
      m.row_ptr.push_back(static_cast<int32_t>(m.col_idx.size()));
    }
  }
  return m;
}

std::vector<float> RandomHpdBatch(int64_t batch, int n, uint32_t seed) { return HpdBatch<float>(batch, n, seed); }
std::vector<std::complex<float>> RandomHpdBatchComplex(int64_t batch, int n, uint32_t seed) {
  return HpdBatch<std::complex<float>>(batch, n, seed);
}
std::vector<float> DominantHpdBatch(int64_t batch, int n, uint32_t seed) {
  return DominantBatch<float>(batch, n, seed);
}
std::vector<std::complex<float>> DominantHpdBatchComplex(int64_t batch, int n, uint32_t seed) {
  return DominantBatch<std::complex<float>>(batch, n, seed);
}

}  // namespace linalg
}  // namespace recon
}  // namespace tessera
