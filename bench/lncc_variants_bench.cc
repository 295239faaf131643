// LNCC CUDA kernel variants side by side (issue 37 item 1), one process, one
// GPU: today's box march (the baseline) against the column march with
// LnccOptions' defaults and with one or two of its cuda_* options off (names
// below), float storage (Lncc) and the lean stage's mixed storage
// (LnccHalfFixed: fp16 F, bf16 a, b, c), window 7.
//
//   lncc_variants_bench [--sizes=256,512] [--reps=N] [--variants=NAME,NAME,...] [--list]
//
// --variants runs only the named variants (exact names as --list prints
// them, comma-separated), plus the box march baseline and the defaults of
// each storage they use: the references of the differences and of the
// speed-ups.
//
// Per size: a device-to-device copy of one volume (the bandwidth reference,
// GB/s = 2 * 4 * N bytes / time) and per variant the median of N CUDA-event
// timings after two warm-ups of
//   fwd      loss only
//   fwd+bwd  loss and dL/dW
// with the effective bandwidth of the compulsory bytes (fwd: F, W; fwd+bwd:
// F, W read, dL/dW written; fp16 F counts 2 bytes), the peak extra device
// memory of a first call from a cold workspace (tracked Buffers; the mixed
// variants' caller-owned bf16 a, b, c counted in), and the largest
// differences of the loss and dL/dW from the baseline of the same storage
// (max |dg| / max |g0| and relative L2). Inputs: a smooth field plus hashed
// noise for F, W = 0.6 F + 0.4 noise (correlated, never flat).
// Without a GPU it prints why and exits 0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/bench_util.h"
#include "bench/cuda_event_timing.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/status.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/types.h"
#include "kernels/registration/workspace.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace tessera {
namespace registration {
namespace {

#if TESSERA_WITH_CUDA

constexpr double kMiB = 1024.0 * 1024.0;

struct Variant {
  std::string name;
  LnccOptions options;
  bool mixed = false;  // LnccHalfFixed (fp16 F, bf16 a, b, c)
};

// Names: "defaults" is LnccOptions' own set (the reference of "x default");
// suffixes turn one option off: no al (cuda_aligned_rows), no s16
// (cuda_stage16), no fepi (the double epilogue), no async (register
// staging). "col" is the column march with every option off. (The column
// march's fixed choices, paired 16-bit accesses and the approximate
// reciprocal, apply to every column march variant; z pairs come with
// cuda_stage16.)
std::vector<Variant> Variants() {
  std::vector<Variant> v;
  for (const bool mixed : {false, true}) {
    const std::string storage = mixed ? " mixed" : " float";
    auto add = [&](const std::string& name, const std::function<void(LnccOptions*)>& set) {
      Variant x;
      x.name = name + storage;
      x.options.window = 7;
      set(&x.options);
      x.mixed = mixed;
      v.push_back(x);
    };
    // The baseline of its storage first.
    add("box (today)", [](LnccOptions* o) { o->cuda_kernel = LnccCudaKernel::kBoxMarch; });
    add("defaults", [](LnccOptions*) {});
    add("col", [](LnccOptions* o) {
      o->cuda_kernel = LnccCudaKernel::kColumnMarch;
      o->cuda_float_epilogue = false;
      o->cuda_async_copy = false;
      o->cuda_aligned_rows = false;
      o->cuda_stage16 = false;
    });
    add("defaults no fepi", [](LnccOptions* o) { o->cuda_float_epilogue = false; });
    add("defaults no async", [](LnccOptions* o) { o->cuda_async_copy = false; });
    add("defaults no al", [](LnccOptions* o) { o->cuda_aligned_rows = false; });
    if (mixed) {
      add("defaults no s16", [](LnccOptions* o) { o->cuda_stage16 = false; });
      add("defaults no s16 no al", [](LnccOptions* o) {
        o->cuda_stage16 = false;
        o->cuda_aligned_rows = false;
      });
    }
  }
  return v;
}

absl::StatusOr<double> TimeMs(const Stream& stream, int reps, const std::function<absl::Status()>& fn) {
  return bench::CudaEventMedianMs(stream, /*warmup=*/2, reps, fn);
}

absl::StatusOr<std::shared_ptr<Buffer>> DeviceBytes(size_t bytes, const Stream& stream) {
  return Buffer::Allocate(MemoryKind::kDevice, bytes, stream.ordinal());
}

template <typename T>
absl::StatusOr<std::vector<T>> Download(const Buffer& b, int64_t n, const Stream& stream) {
  std::vector<T> h(n);
  TESSERA_RETURN_IF_ERROR(CopyBytes(h.data(), MemoryKind::kHost, b.data(), MemoryKind::kDevice, sizeof(T) * n, stream));
  return h;
}

struct Outputs {
  float loss = 0;
  std::vector<float> grad;
};

struct Diff {
  double loss_abs = 0, loss_rel = 0, grad_max_rel = 0, grad_rel_l2 = 0;
};

Diff Compare(const Outputs& o, const Outputs& ref) {
  Diff d;
  d.loss_abs = std::abs(double(o.loss) - ref.loss);
  d.loss_rel = d.loss_abs / std::max(1e-30, std::abs(double(ref.loss)));
  double max_ref = 0, max_diff = 0, num = 0, den = 0;
  for (size_t v = 0; v < ref.grad.size(); ++v) {
    const double g0 = ref.grad[v], e = double(o.grad[v]) - g0;
    max_ref = std::max(max_ref, std::abs(g0));
    max_diff = std::max(max_diff, std::abs(e));
    num += e * e;
    den += g0 * g0;
  }
  d.grad_max_rel = max_diff / std::max(1e-30, max_ref);
  d.grad_rel_l2 = std::sqrt(num / std::max(1e-300, den));
  return d;
}

absl::Status BenchSize(const Stream& stream, int64_t edge, int reps, const std::vector<Variant>& variants) {
  const Dims3 d{edge, edge, edge};
  const int64_t n = d.size();
  std::printf("== %s (%.1f M voxels), window 7, %d reps\n", DimsToString(d).c_str(), n / 1e6, reps);
  std::vector<float> f(n), w(n);
  std::vector<float> wave(edge);
  for (int64_t i = 0; i < edge; ++i) wave[i] = 0.15f * std::sin(0.11f * static_cast<float>(i));
  for (int64_t v = 0; v < n; ++v) {
    const int64_t i = v % edge, j = (v / edge) % edge, k = v / (edge * edge);
    const uint32_t h = static_cast<uint32_t>(v) * 2654435761u;
    const float noise = static_cast<float>((h >> 8) & 0xffff) / 65536.0f;
    const float noise2 = static_cast<float>((h >> 3) & 0xfff) / 4096.0f;
    f[v] = 0.5f + wave[i] + wave[j] + wave[k] + 0.2f * noise;
    w[v] = 0.6f * f[v] + 0.4f * noise2;
  }
  std::vector<Half> f16(n);
  for (int64_t v = 0; v < n; ++v) f16[v] = FromFloat<Half>(f[v]);
  TESSERA_ASSIGN_OR_RETURN(auto df, DeviceBytes(sizeof(float) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(auto dw, DeviceBytes(sizeof(float) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(auto df16, DeviceBytes(sizeof(Half) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(auto dgrad, DeviceBytes(sizeof(float) * n, stream));
  TESSERA_ASSIGN_OR_RETURN(auto dloss, DeviceBytes(sizeof(float), stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(df->data(), MemoryKind::kDevice, f.data(), MemoryKind::kHost, sizeof(float) * n, stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(dw->data(), MemoryKind::kDevice, w.data(), MemoryKind::kHost, sizeof(float) * n, stream));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(df16->data(), MemoryKind::kDevice, f16.data(), MemoryKind::kHost, sizeof(Half) * n, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());

  // Bandwidth reference: one volume copied device to device.
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_ASSIGN_OR_RETURN(const double copy_ms, TimeMs(stream, reps, [&]() -> absl::Status {
                             TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dgrad->data(), dw->data(), sizeof(float) * n,
                                                                          cudaMemcpyDeviceToDevice, s));
                             return absl::OkStatus();
                           }));
  const double copy_gbs = 8.0 * n / (copy_ms * 1e6);
  std::printf("copy (D2D, 1 volume): %.3f ms, %.0f GB/s; floor at this bandwidth: fwd %.3f ms, fwd+bwd %.3f ms\n",
              copy_ms, copy_gbs, 8.0 * n / (copy_gbs * 1e6), 12.0 * n / (copy_gbs * 1e6));
  std::printf("%-30s %9s %7s %9s %7s %9s %10s %10s %10s %10s %10s\n", "variant", "fwd ms", "GB/s", "fwd+bwd", "GB/s",
              "extra MiB", "loss rel", "grad maxr", "grad relL2", "x today", "x default");

  Outputs ref_float, ref_mixed;
  double base_float_ms = 0, base_mixed_ms = 0;
  double default_float_ms = 0, default_mixed_ms = 0;  // "defaults": LnccOptions' own
  for (const Variant& v : variants) {
    const bool baseline = v.options.cuda_kernel == LnccCudaKernel::kBoxMarch;
    LnccWorkspace ws;
    std::shared_ptr<Buffer> coef;
    float* grad = static_cast<float*>(dgrad->data());
    float* loss = static_cast<float*>(dloss->data());
    const float* F = static_cast<const float*>(df->data());
    const Half* F16 = static_cast<const Half*>(df16->data());
    const float* W = static_cast<const float*>(dw->data());
    auto call = [&](bool with_grad) -> absl::Status {
      if (v.mixed) {
        return LnccHalfFixed(stream, F16, W, d, v.options, loss, with_grad ? grad : nullptr,
                             static_cast<BFloat16*>(coef->data()), &ws);
      }
      return Lncc(stream, F, W, d, v.options, loss, with_grad ? grad : nullptr, &ws);
    };
    // Peak extra memory of a cold first call (fwd+bwd), caller-owned bf16
    // coefficients included.
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    auto tracker = std::make_shared<DeviceMemoryTracker>();
    {
      ScopedDeviceMemoryCharge charge(tracker);
      if (v.mixed) {
        TESSERA_ASSIGN_OR_RETURN(coef, DeviceBytes(3 * sizeof(BFloat16) * n, stream));
      }
      TESSERA_RETURN_IF_ERROR(call(true));
      TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    }
    const double extra_mib = tracker->peak_bytes() / kMiB;
    Outputs out;
    TESSERA_ASSIGN_OR_RETURN(auto l, Download<float>(*dloss, 1, stream));
    out.loss = l[0];
    TESSERA_ASSIGN_OR_RETURN(out.grad, Download<float>(*dgrad, n, stream));
    // The loss alone must be the same bits as with the gradient.
    TESSERA_RETURN_IF_ERROR(call(false));
    TESSERA_ASSIGN_OR_RETURN(auto l_only, Download<float>(*dloss, 1, stream));
    if (l_only[0] != out.loss) std::printf("  WARNING %s: loss alone %.9g != loss with gradient %.9g\n", v.name.c_str(), l_only[0], out.loss);

    TESSERA_ASSIGN_OR_RETURN(const double fwd_ms, TimeMs(stream, reps, [&] { return call(false); }));
    TESSERA_ASSIGN_OR_RETURN(const double fb_ms, TimeMs(stream, reps, [&] { return call(true); }));
    const double f_bytes = v.mixed ? 2.0 : 4.0;
    const double fwd_gbs = (f_bytes + 4.0) * n / (fwd_ms * 1e6);
    const double fb_gbs = (f_bytes + 8.0) * n / (fb_ms * 1e6);
    Outputs& ref = v.mixed ? ref_mixed : ref_float;
    double& base_ms = v.mixed ? base_mixed_ms : base_float_ms;
    if (baseline) {
      ref = out;
      base_ms = fb_ms;
    }
    const Diff diff = Compare(out, ref);
    double& default_ms = v.mixed ? default_mixed_ms : default_float_ms;
    if (v.name == (v.mixed ? "defaults mixed" : "defaults float")) default_ms = fb_ms;
    std::printf("%-30s %9.3f %7.0f %9.3f %7.0f %9.1f %10.2e %10.2e %10.2e %9.2fx %9.2fx\n", v.name.c_str(), fwd_ms,
                fwd_gbs, fb_ms, fb_gbs, extra_mib, diff.loss_rel, diff.grad_max_rel, diff.grad_rel_l2, base_ms / fb_ms,
                default_ms > 0 ? default_ms / fb_ms : 0.0);
    std::printf("  loss %.9g (abs diff %.3e)\n", out.loss, diff.loss_abs);
    std::fflush(stdout);
  }
  // Mixed baseline against the float baseline, for scale.
  if (ref_mixed.grad.empty() || ref_float.grad.empty()) return absl::OkStatus();
  const Diff mf = Compare(ref_mixed, ref_float);
  std::printf("box mixed vs box float: loss rel %.2e, grad max rel %.2e, grad rel L2 %.2e\n", mf.loss_rel,
              mf.grad_max_rel, mf.grad_rel_l2);
  return absl::OkStatus();
}

// The variants named in `list` (comma-separated), each storage's baseline
// and default first; all of them when `list` is empty.
absl::StatusOr<std::vector<Variant>> SelectVariants(const std::string& list) {
  const std::vector<Variant> all = Variants();
  if (list.empty()) return all;
  std::vector<std::string> names;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) names.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  std::vector<bool> keep(all.size(), false);
  for (const std::string& name : names) {
    bool found = false;
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].name != name) continue;
      found = true;
      keep[i] = true;
      for (size_t j = 0; j < all.size(); ++j) {  // the references of its storage
        const bool reference = all[j].name == (all[i].mixed ? "box (today) mixed" : "box (today) float") ||
                               all[j].name == (all[i].mixed ? "defaults mixed" : "defaults float");
        if (reference) keep[j] = true;
      }
    }
    if (!found) return absl::InvalidArgumentError("unknown variant '" + name + "' (see --list)");
  }
  std::vector<Variant> chosen;
  for (size_t i = 0; i < all.size(); ++i) {
    if (keep[i]) chosen.push_back(all[i]);
  }
  return chosen;
}

int Main(int argc, char** argv) {
  std::vector<int64_t> sizes = {256, 512};
  int reps = 10;
  std::string variant_list;
  for (int i = 1; i < argc; ++i) {
    if (const char* v = bench::FlagValue(argv[i], "--sizes")) {
      if (!bench::ParseIntList(v, 8, 1024, &sizes)) {
        std::fprintf(stderr, "bad --sizes\n");
        return 2;
      }
    } else if (const char* v = bench::FlagValue(argv[i], "--reps")) {
      reps = std::max(1, std::atoi(v));
    } else if (const char* v = bench::FlagValue(argv[i], "--variants")) {
      variant_list = v;
    } else if (std::string(argv[i]) == "--list") {
      for (const Variant& v : Variants()) std::printf("%s\n", v.name.c_str());
      return 0;
    } else {
      std::fprintf(stderr, "usage: lncc_variants_bench [--sizes=256,512] [--reps=N] [--variants=A,B] [--list]\n");
      return 2;
    }
  }
  auto variants = SelectVariants(variant_list);
  if (!variants.ok()) {
    std::fprintf(stderr, "%s\n", variants.status().ToString().c_str());
    return 2;
  }
  auto st = Stream::Create(Backend::kCuda);
  if (!st.ok()) {
    std::printf("no CUDA device: %s\n", st.status().ToString().c_str());
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, st->ordinal());
  std::printf("device: %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
  for (const int64_t edge : sizes) bench::ExitUnlessOk(BenchSize(*st, edge, reps, *variants), "lncc variants");
  return 0;
}

#else
int Main(int, char**) {
  std::printf("built without CUDA\n");
  return 0;
}
#endif

}  // namespace
}  // namespace registration
}  // namespace tessera

int main(int argc, char** argv) { return tessera::registration::Main(argc, argv); }
