// Slab partition and halo exchange on CPU ranks: the split (uneven too), the
// owner lookup, layout errors, and halos equal to the neighbours' slices.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/parallel/in_process_communicator.h"
#include "kernels/parallel/parallel_test_util.h"
#include "kernels/parallel/slab.h"

namespace tessera {
namespace parallel {
namespace {

using testing::RandomArray;

TEST(SlabPartition, UnevenSplitGivesTheFirstRanksOneSliceMore) {
  const SlabPartition p = SlabPartition::Make(37, 4).value();
  EXPECT_EQ(p.begin(0), 0);
  EXPECT_EQ(p.end(0), 10);
  EXPECT_EQ(p.end(1), 19);
  EXPECT_EQ(p.end(2), 28);
  EXPECT_EQ(p.end(3), 37);
  EXPECT_EQ(p.min_slices(), 9);
  for (int64_t z = 0; z < 37; ++z) {
    const int o = p.OwnerOf(z);
    EXPECT_GE(z, p.begin(o));
    EXPECT_LT(z, p.end(o));
  }
}

TEST(SlabPartition, RejectsMoreRanksThanSlicesAndHalosWiderThanASlab) {
  EXPECT_EQ(SlabPartition::Make(3, 4).status().code(), absl::StatusCode::kInvalidArgument);
  const SlabPartition p = SlabPartition::Make(37, 4).value();
  const absl::Status s = p.Layout({4, 4, 37}, 1, 10).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("thinnest slab"), std::string::npos) << s;
  const SlabLayout first = p.Layout({4, 4, 37}, 0, 3).value();
  EXPECT_EQ(first.halo_lo, 0);  // nothing below the volume
  EXPECT_EQ(first.halo_hi, 3);
  const SlabLayout last = p.Layout({4, 4, 37}, 3, 3).value();
  EXPECT_EQ(last.halo_hi, 0);
  EXPECT_EQ(last.local_nz(), 9 + 3);
}

struct Split {
  int ranks;
  int64_t nz;
  int64_t halo;
};

class HaloExchangeTest : public ::testing::TestWithParam<Split> {};

TEST_P(HaloExchangeTest, HalosHoldTheNeighboursSlices) {
  const Split sp = GetParam();
  const Dims3 d{7, 5, sp.nz};
  const NDArray whole = RandomArray({d.nx, d.ny, d.nz, 3}, 0.5, 1.5, 7);
  const SlabPartition p = SlabPartition::Make(d.nz, sp.ranks).value();
  const absl::Status s = RunInProcessRanks(sp.ranks, [&](Communicator& comm) -> absl::Status {
    const Stream cpu = Stream::Cpu();
    const SlabLayout l = p.Layout(d, comm.rank(), sp.halo).value();
    const NDArray expect = ExtractSlab(whole, l, MemoryKind::kHost, cpu).value();
    NDArray local = expect.Clone().value();
    // Poison the halos; the exchange must restore exactly the neighbours' slices.
    for (int c = 0; c < 3; ++c) {
      float* base = local.data<float>() + c * l.local_voxels();
      for (int64_t v = 0; v < l.own_offset(); ++v) base[v] = NAN;
      for (int64_t v = l.own_offset() + l.own_voxels(); v < l.local_voxels(); ++v) base[v] = NAN;
    }
    if (auto st = HaloExchange(comm, l, local, cpu); !st.ok()) return st;
    EXPECT_EQ(testing::ToVector(local), testing::ToVector(expect)) << l.ToString();
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(Splits, HaloExchangeTest,
                         ::testing::Values(Split{1, 9, 2}, Split{2, 16, 3}, Split{3, 16, 2}, Split{4, 24, 6},
                                           Split{4, 37, 4}));

TEST(HaloExchange, AsymmetricOverlapLayoutFillsOnlyTheSliceAbove) {
  const Dims3 d{6, 4, 11};
  const NDArray whole = RandomArray({d.nx, d.ny, d.nz}, 0.5, 1.5, 3);
  const SlabPartition p = SlabPartition::Make(d.nz, 3).value();
  const absl::Status s = RunInProcessRanks(3, [&](Communicator& comm) -> absl::Status {
    const Stream cpu = Stream::Cpu();
    const SlabLayout l = p.Layout(d, comm.rank(), 0, 1).value();
    const NDArray expect = ExtractSlab(whole, l, MemoryKind::kHost, cpu).value();
    NDArray local = expect.Clone().value();
    for (int64_t v = l.own_voxels(); v < l.local_voxels(); ++v) local.data<float>()[v] = NAN;
    if (auto st = HaloExchange(comm, l, local, cpu); !st.ok()) return st;
    EXPECT_EQ(testing::ToVector(local), testing::ToVector(expect)) << l.ToString();
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace parallel
}  // namespace tessera
