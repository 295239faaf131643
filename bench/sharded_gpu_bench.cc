// Sharded greedy iterations on ONE GPU (issue 13): H in-process ranks, one
// CUDA stream each, for every metric with the shared moving image and with the
// device ring sampler, side by side in one run against H = 1 (the unsharded
// iteration). Markdown table of median ms per iteration and the ratio to
// H = 1 with the shared moving image. Needs a GPU.
//
//   sharded_gpu_bench --size=256 --ranks=1,2,4 --iterations=5
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/device.h"
#include "common/status.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/registration/sharded/sharded_greedy_step.h"
#include "kernels/parallel/slab.h"

ABSL_FLAG(int, size, 192, "cube edge of the fixed and moving volumes");
ABSL_FLAG(std::string, ranks, "1,2,4", "shard counts on the one GPU");
ABSL_FLAG(int, iterations, 5, "timed iterations (median), after one warm-up");

namespace {

using namespace tessera;            // NOLINT
using namespace tessera::parallel;  // NOLINT
using registration::Dims3;

NDArray Volume(const Dims3& d, uint32_t seed) {
  NDArray a = NDArray::Allocate({d.nx, d.ny, d.nz}, DType::kFloat32).value();
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t v = 0; v < d.size(); ++v) {
    x = x * 1664525u + 1013904223u;
    const double s = 0.5 + 0.3 * std::sin(0.11 * (v % d.nx) + 0.07 * ((v / d.nx) % d.ny) + 0.05 * (v / (d.nx * d.ny)));
    a.data<float>()[v] = static_cast<float>(s + 0.05 * (x >> 8) / 16777216.0);
  }
  return a;
}

constexpr float kAffine[12] = {1.02f, 0.01f, 0.f, 0.01f, 0.f, 0.99f, 0.02f, -0.02f, 0.f, -0.01f, 1.01f, 0.03f};

// Median ms per ShardedGreedyStep over `iterations` (rank 0's clock; every
// iteration is collective, so it is the group's time).
absl::StatusOr<double> TimeIterations(const NDArray& fixed, const NDArray& moving, const GreedyStepOptions& o, int H,
                                      bool ring, int iterations) {
  const Dims3 d{fixed.dim(0), fixed.dim(1), fixed.dim(2)}, md{moving.dim(0), moving.dim(1), moving.dim(2)};
  TESSERA_ASSIGN_OR_RETURN(const SlabPartition p, SlabPartition::Make(d.nz, H));
  std::vector<double> ms;
  const absl::Status s = RunInProcessRanks(H, [&](Communicator& comm) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, 0));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), GreedyStepHalo(o)));
    TESSERA_ASSIGN_OR_RETURN(NDArray f, ExtractSlab(fixed, l, MemoryKind::kDevice, stream));
    ShardedGreedyState state;
    NDArray whole;
    if (ring) {
      TESSERA_ASSIGN_OR_RETURN(SlabLayout ml, RingMovingLayout(md, comm.rank(), H));
      TESSERA_ASSIGN_OR_RETURN(NDArray mv, ExtractSlab(moving, ml, MemoryKind::kDevice, stream));
      TESSERA_ASSIGN_OR_RETURN(state, MakeShardedGreedyState(l, f, ml, mv, kAffine, o, stream));
    } else {
      TESSERA_ASSIGN_OR_RETURN(whole, moving.CopyTo(MemoryKind::kDevice, stream, 0));
      TESSERA_ASSIGN_OR_RETURN(state, MakeShardedGreedyStateWholeMoving(l, f, whole, kAffine, o, stream));
    }
    for (int it = 0; it <= iterations; ++it) {
      TESSERA_RETURN_IF_ERROR(comm.Barrier(stream));
      const auto t0 = std::chrono::steady_clock::now();
      TESSERA_RETURN_IF_ERROR(ShardedGreedyStep(comm, state, o, stream).status());
      TESSERA_RETURN_IF_ERROR(comm.Barrier(stream));
      const double t = bench::MsSince(t0);
      if (comm.rank() == 0 && it > 0) ms.push_back(t);
    }
    return absl::OkStatus();
  });
  TESSERA_RETURN_IF_ERROR(s);
  return bench::Median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (!DeviceRegistry::Get().cuda_available()) {
    std::fprintf(stderr, "no GPU: %s\n", DeviceRegistry::Get().cuda_unavailable_reason().c_str());
    return 1;
  }
  const int n = absl::GetFlag(FLAGS_size), iterations = std::max(1, absl::GetFlag(FLAGS_iterations));
  std::vector<int> ranks;
  for (absl::string_view r : absl::StrSplit(absl::GetFlag(FLAGS_ranks), ',')) {
    int h = 0;
    if (!absl::SimpleAtoi(r, &h) || h < 1) {
      std::fprintf(stderr, "--ranks: bad value '%s'\n", std::string(r).c_str());
      return 1;
    }
    ranks.push_back(h);
  }
  const Dims3 d{n, n, n};
  const NDArray fixed = Volume(d, 1), moving = Volume(d, 2);
  std::printf("Sharded greedy iteration on one GPU, %d^3, Adam, median of %d (ms; ratio to the first H, shared moving image)\n\n", n,
              iterations);
  std::printf("| metric | H | shared moving ms | ratio | ring ms | ratio |\n|---|---|---|---|---|---|\n");
  for (const GreedyMetric metric : {GreedyMetric::kLncc, GreedyMetric::kMse, GreedyMetric::kMi}) {
    GreedyStepOptions o;
    o.metric = metric;
    o.mi.fixed_max = o.mi.warped_max = 1.f;
    const char* name = metric == GreedyMetric::kLncc ? "lncc" : metric == GreedyMetric::kMse ? "mse" : "mi";
    double base = 0;
    for (int H : ranks) {
      auto shared = TimeIterations(fixed, moving, o, H, false, iterations);
      auto ring = TimeIterations(fixed, moving, o, H, true, iterations);
      if (!shared.ok() || !ring.ok()) {
        std::fprintf(stderr, "%s H=%d: %s / %s\n", name, H, shared.status().ToString().c_str(),
                     ring.status().ToString().c_str());
        return 1;
      }
      if (base == 0) base = *shared;
      std::printf("| %s | %d | %.2f | %.2f | %.2f | %.2f |\n", name, H, *shared, *shared / base, *ring, *ring / base);
    }
  }
  return 0;
}
