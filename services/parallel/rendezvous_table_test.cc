// The rendezvous table on its own (no gRPC): ranks as threads get rank 0's
// id only once all have joined; each bad request is refused with a message
// naming the bad value; a deadline names the missing ranks and withdraws the
// rank; cancellation; completed groups expire; the group limit.
#include "services/parallel/rendezvous_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"

namespace tessera::parallel {
namespace {

using ::testing::HasSubstr;

std::string Id(char fill) { return std::string(128, fill); }

absl::Time Soon(int ms) { return absl::Now() + absl::Milliseconds(ms); }

TEST(RendezvousTable, EveryRankGetsRankZerosIdOnceAllHaveJoined) {
  RendezvousTable table;
  const int n = 6;
  std::vector<absl::StatusOr<std::string>> got(n, absl::UnknownError("not run"));
  std::atomic<int> returned{0};
  std::vector<std::thread> threads;
  // Ranks 1..n-1 first: none may return before rank 0 (and all) joined.
  for (int r = 1; r < n; ++r) {
    threads.emplace_back([&, r] {
      got[r] = table.Join({"job-1", n, r, ""}, Soon(10000));
      ++returned;
    });
  }
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(returned.load(), 0);
  got[0] = table.Join({"job-1", n, 0, Id('\x7f')}, Soon(10000));
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(got[r].ok()) << "rank " << r << ": " << got[r].status();
    EXPECT_EQ(*got[r], Id('\x7f')) << "rank " << r;
  }
  EXPECT_EQ(table.GroupCount(), 1u);  // kept until it expires
}

TEST(RendezvousTable, BadRequestsNameTheBadValue) {
  RendezvousTable table;
  auto code_and_message = [&](const RendezvousJoin& j) { return table.Join(j, Soon(50)).status(); };
  absl::Status s = code_and_message({"", 2, 0, Id('a')});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("group_key"));
  s = code_and_message({std::string("a\nb"), 2, 0, Id('a')});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not printable"));
  s = code_and_message({"k", 0, 0, Id('a')});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("world_size 0"));
  s = code_and_message({"k", 4, 4, ""});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rank 4 is outside 0..3"));
  s = code_and_message({"k", 4, -1, ""});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = code_and_message({"k", 4, 0, std::string(127, 'a')});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("128-byte NCCL unique id, got 127 bytes"));
  s = code_and_message({"k", 4, 2, Id('a')});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("only rank 0 supplies the unique id; rank 2"));
  EXPECT_EQ(table.GroupCount(), 0u);  // refused requests leave nothing behind
}

TEST(RendezvousTable, WrongWorldSizeAndDuplicateRankWhileWaiting) {
  RendezvousTable table;
  absl::StatusOr<std::string> first;
  std::thread waiter([&] { first = table.Join({"g", 3, 1, ""}, Soon(10000)); });
  absl::SleepFor(absl::Milliseconds(50));
  absl::Status s = table.Join({"g", 4, 2, ""}, Soon(50)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("group 'g' has world_size 3, rank 2 says 4"));
  s = table.Join({"g", 3, 1, ""}, Soon(50)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("rank 1 has already joined group 'g' and is waiting"));
  std::thread two([&] { EXPECT_TRUE(table.Join({"g", 3, 2, ""}, Soon(10000)).ok()); });
  ASSERT_TRUE(table.Join({"g", 3, 0, Id('z')}, Soon(10000)).ok());
  waiter.join();
  two.join();
  ASSERT_TRUE(first.ok()) << first.status();
  // A late duplicate of a completed group is refused, not a new group.
  s = table.Join({"g", 3, 2, ""}, Soon(50)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("new group key"));
}

TEST(RendezvousTable, DeadlineNamesTheMissingRanksAndWithdraws) {
  RendezvousTable table;
  absl::StatusOr<std::string> zero, two;
  std::thread t0([&] { zero = table.Join({"late", 5, 0, Id('q')}, Soon(200)); });
  std::thread t2([&] { two = table.Join({"late", 5, 2, ""}, Soon(400)); });
  t0.join();
  t2.join();
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(zero.status().message(), HasSubstr("group 'late': rank 0 waited"));
  EXPECT_THAT(zero.status().message(), HasSubstr("still missing ranks 1, 3, 4 of 5"));
  // Rank 0 withdrew first, so rank 2 misses it too.
  EXPECT_EQ(two.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(two.status().message(), HasSubstr("still missing ranks 0, 1, 3, 4 of 5"));
  EXPECT_EQ(table.GroupCount(), 0u);  // both withdrew: the group is gone
  // One missing rank is named in the singular.
  std::thread a([&] { zero = table.Join({"one", 2, 0, Id('q')}, Soon(100)); });
  a.join();
  EXPECT_THAT(zero.status().message(), HasSubstr("still missing rank 1 of 2"));
  // A withdrawn rank may join again and complete the group.
  std::thread again([&] { zero = table.Join({"one", 2, 0, Id('r')}, Soon(10000)); });
  two = table.Join({"one", 2, 1, ""}, Soon(10000));
  again.join();
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, Id('r'));
}

TEST(RendezvousTable, CancelledRankWithdrawsAndRankZerosIdGoesWithIt) {
  RendezvousTable table;
  std::atomic<bool> cancel{false};
  absl::StatusOr<std::string> zero;
  std::thread t([&] { zero = table.Join({"c", 2, 0, Id('1')}, Soon(10000), [&] { return cancel.load(); }); });
  absl::SleepFor(absl::Milliseconds(50));
  cancel = true;
  t.join();
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(zero.status().message(), HasSubstr("rank 0 of group 'c' was cancelled"));
  EXPECT_EQ(table.GroupCount(), 0u);
  // Rank 1 then waits for a new rank 0 and gets the new id, not the old.
  absl::StatusOr<std::string> one;
  std::thread t1([&] { one = table.Join({"c", 2, 1, ""}, Soon(10000)); });
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(table.Join({"c", 2, 0, Id('2')}, Soon(10000)).ok());
  t1.join();
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, Id('2'));
}

TEST(RendezvousTable, CompletedGroupsExpire) {
  RendezvousTableOptions options;
  options.completed_ttl = absl::Milliseconds(100);
  RendezvousTable table(options);
  ASSERT_TRUE(table.Join({"once", 1, 0, Id('e')}, Soon(1000)).ok());
  EXPECT_EQ(table.GroupCount(), 1u);
  EXPECT_EQ(table.Join({"once", 1, 0, Id('e')}, Soon(10)).status().code(), absl::StatusCode::kAlreadyExists);
  absl::SleepFor(absl::Milliseconds(150));
  EXPECT_EQ(table.GroupCount(), 0u);
  // After expiry the key starts a new group.
  absl::StatusOr<std::string> again = table.Join({"once", 1, 0, Id('f')}, Soon(1000));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, Id('f'));
}

TEST(RendezvousTable, RefusesGroupsBeyondTheLimit) {
  RendezvousTableOptions options;
  options.max_groups = 2;
  RendezvousTable table(options);
  ASSERT_TRUE(table.Join({"a", 1, 0, Id('a')}, Soon(1000)).ok());
  ASSERT_TRUE(table.Join({"b", 1, 0, Id('b')}, Soon(1000)).ok());
  const absl::Status s = table.Join({"c", 1, 0, Id('c')}, Soon(1000)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("group 'c' refused"));
  EXPECT_EQ(table.GroupCount(), 2u);
}

}  // namespace
}  // namespace tessera::parallel
