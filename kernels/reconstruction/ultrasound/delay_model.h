// Internal: the delay, interpolation and apodisation model the CPU and CUDA
// beamformers share (host and device inline functions over one POD struct),
// so both backends compute the same delays from the same formulas.
//
// Round-trip delay of pixel (x, z) for transmit t and receive channel c:
//   tau = T_t(x, z) + |(x, z) - (element_x[c], 0)| / c0 - d_t
// with T_t from acquisition.h (plane wave: (x sin + z cos) / c0; synthetic
// aperture: distance to the firing element / c0) and d_t the transmit's
// recording delay (acquisition.h; 0 unless the file gives one). The delayed sample is
//   v = (1 - f) d[i] + f d[i + 1],  i = floor(u), f = u - i,  u = (tau - t0) fs
// (0 when i < 0 or i + 1 >= samples), rotated by exp(+i 2 pi f_demod tau)
// for IQ data (undoes the demodulation at the pixel's own delay).
// Delays and the phase are computed in double on both backends: a float
// round-trip delay of ~1e-4 s times f_demod of ~5 MHz leaves ~1e-4 cycles of
// phase noise, as large as the CPU/CUDA tolerance.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_DELAY_MODEL_H_
#define TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_DELAY_MODEL_H_

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TESSERA_US_HD __host__ __device__ __forceinline__
#else
#define TESSERA_US_HD inline
#endif

namespace tessera {
namespace recon {
namespace ultrasound {
namespace detail {

// Layout-compatible with std::complex<float>, float2 and cuComplex.
struct CFloat {
  float re, im;
};

TESSERA_US_HD CFloat CAdd(CFloat a, CFloat b) { return {a.re + b.re, a.im + b.im}; }
TESSERA_US_HD CFloat CScale(CFloat a, float s) { return {a.re * s, a.im * s}; }
TESSERA_US_HD CFloat CMul(CFloat a, CFloat b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
// conj(a) * b
TESSERA_US_HD CFloat CConjMul(CFloat a, CFloat b) { return {a.re * b.re + a.im * b.im, a.re * b.im - a.im * b.re}; }

enum ApodizationWindow : int { kBoxcarWindow = 0, kHannWindow = 1 };

// Everything a beamforming kernel needs, by value. Pointers are in the
// executing backend's memory.
struct BeamformParams {
  // channel data
  int64_t samples = 0;
  int channels = 0;
  int transmits = 0;
  bool synthetic_aperture = false;
  double fs = 0;           // Hz
  double t0 = 0;           // s, time of sample 0
  double inv_c = 0;        // 1 / sound speed (s/m)
  double f_demod = 0;      // Hz
  const double* element_x = nullptr;   // [channels]
  const double* transmit = nullptr;    // plane wave: [2 transmits] (sin, cos); SA: [transmits] firing element x
  const double* transmit_delay = nullptr;  // [transmits] d_t (s)
  // image grid
  int nx = 0, nz = 0;
  double x0 = 0, z0 = 0, dx = 0, dz = 0;
  // receive apodisation (DAS)
  int window = kHannWindow;
  double f_number = 0;     // 0: the whole array
  double min_half_aperture = 0;  // m: the aperture never narrows below this half-width (one pitch)
  double array_center = 0, array_half_span = 0;  // for the whole-array window
};

constexpr double kTwoPi = 6.283185307179586;

TESSERA_US_HD double TransmitDelay(const BeamformParams& p, int t, double x, double z) {
  if (p.synthetic_aperture) {
    const double ex = x - p.transmit[t];
    return sqrt(ex * ex + z * z) * p.inv_c - p.transmit_delay[t];
  }
  return (x * p.transmit[2 * t] + z * p.transmit[2 * t + 1]) * p.inv_c - p.transmit_delay[t];
}

TESSERA_US_HD double ReceiveDelay(const BeamformParams& p, int c, double x, double z) {
  const double ex = x - p.element_x[c];
  return sqrt(ex * ex + z * z) * p.inv_c;
}

// The delayed, phase-rotated sample of one channel line (samples contiguous).
TESSERA_US_HD CFloat DelayedSample(const CFloat* line, const BeamformParams& p, double tau) {
  const double u = (tau - p.t0) * p.fs;
  const double fl = floor(u);
  if (!(fl >= 0) || fl + 1 >= static_cast<double>(p.samples)) return {0.0f, 0.0f};
  const int64_t i = static_cast<int64_t>(fl);
  const float f = static_cast<float>(u - fl);
  const CFloat a = line[i], b = line[i + 1];
  CFloat v = {a.re + f * (b.re - a.re), a.im + f * (b.im - a.im)};
  if (p.f_demod != 0) {
    const double cycles = p.f_demod * tau;
    const float phase = static_cast<float>(kTwoPi * (cycles - floor(cycles)));
    v = CMul(v, CFloat{cosf(phase), sinf(phase)});
  }
  return v;
}

// Receive apodisation weight of channel c for pixel (x, z), in [0, 1].
TESSERA_US_HD float ReceiveWeight(const BeamformParams& p, int c, double x, double z) {
  double d, half;
  if (p.f_number > 0) {
    d = fabs(x - p.element_x[c]);
    half = z / (2 * p.f_number);
    if (half < p.min_half_aperture) half = p.min_half_aperture;
  } else {
    d = fabs(p.element_x[c] - p.array_center);
    half = p.array_half_span;
  }
  if (d > half) return 0.0f;
  if (p.window == kBoxcarWindow) return 1.0f;
  return static_cast<float>(0.5 * (1.0 + cos(3.141592653589793 * d / half)));
}

// The transmit-compounded delayed signal of channel c at pixel (x, z):
//   sum_t DelayedSample(data[c, t], T_t(x, z) + R_c(x, z))
TESSERA_US_HD CFloat CompoundedChannel(const CFloat* data, const BeamformParams& p, int c, double x, double z) {
  const double rx = ReceiveDelay(p, c, x, z);
  CFloat acc = {0.0f, 0.0f};
  for (int t = 0; t < p.transmits; ++t) {
    const CFloat* line = data + p.samples * (c + static_cast<int64_t>(p.channels) * t);
    acc = CAdd(acc, DelayedSample(line, p, TransmitDelay(p, t, x, z) + rx));
  }
  return acc;
}

}  // namespace detail
}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_DELAY_MODEL_H_
