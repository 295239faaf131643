// Issue 13's end-to-end gigavoxel evidence: a real brain pair at n^3 on one
// device, with Dice. Colin27 (1 mm) and its AAL labels, a synthetic pair at
// 1 mm (rotation, translation, smooth random deformation: synthetic.h), both
// upsampled onto an n^3 grid covering the 217 mm field of view (trilinear for
// images, nearest for labels; at n = 1550 that is 0.14 mm voxels and 3.72 G
// voxels, the seed's 100 um case). Then the whole registration (rigid, affine,
// deformable over the given scales), label warping and Dice, timing each
// phase and reporting the device peak and the process's host peak (RSS).
//
//   registration_gigavoxel_bench --edge=1550 --device=cuda
//   registration_gigavoxel_bench --edge=160 --device=cpu      (a small check)
//   registration_gigavoxel_bench --edge=1024 --device=cuda --device_memory_budget=20G
//       (the deformable stage out of core: out_of_core_stage.h; --force_out_of_core
//        runs it out of core whatever the budget)
//   registration_gigavoxel_bench --edge=1800 --device=cuda --device_memory_budget=120G --input_dtype=uint8
//       (a pair larger than one H200 out of core: the images travel as 8- or
//        16-bit volumes, which the bounded run normalises slab by slab, so the
//        host holds inputs 2-4 + field 12 (+ warped output 4) B/voxel)
// --device_memory_budget: the device bytes the WHOLE run may hold (set-up,
// linear stages, deformable stage, outputs); a pair whose in-core lean stage
// needs more (26.6 B/voxel mixed, 36 full) runs out of core on shards sized to
// a quarter of it, the rest keeping whole arrays resident (out_of_core_stage.h).
#include <sys/resource.h>

#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/registration_flags.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/device.h"
#include "common/memory_kind_for.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/registration/grid_sampler.h"
#include "bench/gigavoxel_label_scoring.h"
#include "kernels/registration/pipeline/label_dice.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/registration_job.h"
#include "kernels/registration/pipeline/space.h"
#include "kernels/registration/pipeline/synthetic.h"

ABSL_FLAG(int, edge, 1550, "voxels per axis of the cubic grid (0.14 mm at 1550)");
ABSL_FLAG(std::string, device, "auto", "auto, cpu or cuda");
ABSL_FLAG(std::string, metric, "lncc", "mse, lncc or mi");
ABSL_FLAG(std::string, scales, "16,8,4,2,1", "registration scales, coarse to fine");
ABSL_FLAG(std::string, linear_iterations, "100,50,25,0,0", "rigid and affine iterations per scale");
ABSL_FLAG(std::string, deformable_iterations, "100,50,25,10,5", "deformable iterations per scale");
ABSL_FLAG(std::string, device_memory_budget, "0",
          "device memory the deformable stage may hold: bytes or 20G, 512M (0 = no limit); beyond it out of core");
ABSL_FLAG(double, smooth_grad_sigma, -1,
          "gradient smoothing sigma in voxels (< 0: the registrar's default); the out-of-core halos grow with it");
ABSL_FLAG(bool, force_out_of_core, false, "run the deformable stage out of core whatever the budget");
ABSL_FLAG(int, shards, 1, "shards of the deformable stage (in core: ranks; out of core: at least this many)");
ABSL_FLAG(std::string, input_dtype, "uint16",
          "element type of the pair handed to Register: uint16 or uint8 (scaled to the type's range, rounded) or "
          "float32 (4 B/voxel each on the host)");
ABSL_FLAG(bool, check_scoring, false,
          "also score with the old whole-volume path (~60 B/voxel of host memory: small edges only) and fail unless "
          "the Dice are identical");
ABSL_FLAG(std::string, precision, "mixed",
          "lean deformable stage storage: mixed (fp16 images, bf16 gradient field: 26 B/voxel) or full (36 B/voxel)");

