// Issue 37: the grid sampler and the greedy (lean, mixed-precision) LNCC
// iteration against the memory floor, variants side by side in one process
// with today's kernels as the baseline.
//
//   registration_roofline_bench [--size=512] [--reps=15] [--part=all|sampler|iteration|smooth] [--iterations=6]
//                               [--iteration_sets=all|shipped]
//
// sampler: per operation, the compulsory bytes (each input read and each
// output written once) moved by cudaMemcpyAsync device to device (the copy
// kernel: reads and writes half the bytes each) give the reference time;
// "% copy" = copy ms / op ms (the share of the copy bandwidth the op reaches
// on its compulsory bytes). Variants are GridSamplerTuning settings (all
// compute the same values: "max diff" against today's default, measured
// with the random displacements, must be 0).
// Displacements: "random" (uniform +-1.5 voxels per voxel, as
// registration_kernels_bench) and "smooth" (a sinusoidal field of the same
// amplitude, what registration produces).
// iteration: the steps of RunLeanDeformableStage's mixed-precision iteration
// (deformable_stage.cc) timed one by one with CUDA events, the kernels of
// 2026-12-06 and the shipped defaults (also at other composition slab depths
// and with the run-kernel smoothing; --iteration_sets=shipped: the first two
// only, e.g. at 1024^3, where each set keeps a 12 GB host copy of u), and the
// largest difference of u after one iteration from the same start (0: the
// same results).
// smooth: the smoothing passes one by one per LeanSmoothTuning, and the
// composition alone per slab depth.
// Without a GPU it prints why and exits 0.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/bench_util.h"
#include "bench/cuda_event_timing.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "common/status.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/lean_smooth.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mixed_ops.h"
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

struct Options {
  int64_t size = 512;
  int reps = 15;
  int iterations = 6;
  bool all_iteration_sets = true;  // false: the 2026-12-06 kernels and the shipped defaults only
  bool sampler = true;
  bool iteration = true;
  bool smooth = true;
};

#if TESSERA_WITH_CUDA

// Device bytes in a tracked Buffer.
struct Dev {
  std::shared_ptr<Buffer> buf;
  size_t bytes = 0;
  template <typename T>
  T* as() const {
    return static_cast<T*>(buf->data());
  }
};

absl::StatusOr<Dev> Alloc(size_t bytes, const Stream& stream) {
  Dev d;
  d.bytes = bytes;
  TESSERA_ASSIGN_OR_RETURN(d.buf, Buffer::Allocate(MemoryKind::kDevice, bytes, stream.ordinal()));
  return d;
}

template <typename T>
absl::StatusOr<std::vector<T>> Download(const Dev& d, const Stream& stream) {
  std::vector<T> h(d.bytes / sizeof(T));
  TESSERA_RETURN_IF_ERROR(CopyBytes(h.data(), MemoryKind::kHost, d.buf->data(), MemoryKind::kDevice, d.bytes, stream));
  return h;
}

absl::StatusOr<double> TimeMs(const Stream& stream, int warmup, int reps, const std::function<absl::Status()>& fn) {
  return bench::CudaEventMedianMs(stream, warmup, reps, fn);
}

// Largest |a - b| over two host copies (NaN if any difference is NaN).
template <typename T>
double MaxDiff(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return std::nan("");
  std::vector<double> part(static_cast<size_t>(ParallelChunks(static_cast<int64_t>(a.size()))), 0.0);
  ParallelFor(static_cast<int64_t>(a.size()), [&](int64_t lo, int64_t hi, int chunk) {
    double m = 0;
    for (int64_t i = lo; i < hi; ++i) {
      double x, y;
      if constexpr (std::is_same<T, BFloat16>::value) {
        x = ToFloat(a[i]);
        y = ToFloat(b[i]);
      } else {
        x = a[i];
        y = b[i];
      }
      const double d = std::abs(x - y);
      if (!(d <= m)) m = d;  // NaN sticks
    }
    part[chunk] = m;
  });
  double m = 0;
  for (double p : part) {
    if (!(p <= m)) m = p;
  }
  return m;
}

struct Variant {
  const char* name;
  GridSamplerTuning tuning;
};

// The settings of 2026-12-06 (before issue 37), whatever the defaults are now.
GridSamplerTuning TodaysSampler() {
  GridSamplerTuning t;
  t.forward_z = 8;
  t.backward_unroll = 2;
  t.block_x = 32;
  t.vector_loads = false;
  return t;
}

