// The traffic formulas of multi_gpu_model.h against the bytes a
// CountingCommunicator sees in a real sharded greedy iteration on CPU ranks.
#include <gtest/gtest.h>

#include <vector>

#include "common/status.h"
#include "kernels/registration/sharded/counting_communicator.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/registration/sharded/multi_gpu_model.h"
#include "kernels/parallel/parallel_test_util.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/registration/sharded/sharded_greedy_step.h"

namespace tessera {
namespace parallel {
namespace {

TEST(MultiGpuModel, TrafficFormulasMatchTheMessagesOfARealIteration) {
  const Dims3 d{12, 10, 29}, md{14, 9, 23};
  const NDArray fixed = testing::SmoothRandomVolume(d, 81);
  const NDArray moving = testing::SmoothRandomVolume(md, 82);
  const float affine[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  for (GreedyMetric metric : {GreedyMetric::kLncc, GreedyMetric::kMse}) {
    GreedyStepOptions o;
    o.metric = metric;
    o.lncc.window = 5;
    const int H = 3;
    std::vector<TrafficCounts> counts(H);
    const SlabPartition p = SlabPartition::Make(d.nz, H).value();
    const absl::Status s = RunInProcessRanks(H, [&](Communicator& inner) -> absl::Status {
      CountingCommunicator comm(inner);
      const Stream cpu = Stream::Cpu();
      TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), GreedyStepHalo(o)));
      TESSERA_ASSIGN_OR_RETURN(SlabLayout ml, RingMovingLayout(md, comm.rank(), H));
      TESSERA_ASSIGN_OR_RETURN(NDArray f, ExtractSlab(fixed, l, MemoryKind::kHost, cpu));
      TESSERA_ASSIGN_OR_RETURN(NDArray mv, ExtractSlab(moving, ml, MemoryKind::kHost, cpu));
      TESSERA_ASSIGN_OR_RETURN(ShardedGreedyState state, MakeShardedGreedyState(l, f, ml, mv, affine));
      TESSERA_RETURN_IF_ERROR(ShardedGreedyStep(comm, state, o, cpu).status());
      counts[comm.rank()] = comm.counts();
      return absl::OkStatus();
    });
    ASSERT_TRUE(s.ok()) << s;
    for (int r = 0; r < H; ++r) {
      auto t = GreedyIterationTraffic(d, md, H, r, o);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_EQ(counts[r].bytes_sent, t->ring_bytes + t->halo_bytes) << "rank " << r;
      EXPECT_EQ(counts[r].allreduce_bytes, t->reduce_bytes) << "rank " << r;
      EXPECT_EQ(counts[r].sendrecv_calls + counts[r].allreduce_calls, t->messages) << "rank " << r;
      EXPECT_LT(t->halo_bytes_minimal, t->halo_bytes);
    }
  }
}

TEST(MultiGpuModel, TimesAddUpAndScaleWithVoxels) {
  IterationTraffic t;
  t.ring_bytes = int64_t{7} * 360'000'000;  // 7 ms at 360 GB/s
  t.halo_bytes = 360'000'000;               // 1 ms
  t.messages = 0;
  ClusterModel m;
  const IterationTime it = ModelIteration(512 * 512 * 512, t, m);
  EXPECT_NEAR(it.compute_ms, 29.0, 1e-9);
  EXPECT_NEAR(it.ring_ms, 7.0, 1e-9);
  EXPECT_NEAR(it.ring_exposed_ms, 7.0 - 2.834, 1e-9);
  EXPECT_NEAR(it.total_ms, 29.0 + 7.0 - 2.834 + 1.0, 1e-9);
  EXPECT_NEAR(it.total_prefetched_ms, 29.0 + 1.0, 1e-9);
  EXPECT_NEAR(ModelIteration(2 * 512 * 512 * 512, t, m).compute_ms, 58.0, 1e-9);
}

}  // namespace
}  // namespace parallel
}  // namespace tessera
