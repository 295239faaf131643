// Issue 13: device memory per voxel, time per iteration and host set-up of
// the deformable registration, memory_mode "standard" vs "lean" side by side
// in one run, on synthetic n^3 pairs (an analytic textured head and the same
// image under a smooth known deformation, both built in parallel on the host
// without resampling).
//
//   registration_memory_bench --sizes=256,512,768,1024 --iterations=8 \
//       --whole_sizes=256,512 --device=cuda
//
// Per size and mode, two runs:
// - "deformable": stages = deformable, one scale (the finest level only):
//   the tracked peak (Register's own DeviceMemoryTracker), bytes per voxel,
//   ms per iteration (steady state: progress-callback times of iterations 2..N),
//   host set-up (Register's start to its first progress report: normalisation,
//   pyramid, centre of mass, initial loss) and output (last report to return).
// - "whole": the default pipeline (rigid, affine, deformable at 4,2,1 with
//   the given iterations per scale), the same columns (ms/iter of the finest
//   deformable level).
// Ratio rows lean / standard follow each size.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/registration_flags.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/parallel.h"
#include "common/volume.h"
#include "kernels/registration/pipeline/registrar.h"

ABSL_FLAG(std::string, sizes, "128,256", "cube edges, comma separated");
ABSL_FLAG(std::string, whole_sizes, "128", "cube edges for the whole-pipeline runs (empty: none)");
ABSL_FLAG(int, iterations, 8, "deformable iterations at the finest scale (and per scale in whole runs)");
ABSL_FLAG(std::string, device, "auto", "auto, cpu or cuda");
ABSL_FLAG(std::string, metric, "lncc", "mse, lncc or mi");
ABSL_FLAG(std::string, step, "normalized", "deformable_step: normalized or adam");
ABSL_FLAG(std::string, modes, "standard,lean", "memory modes to compare");

namespace tessera::registration {
namespace {

using bench::Clock;

using bench::Seconds;

// Textured head: a Gaussian envelope times a few sinusoids, value at (x, y, z)
// in [-0.5, 0.5]^3 coordinates.
float Head(double x, double y, double z) {
  const double r2 = x * x + y * y + z * z;
  return static_cast<float>(std::exp(-8 * r2) * (1.2 + std::sin(40 * x) * std::cos(30 * y) + 0.5 * std::sin(25 * z)));
}

// Fixed: Head on the grid; moving: Head at x + d(x) with a smooth analytic
// displacement of up to 3% of the field of view (about 30 voxels at 1024^3).
std::pair<Volume, Volume> MakePair(int64_t n) {
  Volume fixed, moving;
  fixed.data = NDArray::Allocate({n, n, n}, DType::kFloat32).value();
  moving.data = NDArray::Allocate({n, n, n}, DType::kFloat32).value();
  float* f = fixed.data.data<float>();
  float* m = moving.data.data<float>();
  const double a = 0.03;
  ParallelFor(n * n, [&](int64_t b, int64_t e, int) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t j = row % n, k = row / n;
      for (int64_t i = 0; i < n; ++i) {
        const double x = (i - n / 2.0) / n, y = (j - n / 2.0) / n, z = (k - n / 2.0) / n;
        f[i + n * row] = Head(x, y, z);
        m[i + n * row] = Head(x + a * std::sin(3 * y + 1), y + a * std::sin(3 * z + 2), z + a * std::sin(3 * x));
      }
    }
  });
  return {std::move(fixed), std::move(moving)};
}

struct Row {
  int64_t n = 0;
  std::string mode, run;
  bool ok = false;
  std::string error;
  double peak_gb = 0, bytes_per_voxel = 0, ms_per_iter = 0, setup_s = 0, output_s = 0, total_s = 0, final_loss = 0;
};

