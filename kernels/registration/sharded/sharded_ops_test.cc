// Every sharded operation on H = 1..4 CPU ranks (and 37 slices over 4 ranks)
// against the unsharded kernel on the whole volume, with random non-zero
// inputs. Tolerances are stated per operation.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/parallel/parallel_test_util.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/jacobian.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/mutual_info.h"

namespace tessera {
namespace parallel {
namespace {

using testing::MaxRelError;
using testing::RandomArray;
using testing::SmoothRandomVolume;
using testing::ToVector;

struct Split {
  int ranks;
  int64_t nz;
};

class ShardedOpsTest : public ::testing::TestWithParam<Split> {
 protected:
  Dims3 dims() const { return {13, 11, GetParam().nz}; }
  SlabPartition partition() const { return SlabPartition::Make(GetParam().nz, GetParam().ranks).value(); }

  // Runs body(comm, layout) on every rank; halo = slices per inner side.
  void Run(int64_t halo, const std::function<void(Communicator&, const SlabLayout&)>& body) {
    const SlabPartition p = partition();
    const Dims3 d = dims();
    const absl::Status s = RunInProcessRanks(GetParam().ranks, [&](Communicator& comm) -> absl::Status {
      TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), halo));
      body(comm, l);
      return absl::OkStatus();
    });
    ASSERT_TRUE(s.ok()) << s;
  }
};

TEST_P(ShardedOpsTest, GaussianSmoothingEqualsUnsharded) {
  const Dims3 d = dims();
  const NDArray field = RandomArray({d.nx, d.ny, d.nz, 3}, -1.0, 2.0, 11);
  const std::array<double, 3> sigma = {1.0, 0.8, 1.5};
  NDArray expect = field.Clone().value();
  ASSERT_TRUE(registration::GaussianSmooth(field, &expect, sigma, Stream::Cpu()).ok());
  NDArray got = NDArray::Allocate(field.shape(), DType::kFloat32).value();
  Run(SmoothingHalo(sigma[2]), [&](Communicator& comm, const SlabLayout& l) {
    const Stream cpu = Stream::Cpu();
    // Halos deliberately left stale (zeros): the operation exchanges them.
    NDArray local = ExtractSlab(field, l, MemoryKind::kHost, cpu).value();
    for (int c = 0; c < 3; ++c) {
      float* base = local.data<float>() + c * l.local_voxels();
      std::fill(base, base + l.own_offset(), 0.f);
    }
    ASSERT_TRUE(ShardedGaussianSmooth(comm, l, local, sigma, cpu).ok());
    ASSERT_TRUE(InsertOwnSlices(local, l, &got, cpu).ok());
  });
  // Same taps and the same sums per voxel: within 1e-6 of max |value|.
  EXPECT_LE(MaxRelError(ToVector(got), ToVector(expect)), 1e-6);
}

TEST_P(ShardedOpsTest, GaussianSmoothingRejectsNarrowHalos) {
  if (GetParam().ranks == 1) GTEST_SKIP() << "one rank has no inner boundary";
  const Dims3 d = dims();
  const NDArray field = RandomArray({d.nx, d.ny, d.nz}, -1.0, 2.0, 12);
  Run(1, [&](Communicator& comm, const SlabLayout& l) {
    NDArray local = ExtractSlab(field, l, MemoryKind::kHost, Stream::Cpu()).value();
    const absl::Status s = ShardedGaussianSmooth(comm, l, local, {1, 1, 1.5}, Stream::Cpu());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("needs halos of 5"), std::string::npos) << s;
  });
}

