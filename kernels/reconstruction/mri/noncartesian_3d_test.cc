// 3-D non-Cartesian SENSE (issue 36), CPU: the 3-D operator against the
// direct NUDFT; the stack-of-stars slice path against the 3-D NUFFT path;
// CG-SENSE on exact k-space of the 3-D Shepp-Logan phantom (stack of stars
// and kooshball) reaching a stated NRMSE; trajectories; argument errors.
// The CUDA backend: noncartesian_3d_cuda_test.
#include "kernels/reconstruction/mri/noncartesian_3d.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "common/testing/device_array.h"
#include "kernels/reconstruction/mri/ellipsoid_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"
#include "kernels/reconstruction/nufft/nudft.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
constexpr double kPi = 3.14159265358979323846;

std::vector<Complex> RandomComplex(size_t n, unsigned seed) {
  return ::tessera::testing::RandomComplex<float>(n, -1, 1, seed);
}

double RelativeError(const std::vector<Complex>& a, const std::vector<Complex>& b) {
  return ::tessera::testing::RelL2(a, b);
}

double Nrmse(const std::vector<Complex>& image, const std::vector<float>& truth) {
  double num = 0, den = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    num += std::norm(image[i] - Complex(truth[i], 0));
    den += double{truth[i]} * truth[i];
  }
  return std::sqrt(num / den);
}

TEST(Trajectory3D, StackOfStarsAndKooshball) {
  auto sos = StackOfStarsTrajectory(16, 8, 32, 10, RadialOrdering::kGoldenAngle);
  ASSERT_TRUE(sos.ok()) << sos.status();
  EXPECT_EQ(sos->size(), 8 * 32 * 10);
  EXPECT_EQ(sos->kz.front(), -4);
  EXPECT_EQ(sos->kz.back(), 3);
  EXPECT_EQ(sos->kx[5], sos->kx[5 + 320 * 3]);
  auto koosh = KooshballTrajectory(16, 32, 100);
  ASSERT_TRUE(koosh.ok()) << koosh.status();
  double kmax = 0;
  for (int64_t j = 0; j < koosh->size(); ++j) {
    kmax = std::max(kmax, std::sqrt(double{koosh->kx[j]} * koosh->kx[j] + double{koosh->ky[j]} * koosh->ky[j] +
                                    double{koosh->kz[j]} * koosh->kz[j]));
  }
  EXPECT_NEAR(kmax, 8.0, 1e-4);
  EXPECT_FALSE(StackOfStarsTrajectory(16, 0, 32, 10, RadialOrdering::kUniform).ok());
  EXPECT_FALSE(KooshballTrajectory(16, 32, 0).ok());
  // Detection: the stack qualifies, the kooshball does not, a dropped
  // partition does not.
  EXPECT_TRUE(DetectStackOfStars(sos->size(), sos->kx.data(), sos->ky.data(), sos->kz.data(), nullptr, 8).has_value());
  EXPECT_FALSE(DetectStackOfStars(koosh->size(), koosh->kx.data(), koosh->ky.data(), koosh->kz.data(), nullptr, 16)
                   .has_value());
  EXPECT_FALSE(DetectStackOfStars(sos->size(), sos->kx.data(), sos->ky.data(), sos->kz.data(), nullptr, 16)
                   .has_value());
  // kz a float rounding away from an integer (fractions x matrix) still
  // qualifies; a fractional kz does not.
  std::vector<float> kz = sos->kz;
  for (float& k : kz) k = (k / 48.0f) * 48.0f + 1e-6f;
  EXPECT_TRUE(DetectStackOfStars(sos->size(), sos->kx.data(), sos->ky.data(), kz.data(), nullptr, 8).has_value());
  for (float& k : kz) k += 0.25f;
  EXPECT_FALSE(DetectStackOfStars(sos->size(), sos->kx.data(), sos->ky.data(), kz.data(), nullptr, 8).has_value());
}

