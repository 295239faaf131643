// CG-SENSE on exact (analytic, jinc) 8-coil radial k-space of the Shepp-Logan
// phantom: NRMSE against the pixel-averaged phantom falls with iterations and
// ends well below the density-compensated adjoint recon's; the operator's
// adjoint is E^H to the NUFFT tolerance; cancellation via progress; argument
// errors; the Toeplitz normal operator against the NUFFT pair. CPU backend
// (the CUDA one: cg_sense_cuda_test).
#include "kernels/reconstruction/mri/cg_sense.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "common/testing/device_array.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/density_compensation.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;

struct Problem {
  int64_t n = 64;
  int coils = 8;
  Trajectory2D trajectory;
  std::vector<Complex> maps, kspace;
  std::vector<float> truth, ramp;
  SenseGeometry geometry(bool weighted) const {
    return {n, n, coils, trajectory.size(), trajectory.kx.data(), trajectory.ky.data(), maps.data(),
            weighted ? ramp.data() : nullptr};
  }
};

const Problem& RadialPhantom() {
  static const Problem* problem = [] {
    auto* p = new Problem;
    p->trajectory = *RadialTrajectory(p->n, 2 * p->n, 48, RadialOrdering::kGoldenAngle);
    const auto series = *BirdcageSeries({p->coils, 1.5}, 4);
    p->maps = EvaluateCoilSeries(series, p->n, p->n);
    const auto phantom = SheppLogan(0.9);
    p->kspace = *PhantomCoilKspace(phantom, series, p->trajectory, p->n, p->n);
    p->truth = RasterizePhantom(phantom, p->n, p->n);
    p->ramp = *RadialRampDensity(p->trajectory);
    return p;
  }();
  return *problem;
}

double Nrmse(const std::vector<Complex>& image, const std::vector<float>& truth) {
  double num = 0, den = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    num += std::norm(image[i] - Complex(truth[i], 0));
    den += double{truth[i]} * truth[i];
  }
  return std::sqrt(num / den);
}

TEST(CgSense, BeatsAdjointAndImprovesWithIterations) {
  const Problem& p = RadialPhantom();
  const Stream cpu = Stream::Cpu();
  std::vector<Complex> adjoint(p.n * p.n);
  ASSERT_TRUE(AdjointSense(cpu, p.geometry(true), p.kspace.data(), {}, adjoint.data()).ok());
  const double adjoint_error = Nrmse(adjoint, p.truth);

  std::vector<double> errors;
  for (int iterations : {2, 6, 20}) {
    CgSenseOptions options;
    options.iterations = iterations;
    options.lambda = 1e-4;
    std::vector<Complex> image(p.n * p.n, Complex(NAN, NAN));
    auto result = CgSense(cpu, p.geometry(false), p.kspace.data(), options, image.data());
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->cg.iterations, iterations);
    errors.push_back(Nrmse(image, p.truth));
  }
  std::vector<Complex> weighted(p.n * p.n);
  CgSenseOptions options;
  options.iterations = 10;
  auto result = CgSense(cpu, p.geometry(true), p.kspace.data(), options, weighted.data());
  ASSERT_TRUE(result.ok()) << result.status();
  const double weighted_error = Nrmse(weighted, p.truth);
  std::printf("NRMSE adjoint %.4f, CG-SENSE 2/6/20 iterations %.4f %.4f %.4f, density-weighted 10 %.4f\n",
              adjoint_error, errors[0], errors[1], errors[2], weighted_error);
  EXPECT_GT(errors[0], errors[1]);
  EXPECT_GT(errors[1], errors[2]);
  EXPECT_LT(errors[2], 0.7 * adjoint_error);
  EXPECT_LT(weighted_error, 0.7 * adjoint_error);
}

TEST(CgSense, OperatorAdjointIsExactToNufftTolerance) {
  const Problem& p = RadialPhantom();
  const Stream cpu = Stream::Cpu();
  auto op = SenseOperator::Create(cpu, p.geometry(false));
  ASSERT_TRUE(op.ok()) << op.status();
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<Complex> x(p.n * p.n), y(p.kspace.size()), ex(y.size()), ehy(x.size());
  for (auto& v : x) v = Complex(dist(rng), dist(rng));
  for (auto& v : y) v = Complex(dist(rng), dist(rng));
  ASSERT_TRUE((*op)->Forward(x.data(), ex.data()).ok());
  ASSERT_TRUE((*op)->Adjoint(y.data(), ehy.data()).ok());
  std::complex<double> lhs = 0, rhs = 0;
  for (size_t j = 0; j < y.size(); ++j) lhs += std::conj(std::complex<double>(y[j])) * std::complex<double>(ex[j]);
  for (size_t i = 0; i < x.size(); ++i) rhs += std::conj(std::complex<double>(ehy[i])) * std::complex<double>(x[i]);
  EXPECT_LT(std::abs(lhs - rhs), 1e-4 * std::abs(lhs));
}