TEST_P(ShardedOpsTest, MseEqualsUnsharded) {
  const Dims3 d = dims();
  const NDArray fixed = RandomArray({d.nx, d.ny, d.nz}, 0.1, 1.0, 21);
  const NDArray warped = RandomArray({d.nx, d.ny, d.nz}, 0.1, 1.0, 22);
  std::vector<float> expect_grad(d.size());
  const double expect = registration::cpu::Mse(fixed.data<float>(), warped.data<float>(), d, expect_grad.data());
  NDArray got = NDArray::Allocate(fixed.shape(), DType::kFloat32).value();
  Run(0, [&](Communicator& comm, const SlabLayout& l) {
    const Stream cpu = Stream::Cpu();
    NDArray f = ExtractSlab(fixed, l, MemoryKind::kHost, cpu).value();
    NDArray w = ExtractSlab(warped, l, MemoryKind::kHost, cpu).value();
    NDArray g = NDArray::Allocate(l.LocalShape(1), DType::kFloat32).value();
    auto loss = ShardedMse(comm, l, f, w, &g, cpu);
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_NEAR(*loss, expect, 1e-12 * std::abs(expect));  // double partial sums
    ASSERT_TRUE(InsertOwnSlices(g, l, &got, cpu).ok());
  });
  EXPECT_LE(MaxRelError(ToVector(got), expect_grad), 1e-6);  // one float rescale
}

TEST_P(ShardedOpsTest, LnccEqualsUnsharded) {
  const Dims3 d = dims();
  const NDArray fixed = SmoothRandomVolume(d, 31);
  const NDArray warped = SmoothRandomVolume(d, 32);
  for (int window : {3, 5}) {
    registration::LnccOptions options;
    options.window = window;
    std::vector<float> expect_grad(d.size());
    float expect = 0;
    ASSERT_TRUE(registration::Lncc(Stream::Cpu(), fixed.data<float>(), warped.data<float>(), d, options, &expect,
                                   expect_grad.data())
                    .ok());
    NDArray got = NDArray::Allocate(fixed.shape(), DType::kFloat32).value();
    Run(LnccHalo(window), [&](Communicator& comm, const SlabLayout& l) {
      const Stream cpu = Stream::Cpu();
      NDArray f = ExtractSlab(fixed, l, MemoryKind::kHost, cpu).value();
      NDArray w = ExtractSlab(warped, l, MemoryKind::kHost, cpu).value();
      NDArray g = NDArray::Allocate(l.LocalShape(1), DType::kFloat32).value();
      auto loss = ShardedLncc(comm, l, f, w, options, &g, cpu);
      ASSERT_TRUE(loss.ok()) << loss.status();
      // The reference keeps box sums in float between passes, we in double.
      EXPECT_NEAR(*loss, expect, 1e-5 * std::abs(expect)) << "window " << window;
      ASSERT_TRUE(InsertOwnSlices(g, l, &got, cpu).ok());
    });
    EXPECT_LE(MaxRelError(ToVector(got), expect_grad), 1e-4) << "window " << window;
  }
}

TEST_P(ShardedOpsTest, JacobianEqualsUnsharded) {
  const Dims3 d = dims();
  // Random voxel displacements of up to 0.6 voxels: some folds (det <= 0).
  const NDArray field = RandomArray({d.nx, d.ny, d.nz, 3}, -0.6, 0.6, 41);
  NDArray expect_det = NDArray::Allocate({d.nx, d.ny, d.nz}, DType::kFloat32).value();
  auto expect = registration::JacobianDeterminant(field, &expect_det, Stream::Cpu());
  ASSERT_TRUE(expect.ok()) << expect.status();
  ASSERT_GT(expect->nonpositive, 0);
  NDArray got = NDArray::Allocate(expect_det.shape(), DType::kFloat32).value();
  Run(kJacobianHalo, [&](Communicator& comm, const SlabLayout& l) {
    const Stream cpu = Stream::Cpu();
    NDArray u = ExtractSlab(field, l, MemoryKind::kHost, cpu).value();
    NDArray det = NDArray::Allocate(l.LocalShape(1), DType::kFloat32).value();
    auto summary = ShardedJacobian(comm, l, u, &det, cpu);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->voxels, expect->voxels);
    EXPECT_EQ(summary->nonpositive, expect->nonpositive);
    // The sharded summary is taken from the float det map, the kernel's from doubles.
    EXPECT_NEAR(summary->min_det, expect->min_det, 1e-6 * std::max(1.0, std::abs(expect->min_det)));
    EXPECT_NEAR(summary->max_det, expect->max_det, 1e-6 * std::max(1.0, std::abs(expect->max_det)));
    ASSERT_TRUE(InsertOwnSlices(det, l, &got, cpu).ok());
  });
  EXPECT_LE(MaxRelError(ToVector(got), ToVector(expect_det)), 1e-6);
}

