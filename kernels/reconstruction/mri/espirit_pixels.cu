// CUDA ESPIRiT per-pixel eigenvectors: one thread per pixel (grid-stride),
// the same double-precision power iteration on G^8 as the CPU reference, with
// the C x C matrices in per-thread arrays sized by a template bound on the
// coils (8, 16 or 32).
#include <cuda_runtime.h>

#include <complex>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "kernels/reconstruction/mri/espirit_pixels.h"

namespace tessera {
namespace recon {
namespace mri {
namespace cuda {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kMaxBlocks = 8192;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

struct Z {
  double re, im;
};
__device__ inline Z Add(Z a, Z b) { return {a.re + b.re, a.im + b.im}; }
__device__ inline Z Mul(Z a, Z b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
__device__ inline Z Conj(Z a) { return {a.re, -a.im}; }
__device__ inline Z Scale(Z a, double s) { return {a.re * s, a.im * s}; }
__device__ inline double Norm(Z a) { return a.re * a.re + a.im * a.im; }

template <int kMax>
__global__ void PixelKernel(int n, int64_t pixels, const float2* __restrict__ gram, const double2* __restrict__ reference,
                            int iterations, double crop, float2* __restrict__ maps, float* __restrict__ eigenvalues) {
  Z g[kMax * kMax], h[kMax * kMax], v[kMax], w[kMax];
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < pixels; i += int64_t{gridDim.x} * kThreads) {
    for (int c1 = 0, l = 0; c1 < n; ++c1) {
      for (int c2 = c1; c2 < n; ++c2, ++l) {
        const float2 x = gram[l * pixels + i];
        g[c1 * n + c2] = {x.x, x.y};
        g[c2 * n + c1] = {x.x, -x.y};
      }
    }
    double lambda = 0;
    bool ok = true;
    double scale = 0;
    for (int c = 0; c < n; ++c) scale = fmax(scale, g[c * n + c].re);
    ok = scale > 0;
    if (ok) {
      for (int k = 0; k < n * n; ++k) h[k] = Scale(g[k], 1.0 / scale);
      // Three renormalised squarings, each product formed in g (rebuilt from gram below).
      for (int squaring = 0; squaring < 3 && ok; ++squaring) {
        for (int c = 0; c < n; ++c) {
          for (int r = 0; r < n; ++r) {
            Z s = {0, 0};
            for (int k = 0; k < n; ++k) s = Add(s, Mul(h[r * n + k], h[k * n + c]));
            g[r * n + c] = s;
          }
        }
        double diag = 0;
        for (int r = 0; r < n; ++r) diag = fmax(diag, g[r * n + r].re);
        ok = diag > 0;
        for (int k = 0; k < n * n; ++k) h[k] = Scale(g[k], 1.0 / diag);
      }
      // Rebuild g for the Rayleigh quotient.
      for (int c1 = 0, l = 0; c1 < n; ++c1) {
        for (int c2 = c1; c2 < n; ++c2, ++l) {
          const float2 x = gram[l * pixels + i];
          g[c1 * n + c2] = {x.x, x.y};
          g[c2 * n + c1] = {x.x, -x.y};
        }
      }
    }
    if (ok) {
      int best = 0;
      for (int c = 1; c < n; ++c) {
        if (h[c * n + c].re > h[best * n + best].re) best = c;
      }
      for (int r = 0; r < n; ++r) v[r] = h[r * n + best];
      for (int it = 0; it < iterations && ok; ++it) {
        double norm = 0;
        for (int r = 0; r < n; ++r) {
          Z s = {0, 0};
          for (int k = 0; k < n; ++k) s = Add(s, Mul(h[r * n + k], v[k]));
          w[r] = s;
          norm += Norm(s);
        }
        norm = sqrt(norm);
        ok = norm > 0;
        for (int r = 0; r < n; ++r) v[r] = Scale(w[r], 1.0 / norm);
      }
    }
    if (ok) {
      for (int r = 0; r < n; ++r) {
        Z s = {0, 0};
        for (int k = 0; k < n; ++k) s = Add(s, Mul(g[r * n + k], v[k]));
        lambda += Mul(Conj(v[r]), s).re;
      }
    }
    eigenvalues[i] = static_cast<float>(lambda);
    if (!ok || !(lambda > crop)) {
      for (int c = 0; c < n; ++c) maps[c * pixels + i] = make_float2(0.f, 0.f);
      continue;
    }
    Z z = {0, 0};
    for (int c = 0; c < n; ++c) z = Add(z, Mul(Conj({reference[c].x, reference[c].y}), v[c]));
    const double mag = sqrt(Norm(z));
    const Z phase = mag > 0 ? Scale(Conj(z), 1.0 / mag) : Z{1, 0};
    for (int c = 0; c < n; ++c) {
      const Z m = Mul(v[c], phase);
      maps[c * pixels + i] = make_float2(static_cast<float>(m.re), static_cast<float>(m.im));
    }
  }
}

}  // namespace

absl::Status EspiritPixelMaps(const Stream& stream, int coils, int64_t pixels, const std::complex<float>* gram,
                              const std::complex<double>* reference, int iterations, double crop,
                              std::complex<float>* maps, float* eigenvalues) {
  if (coils > kMaxEspiritCudaCoils) {
    return absl::InvalidArgumentError(
        absl::StrCat("EspiritPixelMaps: ", coils, " coils; the CUDA version takes at most ", kMaxEspiritCudaCoils));
  }
  if (pixels == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const auto native = static_cast<cudaStream_t>(stream.native());
  const auto* g = reinterpret_cast<const float2*>(gram);
  const auto* ref = reinterpret_cast<const double2*>(reference);
  auto* m = reinterpret_cast<float2*>(maps);
  if (coils <= 8) {
    PixelKernel<8><<<Blocks(pixels), kThreads, 0, native>>>(coils, pixels, g, ref, iterations, crop, m, eigenvalues);
  } else if (coils <= 16) {
    PixelKernel<16><<<Blocks(pixels), kThreads, 0, native>>>(coils, pixels, g, ref, iterations, crop, m, eigenvalues);
  } else {
    PixelKernel<32><<<Blocks(pixels), kThreads, 0, native>>>(coils, pixels, g, ref, iterations, crop, m, eigenvalues);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("EspiritPixelKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace mri
}  // namespace recon
}  // namespace tessera