using ::tessera::testing::RelL2;

// The Toeplitz normal operator against the NUFFT pair (NUFFT tolerance 1e-5:
// within 5e-4), unweighted and density-weighted, and the CG-SENSE images.
TEST(CgSense, ToeplitzMatchesTheNufftPair) {
  const Problem& p = RadialPhantom();
  const Stream cpu = Stream::Cpu();
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<Complex> x(p.n * p.n), pair(x.size()), toeplitz(x.size(), Complex(NAN, NAN));
  for (auto& v : x) v = Complex(dist(rng), dist(rng));
  SenseOperatorOptions with_toeplitz;
  with_toeplitz.use_toeplitz = true;
  for (bool weighted : {false, true}) {
    auto a = SenseOperator::Create(cpu, p.geometry(weighted));
    auto b = SenseOperator::Create(cpu, p.geometry(weighted), with_toeplitz);
    ASSERT_TRUE(a.ok() && b.ok()) << b.status();
    ASSERT_TRUE((*a)->Normal(x.data(), pair.data()).ok());
    ASSERT_TRUE((*b)->Normal(x.data(), toeplitz.data()).ok());
    EXPECT_LT(RelL2(toeplitz, pair), 5e-4) << "weighted " << weighted;
  }
  CgSenseOptions options;
  options.iterations = 10;
  options.lambda = 1e-4;
  std::vector<Complex> image_pair(p.n * p.n), image_toeplitz(p.n * p.n);
  ASSERT_TRUE(CgSense(cpu, p.geometry(false), p.kspace.data(), options, image_pair.data()).ok());
  options.use_toeplitz = true;
  ASSERT_TRUE(CgSense(cpu, p.geometry(false), p.kspace.data(), options, image_toeplitz.data()).ok());
  // CG amplifies the operators' ~1e-4 difference along poorly sampled
  // directions (48 spokes for 64 x 64): the iterates stay within 3 % and
  // their error against the phantom within 2 % of each other.
  const double error_pair = Nrmse(image_pair, p.truth), error_toeplitz = Nrmse(image_toeplitz, p.truth);
  std::printf("CG-SENSE 10 it: NRMSE NUFFT pair %.4f, Toeplitz %.4f, images differ by %.4f\n", error_pair,
              error_toeplitz, RelL2(image_toeplitz, image_pair));
  EXPECT_LT(RelL2(image_toeplitz, image_pair), 3e-2);
  EXPECT_NEAR(error_toeplitz, error_pair, 0.02 * error_pair);
}

TEST(CgSense, ProgressCancelsAndBadArgumentsAreInvalid) {
  const Problem& p = RadialPhantom();
  const Stream cpu = Stream::Cpu();
  std::vector<Complex> image(p.n * p.n);
  CgSenseOptions options;
  options.iterations = 10;
  int calls = 0;
  options.progress = [&](int iteration, int total, double) {
    ++calls;
    EXPECT_EQ(total, 10);
    return iteration == 3 ? absl::CancelledError("stop") : absl::OkStatus();
  };
  EXPECT_EQ(CgSense(cpu, p.geometry(false), p.kspace.data(), options, image.data()).status().code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 3);

  auto code = [&](CgSenseOptions o, SenseGeometry g) {
    return CgSense(cpu, g, p.kspace.data(), o, image.data()).status().code();
  };
  CgSenseOptions bad;
  bad.iterations = 0;
  EXPECT_EQ(code(bad, p.geometry(false)), absl::StatusCode::kInvalidArgument);
  bad = {};
  bad.lambda = -1;
  EXPECT_EQ(code(bad, p.geometry(false)), absl::StatusCode::kInvalidArgument);
  SenseGeometry g = p.geometry(false);
  g.coils = 0;
  EXPECT_EQ(code({}, g), absl::StatusCode::kInvalidArgument);
  g = p.geometry(false);
  g.kx = nullptr;
  EXPECT_EQ(code({}, g), absl::StatusCode::kInvalidArgument);
  g = p.geometry(false);
  g.nx = 1;
  EXPECT_EQ(code({}, g), absl::StatusCode::kInvalidArgument);
  bad = {};
  bad.nufft.nufft_upsampling = 3.0;
  EXPECT_EQ(code(bad, p.geometry(false)), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
