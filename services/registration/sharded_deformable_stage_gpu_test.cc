// Two shards of the deformable stage on ONE GPU (issue 13): each rank its own
// CUDA stream and device memory, sharing the level's moving image
// (sharded_deformable_stage.h), against shards = 1 on the same GPU. Colin27 at
// 3 mm against a known synthetic warp, metric mse (the sharded metric with a
// device kernel). Asserts mean Dice within 0.005 and a displacement rms
// difference below a tenth of a voxel (0.3 mm, as the CPU-rank test), and that
// the sharded GPU stage ran. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "common/nifti_io.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/label_metrics.h"
#include "services/registration/registrar.h"
#include "services/registration/synthetic.h"

namespace tessera::registration {
namespace {

TEST(ShardedDeformableGpu, TwoShardsOnOneGpuMatchOne) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto ch2 = ReadNifti("/usr/share/mricron/templates/ch2.nii.gz");
  auto aal = ReadNifti("/usr/share/mricron/templates/aal.nii.gz");
  ASSERT_TRUE(ch2.ok() && aal.ok()) << "mricron-data missing? " << ch2.status() << " " << aal.status();
  const Volume fixed = DownsampleImage(*ch2, 3).value();
  const Volume fixed_labels = DownsampleLabels(*aal, 3).value();
  SyntheticOptions so;
  so.seed = 3;
  const SyntheticPair pair = MakeSyntheticPair(fixed, &fixed_labels, so).value();
  RegistrationOptions o;
  o.metric = "mse";
  o.scales = {2, 1};
  o.rigid_iterations = {40, 20};
  o.affine_iterations = {40, 20};
  o.deformable_iterations = {60, 30};
  o.device = "cuda";
  double dice[2] = {0, 0};
  NDArray field[2];
  for (int i = 0; i < 2; ++i) {
    o.shards = i + 1;
    auto result = Register(fixed, pair.moving, o);
    ASSERT_TRUE(result.ok()) << result.status();
    bool sharded = false;
    for (const std::string& line : result->log) {
      sharded |= line.find("sharded over 2 gpu ranks") != std::string::npos;
      if (line.rfind("deformable", 0) == 0) std::printf("shards=%d: %s\n", o.shards, line.c_str());
    }
    EXPECT_EQ(sharded, o.shards == 2);
    auto warped = WarpLabels(*pair.moving_labels, fixed, *result, "cuda");
    ASSERT_TRUE(warped.ok()) << warped.status();
    LabelMetricsOptions lm;
    lm.hausdorff = false;
    dice[i] = ComputeLabelMetrics(fixed_labels.data, *warped, lm).value().mean_dice;
    field[i] = result->displacement_ras;
  }
  ASSERT_EQ(field[0].num_elements(), field[1].num_elements());
  double diff2 = 0, norm2 = 0;
  for (int64_t k = 0; k < field[0].num_elements(); ++k) {
    const double a = field[0].data<float>()[k], b = field[1].data<float>()[k];
    diff2 += (a - b) * (a - b);
    norm2 += a * a;
  }
  const double n = static_cast<double>(field[0].num_elements());
  const double rms_diff_mm = std::sqrt(diff2 / n);
  std::printf("mse on one GPU: Dice shards=1 %.4f, shards=2 %.4f, displacement rms %.3f mm, rms difference %.3g mm\n",
              dice[0], dice[1], std::sqrt(norm2 / n), rms_diff_mm);
  EXPECT_NEAR(dice[1], dice[0], 0.005);
  EXPECT_LT(rms_diff_mm, 0.3);  // a tenth of a 3 mm voxel
  EXPECT_GT(dice[0], 0.7);
}

}  // namespace
}  // namespace tessera::registration