namespace tessera::registration {
namespace {

constexpr char kCh2[] = "/usr/share/mricron/templates/ch2.nii.gz";
constexpr char kAal[] = "/usr/share/mricron/templates/aal.nii.gz";
using bench::Clock;

constexpr Mat4 kIdentity = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

using bench::Seconds;

// VmHWM: the process's resident-set high-water mark.
double HostPeakGb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024.0 / 1e9;  // ru_maxrss is in KiB on Linux
}

absl::StatusOr<std::vector<int>> IntList(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v)) return absl::InvalidArgumentError("bad integer list '" + text + "'");
    out.push_back(v);
  }
  return out;
}

// "20G", "512M", "64K" (powers of 1024) or bytes; -1 when malformed.
int64_t ByteSize(std::string text) {
  int shift = 0;
  if (!text.empty() && std::string("KMGT").find(static_cast<char>(std::toupper(text.back()))) != std::string::npos) {
    shift = 10 * (1 + static_cast<int>(std::string("KMGT").find(static_cast<char>(std::toupper(text.back())))));
    text.pop_back();
  }
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !(v >= 0)) return -1;
  return static_cast<int64_t>(std::ldexp(v, shift));
}

// Seconds per iteration of the finest deformable level, from its log line
// ("deformable x1 (...): N iterations, ... T s"); NAN if absent.
double FinestSecondsPerIteration(const std::vector<std::string>& log) {
  double best = NAN;
  for (const std::string& line : log) {
    if (line.rfind("deformable x1 ", 0) != 0) continue;
    const size_t colon = line.find("): ");
    if (colon == std::string::npos) continue;
    int iterations = 0;
    if (std::sscanf(line.c_str() + colon + 3, "%d iterations", &iterations) != 1 || iterations <= 0) continue;
    const size_t s_end = line.find(" s", line.find("(best "));
    if (s_end == std::string::npos) continue;
    const size_t s_begin = line.rfind(' ', s_end - 1);
    best = std::atof(line.c_str() + s_begin + 1) / iterations;
  }
  return best;
}

// The n^3 grid with the same centre and directions as `in`, covering the
// field of view of its longest axis.
Geometry CubeGeometry(const Volume& in, int64_t n) {
  const std::array<int64_t, 3> dims = {in.data.dim(0), in.data.dim(1), in.data.dim(2)};
  double extent = 0;
  for (int d = 0; d < 3; ++d) extent = std::max(extent, dims[d] * in.geometry.spacing[d]);
  Geometry g = in.geometry;
  std::array<double, 3> old_index{};  // the old continuous index of new voxel 0
  for (int d = 0; d < 3; ++d) {
    g.spacing[d] = extent / n;
    old_index[d] = (dims[d] - 1) / 2.0 - (n - 1) / 2.0 * g.spacing[d] / in.geometry.spacing[d];
  }
  const Mat4 m = in.geometry.IndexToWorld();
  for (int r = 0; r < 3; ++r) {
    g.origin[r] = m[r * 4 + 3];
    for (int c = 0; c < 3; ++c) g.origin[r] += m[r * 4 + c] * old_index[c];
  }
  return g;
}

