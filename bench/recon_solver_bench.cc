// Iterative reconstruction end to end on the device, default vs deterministic
// execution mode side by side (the cost of bit-identical reruns), and the GPU
// against the CPU backend at a small size:
//   CT  SART, OS-SART, CGLS on the distance-driven projector (2-D fan 512^2,
//       720 views x 768 cols; 3-D cone 256^3, 360 views of 384^2)
//   PET MLEM / OSEM on the Joseph projector (2-D fan 256^2, Poisson counts)
// Inputs are analytic phantom sinograms; timings are the solver calls only
// (no file IO), median of --reps after a warm-up; "rel diff" is the volume's
// relative L2 difference between the two modes.
//
//   recon_solver_bench [--reps=3] [--iterations=5] [--small] [--cpu_compare=true]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "common/device.h"
#include "common/memory_kind_for.h"
#include "common/ndarray.h"
#include "common/parallel.h"
#include "kernels/reconstruction/ct/dd_projector.h"
#include "kernels/reconstruction/execution_mode.h"
#include "kernels/reconstruction/pet/osem.h"
#include "kernels/reconstruction/pet/projector.h"
#include "kernels/reconstruction/solvers/cgls.h"
#include "kernels/reconstruction/solvers/sart.h"
#include "kernels/reconstruction/vector_ops.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/pet_phantom.h"
#include "services/reconstruction/phantoms/phantom.h"

ABSL_FLAG(int, reps, 3, "timed repetitions (median)");
ABSL_FLAG(int, iterations, 5, "iterations per solve");
ABSL_FLAG(bool, small, false, "2-D 128^2 / 3-D 48^3 problems (quick)");
ABSL_FLAG(bool, cpu_compare, true, "also time the CPU backend on a small 2-D problem");

namespace tessera::recon {
namespace {

using bench::Clock;
using bench::Median;

struct Problem {
  std::string name;
  CtGeometry geometry;
  NDArray sinogram;  // host
  bool pet = false;
};

Problem CtProblem(const std::string& name, bool cone, int64_t n, int64_t views, int64_t cols) {
  Problem p;
  p.name = name;
  p.geometry.volume = CenteredVolume(n, n, cone ? n : 1);
  const std::vector<double> angles = EvenAngles(views, 2 * M_PI);
  const double dso = 2.0 * n, dod = 1.0 * n;
  p.geometry.projection = cone ? ConeBeam(angles, 1.5, 1.5, cols, cols, dso, dod)
                               : FanBeam2D(angles, 1.5, cols, dso, dod);
  const phantoms::Phantom phantom =
      cone ? phantoms::SheppLogan3D(0.9 * n, 0.9 * n) : phantoms::SheppLogan2D(0.9 * n);
  p.sinogram = *phantoms::AnalyticSinogram(phantom, p.geometry, 1);
  return p;
}

Problem PetProblem(int64_t n, int64_t views, int64_t cols) {
  Problem p;
  p.name = absl::StrFormat("PET fan %d^2, %d x %d", n, views, cols);
  p.pet = true;
  p.geometry.volume = CenteredVolume(n, n, 1);
  p.geometry.projection = FanBeam2D(EvenAngles(views, 2 * M_PI), 1.5, cols, 2.0 * n, 1.0 * n);
  phantoms::PetSimulationOptions sim;
  sim.total_counts = 2e7;
  p.sinogram = phantoms::SimulatePetSinogram(phantoms::MakePetPhantom(0.9 * n, true), p.geometry, sim)->counts;
  return p;
}

struct Timing {
  double ms = 0;
  std::vector<float> volume;
};

// Times `method` on `stream`: projector creation excluded, solver included.
Timing Time(const Problem& p, const std::string& method, ExecutionMode mode, const Stream& stream, int iterations,
            int reps) {
  const MemoryKind kind = MemoryKindFor(stream);
  NDArray y = *p.sinogram.CopyTo(kind, stream);
  NDArray x = *NDArray::Allocate({p.geometry.volume.size()}, DType::kFloat32, kind);
  const int subsets = (method == "os-sart" || method == "osem") ? 10 : 1;
  std::unique_ptr<LinearOperator> op;
  if (p.pet) {
    pet::PetGeometry pg;
    pg.ct = p.geometry;
    pet::PetProjectorOptions o;
    o.num_subsets = subsets;
    o.mode = mode;
    op = *pet::PetProjector::Create(pg, stream, o);
  } else {
    ct::DdProjectorOptions o;
    o.num_subsets = subsets;
    o.mode = mode;
    op = *ct::DdProjector::Create(p.geometry, stream, o);
  }
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {  // r == 0: warm-up
    absl::Status s = Fill(stream, x.data<float>(), p.geometry.volume.size(), p.pet ? 1.0f : 0.0f);
    s.Update(stream.Synchronize());
    const auto t0 = Clock::now();
    if (p.pet) {
      pet::OsemOptions o;
      o.iterations = iterations;
      o.num_subsets = subsets;
      s.Update(pet::Osem(*op, y.data<float>(), x.data<float>(), o));
    } else {
      solvers::SolverOptions o;
      o.iterations = iterations;
      o.subsets = subsets;
      o.mode = mode;
      o.exact_residual = false;
      auto report = method == "cgls" ? solvers::Cgls(*op, y.data<float>(), x.data<float>(), o)
                                     : solvers::Sart(*op, y.data<float>(), x.data<float>(), o);
      s.Update(report.status());
    }
    s.Update(stream.Synchronize());
    if (!s.ok()) {
      std::fprintf(stderr, "%s %s: %s\n", p.name.c_str(), method.c_str(), s.ToString().c_str());
      std::exit(1);
    }
    if (r > 0) times.push_back(bench::MsSince(t0));
  }
  Timing t;
  t.ms = Median(times);
  NDArray host = *x.CopyTo(MemoryKind::kHost, stream);
  t.volume.assign(host.data<float>(), host.data<float>() + p.geometry.volume.size());
  return t;
}

double RelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += std::pow(static_cast<double>(a[i]) - b[i], 2);
    n += std::pow(static_cast<double>(b[i]), 2);
  }
  return n > 0 ? std::sqrt(d / n) : 0.0;
}

