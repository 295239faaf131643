// SART, OS-SART and CGLS through the distance-driven projector on data from
// exact line integrals of an analytic phantom (not from DdProjector, so no
// inverse crime): RMSE inside the object, parallel, fan and cone beams.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/reconstruction/ct/dd_projector.h"
#include "kernels/reconstruction/fbp/analytic_phantom.h"
#include "kernels/reconstruction/solvers/cgls.h"
#include "kernels/reconstruction/solvers/sart.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace {

using ::tessera::recon::testing::AnalyticSinogram;
using ::tessera::recon::testing::Ellipsoid;
using ::tessera::recon::testing::MaskedRmse;
using ::tessera::recon::testing::PhantomVolume;

constexpr double kPi = 3.14159265358979323846;

const std::vector<Ellipsoid> kPhantom = {
    {{0, 0, 0}, {22, 22, 18}, 0, 1.0},
    {{6, -4, 3}, {7, 11, 6}, 0.4, 0.5},
};

// Voxels 2 mm inside the outer ellipsoid and 2 mm from the inner one's edge.
std::vector<bool> InteriorMask(const VolumeGeometry& vol) {
  std::vector<Ellipsoid> shrunk = kPhantom, grown = kPhantom;
  for (size_t e = 0; e < kPhantom.size(); ++e) {
    for (double* a : {&shrunk[e].semi_axes.x, &shrunk[e].semi_axes.y, &shrunk[e].semi_axes.z}) *a -= 2;
    for (double* a : {&grown[e].semi_axes.x, &grown[e].semi_axes.y, &grown[e].semi_axes.z}) *a += 2;
  }
  const std::vector<float> in = PhantomVolume(vol, shrunk), out = PhantomVolume(vol, grown),
                           outer = PhantomVolume(vol, {shrunk[0]});
  std::vector<bool> mask(in.size());
  for (size_t i = 0; i < in.size(); ++i) mask[i] = in[i] == out[i] && outer[i] > 0;
  return mask;
}

struct Result {
  double sart, os_sart, cgls;
};

Result ReconstructAll(const CtGeometry& g, int subsets) {
  const std::vector<float> y = AnalyticSinogram(g.projection, kPhantom);
  const std::vector<float> truth = PhantomVolume(g.volume, kPhantom);
  const std::vector<bool> mask = InteriorMask(g.volume);
  const Stream cpu = Stream::Cpu();
  Result r{};
  {
    auto op = ct::DdProjector::Create(g, cpu);
    EXPECT_TRUE(op.ok()) << op.status();
    std::vector<float> x(g.volume.size(), 0.0f);
    SolverOptions o;
    o.iterations = 40;
    o.non_negative = true;
    auto rep = Sart(**op, y.data(), x.data(), o);
    EXPECT_TRUE(rep.ok()) << rep.status();
    r.sart = MaskedRmse(x, truth, mask);
  }
  {
    ct::DdProjectorOptions po;
    po.num_subsets = subsets;
    auto op = ct::DdProjector::Create(g, cpu, po);
    EXPECT_TRUE(op.ok()) << op.status();
    std::vector<float> x(g.volume.size(), 0.0f);
    SolverOptions o;
    o.iterations = 6;
    o.subsets = subsets;
    o.non_negative = true;
    auto rep = Sart(**op, y.data(), x.data(), o);
    EXPECT_TRUE(rep.ok()) << rep.status();
    r.os_sart = MaskedRmse(x, truth, mask);
  }
  {
    auto op = ct::DdProjector::Create(g, cpu);
    EXPECT_TRUE(op.ok()) << op.status();
    std::vector<float> x(g.volume.size(), 0.0f);
    SolverOptions o;
    o.iterations = 20;
    auto rep = Cgls(**op, y.data(), x.data(), o);
    EXPECT_TRUE(rep.ok()) << rep.status();
    r.cgls = MaskedRmse(x, truth, mask);
  }
  return r;
}

TEST(DdReconstructionTest, ParallelBeam) {
  const CtGeometry g{CenteredVolume(64, 64), ParallelBeam2D(EvenAngles(90, kPi), 1.0, 92)};
  const Result r = ReconstructAll(g, 10);
  EXPECT_LT(r.sart, 0.02);     // measured 0.0128
  EXPECT_LT(r.os_sart, 0.015);  // 0.0093
  EXPECT_LT(r.cgls, 0.04);      // 0.0273 (unconstrained, unregularised: edge ringing)
}

TEST(DdReconstructionTest, FanBeam) {
  const CtGeometry g{CenteredVolume(64, 64), FanBeam2D(EvenAngles(120, 2 * kPi), 1.5, 96, 150, 100)};
  const Result r = ReconstructAll(g, 12);
  EXPECT_LT(r.sart, 0.02);     // measured 0.0124
  EXPECT_LT(r.os_sart, 0.015);  // 0.0082
  EXPECT_LT(r.cgls, 0.035);     // 0.0225
}

// 2 mm voxels keep the 3-D case fast on two cores.
TEST(DdReconstructionTest, ConeBeam) {
  VolumeGeometry vol = CenteredVolume(24, 24, 20);
  for (double* e : {&vol.min_x, &vol.max_x, &vol.min_y, &vol.max_y, &vol.min_z, &vol.max_z}) *e *= 2;
  const CtGeometry g{vol, ConeBeam(EvenAngles(60, 2 * kPi), 3.0, 3.0, 28, 36, 150, 75)};
  const Result r = ReconstructAll(g, 6);
  EXPECT_LT(r.sart, 0.03);     // measured 0.0199
  EXPECT_LT(r.os_sart, 0.03);  // 0.0197
  EXPECT_LT(r.cgls, 0.06);     // 0.0416
}

}  // namespace
}  // namespace solvers
}  // namespace recon
}  // namespace tessera
