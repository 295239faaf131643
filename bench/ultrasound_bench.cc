// Ultrasound beamforming frames per second, CUDA against the CPU reference in
// one run (kernels/reconstruction/ultrasound/beamform.h): delay-and-sum and
// minimum variance (one row per subarray length) on a simulated plane-wave
// acquisition (point targets in speckle).
//
//   ultrasound_bench [--channels=128] [--transmits=11] [--nx=512] [--nz=512]
//       [--subarrays=32,64] [--temporal_half=1] [--loading=0.01] [--reps=5]
//       [--cpu_columns=32] [--device=auto|cpu|cuda]
//       [--peak_tflops=67] [--peak_gbps=4800]
//
// The CPU is timed on the first --cpu_columns image columns (every column
// costs the same) and scaled to the whole frame; 0 times the whole frame.
// CUDA times are medians of --reps runs after a warm-up, each synchronised.
// Roofline: a model of the work per frame (flop: 8 per complex multiply-add;
// DAS: 16 B per gathered tap pair, MV: covariance written and read once),
// the bound max(flop / peak flop/s, bytes / peak bandwidth) and the share of
// it the CUDA run reaches. Peaks default to an H200 (FP32 non-tensor, HBM3e).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/ultrasound/beamform.h"
#include "kernels/reconstruction/ultrasound/simulator.h"

ABSL_FLAG(int, channels, 128, "receive channels (elements)");
ABSL_FLAG(int, transmits, 11, "plane waves, -10..10 degrees");
ABSL_FLAG(int, nx, 512, "image columns");
ABSL_FLAG(int, nz, 512, "image rows");
ABSL_FLAG(std::vector<std::string>, subarrays, std::vector<std::string>({"32", "64"}), "MV subarray lengths");
ABSL_FLAG(int, temporal_half, 1, "MV temporal half-window K");
ABSL_FLAG(double, loading, 1e-2, "MV diagonal loading");
ABSL_FLAG(int, reps, 5, "timed CUDA repetitions (median)");
ABSL_FLAG(int, cpu_columns, 32, "image columns timed on the CPU (0: all)");
ABSL_FLAG(std::string, device, "auto", "auto|cpu|cuda: cpu skips the CUDA runs");
ABSL_FLAG(double, peak_tflops, 67, "peak FP32 TFLOP/s for the roofline");
ABSL_FLAG(double, peak_gbps, 4800, "peak memory GB/s for the roofline");

namespace tessera {
namespace recon {
namespace ultrasound {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "ultrasound_bench: %s\n", what.c_str());
  std::exit(1);
}
void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.ToString());
}

using bench::Seconds;

struct Row {
  std::string name;
  BeamformOptions options;
  double gflop = 0, gbyte = 0;  // model per frame
  double cpu_s = NAN, cuda_s = NAN;
};

// Work model of one frame (see the file comment).
void Model(Row& row, const Acquisition& a, const ImageGrid& grid) {
  const double pixels = static_cast<double>(grid.size());
  const double n = a.probe.channels(), t = a.sequence.transmits();
  const double taps = pixels * n * t;  // delayed samples (each: 2 reads, interpolation, rotation)
  if (row.options.method == BeamformMethod::kDelayAndSum) {
    row.gflop = taps * 8 * 3 / 1e9;  // interpolate + rotate + accumulate
    row.gbyte = taps * 16 / 1e9;
    return;
  }
  const double l = row.options.mv.subarray, m = n - l + 1, rows = 2.0 * row.options.mv.temporal_half + 1;
  const double per_pixel = rows * l * (m + l)     // covariance (sliding diagonals)
                           + l * l * l / 6 + l * l  // Cholesky and two triangular solves
                           + n + l;                 // weights
  row.gflop = (taps * 3 + pixels * per_pixel) * 8 / 1e9;  // delays as DAS, then the above
  row.gbyte = (taps * 16 + pixels * (2 * l * l * 8 + 2 * n * 8)) / 1e9;
}

