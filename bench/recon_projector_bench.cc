// Distance-driven CT projector (kernels/reconstruction/ct/dd_projector.h):
// forward and back throughput per geometry kind and execution mode on the
// GPU, and the CPU paths against the GPU at a small size.
//
//   recon_projector_bench [--small] [--reps=5]
//                         [--geometries=parallel2d,fan2d,cone3d,cone_vec]
//                         [--n2d=512 --views2d=720 --cols2d=768]
//                         [--n3d=256 --views3d=360 --det3d=384]
//                         [--cpu_n2d=128 --cpu_views2d=180 --cpu_n3d=48 --cpu_views3d=60] [--cpu_only]
//
// Geometries: parallel2d (views over pi), fan2d (DSO 2n, DOD n, over 2 pi),
// cone3d (circular, DSO 2n, DOD n), cone_vec (cone3d with a helical source
// rise and a detector rolled 2 degrees about the central ray: the projector's
// row-coupled path). --small: 2-D 256^2 / 360 views / 384 cols, 3-D 128^3 /
// 180 views / 192^2.
// GPU table: per geometry, operation and mode, the median of --reps
// CUDA-event timings after a warm-up; us per view; GUPS = voxel-view pairs
// (views x voxels) per second / 1e9, the work measure of a projector;
// back / fwd = back time over forward time of the same geometry and mode (the
// two are transposes of one matrix); "view-stream GB/s" = (views x volume
// bytes + sinogram bytes) / time, the traffic if every view read the whole
// volume once from memory: a projector's data reuse lives in L1/L2, so this
// may exceed the HBM peak (it measures the reuse, not a floor; the old
// one-read-of-each "x floor" column is gone: the work is views x voxels).
// CPU table: at the --cpu_* sizes, the reference (double summed-area tables),
// the GPU algorithm's host run (cpu::Gather*) and the CPU backend
// (DdProjector on a CPU stream), the GPU, and relative L2 differences from the
// reference. Without a GPU only the CPU table is printed (GPU columns "-").
// Between them, the 3-D back projection's z run (back_z_run 1, 2, 4, 8).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/parallel.h"
#include "kernels/reconstruction/ct/dd_projector.h"
#include "kernels/reconstruction/execution_mode.h"
#include "kernels/reconstruction/geometry.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

ABSL_FLAG(bool, small, false, "2-D 256^2/360/384 and 3-D 128^3/180/192^2");
ABSL_FLAG(int, reps, 5, "timed repetitions (median reported)");
ABSL_FLAG(std::vector<std::string>, geometries,
          std::vector<std::string>({"parallel2d", "fan2d", "cone3d", "cone_vec"}), "which geometry kinds");
ABSL_FLAG(int64_t, n2d, 512, "2-D image edge (1 mm pixels)");
ABSL_FLAG(int64_t, views2d, 720, "2-D views");
ABSL_FLAG(int64_t, cols2d, 768, "2-D detector columns");
ABSL_FLAG(int64_t, n3d, 256, "3-D volume edge (1 mm voxels)");
ABSL_FLAG(int64_t, views3d, 360, "3-D views over 2 pi");
ABSL_FLAG(int64_t, det3d, 384, "3-D detector rows = columns");
ABSL_FLAG(int64_t, cpu_n2d, 128, "CPU comparison: 2-D edge");
ABSL_FLAG(int64_t, cpu_views2d, 180, "CPU comparison: 2-D views");
ABSL_FLAG(int64_t, cpu_n3d, 48, "CPU comparison: 3-D edge");
ABSL_FLAG(int64_t, cpu_views3d, 60, "CPU comparison: 3-D views");
ABSL_FLAG(bool, cpu_only, false, "skip the GPU tables");

