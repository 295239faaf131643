// End-to-end registration benchmark: the full multi-scale pipeline on the
// real 181x217x181 Colin27 brain against a known synthetic deformation (time,
// Dice before/after, folding, peak device memory), the same run on the CPU
// backend in the same binary, and the time of one greedy LNCC iteration at
// 512^3 (from two runs of different lengths, so set-up cancels).
//   registration_pipeline_bench [--quick] [--no-cpu]
// Without a GPU it prints why and exits 0.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/registration_flags.h"
#include "absl/strings/str_format.h"
#include "common/device.h"
#include "common/nifti_io.h"
#include "kernels/registration/label_metrics.h"
#include "kernels/registration/pipeline/registration_job.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {
namespace {

constexpr char kCh2[] = "/usr/share/mricron/templates/ch2.nii.gz";
constexpr char kAal[] = "/usr/share/mricron/templates/aal.nii.gz";

struct Run {
  double seconds = 0, dice_before = 0, dice_after = 0, folded_percent = 0, final_loss = 0;
  size_t peak = 0;
  bool ok = false;
};

Run RunPipeline(const RegistrationInputs& inputs, const std::string& device, const std::string& metric) {
  RegistrationOptions options;
  options.metric = OptionFlag<Metric>(metric, "metric");
  options.device = device;
  absl::StatusOr<RegistrationPlan> plan = PlanRegistration(options);
  if (!plan.ok()) {
    std::printf("  %s/%s: %s\n", device.c_str(), metric.c_str(), plan.status().ToString().c_str());
    return Run();
  }
  auto summary = RunRegistration(inputs, *plan, "", false);
  Run run;
  if (!summary.ok()) {
    std::printf("  %s/%s failed: %s\n", device.c_str(), metric.c_str(), summary.status().ToString().c_str());
    return run;
  }
  run.ok = true;
  run.seconds = summary->result.seconds;
  run.dice_before = summary->dice_before.value_or(0);
  run.dice_after = summary->dice_after.value_or(0);
  run.folded_percent = summary->folded_percent;
  run.final_loss = summary->result.final_loss;
  run.peak = summary->result.peak_device_bytes;
  for (const std::string& line : summary->result.log) std::printf("    %s\n", line.c_str());
  return run;
}

// One greedy iteration at n^3: two runs of different lengths; the difference
// of their deformable-stage times over the difference of iteration counts.
void GreedyIteration(int n) {
  Volume fixed;
  auto data = NDArray::Allocate({n, n, n}, DType::kFloat32);
  if (!data.ok()) return;
  fixed.data = *data;
  float* f = fixed.data.data<float>();
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i) {
        const double x = (i - n / 2.0) / n, y = (j - n / 2.0) / n, z = (k - n / 2.0) / n;
        f[i + n * (j + n * k)] = static_cast<float>(std::exp(-8 * (x * x + y * y + z * z)) * (1.2 + std::sin(40 * x) * std::cos(30 * y)));
      }
  SyntheticOptions synth;
  synth.deformation_mm = 6;
  auto pair = MakeSyntheticPair(fixed, nullptr, synth);
  if (!pair.ok()) {
    std::printf("  greedy %d^3: cannot make the problem: %s\n", n, pair.status().ToString().c_str());
    return;
  }
  const Volume& moving = pair->moving;
  double t[2] = {0, 0};
  size_t peak = 0;
  const int iters[2] = {4, 14};
  for (int r = 0; r < 2; ++r) {
    RegistrationOptions o;
    o.metric = Metric::kLncc;
    o.stages = {Stage::kDeformable};
    o.scales = {1};
    o.deformable_iterations = {iters[r]};
    o.patience = 1000000;
    o.tolerance = -1;  // never converge early
    o.device = "cuda";
    auto result = Register(fixed, moving, o);
    if (!result.ok()) {
      std::printf("  greedy %d^3 failed: %s\n", n, result.status().ToString().c_str());
      return;
    }
    // "deformable x1: N iterations, ... , S s"
    const std::string& line = result->log.back();
    t[r] = std::stod(line.substr(line.rfind(", ") + 2));
    peak = std::max(peak, result->peak_device_bytes);
  }
  const double per_iter_ms = 1000 * (t[1] - t[0]) / (iters[1] - iters[0]);
  std::printf("| greedy LNCC iteration %d^3 | %.1f ms | %.2f GB peak (whole run) | goal <= 50 ms, <= 4 GB; FFDP 253 ms, 7.7 GB |\n",
              n, per_iter_ms, peak / 1e9);
}

}  // namespace
}  // namespace tessera::registration

int main(int argc, char** argv) {
  using namespace tessera;
  using namespace tessera::registration;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep what was measured if a later step dies
  bool quick = false, cpu = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--no-cpu") == 0) cpu = false;
  }
  if (!DeviceRegistry::Get().cuda_available()) {
    std::printf("registration_pipeline_bench: no GPU (%s); nothing to measure\n",
                DeviceRegistry::Get().cuda_unavailable_reason().c_str());
    return 0;
  }
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
  inputs->moving = pair->moving;
  inputs->moving_labels = pair->moving_labels;
  std::printf("# registration pipeline, %s\n", DeviceRegistry::Get().Describe().c_str());
  std::printf("181x217x181 Colin27 vs synthetic warp (4 deg, 4 mm, 4 mm smooth field), scales 4,2,1, rigid+affine+deformable\n");
  Run gpu = RunPipeline(*inputs, "cuda", "lncc");
  Run gpu_mi = RunPipeline(*inputs, "cuda", "mi");
  Run cpu_run;
  if (cpu && !quick) cpu_run = RunPipeline(*inputs, "cpu", "lncc");
  std::printf("\n| run | time | Dice before -> after | folded | peak device memory |\n|---|---|---|---|---|\n");
  auto row = [](const char* name, const Run& r) {
    if (!r.ok) return;
    std::printf("| %s | %.2f s | %.3f -> %.3f | %.4f %% | %.2f GB |\n", name, r.seconds, r.dice_before, r.dice_after,
                r.folded_percent, r.peak / 1e9);
  };
  row("cuda lncc", gpu);
  row("cuda mi", gpu_mi);
  row("cpu lncc (all cores)", cpu_run);
  if (gpu.ok && cpu_run.ok) std::printf("\nGPU over CPU (same pipeline, same binary): %.1fx; goal: full 3-scale registration < 2 s\n", cpu_run.seconds / gpu.seconds);
  std::printf("\n| measure | ours | notes |\n|---|---|---|\n");
  GreedyIteration(quick ? 256 : 512);
  return 0;
}