// Resamples `in` onto `geometry` (n^3) on `stream`: trilinear, or nearest for labels.
absl::StatusOr<Volume> Upsample(const Volume& in, const Geometry& geometry, int64_t n, bool labels,
                                const Stream& stream) {
  const MemoryKind kind = MemoryKindFor(stream);
  Volume out;
  out.geometry = geometry;
  GridSpace from = SpaceOf(in), to;
  to.dims = {n, n, n};
  to.geometry = geometry;
  TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(kIdentity, to, from));
  float affine[12];
  for (int i = 0; i < 12; ++i) affine[i] = static_cast<float>(a[i]);
  TESSERA_ASSIGN_OR_RETURN(NDArray affine_host, NDArray::Allocate({12}, DType::kFloat32));
  std::copy(affine, affine + 12, affine_host.data<float>());
  TESSERA_ASSIGN_OR_RETURN(NDArray affine_dev, affine_host.CopyTo(kind, stream, stream.ordinal()));
  GridSampleArgs args;
  args.image_dims = {in.data.dim(0), in.data.dim(1), in.data.dim(2)};
  args.affine = affine_dev.data<float>();
  args.out_dims = {n, n, n};
  args.padding = Padding::kZeros;
  const DType type = labels ? DType::kInt32 : DType::kFloat32;
  TESSERA_ASSIGN_OR_RETURN(NDArray source, in.data.AsType(type));
  TESSERA_ASSIGN_OR_RETURN(NDArray source_dev, source.CopyTo(kind, stream, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(NDArray result, NDArray::Allocate({n, n, n}, type, kind, stream.ordinal()));
  if (labels) {
    TESSERA_RETURN_IF_ERROR(GridSampleNearest(stream, source_dev.data<int32_t>(), args, result.data<int32_t>()));
  } else {
    args.image = source_dev.data<float>();
    TESSERA_RETURN_IF_ERROR(GridSample(stream, args, result.data<float>()));
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray host, result.CopyTo(MemoryKind::kHost, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  if (labels) {
    TESSERA_ASSIGN_OR_RETURN(host, host.AsType(DType::kUInt8));  // AAL has 116 labels
  }
  out.data = std::move(host);
  return out;
}

// Host float32 intensities as `type` (uint8/uint16: scaled so the largest
// value is the type's maximum, rounded; float32: as they are), in place of the float array.
absl::Status ConvertImage(Volume& v, DType type) {
  if (type == DType::kFloat32) return absl::OkStatus();
  const float* src = v.data.data<float>();
  const int64_t n = v.data.num_elements();
  float hi = 0;
  for (int64_t i = 0; i < n; ++i) hi = std::max(hi, src[i]);
  const float top = type == DType::kUInt8 ? 255.f : 65535.f, scale = hi > 0 ? top / hi : 0.f;
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate(v.data.shape(), type));
  VisitDType(type, [&](auto tag) {
    using T = decltype(tag);
    T* dst = out.data<T>();
    ParallelFor(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) dst[i] = static_cast<T>(std::lround(std::clamp(src[i] * scale, 0.f, top)));
    });
  });
  v.data = std::move(out);
  return absl::OkStatus();
}

// The whole-volume scoring this bench used before slabs (both label maps
// upsampled whole, WarpLabels, ComputeDiceMeans): --check_scoring compares
// it with the slabbed Dice at small edges. Needs ~60 B/voxel of host memory.
absl::StatusOr<std::pair<double, double>> WholeVolumeDice(const Volume& source_fixed_labels,
                                                          const Volume& source_moving_labels, const Geometry& cube,
                                                          int64_t n, const RegistrationResult& result,
                                                          const std::string& device, const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(Volume fixed_labels, Upsample(source_fixed_labels, cube, n, /*labels=*/true, stream));
  TESSERA_ASSIGN_OR_RETURN(Volume moving_labels, Upsample(source_moving_labels, cube, n, /*labels=*/true, stream));
  RegistrationResult identity;
  identity.affine_ras = kIdentity;
  double dice[2];
  for (int r = 0; r < 2; ++r) {
    TESSERA_ASSIGN_OR_RETURN(NDArray warped, WarpLabels(moving_labels, fixed_labels, r == 0 ? identity : result, device));
    TESSERA_ASSIGN_OR_RETURN(DiceMeans means, ComputeDiceMeans(fixed_labels.data, warped, fixed_labels.geometry));
    dice[r] = means.mean_all;
  }
  return std::make_pair(dice[0], dice[1]);
}

