// 3-D ESPIRiT (espirit3d.h) on exact Cartesian k-space of a simulated 32^3
// object with 4 smooth coils (espirit3d_test_data.h): maps unit-norm inside
// and zero away from the object, parallel to the true maps per voxel
// (|<S, S_true>| > 0.95 everywhere inside, > 0.99 on average); a k-space
// sampled only on a thinner z slab gives a calibration box that thin; with
// nz = 1 the 3-D path is the 2-D calibration (same kernel count, maps within
// 1e-5); reruns bit-identical; argument errors.
#include "kernels/reconstruction/mri/espirit3d.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <vector>

#include "kernels/reconstruction/mri/espirit.h"
#include "kernels/reconstruction/mri/espirit3d_test_data.h"
#include "kernels/reconstruction/mri/espirit_gridding3d.h"
#include "kernels/reconstruction/mri/ellipsoid_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;

constexpr int kCoils = 4;

const Espirit3dProblem& Problem32() {
  static const Espirit3dProblem* p = new Espirit3dProblem(MakeEspirit3dProblem({32, 32, 32}, kCoils));
  return *p;
}

EspiritOptions Options() {
  EspiritOptions o;
  o.calibration_size = 20;
  o.kernel_size = 5;
  return o;
}

double RelL2(const std::vector<Complex>& a, const std::vector<Complex>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += std::norm(a[i] - b[i]), den += std::norm(b[i]);
  return std::sqrt(num / den);
}

TEST(Espirit3d, MapsMatchTheTrueMapsUpToAPhase) {
  const Espirit3dProblem& p = Problem32();
  auto maps = Espirit3dCartesian(p.kspace.data(), p.dims, kCoils, Options());
  ASSERT_TRUE(maps.ok()) << maps.status();
  EXPECT_EQ(maps->nz, 32);
  EXPECT_EQ(maps->calibration_x, 20);
  EXPECT_EQ(maps->calibration_z, 20);
  EXPECT_GT(maps->kernels, 0);
  EXPECT_LT(maps->kernels, 5 * 5 * 5 * kCoils);
  const int64_t n = 32, voxels = n * n * n;
  int64_t inside = 0, inside_unit = 0, far = 0, far_zero = 0;
  double min_match = 1, mean_match = 0;
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = i + n * (j + n * k);
        double norm = 0;
        std::complex<double> dot = 0;
        for (int c = 0; c < kCoils; ++c) {
          const std::complex<double> s(maps->maps[c * voxels + at]), t(p.maps[c * voxels + at]);
          norm += std::norm(s);
          dot += std::conj(s) * t;
        }
        if (p.Inside(i, j, k, 0.9)) {
          ++inside;
          inside_unit += std::abs(norm - 1) < 1e-3;
          min_match = std::min(min_match, std::abs(dot));
          mean_match += std::abs(dot);
        } else if (!p.Inside(i, j, k, 1.4)) {
          ++far;
          far_zero += norm == 0;
        }
      }
    }
  }
  mean_match /= inside;
  std::printf("ESPIRiT 32^3 x %d coils, %d kernels: unit-norm inside %lld / %lld, zero far outside %lld / %lld, "
              "|<S, S_true>| mean %.5f min %.5f\n",
              kCoils, maps->kernels, static_cast<long long>(inside_unit), static_cast<long long>(inside),
              static_cast<long long>(far_zero), static_cast<long long>(far), mean_match, min_match);
  EXPECT_EQ(inside_unit, inside);
  EXPECT_GT(far_zero, 0.95 * far);
  EXPECT_GT(mean_match, 0.99);
  EXPECT_GT(min_match, 0.95);
  for (int64_t at = 0; at < voxels; ++at) {
    const bool kept = maps->maps[at] != Complex(0, 0) || maps->maps[voxels + at] != Complex(0, 0);
    ASSERT_EQ(kept, maps->eigenvalues[at] > 0.8f) << "voxel " << at;
  }
}

