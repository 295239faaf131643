// The fixed image's blur before the deformable stage (MetricOptions::
// fixed_blur_voxels, issue 38: LNCC as MI) on the CUDA backend: a CUDA run
// logs it, and its final LNCC loss (warped vs the blurred fixed image) follows
// the CPU reference's at mixed and full precision, blurred and sharp, within
// a stated tolerance. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/testing/gpu_test.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/synthetic.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"

namespace tessera::registration {
namespace {

// Deformable only, two levels of a few iterations.
RegistrationOptions DeformableOnly(const std::string& device, Precision precision, double blur) {
  RegistrationOptions o;
  o.metric = Metric::kLncc;
  o.precision = precision;
  o.device = device;
  o.stages = {Stage::kDeformable};
  o.scales = {2, 1};
  o.deformable_iterations = {4, 4};
  o.smooth_grad_sigma = 3;
  o.metric_options.fixed_blur_voxels = blur;
  return o;
}

TEST(FixedBlurCuda, LnccLossFollowsTheCpuBlurredAndSharp) {
  TESSERA_SKIP_WITHOUT_GPU();
  const Phantom phantom = MakePhantom(40).value();
  SyntheticOptions synth;
  synth.seed = 3;
  const Volume moving = MakeSyntheticPair(phantom.image, nullptr, synth).value().moving;
  const double kBlur = MetricOptions().fixed_blur_voxels;
  for (Precision precision : {Precision::kMixed, Precision::kFull}) {
    double loss[2][2] = {{0, 0}, {0, 0}};  // [cuda][blurred]
    for (int cuda = 0; cuda < 2; ++cuda) {
      for (int blurred = 0; blurred < 2; ++blurred) {
        auto r = Register(phantom.image, moving, DeformableOnly(cuda ? "cuda" : "cpu", precision, blurred ? kBlur : 0));
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_EQ(LogHas(r->log, "fixed image blurred by sigma 0.408 voxels per level (LNCC)"), blurred == 1);
        loss[cuda][blurred] = r->final_loss;
      }
    }
    std::printf("%s: final LNCC loss cpu blurred %.6f sharp %.6f, cuda blurred %.6f sharp %.6f\n",
                OptionName(precision), loss[0][1], loss[0][0], loss[1][1], loss[1][0]);
    // Four greedy iterations of the same algorithm: CUDA and CPU differ in
    // float summation order (and fp16 rounding places) only.
    EXPECT_NEAR(loss[1][1], loss[0][1], 2e-3);
    EXPECT_NEAR(loss[1][0], loss[0][0], 2e-3);
    // The blur moves the loss on the GPU as it does on the CPU.
    EXPECT_GT(std::abs(loss[0][1] - loss[0][0]), 4e-3);
    EXPECT_GT((loss[1][1] - loss[1][0]) * (loss[0][1] - loss[0][0]), 0.0);
  }
}

}  // namespace
}  // namespace tessera::registration
