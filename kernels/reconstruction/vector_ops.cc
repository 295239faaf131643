// CPU versions (plain loops, sums in index order) and backend dispatch.
#include "kernels/reconstruction/vector_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace recon {
namespace {

absl::Status CheckN(const char* op, int64_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(op, ": negative length ", n));
  return absl::OkStatus();
}

absl::Status NoCuda(const char* op) {
  return absl::FailedPreconditionError(
      absl::StrCat(op, ": CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
}

}  // namespace

#if TESSERA_WITH_CUDA
#define TESSERA_RECON_DISPATCH(op, ...)                                 \
  if (stream.backend() == Backend::kCuda) return cuda::op(__VA_ARGS__);
#else
#define TESSERA_RECON_DISPATCH(op, ...) \
  if (stream.backend() == Backend::kCuda) return NoCuda(#op);
#endif

absl::Status Fill(const Stream& stream, float* x, int64_t n, float value) {
  if (auto s = CheckN("Fill", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(Fill, stream, x, n, value)
  std::fill(x, x + n, value);
  return absl::OkStatus();
}

absl::Status Axpy(const Stream& stream, float a, const float* x, float* y, int64_t n) {
  if (auto s = CheckN("Axpy", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(Axpy, stream, a, x, y, n)
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
  return absl::OkStatus();
}

absl::Status Xpby(const Stream& stream, const float* x, float b, float* y, int64_t n) {
  if (auto s = CheckN("Xpby", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(Xpby, stream, x, b, y, n)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + b * y[i];
  return absl::OkStatus();
}

absl::Status Scale(const Stream& stream, float a, float* x, int64_t n) {
  if (auto s = CheckN("Scale", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(Scale, stream, a, x, n)
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
  return absl::OkStatus();
}

absl::StatusOr<double> Dot(const Stream& stream, const float* x, const float* y, int64_t n) {
  if (auto s = CheckN("Dot", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(Dot, stream, x, y, n)
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * y[i];
  return sum;
}

absl::StatusOr<double> Sum(const Stream& stream, const float* x, int64_t n) {
  if (auto s = CheckN("Sum", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(Sum, stream, x, n)
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  return sum;
}

absl::Status SafeDivide(const Stream& stream, const float* num, const float* den, float eps, float* out, int64_t n) {
  if (auto s = CheckN("SafeDivide", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(SafeDivide, stream, num, den, eps, out, n)
  for (int64_t i = 0; i < n; ++i) out[i] = std::fabs(den[i]) > eps ? num[i] / den[i] : 0.0f;
  return absl::OkStatus();
}

absl::Status Multiply(const Stream& stream, const float* y, float* x, int64_t n) {
  if (auto s = CheckN("Multiply", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(Multiply, stream, y, x, n)
  for (int64_t i = 0; i < n; ++i) x[i] *= y[i];
  return absl::OkStatus();
}

absl::Status Subtract(const Stream& stream, const float* a, const float* b, float* out, int64_t n) {
  if (auto s = CheckN("Subtract", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(Subtract, stream, a, b, out, n)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
  return absl::OkStatus();
}

absl::Status ClampMin(const Stream& stream, float lo, float* x, int64_t n) {
  if (auto s = CheckN("ClampMin", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(ClampMin, stream, lo, x, n)
  for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], lo);
  return absl::OkStatus();
}

absl::Status ZeroWhereBound(const Stream& stream, float lo, const float* x, float* g, int64_t n) {
  if (auto s = CheckN("ZeroWhereBound", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(ZeroWhereBound, stream, lo, x, g, n)
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] <= lo && g[i] < 0) g[i] = 0;
  }
  return absl::OkStatus();
}

absl::Status AddScaledRatio(const Stream& stream, float lambda, const float* num, const float* den, float eps, float* x,
                            int64_t n) {
  if (auto s = CheckN("AddScaledRatio", n); !s.ok()) return s;
  TESSERA_RECON_DISPATCH(AddScaledRatio, stream, lambda, num, den, eps, x, n)
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(den[i]) > eps) x[i] += lambda * num[i] / den[i];
  }
  return absl::OkStatus();
}

#undef TESSERA_RECON_DISPATCH

}  // namespace recon
}  // namespace tessera
