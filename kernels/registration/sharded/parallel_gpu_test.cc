// Several shards on ONE GPU: in-process ranks, each with its own CUDA stream,
// exchanging device memory. Halo exchange, AllReduce/SendRecv on device
// buffers, and the sharded smoothing / MSE / Jacobian (which run the CUDA
// kernels on the local slabs) against the unsharded CPU references. Skipped
// without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "common/status.h"
#include "common/testing/gpu_test.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/parallel/parallel_test_util.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/jacobian.h"
#include "kernels/registration/mse.h"

namespace tessera {
namespace parallel {
namespace {

using testing::MaxRelError;
using testing::RandomArray;
using testing::ToVector;

// Copies a device local array to a host one of the same shape.
absl::StatusOr<NDArray> ToHost(const NDArray& a, const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(NDArray h, a.CopyTo(MemoryKind::kHost, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return h;
}

class OneGpuShardsTest : public ::testing::TestWithParam<int> {};

TEST_P(OneGpuShardsTest, DeviceAllReduceAndRingShift) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int H = GetParam();
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, 0));
    const size_t n = 4096;
    std::vector<double> mine = ::tessera::testing::RandomUniform<double>(n, -1, 1, 200 + comm.rank());
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> d, Buffer::Allocate(MemoryKind::kDevice, n * 8, 0));
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> got, Buffer::Allocate(MemoryKind::kDevice, n * 8, 0));
    TESSERA_RETURN_IF_ERROR(CopyBytes(d->data(), MemoryKind::kDevice, mine.data(), MemoryKind::kHost, n * 8, stream));
    TESSERA_RETURN_IF_ERROR(comm.SendRecv(d->data(), n * 8, comm.next(), got->data(), n * 8, comm.previous(), stream));
    TESSERA_RETURN_IF_ERROR(comm.AllReduce(static_cast<double*>(d->data()), n, ReduceOp::kSum, stream));
    std::vector<double> sum(n), prev(n);
    TESSERA_RETURN_IF_ERROR(CopyBytes(sum.data(), MemoryKind::kHost, d->data(), MemoryKind::kDevice, n * 8, stream));
    TESSERA_RETURN_IF_ERROR(CopyBytes(prev.data(), MemoryKind::kHost, got->data(), MemoryKind::kDevice, n * 8, stream));
    EXPECT_EQ(prev, (::tessera::testing::RandomUniform<double>(n, -1, 1, 200 + comm.previous())));
    for (size_t i = 0; i < n; i += 97) {
      double acc = 0;
      for (int r = 0; r < H; ++r) acc += ::tessera::testing::RandomUniform<double>(n, -1, 1, 200 + r)[i];
      EXPECT_EQ(sum[i], acc);
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST_P(OneGpuShardsTest, SmoothingMseAndJacobianEqualUnsharded) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int H = GetParam();
  const Dims3 d{40, 36, 37};
  const NDArray field = RandomArray({d.nx, d.ny, d.nz, 3}, -0.6, 0.6, 301);
  const NDArray fixed = RandomArray({d.nx, d.ny, d.nz}, 0.1, 1.0, 302);
  const NDArray warped = RandomArray({d.nx, d.ny, d.nz}, 0.1, 1.0, 303);
  const std::array<double, 3> sigma = {1.0, 1.0, 1.0};
  NDArray smooth_expect = field.Clone().value();
  ASSERT_TRUE(registration::GaussianSmooth(field, &smooth_expect, sigma, Stream::Cpu()).ok());
  std::vector<float> mse_grad_expect(d.size());
  const double mse_expect = registration::cpu::Mse(fixed.data<float>(), warped.data<float>(), d, mse_grad_expect.data());
  NDArray det_expect = NDArray::Allocate({d.nx, d.ny, d.nz}, DType::kFloat32).value();
  const auto jac_expect = registration::JacobianDeterminant(field, &det_expect, Stream::Cpu()).value();

  NDArray smooth_got = NDArray::Allocate(field.shape(), DType::kFloat32).value();
  NDArray det_got = NDArray::Allocate(det_expect.shape(), DType::kFloat32).value();
  NDArray mse_grad_got = NDArray::Allocate(fixed.shape(), DType::kFloat32).value();
  const SlabPartition p = SlabPartition::Make(d.nz, H).value();
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, 0));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), SmoothingHalo(sigma[2])));
    TESSERA_ASSIGN_OR_RETURN(NDArray u, ExtractSlab(field, l, MemoryKind::kDevice, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray det, NDArray::Allocate(l.LocalShape(1), DType::kFloat32, MemoryKind::kDevice, 0));
    TESSERA_ASSIGN_OR_RETURN(registration::JacobianSummary js, ShardedJacobian(comm, l, u, &det, stream));
    EXPECT_EQ(js.nonpositive, jac_expect.nonpositive);
    EXPECT_NEAR(js.min_det, jac_expect.min_det, 1e-5 * std::max(1.0, std::abs(jac_expect.min_det)) + 1e-5);
    TESSERA_RETURN_IF_ERROR(ShardedGaussianSmooth(comm, l, u, sigma, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray f, ExtractSlab(fixed, l, MemoryKind::kDevice, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray w, ExtractSlab(warped, l, MemoryKind::kDevice, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray g, NDArray::Allocate(l.LocalShape(1), DType::kFloat32, MemoryKind::kDevice, 0));
    TESSERA_ASSIGN_OR_RETURN(double mse, ShardedMse(comm, l, f, w, &g, stream));
    EXPECT_NEAR(mse, mse_expect, 1e-6 * mse_expect);  // float loss per shard
    TESSERA_ASSIGN_OR_RETURN(NDArray uh, ToHost(u, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray dh, ToHost(det, stream));
    TESSERA_ASSIGN_OR_RETURN(NDArray gh, ToHost(g, stream));
    TESSERA_RETURN_IF_ERROR(InsertOwnSlices(uh, l, &smooth_got, Stream::Cpu()));
    TESSERA_RETURN_IF_ERROR(InsertOwnSlices(dh, l, &det_got, Stream::Cpu()));
    return InsertOwnSlices(gh, l, &mse_grad_got, Stream::Cpu());
  });
  ASSERT_TRUE(s.ok()) << s;
  // The kernels' own CUDA-vs-CPU tolerances (gaussian_smooth.h, jacobian.h).
  EXPECT_LE(MaxRelError(ToVector(smooth_got), ToVector(smooth_expect)), 1e-5);
  EXPECT_LE(MaxRelError(ToVector(det_got), ToVector(det_expect)), 1e-5);
  EXPECT_LE(MaxRelError(ToVector(mse_grad_got), mse_grad_expect), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Shards, OneGpuShardsTest, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace parallel
}  // namespace tessera