int Main() {
  const int64_t n = absl::GetFlag(FLAGS_edge);
  const std::string device = absl::GetFlag(FLAGS_device);
  auto backend = ResolveBackend(device);
  if (!backend.ok()) {
    std::printf("registration_gigavoxel_bench: %s\n", backend.status().ToString().c_str());
    return 0;
  }
  std::printf("# gigavoxel brain registration, %s\n", DeviceRegistry::Get().Describe().c_str());
  auto inputs = ReadRegistrationInputs(kCh2, kCh2, kAal, "");
  if (!inputs.ok()) {
    std::printf("cannot read Colin27: %s\n", inputs.status().ToString().c_str());
    return 1;
  }
  SyntheticOptions synth;
  synth.seed = 7;
  auto pair = MakeSyntheticPair(inputs->fixed, &*inputs->fixed_labels, synth);
  if (!pair.ok()) {
    std::printf("cannot make the synthetic pair: %s\n", pair.status().ToString().c_str());
    return 1;
  }
  const Clock::time_point t0 = Clock::now();
  Stream stream = *backend == Backend::kCuda ? Stream::Create(Backend::kCuda).value() : Stream::Cpu();
  const Geometry cube = CubeGeometry(inputs->fixed, n);
  // The images now; the labels only after the registration, from the 1 mm
  // sources (the moving ones on the grid: 1 B/voxel, no int32 transient), so
  // they add nothing to the registration's host peak.
  const std::string dtype_name = absl::GetFlag(FLAGS_input_dtype);
  const DType input_type = dtype_name == "uint8" ? DType::kUInt8 : dtype_name == "uint16" ? DType::kUInt16
                           : dtype_name == "float32" ? DType::kFloat32 : DType::kInvalid;
  if (input_type == DType::kInvalid) {
    std::printf("bad --input_dtype '%s': uint16, uint8 or float32\n", dtype_name.c_str());
    return 1;
  }
  Volume fixed, moving;
  for (auto [in, out, labels] : {std::make_tuple(&inputs->fixed, &fixed, false),
                                 std::make_tuple(&pair->moving, &moving, false)}) {
    absl::StatusOr<Volume> v = Upsample(*in, cube, n, labels, stream);
    absl::Status converted = v.ok() ? ConvertImage(*v, input_type) : v.status();
    if (!converted.ok()) {
      std::printf("upsampling failed: %s\n", converted.ToString().c_str());
      return 1;
    }
    *out = *std::move(v);
  }
  const Volume source_fixed_labels = *inputs->fixed_labels, source_moving_labels = *pair->moving_labels;
  inputs = absl::InternalError("released");
  pair = absl::InternalError("released");
  const Clock::time_point t1 = Clock::now();
  std::printf("pair: %lld^3 = %.2f G voxels at %.3f mm, %s, built in %.1f s (host peak so far %.1f GB)\n",
              static_cast<long long>(n), n * n * static_cast<double>(n) / 1e9, cube.spacing[0], dtype_name.c_str(),
              Seconds(t0, t1), HostPeakGb());

  RegistrationOptions o;
  o.metric = OptionFlag<Metric>(absl::GetFlag(FLAGS_metric), "--metric");
  o.device = device;
  auto scales = IntList(absl::GetFlag(FLAGS_scales));
  auto linear = IntList(absl::GetFlag(FLAGS_linear_iterations));
  auto deformable = IntList(absl::GetFlag(FLAGS_deformable_iterations));
  if (!scales.ok() || !linear.ok() || !deformable.ok()) {
    std::printf("bad --scales or iteration lists\n");
    return 1;
  }
  o.scales = *scales;
  o.rigid_iterations = *linear;
  o.affine_iterations = *linear;
  o.deformable_iterations = *deformable;
  o.precision = OptionFlag<Precision>(absl::GetFlag(FLAGS_precision), "--precision");
  o.device_memory_budget_bytes = ByteSize(absl::GetFlag(FLAGS_device_memory_budget));
  if (o.device_memory_budget_bytes < 0) {
    std::printf("bad --device_memory_budget '%s'\n", absl::GetFlag(FLAGS_device_memory_budget).c_str());
    return 1;
  }
  o.force_out_of_core = absl::GetFlag(FLAGS_force_out_of_core);
  o.shards = absl::GetFlag(FLAGS_shards);
  if (absl::GetFlag(FLAGS_smooth_grad_sigma) >= 0) o.smooth_grad_sigma = absl::GetFlag(FLAGS_smooth_grad_sigma);
  std::printf("gradient smoothing sigma %g voxels\n", o.smooth_grad_sigma);
  Clock::time_point first_report{}, last_report{};
  bool any = false;
  auto progress = [&](const RegistrationProgress& p) {
    const Clock::time_point now = Clock::now();
    if (!any) first_report = now;
    any = true;
    if (p.stage != "output") last_report = now;
  };
  absl::StatusOr<RegistrationResult> result = Register(fixed, moving, o, progress);
  const Clock::time_point t2 = Clock::now();
  if (!result.ok()) {
    std::printf("registration failed: %s\n", result.status().ToString().c_str());
    return 1;
  }
  for (const std::string& line : result->log) std::printf("    %s\n", line.c_str());
  // Only the transforms are needed from here: free the images first (the
  // fixed grid's geometry and shape stay in `fixed_grid`).
  moving = Volume();
  result->warped = Volume();
  const GridSpace fixed_grid = SpaceOf(fixed);
  fixed = Volume();
  const double folded = result->jacobian.voxels ? 100.0 * result->jacobian.nonpositive / result->jacobian.voxels : 0;
  const double registration_host_peak_gb = HostPeakGb();  // VmHWM so far: set-up + registration
  // Scoring in a bounded host footprint (gigavoxel_label_scoring.h): the
  // moving labels on the grid as uint8 (1 B/voxel), then fixed labels, both
  // warps and the Dice counts voxel by voxel over z-slabs, next to the field.
  absl::StatusOr<NDArray> moving_on_grid = ResampleLabelsUint8(source_moving_labels, fixed_grid);
  if (!moving_on_grid.ok()) {
    std::printf("upsampling labels failed: %s\n", moving_on_grid.status().ToString().c_str());
    return 1;
  }
  const Volume moving_labels{*std::move(moving_on_grid), cube, "moving labels"};
  absl::StatusOr<LabelScores> scores = ScoreLabelsBySlab(source_fixed_labels, moving_labels, fixed_grid,
                                                         result->affine_ras, &result->displacement_ras);
  if (!scores.ok()) {
    std::printf("label scoring failed: %s\n", scores.status().ToString().c_str());
    return 1;
  }
  const double dice_before = scores->before.mean_all, dice_after = scores->after.mean_all;
  const Clock::time_point t3 = Clock::now();
  const double scoring_host_peak_gb = HostPeakGb();  // before the optional check's whole-volume maps
  if (absl::GetFlag(FLAGS_check_scoring)) {
    absl::StatusOr<std::pair<double, double>> old = WholeVolumeDice(source_fixed_labels, source_moving_labels, cube, n,
                                                                    *result, device, stream);
    if (!old.ok()) {
      std::printf("whole-volume scoring failed: %s\n", old.status().ToString().c_str());
      return 1;
    }
    const bool same = old->first == dice_before && old->second == dice_after;
    std::printf("scoring check: whole-volume Dice %.17g -> %.17g, slabbed %.17g -> %.17g: %s\n", old->first,
                old->second, dice_before, dice_after, same ? "identical" : "DIFFERENT");
    if (!same) return 1;
  }
  bool out_of_core = false;
  for (const std::string& line : result->log) out_of_core = out_of_core || line.find("out of core") != std::string::npos;
  std::printf("\n| edge | voxels | inputs | device | precision | budget GB | stage | finest s/it | set-up s | registration s | "
              "output s | labels + Dice s | total s | peak device GB | B/voxel | host peak GB (registration) | "
              "host B/voxel (registration) | host peak GB (with scoring) | Dice before -> after | folded %% |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const double voxels = n * n * static_cast<double>(n);
  std::printf("| %lld | %.2f G | %s | %s | %s | %.1f | %s | %.3f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | "
              "%.1f | %.1f | %.3f -> **%.3f** | %.4f |\n",
              static_cast<long long>(n), voxels / 1e9, dtype_name.c_str(), result->backend.c_str(), OptionName(o.precision),
              o.device_memory_budget_bytes / 1e9, out_of_core ? "out of core" : "in core",
              FinestSecondsPerIteration(result->log),
              any ? Seconds(t1, first_report) : 0.0, Seconds(t1, t2), any ? Seconds(last_report, t2) : 0.0,
              Seconds(t2, t3), Seconds(t1, t3), result->peak_device_bytes / 1e9, result->peak_device_bytes / voxels,
              registration_host_peak_gb, registration_host_peak_gb * 1e9 / voxels, scoring_host_peak_gb, dice_before,
              dice_after, folded);
  return 0;
}

}  // namespace
}  // namespace tessera::registration

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::ParseCommandLine(argc, argv);
  return tessera::registration::Main();
}