Row RunOnce(const Volume& fixed, const Volume& moving, int64_t n, const std::string& mode, bool whole) {
  Row row;
  row.n = n;
  row.mode = mode;
  row.run = whole ? "whole" : "deformable";
  RegistrationOptions o;
  o.metric = OptionFlag<Metric>(absl::GetFlag(FLAGS_metric), "--metric");
  o.deformable_step = OptionFlag<DeformableStep>(absl::GetFlag(FLAGS_step), "--step");
  o.device = absl::GetFlag(FLAGS_device);
  o.memory_mode = OptionFlag<MemoryMode>(mode, "--modes");
  const int it = absl::GetFlag(FLAGS_iterations);
  if (!whole) {
    o.stages = {Stage::kDeformable};
    o.scales = {1};
    o.deformable_iterations = {it};
    o.patience = 1000000;
    o.tolerance = -1;  // never stop early: every run does `it` iterations
  } else {
    o.rigid_iterations = o.affine_iterations = o.deformable_iterations = {it};
  }
  const int finest = whole ? static_cast<int>(o.scales.back()) : 1;
  const Clock::time_point start = Clock::now();
  Clock::time_point first_report{}, last_report{}, iter2{}, iter_last{};
  int last_iter = 0;
  bool any = false;
  auto progress = [&](const RegistrationProgress& p) {
    const Clock::time_point now = Clock::now();
    if (!any) first_report = now;
    any = true;
    if (p.stage == "deformable" && p.scale == finest) {
      if (p.iteration == 2) iter2 = now;
      if (p.iteration > 2) {
        iter_last = now;
        last_iter = p.iteration;
      }
    }
    if (p.stage != "output") last_report = now;
  };
  auto result = Register(fixed, moving, o, progress);
  const Clock::time_point end = Clock::now();
  if (!result.ok()) {
    row.error = result.status().ToString();
    return row;
  }
  row.ok = true;
  row.peak_gb = result->peak_device_bytes / 1e9;
  row.bytes_per_voxel = static_cast<double>(result->peak_device_bytes) / static_cast<double>(n * n * n);
  row.ms_per_iter = last_iter > 2 ? 1000 * Seconds(iter2, iter_last) / (last_iter - 2) : 0;
  row.setup_s = any ? Seconds(start, first_report) : 0;
  row.output_s = Seconds(last_report, end);
  row.total_s = Seconds(start, end);
  row.final_loss = result->final_loss;
  return row;
}

void Print(const Row& r) {
  if (!r.ok) {
    std::printf("| %lld^3 | %s | %s | failed: %s |||||||\n", static_cast<long long>(r.n), r.run.c_str(), r.mode.c_str(),
                r.error.c_str());
    return;
  }
  std::printf("| %lld^3 | %s | %s | %.2f | %.1f | %.1f | %.2f | %.2f | %.1f | %.6f |\n", static_cast<long long>(r.n),
              r.run.c_str(), r.mode.c_str(), r.peak_gb, r.bytes_per_voxel, r.ms_per_iter, r.setup_s, r.output_s,
              r.total_s, r.final_loss);
}

std::vector<int64_t> ParseSizes(const std::string& s) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    int64_t v = 0;
    if (absl::SimpleAtoi(part, &v) && v >= 8) out.push_back(v);
    else std::printf("ignoring size '%s' (need an integer >= 8)\n", std::string(part).c_str());
  }
  return out;
}

}  // namespace
}  // namespace tessera::registration

int main(int argc, char** argv) {
  using namespace tessera::registration;
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep what was measured if a later size dies
  const std::vector<int64_t> sizes = ParseSizes(absl::GetFlag(FLAGS_sizes));
  const std::vector<int64_t> whole = ParseSizes(absl::GetFlag(FLAGS_whole_sizes));
  const std::vector<std::string> modes = absl::StrSplit(absl::GetFlag(FLAGS_modes), ',', absl::SkipEmpty());
  std::printf("metric %s, step %s, %d iterations, device %s; peak = Register's tracked device peak\n\n",
              absl::GetFlag(FLAGS_metric).c_str(), absl::GetFlag(FLAGS_step).c_str(), absl::GetFlag(FLAGS_iterations),
              absl::GetFlag(FLAGS_device).c_str());
  std::printf("| size | run | mode | peak GB | B/voxel | ms/iter | set-up s | output s | total s | final loss |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<int64_t> all = sizes;
  for (int64_t n : whole) if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
  std::sort(all.begin(), all.end());
  for (int64_t n : all) {
    const auto t0 = Clock::now();
    auto [fixed, moving] = MakePair(n);
    std::printf("| %lld^3 | (pair built on the host in %.1f s) |||||||||\n", static_cast<long long>(n),
                Seconds(t0, Clock::now()));
    for (bool is_whole : {false, true}) {
      const std::vector<int64_t>& list = is_whole ? whole : sizes;
      if (std::find(list.begin(), list.end(), n) == list.end()) continue;
      std::vector<Row> rows;
      for (const std::string& mode : modes) {
        rows.push_back(RunOnce(fixed, moving, n, mode, is_whole));
        Print(rows.back());
      }
      if (rows.size() == 2 && rows[0].ok && rows[1].ok) {
        const Row& a = rows[0];
        const Row& b = rows[1];
        auto ratio = [](double num, double den) { return den > 0 ? absl::StrFormat("%.2fx", num / den) : std::string("-"); };
        std::printf("| %lld^3 | %s | %s / %s | %s | %s | %s | %s | %s | %s | %+.2e |\n", static_cast<long long>(n),
                    a.run.c_str(), b.mode.c_str(), a.mode.c_str(), ratio(b.peak_gb, a.peak_gb).c_str(),
                    ratio(b.bytes_per_voxel, a.bytes_per_voxel).c_str(), ratio(b.ms_per_iter, a.ms_per_iter).c_str(),
                    ratio(b.setup_s, a.setup_s).c_str(), ratio(b.output_s, a.output_s).c_str(),
                    ratio(b.total_s, a.total_s).c_str(), b.final_loss - a.final_loss);
      }
    }
  }
  return 0;
}