TEST_P(ShardedOpsTest, NormalizedJacobianUsesTheGlobalExtent) {
  const Dims3 d = dims();
  const NDArray field = RandomArray({d.nx, d.ny, d.nz, 3}, -0.03, 0.03, 42);
  auto expect = registration::JacobianDeterminant(field, nullptr, Stream::Cpu(),
                                                  registration::DisplacementUnits::kNormalized);
  ASSERT_TRUE(expect.ok());
  Run(kJacobianHalo, [&](Communicator& comm, const SlabLayout& l) {
    NDArray u = ExtractSlab(field, l, MemoryKind::kHost, Stream::Cpu()).value();
    auto summary =
        ShardedJacobian(comm, l, u, nullptr, Stream::Cpu(), registration::DisplacementUnits::kNormalized);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_NEAR(summary->min_det, expect->min_det, 1e-5);
    EXPECT_NEAR(summary->max_det, expect->max_det, 1e-5);
  });
}

TEST_P(ShardedOpsTest, MattesMiEqualsUnshardedWithAndWithoutMask) {
  const Dims3 d = dims();
  const NDArray fixed = SmoothRandomVolume(d, 51);
  const NDArray warped = SmoothRandomVolume(d, 52);
  NDArray mask = NDArray::Allocate({d.nx, d.ny, d.nz}, DType::kUInt8).value();
  for (int64_t v = 0; v < d.size(); ++v) mask.data<uint8_t>()[v] = (v % 7) != 3;
  registration::MattesMiOptions options;
  options.bins = 16;
  options.fixed_min = 0.2f;
  options.fixed_max = 1.8f;
  options.warped_min = 0.2f;
  options.warped_max = 1.8f;
  for (const NDArray* m : {static_cast<const NDArray*>(nullptr), static_cast<const NDArray*>(&mask)}) {
    NDArray expect_grad = NDArray::Allocate(fixed.shape(), DType::kFloat32).value();
    const registration::MattesMiResult expect =
        registration::MattesMutualInformationCpu(fixed, warped, m, options, &expect_grad);
    ASSERT_GT(expect.mutual_information, 0.01);
    NDArray got = NDArray::Allocate(fixed.shape(), DType::kFloat32).value();
    Run(0, [&](Communicator& comm, const SlabLayout& l) {
      const Stream cpu = Stream::Cpu();
      NDArray f = ExtractSlab(fixed, l, MemoryKind::kHost, cpu).value();
      NDArray w = ExtractSlab(warped, l, MemoryKind::kHost, cpu).value();
      NDArray local_mask;
      if (m != nullptr) {
        local_mask = NDArray::Allocate(l.LocalShape(1), DType::kUInt8).value();
        std::copy(m->data<uint8_t>() + l.local_z0() * l.slice(),
                  m->data<uint8_t>() + (l.local_z0() + l.local_nz()) * l.slice(), local_mask.data<uint8_t>());
      }
      NDArray g = NDArray::Allocate(l.LocalShape(1), DType::kFloat32).value();
      auto r = ShardedMattesMi(comm, l, f, w, m != nullptr ? &local_mask : nullptr, options, &g, cpu);
      ASSERT_TRUE(r.ok()) << r.status();
      // Histograms in double, summed in another order: 1e-10 relative.
      EXPECT_NEAR(r->mutual_information, expect.mutual_information, 1e-10 * expect.mutual_information);
      EXPECT_NEAR(r->total_weight, expect.total_weight, 1e-9 * expect.total_weight);
      ASSERT_TRUE(InsertOwnSlices(g, l, &got, cpu).ok());
    });
    EXPECT_LE(MaxRelError(ToVector(got), ToVector(expect_grad)), 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Splits, ShardedOpsTest,
                         ::testing::Values(Split{1, 24}, Split{2, 24}, Split{3, 24}, Split{4, 24}, Split{4, 37}),
                         [](const ::testing::TestParamInfo<Split>& info) {
                           return "H" + std::to_string(info.param.ranks) + "_nz" + std::to_string(info.param.nz);
                         });

}  // namespace
}  // namespace parallel
}  // namespace tessera
