// Per-job device-memory accounting: DeviceMemoryTracker charged and released
// from several threads, nested trackers, and the per-thread charge scope.
// The device Buffer cases need a GPU and are skipped without one.
#include "common/buffer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "common/testing/gpu_test.h"

namespace tessera {
namespace {

TEST(DeviceMemoryTracker, TwoThreadsChargingTheirOwnTrackersDoNotMix) {
  auto a = std::make_shared<DeviceMemoryTracker>();
  auto b = std::make_shared<DeviceMemoryTracker>();
  std::atomic<int> ready{0};
  const auto work = [&ready](DeviceMemoryTracker* t, size_t unit, int rounds) {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    for (int r = 0; r < rounds; ++r) {
      t->Charge(unit);
      t->Charge(2 * unit);
      t->Release(unit);
      t->Release(2 * unit);
    }
    t->Charge(5 * unit);  // left allocated
  };
  std::thread ta(work, a.get(), 100, 20000), tb(work, b.get(), 7, 20000);
  ta.join();
  tb.join();
  EXPECT_EQ(a->current_bytes(), 500u);
  EXPECT_EQ(a->peak_bytes(), 500u);  // 300 at most while cycling, then 500
  EXPECT_EQ(b->current_bytes(), 35u);
  EXPECT_EQ(b->peak_bytes(), 35u);
}

TEST(DeviceMemoryTracker, OneTrackerChargedFromTwoThreadsSumsBoth) {
  auto t = std::make_shared<DeviceMemoryTracker>();
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&t] {
      for (int r = 0; r < 10000; ++r) {
        t->Charge(8);
        t->Release(8);
      }
      t->Charge(64);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(t->current_bytes(), 128u);
  EXPECT_GE(t->peak_bytes(), 128u);
  EXPECT_LE(t->peak_bytes(), 128u + 16u);
}

TEST(DeviceMemoryTracker, ChildChargesItsParent) {
  auto job = std::make_shared<DeviceMemoryTracker>();
  job->Charge(1000);
  {
    auto step = std::make_shared<DeviceMemoryTracker>(job);
    step->Charge(300);
    EXPECT_EQ(step->peak_bytes(), 300u);  // its own only
    EXPECT_EQ(job->current_bytes(), 1300u);
    step->Release(300);
  }
  job->Release(1000);
  EXPECT_EQ(job->current_bytes(), 0u);
  EXPECT_EQ(job->peak_bytes(), 1300u);
}

TEST(ScopedDeviceMemoryCharge, NestsAndIsPerThread) {
  auto outer = std::make_shared<DeviceMemoryTracker>();
  auto inner = std::make_shared<DeviceMemoryTracker>();
  EXPECT_EQ(CurrentDeviceMemoryTracker(), nullptr);
  {
    ScopedDeviceMemoryCharge a(outer);
    EXPECT_EQ(CurrentDeviceMemoryTracker(), outer);
    {
      ScopedDeviceMemoryCharge b(inner);
      EXPECT_EQ(CurrentDeviceMemoryTracker(), inner);
      std::shared_ptr<DeviceMemoryTracker> seen_elsewhere = outer;
      std::thread([&seen_elsewhere] { seen_elsewhere = CurrentDeviceMemoryTracker(); }).join();
      EXPECT_EQ(seen_elsewhere, nullptr);  // another thread charges nobody
    }
    EXPECT_EQ(CurrentDeviceMemoryTracker(), outer);
  }
  EXPECT_EQ(CurrentDeviceMemoryTracker(), nullptr);
}

TEST(DeviceMemoryTracker, HostBuffersAreNotCharged) {
  auto t = std::make_shared<DeviceMemoryTracker>();
  ScopedDeviceMemoryCharge charge(t);
  auto host = Buffer::Allocate(MemoryKind::kHost, 4096);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(t->peak_bytes(), 0u);
}

TEST(DeviceMemoryTrackerGpu, DeviceBuffersAreChargedToTheAllocatingThreadsTracker) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto a = std::make_shared<DeviceMemoryTracker>();
  auto b = std::make_shared<DeviceMemoryTracker>();
  std::shared_ptr<Buffer> from_a;
  std::thread ta([&] {
    ScopedDeviceMemoryCharge charge(a);
    from_a = Buffer::Allocate(MemoryKind::kDevice, 1 << 20).value();
  });
  std::thread tb([&] {
    ScopedDeviceMemoryCharge charge(b);
    auto scratch = Buffer::Allocate(MemoryKind::kDevice, 3 << 20).value();
  });
  ta.join();
  tb.join();
  EXPECT_EQ(a->current_bytes(), size_t{1} << 20);
  EXPECT_EQ(b->current_bytes(), 0u);
  EXPECT_EQ(b->peak_bytes(), size_t{3} << 20);
  from_a.reset();  // freed on this thread: still released from a
  EXPECT_EQ(a->current_bytes(), 0u);
  EXPECT_EQ(a->peak_bytes(), size_t{1} << 20);
}

}  // namespace
}  // namespace tessera
