// NCCL with one rank per visible GPU (one thread each; 1 rank on a one-GPU
// machine, which still runs the real NCCL paths: init from a unique id passed
// as bytes, all-reduce, a self ring shift, halo exchange and a sharded MSE).
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "common/status.h"
#include "common/testing/gpu_test.h"
#include "kernels/parallel/nccl_communicator.h"
#include "kernels/parallel/parallel_test_util.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/mse.h"

namespace tessera {
namespace parallel {
namespace {

TEST(NcclCommunicator, RanksOnEveryVisibleGpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int H = static_cast<int>(DeviceRegistry::Get().gpus().size());
  auto id = NcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(id->size(), kNcclUniqueIdBytes);
  const Dims3 d{32, 24, std::max<int64_t>(8, 4 * H)};
  const NDArray fixed = testing::RandomArray({d.nx, d.ny, d.nz}, 0.1, 1.0, 401);
  const NDArray warped = testing::RandomArray({d.nx, d.ny, d.nz}, 0.1, 1.0, 402);
  const double expect_mse = registration::cpu::Mse<float>(fixed.data<float>(), warped.data<float>(), d, nullptr);
  const SlabPartition p = SlabPartition::Make(d.nz, H).value();
  std::vector<absl::Status> status(H);
  std::vector<std::thread> threads;
  for (int r = 0; r < H; ++r) {
    threads.emplace_back([&, r] {
      status[r] = [&]() -> absl::Status {
        TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> comm, NcclCommunicator::Create(*id, r, H, r));
        TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, r));
        // All-reduce of rank-dependent values.
        double value = 1.5 + r;
        TESSERA_ASSIGN_OR_RETURN(double sum, AllReduceHostScalar(*comm, value, ReduceOp::kSum, stream));
        EXPECT_DOUBLE_EQ(sum, 1.5 * H + H * (H - 1) / 2.0);
        // Ring shift (to itself on one GPU).
        std::vector<float> mine = ::tessera::testing::RandomUniform<float>(1000, 0, 1, 500 + r);
        TESSERA_ASSIGN_OR_RETURN(auto a, Buffer::Allocate(MemoryKind::kDevice, 4000, r));
        TESSERA_ASSIGN_OR_RETURN(auto b, Buffer::Allocate(MemoryKind::kDevice, 4000, r));
        TESSERA_RETURN_IF_ERROR(CopyBytes(a->data(), MemoryKind::kDevice, mine.data(), MemoryKind::kHost, 4000, stream));
        TESSERA_RETURN_IF_ERROR(comm->SendRecv(a->data(), 4000, comm->next(), b->data(), 4000, comm->previous(), stream));
        std::vector<float> got(1000);
        TESSERA_RETURN_IF_ERROR(CopyBytes(got.data(), MemoryKind::kHost, b->data(), MemoryKind::kDevice, 4000, stream));
        EXPECT_EQ(got, (::tessera::testing::RandomUniform<float>(1000, 0, 1, 500 + comm->previous())));
        // Sharded MSE through NCCL.
        TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, r, 1));
        TESSERA_ASSIGN_OR_RETURN(NDArray f, ExtractSlab(fixed, l, MemoryKind::kDevice, stream));
        TESSERA_ASSIGN_OR_RETURN(NDArray w, ExtractSlab(warped, l, MemoryKind::kDevice, stream));
        TESSERA_RETURN_IF_ERROR(HaloExchange(*comm, l, w, stream));
        TESSERA_ASSIGN_OR_RETURN(double mse, ShardedMse(*comm, l, f, w, nullptr, stream));
        EXPECT_NEAR(mse, expect_mse, 1e-6 * expect_mse);
        return comm->Barrier(stream);
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < H; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
}

}  // namespace
}  // namespace parallel
}  // namespace tessera