double TimeCpu(const Acquisition& a, const ImageGrid& full, const BeamformOptions& options, int columns) {
  ImageGrid grid = full;
  if (columns > 0 && columns < full.nx) grid.nx = columns;
  const Stream stream = Stream::Cpu();
  auto plan = BeamformPlan::Create(stream, a, grid, options);
  Check(plan.status(), "cpu plan");
  std::vector<std::complex<float>> image(grid.size());
  const auto t0 = std::chrono::steady_clock::now();
  Check((*plan)->Execute(a.data.iq.data(), image.data()), "cpu execute");
  const auto t1 = std::chrono::steady_clock::now();
  return Seconds(t0, t1) * static_cast<double>(full.nx) / grid.nx;
}

double TimeCuda(const Stream& stream, const std::complex<float>* data, const Acquisition& a, const ImageGrid& grid,
                const BeamformOptions& options, std::complex<float>* image, int reps) {
  auto plan = BeamformPlan::Create(stream, a, grid, options);
  Check(plan.status(), "cuda plan");
  Check((*plan)->Execute(data, image), "cuda warm-up");
  Check(stream.Synchronize(), "cuda sync");
  std::vector<double> times;
  for (int r = 0; r < std::max(1, reps); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    Check((*plan)->Execute(data, image), "cuda execute");
    Check(stream.Synchronize(), "cuda sync");
    times.push_back(Seconds(t0, std::chrono::steady_clock::now()));
  }
  return bench::Median(times);
}

std::string Fmt(double v, const char* format) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

