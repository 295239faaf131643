// RendezvousService over an in-process gRPC server, through the client
// (JoinRendezvous): N threads as ranks all get rank 0's id; the table's
// errors arrive with their codes and messages; a call's deadline yields the
// service's DEADLINE_EXCEEDED naming the missing ranks (not gRPC's bare
// one); a cancelled call withdraws its rank.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "services/parallel/nccl_rendezvous.h"
#include "services/parallel/rendezvous_service.h"
#include "tessera/v1/rendezvous.grpc.pb.h"

namespace tessera::parallel {
namespace {

using ::testing::HasSubstr;

class RendezvousServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
  }
  void TearDown() override { server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1))); }

  static std::string RandomId(uint32_t seed) {
    std::mt19937 gen(seed);
    std::string id(kNcclUniqueIdBytes, '\0');
    for (char& c : id) c = static_cast<char>(gen() & 0xff);
    return id;
  }

  RendezvousServiceImpl service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(RendezvousServiceTest, ThreadsAsRanksAllGetRankZerosId) {
  const int n = 8;
  const std::string id = RandomId(7);
  std::vector<absl::StatusOr<std::string>> got(n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = n - 1; r >= 0; --r) {  // rank 0 last
    threads.emplace_back([&, r] {
      got[r] = JoinRendezvous(channel_, {"job-8", r, n, absl::Seconds(20)}, r == 0 ? id : "");
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(got[r].ok()) << "rank " << r << ": " << got[r].status();
    EXPECT_EQ(*got[r], id) << "rank " << r;
  }
}

TEST_F(RendezvousServiceTest, ErrorsArriveWithCodesAndMessages) {
  const auto join = [&](const RendezvousRank& who, const std::string& id) {
    return JoinRendezvous(channel_, who, id).status();
  };
  absl::Status s = join({"k", 4, 4, absl::Seconds(2)}, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rendezvous: rank 4 is outside 0..3"));
  s = join({"k", 0, 4, absl::Seconds(2)}, "short");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("128-byte NCCL unique id, got 5 bytes"));
  // A waiting rank 1 of a 2-group: world size 3 and a second rank 1 refused.
  absl::Status waiting;
  std::thread t([&] { waiting = join({"k", 1, 2, absl::Seconds(20)}, ""); });
  absl::SleepFor(absl::Milliseconds(200));
  s = join({"k", 2, 3, absl::Seconds(2)}, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("group 'k' has world_size 2, rank 2 says 3"));
  s = join({"k", 1, 2, absl::Seconds(2)}, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("rank 1 has already joined group 'k'"));
  EXPECT_TRUE(join({"k", 0, 2, absl::Seconds(20)}, RandomId(1)).ok());
  t.join();
  EXPECT_TRUE(waiting.ok()) << waiting;
}

TEST_F(RendezvousServiceTest, DeadlineNamesTheMissingRanks) {
  std::vector<absl::Status> got(2);
  std::thread zero([&] { got[0] = JoinRendezvous(channel_, {"d", 0, 4, absl::Seconds(1)}, RandomId(2)).status(); });
  std::thread two([&] { got[1] = JoinRendezvous(channel_, {"d", 2, 4, absl::Seconds(3)}, "").status(); });
  zero.join();
  two.join();
  EXPECT_EQ(got[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got[0].message(), HasSubstr("still missing ranks 1, 3 of 4"));
  EXPECT_EQ(got[1].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got[1].message(), HasSubstr("still missing ranks 0, 1, 3 of 4"));
  EXPECT_EQ(service_.table().GroupCount(), 0u);
}

TEST_F(RendezvousServiceTest, CancelledCallWithdrawsItsRank) {
  auto stub = v1::RendezvousService::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  v1::JoinRendezvousRequest request;
  request.set_group_key("cancel-me");
  request.set_world_size(2);
  request.set_rank(1);
  v1::JoinRendezvousResponse response;
  grpc::Status status;
  std::thread t([&] { status = stub->Join(&context, request, &response); });
  // Wait until the rank is in the table, then cancel the call.
  for (int i = 0; i < 200 && service_.table().GroupCount() == 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(service_.table().GroupCount(), 1u);
  context.TryCancel();
  t.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  for (int i = 0; i < 200 && service_.table().GroupCount() != 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(service_.table().GroupCount(), 0u);
  // Rank 1 may join again (it was withdrawn, not left as a duplicate).
  std::thread one([&] { EXPECT_TRUE(JoinRendezvous(channel_, {"cancel-me", 1, 2, absl::Seconds(20)}, "").ok()); });
  EXPECT_TRUE(JoinRendezvous(channel_, {"cancel-me", 0, 2, absl::Seconds(20)}, RandomId(3)).ok());
  one.join();
}

}  // namespace
}  // namespace tessera::parallel
