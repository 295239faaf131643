// FDK (cone-beam filtered back projection) on the GPU: a 512^3 volume from
// 720 projections of 1024^2 over a full circle (DSO 1024 mm, DOD 512 mm,
// 1 mm voxels), the goal being under 1 s on an H200.
//
//   recon_fdk_bench [--volume=512] [--views=720] [--det_cols=1024] [--det_rows=1024]
//                   [--reps=3] [--batch=0] [--filter=ram-lak] [--small] [--device=cuda|cpu] [--derivative]
//
// --small: 128^3 from 180 views of 256^2 (a quick run; also what --device=cpu
// is meant for). Variants, side by side in one run: interpolation (texture:
// hardware bilinear from a layered cudaArray; exact: float bilinear from a
// zero-bordered global-memory store) x execution mode. Per variant: median of
// --reps runs after a warm-up of
//   filter     pre-weighting + cuFFT ramp filter + copy into the projection store
//   backproj   the voxel-driven back projection (GUPS: giga voxel-view updates/s)
//   total      the whole Run with per-stage synchronisation (the two above)
//   untimed    the whole Run without the per-stage synchronisation
// "vs goal" is untimed / 1000 ms; "vs first" the untimed time relative to the
// first row; "rel L2" the volume's difference from the first row's volume;
// --derivative adds rows for ShortScanMethod::kDerivative (derivative +
// Hilbert filtering, 1 / D back projection; issue 36) in the default mode,
// whose "rel L2" is its difference from the ramp FDK, not a parity check.
// "scratch" the plan's tracked device memory (FFT buffer, store, cuFFT work
// area, texture array). The sinogram is a smooth pattern with hashed noise
// (timing does not depend on values). Without a GPU (and without
// --device=cpu) it prints why and exits 0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "bench/fdk_bench_case.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/parallel.h"
#include "kernels/reconstruction/execution_mode.h"
#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/geometry.h"

ABSL_FLAG(int64_t, volume, 512, "volume edge in voxels (cube of 1 mm voxels)");
ABSL_FLAG(int64_t, views, 720, "projections over 2 pi");
ABSL_FLAG(int64_t, det_cols, 1024, "detector columns");
ABSL_FLAG(int64_t, det_rows, 1024, "detector rows");
ABSL_FLAG(int, reps, 3, "timed repetitions per variant (median reported)");
ABSL_FLAG(int64_t, batch, 0, "views per batch (0: the plan's default)");
ABSL_FLAG(std::string, filter, "ram-lak", "ram-lak, shepp-logan, cosine or hann");
ABSL_FLAG(bool, small, false, "128^3 from 180 views of 256^2");
ABSL_FLAG(std::string, device, "cuda", "cuda or cpu");
ABSL_FLAG(bool, derivative, false, "also time ShortScanMethod::kDerivative (each interpolation, default mode)");