TEST(Espirit3d, RerunsAreBitIdentical) {
  const Espirit3dProblem& p = Problem32();
  auto a = Espirit3dCartesian(p.kspace.data(), p.dims, kCoils, Options());
  auto b = Espirit3dCartesian(p.kspace.data(), p.dims, kCoils, Options());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->maps == b->maps);
  EXPECT_TRUE(a->eigenvalues == b->eigenvalues);
}

TEST(Espirit3d, CalibrationBoxShrinksToTheSampledSlab) {
  // Only |kz| <= 5 sampled (11 planes): the box is 20 x 20 x 11.
  const Espirit3dProblem& p = Problem32();
  std::vector<Complex> slab = p.kspace;
  const int64_t n = 32;
  for (int c = 0; c < kCoils; ++c) {
    for (int64_t w = 0; w < n; ++w) {
      if (std::abs(w - n / 2) < 6) continue;
      std::fill(slab.begin() + (c * n + w) * n * n, slab.begin() + (c * n + w + 1) * n * n, Complex(0, 0));
    }
  }
  auto maps = Espirit3dCartesian(slab.data(), p.dims, kCoils, Options());
  ASSERT_TRUE(maps.ok()) << maps.status();
  EXPECT_EQ(maps->calibration_x, 20);
  EXPECT_EQ(maps->calibration_y, 20);
  EXPECT_EQ(maps->calibration_z, 11);
}

TEST(Espirit3d, FlatAxisIsThe2dCalibration) {
  const Espirit3dProblem p = MakeEspirit3dProblem({48, 40, 1}, kCoils);
  EspiritOptions o;  // BART's defaults: 24^2 region, 6 x 6 kernel
  auto two = EspiritCartesian(p.kspace.data(), 48, 40, kCoils, o);
  auto three = Espirit3dCartesian(p.kspace.data(), {48, 40, 1}, kCoils, o);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->kernels, two->kernels);
  EXPECT_EQ(three->calibration_z, 1);
  std::vector<Complex> ev2(two->eigenvalues.begin(), two->eigenvalues.end()),
      ev3(three->eigenvalues.begin(), three->eigenvalues.end());
  std::printf("nz = 1 vs 2-D: eigenvalues %.2e, maps %.2e (relative L2)\n", RelL2(ev3, ev2),
              RelL2(three->maps, two->maps));
  EXPECT_LT(RelL2(ev3, ev2), 1e-5);
  EXPECT_LT(RelL2(three->maps, two->maps), 1e-5);
}

// Kooshball data of the 3-D Shepp-Logan (exact k-space, 4 smooth coils, 1000
// spokes): the gridded 12^3 centre against the exact Cartesian one (measured
// 14 % relative L2 after 10 CG iterations: the box's corners beyond the
// spokes' reach and the crude cell-count preconditioner; 7.5 % after 40), and
// the maps from it against the maps from the Cartesian k-space, which is what
// counts: |<S, S_cartesian>| mean 0.99998, min 0.9995 over the object.
TEST(Espirit3d, KooshballGriddedCalibrationMatchesTheCartesianCentre) {
  const int64_t n = 32, size = 12;
  const auto phantom = SheppLogan3D(0.9);
  const auto series = SmoothCoilSeries3D(kCoils, 1);
  ASSERT_TRUE(series.ok()) << series.status();
  const auto traj = KooshballTrajectory(n, n, 1000);  // |k| < 16
  ASSERT_TRUE(traj.ok()) << traj.status();
  const auto radial = PhantomCoilKspace3D(phantom, *series, traj->size(), traj->kx.data(), traj->ky.data(),
                                          traj->kz.data(), n, n, n);
  ASSERT_TRUE(radial.ok()) << radial.status();
  auto gridded = GriddedCalibration3d(traj->size(), traj->kx.data(), traj->ky.data(), traj->kz.data(),
                                      radial->data(), kCoils, size);
  ASSERT_TRUE(gridded.ok()) << gridded.status();
  const auto cartesian = PhantomCartesianKspace3D(phantom, *series, n, n, n);
  ASSERT_TRUE(cartesian.ok()) << cartesian.status();
  const auto exact = ExtractCentre3d(cartesian->data(), {n, n, n}, kCoils, {size, size, size});
  const double error = RelL2(*gridded, exact);

  EspiritOptions o = Options();
  o.calibration_size = size;
  auto from_radial = Espirit3dFromCalibration(*gridded, {size, size, size}, kCoils, {n, n, n}, o);
  auto from_cartesian = Espirit3dCartesian(cartesian->data(), {n, n, n}, kCoils, o);
  ASSERT_TRUE(from_radial.ok()) << from_radial.status();
  ASSERT_TRUE(from_cartesian.ok()) << from_cartesian.status();
  const auto truth = RasterizePhantom3D(phantom, n, n, n);
  const int64_t voxels = n * n * n;
  double mean = 0, least = 1;
  int64_t counted = 0;
  for (int64_t i = 0; i < voxels; ++i) {
    if (!(truth[i] > 0)) continue;
    std::complex<double> dot = 0;
    double na = 0, nb = 0;
    for (int c = 0; c < kCoils; ++c) {
      const std::complex<double> a(from_radial->maps[c * voxels + i]), b(from_cartesian->maps[c * voxels + i]);
      dot += std::conj(a) * b, na += std::norm(a), nb += std::norm(b);
    }
    if (na == 0 || nb == 0) continue;
    const double match = std::abs(dot) / std::sqrt(na * nb);
    mean += match, least = std::min(least, match), ++counted;
  }
  mean /= std::max<int64_t>(counted, 1);
  std::printf("kooshball (%lld points) gridded %lld^3 centre vs exact: relative L2 %.4f; maps vs Cartesian maps over "
              "%lld object voxels: mean %.5f min %.5f\n",
              static_cast<long long>(traj->size()), static_cast<long long>(size), error,
              static_cast<long long>(counted), mean, least);
  EXPECT_LT(error, 0.2);
  EXPECT_GT(counted, voxels / 20);
  EXPECT_GT(mean, 0.999);
  EXPECT_GT(least, 0.99);
}

