// Sharded registration operations on H in-process CPU ranks vs the unsharded
// kernel, side by side in one run (issue 13): the overhead of slabs, halo
// exchange and the ring on one machine, and the communication a rank does.
// Markdown table of wall times and ratios; GPU-free.
//
//   sharded_registration_bench --size=96 --ranks=1,2,4 --repeats=3
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/registration/sharded/counting_communicator.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/registration/sharded/sharded_greedy_step.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mutual_info.h"

ABSL_FLAG(int, size, 96, "cube edge of the fixed and moving volumes");
ABSL_FLAG(std::string, ranks, "1,2,4", "rank counts (threads of this process)");
ABSL_FLAG(int, repeats, 3, "timed repeats (median)");

namespace {

using namespace tessera;            // NOLINT
using namespace tessera::parallel;  // NOLINT
using registration::Dims3;

NDArray Volume(const Dims3& d, int comps, uint32_t seed) {
  NDArray a = NDArray::Allocate(comps == 1 ? Shape{d.nx, d.ny, d.nz} : Shape{d.nx, d.ny, d.nz, comps},
                                DType::kFloat32)
                  .value();
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    x = x * 1664525u + 1013904223u;
    const int64_t v = i % d.size();
    const double smooth = 0.5 + 0.3 * std::sin(0.11 * (v % d.nx) + 0.07 * ((v / d.nx) % d.ny) + 0.05 * (v / d.size()));
    a.data<float>()[i] = static_cast<float>(comps == 1 ? smooth + 0.05 * (x >> 8) / 16777216.0
                                                       : 0.004 * ((x >> 8) / 16777216.0 - 0.5));
  }
  return a;
}

using bench::Median;

