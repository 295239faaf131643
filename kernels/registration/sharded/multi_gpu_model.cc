#include "kernels/registration/sharded/multi_gpu_model.h"

#include <algorithm>
#include <cmath>

#include "common/status.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/parallel/slab.h"

namespace tessera {
namespace parallel {

absl::StatusOr<IterationTraffic> GreedyIterationTraffic(registration::Dims3 fixed, registration::Dims3 moving,
                                                        int ranks, int rank, const GreedyStepOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(SlabPartition fp, SlabPartition::Make(fixed.nz, ranks));
  TESSERA_ASSIGN_OR_RETURN(SlabLayout l, fp.Layout(fixed, rank, GreedyStepHalo(options)));
  IterationTraffic t;
  const int64_t f = static_cast<int64_t>(sizeof(float));
  // Ring: at step s (0..H-2) rank r forwards shard (r - s) mod H.
  for (int s = 0; s + 1 < ranks; ++s) {
    TESSERA_ASSIGN_OR_RETURN(SlabLayout ml, RingMovingLayout(moving, (rank - s + ranks) % ranks, ranks));
    t.ring_bytes += ml.local_voxels() * f;
  }
  const int neighbours = (rank > 0) + (rank + 1 < ranks);
  const bool lncc = options.metric == GreedyMetric::kLncc;
  const int components = (lncc ? 1 : 0) + 3 + 3 + 3;
  const int64_t slice = l.slice() * f;
  // HaloExchange sends the partition's width to each existing neighbour.
  t.halo_bytes = components * (int64_t{rank + 1 < ranks} * l.width_below + int64_t{rank > 0} * l.width_above) * slice;
  const int64_t composition = static_cast<int64_t>(std::ceil(1.6 * options.lr_voxels)) + 1;
  const int64_t minimal_slices = (lncc ? LnccHalo(options.lncc.window) : 0) + 3 * SmoothingHalo(options.smooth_grad_sigma) +
                                 3 * composition + 3 * SmoothingHalo(options.smooth_warp_sigma);
  t.halo_bytes_minimal = neighbours * minimal_slices * slice;
  // The loss all-reduces one sum per global z-slice (AllReduceSliceSums), so
  // the sharded loss adds the same slices in the same order as one rank.
  t.reduce_bytes = fixed.nz * static_cast<int64_t>(sizeof(double));
  t.neighbours = neighbours;
  t.moving_slice_bytes = moving.nx * moving.ny * f;
  // Two SendRecv per component per exchange (up and down), H - 1 ring
  // shifts, one all-reduce.
  t.messages = 2 * components + (ranks - 1) + 1;
  return t;
}

IterationTime ModelIteration(int64_t voxels_per_rank, const IterationTraffic& traffic, const ClusterModel& m) {
  const double scale = static_cast<double>(voxels_per_rank) / (512.0 * 512.0 * 512.0);
  const double bytes_per_ms = m.link_gb_per_s * 1e6;
  IterationTime t;
  t.compute_ms = m.iteration_ms_per_512cube * scale;
  t.ring_ms = traffic.ring_bytes / bytes_per_ms;
  t.ring_exposed_ms = std::max(0.0, t.ring_ms - m.sampler_ms_per_512cube * scale);
  t.halo_ms = traffic.halo_bytes / bytes_per_ms;
  t.latency_ms = traffic.messages * m.message_latency_us * 1e-3;
  t.total_ms = t.compute_ms + t.ring_exposed_ms + t.halo_ms + t.latency_ms;
  t.total_prefetched_ms = std::max(t.compute_ms, t.ring_ms) + t.halo_ms + t.latency_ms;
  // Bounded sampler: each neighbour's `reach` nearest moving slices instead
  // of every shard, and halos of the width each operation needs.
  const double bounded_ring_ms =
      traffic.neighbours * m.bounded_reach_slices * static_cast<double>(traffic.moving_slice_bytes) / bytes_per_ms;
  t.total_bounded_ms = t.compute_ms + std::max(0.0, bounded_ring_ms - m.sampler_ms_per_512cube * scale) +
                       traffic.halo_bytes_minimal / bytes_per_ms + t.latency_ms;
  return t;
}

}  // namespace parallel
}  // namespace tessera
