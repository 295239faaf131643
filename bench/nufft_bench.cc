// Issue 12: NUFFT type 1 and 2 throughput (non-uniform points per second,
// Execute only; SetPoints timed apart) across tolerances, float, 2-D, CUDA
// and CPU side by side in one run, with the kernel width, the CUDA/CPU ratio
// and a memory roofline estimate (bytes an ideal implementation moves / time
// vs --bandwidth_gbs); then the Toeplitz matvec against the type-2 + type-1
// pair it replaces. Without a GPU only the CPU columns are filled.
//
//   bazel run -c opt //bench:nufft_bench -- --modes=256 --points=10000000
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/parallel.h"
#include "kernels/reconstruction/nufft/nufft.h"
#include "kernels/reconstruction/nufft/toeplitz.h"

ABSL_FLAG(int64_t, modes, 256, "modes per axis (2-D, N x N)");
ABSL_FLAG(int64_t, points, 10000000, "non-uniform points on the GPU");
ABSL_FLAG(int64_t, cpu_points, 2000000, "non-uniform points on the CPU (rates are per point)");
ABSL_FLAG(std::string, tolerances, "1e-2,1e-3,1e-4,1e-5,1e-6", "comma separated");
ABSL_FLAG(int, repeats, 5, "timed runs per case (median reported)");
ABSL_FLAG(double, bandwidth_gbs, 4800, "device memory bandwidth for the roofline column (H200: 4800 GB/s)");
ABSL_FLAG(bool, cpu, true, "also run the CPU backend");

