// Registrations running at once in one process (the scheduler's in-process
// workers) do not disturb each other: each gives exactly, bit for bit, the
// result it gives alone, with its own kernel tuning travelling in its
// options, and reports its own device-memory peak. Small synthetic phantoms;
// the CPU case always runs, the CUDA case needs a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "common/device.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {
namespace {

struct Problem {
  Volume fixed, moving;
  RegistrationOptions options;
};

Problem MakeProblem(uint64_t seed, const std::string& metric, const std::string& device) {
  Problem p;
  Phantom phantom = MakePhantom(28).value();
  SyntheticOptions synth;
  synth.seed = seed;
  p.fixed = phantom.image;
  p.moving = MakeSyntheticPair(phantom.image, nullptr, synth).value().moving;
  p.options.metric = ParseOption<Metric>(metric, "metric").value();
  p.options.scales = {2, 1};
  p.options.rigid_iterations = {15, 8};
  p.options.affine_iterations = {15, 8};
  p.options.deformable_iterations = {20, 10};
  p.options.device = device;
  return p;
}

bool SameBytes(const NDArray& a, const NDArray& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

void ExpectIdentical(const RegistrationResult& alone, const RegistrationResult& together) {
  EXPECT_EQ(alone.affine_ras, together.affine_ras);
  EXPECT_EQ(alone.initial_loss, together.initial_loss);
  EXPECT_EQ(alone.final_loss, together.final_loss);
  EXPECT_TRUE(SameBytes(alone.warped.data, together.warped.data)) << "warped image differs";
  EXPECT_TRUE(SameBytes(alone.displacement_ras, together.displacement_ras)) << "displacement differs";
  EXPECT_EQ(alone.jacobian.min_det, together.jacobian.min_det);
  EXPECT_EQ(alone.jacobian.nonpositive, together.jacobian.nonpositive);
  EXPECT_EQ(alone.peak_device_bytes, together.peak_device_bytes);  // per job, not process-wide
}

// Two different problems with different options (metric, sampler tuning),
// each run alone and then both at once in two threads.
void RunAloneAndTogether(const std::string& device) {
  Problem a = MakeProblem(5, "lncc", device);
  Problem b = MakeProblem(9, "mse", device);
  // Different launch shapes and index widths (bit-identical by contract; the
  // CPU reference ignores them): nothing of one job's tuning leaks into the other.
  b.options.sampler.forward_z = 2;
  b.options.sampler.block_x = 128;
  b.options.sampler.backward_unroll = 4;
  b.options.sampler.force_64bit_index = true;

  absl::StatusOr<RegistrationResult> a_alone = Register(a.fixed, a.moving, a.options);
  absl::StatusOr<RegistrationResult> b_alone = Register(b.fixed, b.moving, b.options);
  ASSERT_TRUE(a_alone.ok()) << a_alone.status();
  ASSERT_TRUE(b_alone.ok()) << b_alone.status();
  EXPECT_LT(a_alone->final_loss, a_alone->initial_loss);
  EXPECT_LT(b_alone->final_loss, b_alone->initial_loss);

  absl::StatusOr<RegistrationResult> a_together, b_together;
  std::thread ta([&] { a_together = Register(a.fixed, a.moving, a.options); });
  std::thread tb([&] { b_together = Register(b.fixed, b.moving, b.options); });
  ta.join();
  tb.join();
  ASSERT_TRUE(a_together.ok()) << a_together.status();
  ASSERT_TRUE(b_together.ok()) << b_together.status();
  {
    SCOPED_TRACE("lncc job");
    ExpectIdentical(*a_alone, *a_together);
  }
  {
    SCOPED_TRACE("mse job");
    ExpectIdentical(*b_alone, *b_together);
  }
}

TEST(RegistrarConcurrency, CpuJobsAtOnceGiveTheirResultsAlone) {
  RunAloneAndTogether("cpu");
}

TEST(RegistrarConcurrency, CudaJobsAtOnceGiveTheirResultsAloneAndTheirOwnPeaks) {
  TESSERA_SKIP_WITHOUT_GPU();
  RunAloneAndTogether("cuda");
}

TEST(RegistrarConcurrency, CpuJobsUseNoDeviceMemory) {
  Problem p = MakeProblem(3, "mse", "cpu");
  p.options.stages = {Stage::kRigid};
  absl::StatusOr<RegistrationResult> r = Register(p.fixed, p.moving, p.options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->peak_device_bytes, 0u);
  EXPECT_EQ(r->backend, "cpu");
}

TEST(RegistrarConcurrency, RejectsAnUnsupportedSamplerTuning) {
  Problem p = MakeProblem(3, "mse", "cpu");
  p.options.sampler.block_x = 48;
  absl::StatusOr<RegistrationResult> r = Register(p.fixed, p.moving, p.options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("block_x"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace tessera::registration
