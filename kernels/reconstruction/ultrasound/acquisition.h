// Ultrasound acquisitions with a linear array (seed 001 section 2.4): the
// probe, the transmit sequence, the sampling and the channel data, plus the
// image grid the beamformers reconstruct on. SI units throughout (metres,
// seconds, hertz, radians), as in USTB/PICMUS files.
//
// Coordinates: x along the array (lateral), z depth (axial, > 0 in the
// medium); elements sit at (element_x[e], 0).
//
// Time zero of a transmit (the USTB convention PICMUS uses):
//   plane wave at angle theta: the instant the wavefront passes the origin
//     (0, 0), so it reaches (x, z) at (x sin(theta) + z cos(theta)) / c;
//   synthetic aperture (one element e fires): the firing of e, so the wave
//     reaches (x, z) at |(x, z) - (element_x[e], 0)| / c.
// Sample s of every channel is taken at t = initial_time + s / sampling_frequency.
// A transmit may carry a delay d_t (USTB's uff.wave.delay: the recording of
// that transmit started d_t later relative to its time zero), so its echo from
// (x, z) to element c is recorded at T_t(x, z) + R_c(x, z) - d_t.
//
// Channel data: [samples x channels x transmits], samples fastest:
//   element (s, c, t) at s + samples * (c + channels * t)
// (real RF, or complex IQ demodulated by exp(-i 2 pi f_demod t)). Neighbouring
// pixels along z read neighbouring samples of one channel, so this layout
// keeps a beamformer's reads coalesced.
//
// Images: nx x nz, x fastest (pixel (ix, iz) at ix + nx * iz), pixel centres
// at (x0 + ix dx, z0 + iz dz).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_ACQUISITION_H_
#define TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_ACQUISITION_H_

#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {
namespace recon {
namespace ultrasound {

// The most receive channels the beamformers take (the batched Hermitian solve
// is bounded by 128 too, so minimum variance with subarray length <= 128
// always fits).
inline constexpr int kMaxChannels = 1024;

struct LinearArray {
  std::vector<double> element_x;      // element centres along x (m), increasing
  double center_frequency_hz = 0;     // transducer centre frequency (> 0)
  double element_width = 0;           // for the simulator's directivity; 0: omnidirectional

  int channels() const { return static_cast<int>(element_x.size()); }
  // Mean spacing of neighbouring elements (m); 0 with fewer than 2 elements.
  double pitch() const;
  // n elements `pitch` apart, centred on x = 0, width 0.9 pitch (kerf 10 %).
  static LinearArray Uniform(int n, double pitch, double center_frequency_hz);
};

enum class TransmitKind { kPlaneWave, kSyntheticAperture };

struct TransmitSequence {
  TransmitKind kind = TransmitKind::kPlaneWave;
  std::vector<double> angles_rad;  // plane waves: steering angles (rad, positive towards +x)
  std::vector<int> elements;       // synthetic aperture: the element that fires, per transmit
  std::vector<double> delays_s;    // d_t per transmit (s, see above); empty: all 0

  int transmits() const {
    return static_cast<int>(kind == TransmitKind::kPlaneWave ? angles_rad.size() : elements.size());
  }
  // n angles evenly spaced in [-max_angle, max_angle] (one angle: 0).
  static TransmitSequence PlaneWaves(int n, double max_angle_rad);
  // Every element of a `channels`-element array fires once, in order.
  static TransmitSequence SyntheticAperture(int channels);
};

struct Sampling {
  double sampling_frequency_hz = 0;  // fs (> 0)
  double initial_time_s = 0;         // time of sample 0 (may be negative)
  double sound_speed = 1540;         // c0 (m/s)
  double demodulation_frequency_hz = 0;  // IQ data: f_demod; 0 for RF or analytic RF
};

// Channel data of one frame. Exactly one of `rf` (real) or `iq` (complex)
// holds samples * channels * transmits values, in the layout above.
struct ChannelData {
  int64_t samples = 0;
  int channels = 0;
  int transmits = 0;
  std::vector<float> rf;
  std::vector<std::complex<float>> iq;

  bool is_iq() const { return !iq.empty(); }
  int64_t size() const { return samples * channels * int64_t{transmits}; }
};

struct Acquisition {
  LinearArray probe;
  TransmitSequence sequence;
  Sampling sampling;
  ChannelData data;
};

struct ImageGrid {
  int nx = 0, nz = 0;
  double x0 = 0, z0 = 0;  // first pixel centre (m)
  double dx = 0, dz = 0;  // pixel spacing (m, > 0)

  int64_t size() const { return int64_t{nx} * nz; }
  double x(int ix) const { return x0 + ix * dx; }
  double z(int iz) const { return z0 + iz * dz; }
  // nx x nz pixels covering [x_min, x_max] x [z_min, z_max] (centres on the edges).
  static ImageGrid Span(int nx, int nz, double x_min, double x_max, double z_min, double z_max);
};

// INVALID_ARGUMENT naming the field: element positions not finite or not
// increasing, fs / c / centre frequency not finite and > 0, transmit angles
// outside (-pi/2, pi/2), synthetic-aperture elements outside the array,
// delays_s neither empty nor one finite value per transmit,
// channel data whose shape disagrees with the probe / sequence, NaN or
// infinite samples ("channel data: sample 3 of channel 17, transmit 2 is NaN").
absl::Status ValidateAcquisition(const Acquisition& acquisition);
// The same checks without the sample values and their count: probe,
// sequence, sampling and the data's samples x channels x transmits (plans
// take the geometry; the data comes later, maybe on a GPU).
absl::Status ValidateAcquisitionGeometry(const Acquisition& acquisition);
absl::Status ValidateImageGrid(const ImageGrid& grid);

// The analytic signal of RF channel data (its Hilbert transform in the
// imaginary part), as IQ data with demodulation frequency 0, so the
// beamformers (which take complex data) can envelope-detect RF acquisitions.
// A 63-tap Blackman-windowed FIR Hilbert transformer along samples: accurate
// (< 1 % gain error) between 0.05 and 0.45 fs. Returns the input unchanged
// when it already is IQ. CPU only (a one-off conversion of file data).
Acquisition ToAnalytic(Acquisition acquisition);

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_ACQUISITION_H_