int Main() {
  const int channels = absl::GetFlag(FLAGS_channels);
  const LinearArray probe = LinearArray::Uniform(channels, 0.3e-3, 5.2e6);
  const TransmitSequence sequence = TransmitSequence::PlaneWaves(absl::GetFlag(FLAGS_transmits), 10 * M_PI / 180);
  Sampling sampling;
  sampling.sampling_frequency_hz = 4 * probe.center_frequency_hz;
  sampling.demodulation_frequency_hz = probe.center_frequency_hz;
  const double half_width = 0.5 * (probe.element_x.back() - probe.element_x.front());
  std::vector<Scatterer> scatterers = SpecklePhantom(4000, -half_width, half_width, 5e-3, 45e-3, {{0, 25e-3, 4e-3}}, 3);
  for (double z = 10e-3; z <= 40e-3; z += 10e-3) scatterers.push_back({0.0, z, 20.0});
  SimulationOptions sim;
  sim.relative_noise = 1e-3;
  auto acquisition =
      Simulate(probe, sequence, sampling, SamplesForDepth(probe, sequence, sampling, 46e-3), scatterers, sim);
  Check(acquisition.status(), "simulate");
  const Acquisition& a = *acquisition;
  const ImageGrid grid = DefaultImageGrid(a, absl::GetFlag(FLAGS_nx), absl::GetFlag(FLAGS_nz), 5e-3, 45e-3);

  std::vector<Row> rows;
  {
    Row das;
    das.name = "DAS (Hann, F 1.5)";
    rows.push_back(das);
  }
  for (const std::string& s : absl::GetFlag(FLAGS_subarrays)) {
    int l = 0;
    if (!absl::SimpleAtoi(s, &l)) Die("--subarrays: '" + s + "' is not an integer");
    Row mv;
    mv.name = "MV L=" + s + " K=" + std::to_string(absl::GetFlag(FLAGS_temporal_half));
    mv.options.method = BeamformMethod::kMinimumVariance;
    mv.options.mv.subarray = l;
    mv.options.mv.temporal_half = absl::GetFlag(FLAGS_temporal_half);
    mv.options.mv.loading = absl::GetFlag(FLAGS_loading);
    rows.push_back(mv);
  }
  for (Row& row : rows) {
    Model(row, a, grid);
    Check(ValidateBeamformOptions(row.options, channels), row.name.c_str());
  }

  const std::string device = absl::GetFlag(FLAGS_device);
  const bool want_cuda = device != "cpu";
  const bool have_cuda = DeviceRegistry::Get().cuda_available();
  if (device == "cuda" && !have_cuda) Die("--device=cuda: " + DeviceRegistry::Get().cuda_unavailable_reason());

  std::printf("# ultrasound beamforming: %d channels, %d plane waves, %lld samples, %d x %d pixels\n", channels,
              a.sequence.transmits(), static_cast<long long>(a.data.samples), grid.nx, grid.nz);
  std::printf("device: %s; CPU threads timed on %d of %d columns, scaled\n\n",
              DeviceRegistry::Get().Describe().c_str(),
              absl::GetFlag(FLAGS_cpu_columns) > 0 ? std::min(absl::GetFlag(FLAGS_cpu_columns), grid.nx) : grid.nx,
              grid.nx);

  for (Row& row : rows) row.cpu_s = TimeCpu(a, grid, row.options, absl::GetFlag(FLAGS_cpu_columns));
  if (want_cuda && have_cuda) {
    auto stream = Stream::Create(Backend::kCuda);
    Check(stream.status(), "stream");
    const size_t data_bytes = a.data.iq.size() * sizeof(std::complex<float>);
    auto d_data = Buffer::Allocate(MemoryKind::kDevice, data_bytes);
    auto d_image = Buffer::Allocate(MemoryKind::kDevice, grid.size() * sizeof(std::complex<float>));
    Check(d_data.status(), "device data");
    Check(d_image.status(), "device image");
    Check(CopyBytes((*d_data)->data(), MemoryKind::kDevice, a.data.iq.data(), MemoryKind::kHost, data_bytes, *stream),
          "upload");
    Check(stream->Synchronize(), "upload sync");
    for (Row& row : rows) {
      row.cuda_s = TimeCuda(*stream, static_cast<const std::complex<float>*>((*d_data)->data()), a, grid, row.options,
                            static_cast<std::complex<float>*>((*d_image)->data()), absl::GetFlag(FLAGS_reps));
    }
  } else if (want_cuda) {
    std::printf("CUDA runs skipped: %s\n\n", DeviceRegistry::Get().cuda_unavailable_reason().c_str());
  }

  const double peak_flops = absl::GetFlag(FLAGS_peak_tflops) * 1e12, peak_bytes = absl::GetFlag(FLAGS_peak_gbps) * 1e9;
  std::printf("| method | CPU s/frame | CPU frames/s | CUDA ms/frame | CUDA frames/s | CUDA/CPU | model GFLOP | "
              "model GB | CUDA GFLOP/s | roofline ms (bound) | of roofline |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& row : rows) {
    const double flop_s = row.gflop * 1e9 / peak_flops, byte_s = row.gbyte * 1e9 / peak_bytes;
    const double bound = std::max(flop_s, byte_s);
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s |\n", row.name.c_str(),
                Fmt(row.cpu_s, "%.3f").c_str(), Fmt(1 / row.cpu_s, "%.2f").c_str(),
                Fmt(row.cuda_s * 1e3, "%.2f").c_str(), Fmt(1 / row.cuda_s, "%.1f").c_str(),
                Fmt(row.cpu_s / row.cuda_s, "%.0fx").c_str(), Fmt(row.gflop, "%.1f").c_str(),
                Fmt(row.gbyte, "%.2f").c_str(), Fmt(row.gflop / row.cuda_s, "%.0f").c_str(),
                Fmt(bound * 1e3, "%.3f").c_str(), flop_s >= byte_s ? "flop" : "bytes",
                Fmt(100 * bound / row.cuda_s, "%.0f%%").c_str());
  }
  return 0;
}

}  // namespace
}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::recon::ultrasound::Main();
}
