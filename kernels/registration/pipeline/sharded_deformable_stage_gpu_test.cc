// Two shards of the deformable stage on ONE GPU (issue 13): each rank its own
// CUDA stream and device memory, sharing the level's moving image
// (sharded_deformable_stage.h), against shards = 1 (the unsharded lean stage)
// on the same GPU. Colin27 at 3 mm against a known synthetic warp, for each
// metric with a sharded device path: mse, lncc (sharded_lncc.cc) and mi
// (sharded_mi.cc). Asserts mean Dice within 0.005 and a displacement rms
// difference below a tenth of a voxel (0.3 mm, as the CPU-rank test), and that
// the sharded GPU stage ran; prints both Dice values and the rms difference.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <string>

#include "common/nifti_io.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/label_metrics.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/sharded_deformable_stage.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {
namespace {

class ShardedDeformableGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(ShardedDeformableGpu, TwoShardsOnOneGpuMatchOne) {
  TESSERA_SKIP_WITHOUT_GPU();
  const std::string metric = GetParam();
  auto ch2 = ReadNifti("/usr/share/mricron/templates/ch2.nii.gz");
  auto aal = ReadNifti("/usr/share/mricron/templates/aal.nii.gz");
  ASSERT_TRUE(ch2.ok() && aal.ok()) << "mricron-data missing? " << ch2.status() << " " << aal.status();
  const Volume fixed = DownsampleImage(*ch2, 3).value();
  const Volume fixed_labels = DownsampleLabels(*aal, 3).value();
  SyntheticOptions so;
  so.seed = 3;
  const SyntheticPair pair = MakeSyntheticPair(fixed, &fixed_labels, so).value();
  RegistrationOptions o;
  o.metric = ParseOption<Metric>(metric, "metric").value();
  o.scales = {2, 1};
  o.rigid_iterations = {40, 20};
  o.affine_iterations = {40, 20};
  o.deformable_iterations = {60, 30};
  o.device = "cuda";
  // The sharded stage does not jitter the sampling grid (metric.h): off, so
  // both runs are the same algorithm.
  o.metric_options.mi_grid_jitter = false;
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
    EXPECT_EQ(sharded, o.shards == 2) << metric << ": the sharded GPU stage did not run (or ran unasked)";
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
  std::printf("%s on one GPU: Dice shards=1 %.4f, shards=2 %.4f, displacement rms %.3f mm, rms difference %.3g mm\n",
              metric.c_str(), dice[0], dice[1], std::sqrt(norm2 / n), rms_diff_mm);
  EXPECT_NEAR(dice[1], dice[0], 0.005) << metric << ": sharded Dice vs unsharded";
  EXPECT_LT(rms_diff_mm, 0.3) << metric << ": displacement rms difference, a tenth of a 3 mm voxel";
  EXPECT_GT(dice[0], 0.7) << metric << ": the unsharded registration itself failed";
}

// Issue 39: LNCC, MSE and MI (with its default jittered sampling grid) with
// --shards 1..4 on one GPU give the unsharded CUDA stage's field bit for bit
// (per-slice sums on the device, MI's histogram in exact fixed point, the
// samplers on the whole grid's slices).
TEST_P(ShardedDeformableGpu, ShardsOneToFourOnOneGpuBitIdentical) {
  TESSERA_SKIP_WITHOUT_GPU();
  const std::string metric = GetParam();
  auto ch2 = ReadNifti("/usr/share/mricron/templates/ch2.nii.gz");
  auto aal = ReadNifti("/usr/share/mricron/templates/aal.nii.gz");
  ASSERT_TRUE(ch2.ok() && aal.ok()) << "mricron-data missing? " << ch2.status() << " " << aal.status();
  const Volume fixed = DownsampleImage(*ch2, 3).value();
  const Volume fixed_labels = DownsampleLabels(*aal, 3).value();
  SyntheticOptions so;
  so.seed = 3;
  const SyntheticPair pair = MakeSyntheticPair(fixed, &fixed_labels, so).value();
  RegistrationOptions o;
  o.metric = ParseOption<Metric>(metric, "metric").value();
  o.scales = {1};
  o.rigid_iterations = {20};
  o.affine_iterations = {20};
  o.deformable_iterations = {40};
  o.device = "cuda";
  o.precision = Precision::kFull;  // shards = 1 would run LNCC's fp16 stage, another algorithm
  NDArray field[4];
  for (int i = 0; i < 4; ++i) {
    o.shards = i + 1;
    auto result = Register(fixed, pair.moving, o);
    ASSERT_TRUE(result.ok()) << result.status();
    for (const std::string& line : result->log) {
      if (line.rfind("deformable", 0) == 0) std::printf("%s shards=%d: %s\n", metric.c_str(), o.shards, line.c_str());
    }
    field[i] = result->displacement_ras;
  }
  for (int i = 1; i < 4; ++i) {
    ASSERT_EQ(field[i].nbytes(), field[0].nbytes());
    int64_t differ = 0;
    for (int64_t k = 0; k < field[0].num_elements(); ++k) {
      differ += std::memcmp(field[i].data<float>() + k, field[0].data<float>() + k, sizeof(float)) != 0;
    }
    std::printf("%s shards=%d: %lld of %lld field values differ from shards=1\n", metric.c_str(), i + 1,
                static_cast<long long>(differ), static_cast<long long>(field[0].num_elements()));
    EXPECT_EQ(differ, 0) << metric << ": shards=" << i + 1 << " vs shards=1";
  }
}

INSTANTIATE_TEST_SUITE_P(Metrics, ShardedDeformableGpu, ::testing::Values("mse", "lncc", "mi"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(ShardedDeformableGpuRing, RanksOnOneGpuShareTheMovingImage) {
  TESSERA_SKIP_WITHOUT_GPU();
  const Stream gpu = Stream::Create(Backend::kCuda, 0).value();
  RegistrationOptions o;
  EXPECT_FALSE(RingMovesTheImage(o, gpu, 4));
  o.gpus = {0, 0};
  EXPECT_FALSE(RingMovesTheImage(o, gpu, 4));
  EXPECT_TRUE(RingMovesTheImage(o, Stream::Cpu(), 4));
  o.gpus = {0, 1};  // not run here: names the decision only
  EXPECT_TRUE(RingMovesTheImage(o, gpu, 2));
  EXPECT_FALSE(RingMovesTheImage(o, gpu, 1));
}

}  // namespace
}  // namespace tessera::registration
