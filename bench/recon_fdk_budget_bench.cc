// FDK within a device-memory budget (issue 36: "a 1024^3 cone reconstruction
// from 1440 views of 1536^2 runs within a 20 GB device budget"). The
// projections (synthetic, made here) stay in host memory; FbpPlan::RunOutOfCore
// streams them in chunks of views through pinned memory and, when the volume
// does not fit, splits it into z-slabs reading only their detector rows.
//
//   recon_fdk_budget_bench [--budgets_gb=20] [--volume=1024] [--views=1440]
//                          [--det_cols=1536] [--det_rows=1536]
//                          [--interpolation=texture|exact] [--check] [--device=cuda|cpu] [--small]
//
// --budgets_gb: decimal GB (1e9 bytes), a comma-separated list, one case each.
// --small: 128^3 from 180 views of 192^2 (the CPU case: --device=cpu --small,
// budgets 0.03,0.01 GB by default then). --check: also the resident Run with
// the same views per chunk (needs the whole sinogram and volume in memory
// beside the budget) and the largest difference relative to its peak.
//
// One summary line per case:
//   fdk_budget volume=1024^3 views=1440 det=1536x1536 budget_gb=20.00 slabs=1 planes<=1024 rows=1536/1536
//     chunk=43 model_gb=... peak_tracked_gb=... peak_driver_gb=... plan_s=... run_s=... gups=... resident_gb=...
//     [max_rel_diff=...] ok
// peak_tracked_gb: the plan's device Buffers and texture array (DeviceMemoryTracker high-water mark);
// peak_driver_gb: cudaMemGetInfo's used memory sampled every 2 ms during plan and run, less the used memory
// before (includes cuFFT's and the CUDA context's own growth); resident_gb: what the resident Run would need.
// Without a GPU (and without --device=cpu) it prints why and exits 0.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/fdk_bench_case.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/memory_kind_for.h"
#include "common/parallel.h"
#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/geometry.h"

ABSL_FLAG(std::string, budgets_gb, "", "device budgets in GB (1e9 bytes), comma-separated (default 20; --small 0.03,0.01)");
ABSL_FLAG(int64_t, volume, 1024, "volume edge in voxels (cube of 1 mm voxels)");
ABSL_FLAG(int64_t, views, 1440, "projections over 2 pi");
ABSL_FLAG(int64_t, det_cols, 1536, "detector columns");
ABSL_FLAG(int64_t, det_rows, 1536, "detector rows");
ABSL_FLAG(std::string, interpolation, "texture", "texture or exact (CUDA)");
ABSL_FLAG(bool, check, false, "also run the resident plan and compare");
ABSL_FLAG(bool, small, false, "128^3 from 180 views of 192^2");
ABSL_FLAG(std::string, device, "cuda", "cuda or cpu");

namespace tessera {
namespace recon {
namespace fbp {
namespace {

using bench::Clock;
using bench::SecondsSince;

constexpr double kGb = 1e9;


// The device's used memory (cudaMemGetInfo), its high-water mark sampled on a
// thread while alive; 0 on the CPU.
class DriverMemorySampler {
 public:
  explicit DriverMemorySampler(bool cuda) : cuda_(cuda) {
    if (!cuda_) return;
    baseline_ = Used();
    peak_ = baseline_;
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        peak_ = std::max(peak_.load(), Used());
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  ~DriverMemorySampler() { Stop(); }
  // The peak above the baseline, in bytes.
  int64_t Stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
      peak_ = std::max(peak_.load(), Used());
    }
    return peak_ - baseline_;
  }