TEST(Espirit3d, Errors) {
  const int64_t n = 16;
  std::vector<Complex> ones(n * n * n * 2, Complex(1, 0));
  EspiritOptions bad = Options();
  bad.crop = 1.0;
  EXPECT_EQ(Espirit3dCartesian(ones.data(), {n, n, n}, 2, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Options();
  bad.calibration_size = 4;
  EXPECT_EQ(Espirit3dCartesian(ones.data(), {n, n, n}, 2, bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Espirit3dCartesian(ones.data(), {n, n, 0}, 2, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A short axis of extent 3 (< the 5-point kernel, > 1): refused naming z.
  auto thin = Espirit3dCartesian(ones.data(), {n, n * 16 / 3, 3}, 2, Options());
  EXPECT_EQ(thin.status().code(), absl::StatusCode::kInvalidArgument);
  // Every other kz plane missing: no fully sampled centre.
  std::vector<Complex> undersampled = ones;
  for (int c = 0; c < 2; ++c) {
    for (int64_t w = 1; w < n; w += 2) {
      std::fill(undersampled.begin() + (c * n + w) * n * n, undersampled.begin() + (c * n + w + 1) * n * n,
                Complex(0, 0));
    }
  }
  auto r = Espirit3dCartesian(undersampled.data(), {n, n, n}, 2, Options());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("fully sampled"), std::string::npos) << r.status();
  // No signal; image smaller than the region; wrong data size; region below the kernel along y.
  const std::vector<Complex> zeros(10 * 10 * 10 * 2, Complex(0, 0));
  EXPECT_EQ(Espirit3dFromCalibration(zeros, {10, 10, 10}, 2, {n, n, n}, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<Complex> some(10 * 10 * 10 * 2, Complex(1, 0));
  EXPECT_EQ(Espirit3dFromCalibration(some, {10, 10, 10}, 2, {n, n, 8}, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Espirit3dFromCalibration(some, {10, 10, 9}, 2, {n, n, n}, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto small = Espirit3dFromCalibration(std::vector<Complex>(10 * 4 * 25 * 2, 1), {10, 4, 25}, 2, {n, n, 32}, Options());
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("along y"), std::string::npos) << small.status();
  EXPECT_EQ(Espirit3dFromCalibration(some, {10, 10, 10}, 0, {n, n, n}, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
