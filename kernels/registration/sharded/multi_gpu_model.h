// A model of one greedy deformable iteration (sharded_greedy_step.h) on H
// GPUs: bytes each rank sends per iteration, derived from the message sizes
// this implementation uses (checked against a CountingCommunicator on a real
// sharded iteration in multi_gpu_model_test.cc), and the expected time from
// measured single-GPU kernel times scaled by voxels per rank.
//
// Traffic of rank r per iteration (slice = nx * ny * 4 bytes, W = the
// layout's halo, GreedyStepHalo; every HaloExchange moves the full W):
//   ring sampler   sum over the H - 1 shards it forwards of (own slices + 1) * moving slice
//   halos          W slices per component per existing neighbour, for
//                  warped (LNCC only, 1 component), dL/du (3), u before the
//                  composition (3) and u before the warp smoothing (3)
//   reductions     one double (the loss)
// The printed tables (bench/multi_gpu_model.cc, docs/multi_gpu_model.md)
// also show what two planned changes would save: exchanging only the width
// each operation needs, and a bounded sampler that fetches only the moving
// slices its points can reach instead of the whole ring.
#ifndef TESSERA_KERNELS_REGISTRATION_SHARDED_MULTI_GPU_MODEL_H_
#define TESSERA_KERNELS_REGISTRATION_SHARDED_MULTI_GPU_MODEL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/registration/sharded/sharded_greedy_step.h"
#include "kernels/registration/types.h"

namespace tessera {
namespace parallel {

struct IterationTraffic {
  int64_t ring_bytes = 0;          // moving shards forwarded
  int64_t halo_bytes = 0;          // halo slices sent, as implemented (full W every exchange)
  int64_t halo_bytes_minimal = 0;  // each exchange with only the width its operation needs
  int64_t reduce_bytes = 0;        // the loss's per-slice sums (nz doubles)
  int64_t messages = 0;            // SendRecv calls + all-reduces (latency count)
  int neighbours = 0;              // ranks adjacent in z (1 or 2; 0 for H = 1)
  int64_t moving_slice_bytes = 0;  // one z-slice of the moving image
};

// Bytes `rank` sends in one ShardedGreedyStep (fixed grid `fixed`, moving
// image `moving`, H ranks).
absl::StatusOr<IterationTraffic> GreedyIterationTraffic(registration::Dims3 fixed, registration::Dims3 moving,
                                                        int ranks, int rank, const GreedyStepOptions& options);

struct ClusterModel {
  double link_gb_per_s = 360;        // per GPU per direction, effective (H200 NVLink: 900 GB/s both ways)
  double message_latency_us = 15;    // per SendRecv / all-reduce
  double iteration_ms_per_512cube = 29.0;  // measured single-GPU greedy LNCC iteration at 512^3 (H200)
  double sampler_ms_per_512cube = 2.834;   // sampler fwd + bwd at 512^3 (H200), what overlaps the ring
  int64_t bounded_reach_slices = 32;       // moving slices a bounded sampler fetches per side
};

struct IterationTime {
  double compute_ms = 0;
  double ring_ms = 0;         // transfer time of the ring
  double ring_exposed_ms = 0; // not hidden behind the sampling compute (as implemented)
  double halo_ms = 0;         // not overlapped (as implemented)
  double latency_ms = 0;
  double total_ms = 0;                // as implemented
  double total_prefetched_ms = 0;     // ring shifts of the (static) moving image overlapped with the whole iteration
  double total_bounded_ms = 0;        // bounded sampler + minimal halos
};

IterationTime ModelIteration(int64_t voxels_per_rank, const IterationTraffic& traffic, const ClusterModel& model);

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_SHARDED_MULTI_GPU_MODEL_H_
