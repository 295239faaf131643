#include "kernels/reconstruction/ultrasound/acquisition.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

namespace tessera {
namespace recon {
namespace ultrasound {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kHilbertHalfTaps = 31;  // 63 taps

bool PositiveFinite(double v) { return std::isfinite(v) && v > 0; }

template <typename T>
bool IsFinite(T v) {
  return std::isfinite(v);
}
template <>
bool IsFinite(std::complex<float> v) {
  return std::isfinite(v.real()) && std::isfinite(v.imag());
}

template <typename T>
absl::Status CheckSamples(const std::vector<T>& values, const ChannelData& d) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (IsFinite(values[i])) continue;
    const int64_t s = static_cast<int64_t>(i) % d.samples;
    const int64_t c = (static_cast<int64_t>(i) / d.samples) % d.channels;
    const int64_t t = static_cast<int64_t>(i) / (d.samples * d.channels);
    return absl::InvalidArgumentError(
        absl::StrCat("channel data: sample ", s, " of channel ", c, ", transmit ", t, " is not finite"));
  }
  return absl::OkStatus();
}

}  // namespace

double LinearArray::pitch() const {
  if (element_x.size() < 2) return 0;
  return (element_x.back() - element_x.front()) / static_cast<double>(element_x.size() - 1);
}

LinearArray LinearArray::Uniform(int n, double pitch, double center_frequency_hz) {
  LinearArray a;
  a.center_frequency_hz = center_frequency_hz;
  a.element_width = 0.9 * pitch;
  a.element_x.resize(n > 0 ? n : 0);
  for (int e = 0; e < n; ++e) a.element_x[e] = (e - 0.5 * (n - 1)) * pitch;
  return a;
}

TransmitSequence TransmitSequence::PlaneWaves(int n, double max_angle_rad) {
  TransmitSequence s;
  s.kind = TransmitKind::kPlaneWave;
  for (int i = 0; i < n; ++i) s.angles_rad.push_back(n == 1 ? 0.0 : -max_angle_rad + 2 * max_angle_rad * i / (n - 1));
  return s;
}

TransmitSequence TransmitSequence::SyntheticAperture(int channels) {
  TransmitSequence s;
  s.kind = TransmitKind::kSyntheticAperture;
  for (int e = 0; e < channels; ++e) s.elements.push_back(e);
  return s;
}

ImageGrid ImageGrid::Span(int nx, int nz, double x_min, double x_max, double z_min, double z_max) {
  ImageGrid g;
  g.nx = nx;
  g.nz = nz;
  g.x0 = x_min;
  g.z0 = z_min;
  g.dx = nx > 1 ? (x_max - x_min) / (nx - 1) : 1e-4;
  g.dz = nz > 1 ? (z_max - z_min) / (nz - 1) : 1e-4;
  return g;
}