void Row(const Problem& p, const std::string& method, const Stream& gpu, int iterations, int reps) {
  const Timing def = Time(p, method, ExecutionMode::kDefault, gpu, iterations, reps);
  const Timing det = Time(p, method, ExecutionMode::kDeterministic, gpu, iterations, reps);
  std::printf("| %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %.1e |\n", p.name.c_str(), method.c_str(), iterations,
              def.ms, def.ms / iterations, det.ms, det.ms / def.ms, RelDiff(det.volume, def.volume));
}

int Main() {
  const int reps = absl::GetFlag(FLAGS_reps), iterations = absl::GetFlag(FLAGS_iterations);
  const bool small = absl::GetFlag(FLAGS_small);
  if (!DeviceRegistry::Get().cuda_available()) {
    std::printf("recon_solver_bench: no GPU (%s)\n", DeviceRegistry::Get().cuda_unavailable_reason().c_str());
    return 0;
  }
  absl::StatusOr<Stream> gpu = Stream::Create(Backend::kCuda);
  if (!gpu.ok()) return 1;
  std::printf("### Iterative reconstruction on %s: default vs deterministic mode\n\n",
              DeviceRegistry::Get().Describe().c_str());
  std::printf("| problem | method | iterations | default ms | ms / iteration | deterministic ms | det / default | "
              "rel diff |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
  const Problem fan = small ? CtProblem("CT fan 128^2, 180 x 192", false, 128, 180, 192)
                            : CtProblem("CT fan 512^2, 720 x 768", false, 512, 720, 768);
  for (const char* m : {"sart", "os-sart", "cgls"}) Row(fan, m, *gpu, iterations, reps);
  const Problem cone = small ? CtProblem("CT cone 48^3, 60 x 72^2", true, 48, 60, 72)
                             : CtProblem("CT cone 256^3, 360 x 384^2", true, 256, 360, 384);
  for (const char* m : {"os-sart", "cgls"}) Row(cone, m, *gpu, iterations, reps);
  const Problem pet = small ? PetProblem(64, 90, 96) : PetProblem(256, 360, 384);
  for (const char* m : {"mlem", "osem"}) Row(pet, m, *gpu, iterations, reps);

  if (absl::GetFlag(FLAGS_cpu_compare)) {
    std::printf("\n### GPU vs CPU backend (%d CPU threads), deterministic mode\n\n", CpuThreads());
    std::printf("| problem | method | CPU ms | GPU ms | CPU / GPU | rel diff |\n|---|---|---:|---:|---:|---:|\n");
    const Problem small_fan = CtProblem("CT fan 128^2, 180 x 192", false, 128, 180, 192);
    const Problem small_pet = PetProblem(64, 90, 96);
    const Stream cpu = Stream::Cpu();
    for (const auto& [p, m] : std::vector<std::pair<const Problem*, std::string>>{
             {&small_fan, "os-sart"}, {&small_fan, "cgls"}, {&small_pet, "osem"}}) {
      const Timing c = Time(*p, m, ExecutionMode::kDeterministic, cpu, iterations, 1);
      const Timing g = Time(*p, m, ExecutionMode::kDeterministic, *gpu, iterations, reps);
      std::printf("| %s | %s | %.1f | %.2f | %.0f | %.1e |\n", p->name.c_str(), m.c_str(), c.ms, g.ms, c.ms / g.ms,
                  RelDiff(g.volume, c.volume));
    }
  }
  return 0;
}

}  // namespace
}  // namespace tessera::recon

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::recon::Main();
}
