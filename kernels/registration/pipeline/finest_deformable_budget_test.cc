// RegistrationOptions::full_finest_deformable (issue 38): on the CPU, the
// greedy deformable stage's finest level runs at most
// kCappedFinestDeformableIterations iterations when the next coarser level
// holds at least kCapFinestDeformableCoarserVoxels voxels;
// full_finest_deformable = true, a small pyramid or a smaller budget keeps
// the budget as given.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"

namespace tessera::registration {
namespace {

// Deformable only, on the CPU; the finest level's budget is `finest`. The
// x2 level runs one iteration, the x1 level stops at once (patience 1 with
// a tolerance nothing meets), so the test reads the budget in the log line.
RegistrationOptions DeformableOnly(int finest) {
  RegistrationOptions o;
  o.metric = Metric::kMse;
  o.device = "cpu";
  o.stages = {Stage::kDeformable};
  o.scales = {2, 1};
  o.deformable_iterations = {1, finest};
  o.patience = 1;
  o.tolerance = 1e9;
  return o;
}

std::vector<std::string> Log(const ColinProblem& p, const RegistrationOptions& o) {
  auto r = Register(p.fixed, p.pair.moving, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->log : std::vector<std::string>{};
}

TEST(FinestDeformableBudget, CappedOnLargePyramidsOnly) {
  // 1 mm: the x2 level is 91x109x91 (903k voxels >= 2^18).
  const ColinProblem full = MakeColinProblem(IntensityChange::kGamma, 5, 1);
  RegistrationOptions o = DeformableOnly(100);
  EXPECT_TRUE(LogHas(Log(full, o), "deformable x1: at most 40 iterations"));
  o.full_finest_deformable = true;
  EXPECT_FALSE(LogHas(Log(full, o), "deformable x1: at most"));
  // A budget at or under the cap is left as given.
  EXPECT_FALSE(LogHas(Log(full, DeformableOnly(kCappedFinestDeformableIterations)), "deformable x1: at most"));
  // No deformable stage: nothing to cap (and no log line saying so).
  RegistrationOptions rigid = DeformableOnly(100);
  rigid.stages = {Stage::kRigid};
  rigid.rigid_iterations = {1, 1};
  EXPECT_FALSE(LogHas(Log(full, rigid), "deformable x1: at most"));
  // 2 mm: the x2 level is 46x55x46 (116k voxels): the budget stays.
  EXPECT_FALSE(LogHas(Log(MakeColinProblem(IntensityChange::kGamma, 5, 2), DeformableOnly(100)),
                      "deformable x1: at most"));
}

}  // namespace
}  // namespace tessera::registration