absl::Status ValidateImageGrid(const ImageGrid& g) {
  if (g.nx < 1 || g.nz < 1) {
    return absl::InvalidArgumentError(absl::StrCat("image grid: nx = ", g.nx, ", nz = ", g.nz, " (both must be >= 1)"));
  }
  if (g.nx > 65535 || g.nz > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("image grid: nx = ", g.nx, ", nz = ", g.nz, " (at most 65535 each)"));
  }
  if (g.size() > (int64_t{1} << 28)) {
    return absl::InvalidArgumentError(absl::StrCat("image grid: ", g.nx, " x ", g.nz, " pixels is over 2^28"));
  }
  if (!PositiveFinite(g.dx) || !PositiveFinite(g.dz)) {
    return absl::InvalidArgumentError(absl::StrCat("image grid: dx = ", g.dx, ", dz = ", g.dz, " (must be > 0)"));
  }
  if (!std::isfinite(g.x0) || !std::isfinite(g.z0)) {
    return absl::InvalidArgumentError(absl::StrCat("image grid: x0 = ", g.x0, ", z0 = ", g.z0, " (must be finite)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAcquisitionGeometry(const Acquisition& a) {
  const LinearArray& p = a.probe;
  if (p.channels() < 1 || p.channels() > kMaxChannels) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe: ", p.channels(), " elements (must be 1..", kMaxChannels, ")"));
  }
  for (int e = 0; e < p.channels(); ++e) {
    if (!std::isfinite(p.element_x[e]) || (e > 0 && !(p.element_x[e] > p.element_x[e - 1]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("probe: element_x[", e, "] = ", p.element_x[e], " (must be finite and increasing)"));
    }
  }
  if (!PositiveFinite(p.center_frequency_hz)) {
    return absl::InvalidArgumentError(absl::StrCat("probe: center_frequency_hz = ", p.center_frequency_hz));
  }
  if (!std::isfinite(p.element_width) || p.element_width < 0) {
    return absl::InvalidArgumentError(absl::StrCat("probe: element_width = ", p.element_width));
  }
  const TransmitSequence& q = a.sequence;
  if (q.transmits() < 1) return absl::InvalidArgumentError("transmit sequence: no transmits");
  if (q.kind == TransmitKind::kPlaneWave) {
    for (size_t i = 0; i < q.angles_rad.size(); ++i) {
      if (!std::isfinite(q.angles_rad[i]) || std::abs(q.angles_rad[i]) >= kPi / 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("transmit sequence: angles_rad[", i, "] = ", q.angles_rad[i], " (must be in (-pi/2, pi/2))"));
      }
    }
  } else {
    for (size_t i = 0; i < q.elements.size(); ++i) {
      if (q.elements[i] < 0 || q.elements[i] >= p.channels()) {
        return absl::InvalidArgumentError(absl::StrCat("transmit sequence: elements[", i, "] = ", q.elements[i],
                                                       " (the probe has ", p.channels(), " elements)"));
      }
    }
  }
  if (!q.delays_s.empty() && static_cast<int>(q.delays_s.size()) != q.transmits()) {
    return absl::InvalidArgumentError(absl::StrCat("transmit sequence: ", q.delays_s.size(), " delays_s for ",
                                                   q.transmits(), " transmits"));
  }
  for (size_t i = 0; i < q.delays_s.size(); ++i) {
    if (!std::isfinite(q.delays_s[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("transmit sequence: delays_s[", i, "] = ", q.delays_s[i], " (must be finite)"));
    }
  }
  const Sampling& s = a.sampling;
  if (!PositiveFinite(s.sampling_frequency_hz)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: sampling_frequency_hz = ", s.sampling_frequency_hz));
  }
  if (!PositiveFinite(s.sound_speed)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: sound_speed = ", s.sound_speed));
  }
  if (!std::isfinite(s.initial_time_s)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: initial_time_s = ", s.initial_time_s));
  }
  if (!std::isfinite(s.demodulation_frequency_hz) || s.demodulation_frequency_hz < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: demodulation_frequency_hz = ", s.demodulation_frequency_hz));
  }
  const ChannelData& d = a.data;
  if (d.samples < 1 || d.channels != p.channels() || d.transmits != q.transmits()) {
    return absl::InvalidArgumentError(absl::StrCat("channel data: shape ", d.samples, " samples x ", d.channels,
                                                   " channels x ", d.transmits, " transmits, but the probe has ",
                                                   p.channels(), " elements and the sequence ", q.transmits(),
                                                   " transmits"));
  }
  if (d.samples > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("channel data: ", d.samples, " samples per channel is over 2^24"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAcquisition(const Acquisition& a) {
  if (absl::Status s = ValidateAcquisitionGeometry(a); !s.ok()) return s;
  const ChannelData& d = a.data;
  if (!d.rf.empty() && !d.iq.empty()) {
    return absl::InvalidArgumentError("channel data: both rf and iq are set (exactly one must be)");
  }
  const int64_t have = d.is_iq() ? static_cast<int64_t>(d.iq.size()) : static_cast<int64_t>(d.rf.size());
  if (have != d.size()) {
    return absl::InvalidArgumentError(absl::StrCat("channel data: ", have, " ", d.is_iq() ? "iq" : "rf",
                                                   " values for a ", d.samples, " x ", d.channels, " x ",
                                                   d.transmits, " frame (", d.size(), " expected)"));
  }
  if (!d.is_iq() && a.sampling.demodulation_frequency_hz != 0) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: demodulation_frequency_hz = ",
                                                   a.sampling.demodulation_frequency_hz, " for RF data (must be 0)"));
  }
  return d.is_iq() ? CheckSamples(d.iq, d) : CheckSamples(d.rf, d);
}

Acquisition ToAnalytic(Acquisition a) {
  if (a.data.is_iq()) return a;
  // Ideal Hilbert transformer 2 / (pi n) at odd n, Blackman-windowed.
  std::vector<float> h(2 * kHilbertHalfTaps + 1, 0.0f);
  for (int n = -kHilbertHalfTaps; n <= kHilbertHalfTaps; ++n) {
    if (n % 2 == 0) continue;
    const double u = static_cast<double>(n + kHilbertHalfTaps) / (2 * kHilbertHalfTaps);
    const double window = 0.42 - 0.5 * std::cos(2 * kPi * u) + 0.08 * std::cos(4 * kPi * u);
    h[n + kHilbertHalfTaps] = static_cast<float>(2.0 / (kPi * n) * window);
  }
  ChannelData& d = a.data;
  d.iq.resize(d.size());
  const int64_t lines = int64_t{d.channels} * d.transmits;
  ParallelFor(lines, [&](int64_t begin, int64_t end, int) {
    for (int64_t line = begin; line < end; ++line) {
      const float* x = d.rf.data() + line * d.samples;
      std::complex<float>* y = d.iq.data() + line * d.samples;
      for (int64_t s = 0; s < d.samples; ++s) {
        double im = 0;
        for (int n = -kHilbertHalfTaps; n <= kHilbertHalfTaps; n += 1) {
          const int64_t k = s - n;
          if (k >= 0 && k < d.samples) im += h[n + kHilbertHalfTaps] * x[k];
        }
        y[s] = {x[s], static_cast<float>(im)};
      }
    }
  });
  d.rf.clear();
  d.rf.shrink_to_fit();
  a.sampling.demodulation_frequency_hz = 0;
  return a;
}

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera
