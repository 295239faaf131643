// RegistrationOptions::dense_finest_linear (issue 38): on the CPU, rigid and
// affine skip the finest level for lncc when the next coarser level holds at
// least kSkipFinestLinearCoarserVoxels voxels; dense_finest_linear = true,
// a pointwise metric (sampled) or a small pyramid keeps it.
#include <gtest/gtest.h>

#include <string>

#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"

namespace tessera::registration {
namespace {

// Rigid only, two iterations a level, on the CPU.
RegistrationOptions RigidOnly(Metric metric) {
  RegistrationOptions o;
  o.metric = metric;
  o.device = "cpu";
  o.stages = {Stage::kRigid};
  o.scales = {2, 1};
  o.rigid_iterations = {2, 2};
  return o;
}

std::vector<std::string> Log(const ColinProblem& p, const RegistrationOptions& o) {
  auto r = Register(p.fixed, p.pair.moving, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->log : std::vector<std::string>{};
}

TEST(LinearFinestLevel, SkippedForLnccOnLargePyramidsOnly) {
  // 1 mm: the x2 level is 91x109x91 (903k voxels >= 2^18).
  const ColinProblem full = MakeColinProblem(IntensityChange::kGamma, 5, 1);
  RegistrationOptions o = RigidOnly(Metric::kLncc);
  std::vector<std::string> log = Log(full, o);
  EXPECT_TRUE(LogHas(log, "rigid x2: 2 iterations"));
  EXPECT_TRUE(LogHas(log, "rigid x1: skipped (lncc on the CPU"));
  o.dense_finest_linear = true;
  log = Log(full, o);
  EXPECT_TRUE(LogHas(log, "rigid x1: 2 iterations"));
  // MI is sampled (linear_samples): its finest level stays.
  log = Log(full, RigidOnly(Metric::kMi));
  EXPECT_TRUE(LogHas(log, "rigid x1: 2 iterations of 8192 samples"));
  // 2 mm: the x2 level is 46x55x46 (116k voxels): kept.
  log = Log(MakeColinProblem(IntensityChange::kGamma, 5, 2), RigidOnly(Metric::kLncc));
  EXPECT_TRUE(LogHas(log, "rigid x1: 2 iterations"));
}

}  // namespace
}  // namespace tessera::registration