namespace tessera {
namespace recon {
namespace ct {
namespace {

using bench::Clock;
using bench::Median;

struct Sizes {
  int64_t n, views, cols, rows;
};

// The detector sees a field of 1.45 n (2-D: the image diagonal) at the
// iso-centre, 1.25 n for 3-D cones (as the FDK bench).
CtGeometry MakeGeometry(const std::string& kind, const Sizes& z) {
  const double n = static_cast<double>(z.n), dso = 2 * n, dod = n, mag = (dso + dod) / dso;
  if (kind == "parallel2d") {
    return {CenteredVolume(z.n, z.n), ParallelBeam2D(EvenAngles(z.views, M_PI), 1.45 * n / z.cols, z.cols)};
  }
  if (kind == "fan2d") {
    return {CenteredVolume(z.n, z.n),
            FanBeam2D(EvenAngles(z.views, 2 * M_PI), mag * 1.45 * n / z.cols, z.cols, dso, dod)};
  }
  const double pixel = mag * 1.25 * n / z.cols, pixel_v = mag * 1.25 * n / z.rows;
  CtGeometry g{CenteredVolume(z.n, z.n, z.n),
               ConeBeam(EvenAngles(z.views, 2 * M_PI), pixel, pixel_v, z.rows, z.cols, dso, dod)};
  if (kind == "cone_vec") {
    // Helical rise of a tenth of the volume, detector rolled about the ray.
    const double roll = 2 * M_PI / 180, c = std::cos(roll), s = std::sin(roll);
    for (int64_t i = 0; i < z.views; ++i) {
      ProjectionVectors& w = g.projection.views[i];
      const double dz = 0.1 * n * (static_cast<double>(i) / z.views - 0.5);
      w.source_or_ray.z += dz;
      w.det_center.z += dz;
      const Vec3 u = w.u, v = w.v;
      const double su = pixel / pixel_v;  // keep the cell sizes
      w.u = {c * u.x + s * v.x * su, c * u.y + s * v.y * su, c * u.z + s * v.z * su};
      w.v = {-s * u.x / su + c * v.x, -s * u.y / su + c * v.y, -s * u.z / su + c * v.z};
    }
  }
  return g;
}

Sizes FullSizes(const std::string& kind, bool small) {
  if (kind == "parallel2d" || kind == "fan2d") {
    return small ? Sizes{256, 360, 384, 1}
                 : Sizes{absl::GetFlag(FLAGS_n2d), absl::GetFlag(FLAGS_views2d), absl::GetFlag(FLAGS_cols2d), 1};
  }
  const int64_t det = absl::GetFlag(FLAGS_det3d);
  return small ? Sizes{128, 180, 192, 192} : Sizes{absl::GetFlag(FLAGS_n3d), absl::GetFlag(FLAGS_views3d), det, det};
}

Sizes CpuSizes(const std::string& kind) {
  if (kind == "parallel2d" || kind == "fan2d") {
    const int64_t n = absl::GetFlag(FLAGS_cpu_n2d);
    return {n, absl::GetFlag(FLAGS_cpu_views2d), n * 3 / 2, 1};
  }
  const int64_t n = absl::GetFlag(FLAGS_cpu_n3d);
  return {n, absl::GetFlag(FLAGS_cpu_views3d), n * 3 / 2, n * 3 / 2};
}

std::string SizeText(const Sizes& z, bool is_2d) {
  return is_2d ? absl::StrFormat("%d^2, %d x %d", z.n, z.views, z.cols)
               : absl::StrFormat("%d^3, %d x %dx%d", z.n, z.views, z.rows, z.cols);
}

std::vector<float> Pattern(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t h = (static_cast<uint32_t>(i) + seed) * 2654435761u;
    v[i] = 0.25f + static_cast<float>((h >> 12) & 0xffff) / 65536.0f;
  }
  return v;
}

using bench::RelL2;

#if TESSERA_WITH_CUDA
// Device copies of a volume and a sinogram for one geometry.
struct DeviceData {
  std::shared_ptr<Buffer> volume, sinogram;
};

absl::Status Upload(const std::vector<float>& host, std::shared_ptr<Buffer>* buf, const Stream& stream) {
  auto b = UploadVector(host, stream);
  if (!b.ok()) return b.status();
  *buf = *b;
  return absl::OkStatus();
}

std::vector<float> Download(const Buffer& buf, size_t n, const Stream& stream) {
  std::vector<float> host(n);
  (void)CopyBytes(host.data(), MemoryKind::kHost, buf.data(), MemoryKind::kDevice, n * sizeof(float), stream);
  (void)stream.Synchronize();
  return host;
}

// Median of `reps` CUDA-event timings of fn after one warm-up; -1 on error.
double TimeGpu(const Stream& stream, int reps, const std::function<absl::Status()>& fn) {
  if (!fn().ok() || !stream.Synchronize().ok()) return -1;
  cudaStream_t cs = static_cast<cudaStream_t>(stream.native());
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(start, cs);
    const absl::Status s = fn();
    cudaEventRecord(stop, cs);
    cudaEventSynchronize(stop);
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    if (!s.ok()) {
      ms.clear();
      break;
    }
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms.empty() ? -1 : Median(ms);
}

double DevicePeakGbps(int ordinal) {
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal) != cudaSuccess) {
    return 0;
  }
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // double data rate
}

void RunGpuTable(const std::vector<std::string>& kinds, bool small, int reps, const Stream& stream) {
  std::printf("\n## GPU: %s (device attributes: %.0f GB/s)\n\n", DeviceRegistry::Get().Describe().c_str(),
              DevicePeakGbps(stream.ordinal()));
  std::printf("| geometry | size | op | mode | ms | us/view | GUPS | back / fwd | view-stream GB/s |\n");
  std::printf("|---|---|---|---|---:|---:|---:|---:|---:|\n");
  for (const std::string& kind : kinds) {
    const Sizes z = FullSizes(kind, small);
    const CtGeometry g = MakeGeometry(kind, z);
    DeviceData d;
    if (!Upload(Pattern(g.volume.size(), 1), &d.volume, stream).ok() ||
        !Upload(Pattern(g.projection.sinogram_size(), 2), &d.sinogram, stream).ok()) {
      std::printf("| %s | %s | - | - | allocation failed | | | | |\n", kind.c_str(),
                  SizeText(z, g.projection.is_2d).c_str());
      continue;
    }
    const double views = static_cast<double>(g.projection.num_views());
    const double stream_bytes = 4.0 * (views * static_cast<double>(g.volume.size()) +
                                       static_cast<double>(g.projection.sinogram_size()));
    const double pairs = views * static_cast<double>(g.volume.size());
    for (ExecutionMode mode : {ExecutionMode::kDefault, ExecutionMode::kDeterministic}) {
      auto projector = DdProjector::Create(g, stream, {mode, 1});
      if (!projector.ok()) {
        std::printf("| %s | | | %s | error: %s | | | | |\n", kind.c_str(), ExecutionModeName(mode),
                    std::string(projector.status().message()).c_str());
        continue;
      }
      DdProjector& p = **projector;
      double forward_ms = 0;
      for (const bool forward : {true, false}) {
        float* vol = static_cast<float*>(d.volume->data());
        float* sino = static_cast<float*>(d.sinogram->data());
        const double ms = TimeGpu(stream, reps, [&] { return forward ? p.Forward(vol, sino) : p.Back(sino, vol); });
        // Refill what the back projection overwrote so every run sees the same data.
        if (!forward) (void)Upload(Pattern(g.volume.size(), 1), &d.volume, stream);
        if (forward) forward_ms = ms;
        const std::string ratio = forward || forward_ms <= 0 ? "-" : absl::StrFormat("%.2f", ms / forward_ms);
        std::printf("| %s | %s | %s | %s | %.3f | %.2f | %.1f | %s | %.0f |\n", kind.c_str(),
                    SizeText(z, g.projection.is_2d).c_str(), forward ? "forward" : "back", ExecutionModeName(mode), ms,
                    ms * 1e3 / views, pairs / (ms * 1e-3) / 1e9, ratio.c_str(), stream_bytes / (ms * 1e-3) / 1e9);
      }
    }
  }
}

// The 3-D back projection's z run (DdProjectorOptions::back_z_run) side by
// side: same sums, different speed.
void RunZRunTable(const std::vector<std::string>& kinds, bool small, int reps, const Stream& stream) {
  std::printf("\n## GPU 3-D back projection by z run (voxels along z per thread; deterministic mode; the default, "
              "0, picks 8 without row-coupled views and 4 with them)\n\n");
  std::printf("| geometry | size | z run | ms | GUPS | vs run 4 |\n|---|---|---:|---:|---:|---:|\n");
  for (const std::string& kind : kinds) {
    if (kind == "parallel2d" || kind == "fan2d") continue;
    const Sizes z = FullSizes(kind, small);
    const CtGeometry g = MakeGeometry(kind, z);
    DeviceData d;
    if (!Upload(Pattern(g.volume.size(), 1), &d.volume, stream).ok() ||
        !Upload(Pattern(g.projection.sinogram_size(), 2), &d.sinogram, stream).ok()) {
      continue;
    }
    const double pairs = static_cast<double>(g.projection.num_views()) * static_cast<double>(g.volume.size());
    std::vector<double> ms(4, -1);
    const int runs[4] = {1, 2, 4, 8};
    for (int r = 0; r < 4; ++r) {
      DdProjectorOptions o;
      o.mode = ExecutionMode::kDeterministic;
      o.back_z_run = runs[r];
      auto p = DdProjector::Create(g, stream, o);
      if (!p.ok()) continue;
      float* vol = static_cast<float*>(d.volume->data());
      const float* sino = static_cast<const float*>(d.sinogram->data());
      ms[r] = TimeGpu(stream, reps, [&] { return (*p)->Back(sino, vol); });
    }
    for (int r = 0; r < 4; ++r) {
      std::printf("| %s | %s | %d | %.3f | %.1f | %.2f |\n", kind.c_str(), SizeText(z, false).c_str(), runs[r], ms[r],
                  pairs / (ms[r] * 1e-3) / 1e9, ms[r] / ms[2]);
    }
  }
}
#endif  // TESSERA_WITH_CUDA

// Median wall time of `reps` runs of fn (ms); -1 on error.
double TimeCpu(int reps, const std::function<absl::Status()>& fn) { return bench::MedianMs(reps, fn); }

void RunCpuTable(const std::vector<std::string>& kinds, int reps, const Stream* gpu) {
  std::printf("\n## CPU paths (%d threads) vs GPU at small sizes\n\n", CpuThreads());
  std::printf(
      "reference: double summed-area tables (cpu::Forward/Back); gather: the GPU algorithm on the host "
      "(cpu::GatherForward/GatherBack); backend: DdProjector on a CPU stream. rel L2 against the reference.\n\n");
  std::printf("| geometry | size | op | reference ms | gather ms | backend ms | GPU ms | backend / GPU | gather rel L2 "
              "| GPU rel L2 |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  const int cpu_reps = std::max(1, std::min(reps, 3));
  for (const std::string& kind : kinds) {
    const Sizes z = CpuSizes(kind);
    const CtGeometry g = MakeGeometry(kind, z);
    auto cpu = DdProjector::Create(g, Stream::Cpu());
    if (!cpu.ok()) {
      std::printf("| %s | error: %s | | | | | | | | |\n", kind.c_str(), std::string(cpu.status().message()).c_str());
      continue;
    }
    const DdSystem& sys = (*cpu)->system();
    const std::vector<int64_t> views = SubsetViews(g.projection.num_views(), 1, kAllSubsets);
    const std::vector<float> x = Pattern(g.volume.size(), 3), y = Pattern(g.projection.sinogram_size(), 4);
    for (const bool forward : {true, false}) {
      std::vector<float> ref(forward ? y.size() : x.size()), gat(ref.size()), out(ref.size());
      const double ref_ms = TimeCpu(cpu_reps, [&] {
        forward ? cpu::Forward(sys, x.data(), views, ref.data()) : cpu::Back(sys, y.data(), views, ref.data());
        return absl::OkStatus();
      });
      const double gat_ms = TimeCpu(cpu_reps, [&] {
        forward ? cpu::GatherForward(sys, x.data(), views, gat.data())
                : cpu::GatherBack(sys, y.data(), views, gat.data());
        return absl::OkStatus();
      });
      const double backend_ms = TimeCpu(cpu_reps, [&] {
        return forward ? (*cpu)->Forward(x.data(), out.data()) : (*cpu)->Back(y.data(), out.data());
      });
      std::string gpu_ms = "-", ratio = "-", rel = "-";
#if TESSERA_WITH_CUDA
      if (gpu != nullptr) {
        auto p = DdProjector::Create(g, *gpu);
        std::shared_ptr<Buffer> dx, dy;
        if (p.ok() && Upload(x, &dx, *gpu).ok() && Upload(y, &dy, *gpu).ok()) {
          float* vx = static_cast<float*>(dx->data());
          float* vy = static_cast<float*>(dy->data());
          const double t = TimeGpu(*gpu, reps, [&] { return forward ? (*p)->Forward(vx, vy) : (*p)->Back(vy, vx); });
          const std::vector<float> dev = forward ? Download(*dy, y.size(), *gpu) : Download(*dx, x.size(), *gpu);
          gpu_ms = absl::StrFormat("%.3f", t);
          ratio = absl::StrFormat("%.0f", backend_ms / t);
          rel = absl::StrFormat("%.1e", RelL2(dev, ref));
        }
      }
#else
      (void)gpu;
#endif
      std::printf("| %s | %s | %s | %.1f | %.1f | %.1f | %s | %s | %.1e | %s |\n", kind.c_str(),
                  SizeText(z, g.projection.is_2d).c_str(), forward ? "forward" : "back", ref_ms, gat_ms, backend_ms,
                  gpu_ms.c_str(), ratio.c_str(), RelL2(gat, ref), rel.c_str());
    }
  }
}

int Main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows survive a crash later in the run
  const bool small = absl::GetFlag(FLAGS_small);
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  const std::vector<std::string> kinds = absl::GetFlag(FLAGS_geometries);
  for (const std::string& k : kinds) {
    if (k != "parallel2d" && k != "fan2d" && k != "cone3d" && k != "cone_vec") {
      std::fprintf(stderr, "unknown geometry %s\n", k.c_str());
      return 2;
    }
  }
  std::printf("# Distance-driven projector%s\n", small ? " (--small)" : "");
  const Stream* gpu = nullptr;
#if TESSERA_WITH_CUDA
  absl::StatusOr<Stream> stream = absl::FailedPreconditionError("no GPU");
  if (DeviceRegistry::Get().cuda_available() && !absl::GetFlag(FLAGS_cpu_only)) {
    stream = Stream::Create(Backend::kCuda, 0);
    if (stream.ok()) {
      gpu = &*stream;
      RunGpuTable(kinds, small, reps, *gpu);
      RunZRunTable(kinds, small, reps, *gpu);
    }
  }
#endif
  if (gpu == nullptr) {
    std::printf("\nNo GPU tables: %s\n", DeviceRegistry::Get().cuda_available()
                                             ? "--cpu_only"
                                             : DeviceRegistry::Get().cuda_unavailable_reason().c_str());
  }
  RunCpuTable(kinds, reps, gpu);
  return 0;
}

}  // namespace
}  // namespace ct
}  // namespace recon
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::recon::ct::Main();
}