 private:
  int64_t Used() const {
    if (!cuda_) return 0;
    auto info = QueryGpuMemory(0);
    return info.ok() ? static_cast<int64_t>(info->used_bytes()) : 0;
  }
  bool cuda_;
  int64_t baseline_ = 0;
  std::atomic<int64_t> peak_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The resident Run with the same batching, its volume back on the host.
std::vector<float> RunResident(const CtGeometry& g, const Stream& stream, FbpOptions options,
                               const std::vector<float>& sino) {
  options.device_memory_bytes = 0;
  auto plan = bench::ValueOrExit(FbpPlan::Create(g, stream, options), "resident plan");
  const MemoryKind kind = MemoryKindFor(stream);
  auto s = bench::ValueOrExit(Buffer::Allocate(kind, sino.size() * sizeof(float)), "resident sinogram");
  auto v = bench::ValueOrExit(Buffer::Allocate(kind, g.volume.size() * sizeof(float)), "resident volume");
  bench::ExitUnlessOk(CopyBytes(s->data(), kind, sino.data(), MemoryKind::kHost, sino.size() * sizeof(float), stream),
                      "upload");
  bench::ExitUnlessOk(plan->Run(static_cast<const float*>(s->data()), static_cast<float*>(v->data())), "resident run");
  std::vector<float> out(g.volume.size());
  bench::ExitUnlessOk(CopyBytes(out.data(), MemoryKind::kHost, v->data(), kind, out.size() * sizeof(float), stream),
                      "download");
  bench::ExitUnlessOk(stream.Synchronize(), "synchronize");
  return out;
}

int Main() {
  const bool small = absl::GetFlag(FLAGS_small);
  const int64_t n = small ? 128 : absl::GetFlag(FLAGS_volume);
  const int64_t views = small ? 180 : absl::GetFlag(FLAGS_views);
  const int64_t cols = small ? 192 : absl::GetFlag(FLAGS_det_cols);
  const int64_t rows = small ? 192 : absl::GetFlag(FLAGS_det_rows);
  std::string budgets_flag = absl::GetFlag(FLAGS_budgets_gb);
  if (budgets_flag.empty()) budgets_flag = small ? "0.03,0.01" : "20";
  std::vector<double> budgets;
  for (absl::string_view b : absl::StrSplit(budgets_flag, ',', absl::SkipEmpty())) {
    double gb = 0;
    if (!absl::SimpleAtod(b, &gb) || !(gb > 0)) {
      std::fprintf(stderr, "--budgets_gb: '%s' is not a positive number\n", std::string(b).c_str());
      return 2;
    }
    budgets.push_back(gb);
  }
  const bool on_cpu = absl::GetFlag(FLAGS_device) == "cpu";
  if (!on_cpu && !DeviceRegistry::Get().cuda_available()) {
    std::printf("recon_fdk_budget_bench: no GPU (%s); use --device=cpu --small for the CPU backend\n",
                DeviceRegistry::Get().cuda_unavailable_reason().c_str());
    return 0;
  }
  const std::string interpolation = absl::GetFlag(FLAGS_interpolation);
  if (interpolation != "texture" && interpolation != "exact") {
    std::fprintf(stderr, "--interpolation must be texture or exact\n");
    return 2;
  }
  const CtGeometry g = bench::FdkBenchGeometry(n, views, cols, rows);
  std::printf("# FDK out of core: %s; device %s; interpolation %s\n", Describe(g).c_str(),
              on_cpu ? "cpu" : DeviceRegistry::Get().Describe().c_str(), on_cpu ? "exact" : interpolation.c_str());
  std::fflush(stdout);
  const auto t_make = Clock::now();
  const std::vector<float> sino = bench::FdkBenchSinogram(g);
  std::printf("# synthetic projections: %.2f GB in %.1f s\n", sino.size() * 4.0 / kGb, SecondsSince(t_make));
  std::vector<float> volume(g.volume.size());
  const Stream stream = on_cpu ? Stream::Cpu() : bench::ValueOrExit(Stream::Create(Backend::kCuda), "stream");

  for (double gb : budgets) {
    FbpOptions options;
    options.interpolation = interpolation == "exact" ? FbpInterpolation::kExact : FbpInterpolation::kTexture;
    options.device_memory_bytes = static_cast<int64_t>(gb * kGb);
    const int64_t resident = bench::ValueOrExit(FbpResidentBytes(g, options, stream.backend()), "resident bytes");
    auto tracker = std::make_shared<DeviceMemoryTracker>();
    DriverMemorySampler sampler(!on_cpu);
    const auto t_plan = Clock::now();
    std::unique_ptr<FbpPlan> plan;
    {
      ScopedDeviceMemoryCharge charge(tracker);
      auto created = FbpPlan::Create(g, stream, options);
      if (!created.ok()) {
        sampler.Stop();
        std::printf("fdk_budget volume=%lld^3 views=%lld det=%lldx%lld budget_gb=%.2f resident_gb=%.2f failed: %s\n",
                    static_cast<long long>(n), static_cast<long long>(views), static_cast<long long>(cols),
                    static_cast<long long>(rows), gb, resident / kGb, created.status().ToString().c_str());
        std::fflush(stdout);
        continue;
      }
      plan = std::move(*created);
    }
    const double plan_s = SecondsSince(t_plan);
    const auto t_run = Clock::now();
    const absl::Status status = plan->RunOutOfCore(sino.data(), volume.data());
    const double run_s = SecondsSince(t_run);
    const int64_t driver_peak = sampler.Stop();
    const FdkChunking& c = plan->chunking();
    std::string line = absl::StrFormat(
        "fdk_budget volume=%d^3 views=%d det=%dx%d budget_gb=%.2f slabs=%d planes<=%d rows=%d/%d chunk=%d "
        "model_gb=%.2f peak_tracked_gb=%.2f peak_driver_gb=%.2f plan_s=%.2f run_s=%.2f gups=%.1f resident_gb=%.2f",
        n, views, cols, rows, gb, c.slabs.size(), c.slab_planes, c.window_rows, rows, c.views_per_chunk,
        c.device_bytes / kGb, tracker->peak_bytes() / kGb, driver_peak / kGb, plan_s, run_s,
        static_cast<double>(g.volume.size()) * views / run_s / 1e9, resident / kGb);
    if (status.ok() && absl::GetFlag(FLAGS_check)) {
      options.views_per_batch = c.views_per_chunk;
      const std::vector<float> expected = RunResident(g, stream, options, sino);
      float peak = 0, worst = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        peak = std::max(peak, std::fabs(expected[i]));
        worst = std::max(worst, std::fabs(expected[i] - volume[i]));
      }
      absl::StrAppendFormat(&line, " max_rel_diff=%.2e", peak > 0 ? worst / peak : worst);
    }
    absl::StrAppend(&line, status.ok() ? " ok" : " failed: " + status.ToString());
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace fbp
}  // namespace recon
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::recon::fbp::Main();
}
