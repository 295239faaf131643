// Test helpers for CPU-vs-CUDA parity tests: random host data, device copies
// through tracked Buffers, poisoning and error norms.
#ifndef TESSERA_COMMON_TESTING_DEVICE_ARRAY_H_
#define TESSERA_COMMON_TESTING_DEVICE_ARRAY_H_

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/device.h"

namespace tessera {
namespace testing {

template <typename T>
std::vector<T> RandomUniform(size_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// Real and imaginary parts uniform in [lo, hi), drawn in that order.
template <typename T>
std::vector<std::complex<T>> RandomComplex(size_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<std::complex<T>> v(n);
  for (auto& x : v) {
    const double re = dist(rng);
    x = std::complex<T>(static_cast<T>(re), static_cast<T>(dist(rng)));
  }
  return v;
}

template <typename To, typename From>
std::vector<To> Cast(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

// ||a - b|| / ||b||; infinity if `a` has a non-finite element (so poisoned,
// unwritten outputs fail), or if the sizes differ.
template <typename A, typename B>
double RelL2(const std::vector<A>& a, const std::vector<B>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (!std::isfinite(x)) return std::numeric_limits<double>::infinity();
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The same for complex vectors (|a - b|^2 summed in double).
template <typename A, typename B>
double RelL2(const std::vector<std::complex<A>>& a, const std::vector<std::complex<B>>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::complex<double> x(a[i].real(), a[i].imag()), y(b[i].real(), b[i].imag());
    if (!std::isfinite(x.real()) || !std::isfinite(x.imag())) return std::numeric_limits<double>::infinity();
    num += std::norm(x - y);
    den += std::norm(y);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// A device array of T in a tracked Buffer.
template <typename T>
class DeviceArray {
 public:
  static DeviceArray Allocate(size_t n, const Stream& stream) {
    DeviceArray a;
    a.n_ = n;
    a.stream_ = &stream;
    auto buf = Buffer::Allocate(MemoryKind::kDevice, n * sizeof(T), stream.ordinal());
    EXPECT_TRUE(buf.ok()) << buf.status();
    if (buf.ok()) a.buffer_ = *buf;
    return a;
  }
  static DeviceArray FromHost(const std::vector<T>& host, const Stream& stream) {
    DeviceArray a = Allocate(host.size(), stream);
    a.Upload(host);
    return a;
  }
  void Upload(const std::vector<T>& host) {
    EXPECT_EQ(host.size(), n_);
    EXPECT_TRUE(CopyBytes(data(), MemoryKind::kDevice, host.data(), MemoryKind::kHost, n_ * sizeof(T), *stream_).ok());
  }
  // Fills every element with `value` (NaN by default for floats) so elements
  // a kernel fails to write show up.
  void Poison(T value) { Upload(std::vector<T>(n_, value)); }
  std::vector<T> Download() const {
    EXPECT_TRUE(stream_->Synchronize().ok());
    std::vector<T> host(n_);
    EXPECT_TRUE(CopyBytes(host.data(), MemoryKind::kHost, data(), MemoryKind::kDevice, n_ * sizeof(T), *stream_).ok());
    return host;
  }
  T* data() const { return buffer_ ? static_cast<T*>(buffer_->data()) : nullptr; }
  size_t size() const { return n_; }

 private:
  std::shared_ptr<Buffer> buffer_;
  size_t n_ = 0;
  const Stream* stream_ = nullptr;
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace testing
}  // namespace tessera

#endif  // TESSERA_COMMON_TESTING_DEVICE_ARRAY_H_
