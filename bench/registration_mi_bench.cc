// Mattes mutual information forward + backward on the GPU: fused
// (kernels/registration/mutual_info.h: shared-memory histogram, on-the-fly
// Parzen gradient, O(1) extra memory) against an unfused implementation that
// materialises the B x N Parzen tables (mutual_info_unfused.h, cuBLAS GEMMs),
// at 181x217x181, 301x370x316 and 512^3 with 32 bins; plus Gaussian smoothing
// of a 512^3 vector field and one Adam step over it.
//
//   registration_mi_bench [--reps=N] [--quick]     (--quick: first size only)
//
// Times are medians of N wall-clock timings of the whole call (launches and
// the final synchronisation included) after one warm-up call. "extra MiB" is
// the device memory an operation allocates beyond its inputs and outputs:
// peak of the tracked Buffer allocations (DeviceMemoryTracker) during its
// first call. The unfused variant is skipped, and said so, when its tables do
// not fit in free device memory. Without a GPU it prints why and exits 0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "common/status.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/mutual_info_unfused.h"
#include "kernels/registration/reg_parallel.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace tessera {
namespace registration {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kBandwidth = 4.3e12;  // bytes/s, H200 device copy bandwidth (TARGETS.md floor)

struct Options {
  int reps = 5;
  bool quick = false;
};

double MedianMs(const std::function<absl::Status()>& fn, const Stream& stream, int reps, absl::Status* status) {
  const double ms = bench::MedianMs(
      reps,
      [&] {
        absl::Status s = fn();
        if (s.ok()) s = stream.Synchronize();
        if (!s.ok()) *status = s;
        return s;
      },
      /*warmup=*/1);
  return ms < 0 ? NAN : ms;
}

// Extra device bytes during one call of fn.
size_t ExtraBytes(const std::function<absl::Status()>& fn, const Stream& stream, absl::Status* status) {
  auto tracker = std::make_shared<DeviceMemoryTracker>();
  ScopedDeviceMemoryCharge charge(tracker);
  absl::Status s = fn();
  if (s.ok()) s = stream.Synchronize();
  if (!s.ok()) *status = s;
  return tracker->peak_bytes();
}

// A brain-like pair: 40% constant background, smooth structure plus hashed
// noise in the foreground; W is a nonlinear, noisy function of F (multi-modal).
void MakePair(const Shape& shape, NDArray* f, NDArray* w) {
  *f = NDArray::Allocate(shape, DType::kFloat32).value();
  *w = NDArray::Allocate(shape, DType::kFloat32).value();
  const int64_t nx = shape[0], ny = shape[1], nz = shape[2];
  float* F = f->data<float>();
  float* W = w->data<float>();
  reg_internal::ParallelFor(nz, 1, [&](int64_t z0, int64_t z1) {
    for (int64_t k = z0; k < z1; ++k) {
      for (int64_t j = 0; j < ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) {
          const int64_t v = i + nx * (j + ny * k);
          uint64_t h = uint64_t(v) * 0x9E3779B97F4A7C15ull;
          h ^= h >> 29;
          h *= 0xBF58476D1CE4E5B9ull;
          h ^= h >> 32;
          const float noise = float(h & 0xFFFF) / 65535.f - 0.5f;
          const float dx = float(i) / nx - 0.5f, dy = float(j) / ny - 0.5f, dz = float(k) / nz - 0.5f;
          const bool fg = dx * dx + dy * dy + dz * dz < 0.2f;
          const float base = 0.5f + 0.3f * std::sin(9.f * dx) * std::cos(7.f * dy + 5.f * dz);
          F[v] = fg ? base + 0.05f * noise : 0.f;
          W[v] = fg ? 0.2f + 0.7f * base * base + 0.08f * noise : 0.05f;
        }
      }
    }
  });
}

struct MiRow {
  std::string size;
  double fused_ms = NAN, fused_mib = NAN;
  double fused_fwd_ms = NAN;  // forward only (histogram + finalize)
  double unfused_ms = NAN, unfused_mib = NAN;
  double mi_fused = NAN, mi_unfused = NAN;
  double grad_rel_diff = NAN;  // max |g_fused - g_unfused| / max |g_fused| (first size only)
  std::string note;
};