// E and E^H of the 3-D operator against the NUDFT with the maps applied by hand.
TEST(Sense3D, OperatorMatchesNudft) {
  const int64_t nx = 8, ny = 6, nz = 4, npix = nx * ny * nz;
  const int coils = 2;
  auto traj = *KooshballTrajectory(8, 16, 20);
  const int64_t m = traj.size();
  const auto maps = RandomComplex(coils * npix, 1);
  const auto x = RandomComplex(npix, 2);
  const auto y = RandomComplex(coils * m, 3);
  std::vector<double> px(m), py(m), pz(m);
  for (int64_t j = 0; j < m; ++j) {
    px[j] = 2 * kPi * traj.kx[j] / nx;
    py[j] = 2 * kPi * traj.ky[j] / ny;
    pz[j] = 2 * kPi * traj.kz[j] / nz;
  }
  const nufft::NudftPoints points{m, px.data(), py.data(), pz.data()};
  std::vector<std::complex<double>> coil_x(coils * npix), direct_y(coils * m), coil_back(coils * npix);
  for (int c = 0; c < coils; ++c) {
    for (int64_t p = 0; p < npix; ++p) coil_x[c * npix + p] = std::complex<double>(maps[c * npix + p] * x[p]);
  }
  nufft::NudftType2({nx, ny, nz}, points, -1, coils, coil_x.data(), direct_y.data());
  std::vector<std::complex<double>> yd(y.begin(), y.end());
  nufft::NudftType1({nx, ny, nz}, points, +1, coils, yd.data(), coil_back.data());
  std::vector<Complex> want_y(direct_y.begin(), direct_y.end()), want_x(npix, 0);
  for (int c = 0; c < coils; ++c) {
    for (int64_t p = 0; p < npix; ++p) want_x[p] += std::conj(maps[c * npix + p]) * Complex(coil_back[c * npix + p]);
  }

  SenseGeometry g{nx, ny, coils, m, traj.kx.data(), traj.ky.data(), maps.data(), nullptr, nz, traj.kz.data()};
  SenseOperatorOptions options;
  options.nufft_tolerance = 1e-6;
  const Stream cpu = Stream::Cpu();  // the operator keeps a reference
  auto op = SenseOperator::Create(cpu, g, options);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ((*op)->pixels(), npix);
  std::vector<Complex> got_y(coils * m), got_x(npix);
  absl::Status forward = (*op)->Forward(x.data(), got_y.data());
  ASSERT_TRUE(forward.ok()) << forward.ToString();
  absl::Status adjoint = (*op)->Adjoint(y.data(), got_x.data());
  ASSERT_TRUE(adjoint.ok()) << adjoint.ToString();
  EXPECT_LT(RelativeError(got_y, want_y), 1e-5);
  EXPECT_LT(RelativeError(got_x, want_x), 1e-5);

  // Normal = E^H E, through the NUFFT pair and the 3-D Toeplitz embedding.
  std::vector<Complex> ex(coils * m), ehex(npix), pair(npix), toeplitz(npix);
  ASSERT_TRUE((*op)->Forward(x.data(), ex.data()).ok());
  ASSERT_TRUE((*op)->Adjoint(ex.data(), ehex.data()).ok());
  ASSERT_TRUE((*op)->Normal(x.data(), pair.data()).ok());
  options.use_toeplitz = true;
  auto top = SenseOperator::Create(cpu, g, options);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_TRUE((*top)->Normal(x.data(), toeplitz.data()).ok());
  EXPECT_LT(RelativeError(pair, ehex), 1e-6);
  EXPECT_LT(RelativeError(toeplitz, ehex), 1e-4);

  // nz without kz (and kz with nz = 1) are refused, naming nz.
  SenseGeometry bad = g;
  bad.kz = nullptr;
  auto refused = SenseOperator::Create(cpu, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("nz"), std::string::npos);
  bad = g;
  bad.nz = 1;
  EXPECT_FALSE(SenseOperator::Create(cpu, bad).ok());
}

struct Phantom3D {
  int64_t n = 0;
  int coils = 4;
  Trajectory3D traj;
  std::vector<Complex> maps, kspace;
  std::vector<float> truth;
  NonCartesian3D problem() const {
    return {n, n, n, coils, traj.size(), traj.kx.data(), traj.ky.data(), traj.kz.data(), kspace.data(),
            maps.data(), nullptr};
  }
};

Phantom3D MakePhantom(int64_t n, Trajectory3D traj) {
  Phantom3D p;
  p.n = n;
  p.traj = std::move(traj);
  const auto series = *SmoothCoilSeries3D(p.coils, 1);
  p.maps = EvaluateCoilSeries3D(series, n, n, n);
  const auto phantom = SheppLogan3D(0.9);
  p.kspace = *PhantomCoilKspace3D(phantom, series, p.traj.size(), p.traj.kx.data(), p.traj.ky.data(),
                                  p.traj.kz.data(), n, n, n);
  p.truth = RasterizePhantom3D(phantom, n, n, n);
  return p;
}

// The slice path and the 3-D NUFFT give the same adjoint (float rounding) and
// the same CG-SENSE image once converged.
TEST(Sense3D, StackOfStarsPathEqualsNufftPath) {
  const int64_t n = 16;
  const Phantom3D p = MakePhantom(n, *StackOfStarsTrajectory(n, n, 2 * n, 28, RadialOrdering::kGoldenAngle));
  const Stream cpu = Stream::Cpu();
  Recon3DOptions options;
  options.adjoint_only = true;
  std::vector<Complex> adjoint_stack(n * n * n), adjoint_3d(n * n * n);
  auto a = ReconstructNonCartesian3D(cpu, p.problem(), options, adjoint_stack.data());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->path, Path3D::kStackOfStars);
  options.allow_stack_of_stars = false;
  auto b = ReconstructNonCartesian3D(cpu, p.problem(), options, adjoint_3d.data());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->path, Path3D::kNufft3D);
  const double adjoint_diff = RelativeError(adjoint_stack, adjoint_3d);

  options.adjoint_only = false;
  options.cg.iterations = 100;
  options.cg.lambda = 1e-2;
  options.cg.tolerance = 1e-6;
  options.cg.use_toeplitz = true;
  std::vector<Complex> cg_stack(n * n * n), cg_3d(n * n * n);
  options.allow_stack_of_stars = true;
  ASSERT_TRUE(ReconstructNonCartesian3D(cpu, p.problem(), options, cg_stack.data()).ok());
  options.allow_stack_of_stars = false;
  auto c = ReconstructNonCartesian3D(cpu, p.problem(), options, cg_3d.data());
  ASSERT_TRUE(c.ok()) << c.status();
  const double cg_diff = RelativeError(cg_stack, cg_3d);
  std::printf("16^3 stack of stars (28 spokes x 16 partitions), 4 coils: adjoint paths differ by %.2e, converged "
              "CG-SENSE (lambda 1e-2, %d it) by %.2e\n", adjoint_diff, c->iterations, cg_diff);
  EXPECT_LT(adjoint_diff, 1e-4);
  EXPECT_LT(cg_diff, 1e-3);
}

