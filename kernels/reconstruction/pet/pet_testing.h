// Small PET problems for tests: geometries, a disc phantom with uniform
// attenuation, Poisson counts and random inputs with fixed seeds.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_PET_TESTING_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_PET_TESTING_H_

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/testing/device_array.h"
#include "kernels/reconstruction/geometry.h"
#include "kernels/reconstruction/pet/listmode_file.h"
#include "kernels/reconstruction/pet/pet_geometry.h"

namespace tessera {
namespace recon {
namespace pet {
namespace testing {

inline TofSpec Tof(int bins, double bin_mm, double fwhm_mm) { return TofSpec{bins, bin_mm, fwhm_mm}; }

// 24 x 20 mm slice (non-square, so x/y mix-ups show), 36 views over 2 pi.
inline PetGeometry Fan2D(TofSpec tof = {}) {
  PetGeometry g;
  g.ct.volume = CenteredVolume(24, 20);
  g.ct.projection = FanBeam2D(EvenAngles(36, 2 * M_PI), 1.6, 40, 60, 40);
  g.tof = tof;
  return g;
}

inline PetGeometry Parallel2D(TofSpec tof = {}) {
  PetGeometry g;
  g.ct.volume = CenteredVolume(24, 20);
  g.ct.projection = ParallelBeam2D(EvenAngles(20, M_PI), 1.0, 36);
  g.tof = tof;
  return g;
}

// 12 x 14 x 10 voxels of 1.5 x 1 x 1.2 mm, shifted off the origin; 16 views.
inline PetGeometry Cone3D(TofSpec tof = {}) {
  PetGeometry g;
  VolumeGeometry v = CenteredVolume(12, 14, 10);
  v.min_x = -9 + 1;
  v.max_x = 9 + 1;
  v.min_z = -6;
  v.max_z = 6;
  g.ct.volume = v;
  g.ct.projection = ConeBeam(EvenAngles(16, 2 * M_PI), 1.5, 1.5, 14, 20, 50, 40);
  g.tof = tof;
  return g;
}

// A 2-D problem big enough for the EM tests: 32 x 32 mm, 48 views, 56 cols.
inline PetGeometry EmFan2D(TofSpec tof = {}) {
  PetGeometry g;
  g.ct.volume = CenteredVolume(32, 32);
  g.ct.projection = FanBeam2D(EvenAngles(48, 2 * M_PI), 1.5, 56, 80, 60);
  g.tof = tof;
  return g;
}

inline std::vector<float> Random(int64_t n, uint32_t seed, float lo = 0.1f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Activity: a disc of `value` of radius 0.4 of the smaller extent, plus a
// hot disc of 3x inside it off centre; zero outside. Voxel centres decide.
inline std::vector<float> DiscPhantom(const VolumeGeometry& v, float value = 1.0f) {
  std::vector<float> x(v.size(), 0.0f);
  const double r = 0.4 * std::min(v.max_x - v.min_x, v.max_y - v.min_y);
  const double cx = 0.5 * (v.min_x + v.max_x), cy = 0.5 * (v.min_y + v.max_y);
  for (int64_t k = 0; k < v.nz; ++k) {
    for (int64_t j = 0; j < v.ny; ++j) {
      for (int64_t i = 0; i < v.nx; ++i) {
        const Vec3 c = v.VoxelCenter(i, j, k);
        const double dx = c.x - cx, dy = c.y - cy;
        float a = 0;
        if (dx * dx + dy * dy < r * r) a = value;
        const double hx = dx - 0.35 * r, hy = dy + 0.2 * r;
        if (hx * hx + hy * hy < 0.09 * r * r) a = 3 * value;
        x[i + v.nx * (j + v.ny * k)] = a;
      }
    }
  }
  return x;
}

// Uniform mu (1/mm) inside the phantom's outer disc.
inline std::vector<float> DiscMuMap(const VolumeGeometry& v, float mu = 0.0096f) {
  std::vector<float> m = DiscPhantom(v, 1.0f);
  for (float& x : m) x = x > 0 ? mu : 0.0f;
  return m;
}

inline std::vector<float> Poisson(const std::vector<float>& mean, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> y(mean.size());
  for (size_t i = 0; i < mean.size(); ++i) {
    if (mean[i] <= 0) {
      y[i] = 0;
      continue;
    }
    std::poisson_distribution<int> d(mean[i]);
    y[i] = static_cast<float>(d(rng));
  }
  return y;
}

inline double DotD(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

using ::tessera::testing::RelL2;

// One event per count of a TOF sinogram (layout pet_geometry.h), shuffled;
// every `merge_every`-th pair of counts of a bin becomes one weight-2 record
// and every `delayed_every`-th record is followed by a weight-0 (delayed) one.
inline std::vector<ListModeEvent> EventsFromCounts(const PetGeometry& g, const std::vector<float>& counts,
                                                   uint32_t seed, int merge_every = 5, int delayed_every = 9) {
  const int64_t cols = g.cols(), rows = g.rows(), bins = g.tof.num_bins;
  std::vector<ListModeEvent> events;
  int64_t serial = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(counts.size()); ++i) {
    ListModeEvent e;
    e.col = static_cast<uint16_t>(i % cols);
    e.row = static_cast<uint16_t>((i / cols) % rows);
    e.tof_bin = static_cast<int16_t>((i / (cols * rows)) % bins - bins / 2);
    e.view = static_cast<uint32_t>(i / (cols * rows * bins));
    int n = static_cast<int>(counts[i]);
    while (n > 0) {
      e.weight = (n >= 2 && ++serial % merge_every == 0) ? 2 : 1;
      n -= e.weight;
      events.push_back(e);
      if (++serial % delayed_every == 0) {
        ListModeEvent delayed = e;
        delayed.weight = 0;
        events.push_back(delayed);
      }
    }
  }
  std::mt19937 rng(seed);
  std::shuffle(events.begin(), events.end(), rng);
  return events;
}

}  // namespace testing
}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_PET_TESTING_H_