absl::Status BenchMi(const Shape& shape, const Options& opt, bool compare_grads, const Stream& stream, MiRow* row) {
  row->size = ShapeToString(shape);
  NDArray hf, hw;
  MakePair(shape, &hf, &hw);
  TESSERA_ASSIGN_OR_RETURN(NDArray f, hf.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(NDArray w, hw.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(NDArray grad, NDArray::Allocate(shape, DType::kFloat32, MemoryKind::kDevice,
                                                           stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  hf = NDArray();
  hw = NDArray();
  MattesMiOptions o;  // 32 bins
  o.fixed_min = 0.f;
  o.fixed_max = 1.f;
  o.warped_min = 0.f;
  o.warped_max = 1.f;
  const int64_t n = f.num_elements();

  // Fused: extra memory from a call that allocates its own scratch; timing
  // with a reused scratch (as a registration loop would).
  absl::Status st;
  MattesMiResult fused;
  row->fused_mib = ExtraBytes([&] {
    auto r = MattesMutualInformation(f, w, nullptr, o, &grad, stream);
    if (r.ok()) fused = *r;
    return r.status();
  }, stream, &st) / kMiB;
  TESSERA_RETURN_IF_ERROR(st);
  row->mi_fused = fused.mutual_information;
  TESSERA_ASSIGN_OR_RETURN(size_t scratch_bytes, MattesMiScratchBytes(o.bins, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto scratch, Buffer::Allocate(MemoryKind::kDevice, scratch_bytes, stream.ordinal()));
  row->fused_ms = MedianMs([&] { return MattesMutualInformation(f, w, nullptr, o, &grad, stream, scratch.get()).status(); },
                           stream, opt.reps, &st);
  TESSERA_RETURN_IF_ERROR(st);
  row->fused_fwd_ms = MedianMs(
      [&] { return MattesMutualInformation(f, w, nullptr, o, nullptr, stream, scratch.get()).status(); }, stream,
      opt.reps, &st);
  TESSERA_RETURN_IF_ERROR(st);
  scratch.reset();
  std::vector<float> fused_grad;
  if (compare_grads) {
    TESSERA_RETURN_IF_ERROR(MattesMutualInformation(f, w, nullptr, o, &grad, stream).status());
    fused_grad.resize(n);
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(fused_grad.data(), MemoryKind::kHost, grad.raw_data(), MemoryKind::kDevice, grad.nbytes(), stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }

  // Unfused, when its tables fit (with 2 GiB to spare for cuBLAS and the driver).
  const size_t need = MattesMiUnfused::DeviceBytes(n, o.bins, true);
  size_t free_bytes = 0;
#if TESSERA_WITH_CUDA
  size_t total_bytes = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
#endif
  if (n >= (int64_t{1} << 31) - 1) {
    row->note = "unfused skipped: N >= 2^31 (cuBLAS int dims)";
    return absl::OkStatus();
  }
  if (need + (size_t{2} << 30) > free_bytes) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "unfused skipped: needs %.1f GiB of tables, %.1f GiB free", need / kMiB / 1024,
                  free_bytes / kMiB / 1024);
    row->note = buf;
    return absl::OkStatus();
  }
  TESSERA_ASSIGN_OR_RETURN(auto unfused, MattesMiUnfused::Create(stream));
  MattesMiResult base;
  row->unfused_mib = ExtraBytes([&] {
    auto r = unfused->Run(f, w, nullptr, o, &grad);
    if (r.ok()) base = *r;
    return r.status();
  }, stream, &st) / kMiB;
  TESSERA_RETURN_IF_ERROR(st);
  row->mi_unfused = base.mutual_information;
  if (compare_grads) {
    std::vector<float> g2(n);
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(g2.data(), MemoryKind::kHost, grad.raw_data(), MemoryKind::kDevice, grad.nbytes(), stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      diff = std::max(diff, double(std::abs(g2[i] - fused_grad[i])));
      ref = std::max(ref, double(std::abs(fused_grad[i])));
    }
    row->grad_rel_diff = diff / ref;
  }
  row->unfused_ms = MedianMs([&] { return unfused->Run(f, w, nullptr, o, &grad).status(); }, stream,
                             std::max(1, opt.reps / 2), &st);
  TESSERA_RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

absl::Status BenchSmoothAndAdam(const Options& opt, const Stream& stream) {
  const Shape shape = {512, 512, 512, 3};
  const int64_t n = NumElements(shape);
  std::printf("\n512^3 x 3 vector field (%.0f MiB per array):\n", n * 4 / kMiB);
  // Contents do not matter for timing; fill on the host with a cheap pattern.
  NDArray host = NDArray::Allocate(shape, DType::kFloat32).value();
  reg_internal::ParallelFor(n, 1 << 20, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) host.data<float>()[i] = float((i * 2654435761ull) % 1000) * 1e-3f - 0.5f;
  });
  TESSERA_ASSIGN_OR_RETURN(NDArray u, host.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(NDArray g, host.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  host = NDArray();

  absl::Status st;
  const std::array<double, 3> sigma = {1.5, 1.5, 1.5};
  const size_t scratch_bytes = GaussianSmoothScratchBytes(shape, sigma);
  TESSERA_ASSIGN_OR_RETURN(auto scratch, Buffer::Allocate(MemoryKind::kDevice, scratch_bytes, stream.ordinal()));
  const double smooth_ms =
      MedianMs([&] { return GaussianSmooth(u, &u, sigma, stream, scratch.get()); }, stream, opt.reps, &st);
  TESSERA_RETURN_IF_ERROR(st);
  // x pass in place (read + write), y pass to scratch, z pass back: 3 reads + 3 writes per component.
  const double smooth_bytes = 6.0 * n * 4;
  std::printf("  Gaussian smooth, sigma 1.5 (11 taps/axis), in place: %8.2f ms  %6.0f GB/s  (floor %.2f ms; extra %.0f MiB scratch)\n",
              smooth_ms, smooth_bytes / (smooth_ms * 1e-3) / 1e9, smooth_bytes / kBandwidth * 1e3,
              scratch_bytes / kMiB);
  scratch.reset();

  TESSERA_ASSIGN_OR_RETURN(NDArray m, NDArray::Allocate(shape, DType::kFloat32, MemoryKind::kDevice, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(NDArray v, NDArray::Allocate(shape, DType::kFloat32, MemoryKind::kDevice, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CopyBytes(m.raw_data(), MemoryKind::kDevice, g.raw_data(), MemoryKind::kDevice, m.nbytes(), stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(v.raw_data(), MemoryKind::kDevice, g.raw_data(), MemoryKind::kDevice, v.nbytes(), stream));
  AdamOptions ao;
  ao.lr = 1e-3;
  int64_t t = 1;
  const double adam_ms = MedianMs([&] { return AdamStep(u, g, m, v, ao, t++, stream); }, stream, opt.reps, &st);
  TESSERA_RETURN_IF_ERROR(st);
  const double adam_bytes = 7.0 * n * 4;  // read p, g, m, v; write p, m, v
  std::printf("  Adam step (fused, float4):                         %8.2f ms  %6.0f GB/s  (floor %.2f ms; extra 0 MiB)\n",
              adam_ms, adam_bytes / (adam_ms * 1e-3) / 1e9, adam_bytes / kBandwidth * 1e3);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--reps=", 7) == 0) opt.reps = std::max(1, std::atoi(argv[i] + 7));
    else if (std::strcmp(argv[i], "--quick") == 0) opt.quick = true;
    else {
      std::fprintf(stderr, "usage: %s [--reps=N] [--quick]\n", argv[0]);
      return 2;
    }
  }
  const DeviceRegistry& reg = DeviceRegistry::Get();
  if (!reg.cuda_available()) {
    std::printf("registration_mi_bench: no GPU (%s); nothing to measure.\n", reg.cuda_unavailable_reason().c_str());
    return 0;
  }
  std::printf("registration_mi_bench on %s, fp32, 32 bins, reps %d\n", reg.Describe().c_str(), opt.reps);
  auto stream = Stream::Create(Backend::kCuda, 0);
  if (!stream.ok()) {
    std::fprintf(stderr, "%s\n", stream.status().ToString().c_str());
    return 1;
  }
  std::vector<Shape> sizes = {{181, 217, 181}, {301, 370, 316}, {512, 512, 512}};
  if (opt.quick) sizes.resize(1);
  std::vector<MiRow> rows;
  for (const Shape& s : sizes) {
    MiRow row;
    absl::Status st = BenchMi(s, opt, /*compare_grads=*/rows.empty(), *stream, &row);
    if (!st.ok()) {
      std::fprintf(stderr, "MI at %s: %s\n", ShapeToString(s).c_str(), st.ToString().c_str());
      return 1;
    }
    rows.push_back(row);
    std::fflush(stdout);
  }
  std::printf("\nMattes MI forward + backward (loss and dLoss/dW), 32 bins:\n");
  std::printf("| size | fused ms (fwd only) | fused extra MiB | unfused ms | unfused extra MiB | speedup | memory ratio | MI fused | MI unfused |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const MiRow& r : rows) {
    std::printf("| %s | %.2f (%.2f) | %.1f | ", r.size.c_str(), r.fused_ms, r.fused_fwd_ms, r.fused_mib);
    if (std::isnan(r.unfused_ms)) {
      std::printf("— | — | — | — | %.5f | — |\n", r.mi_fused);
    } else {
      std::printf("%.2f | %.0f | %.1fx | %.0fx | %.5f | %.5f |\n", r.unfused_ms, r.unfused_mib,
                  r.unfused_ms / r.fused_ms, r.unfused_mib / std::max(r.fused_mib, 1e-9), r.mi_fused, r.mi_unfused);
    }
  }
  for (const MiRow& r : rows) {
    if (!r.note.empty()) std::printf("  %s: %s\n", r.size.c_str(), r.note.c_str());
    if (!std::isnan(r.grad_rel_diff)) {
      std::printf("  %s: gradients fused vs unfused: max |diff| / max |grad| = %.2e\n", r.size.c_str(),
                  r.grad_rel_diff);
    }
  }
  std::printf("  anchor (TARGETS.md, 512^3 on an H200): naive PyTorch 688 ms / 115 GB; FFDP fused 389 ms / 0.5 GB; goal <= 20 ms, extra memory independent of N\n");
  absl::Status st = BenchSmoothAndAdam(opt, *stream);
  if (!st.ok()) {
    std::fprintf(stderr, "smoothing/Adam: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace registration
}  // namespace tessera

int main(int argc, char** argv) { return tessera::registration::Main(argc, argv); }