std::vector<Variant> SamplerVariants() {
  std::vector<Variant> v;
  GridSamplerTuning t = TodaysSampler();
  v.push_back({"today (2026-12-06 defaults)", t});
  t.vector_loads = true;
  v.push_back({"vector loads", t});
  // The backward kernel with dL/d[A|t] spills at unroll 2 (64 registers,
  // ptxas -v: 12 bytes scalar, 88 with vector loads); unroll 1 does not.
  t.backward_unroll = 1;
  v.push_back({"vector loads, bwd unroll 1", t});
  t.vector_loads = false;
  v.push_back({"bwd unroll 1", t});
  t.vector_loads = true;
  t.backward_unroll = 2;
  t.forward_z = 4;
  v.push_back({"vector loads, z4", t});
  t.forward_z = 8;
  t.block_x = 64;
  v.push_back({"vector loads, bx64", t});
  return v;
}

// A smooth field of +-1.5 voxels (normalized units at 512: 0.006), planar.
absl::Status FillSmoothDisp(const Dev& disp, Dims3 d, float amplitude, const Stream& stream) {
  const int64_t n = d.size();
  std::vector<float> h(3 * n);
  ParallelFor(d.nz, [&](int64_t k0, int64_t k1, int) {
    for (int64_t k = k0; k < k1; ++k) {
      for (int64_t j = 0; j < d.ny; ++j) {
        for (int64_t i = 0; i < d.nx; ++i) {
          const int64_t v = i + d.nx * (j + d.ny * k);
          for (int c = 0; c < 3; ++c) {
            h[v + c * n] = amplitude * std::sin(0.031f * (c + 1) * i + 0.047f * j - 0.023f * (c + 2) * k + c);
          }
        }
      }
    }
  });
  return CopyBytes(disp.buf->data(), MemoryKind::kDevice, h.data(), MemoryKind::kHost, sizeof(float) * 3 * n, stream);
}

struct OpRow {
  std::string op, disp, variant;
  double ms = 0, copy_ms = 0, max_diff = 0;
};

