#include "kernels/reconstruction/mri/trajectory.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;
// pi / golden ratio: the azimuthal step that spreads spokes most evenly for
// any number of them (Winkelmann et al. 2007).
constexpr double kGoldenAngle = kPi / 1.61803398874989484820;

absl::Status CheckSizes(const char* what, int64_t image_size, int64_t samples, int64_t spokes) {
  if (image_size < 2) return absl::InvalidArgumentError(absl::StrCat(what, ": image_size = ", image_size, " < 2"));
  if (samples < 2) return absl::InvalidArgumentError(absl::StrCat(what, ": samples = ", samples, " < 2"));
  if (spokes < 1) return absl::InvalidArgumentError(absl::StrCat(what, ": spokes = ", spokes, " < 1"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Trajectory2D> RadialTrajectory(int64_t image_size, int64_t samples, int64_t spokes,
                                              RadialOrdering ordering) {
  if (absl::Status s = CheckSizes("radial trajectory", image_size, samples, spokes); !s.ok()) return s;
  Trajectory2D t;
  t.samples = samples;
  t.spokes = spokes;
  t.kx.resize(samples * spokes);
  t.ky.resize(samples * spokes);
  const double step = static_cast<double>(image_size) / samples;
  for (int64_t s = 0; s < spokes; ++s) {
    const double angle = ordering == RadialOrdering::kUniform ? kPi * s / spokes
                                                                : std::fmod(kGoldenAngle * s, 2 * kPi);
    const double c = std::cos(angle), sn = std::sin(angle);
    for (int64_t i = 0; i < samples; ++i) {
      const double r = (i - samples / 2) * step;
      t.kx[i + samples * s] = static_cast<float>(r * c);
      t.ky[i + samples * s] = static_cast<float>(r * sn);
    }
  }
  return t;
}

absl::StatusOr<Trajectory2D> SpiralTrajectory(int64_t image_size, int64_t samples, int64_t interleaves, double turns) {
  if (absl::Status s = CheckSizes("spiral trajectory", image_size, samples, interleaves); !s.ok()) return s;
  if (!(turns > 0) || !std::isfinite(turns)) {
    return absl::InvalidArgumentError(absl::StrCat("spiral trajectory: turns = ", turns, " is not positive"));
  }
  Trajectory2D t;
  t.samples = samples;
  t.spokes = interleaves;
  t.kx.resize(samples * interleaves);
  t.ky.resize(samples * interleaves);
  const double kmax = image_size / 2.0;
  for (int64_t l = 0; l < interleaves; ++l) {
    for (int64_t i = 0; i < samples; ++i) {
      const double u = static_cast<double>(i) / samples;
      const double phase = 2 * kPi * (turns * u + static_cast<double>(l) / interleaves);
      t.kx[i + samples * l] = static_cast<float>(kmax * u * std::cos(phase));
      t.ky[i + samples * l] = static_cast<float>(kmax * u * std::sin(phase));
    }
  }
  return t;
}

absl::StatusOr<Trajectory3D> StackOfStarsTrajectory(int64_t image_size, int64_t partitions, int64_t samples,
                                                    int64_t spokes, RadialOrdering ordering) {
  if (partitions < 1) return absl::InvalidArgumentError(absl::StrCat("stack of stars: partitions = ", partitions, " < 1"));
  absl::StatusOr<Trajectory2D> star = RadialTrajectory(image_size, samples, spokes, ordering);
  if (!star.ok()) return star.status();
  Trajectory3D t;
  t.samples = samples;
  t.spokes = spokes;
  t.partitions = partitions;
  const int64_t per = star->size();
  for (int64_t p = 0; p < partitions; ++p) {
    t.kx.insert(t.kx.end(), star->kx.begin(), star->kx.end());
    t.ky.insert(t.ky.end(), star->ky.begin(), star->ky.end());
    t.kz.insert(t.kz.end(), per, static_cast<float>(p - partitions / 2));
  }
  return t;
}

absl::StatusOr<Trajectory3D> KooshballTrajectory(int64_t image_size, int64_t samples, int64_t spokes) {
  if (absl::Status s = CheckSizes("kooshball trajectory", image_size, samples, spokes); !s.ok()) return s;
  constexpr double kPhi1 = 0.46557123187676802665, kPhi2 = 0.68232780382801932737;  // 2-D golden means
  Trajectory3D t;
  t.samples = samples;
  t.spokes = spokes;
  t.kx.resize(samples * spokes);
  t.ky.resize(samples * spokes);
  t.kz.resize(samples * spokes);
  const double step = static_cast<double>(image_size) / samples;
  for (int64_t s = 0; s < spokes; ++s) {
    const double cos_polar = std::fmod(s * kPhi1, 1.0);
    const double sin_polar = std::sqrt(std::max(0.0, 1 - cos_polar * cos_polar));
    const double azimuth = 2 * kPi * std::fmod(s * kPhi2, 1.0);
    const double dx = sin_polar * std::cos(azimuth), dy = sin_polar * std::sin(azimuth), dz = cos_polar;
    for (int64_t i = 0; i < samples; ++i) {
      const double r = (i - samples / 2) * step;
      t.kx[i + samples * s] = static_cast<float>(r * dx);
      t.ky[i + samples * s] = static_cast<float>(r * dy);
      t.kz[i + samples * s] = static_cast<float>(r * dz);
    }
  }
  return t;
}

void ToNufftCoordinates(const Trajectory2D& trajectory, int64_t nx, int64_t ny, std::vector<float>* x,
                        std::vector<float>* y) {
  const double sx = 2 * kPi / nx, sy = 2 * kPi / ny;
  x->resize(trajectory.kx.size());
  y->resize(trajectory.ky.size());
  for (size_t j = 0; j < trajectory.kx.size(); ++j) {
    (*x)[j] = static_cast<float>(sx * trajectory.kx[j]);
    (*y)[j] = static_cast<float>(sy * trajectory.ky[j]);
  }
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
