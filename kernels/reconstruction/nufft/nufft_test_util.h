// Test helpers for the NUFFT and Toeplitz tests: random points (in and
// beyond [-pi, pi), to exercise folding) and complex data, the NUDFT
// reference on a problem's own points, and complex error norms.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_TEST_UTIL_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_TEST_UTIL_H_

#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <vector>

#include "common/testing/device_array.h"
#include "kernels/reconstruction/nufft/nudft.h"
#include "kernels/reconstruction/nufft/nufft.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace testing {

template <typename T>
struct PointSet {
  int64_t m = 0;
  int dim = 2;
  std::vector<T> x, y, z;
  const T* zp() const { return dim == 3 ? z.data() : nullptr; }
};

// Uniform in [-3 pi, 3 pi) per axis (the plan folds them).
template <typename T>
PointSet<T> RandomPoints(int dim, int64_t m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-3 * M_PI, 3 * M_PI);
  PointSet<T> p;
  p.m = m;
  p.dim = dim;
  for (int64_t j = 0; j < m; ++j) {
    p.x.push_back(static_cast<T>(u(rng)));
    p.y.push_back(static_cast<T>(u(rng)));
    if (dim == 3) p.z.push_back(static_cast<T>(u(rng)));
  }
  return p;
}

template <typename T>
std::vector<std::complex<T>> RandomComplex(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<std::complex<T>> v(n);
  for (auto& e : v) e = std::complex<T>(static_cast<T>(g(rng)), static_cast<T>(g(rng)));
  return v;
}

template <typename T>
std::vector<std::complex<double>> ToDouble(const std::vector<std::complex<T>>& v) {
  return std::vector<std::complex<double>>(v.begin(), v.end());
}

// The exact sums on the (already rounded) points of `p`.
template <typename T>
std::vector<std::complex<double>> ReferenceNudft(NufftType type, std::array<int64_t, 3> modes, const PointSet<T>& p,
                                                 int sign, int ntransforms,
                                                 const std::vector<std::complex<double>>& in) {
  std::vector<double> x(p.x.begin(), p.x.end()), y(p.y.begin(), p.y.end()), z(p.z.begin(), p.z.end());
  NudftPoints pts;
  pts.m = p.m;
  pts.x = x.data();
  pts.y = y.data();
  pts.z = p.dim == 3 ? z.data() : nullptr;
  const int64_t nmodes = modes[0] * modes[1] * modes[2];
  std::vector<std::complex<double>> out((type == NufftType::kType1 ? nmodes : p.m) * ntransforms);
  if (type == NufftType::kType1) {
    NudftType1(modes, pts, sign, ntransforms, in.data(), out.data());
  } else {
    NudftType2(modes, pts, sign, ntransforms, in.data(), out.data());
  }
  return out;
}

using ::tessera::testing::RelL2;

// <a, b> = sum conj(a) b, in double.
template <typename A, typename B>
std::complex<double> Dot(const std::vector<std::complex<A>>& a, const std::vector<std::complex<B>>& b) {
  std::complex<double> s(0, 0);
  for (size_t i = 0; i < a.size(); ++i) {
    s += std::conj(std::complex<double>(a[i].real(), a[i].imag())) * std::complex<double>(b[i].real(), b[i].imag());
  }
  return s;
}

}  // namespace testing
}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_TEST_UTIL_H_