absl::Status BenchSampler(const Stream& stream, const Options& opt) {
  const Dims3 d{opt.size, opt.size, opt.size};
  const int64_t n = d.size();
  std::printf("== sampler, %s (%.1f M voxels), trilinear, zeros padding, affine + displacement\n",
              DimsToString(d).c_str(), n / 1e6);
  std::fflush(stdout);
  TESSERA_ASSIGN_OR_RETURN(Dev image, Alloc(sizeof(float) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev image_h, Alloc(sizeof(Half) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev disp, Alloc(sizeof(float) * 3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev affine, Alloc(sizeof(float) * kAffineParams, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev out, Alloc(sizeof(float) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev grad_out, Alloc(sizeof(float) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev grad_disp, Alloc(sizeof(float) * 3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev grad_affine, Alloc(sizeof(float) * kAffineParams, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev grad_bf16, Alloc(sizeof(BFloat16) * 3 * n, stream));
  // Copy reference: up to 52 B per voxel in all, half read and half written.
  const size_t copy_half = 26 * static_cast<size_t>(n);
  TESSERA_ASSIGN_OR_RETURN(Dev copy_src, Alloc(copy_half, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev copy_dst, Alloc(copy_half, stream));
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, image.as<float>(), n, 1, 0.0f, 1.0f));
  TESSERA_RETURN_IF_ERROR(ConvertToHalf(stream, image.as<float>(), image_h.as<Half>(), n));
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, grad_out.as<float>(), n, 3, -1.0f, 1.0f));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(copy_src.buf->data(), 1, copy_half,
                                               static_cast<cudaStream_t>(stream.native())));
  const std::vector<float> theta = {0.98f, 0.05f, -0.02f, 0.01f, -0.04f, 1.01f, 0.03f, -0.02f,
                                    0.02f, -0.03f, 0.99f, 0.015f};
  TESSERA_RETURN_IF_ERROR(CopyBytes(affine.buf->data(), MemoryKind::kDevice, theta.data(), MemoryKind::kHost,
                                    sizeof(float) * kAffineParams, stream));
  const float amplitude = 1.5f * 2.0f / static_cast<float>(opt.size - 1);

  // Copy time of `bytes` compulsory bytes (bytes / 2 read, bytes / 2 written).
  auto copy_ms = [&](double bytes_per_voxel) -> absl::StatusOr<double> {
    const size_t half = static_cast<size_t>(bytes_per_voxel / 2 * n);
    return TimeMs(stream, 2, opt.reps, [&]() -> absl::Status {
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy_dst.buf->data(), copy_src.buf->data(), half,
                                                   cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream.native())));
      return absl::OkStatus();
    });
  };
  struct Op {
    const char* name;
    double bytes;  // compulsory bytes per voxel
  };
  const Op ops[] = {{"fwd", 20},
                    {"fwd+bwd (dL/du, dL/d[A|t])", 52},
                    {"bwd dL/du", 32},
                    {"lean fwd (fp16 image)", 18},
                    {"lean bwd dL/du (fp16 image, bf16 out)", 24}};
  double copy[5];
  for (int o = 0; o < 5; ++o) {
    TESSERA_ASSIGN_OR_RETURN(copy[o], copy_ms(ops[o].bytes));
    std::printf("  copy reference %-40s %5.0f B/voxel  %8.3f ms  (%.2f TB/s)\n", ops[o].name, ops[o].bytes, copy[o],
                ops[o].bytes * n / (copy[o] * 1e-3) / 1e12);
  }
  std::fflush(stdout);

  GridSampleArgs args;
  args.image = image.as<float>();
  args.image_dims = d;
  args.affine = affine.as<float>();
  args.disp = disp.as<float>();
  args.out_dims = d;
  args.padding = Padding::kZeros;
  GridSampleArgs half_args = args;
  half_args.image = nullptr;
  Workspace ws;
  std::vector<OpRow> rows;
  const std::vector<Variant> variants = SamplerVariants();
  for (const char* disp_kind : {"random", "smooth"}) {
    if (std::strcmp(disp_kind, "random") == 0) {
      TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, disp.as<float>(), 3 * n, 2, -amplitude, amplitude));
    } else {
      TESSERA_RETURN_IF_ERROR(FillSmoothDisp(disp, d, amplitude, stream));
    }
    for (int o = 0; o < 5; ++o) {
      std::vector<float> ref_f;
      std::vector<BFloat16> ref_b;
      for (size_t vi = 0; vi < variants.size(); ++vi) {
        const GridSamplerTuning& t = variants[vi].tuning;
        std::function<absl::Status()> fn;
        switch (o) {
          case 0:
            fn = [&] { return GridSample(stream, args, out.as<float>(), t); };
            break;
          case 1:
            fn = [&]() -> absl::Status {
              TESSERA_RETURN_IF_ERROR(GridSample(stream, args, out.as<float>(), t));
              return GridSampleBackward(stream, args, grad_out.as<float>(),
                                        GridSampleGrads{grad_disp.as<float>(), grad_affine.as<float>(), nullptr}, &ws, t);
            };
            break;
          case 2:
            fn = [&] {
              return GridSampleBackward(stream, args, grad_out.as<float>(),
                                        GridSampleGrads{grad_disp.as<float>(), nullptr, nullptr}, &ws, t);
            };
            break;
          case 3:
            fn = [&] { return GridSampleHalfImage(stream, half_args, image_h.as<Half>(), out.as<float>(), t); };
            break;
          default:
            fn = [&] {
              return GridSampleBackwardHalfImage(stream, half_args, image_h.as<Half>(), grad_out.as<float>(),
                                                 grad_bf16.as<BFloat16>(), t);
            };
            break;
        }
        OpRow row{ops[o].name, disp_kind, variants[vi].name};
        row.copy_ms = copy[o];
        TESSERA_ASSIGN_OR_RETURN(row.ms, TimeMs(stream, 2, opt.reps, fn));
        // Values against today's (random displacements only, to save time):
        // the op's main output.
        if (std::strcmp(disp_kind, "random") != 0) {
          row.max_diff = std::nan("");
        } else if (o == 0 || o == 3) {
          TESSERA_ASSIGN_OR_RETURN(auto h, Download<float>(out, stream));
          if (vi == 0) ref_f = std::move(h); else row.max_diff = MaxDiff(h, ref_f);
        } else if (o == 1 || o == 2) {
          TESSERA_ASSIGN_OR_RETURN(auto h, Download<float>(grad_disp, stream));
          if (vi == 0) ref_f = std::move(h); else row.max_diff = MaxDiff(h, ref_f);
        } else {
          TESSERA_ASSIGN_OR_RETURN(auto h, Download<BFloat16>(grad_bf16, stream));
          if (vi == 0) ref_b = std::move(h); else row.max_diff = MaxDiff(h, ref_b);
        }
        std::printf("  %-7s %-40s %-28s %8.3f ms  copy %8.3f ms  %5.1f %% copy  max diff %.3g\n", disp_kind,
                    ops[o].name, variants[vi].name, row.ms, row.copy_ms, 100.0 * row.copy_ms / row.ms, row.max_diff);
        std::fflush(stdout);
        rows.push_back(row);
      }
    }
  }
  std::printf("\n| disp | op | variant | ms | copy ms (same bytes) | %% of copy bandwidth | max diff vs today |\n"
              "|---|---|---|---|---|---|---|\n");
  for (const OpRow& r : rows) {
    std::printf("| %s | %s | %s | %.3f | %.3f | %.1f | %.3g |\n", r.disp.c_str(), r.op.c_str(), r.variant.c_str(), r.ms,
                r.copy_ms, 100.0 * r.copy_ms / r.ms, r.max_diff);
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

// ---- the greedy iteration ----

struct IterationConfig {
  const char* name;
  GridSamplerTuning sampler;
  LeanSmoothTuning smooth;
  int64_t compose_slab_depth = 0;  // GreedyStep::slab_depth (0: ComposeSlabDepth)
  bool compose_grid_3d = false;    // GreedyStep::cuda_grid_3d
  bool compose_index32 = false;    // GreedyStep::cuda_index32
};

constexpr int kSteps = 8;
const char* const kStepNames[kSteps] = {"sampler fwd (fp16 image)", "LNCC w7 fwd+bwd (fp16 fixed)", "loss to host",
                                        "sampler bwd dL/du (bf16)", "smooth dL/du sigma 6 (bf16)", "max |g|",
                                        "compose step", "smooth u sigma 0.5"};

absl::Status BenchIteration(const Stream& stream, const Options& opt) {
  const Dims3 d{opt.size, opt.size, opt.size};
  const int64_t n = d.size();
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  std::printf("\n== greedy LNCC iteration (lean stage, mixed precision), %s: %d iterations per setting, steps timed "
              "with events (median)\n",
              DimsToString(d).c_str(), opt.iterations);
  std::fflush(stdout);
  TESSERA_ASSIGN_OR_RETURN(Dev tmp, Alloc(sizeof(float) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev fixed_h, Alloc(sizeof(Half) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev moving_h, Alloc(sizeof(Half) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev affine, Alloc(sizeof(float) * kAffineParams, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev loss, Alloc(sizeof(float), stream));
  TESSERA_ASSIGN_OR_RETURN(Dev g, Alloc(sizeof(BFloat16) * 3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev u0, Alloc(sizeof(float) * 3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(NDArray u, NDArray::Allocate(Shape{d.nx, d.ny, d.nz, int64_t{3}}, DType::kFloat32, MemoryKind::kDevice,
                                                         stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(NDArray work, NDArray::Allocate(Shape{d.nx, d.ny, d.nz}, DType::kFloat32, MemoryKind::kDevice,
                                                            stream.ordinal()));
  // Images: uniform noise smoothed (sigma 2) so LNCC has structure; the moving
  // image is the fixed one with other noise added.
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, work.data<float>(), n, 11, 0.0f, 1.0f));
  TESSERA_RETURN_IF_ERROR(SmoothInPlaceWithScratch(work, {2, 2, 2}, tmp.as<float>(), n, stream));
  TESSERA_RETURN_IF_ERROR(ConvertToHalf(stream, work.data<float>(), fixed_h.as<Half>(), n));
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, tmp.as<float>(), n, 12, 0.0f, 0.05f));
  {
    // moving = fixed + small noise, on the host in float (no extra kernel).
    std::vector<float> a(n), b(n);
    TESSERA_RETURN_IF_ERROR(CopyBytes(a.data(), MemoryKind::kHost, work.raw_data(), MemoryKind::kDevice, 4 * n, stream));
    TESSERA_RETURN_IF_ERROR(CopyBytes(b.data(), MemoryKind::kHost, tmp.buf->data(), MemoryKind::kDevice, 4 * n, stream));
    ParallelFor(n, [&](int64_t lo, int64_t hi, int) {
      for (int64_t i = lo; i < hi; ++i) a[i] += b[i];
    });
    TESSERA_RETURN_IF_ERROR(CopyBytes(tmp.buf->data(), MemoryKind::kDevice, a.data(), MemoryKind::kHost, 4 * n, stream));
    TESSERA_RETURN_IF_ERROR(ConvertToHalf(stream, tmp.as<float>(), moving_h.as<Half>(), n));
  }
  const float amplitude = 1.0f * 2.0f / static_cast<float>(opt.size - 1);
  TESSERA_RETURN_IF_ERROR(FillSmoothDisp(u0, d, amplitude, stream));
  const std::vector<float> theta = {1.0f, 0.01f, 0, 0.002f, -0.01f, 1.0f, 0, 0, 0, 0, 1.0f, -0.003f};
  TESSERA_RETURN_IF_ERROR(CopyBytes(affine.buf->data(), MemoryKind::kDevice, theta.data(), MemoryKind::kHost,
                                    sizeof(float) * kAffineParams, stream));

  GridSampleArgs args;
  args.image_dims = d;
  args.affine = affine.as<float>();
  args.disp = u.data<float>();
  args.out_dims = d;
  args.padding = Padding::kZeros;
  LnccOptions lncc;
  lncc.window = 7;
  GreedyStep step;
  step.rule = GreedyStep::Rule::kScaled;
  step.to_normalized = {2.f / (d.nx - 1), 2.f / (d.ny - 1), 2.f / (d.nz - 1)};
  const double lr = 0.5;  // deformable_lr_voxels' default
  LnccWorkspace lncc_ws;
  Workspace stats_ws, compose_ws;

  // Every setting explicit (the first is the baseline of the differences):
  // the kernels of 2026-12-06 (slabs of 8 slices: the automatic depth at
  // 512^3 then), the shipped defaults, and the shipped kernels at other slab
  // depths (the automatic depth is 32 at 512^3 since 2026-12-07).
  std::vector<IterationConfig> configs;
  LeanSmoothTuning old_smooth;
  old_smooth.run_kernel = false;
  old_smooth.fixed_radius = false;
  IterationConfig old{"2026-12-06 kernels", TodaysSampler(), old_smooth};
  old.compose_slab_depth = 8;
  configs.push_back(old);
  IterationConfig shipped{"shipped defaults", TodaysSampler(), LeanSmoothTuning{}};
  shipped.compose_grid_3d = GreedyStep{}.cuda_grid_3d;
  shipped.compose_index32 = GreedyStep{}.cuda_index32;
  configs.push_back(shipped);
  for (const int64_t depth : {8, 16, 64}) {
    IterationConfig c = shipped;
    c.name = depth == 8 ? "shipped, slabs of 8" : (depth == 16 ? "shipped, slabs of 16" : "shipped, slabs of 64");
    c.compose_slab_depth = depth;
    configs.push_back(c);
  }
  IterationConfig run = shipped;
  run.name = "shipped compose, run-kernel smoothing (before fixed radii)";
  run.smooth.fixed_radius = false;
  configs.push_back(run);
  if (!opt.all_iteration_sets) configs.resize(2);

  // Copy references in the same run (device to device, each byte read and
  // written once): u (3 floats a voxel: what the composition's slab
  // write-back moves, and the floor of a one-pass smoothing of u) and the
  // bf16 gradient (the floor of a one-pass smoothing of it).
  TESSERA_ASSIGN_OR_RETURN(double copy_u_ms, TimeMs(stream, 1, 10, [&]() -> absl::Status {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(u.raw_data(), u0.buf->data(), u0.bytes, cudaMemcpyDeviceToDevice, s));
    return absl::OkStatus();
  }));
  TESSERA_ASSIGN_OR_RETURN(double copy_g_ms, TimeMs(stream, 1, 10, [&]() -> absl::Status {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(u.raw_data(), g.buf->data(), g.bytes, cudaMemcpyDeviceToDevice, s));
    return absl::OkStatus();
  }));
  std::printf("  copy references: u (%.2f GB) %.3f ms (%.0f GB/s), bf16 gradient (%.2f GB) %.3f ms (%.0f GB/s)\n",
              u0.bytes * 1e-9, copy_u_ms, 2 * u0.bytes * 1e-6 / copy_u_ms, g.bytes * 1e-9, copy_g_ms,
              2 * g.bytes * 1e-6 / copy_g_ms);
  std::fflush(stdout);

  cudaEvent_t ev[kSteps + 1];
  for (auto& e : ev) TESSERA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  std::vector<std::vector<float>> u_after_one(configs.size());
  std::vector<std::vector<double>> step_ms(configs.size(), std::vector<double>(kSteps + 1));
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const IterationConfig& cfg = configs[ci];
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(u.raw_data(), u0.buf->data(), u0.bytes, cudaMemcpyDeviceToDevice, s));
    std::vector<std::vector<double>> samples(kSteps + 1);
    const int warmup = 1;
    for (int it = 0; it < warmup + opt.iterations; ++it) {
      int e = 0;
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[e++], s));
      TESSERA_RETURN_IF_ERROR(GridSampleHalfImage(stream, args, moving_h.as<Half>(), work.data<float>(), cfg.sampler));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[e++], s));
      TESSERA_RETURN_IF_ERROR(LnccHalfFixed(stream, fixed_h.as<Half>(), work.data<float>(), d, lncc,
                                            loss.as<float>(), work.data<float>(), g.as<BFloat16>(), &lncc_ws));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[e++], s));
      float host_loss = 0;
      TESSERA_RETURN_IF_ERROR(
          CopyBytes(&host_loss, MemoryKind::kHost, loss.buf->data(), MemoryKind::kDevice, sizeof(float), stream));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[e++], s));
      TESSERA_RETURN_IF_ERROR(GridSampleBackwardHalfImage(stream, args, moving_h.as<Half>(), work.data<float>(),
                                                          g.as<BFloat16>(), cfg.sampler));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[e++], s));
      TESSERA_RETURN_IF_ERROR(SmoothBf16InPlaceWithScratch(g.as<BFloat16>(), d, 3, {6, 6, 6}, work.data<float>(), n,
                                                           stream, cfg.smooth));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[e++], s));
      TESSERA_ASSIGN_OR_RETURN(float largest, MaxAbs(stream, g.as<BFloat16>(), 3 * n, &stats_ws));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[e++], s));
      step.max_abs_grad = largest;
      step.scale = largest > 0 ? static_cast<float>(-lr / largest) : 0.f;
      step.slab_depth = std::min<int64_t>(cfg.compose_slab_depth, d.nz);
      step.cuda_grid_3d = cfg.compose_grid_3d;
      step.cuda_index32 = cfg.compose_index32;
      TESSERA_RETURN_IF_ERROR(ComposeGreedyStepInPlace(stream, u.data<float>(), g.as<BFloat16>(), d, step, &compose_ws));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[e++], s));
      TESSERA_RETURN_IF_ERROR(SmoothInPlaceWithScratch(u, {0.5, 0.5, 0.5}, work.data<float>(), n, stream, cfg.smooth));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[e++], s));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ev[kSteps]));
      if (it == 0) {
        u_after_one[ci].resize(3 * n);
        TESSERA_RETURN_IF_ERROR(CopyBytes(u_after_one[ci].data(), MemoryKind::kHost, u.raw_data(), MemoryKind::kDevice,
                                          u.nbytes(), stream));
        std::printf("  %s: first loss %.6f\n", cfg.name, host_loss);
      }
      if (it < warmup) continue;
      for (int k = 0; k < kSteps; ++k) {
        float t = 0;
        TESSERA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, ev[k], ev[k + 1]));
        samples[k].push_back(t);
      }
      float total = 0;
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&total, ev[0], ev[kSteps]));
      samples[kSteps].push_back(total);
    }
    for (int k = 0; k <= kSteps; ++k) step_ms[ci][k] = bench::Median(samples[k]);
    // As it comes (a later configuration's failure keeps this one's numbers).
    std::printf("  %s: iteration %.3f ms (", cfg.name, step_ms[ci][kSteps]);
    for (int k = 0; k < kSteps; ++k) std::printf("%s%s %.3f", k ? ", " : "", kStepNames[k], step_ms[ci][k]);
    std::printf(")\n");
    std::fflush(stdout);
  }
  for (auto& e : ev) cudaEventDestroy(e);

  std::printf("\n| step |");
  for (const auto& c : configs) std::printf(" %s ms |", c.name);
  std::printf("\n|---|");
  for (size_t c = 0; c < configs.size(); ++c) std::printf("---|");
  std::printf("\n");
  for (int k = 0; k <= kSteps; ++k) {
    std::printf("| %s |", k < kSteps ? kStepNames[k] : "**iteration (median of totals)**");
    for (size_t c = 0; c < configs.size(); ++c) std::printf(" %.3f |", step_ms[c][k]);
    std::printf("\n");
  }
  std::printf("| iteration without LNCC |");
  for (size_t c = 0; c < configs.size(); ++c) std::printf(" %.3f |", step_ms[c][kSteps] - step_ms[c][1]);
  std::printf("\n| iteration with LNCC at 3.6 ms (issue 37's H100 goal) |");
  for (size_t c = 0; c < configs.size(); ++c) std::printf(" %.3f |", step_ms[c][kSteps] - step_ms[c][1] + 3.6);
  std::printf("\n");
  for (size_t c = 1; c < configs.size(); ++c) {
    std::printf("u after one iteration, %s vs %s: max |diff| %.3g\n", configs[c].name, configs[0].name,
                MaxDiff(u_after_one[c], u_after_one[0]));
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

// ---- the smoothing passes one by one (issue 37) ----

// Per tuning, each smoothing with its passes switched on one at a time (sigma
// 0 on the other axes): the bf16 gradient at sigma 6 (y -> float scratch, x
// in place, z back to bf16; "none" is the two conversion passes alone) and u
// at sigma 0.5 (float, x in place, y -> scratch, z back); then the composition
// (slabs of 32) alone and with u's smoothing fused. Same data for every
// setting; outputs are compared to the first setting's (must be 0).
struct SmoothVariant {
  const char* name;
  LeanSmoothTuning tuning;
};

absl::Status BenchSmooth(const Stream& stream, const Options& opt) {
  const Dims3 d{opt.size, opt.size, opt.size};
  const int64_t n = d.size();
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  std::printf("\n== smoothing passes one by one, %s (median of %d)\n", DimsToString(d).c_str(), opt.reps);
  TESSERA_ASSIGN_OR_RETURN(Dev g, Alloc(sizeof(BFloat16) * 3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev g0, Alloc(sizeof(BFloat16) * 3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(Dev u0, Alloc(sizeof(float) * 3 * n, stream));
  TESSERA_ASSIGN_OR_RETURN(NDArray u, NDArray::Allocate(Shape{d.nx, d.ny, d.nz, int64_t{3}}, DType::kFloat32,
                                                         MemoryKind::kDevice, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(Dev work, Alloc(sizeof(float) * n, stream));
  {
    std::vector<BFloat16> h(3 * n);
    ParallelFor(3 * n, [&](int64_t lo, int64_t hi, int) {
      for (int64_t i = lo; i < hi; ++i) {
        uint32_t x = static_cast<uint32_t>(i) * 2654435761u + 12345u;
        x ^= x >> 15;
        x *= 2246822519u;
        x ^= x >> 13;
        h[i] = FromFloat<BFloat16>((x >> 8) * (2.0f / 16777216.0f) - 1.0f);  // uniform in [-1, 1)
      }
    });
    TESSERA_RETURN_IF_ERROR(CopyBytes(g0.buf->data(), MemoryKind::kDevice, h.data(), MemoryKind::kHost, g0.bytes, stream));
  }
  TESSERA_RETURN_IF_ERROR(unfused::FillUniform(stream, u0.as<float>(), 3 * n, 5, -0.002f, 0.002f));
  std::vector<SmoothVariant> variants;
  LeanSmoothTuning run;
  run.run_kernel = true;
  run.fixed_radius = false;
  variants.push_back({"run kernels", run});
  LeanSmoothTuning fixed = run;
  fixed.fixed_radius = true;
  variants.push_back({"fixed radius (radius 18: march, ring mirrored; 2: float xy fused)", fixed});
  variants.push_back({"shipped defaults", LeanSmoothTuning{}});
  const std::array<double, 3> combos[5] = {{6, 6, 6}, {0, 0, 0}, {6, 0, 0}, {0, 6, 0}, {0, 0, 6}};
  const char* const combo_names[5] = {"all", "none", "x", "y", "z"};
  auto reset_g = [&]() -> absl::Status {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(g.buf->data(), g0.buf->data(), g.bytes, cudaMemcpyDeviceToDevice, s));
    return absl::OkStatus();
  };
  auto reset_u = [&]() -> absl::Status {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(u.raw_data(), u0.buf->data(), u0.bytes, cudaMemcpyDeviceToDevice, s));
    return absl::OkStatus();
  };
  TESSERA_ASSIGN_OR_RETURN(double copy_u, TimeMs(stream, 1, opt.reps, reset_u));
  TESSERA_ASSIGN_OR_RETURN(double copy_g, TimeMs(stream, 1, opt.reps, reset_g));
  std::printf("  copy references: u %.3f ms, bf16 gradient %.3f ms\n", copy_u, copy_g);
  std::printf("| passes | sigma |");
  for (const auto& v : variants) std::printf(" %s ms |", v.name);
  std::printf("\n|---|---|");
  for (size_t v = 0; v < variants.size(); ++v) std::printf("---|");
  std::printf("\n");
  std::vector<BFloat16> g_first;
  std::vector<float> u_first;
  for (int c = 0; c < 5; ++c) {
    std::printf("| bf16 gradient, %s | 6 |", combo_names[c]);
    for (size_t v = 0; v < variants.size(); ++v) {
      auto fn = [&]() {
        return SmoothBf16InPlaceWithScratch(g.as<BFloat16>(), d, 3, combos[c], work.as<float>(), n, stream,
                                            variants[v].tuning);
      };
      TESSERA_ASSIGN_OR_RETURN(double ms, TimeMs(stream, 1, opt.reps, fn));
      double diff = 0;
      if (c == 0) {  // one call from the same start: the bits
        TESSERA_RETURN_IF_ERROR(reset_g());
        TESSERA_RETURN_IF_ERROR(fn());
        TESSERA_ASSIGN_OR_RETURN(std::vector<BFloat16> h, Download<BFloat16>(g, stream));
        if (v == 0) g_first = std::move(h);
        else diff = MaxDiff(h, g_first);
      }
      std::printf(" %.3f%s |", ms, diff != 0 ? " (DIFFERS)" : "");
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  for (int c = 0; c < 5; ++c) {
    const std::array<double, 3> sigma = {combos[c][0] / 12, combos[c][1] / 12, combos[c][2] / 12};
    std::printf("| u, %s | 0.5 |", combo_names[c]);
    for (size_t v = 0; v < variants.size(); ++v) {
      auto fn = [&]() { return SmoothInPlaceWithScratch(u, sigma, work.as<float>(), n, stream, variants[v].tuning); };
      TESSERA_ASSIGN_OR_RETURN(double ms, TimeMs(stream, 1, opt.reps, fn));
      double diff = 0;
      if (c == 0) {
        TESSERA_RETURN_IF_ERROR(reset_u());
        TESSERA_RETURN_IF_ERROR(fn());
        std::vector<float> h(3 * n);
        TESSERA_RETURN_IF_ERROR(CopyBytes(h.data(), MemoryKind::kHost, u.raw_data(), MemoryKind::kDevice, u.nbytes(), stream));
        if (v == 0) u_first = std::move(h);
        else diff = MaxDiff(h, u_first);
      }
      std::printf(" %.3f%s |", ms, diff != 0 ? " (DIFFERS)" : "");
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  // The full-precision stage's float gradient at sigma 6 (the same kernels on
  // a float field), all passes.
  {
    std::printf("| float field (full-precision gradient), all | 6 |");
    for (size_t v = 0; v < variants.size(); ++v) {
      auto fn = [&]() {
        return SmoothInPlaceWithScratch(u, {6, 6, 6}, work.as<float>(), n, stream, variants[v].tuning);
      };
      TESSERA_ASSIGN_OR_RETURN(double ms, TimeMs(stream, 1, opt.reps, fn));
      std::printf(" %.3f |", ms);
      std::fflush(stdout);
    }
    std::printf("\n");
    TESSERA_RETURN_IF_ERROR(reset_u());
  }
  // The composition alone per slab depth, from the same u each time.
  GreedyStep step;
  step.rule = GreedyStep::Rule::kScaled;
  step.to_normalized = {2.f / (d.nx - 1), 2.f / (d.ny - 1), 2.f / (d.nz - 1)};
  step.max_abs_grad = 1.f;
  step.scale = -0.5f;
  Workspace ws;
  TESSERA_RETURN_IF_ERROR(reset_g());
  for (const int64_t depth : {0, 8, 16, 32, 64}) {
    step.slab_depth = std::min<int64_t>(depth, d.nz);
    auto fn = [&]() -> absl::Status {
      TESSERA_RETURN_IF_ERROR(reset_u());
      return ComposeGreedyStepInPlace(stream, u.data<float>(), g.as<BFloat16>(), d, step, &ws);
    };
    TESSERA_ASSIGN_OR_RETURN(double ms, TimeMs(stream, 1, opt.reps, fn));
    std::printf("  compose alone, slabs of %s: %.3f ms (less the reset copy of u: %.3f ms)\n",
                depth == 0 ? "the automatic depth" : std::to_string(depth).c_str(), ms, ms - copy_u);
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

int Run(const Options& opt) {
  auto stream = Stream::Create(Backend::kCuda);
  if (!stream.ok()) {
    std::printf("no GPU: %s\n", stream.status().ToString().c_str());
    return 0;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, stream->ordinal()) == cudaSuccess) std::printf("device: %s\n", prop.name);
  if (opt.sampler) {
    absl::Status st = BenchSampler(*stream, opt);
    if (!st.ok()) {
      std::printf("sampler: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  if (opt.smooth) {
    absl::Status st = BenchSmooth(*stream, opt);
    if (!st.ok()) {
      std::printf("smooth: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  if (opt.iteration) {
    absl::Status st = BenchIteration(*stream, opt);
    if (!st.ok()) {
      std::printf("iteration: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

#else

int Run(const Options&) {
  std::printf("built without CUDA: nothing to measure\n");
  return 0;
}

#endif  // TESSERA_WITH_CUDA

}  // namespace
}  // namespace registration
}  // namespace tessera

int main(int argc, char** argv) {
  tessera::registration::Options opt;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--size=", 7) == 0) {
      opt.size = std::atoll(a + 7);
    } else if (std::strncmp(a, "--reps=", 7) == 0) {
      opt.reps = std::atoi(a + 7);
    } else if (std::strncmp(a, "--iterations=", 13) == 0) {
      opt.iterations = std::atoi(a + 13);
    } else if (std::strcmp(a, "--iteration_sets=shipped") == 0) {
      opt.all_iteration_sets = false;
    } else if (std::strcmp(a, "--part=sampler") == 0) {
      opt.iteration = false;
      opt.smooth = false;
    } else if (std::strcmp(a, "--part=iteration") == 0) {
      opt.sampler = false;
      opt.smooth = false;
    } else if (std::strcmp(a, "--part=smooth") == 0) {
      opt.sampler = false;
      opt.iteration = false;
    } else if (std::strcmp(a, "--part=all") != 0 && std::strcmp(a, "--iteration_sets=all") != 0) {
      std::fprintf(stderr, "unknown argument %s\n", a);
      return 2;
    }
  }
  if (opt.size < 8 || opt.reps < 1 || opt.iterations < 1) {
    std::fprintf(stderr, "--size >= 8, --reps >= 1, --iterations >= 1\n");
    return 2;
  }
  return tessera::registration::Run(opt);
}