// 24^3, 4 coils, exact k-space: CG-SENSE beats the density-free adjoint
// by far and reaches NRMSE < 0.31 against the voxel-averaged phantom (the
// rest is the phantom's sub-voxel edges at this size).
TEST(Sense3D, StackOfStarsCgSenseReachesNrmse) {
  const int64_t n = 24;
  const Phantom3D p = MakePhantom(n, *StackOfStarsTrajectory(n, n, 2 * n, 40, RadialOrdering::kGoldenAngle));
  Recon3DOptions options;
  options.cg.iterations = 20;
  options.cg.lambda = 1e-3;
  options.cg.use_toeplitz = true;
  std::vector<Complex> image(n * n * n);
  auto r = ReconstructNonCartesian3D(Stream::Cpu(), p.problem(), options, image.data());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, Path3D::kStackOfStars);
  const double nrmse = Nrmse(image, p.truth);
  std::printf("24^3 stack of stars (40 spokes x 48 x 24 partitions), 4 coils, CG-SENSE 20 it: NRMSE %.4f\n", nrmse);
  EXPECT_LT(nrmse, 0.31);
}

TEST(Sense3D, KooshballCgSenseReachesNrmse) {
  const int64_t n = 24;
  const Phantom3D p = MakePhantom(n, *KooshballTrajectory(n, 2 * n, 600));
  const Stream cpu = Stream::Cpu();
  Recon3DOptions options;
  options.cg.iterations = 20;
  options.cg.lambda = 1e-3;
  options.cg.use_toeplitz = true;
  std::vector<Complex> image(n * n * n);
  auto r = ReconstructNonCartesian3D(cpu, p.problem(), options, image.data());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, Path3D::kNufft3D);
  const double nrmse = Nrmse(image, p.truth);
  std::printf("24^3 kooshball (600 spokes x 48), 4 coils, CG-SENSE 20 it (Toeplitz): NRMSE %.4f\n", nrmse);
  EXPECT_LT(nrmse, 0.35);
}

// The density-compensated adjoint is on the phantom's scale (volume units)
// for both kinds of weights.
TEST(Sense3D, DensityCompensatedAdjointIsOnScale) {
  const int64_t n = 16;
  for (bool stack : {true, false}) {
    const Phantom3D p = MakePhantom(n, stack ? *StackOfStarsTrajectory(n, n, 2 * n, 28, RadialOrdering::kGoldenAngle)
                                             : *KooshballTrajectory(n, 2 * n, 400));
    NonCartesian3D problem = p.problem();
    auto weights = DensityCompensation3D(problem, 2 * n);
    ASSERT_TRUE(weights.ok()) << weights.status();
    problem.density_weights = weights->data();
    Recon3DOptions options;
    options.adjoint_only = true;
    std::vector<Complex> image(n * n * n);
    auto r = ReconstructNonCartesian3D(Stream::Cpu(), problem, options, image.data());
    ASSERT_TRUE(r.ok()) << r.status();
    double dot = 0, norm = 0;  // least-squares scale of the image onto the truth
    for (size_t i = 0; i < image.size(); ++i) {
      dot += image[i].real() * p.truth[i];
      norm += double{p.truth[i]} * p.truth[i];
    }
    std::printf("%s adjoint with 3-D density compensation: scale %.3f, NRMSE %.4f\n", Path3DName(r->path),
                dot / norm, Nrmse(image, p.truth));
    EXPECT_NEAR(dot / norm, 1.0, 0.15);
    EXPECT_LT(Nrmse(image, p.truth), 0.6);
  }
  EXPECT_FALSE(DensityCompensation3D(MakePhantom(8, *KooshballTrajectory(8, 16, 10)).problem(), 15).ok());
}

TEST(Sense3D, RefusesBadProblems) {
  const Phantom3D p = MakePhantom(8, *StackOfStarsTrajectory(8, 8, 16, 4, RadialOrdering::kUniform));
  std::vector<Complex> image(8 * 8 * 8);
  NonCartesian3D bad = p.problem();
  bad.nz = 1;
  auto r = ReconstructNonCartesian3D(Stream::Cpu(), bad, {}, image.data());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  bad = p.problem();
  bad.kz = nullptr;
  EXPECT_EQ(ReconstructNonCartesian3D(Stream::Cpu(), bad, {}, image.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
