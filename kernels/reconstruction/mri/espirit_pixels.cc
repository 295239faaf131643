// CPU reference of ESPIRiT's per-pixel eigenvectors and backend dispatch.
#include "kernels/reconstruction/mri/espirit_pixels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

namespace tessera {
namespace recon {
namespace mri {
namespace cpu {
namespace {

using Complex64 = std::complex<double>;

// Top eigenpair of the Hermitian n x n matrix g (row-major, full); see the header.
double TopEigenvector(int n, const std::vector<Complex64>& g, int iterations, std::vector<Complex64>* h,
                      std::vector<Complex64>* tmp, std::vector<Complex64>* v, std::vector<Complex64>* w) {
  double scale = 0;
  for (int c = 0; c < n; ++c) scale = std::max(scale, g[c * n + c].real());
  if (!(scale > 0)) return 0;
  for (int i = 0; i < n * n; ++i) (*h)[i] = g[i] / scale;
  for (int squaring = 0; squaring < 3; ++squaring) {
    double diag = 0;
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) {
        Complex64 s = 0;
        for (int k = 0; k < n; ++k) s += (*h)[r * n + k] * (*h)[k * n + c];
        (*tmp)[r * n + c] = s;
      }
      diag = std::max(diag, (*tmp)[r * n + r].real());
    }
    if (!(diag > 0)) return 0;
    for (int i = 0; i < n * n; ++i) (*h)[i] = (*tmp)[i] / diag;
  }
  int best = 0;
  for (int c = 1; c < n; ++c) {
    if ((*h)[c * n + c].real() > (*h)[best * n + best].real()) best = c;
  }
  for (int r = 0; r < n; ++r) (*v)[r] = (*h)[r * n + best];
  for (int it = 0; it < iterations; ++it) {
    double norm = 0;
    for (int r = 0; r < n; ++r) {
      Complex64 s = 0;
      for (int k = 0; k < n; ++k) s += (*h)[r * n + k] * (*v)[k];
      (*w)[r] = s;
      norm += std::norm(s);
    }
    norm = std::sqrt(norm);
    if (!(norm > 0)) return 0;
    for (int r = 0; r < n; ++r) (*v)[r] = (*w)[r] / norm;
  }
  double lambda = 0;
  for (int r = 0; r < n; ++r) {
    Complex64 s = 0;
    for (int k = 0; k < n; ++k) s += g[r * n + k] * (*v)[k];
    lambda += (std::conj((*v)[r]) * s).real();
  }
  return lambda;
}

}  // namespace

void EspiritPixelMaps(int coils, int64_t pixels, const std::complex<float>* gram, const std::complex<double>* reference,
                      int iterations, double crop, std::complex<float>* maps, float* eigenvalues) {
  ParallelFor(pixels, [&](int64_t begin, int64_t end, int) {
    const size_t cc = static_cast<size_t>(coils) * coils;
    std::vector<Complex64> g(cc), h(cc), tmp(cc), v(coils), w(coils);
    for (int64_t i = begin; i < end; ++i) {
      for (int c1 = 0, l = 0; c1 < coils; ++c1) {
        for (int c2 = c1; c2 < coils; ++c2, ++l) {
          const Complex64 x(gram[l * pixels + i]);
          g[c1 * coils + c2] = x;
          g[c2 * coils + c1] = std::conj(x);
        }
      }
      const double lambda = TopEigenvector(coils, g, iterations, &h, &tmp, &v, &w);
      eigenvalues[i] = static_cast<float>(lambda);
      if (!(lambda > crop)) {
        for (int c = 0; c < coils; ++c) maps[c * pixels + i] = 0;
        continue;
      }
      Complex64 z = 0;
      for (int c = 0; c < coils; ++c) z += std::conj(reference[c]) * v[c];
      const Complex64 phase = std::abs(z) > 0 ? std::conj(z) / std::abs(z) : Complex64(1);
      for (int c = 0; c < coils; ++c) maps[c * pixels + i] = std::complex<float>(v[c] * phase);
    }
  }, 256);
}

}  // namespace cpu

absl::Status EspiritPixelMaps(const Stream& stream, int coils, int64_t pixels, const std::complex<float>* gram,
                              const std::complex<double>* reference, int iterations, double crop,
                              std::complex<float>* maps, float* eigenvalues) {
  if (coils < 1 || iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("EspiritPixelMaps: ", coils, " coils, ", iterations, " iterations"));
  }
  if (stream.backend() == Backend::kCpu) {
    cpu::EspiritPixelMaps(coils, pixels, gram, reference, iterations, crop, maps, eigenvalues);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::EspiritPixelMaps(stream, coils, pixels, gram, reference, iterations, crop, maps, eigenvalues);
#else
  return absl::FailedPreconditionError(absl::StrCat(
      "EspiritPixelMaps: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
