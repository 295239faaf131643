// The greedy deformable stage sharded over H in-process ranks (issue 13):
// RegistrationOptions::shards > 1. Each level's fixed grid, displacement and
// Adam moments are split along z (kernels/parallel/slab.h); every rank runs
// the sharded loop body (kernels/registration/sharded/sharded_greedy_step.h: the lean
// stage's iteration with halo exchanges, all-reduced losses and step scale,
// the composition in place by slabs) on its own thread and stream. The same
// algorithm and convergence rule as RunLeanDeformableStage (deformable_stage.h),
// so the result equals the single-rank one up to float summation order.
//
// Backends (metrics lncc, mse, mi on both):
// - CPU: ranks are threads on host memory; the moving image is sharded too
//   and travels around the ring (ring_sampler.h).
// - CUDA: each rank with its own stream and device memory. Ranks on ONE GPU
//   (options.gpus empty or naming one GPU) share the level's read-only moving
//   image; ranks spread over several GPUs (options.gpus) shard it and run the
//   ring sampler's device path, so no GPU holds more than its shard plus the
//   one in flight (RingMovesTheImage).
// Levels: a level whose slabs would be thinner than the halo (coarse levels
// of thin volumes) runs on fewer ranks, and the log says so.
// Between levels the field is gathered on the host and upsampled whole (the
// gigavoxel path would upsample per slab: not done yet).
// Progress reports and cancellation checks run on rank 0's thread.
//
// Ranks in several processes (options.process_group, registrar.h; `tessera
// register --rank R --world-size N`): every process has computed the same
// set-up and levels, and runs exactly its rank of the group with the given
// communicator (NCCL through the rendezvous, services/parallel/). Each holds
// the whole moving level (no ring across processes yet); after every level
// the fields are all-gathered (own slices, zero elsewhere, summed: exact), so
// every process returns the same whole field and rank 0 writes the outputs.
// Every level must hold all ranks (FAILED_PRECONDITION naming the level
// otherwise: a process rank cannot sit a level out). Cancellation is checked
// by rank 0 alone: its peers then wait in NCCL until their process ends.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_SHARDED_DEFORMABLE_STAGE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_SHARDED_DEFORMABLE_STAGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/sharded/sharded_greedy_step.h"
#include "kernels/registration/pipeline/deformable_stage.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration {

// INVALID_ARGUMENT for shards < 1, for a process group with shards != 1 or
// gpus given, and for shards > 1 (or a process group) with memory_mode
// "standard" or a metric other than mse, lncc, mi (any backend);
// FAILED_PRECONDITION for gpus on the cpu or naming a missing GPU.
absl::Status ValidateShardedOptions(const RegistrationOptions& options, Backend backend);

// Whether the sharded stage jitters MI's sampling grid (grid_jitter.h) as the
// unsharded stage does: DeformableStageJitters, on CPU in-process ranks (the
// ring sampler's host path) and on CUDA ranks that share one GPU (each
// resamples its own slices of the whole jittered grid). Ranks over several
// GPUs (the ring's device path) and process ranks do not jitter, and the
// registrar logs so. With it a run is the unsharded one bit for bit.
bool ShardedStageJitters(const RegistrationOptions& options, const Stream& stream);

// Whether a level's `ranks` ranks shard the moving image around the ring
// (true on the CPU, and on CUDA when the ranks sit on more than one GPU) or
// share one whole copy per GPU (ranks on one GPU).
bool RingMovesTheImage(const RegistrationOptions& options, const Stream& stream, int ranks);

// The sharded loop body's options for these registration options
// (INVALID_ARGUMENT for a metric other than mse, lncc, mi).
absl::StatusOr<parallel::GreedyStepOptions> ShardedStepOptions(const RegistrationOptions& options);

// The shards a level of `nz` slices can hold with `halo`-slice halos: the
// largest H <= requested with nz / H >= halo (at least 1).
int ShardsForLevel(int requested, int64_t nz, int64_t halo);

// RunLeanDeformableStage's contract with options.shards ranks: returns u in
// normalised sampler units on the finest level's grid, in `stream`'s memory.
absl::StatusOr<NDArray> RunShardedDeformableStage(const Stream& stream, const RegistrationOptions& options,
                                                  const DeformableStageHooks& hooks, const Mat4& t,
                                                  const std::vector<DeformableLevel>& levels,
                                                  std::vector<std::string>* log);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_SHARDED_DEFORMABLE_STAGE_H_
