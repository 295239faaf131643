// CPU reference of the beamforming steps (beamform_kernels.h): plain loops
// over pixels, split over threads by image column.
#include <cmath>
#include <complex>
#include <vector>

#include "common/parallel.h"
#include "kernels/reconstruction/ultrasound/beamform_kernels.h"

namespace tessera {
namespace recon {
namespace ultrasound {
namespace detail {
namespace cpu {
namespace {

using CDouble = std::complex<double>;

CDouble D(CFloat v) { return {v.re, v.im}; }

}  // namespace

void DelayAndSum(const BeamformParams& p, const CFloat* data, CFloat* image) {
  ParallelFor(p.nx, [&](int64_t begin, int64_t end, int) {
    for (int64_t ix = begin; ix < end; ++ix) {
      const double x = p.x0 + ix * p.dx;
      for (int iz = 0; iz < p.nz; ++iz) {
        const double z = p.z0 + iz * p.dz;
        CFloat acc = {0.0f, 0.0f};
        float weight_sum = 0.0f;
        for (int c = 0; c < p.channels; ++c) {
          const float w = ReceiveWeight(p, c, x, z);
          if (w == 0.0f) continue;
          acc = CAdd(acc, CScale(CompoundedChannel(data, p, c, x, z), w));
          weight_sum += w;
        }
        image[ix + int64_t{p.nx} * iz] = weight_sum > 0 ? CScale(acc, 1.0f / weight_sum) : CFloat{0.0f, 0.0f};
      }
    }
  });
}

void DelayedChannels(const BeamformParams& p, const MvChunk& chunk, const CFloat* data, CFloat* x) {
  ParallelFor(chunk.cols, [&](int64_t begin, int64_t end, int) {
    for (int64_t col = begin; col < end; ++col) {
      const double px = p.x0 + (chunk.col_begin + col) * p.dx;
      for (int iz = 0; iz < p.nz; ++iz) {
        const double pz = p.z0 + iz * p.dz;
        const int64_t q = iz + int64_t{p.nz} * col;
        for (int c = 0; c < p.channels; ++c) x[c + int64_t{p.channels} * q] = CompoundedChannel(data, p, c, px, pz);
      }
    }
  });
}

// Diagonal d of R (entries (j + d, j), j = 0..L-1-d) by a sliding window over
// the subarrays: R(j+d, j) = sum_k sum_{p=0}^{M-1} x_k[p+j+d] conj(x_k[p+j]).
void Covariance(const BeamformParams& p, const MvChunk& chunk, const CFloat* x, CFloat* r) {
  const int n = p.channels, l = chunk.subarray, m = n - l + 1;
  const int64_t pixels = chunk.pixels(p);
  ParallelFor(pixels, [&](int64_t begin, int64_t end, int) {
    std::vector<double> diagonal(l);
    for (int64_t q = begin; q < end; ++q) {
      const int iz = static_cast<int>(q % p.nz);
      const int k_lo = iz - chunk.temporal_half < 0 ? -iz : -chunk.temporal_half;
      const int k_hi = iz + chunk.temporal_half >= p.nz ? p.nz - 1 - iz : chunk.temporal_half;
      CFloat* rq = r + q * l * l;
      for (int d = 0; d < l; ++d) {
        CDouble s = 0;
        for (int k = k_lo; k <= k_hi; ++k) {
          const CFloat* xk = x + (q + k) * n;
          for (int i = 0; i < m; ++i) s += D(xk[i + d]) * std::conj(D(xk[i]));
        }
        for (int j = 0; j + d < l; ++j) {
          if (j > 0) {
            for (int k = k_lo; k <= k_hi; ++k) {
              const CFloat* xk = x + (q + k) * n;
              s += D(xk[j - 1 + m + d]) * std::conj(D(xk[j - 1 + m])) - D(xk[j - 1 + d]) * std::conj(D(xk[j - 1]));
            }
          }
          if (d == 0) {
            diagonal[j] = s.real();
          } else {
            rq[j + d + int64_t{j} * l] = {static_cast<float>(s.real()), static_cast<float>(s.imag())};
          }
        }
      }
      double trace = 0;
      for (int j = 0; j < l; ++j) trace += diagonal[j];
      const double load = chunk.loading * trace / l;
      for (int j = 0; j < l; ++j) rq[j + int64_t{j} * l] = {static_cast<float>(diagonal[j] + load), 0.0f};
    }
  });
}

void FillOnes(const BeamformParams& p, const MvChunk& chunk, CFloat* v) {
  const int64_t count = chunk.pixels(p) * chunk.subarray;
  for (int64_t i = 0; i < count; ++i) v[i] = {1.0f, 0.0f};
}

void ApplyWeights(const BeamformParams& p, const MvChunk& chunk, const CFloat* x, const CFloat* v, const int* info,
                  CFloat* image) {
  const int n = p.channels, l = chunk.subarray, m = n - l + 1;
  ParallelFor(chunk.pixels(p), [&](int64_t begin, int64_t end, int) {
    for (int64_t q = begin; q < end; ++q) {
      const CFloat* xq = x + q * n;
      const CFloat* vq = v + q * l;
      // a^H R^-1 a is real and positive for a positive definite R.
      double norm = 0;
      for (int i = 0; i < l; ++i) norm += vq[i].re;
      const bool adaptive = info[q] == 0 && std::isfinite(norm) && norm > 0;
      CDouble window = 0;  // sum of the first subarray, then slid along
      for (int i = 0; i < m; ++i) window += D(xq[i]);
      CDouble y = 0;
      for (int i = 0; i < l; ++i) {
        if (i > 0) window += D(xq[i - 1 + m]) - D(xq[i - 1]);
        const CDouble w = adaptive ? D(vq[i]) / norm : CDouble(1.0 / l);
        y += std::conj(w) * window;
      }
      y /= m;
      const int iz = static_cast<int>(q % p.nz);
      const int64_t ix = chunk.col_begin + q / p.nz;
      image[ix + int64_t{p.nx} * iz] = {static_cast<float>(y.real()), static_cast<float>(y.imag())};
    }
  });
}

}  // namespace cpu
}  // namespace detail
}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera
