// World size 1 through the several-processes path (issue 13) on the GPU: the
// NCCL communicator made through the rendezvous (in-process gRPC server)
// drives Register's sharded greedy stage as this process's one rank
// (RegistrationOptions::process_group, what `tessera register --rank 0
// --world-size 1` runs), against the normal single-rank run (shards = 1, the
// same full precision) on a labelled phantom with a known synthetic warp.
// Asserts that the process-rank stage ran, mean Dice within 0.005 and a
// displacement rms difference below a tenth of a voxel (0.2 mm); prints both.
// Skipped without a GPU.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/label_metrics.h"
#include "services/parallel/nccl_rendezvous.h"
#include "services/parallel/rendezvous_service.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {
namespace {

double MeanDice(const Volume& fixed_labels, const Volume& moving_labels, const Volume& fixed,
                const RegistrationResult& result) {
  auto warped = WarpLabels(moving_labels, fixed, result, "cuda");
  EXPECT_TRUE(warped.ok()) << warped.status();
  if (!warped.ok()) return 0;
  LabelMetricsOptions lm;
  lm.hausdorff = false;
  return ComputeLabelMetrics(fixed_labels.data, *warped, lm).value().mean_dice;
}

TEST(ProcessRankRegistration, WorldSizeOneEqualsSingleRankOnTheGpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  constexpr double kVoxelMm = 2;
  const Phantom ph = MakePhantom(64, kVoxelMm).value();
  SyntheticOptions so;
  so.seed = 5;
  const SyntheticPair pair = MakeSyntheticPair(ph.image, &ph.labels, so).value();
  RegistrationOptions o;
  o.device = "cuda";
  o.precision = Precision::kFull;  // what the sharded stage runs
  o.scales = {2, 1};
  o.rigid_iterations = {40, 20};
  o.affine_iterations = {40, 20};
  o.deformable_iterations = {60, 30};
  auto single = Register(ph.image, pair.moving, o);
  ASSERT_TRUE(single.ok()) << single.status();

  RendezvousServiceImpl service;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto comm = parallel::CreateNcclCommunicatorByRendezvous(server->InProcessChannel(grpc::ChannelArguments()),
                                                           {"process-rank-test", 0, 1, absl::Seconds(30)}, 0);
  ASSERT_TRUE(comm.ok()) << comm.status();
  RegistrationOptions ranked = o;
  ranked.process_group = std::shared_ptr<parallel::Communicator>(std::move(*comm));
  auto one = Register(ph.image, pair.moving, ranked);
  ASSERT_TRUE(one.ok()) << one.status();
  std::string log;
  for (const std::string& line : one->log) log += line + "\n";
  EXPECT_NE(log.find("sharded over 1 process gpu ranks"), std::string::npos) << log;

  const NDArray& a = single->displacement_ras;
  const NDArray& b = one->displacement_ras;
  ASSERT_EQ(a.num_elements(), b.num_elements());
  double diff2 = 0, norm2 = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    diff2 += (x - y) * (x - y);
    norm2 += x * x;
  }
  const double rms = std::sqrt(norm2 / a.num_elements()), rms_diff = std::sqrt(diff2 / a.num_elements());
  const double dice_single = MeanDice(ph.labels, *pair.moving_labels, ph.image, *single);
  const double dice_one = MeanDice(ph.labels, *pair.moving_labels, ph.image, *one);
  std::string single_log;
  for (const std::string& line : single->log) single_log += line + "\n";
  int64_t differ = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) differ += a.data<float>()[i] != b.data<float>()[i];
  std::printf("world size 1 vs shards=1 on the GPU: Dice %.4f vs %.4f, displacement rms %.4f mm, rms difference "
              "%.3g mm, %lld of %lld field values differ\nworld size 1:\n%sshards=1:\n%s",
              dice_one, dice_single, rms, rms_diff, static_cast<long long>(differ),
              static_cast<long long>(a.num_elements()), log.c_str(), single_log.c_str());
  EXPECT_NEAR(dice_one, dice_single, 0.005);
  EXPECT_LT(rms_diff, 0.1 * kVoxelMm);
  EXPECT_GT(rms, 0.1);  // a deformation happened at all
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
}

}  // namespace
}  // namespace tessera::registration