namespace tessera {
namespace recon {
namespace fbp {
namespace {

using bench::Clock;
using bench::MsSince;
using bench::Median;

struct Variant {
  FbpInterpolation interpolation;
  ExecutionMode mode;
  ShortScanMethod method = ShortScanMethod::kParker;
};

struct Row {
  std::string name;
  double filter_ms = 0, backproject_ms = 0, total_ms = 0, untimed_ms = 0, rel_l2 = 0;
  size_t scratch = 0;
  std::string error;
};


using bench::RelL2;

int Main() {
  const bool small = absl::GetFlag(FLAGS_small);
  const int64_t n = small ? 128 : absl::GetFlag(FLAGS_volume);
  const int64_t views = small ? 180 : absl::GetFlag(FLAGS_views);
  const int64_t cols = small ? 256 : absl::GetFlag(FLAGS_det_cols);
  const int64_t rows = small ? 256 : absl::GetFlag(FLAGS_det_rows);
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  auto filter = ParseFilterKind(absl::GetFlag(FLAGS_filter));
  if (!filter.ok()) {
    std::fprintf(stderr, "%s\n", std::string(filter.status().message()).c_str());
    return 2;
  }
  const bool on_cpu = absl::GetFlag(FLAGS_device) == "cpu";
  if (!on_cpu && !DeviceRegistry::Get().cuda_available()) {
    std::printf("recon_fdk_bench: no GPU (%s); use --device=cpu --small for the CPU backend\n",
                DeviceRegistry::Get().cuda_unavailable_reason().c_str());
    return 0;
  }
  const CtGeometry g = bench::FdkBenchGeometry(n, views, cols, rows);
  std::printf("FDK: %s\ndevice: %s, filter %s, %d reps (median)\n", Describe(g).c_str(),
              on_cpu ? "cpu" : DeviceRegistry::Get().Describe().c_str(), FilterKindName(*filter), reps);
  std::fflush(stdout);

  const std::vector<float> host_sino = bench::FdkBenchSinogram(g);
  auto stream_or = on_cpu ? absl::StatusOr<Stream>(Stream::Cpu()) : Stream::Create(Backend::kCuda);
  if (!stream_or.ok()) {
    std::fprintf(stderr, "stream: %s\n", std::string(stream_or.status().message()).c_str());
    return 1;
  }
  const Stream& stream = *stream_or;
  const MemoryKind kind = on_cpu ? MemoryKind::kHost : MemoryKind::kDevice;
  auto sino_buf = Buffer::Allocate(kind, host_sino.size() * sizeof(float));
  auto vol_buf = Buffer::Allocate(kind, static_cast<size_t>(g.volume.size()) * sizeof(float));
  if (!sino_buf.ok() || !vol_buf.ok()) {
    std::fprintf(stderr, "allocation failed\n");
    return 1;
  }
  if (!CopyBytes((*sino_buf)->data(), kind, host_sino.data(), MemoryKind::kHost, host_sino.size() * sizeof(float),
                 stream)
           .ok() ||
      !stream.Synchronize().ok()) {
    std::fprintf(stderr, "upload failed\n");
    return 1;
  }
  const float* sino = static_cast<const float*>((*sino_buf)->data());
  float* vol = static_cast<float*>((*vol_buf)->data());

  std::vector<Variant> variants;
  for (FbpInterpolation interp : {FbpInterpolation::kTexture, FbpInterpolation::kExact}) {
    if (on_cpu && interp == FbpInterpolation::kTexture) continue;  // the CPU always interpolates exactly
    for (ExecutionMode mode : {ExecutionMode::kDefault, ExecutionMode::kDeterministic}) variants.push_back({interp, mode});
  }
  if (absl::GetFlag(FLAGS_derivative)) {
    for (FbpInterpolation interp : {FbpInterpolation::kTexture, FbpInterpolation::kExact}) {
      if (on_cpu && interp == FbpInterpolation::kTexture) continue;
      variants.push_back({interp, ExecutionMode::kDefault, ShortScanMethod::kDerivative});
    }
  }
  std::vector<Row> table;
  std::vector<float> first_volume, volume(g.volume.size());
  int64_t batch = 0;
  for (const Variant& v : variants) {
    Row row;
    row.name = absl::StrFormat("%s / %s%s", on_cpu ? "cpu" : FbpInterpolationName(v.interpolation),
                               ExecutionModeName(v.mode),
                               v.method == ShortScanMethod::kDerivative ? " / derivative" : "");
    FbpOptions options;
    options.filter = *filter;
    options.mode = v.mode;
    options.interpolation = v.interpolation;
    options.views_per_batch = absl::GetFlag(FLAGS_batch);
    options.short_scan = v.method;
    auto tracker = std::make_shared<DeviceMemoryTracker>();
    std::unique_ptr<FbpPlan> plan;
    {
      ScopedDeviceMemoryCharge charge(tracker);
      auto created = FbpPlan::Create(g, stream, options);
      if (!created.ok()) {
        row.error = std::string(created.status().message());
        table.push_back(row);
        continue;
      }
      plan = std::move(*created);
    }
    row.scratch = tracker->peak_bytes();
    batch = plan->views_per_batch();
    absl::Status status = plan->Run(sino, vol);  // warm-up
    std::vector<double> f, b, t, u;
    for (int r = 0; r < reps && status.ok(); ++r) {
      FbpTimings timings;
      status = plan->Run(sino, vol, nullptr, &timings);
      f.push_back(timings.filter_ms);
      b.push_back(timings.backproject_ms);
      t.push_back(timings.total_ms);
      const auto t0 = Clock::now();
      if (status.ok()) status = plan->Run(sino, vol);
      u.push_back(MsSince(t0));
    }
    if (!status.ok()) {
      row.error = std::string(status.message());
      table.push_back(row);
      continue;
    }
    row.filter_ms = Median(f);
    row.backproject_ms = Median(b);
    row.total_ms = Median(t);
    row.untimed_ms = Median(u);
    if (CopyBytes(volume.data(), MemoryKind::kHost, vol, kind, volume.size() * sizeof(float), stream).ok() &&
        stream.Synchronize().ok()) {
      if (first_volume.empty()) first_volume = volume;
      row.rel_l2 = RelL2(volume, first_volume);
    }
    table.push_back(row);
  }

  const double updates = static_cast<double>(g.volume.size()) * static_cast<double>(views);
  std::printf("\n%lld views per batch; %.3g voxel-view updates\n\n", static_cast<long long>(batch), updates);
  std::printf("| variant | filter ms | backproj ms | GUPS | total ms | untimed ms | vs goal (1 s) | vs first | rel L2 vs first | scratch MiB |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const double first = table.empty() ? 0 : table[0].untimed_ms;
  for (const Row& r : table) {
    if (!r.error.empty()) {
      std::printf("| %s | failed: %s | | | | | | | | |\n", r.name.c_str(), r.error.c_str());
      continue;
    }
    std::printf("| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.3f | %.2f | %.2e | %.0f |\n", r.name.c_str(), r.filter_ms,
                r.backproject_ms, updates / (r.backproject_ms * 1e-3) / 1e9, r.total_ms, r.untimed_ms,
                r.untimed_ms / 1000.0, first > 0 ? r.untimed_ms / first : 0.0, r.rel_l2,
                static_cast<double>(r.scratch) / (1024.0 * 1024.0));
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