namespace tessera {
namespace recon {
namespace nufft {
namespace {

using cf = std::complex<float>;

using bench::Median;

// Median seconds of fn() (after one warm-up), synchronising `stream`.
double Time(const Stream& stream, int repeats, const std::function<void()>& fn) {
  return bench::MedianMs(
             repeats,
             [&] {
               fn();
               (void)stream.Synchronize();
             },
             /*warmup=*/1) /
         1000;
}

struct Data {
  int64_t m = 0;
  std::vector<float> x, y;
  std::vector<cf> c, f;
};

Data MakeData(int64_t m, int64_t n, uint32_t seed) {
  Data d;
  d.m = m;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-M_PI, M_PI);
  std::normal_distribution<float> g(0.f, 1.f);
  d.x.resize(m), d.y.resize(m), d.c.resize(m), d.f.resize(n * n);
  for (int64_t j = 0; j < m; ++j) d.x[j] = u(rng), d.y[j] = u(rng), d.c[j] = cf(g(rng), g(rng));
  for (auto& v : d.f) v = cf(g(rng), g(rng));
  return d;
}

// Where the data lives for one backend.
struct Arrays {
  float* x;
  float* y;
  cf* c;
  cf* f;
  std::vector<std::shared_ptr<Buffer>> keep;
};

Arrays Place(Data& d, const Stream& stream) {
  Arrays a{d.x.data(), d.y.data(), d.c.data(), d.f.data(), {}};
  if (stream.backend() == Backend::kCpu) return a;
  auto up = [&](const void* src, size_t bytes) {
    auto b = Buffer::Allocate(MemoryKind::kDevice, bytes, stream.ordinal());
    if (!b.ok()) {
      std::fprintf(stderr, "%s\n", b.status().ToString().c_str());
      std::exit(1);
    }
    (void)CopyBytes((*b)->data(), MemoryKind::kDevice, src, MemoryKind::kHost, bytes, stream);
    a.keep.push_back(*b);
    return (*b)->data();
  };
  a.x = static_cast<float*>(up(d.x.data(), d.m * sizeof(float)));
  a.y = static_cast<float*>(up(d.y.data(), d.m * sizeof(float)));
  a.c = static_cast<cf*>(up(d.c.data(), d.m * sizeof(cf)));
  a.f = static_cast<cf*>(up(d.f.data(), d.f.size() * sizeof(cf)));
  (void)stream.Synchronize();
  return a;
}

struct Rates {
  double type1 = 0, type2 = 0, setpoints = 0;  // points per second
  int width = 0;
};

Rates Measure(const Stream& stream, Data& d, int64_t n, double tol, int repeats) {
  Rates r;
  Arrays a = Place(d, stream);
  NufftOptions o;
  o.tolerance = tol;
  for (NufftType type : {NufftType::kType1, NufftType::kType2}) {
    auto plan = NufftPlan<float>::Create(stream, type, {n, n, 1}, o);
    if (!plan.ok()) {
      std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
      std::exit(1);
    }
    r.width = (*plan)->kernel_info().width;
    const double sp = Time(stream, 1, [&] { (void)(*plan)->SetPoints(d.m, a.x, a.y, nullptr); });
    const double ex = Time(stream, repeats, [&] { (void)(*plan)->Execute(a.c, a.f); });
    (type == NufftType::kType1 ? r.type1 : r.type2) = d.m / ex;
    if (type == NufftType::kType1) r.setpoints = d.m / sp;
  }
  return r;
}

// Bytes an ideal type-1 / type-2 moves: per point its coordinates (8),
// value (8) and index (4); the fine grid written and read about 4 times
// (zero/spread, FFT in and out, deconvolution) and the modes once.
double IdealBytes(int64_t m, int64_t n) {
  const double fine = 4.0 * n * n * sizeof(cf);
  return m * 20.0 + 4 * fine + n * n * sizeof(cf);
}

struct ToeplitzTimes {
  double apply = 0, pair = 0;  // seconds
};

ToeplitzTimes MeasureToeplitz(const Stream& stream, Data& d, int64_t n, double tol, int repeats) {
  Arrays a = Place(d, stream);
  ToeplitzOptions to;
  to.tolerance = tol;
  auto op = ToeplitzOperator<float>::Create(stream, {n, n, 1}, d.m, a.x, a.y, nullptr, nullptr, to);
  NufftOptions o;
  o.tolerance = tol;
  auto t1 = NufftPlan<float>::Create(stream, NufftType::kType1, {n, n, 1}, o);
  auto t2 = NufftPlan<float>::Create(stream, NufftType::kType2, {n, n, 1}, o);
  if (!op.ok() || !t1.ok() || !t2.ok()) {
    std::fprintf(stderr, "toeplitz setup failed: %s\n", op.status().ToString().c_str());
    std::exit(1);
  }
  (void)(*t1)->SetPoints(d.m, a.x, a.y, nullptr);
  (void)(*t2)->SetPoints(d.m, a.x, a.y, nullptr);
  std::vector<std::shared_ptr<Buffer>> keep;
  cf* out = nullptr;
  std::vector<cf> host_out;
  if (stream.backend() == Backend::kCpu) {
    host_out.resize(n * n);
    out = host_out.data();
  } else {
    auto b = Buffer::Allocate(MemoryKind::kDevice, n * n * sizeof(cf), stream.ordinal());
    keep.push_back(*b);
    out = static_cast<cf*>((*b)->data());
  }
  ToeplitzTimes t;
  t.apply = Time(stream, repeats, [&] { (void)(*op)->Apply(a.f, out); });
  t.pair = Time(stream, repeats, [&] {
    (void)(*t2)->Execute(a.c, a.f);
    (void)(*t1)->Execute(a.c, out);
  });
  return t;
}

int Main() {
  const int64_t n = absl::GetFlag(FLAGS_modes);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  std::vector<double> tols;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_tolerances), ',')) {
    double v;
    if (absl::SimpleAtod(s, &v)) tols.push_back(v);
  }
  const bool gpu = DeviceRegistry::Get().cuda_available();
  const bool run_cpu = absl::GetFlag(FLAGS_cpu) || !gpu;
  std::printf("# NUFFT 2-D float, %lld x %lld modes, sigma 2, uniform random points\n\n", static_cast<long long>(n),
              static_cast<long long>(n));
  std::printf("device: %s; CPU threads: %d; GPU points %lld, CPU points %lld; median of %d\n\n",
              DeviceRegistry::Get().Describe().c_str(), CpuThreads(),
              static_cast<long long>(absl::GetFlag(FLAGS_points)), static_cast<long long>(absl::GetFlag(FLAGS_cpu_points)),
              repeats);
  Data gpu_data = MakeData(gpu ? absl::GetFlag(FLAGS_points) : 0, n, 1);
  Data cpu_data = MakeData(run_cpu ? absl::GetFlag(FLAGS_cpu_points) : 0, n, 2);
  std::printf("| tol | w | CUDA type 1 (pts/s) | CUDA type 2 (pts/s) | CUDA SetPoints (pts/s) | CPU type 1 | CPU type 2 | "
              "CUDA/CPU type 1 | CUDA/CPU type 2 | roofline type 1 | roofline type 2 |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  auto stream_or = gpu ? Stream::Create(Backend::kCuda) : absl::StatusOr<Stream>(Stream::Cpu());
  const Stream cpu = Stream::Cpu();
  for (double tol : tols) {
    Rates g, c;
    if (gpu) g = Measure(*stream_or, gpu_data, n, tol, repeats);
    if (run_cpu) c = Measure(cpu, cpu_data, n, tol, std::max(1, repeats / 2));
    const int w = gpu ? g.width : c.width;
    auto rate = [](double v) { return v > 0 ? absl::StrFormat("%.3g", v) : std::string("-"); };
    auto ratio = [](double a, double b) { return a > 0 && b > 0 ? absl::StrFormat("%.1fx", a / b) : std::string("-"); };
    auto roof = [&](double pts_per_s) {
      if (pts_per_s <= 0) return std::string("-");
      const double m = static_cast<double>(gpu_data.m);
      const double ideal_s = IdealBytes(gpu_data.m, n) / (absl::GetFlag(FLAGS_bandwidth_gbs) * 1e9);
      return absl::StrFormat("%.0f%%", 100.0 * ideal_s / (m / pts_per_s));
    };
    std::printf("| %.0e | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", tol, w, rate(g.type1).c_str(),
                rate(g.type2).c_str(), rate(g.setpoints).c_str(), rate(c.type1).c_str(), rate(c.type2).c_str(),
                ratio(g.type1, c.type1).c_str(), ratio(g.type2, c.type2).c_str(), roof(g.type1).c_str(),
                roof(g.type2).c_str());
  }
  std::printf("\n# Toeplitz matvec vs the type-2 + type-1 pair (tol 1e-5, same points)\n\n");
  std::printf("| backend | points | Toeplitz Apply (ms) | NUFFT pair (ms) | pair / Toeplitz |\n|---|---|---|---|---|\n");
  if (gpu) {
    const ToeplitzTimes t = MeasureToeplitz(*stream_or, gpu_data, n, 1e-5, repeats);
    std::printf("| cuda | %lld | %.3f | %.3f | %.1fx |\n", static_cast<long long>(gpu_data.m), 1e3 * t.apply,
                1e3 * t.pair, t.pair / t.apply);
  }
  if (run_cpu) {
    const ToeplitzTimes t = MeasureToeplitz(cpu, cpu_data, n, 1e-5, std::max(1, repeats / 2));
    std::printf("| cpu | %lld | %.3f | %.3f | %.1fx |\n", static_cast<long long>(cpu_data.m), 1e3 * t.apply,
                1e3 * t.pair, t.pair / t.apply);
  }
  return 0;
}

}  // namespace
}  // namespace nufft
}  // namespace recon
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::recon::nufft::Main();
}
