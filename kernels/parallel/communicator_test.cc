// The in-process communicator on CPU ranks: AllReduce (sum/min/max, float and
// double, deterministic rank order), SendRecv ring shifts and open chains,
// Barrier, size mismatches, and a failing rank that must not hang the rest.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "common/testing/device_array.h"
#include "kernels/parallel/communicator.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/parallel/nccl_communicator.h"

namespace tessera {
namespace parallel {
namespace {

std::vector<double> RankValues(int rank, size_t n) {
  return ::tessera::testing::RandomUniform<double>(n, -3.0, 5.0, 100 + rank);
}

class CommunicatorTest : public ::testing::TestWithParam<int> {};

TEST_P(CommunicatorTest, AllReduceSumsInRankOrderOnEveryRank) {
  const int H = GetParam();
  const size_t n = 1000;
  // Expected: the sum over ranks in rank order, in double.
  std::vector<double> expect(n, 0.0);
  std::vector<float> expect_f(n);
  std::vector<double> mins(n, 1e300), maxs(n, -1e300);
  for (int r = 0; r < H; ++r) {
    const std::vector<double> v = RankValues(r, n);
    for (size_t i = 0; i < n; ++i) {
      expect[i] += v[i];
      mins[i] = std::min(mins[i], v[i]);
      maxs[i] = std::max(maxs[i], v[i]);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    double acc = 0;
    for (int r = 0; r < H; ++r) acc += static_cast<double>(static_cast<float>(RankValues(r, n)[i]));
    expect_f[i] = static_cast<float>(acc);
  }
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    const Stream cpu = Stream::Cpu();
    std::vector<double> d = RankValues(comm.rank(), n);
    std::vector<float> f(d.begin(), d.end());
    std::vector<double> lo = d, hi = d;
    if (auto st = comm.AllReduce(d.data(), n, ReduceOp::kSum, cpu); !st.ok()) return st;
    if (auto st = comm.AllReduce(f.data(), n, ReduceOp::kSum, cpu); !st.ok()) return st;
    if (auto st = comm.AllReduce(lo.data(), n, ReduceOp::kMin, cpu); !st.ok()) return st;
    if (auto st = comm.AllReduce(hi.data(), n, ReduceOp::kMax, cpu); !st.ok()) return st;
    for (size_t i = 0; i < n; ++i) {
      // Fixed order: exactly the same bits as the sequential sum.
      EXPECT_EQ(d[i], expect[i]) << "rank " << comm.rank() << " element " << i;
      EXPECT_EQ(f[i], expect_f[i]) << "rank " << comm.rank() << " element " << i;
      EXPECT_EQ(lo[i], mins[i]);
      EXPECT_EQ(hi[i], maxs[i]);
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST_P(CommunicatorTest, RingShiftDeliversThePreviousRanksBuffer) {
  const int H = GetParam();
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    const Stream cpu = Stream::Cpu();
    // Uneven sizes: rank r sends 100 + 7 r floats.
    auto size_of = [](int r) { return static_cast<size_t>(100 + 7 * r); };
    for (int round = 0; round < 3; ++round) {
      std::vector<float> mine = ::tessera::testing::RandomUniform<float>(size_of(comm.rank()), 1, 2, 10 * round + comm.rank());
      std::vector<float> got(size_of(comm.previous()), -1.f);
      if (auto st = comm.SendRecv(mine.data(), mine.size() * 4, comm.next(), got.data(), got.size() * 4,
                                  comm.previous(), cpu);
          !st.ok()) {
        return st;
      }
      EXPECT_EQ(got, (::tessera::testing::RandomUniform<float>(size_of(comm.previous()), 1, 2,
                                                                10 * round + comm.previous())))
          << "rank " << comm.rank() << " round " << round;
    }
    return comm.Barrier(cpu);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST_P(CommunicatorTest, OpenChainShiftLeavesTheEndsAlone) {
  const int H = GetParam();
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    const int r = comm.rank();
    const int up = r + 1 < H ? r + 1 : kNoPeer, down = r > 0 ? r - 1 : kNoPeer;
    std::vector<double> mine(5, 10.0 + r), got(5, -1.0);
    if (auto st = comm.SendRecv(mine.data(), up != kNoPeer ? 40 : 0, up, got.data(), down != kNoPeer ? 40 : 0, down,
                                Stream::Cpu());
        !st.ok()) {
      return st;
    }
    EXPECT_EQ(got, std::vector<double>(5, r == 0 ? -1.0 : 9.0 + r)) << "rank " << r;
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommunicatorTest, ::testing::Values(1, 2, 3, 4));

TEST(InProcessCommunicator, SizeMismatchIsAnErrorOnBothSides) {
  const absl::Status s = RunInProcessRanks(2, [&](Communicator& comm) -> absl::Status {
    std::vector<float> buf(10, 1.f), got(10);
    const size_t recv = comm.rank() == 0 ? 40 : 36;  // rank 1 expects fewer bytes than rank 0 sends
    return comm.SendRecv(buf.data(), 40, comm.next(), got.data(), recv, comm.previous(), Stream::Cpu());
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("expects 36"), std::string::npos) << s;
}

TEST(InProcessCommunicator, AFailingRankAbortsTheOthersInsteadOfHanging) {
  std::atomic<int> returned{0};
  const absl::Status s = RunInProcessRanks(3, [&](Communicator& comm) -> absl::Status {
    if (comm.rank() == 1) return absl::InternalError("disk on fire");
    double x = 1;
    absl::Status st = comm.AllReduce(&x, 1, ReduceOp::kSum, Stream::Cpu());
    ++returned;
    return st;
  });
  EXPECT_EQ(returned.load(), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("rank 1: disk on fire"), std::string::npos) << s;
}

TEST(InProcessCommunicator, BadPeerIsInvalidArgument) {
  auto group = std::make_shared<InProcessGroup>(2);
  InProcessCommunicator comm(group, 0);
  float x = 0;
  const absl::Status s = comm.SendRecv(&x, 4, 5, nullptr, 0, kNoPeer, Stream::Cpu());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rank 5"), std::string::npos) << s;
}

TEST(InProcessCommunicator, TimeoutWhenAPeerNeverArrives) {
  auto group = std::make_shared<InProcessGroup>(2, absl::Milliseconds(50));
  InProcessCommunicator comm(group, 0);
  const absl::Status s = comm.Barrier(Stream::Cpu());
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

TEST(NcclCommunicator, RejectsBadArgumentsBeforeTouchingNccl) {
  // Wrong id size is checked first in CUDA builds; without CUDA it is
  // FAILED_PRECONDITION. Either way never OK and never a crash.
  auto c = NcclCommunicator::Create("short", 0, 1, 0);
  EXPECT_FALSE(c.ok());
}

}  // namespace
}  // namespace parallel
}  // namespace tessera