double TimeMs(int repeats, const std::function<void()>& fn) { return bench::MedianMs(repeats, fn); }

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_size), repeats = absl::GetFlag(FLAGS_repeats);
  const Dims3 d{n, n, n};
  const NDArray fixed = Volume(d, 1, 1), moving = Volume(d, 1, 2), field = Volume(d, 3, 3);
  const float affine[12] = {1.01f, 0, 0, 0.01f, 0, 0.99f, 0, 0, 0, 0, 1.0f, 0.01f};
  const Stream cpu = Stream::Cpu();
  GreedyStepOptions o;
  o.lncc.window = 7;
  registration::MattesMiOptions mi;
  mi.fixed_min = mi.warped_min = 0.1f;
  mi.fixed_max = mi.warped_max = 0.9f;

  // Unsharded references.
  std::vector<double> base(6);
  {
    NDArray f = field.Clone().value(), out = Volume(d, 1, 4), g = Volume(d, 1, 5), jac = field.Clone().value();
    base[0] = TimeMs(repeats, [&] { (void)registration::GaussianSmooth(f, &f, {1, 1, 1}, cpu); });
    base[1] = TimeMs(repeats, [&] {
      (void)registration::cpu::Lncc(fixed.data<float>(), moving.data<float>(), d, o.lncc, g.data<float>());
    });
    base[2] = TimeMs(repeats, [&] {
      (void)registration::MattesMutualInformationCpu(fixed, moving, nullptr, mi, &g);
    });
    registration::GridSampleArgs args;
    args.image = moving.data<float>();
    args.image_dims = d;
    args.affine = affine;
    args.disp = field.data<float>();
    args.out_dims = d;
    registration::GridSampleGrads grads;
    grads.grad_disp = jac.data<float>();
    base[3] = TimeMs(repeats, [&] {
      registration::cpu::GridSampleForward(args, out.data<float>());
      registration::cpu::GridSampleBackward(args, g.data<float>(), grads);
    });
  }

  std::printf("# Sharded registration operations on CPU ranks, %dx%dx%d, %d CPU threads per rank\n\n", n, n, n,
              CpuThreads());
  std::printf("| ranks | smoothing ms (x unsharded) | LNCC w7 ms (x) | MI ms (x) | ring sampler fwd+J ms (x) | "
              "greedy step ms | MB sent/rank/step |\n|---|---|---|---|---|---|---|\n");
  std::printf("| unsharded | %.1f | %.1f | %.1f | %.1f (fwd+bwd) | | |\n", base[0], base[1], base[2], base[3]);
  for (absl::string_view rs : absl::StrSplit(absl::GetFlag(FLAGS_ranks), ',')) {
    int H = 0;
    if (!absl::SimpleAtoi(rs, &H) || H < 1) continue;
    std::vector<double> ms(5, 0);
    std::vector<double> sent(H, 0);
    const SlabPartition p = SlabPartition::Make(n, H).value();
    const absl::Status s = RunInProcessRanks(H, [&](Communicator& inner) -> absl::Status {
      CountingCommunicator comm(inner);
      TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), GreedyStepHalo(o)));
      TESSERA_ASSIGN_OR_RETURN(SlabLayout ml, RingMovingLayout(d, comm.rank(), H));
      TESSERA_ASSIGN_OR_RETURN(NDArray f, ExtractSlab(fixed, l, MemoryKind::kHost, cpu));
      TESSERA_ASSIGN_OR_RETURN(NDArray w, ExtractSlab(moving, l, MemoryKind::kHost, cpu));
      TESSERA_ASSIGN_OR_RETURN(NDArray u, ExtractSlab(field, l, MemoryKind::kHost, cpu));
      TESSERA_ASSIGN_OR_RETURN(NDArray m, ExtractSlab(moving, ml, MemoryKind::kHost, cpu));
      TESSERA_ASSIGN_OR_RETURN(NDArray g, NDArray::Allocate(l.LocalShape(1), DType::kFloat32));
      TESSERA_ASSIGN_OR_RETURN(NDArray jac, NDArray::Allocate(l.LocalShape(3), DType::kFloat32));
      absl::Status st;
      auto timed = [&](int slot, const std::function<absl::Status()>& fn) {
        const double t = TimeMs(repeats, [&] {
          (void)comm.Barrier(cpu);
          absl::Status r = fn();
          if (!r.ok() && st.ok()) st = r;
        });
        if (comm.rank() == 0) ms[slot] = t;
      };
      timed(0, [&] { return ShardedGaussianSmooth(comm, l, u, {1, 1, 1}, cpu); });
      timed(1, [&] { return ShardedLncc(comm, l, f, w, o.lncc, &g, cpu).status(); });
      timed(2, [&] { return ShardedMattesMi(comm, l, f, w, nullptr, mi, &g, cpu).status(); });
      RingSampleArgs ra;
      ra.out_layout = l;
      ra.disp = u.data<float>();
      ra.affine = affine;
      ra.moving_layout = ml;
      ra.moving = m.data<float>();
      timed(3, [&] { return RingGridSample(comm, ra, g.data<float>(), jac.data<float>(), cpu); });
      TESSERA_ASSIGN_OR_RETURN(ShardedGreedyState state, MakeShardedGreedyState(l, f, ml, m, affine));
      comm.Reset();
      timed(4, [&] { return ShardedGreedyStep(comm, state, o, cpu).status(); });
      sent[comm.rank()] = comm.counts().bytes_sent / 1e6 / repeats;
      return st;
    });
    if (!s.ok()) {
      std::printf("| %d | %s |\n", H, std::string(s.message()).c_str());
      continue;
    }
    std::printf("| %d | %.1f (%.2f) | %.1f (%.2f) | %.1f (%.2f) | %.1f (%.2f) | %.1f | %.1f |\n", H, ms[0],
                ms[0] / base[0], ms[1], ms[1] / base[1], ms[2], ms[2] / base[2], ms[3], ms[3] / base[3], ms[4],
                *std::max_element(sent.begin(), sent.end()));
  }
  std::printf("\nRanks share this machine's cores, so times show the cost of sharding (halo copies, the ring, "
              "owner passes), not a speed-up; on GPUs each rank has its own device.\n");
  return 0;
}
