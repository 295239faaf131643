#include "kernels/registration/pipeline/sharded_deformable_stage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/registration/sharded/sharded_greedy_step.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/pipeline/per_scale.h"
#include "kernels/registration/pipeline/grid_jitter.h"
#include "kernels/registration/pipeline/plateau_stop.h"
#include "kernels/registration/pipeline/step_control.h"

namespace tessera::registration {
namespace {

using parallel::Communicator;
using parallel::GreedyStepOptions;

}  // namespace

absl::StatusOr<GreedyStepOptions> ShardedStepOptions(const RegistrationOptions& options) {
  GreedyStepOptions o;
  switch (options.metric) {
    case Metric::kLncc: o.metric = parallel::GreedyMetric::kLncc; break;
    case Metric::kMse: o.metric = parallel::GreedyMetric::kMse; break;
    case Metric::kMi: o.metric = parallel::GreedyMetric::kMi; break;
  }
  o.lncc.window = options.metric_options.lncc_window;
  o.mi = MattesMiOptionsFor(options.metric_options);  // intensities normalised to [0, 1], as the lean metric's
  o.rule = options.deformable_step == DeformableStep::kAdam ? parallel::GreedyRule::kAdam : parallel::GreedyRule::kNormalized;
  o.lr_voxels = options.deformable_lr_voxels;
  o.smooth_grad_sigma = options.smooth_grad_sigma;
  o.smooth_warp_sigma = options.smooth_warp_sigma;
  return o;
}

namespace {

// What rank 0 tells the caller about a level.
struct LevelSummary {
  double first = 0, last = 0, best = INFINITY;
  int iterations = 0;
  int64_t adam_step = 0;
};

// The GPU of rank r: options.gpus round robin, else the stage's own.
int RankOrdinal(const RegistrationOptions& options, const Stream& stream, int rank) {
  if (options.gpus.empty()) return stream.ordinal();
  return options.gpus[rank % options.gpus.size()];
}

// A level's array (in the stage stream's memory) for every rank, by the
// rank's ordinal: the array itself on the stage's own device (shared
// storage), one read-only copy on each other GPU.
absl::StatusOr<std::map<int, NDArray>> OnEachRankGpu(const NDArray& level_array, const RegistrationOptions& options,
                                                     const Stream& stream, int ranks) {
  std::map<int, NDArray> out;
  for (int r = 0; r < ranks; ++r) {
    const int ordinal = RankOrdinal(options, stream, r);
    if (out.count(ordinal)) continue;
    if (ordinal == stream.ordinal()) {
      out[ordinal] = level_array;
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(out[ordinal], level_array.CopyTo(MemoryKind::kDevice, stream, ordinal));
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return out;
}

// The whole field on every process rank: each holds its own slices (zero
// elsewhere), summed over the group, which is exact (x + 0 = x), so every
// rank ends with the same array bit for bit. Host arrays travel through a
// bounded buffer in the stream's memory (NCCL reduces device memory).
absl::Status AllGatherBySum(Communicator& comm, NDArray* whole, const Stream& stream) {
  float* data = whole->data<float>();
  const size_t total = static_cast<size_t>(whole->num_elements());
  if (stream.backend() != Backend::kCuda) return comm.AllReduce(data, total, parallel::ReduceOp::kSum, stream);
  const size_t chunk = std::min<size_t>(total, size_t{1} << 22);  // 16 MB
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> staging,
                           Buffer::Allocate(MemoryKind::kDevice, chunk * sizeof(float), stream.ordinal()));
  float* device = static_cast<float*>(staging->data());
  for (size_t offset = 0; offset < total; offset += chunk) {
    const size_t n = std::min(chunk, total - offset);
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(device, MemoryKind::kDevice, data + offset, MemoryKind::kHost, n * sizeof(float), stream));
    TESSERA_RETURN_IF_ERROR(comm.AllReduce(device, n, parallel::ReduceOp::kSum, stream));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(data + offset, MemoryKind::kHost, device, MemoryKind::kDevice, n * sizeof(float), stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }
  return absl::OkStatus();
}

// `values` of rank 0 on every rank (through the stream's memory, as NCCL needs).
absl::Status BroadcastFromRankZero(Communicator& comm, Mat4* values, const Stream& stream) {
  Mat4 mine = *values;
  if (comm.rank() != 0) mine.fill(0.0);
  const size_t bytes = sizeof(double) * mine.size();
  if (stream.backend() != Backend::kCuda) {
    TESSERA_RETURN_IF_ERROR(comm.AllReduce(mine.data(), mine.size(), parallel::ReduceOp::kSum, stream));
  } else {
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> staging,
                             Buffer::Allocate(MemoryKind::kDevice, bytes, stream.ordinal()));
    double* device = static_cast<double*>(staging->data());
    TESSERA_RETURN_IF_ERROR(CopyBytes(device, MemoryKind::kDevice, mine.data(), MemoryKind::kHost, bytes, stream));
    TESSERA_RETURN_IF_ERROR(comm.AllReduce(device, mine.size(), parallel::ReduceOp::kSum, stream));
    TESSERA_RETURN_IF_ERROR(CopyBytes(mine.data(), MemoryKind::kHost, device, MemoryKind::kDevice, bytes, stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }
  *values = mine;
  return absl::OkStatus();
}

}  // namespace

bool ShardedStageJitters(const RegistrationOptions& options, const Stream& stream) {
  return DeformableStageJitters(options) && options.process_group == nullptr &&
         (stream.backend() == Backend::kCpu || !RingMovesTheImage(options, stream, options.shards));
}

bool RingMovesTheImage(const RegistrationOptions& options, const Stream& stream, int ranks) {
  if (stream.backend() != Backend::kCuda) return true;
  for (int r = 1; r < ranks; ++r) {
    if (RankOrdinal(options, stream, r) != RankOrdinal(options, stream, 0)) return true;
  }
  return false;
}

absl::Status ValidateShardedOptions(const RegistrationOptions& options, Backend backend) {
  if (options.shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shards must be >= 1, got ", options.shards));
  }
  if (!options.gpus.empty()) {
    if (backend != Backend::kCuda) {
      return absl::FailedPreconditionError(
          absl::StrCat("gpus {", absl::StrJoin(options.gpus, ","), "} given but the registration runs on the cpu"));
    }
    const int available = static_cast<int>(DeviceRegistry::Get().gpus().size());
    for (int ordinal : options.gpus) {
      if (ordinal >= available) {
        return absl::FailedPreconditionError(
            absl::StrCat("gpus names GPU ", ordinal, " but this machine has ", available, " GPU(s)"));
      }
    }
  }
  if (options.process_group != nullptr) {
    if (options.shards != 1 || !options.gpus.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a process group (rank ", options.process_group->rank(), " of ", options.process_group->size(),
          ") runs one shard per process: shards must be 1 (got ", options.shards, ") and gpus empty (got {",
          absl::StrJoin(options.gpus, ","), "}); pick the GPU with CUDA_VISIBLE_DEVICES"));
    }
  }
  if (options.shards == 1 && options.process_group == nullptr) return absl::OkStatus();
  if (options.memory_mode != MemoryMode::kLean) {
    return absl::InvalidArgumentError(absl::StrCat("shards = ", options.shards, " runs the lean deformable stage: memory_mode '",
                                                   OptionName(options.memory_mode), "' cannot be sharded"));
  }
  (void)backend;  // every metric and both samplers have CPU and device kernels
  return absl::OkStatus();
}

int ShardsForLevel(int requested, int64_t nz, int64_t halo) {
  int h = static_cast<int>(std::min<int64_t>(requested, nz));
  while (h > 1 && nz / h < halo) --h;
  return std::max(h, 1);
}

absl::StatusOr<NDArray> RunShardedDeformableStage(const Stream& stream, const RegistrationOptions& options,
                                                  const DeformableStageHooks& hooks, const Mat4& rank_t,
                                                  const std::vector<DeformableLevel>& levels,
                                                  std::vector<std::string>* log) {
  TESSERA_RETURN_IF_ERROR(ValidateShardedOptions(options, stream.backend()));
  TESSERA_ASSIGN_OR_RETURN(const GreedyStepOptions step_options, ShardedStepOptions(options));
  const bool cuda = stream.backend() == Backend::kCuda;
  const bool adam = step_options.rule == parallel::GreedyRule::kAdam;
  const MemoryKind rank_kind = MemoryKindFor(stream);
  const Stream host = Stream::Cpu();
  // Rank threads charge their allocations to this registration's tracker.
  const std::shared_ptr<DeviceMemoryTracker> tracker = CurrentDeviceMemoryTracker();
  const int64_t halo = parallel::GreedyStepHalo(step_options);
  // Ranks in several processes: this process runs rank group->rank() only.
  Communicator* const group = options.process_group.get();
  // Every process computed the affine itself; GPU reductions need not agree
  // to the last bit across processes, so all ranks take rank 0's (summed
  // with zeros: exact), and their slabs fit together.
  Mat4 t = rank_t;
  if (group != nullptr) TESSERA_RETURN_IF_ERROR(BroadcastFromRankZero(*group, &t, stream));
  NDArray u, m, v;  // whole fields on the host between levels
  int64_t adam_step = 0;
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // the levels are final before other streams read them
  for (size_t si = 0; si < levels.size(); ++si) {
    const DeformableLevel& level = levels[si];
    TESSERA_ASSIGN_OR_RETURN(NDArray fixed, level.fixed->CopyTo(MemoryKind::kHost, stream));
    const Dims3 dims = DimsOf(fixed), moving_dims = DimsOf(*level.moving);
    const Shape field_shape = {dims.nx, dims.ny, dims.nz, 3};
    const auto alloc = [&]() { return NDArray::Allocate(field_shape, DType::kFloat32); };
    std::vector<NDArray*> fields = {&u};
    if (adam) fields = {&u, &m, &v};
    if (u.empty()) {
      for (NDArray* a : fields) {
        TESSERA_ASSIGN_OR_RETURN(*a, alloc());
        TESSERA_RETURN_IF_ERROR(FillZero(*a, host));
      }
    } else if (u.shape() != field_shape) {
      for (NDArray* a : fields) {  // normalised units do not change with resolution
        TESSERA_ASSIGN_OR_RETURN(NDArray up, alloc());
        TESSERA_RETURN_IF_ERROR(UpsampleDisplacement(*a, &up, DisplacementUnits::kNormalized, host));
        *a = std::move(up);
      }
    }
    const int max_it = PerScale(options.deformable_iterations, si);
    if (max_it <= 0) continue;
    const absl::Time start = absl::Now();
    const int requested = group != nullptr ? group->size() : options.shards;
    const int ranks = ShardsForLevel(requested, dims.nz, halo);
    if (group != nullptr && ranks < requested) {
      // Process ranks cannot sit a level out: every one is in the collectives.
      return absl::FailedPreconditionError(absl::StrFormat(
          "deformable x%d: %d slices cannot hold %d process ranks with %d-slice halos (use fewer ranks, or "
          "scales whose levels have at least %d slices)",
          level.factor, dims.nz, requested, halo, requested * halo));
    }
    if (ranks < options.shards) {
      log->push_back(absl::StrFormat(
          "deformable x%d: %d slices cannot hold %d shards with %d-slice halos: sharded over %d", level.factor,
          dims.nz, options.shards, halo, ranks));
    }
    TESSERA_ASSIGN_OR_RETURN(const parallel::SlabPartition partition, parallel::SlabPartition::Make(dims.nz, ranks));
    // The ring shards the moving image (CPU ranks, and GPU ranks spread over
    // several GPUs); ranks on one GPU share the whole image instead (one
    // read-only copy beats H shards plus the ring's buffers).
    // Process ranks each hold the whole moving level already (the same
    // set-up on every process): the ring across processes is not done yet.
    const bool ring = group == nullptr && RingMovesTheImage(options, stream, ranks);
    // MI's grid jitter: CPU ranks (the ring's host path), and CUDA ranks on one
    // GPU (the whole moving image on each rank's GPU).
    const bool jitter = ShardedStageJitters(options, stream) && (!cuda || !ring);
    NDArray moving_host;
    std::map<int, NDArray> moving_on_gpu;
    if (ring && level.moving->memory_kind() != MemoryKind::kDevice) {
      moving_host = *level.moving;
    } else if (ring) {  // ranks copy their shards from the host
      TESSERA_ASSIGN_OR_RETURN(moving_host, level.moving->CopyTo(MemoryKind::kHost, stream));
      TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    } else {
      TESSERA_ASSIGN_OR_RETURN(moving_on_gpu, OnEachRankGpu(*level.moving, options, stream, ranks));
    }
    // CUDA ranks resample the jittered fixed image from the whole level on
    // their own GPU.
    std::map<int, NDArray> fixed_on_gpu;
    if (jitter && cuda) {
      TESSERA_ASSIGN_OR_RETURN(fixed_on_gpu, OnEachRankGpu(*level.fixed, options, stream, ranks));
    }
    TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t, level.fixed_space, level.moving_space));
    float affine[12];
    for (int i = 0; i < 12; ++i) affine[i] = static_cast<float>(a[i]);
    LevelSummary summary;
    const auto rank_body = [&](Communicator& comm) -> absl::Status {
      ScopedDeviceMemoryCharge charge(tracker);
      Stream rank_stream = Stream::Cpu();
      if (cuda) {
        TESSERA_ASSIGN_OR_RETURN(rank_stream, Stream::Create(Backend::kCuda, RankOrdinal(options, stream, comm.rank())));
      }
      const int rank = comm.rank();
      TESSERA_ASSIGN_OR_RETURN(parallel::SlabLayout layout, partition.Layout(dims, rank, halo));
      TESSERA_ASSIGN_OR_RETURN(NDArray local_fixed, parallel::ExtractSlab(fixed, layout, rank_kind, rank_stream));
      parallel::ShardedGreedyState state;
      if (!ring) {
        const NDArray& moving = moving_on_gpu.at(rank_stream.ordinal());
        TESSERA_ASSIGN_OR_RETURN(state, parallel::MakeShardedGreedyStateWholeMoving(
                                            layout, std::move(local_fixed), moving, affine, step_options,
                                            rank_stream));
      } else {
        TESSERA_ASSIGN_OR_RETURN(parallel::SlabLayout moving_layout,
                                 parallel::RingMovingLayout(moving_dims, rank, ranks));
        TESSERA_ASSIGN_OR_RETURN(NDArray shard, parallel::ExtractSlab(moving_host, moving_layout, rank_kind, rank_stream));
        TESSERA_ASSIGN_OR_RETURN(state, parallel::MakeShardedGreedyState(layout, std::move(local_fixed), moving_layout,
                                                                         std::move(shard), affine, step_options,
                                                                         rank_stream));
      }
      TESSERA_ASSIGN_OR_RETURN(state.u, parallel::ExtractSlab(u, layout, rank_kind, rank_stream));
      if (adam) {
        TESSERA_ASSIGN_OR_RETURN(state.m, parallel::ExtractSlab(m, layout, rank_kind, rank_stream));
        TESSERA_ASSIGN_OR_RETURN(state.v, parallel::ExtractSlab(v, layout, rank_kind, rank_stream));
      }
      state.adam_step = adam_step;
      // The loss is all-reduced (bit-identical on every rank), so every rank
      // takes the same convergence decision; on the CPU it is also the
      // unsharded stage's loss bit for bit (issue 39), so the plateau stop
      // and the step halvings fire at the same iterations as with shards = 1.
      LevelSummary s;
      PlateauStop stop = DeformablePlateauStop(options, jitter, si + 1 == levels.size(), max_it);
      // The step only shrinks (step_control.h), so the halo sized for
      // step_options.lr_voxels still covers it.
      StepControl control = DeformableStepControl(options, jitter);
      GreedyStepOptions rank_step = step_options;
      // MI's grid jitter (grid_jitter.h), as the unsharded stage: every rank
      // draws the same grids; the ring samples the moving image on them and
      // the fixed image's own slices are resampled from the whole (host) level.
      GridJitter grid_jitter(options.sampling_seed, static_cast<int>(si), dims.nx, dims.ny, dims.nz);
      int it = 0;
      for (it = 1; it <= max_it; ++it) {
        if (rank == 0 && hooks.check_cancelled) TESSERA_RETURN_IF_ERROR(hooks.check_cancelled());
        if (jitter) {
          GridSampleArgs moving_args, fixed_args = GridJitter::FixedImageArgs(fixed.data<float>(), dims);
          grid_jitter.Advance(options.metric_options.mi_voxel_jitter, &moving_args, &fixed_args);
          std::copy(moving_args.grid_lo, moving_args.grid_lo + 3, state.grid_lo);
          std::copy(moving_args.grid_hi, moving_args.grid_hi + 3, state.grid_hi);
          state.voxel_jitter_key = moving_args.voxel_jitter_key;
          if (cuda) {
            // The own slices of the whole jittered grid, sampled as the
            // unsharded stage samples them (grid_nz, out_z0: bit for bit).
            fixed_args.image = fixed_on_gpu.at(rank_stream.ordinal()).data<float>();
            fixed_args.out_dims = Dims3{dims.nx, dims.ny, layout.own_nz()};
            fixed_args.grid_nz = dims.nz;
            fixed_args.out_z0 = layout.z_begin;
            TESSERA_RETURN_IF_ERROR(
                GridSample(rank_stream, fixed_args, state.fixed.data<float>() + layout.own_offset()));
          } else {
            parallel::WindowSampleArgs wa;
            wa.out_layout = layout;
            wa.padding = fixed_args.padding;
            wa.moving_dims = dims;
            wa.window = fixed.data<float>();
            wa.window_z0 = 0;
            wa.window_nz = dims.nz;
            std::copy(fixed_args.grid_lo, fixed_args.grid_lo + 3, wa.grid_lo);
            std::copy(fixed_args.grid_hi, fixed_args.grid_hi + 3, wa.grid_hi);
            wa.voxel_jitter_key = fixed_args.voxel_jitter_key;
            TESSERA_RETURN_IF_ERROR(parallel::WindowGridSample(wa, state.fixed.data<float>(), nullptr, rank_stream));
          }
        }
        TESSERA_ASSIGN_OR_RETURN(double loss, parallel::ShardedGreedyEvaluate(comm, state, step_options, rank_stream));
        // The unsharded stage reads LNCC's and MSE's loss from a float (the
        // kernels' device-side loss): decide on the same value.
        if (step_options.metric != parallel::GreedyMetric::kMi) loss = static_cast<float>(loss);
        stop.Update(loss);
        rank_step.lr_voxels = control.Update(loss);
        if (rank == 0 && hooks.report) hooks.report(level.factor, it, max_it, loss);
        if (stop.done()) break;
        TESSERA_RETURN_IF_ERROR(parallel::ShardedGreedyUpdate(comm, state, rank_step, rank_stream));
      }
      s.first = stop.first();
      s.last = stop.last();
      s.best = stop.best();
      s.iterations = std::min(it, max_it);
      s.adam_step = state.adam_step;
      // Ranks write disjoint slices of the whole fields; a process rank's
      // fields hold its slices alone until AllGatherBySum.
      if (group != nullptr) {
        for (NDArray* a : fields) TESSERA_RETURN_IF_ERROR(FillZero(*a, host));
      }
      TESSERA_RETURN_IF_ERROR(parallel::InsertOwnSlices(state.u, layout, &u, rank_stream));
      if (adam) {
        TESSERA_RETURN_IF_ERROR(parallel::InsertOwnSlices(state.m, layout, &m, rank_stream));
        TESSERA_RETURN_IF_ERROR(parallel::InsertOwnSlices(state.v, layout, &v, rank_stream));
      }
      if (rank == 0) summary = s;
      TESSERA_RETURN_IF_ERROR(rank_stream.Synchronize());
      if (group != nullptr) {
        for (NDArray* a : fields) TESSERA_RETURN_IF_ERROR(AllGatherBySum(comm, a, rank_stream));
        // Every process rank took the same decisions (the losses are all-reduced).
        summary = s;
      }
      return absl::OkStatus();
    };
    TESSERA_RETURN_IF_ERROR(group != nullptr ? rank_body(*group) : parallel::RunInProcessRanks(ranks, rank_body));
    adam_step = summary.adam_step;
    log->push_back(absl::StrFormat(
        "deformable x%d (lean, sharded over %d %s%s ranks, %s%s): %d iterations, loss %.6g -> %.6g (best %.6g), %.2f s",
        level.factor, ranks, group != nullptr ? "process " : "", cuda ? "gpu" : "cpu",
        ring ? "ring sampler" : group != nullptr ? "whole moving image per process" : "shared moving image",
        JitterLogTag(options, jitter), summary.iterations, summary.first, summary.last, summary.best,
        absl::ToDoubleSeconds(absl::Now() - start)));
  }
  if (u.empty()) return u;
  return u.CopyTo(MemoryKindFor(stream), stream, stream.ordinal());
}

}  // namespace tessera::registration
