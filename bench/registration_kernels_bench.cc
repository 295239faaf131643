// Registration kernels on the GPU: fused (ours) against unfused baselines of
// the same math in the same binary, at 181x217x181, 301x370x316 and 512^3.
//
//   registration_kernels_bench [--quick] [--tune] [--reps=N]
//   registration_kernels_bench --cpu
//
// --quick: the first size only; --tune: the grid sampler's launch-shape
// variants at 512^3 instead of the comparison; --cpu: the CPU backend's
// kernels at 181x217x181 (works without a GPU).
// Per size and operation: median of N CUDA-event timings after warm-up, and
// the extra device memory the operation needs beyond its inputs and outputs
// (peak of the tracked Buffer allocations, DeviceMemoryTracker, during a
// first call that allocates its own scratch). Operations:
//   sampler fwd      out = I(A x + t + u(x))                    (trilinear, zeros)
//   sampler fwd+bwd  forward, then dL/du and dL/d[A|t]
//   LNCC fwd+bwd     loss and exact dL/dW, window 7
// Baselines (kernels/registration/unfused.h): PyTorch-style affine_grid
// (materialized homogeneous base grid, cuBLAS GEMM) + add + grid_sample, and
// separable-convolution LNCC with separate intermediate volumes.
// At the first size the fused and unfused results are also compared.
// Without a GPU it prints why and exits 0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/bench_util.h"
#include "bench/cuda_event_timing.h"
#include "bench/sampler_bench_case.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/status.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/parallel.h"
#include "kernels/registration/types.h"
#include "kernels/registration/unfused.h"
#include "kernels/registration/workspace.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace tessera {
namespace registration {
namespace {

// --cpu: the CPU backend at 181x217x181 (wall clock, median of 3), to show a
// whole registration fits in minutes on a small machine.
int RunCpu() {
  const bench::SamplerBenchCase c = bench::MakeSamplerBenchCase();
  const Dims3 d = c.dims;
  const int64_t n = d.size();
  std::printf("CPU backend, %s, %d threads (TESSERA_CPU_THREADS overrides)\n", DimsToString(d).c_str(),
              CpuThreads());
  std::vector<float> out(n), grad_disp(3 * n), grad_w(n);
  const std::vector<float>& image = c.image;
  const std::vector<float>& grad_out = c.grad_out;
  std::vector<float> grad_affine(kAffineParams);
  GridSampleArgs args = c.Args();
  const Stream cpu = Stream::Cpu();
  auto time_ms = [](const std::function<absl::Status()>& fn) { return bench::MedianMs(3, fn); };
  const double fwd = time_ms([&] { return GridSample(cpu, args, out.data()); });
  const double bwd = time_ms([&] {
    return GridSampleBackward(cpu, args, grad_out.data(), GridSampleGrads{grad_disp.data(), grad_affine.data(), nullptr});
  });
  LnccOptions lopt;
  float loss = 0;
  const double lncc = time_ms([&] { return Lncc(cpu, image.data(), out.data(), d, lopt, &loss, grad_w.data()); });
  const double mse = time_ms([&] { return Mse(cpu, image.data(), out.data(), d, &loss, grad_w.data()); });
  std::printf("  sampler fwd %.0f ms, sampler bwd (dL/du, dL/d[A|t]) %.0f ms, LNCC w7 fwd+bwd %.0f ms, MSE %.0f ms\n",
              fwd, bwd, lncc, mse);
  std::printf("  one LNCC iteration's kernels (warp, loss+grad, backward): %.2f s\n", (fwd + bwd + lncc) / 1e3);
  // Process CPU time (all threads) per call, median of 5: steadier than the
  // wall clock on a shared machine (issue 38's A/B runs).
  auto cpu_ms = [](const std::function<absl::Status()>& fn) {
    std::vector<double> ms;
    for (int r = 0; r < 5; ++r) {
      const std::clock_t c0 = std::clock();
      if (!fn().ok()) return -1.0;
      ms.push_back(1e3 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    }
    std::sort(ms.begin(), ms.end());
    return ms[2];
  };
  args.voxel_jitter_key = 0x9e3779b97f4a7c15ull;  // MI's jittered voxels, as the default deformable stage samples
  const double fwd_cpu = cpu_ms([&] { return GridSample(cpu, args, out.data()); });
  const double bwd_cpu = cpu_ms([&] {  // dL/du only, as the deformable stage asks
    return GridSampleBackward(cpu, args, grad_out.data(), GridSampleGrads{grad_disp.data(), nullptr, nullptr});
  });
  std::printf("  CPU time, jittered voxels: sampler fwd %.0f ms, sampler bwd (dL/du) %.0f ms\n", fwd_cpu, bwd_cpu);
  return 0;
}

#if TESSERA_WITH_CUDA

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kCopyBandwidth = 4.3e12;  // bytes/s, device-to-device copy measured on an H200 here

struct Options {
  bool quick = false;
  bool tune = false;
  int reps = 0;  // 0: adaptive
};

struct Row {
  std::string size;
  std::string op;
  double fused_ms = 0, fused_mib = 0;
  double base_ms = 0, base_mib = 0;
  double floor_ms = 0;  // compulsory bytes at the copy bandwidth
};

// Device array in a tracked Buffer.
struct DevFloats {
  std::shared_ptr<Buffer> buf;
  int64_t n = 0;
  float* data() const { return static_cast<float*>(buf->data()); }
};

absl::StatusOr<DevFloats> Alloc(int64_t n, const Stream& stream) {
  DevFloats d;
  d.n = n;
  TESSERA_ASSIGN_OR_RETURN(d.buf, Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * n, stream.ordinal()));
  return d;
}

absl::StatusOr<std::vector<float>> Download(const DevFloats& d, const Stream& stream) {
  std::vector<float> h(d.n);
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(h.data(), MemoryKind::kHost, d.data(), MemoryKind::kDevice, sizeof(float) * d.n, stream));
  return h;
}

absl::StatusOr<double> TimeMs(const Stream& stream, int warmup, int reps, const std::function<absl::Status()>& fn) {
  return bench::CudaEventMedianMs(stream, warmup, reps, fn);
}

// Runs `setup_and_first_call` (which allocates whatever scratch the
// operation needs and runs it once) and returns the extra device MiB it
// peaked at over what was allocated before.
absl::StatusOr<double> ExtraMiB(const Stream& stream, const std::function<absl::Status()>& setup_and_first_call) {
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  auto tracker = std::make_shared<DeviceMemoryTracker>();
  ScopedDeviceMemoryCharge charge(tracker);
  TESSERA_RETURN_IF_ERROR(setup_and_first_call());
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return tracker->peak_bytes() / kMiB;
}

int RepsFor(const Options& o, double est_ms, double budget_ms) {
  if (o.reps > 0) return o.reps;
  return static_cast<int>(std::clamp(budget_ms / std::max(est_ms, 1e-3), 5.0, 30.0));
}

absl::Status BenchSize(const Stream& stream, Dims3 d, bool check, const Options& opt, std::vector<Row>& rows) {
  const int64_t n = d.size();
  const std::string size = DimsToString(d);
  std::printf("== %s (%.1f M voxels)\n", size.c_str(), n / 1e6);
  std::fflush(stdout);

  // Inputs and outputs (not counted as extra memory).
  TESSERA_ASSIGN_OR_RETURN(DevFloats image, Alloc(n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats disp, Alloc(3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats affine, Alloc(kAffineParams, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats out, Alloc(n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats grad_out, Alloc(n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats grad_disp, Alloc(3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats grad_affine, Alloc(kAffineParams, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats out_base, Alloc(n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats grad_affine_base, Alloc(kAffineParams, stream));
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, image.data(), n, 1, 0.0f, 1.0f));
  // About +-1.5 voxels of displacement (normalized units: 2 / (n - 1) per voxel).
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, disp.data(), 3 * n, 2, -0.006f, 0.006f));
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, grad_out.data(), n, 3, -1.0f, 1.0f));
  const std::vector<float> theta = {0.98f, 0.05f, -0.02f, 0.01f, -0.04f, 1.01f, 0.03f, -0.02f,
                                    0.02f, -0.03f, 0.99f, 0.015f};
  TESSERA_RETURN_IF_ERROR(CopyBytes(affine.data(), MemoryKind::kDevice, theta.data(), MemoryKind::kHost,
                                    sizeof(float) * kAffineParams, stream));

  GridSampleArgs args;
  args.image = image.data();
  args.image_dims = d;
  args.affine = affine.data();
  args.disp = disp.data();
  args.out_dims = d;
  args.padding = Padding::kZeros;
  const GridSampleGrads grads{grad_disp.data(), grad_affine.data(), nullptr};

  // ---- sampler forward ----
  Row fwd{size, "sampler fwd"};
  fwd.floor_ms = 1e3 * (20.0 * n) / kCopyBandwidth;  // u, I, out
  TESSERA_ASSIGN_OR_RETURN(fwd.fused_mib, ExtraMiB(stream, [&] { return GridSample(stream, args, out.data()); }));
  std::unique_ptr<unfused::UnfusedSampler> base_fwd;
  TESSERA_ASSIGN_OR_RETURN(fwd.base_mib, ExtraMiB(stream, [&]() -> absl::Status {
                             TESSERA_ASSIGN_OR_RETURN(base_fwd, unfused::UnfusedSampler::Create(stream, d, false));
                             return base_fwd->Forward(args, out_base.data());
                           }));
  TESSERA_ASSIGN_OR_RETURN(double est, TimeMs(stream, 1, 1, [&] { return GridSample(stream, args, out.data()); }));
  TESSERA_ASSIGN_OR_RETURN(fwd.fused_ms,
                           TimeMs(stream, 2, RepsFor(opt, est, 300), [&] { return GridSample(stream, args, out.data()); }));
  TESSERA_ASSIGN_OR_RETURN(est, TimeMs(stream, 1, 1, [&] { return base_fwd->Forward(args, out_base.data()); }));
  TESSERA_ASSIGN_OR_RETURN(fwd.base_ms, TimeMs(stream, 2, RepsFor(opt, est, 300),
                                               [&] { return base_fwd->Forward(args, out_base.data()); }));
  base_fwd.reset();
  rows.push_back(fwd);
  std::printf("  sampler fwd      fused %8.3f ms  unfused %8.3f ms\n", fwd.fused_ms, fwd.base_ms);
  std::fflush(stdout);

  // ---- sampler forward + backward ----
  Row fb{size, "sampler fwd+bwd"};
  fb.floor_ms = 1e3 * (52.0 * n) / kCopyBandwidth;  // fwd 20 B + bwd: u, I, dL/dout, dL/du
  Workspace ws;
  auto fused_fb = [&]() -> absl::Status {
    TESSERA_RETURN_IF_ERROR(GridSample(stream, args, out.data()));
    return GridSampleBackward(stream, args, grad_out.data(), grads, &ws);
  };
  TESSERA_ASSIGN_OR_RETURN(fb.fused_mib, ExtraMiB(stream, fused_fb));
  std::unique_ptr<unfused::UnfusedSampler> base_fb;
  auto base_fb_run = [&]() -> absl::Status {
    TESSERA_RETURN_IF_ERROR(base_fb->Forward(args, out_base.data()));
    return base_fb->Backward(args, grad_out.data(), grad_affine_base.data());
  };
  TESSERA_ASSIGN_OR_RETURN(fb.base_mib, ExtraMiB(stream, [&]() -> absl::Status {
                             TESSERA_ASSIGN_OR_RETURN(base_fb, unfused::UnfusedSampler::Create(stream, d, true));
                             return base_fb_run();
                           }));
  TESSERA_ASSIGN_OR_RETURN(est, TimeMs(stream, 1, 1, fused_fb));
  TESSERA_ASSIGN_OR_RETURN(fb.fused_ms, TimeMs(stream, 2, RepsFor(opt, est, 400), fused_fb));
  TESSERA_ASSIGN_OR_RETURN(est, TimeMs(stream, 1, 1, base_fb_run));
  TESSERA_ASSIGN_OR_RETURN(fb.base_ms, TimeMs(stream, 2, RepsFor(opt, est, 400), base_fb_run));
  rows.push_back(fb);
  std::printf("  sampler fwd+bwd  fused %8.3f ms  unfused %8.3f ms\n", fb.fused_ms, fb.base_ms);
  std::fflush(stdout);

  if (check) {
    TESSERA_ASSIGN_OR_RETURN(auto o1, Download(out, stream));
    TESSERA_ASSIGN_OR_RETURN(auto o2, Download(out_base, stream));
    TESSERA_ASSIGN_OR_RETURN(auto g1, Download(grad_disp, stream));
    std::vector<float> g2(3 * n);
    TESSERA_RETURN_IF_ERROR(CopyBytes(g2.data(), MemoryKind::kHost, base_fb->grad_grid(), MemoryKind::kDevice,
                                      sizeof(float) * 3 * n, stream));
    TESSERA_ASSIGN_OR_RETURN(auto a1, Download(grad_affine, stream));
    TESSERA_ASSIGN_OR_RETURN(auto a2, Download(grad_affine_base, stream));
    double num = 0, den = 0, gnum = 0, gden = 0, anum = 0, aden = 0;
    for (int64_t v = 0; v < n; ++v) {
      num += (o1[v] - o2[v]) * double(o1[v] - o2[v]);
      den += o2[v] * double(o2[v]);
      for (int c = 0; c < 3; ++c) {
        const double x = g1[v + c * n], y = g2[3 * v + c];  // planar vs interleaved
        gnum += (x - y) * (x - y);
        gden += y * y;
      }
    }
    for (int p = 0; p < kAffineParams; ++p) {
      anum += (a1[p] - a2[p]) * double(a1[p] - a2[p]);
      aden += a2[p] * double(a2[p]);
    }
    std::printf("  check fused vs unfused (rel L2): out %.2e, dL/du %.2e, dL/d[A|t] %.2e\n", std::sqrt(num / den),
                std::sqrt(gnum / gden), std::sqrt(anum / aden));
  }
  base_fb.reset();
  ws.Release();

  // ---- LNCC forward + backward ----
  // F: the image; W: the warped output (correlated with F).
  TESSERA_ASSIGN_OR_RETURN(DevFloats loss, Alloc(1, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats loss_base, Alloc(1, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats grad_w, Alloc(n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats grad_w_base, Alloc(n, stream));
  // Free what LNCC does not use so the baseline's 17 volumes fit at 512^3.
  disp = DevFloats();
  grad_disp = DevFloats();
  LnccOptions lopt;
  lopt.window = 7;
  Row lc{size, "LNCC w7 fwd+bwd"};
  lc.floor_ms = 1e3 * (12.0 * n) / kCopyBandwidth;  // F, W, dL/dW
  LnccWorkspace lws;
  auto fused_lncc = [&] {
    return Lncc(stream, image.data(), out.data(), d, lopt, loss.data(), grad_w.data(), &lws);
  };
  std::unique_ptr<unfused::UnfusedLncc> base_lncc;
  auto base_lncc_run = [&] {
    return base_lncc->Run(image.data(), out.data(), lopt.eps, loss_base.data(), grad_w_base.data());
  };
  TESSERA_ASSIGN_OR_RETURN(lc.base_mib, ExtraMiB(stream, [&]() -> absl::Status {
                             TESSERA_ASSIGN_OR_RETURN(base_lncc, unfused::UnfusedLncc::Create(stream, d, 7, true));
                             return base_lncc_run();
                           }));
  // Loss only first (no gradient: the fused kernel keeps no intermediates).
  Row lf{size, "LNCC w7 fwd"};
  lf.floor_ms = 1e3 * (8.0 * n) / kCopyBandwidth;  // F, W
  auto fused_loss = [&] { return Lncc(stream, image.data(), out.data(), d, lopt, loss.data(), nullptr, &lws); };
  TESSERA_ASSIGN_OR_RETURN(lf.fused_mib, ExtraMiB(stream, fused_loss));
  {
    std::unique_ptr<unfused::UnfusedLncc> base_loss;
    auto base_loss_run = [&] { return base_loss->Run(image.data(), out.data(), lopt.eps, loss_base.data(), nullptr); };
    TESSERA_ASSIGN_OR_RETURN(lf.base_mib, ExtraMiB(stream, [&]() -> absl::Status {
                               TESSERA_ASSIGN_OR_RETURN(base_loss, unfused::UnfusedLncc::Create(stream, d, 7, false));
                               return base_loss_run();
                             }));
    TESSERA_ASSIGN_OR_RETURN(est, TimeMs(stream, 1, 1, fused_loss));
    TESSERA_ASSIGN_OR_RETURN(lf.fused_ms, TimeMs(stream, 2, RepsFor(opt, est, 300), fused_loss));
    TESSERA_ASSIGN_OR_RETURN(est, TimeMs(stream, 1, 1, base_loss_run));
    TESSERA_ASSIGN_OR_RETURN(lf.base_ms, TimeMs(stream, 1, RepsFor(opt, est, 300), base_loss_run));
  }
  rows.push_back(lf);
  std::printf("  LNCC w7 fwd      fused %8.3f ms  unfused %8.3f ms\n", lf.fused_ms, lf.base_ms);
  lws.Release();

  TESSERA_ASSIGN_OR_RETURN(lc.fused_mib, ExtraMiB(stream, fused_lncc));
  TESSERA_ASSIGN_OR_RETURN(est, TimeMs(stream, 1, 1, fused_lncc));
  TESSERA_ASSIGN_OR_RETURN(lc.fused_ms, TimeMs(stream, 2, RepsFor(opt, est, 500), fused_lncc));
  TESSERA_ASSIGN_OR_RETURN(est, TimeMs(stream, 1, 1, base_lncc_run));
  TESSERA_ASSIGN_OR_RETURN(lc.base_ms, TimeMs(stream, 1, RepsFor(opt, est, 500), base_lncc_run));
  rows.push_back(lc);
  std::printf("  LNCC w7 fwd+bwd  fused %8.3f ms  unfused %8.3f ms\n", lc.fused_ms, lc.base_ms);
  if (check) {
    TESSERA_ASSIGN_OR_RETURN(auto l1, Download(loss, stream));
    TESSERA_ASSIGN_OR_RETURN(auto l2, Download(loss_base, stream));
    TESSERA_ASSIGN_OR_RETURN(auto g1, Download(grad_w, stream));
    TESSERA_ASSIGN_OR_RETURN(auto g2, Download(grad_w_base, stream));
    double num = 0, den = 0;
    for (int64_t v = 0; v < n; ++v) {
      num += (g1[v] - g2[v]) * double(g1[v] - g2[v]);
      den += g2[v] * double(g2[v]);
    }
    std::printf("  check fused vs unfused: LNCC loss %.6f vs %.6f, dL/dW rel L2 %.2e (unfused is all-float)\n",
                l1[0], l2[0], std::sqrt(num / den));
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

void PrintTable(const std::vector<Row>& rows) {
  std::printf("\n%-13s %-17s %10s %10s %8s %11s %11s %8s %9s\n", "size", "operation", "ours ms", "unfused ms",
              "speedup", "ours MiB", "unfused MiB", "mem x", "floor ms");
  for (const Row& r : rows) {
    std::printf("%-13s %-17s %10.3f %10.3f %7.2fx %11.1f %11.1f %7.1fx %9.3f\n", r.size.c_str(), r.op.c_str(),
                r.fused_ms, r.base_ms, r.base_ms / r.fused_ms, r.fused_mib, r.base_mib,
                r.base_mib / std::max(r.fused_mib, 1e-3), r.floor_ms);
  }
  std::printf(
      "\n'ours/unfused MiB': device memory beyond inputs and outputs. 'floor': compulsory bytes (each input read\n"
      "and output written once) at the 4.3 TB/s copy bandwidth measured on an H200.\n");
}

void PrintTargets(const std::vector<Row>& rows) {
  struct Anchor {
    const char* op;
    double naive_ms, ffdp_ms, ffdp_gb, goal_ms, goal_gb;
  };
  const Anchor anchors[] = {
      {"sampler fwd", 14.4, 3.31, 0.5, 1.0, 0.0},
      {"sampler fwd+bwd", 17.5, 9.34, 2.0, 3.0, -1},
      {"LNCC w7 fwd+bwd", 128.0, 71.4, 5.1, 10.0, 2.0},
  };
  std::printf("\nAt 512^3 against docs/TARGETS.md (FFDP/FireANTs fused ops measured on an H200):\n");
  std::printf("%-17s %10s %12s %14s %10s %12s %s\n", "operation", "ours ms", "ours GB", "FFDP ms (GB)", "vs FFDP",
              "naive ms", "goal");
  for (const Anchor& a : anchors) {
    const Row* r = nullptr;
    for (const Row& row : rows) {
      if (row.size == "512x512x512" && row.op == a.op) r = &row;
    }
    if (r == nullptr) continue;
    const double gb = r->fused_mib * kMiB / 1e9;
    std::string goal = "<= " + std::to_string(a.goal_ms).substr(0, 4) + " ms";
    if (a.goal_gb > 0) goal += ", <= " + std::to_string(a.goal_gb).substr(0, 3) + " GB";
    if (a.goal_gb == 0) goal += ", no grid tensor";
    const bool met = r->fused_ms <= a.goal_ms && (a.goal_gb <= 0 || gb <= a.goal_gb);
    std::printf("%-17s %10.3f %12.3f %8.2f (%.1f) %9.2fx %12.1f %s: %s\n", a.op, r->fused_ms, gb, a.ffdp_ms,
                a.ffdp_gb, a.ffdp_ms / r->fused_ms, a.naive_ms, goal.c_str(), met ? "met" : "NOT met");
  }
}

// --tune: the sampler's launch-shape variants at 512^3 (GridSamplerTuning).
absl::Status Tune(const Stream& stream) {
  const Dims3 d{512, 512, 512};
  const int64_t n = d.size();
  TESSERA_ASSIGN_OR_RETURN(DevFloats image, Alloc(n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats disp, Alloc(3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats affine, Alloc(kAffineParams, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats out, Alloc(n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats grad_out, Alloc(n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats grad_disp, Alloc(3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(DevFloats grad_affine, Alloc(kAffineParams, stream));
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, image.data(), n, 1, 0.0f, 1.0f));
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, disp.data(), 3 * n, 2, -0.006f, 0.006f));
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, grad_out.data(), n, 3, -1.0f, 1.0f));
  const std::vector<float> theta = {0.98f, 0.05f, -0.02f, 0.01f, -0.04f, 1.01f, 0.03f, -0.02f,
                                    0.02f, -0.03f, 0.99f, 0.015f};
  TESSERA_RETURN_IF_ERROR(CopyBytes(affine.data(), MemoryKind::kDevice, theta.data(), MemoryKind::kHost,
                                    sizeof(float) * kAffineParams, stream));
  GridSampleArgs args;
  args.image = image.data();
  args.image_dims = d;
  args.affine = affine.data();
  args.disp = disp.data();
  args.out_dims = d;
  Workspace ws;
  std::printf("tuning the grid sampler at 512^3 (median of 20 each):\n");
  for (int bx : {32, 64, 128, 256}) {
    std::printf("  block_x %3d: fwd", bx);
    for (int fz : {2, 4, 8}) {
      GridSamplerTuning tuning;
      tuning.forward_z = fz;
      tuning.backward_unroll = 1;
      tuning.block_x = bx;
      TESSERA_ASSIGN_OR_RETURN(double ms,
                               TimeMs(stream, 3, 20, [&] { return GridSample(stream, args, out.data(), tuning); }));
      std::printf("  z%d %.3f", fz, ms);
    }
    std::printf("  | bwd");
    for (int unroll : {1, 2, 4}) {
      GridSamplerTuning tuning;
      tuning.forward_z = 4;
      tuning.backward_unroll = unroll;
      tuning.block_x = bx;
      TESSERA_ASSIGN_OR_RETURN(double ms, TimeMs(stream, 3, 20, [&] {
                                 return GridSampleBackward(
                                     stream, args, grad_out.data(),
                                     GridSampleGrads{grad_disp.data(), grad_affine.data(), nullptr}, &ws, tuning);
                               }));
      std::printf("  u%d %.3f", unroll, ms);
    }
    std::printf(" ms\n");
  }
  return absl::OkStatus();
}

int Run(const Options& opt) {
  auto stream_or = Stream::Create(Backend::kCuda);
  if (!stream_or.ok()) {
    std::printf("cannot create a CUDA stream: %s\n", stream_or.status().ToString().c_str());
    return 1;
  }
  const Stream& stream = *stream_or;
  std::printf("device: %s\n", DeviceRegistry::Get().Describe().c_str());
  if (opt.tune) {
    const absl::Status st = Tune(stream);
    if (!st.ok()) {
      std::printf("tuning FAILED: %s\n", st.ToString().c_str());
      return 1;
    }
    return 0;
  }
  std::vector<Dims3> sizes = {{181, 217, 181}, {301, 370, 316}, {512, 512, 512}};
  if (opt.quick) sizes.resize(1);
  std::vector<Row> rows;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const absl::Status st = BenchSize(stream, sizes[i], /*check=*/i == 0, opt, rows);
    if (!st.ok()) {
      std::printf("FAILED at %s: %s\n", DimsToString(sizes[i]).c_str(), st.ToString().c_str());
      PrintTable(rows);
      return 1;
    }
  }
  PrintTable(rows);
  PrintTargets(rows);
  return 0;
}

#endif  // TESSERA_WITH_CUDA

}  // namespace
}  // namespace registration
}  // namespace tessera

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--cpu") == 0) return tessera::registration::RunCpu();
  const auto& registry = tessera::DeviceRegistry::Get();
  if (!registry.cuda_available()) {
    std::printf("registration_kernels_bench: no GPU, nothing to measure (%s)\n",
                registry.cuda_unavailable_reason().c_str());
    return 0;
  }
#if TESSERA_WITH_CUDA
  tessera::registration::Options opt;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      opt.quick = true;
    } else if (std::strcmp(argv[i], "--tune") == 0) {
      opt.tune = true;
    } else if (std::strncmp(argv[i], "--reps=", 7) == 0) {
      opt.reps = std::atoi(argv[i] + 7);
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--tune] [--reps=N]\n", argv[0]);
      return 2;
    }
  }
  return tessera::registration::Run(opt);
#else
  (void)argc;
  (void)argv;
  return 0;
#endif
}
