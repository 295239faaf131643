// Compressed-sensing SENSE (issue 36) on the radial phantom problem
// `mri_bench --mode=write` leaves in --dir (traj, kspace, maps, truth .cfl):
//   --mode=recon  CsSense on the CPU (in-process time incl. the Toeplitz
//                 kernel, the Lipschitz estimate and BART's data scale);
//                 writes --dir/<--out>.cfl and prints
//                 "ours <seconds> <data_scale> <lipschitz>".
//   --mode=compare  "<image> <nrmse> <nrmse_scaled>" of --image against
//                 --dir/truth, to 5 digits (nrmse_scaled after the best complex
//                 scale: BART returns its image in its scaled units).
//   --mode=prox   median ms of one L1-wavelet prox (--n^2, --shifts) and of
//                 one normal operator E^H E of the --dir problem, CPU.
//   --mode=gpu    the same solve on CPU and CUDA side by side (median of
//                 --reps after one warm-up each), and their relative l2
//                 difference: "| backend | s | speedup |" rows.
// bench/cs_vs_bart.sh drives recon against `bart pics -R W:7:0:lambda`.
//
//   cs_bench --mode=recon|gpu --dir=/tmp/cs_vs_bart [--regularizer=l1-wavelet|tv]
//            [--lambda=0.005] [--iterations=100] [--restart] [--reps=3] [--fixed_margin]
//            [--power_iterations=12] [--lipschitz=L]
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/memory_kind_for.h"
#include "kernels/reconstruction/mri/cs_sense.h"
#include "services/reconstruction/formats/cfl.h"

ABSL_FLAG(std::string, mode, "recon", "recon | compare | gpu");
ABSL_FLAG(std::string, dir, "/tmp/cs_vs_bart", "directory of the cfl files");
ABSL_FLAG(std::string, out, "ours_cs", "recon: output cfl name in --dir");
ABSL_FLAG(std::string, regularizer, "l1-wavelet", "l1-wavelet | tv");
ABSL_FLAG(double, lambda, 0.005, "regularisation weight on BART's scale");
ABSL_FLAG(int, iterations, 100, "FISTA iterations");
ABSL_FLAG(bool, restart, false, "FISTA adaptive restart");
ABSL_FLAG(std::string, wavelet, "db2", "db2 | db4");
ABSL_FLAG(int64_t, wavelet_min_size, 16, "coarsest wavelet band");
ABSL_FLAG(uint64_t, seed, 1, "wavelet shift seed");
ABSL_FLAG(int, shifts, 4, "wavelet shifts averaged per iteration (1: BART's single shift)");
ABSL_FLAG(bool, random_shift, true, "wavelet random shifts (BART's default)");
ABSL_FLAG(int, reps, 3, "gpu: timed repetitions (median)");
ABSL_FLAG(std::string, image, "", "compare: the cfl image to score");
ABSL_FLAG(int64_t, n, 128, "prox: image size");
ABSL_FLAG(int, power_iterations, -1, "power-iteration steps of the Lipschitz estimate (-1: CsSense's default)");
ABSL_FLAG(double, lipschitz, 0, "||E^H E|| if > 0 (no estimate)");
ABSL_FLAG(bool, fixed_margin, false, "step 1 / (1.05 x the power estimate), as before the residual bound");

namespace tessera::recon {
namespace {

using Complex = std::complex<float>;
using bench::Clock;

#define CHECK_OK(expr) ::tessera::bench::ExitUnlessOk((expr), #expr)

std::string Path(const std::string& name) { return absl::GetFlag(FLAGS_dir) + "/" + name; }

struct Problem {
  formats::CflArray kspace, maps;
  mri::Trajectory2D traj;
  formats::NonCartesianDims dims;
};

Problem Load() {
  Problem p;
  const auto traj_cfl = bench::ValueOrExit(formats::ReadCfl(Path("traj")), "traj");
  p.kspace = bench::ValueOrExit(formats::ReadCfl(Path("kspace")), "kspace");
  p.maps = bench::ValueOrExit(formats::ReadCfl(Path("maps")), "maps");
  p.dims = bench::ValueOrExit(formats::CheckNonCartesianCfl(p.kspace, traj_cfl, p.maps), "dims");
  p.traj = bench::ValueOrExit(formats::TrajectoryFromCfl(traj_cfl), "traj");
  return p;
}

mri::CsSenseOptions Options() {
  mri::CsSenseOptions options;
  const std::string r = absl::GetFlag(FLAGS_regularizer);
  if (r != "l1-wavelet" && r != "tv") {
    std::fprintf(stderr, "--regularizer=%s is not l1-wavelet or tv\n", r.c_str());
    std::exit(2);
  }
  options.regularizer = r == "tv" ? mri::CsRegularizer::kTv : mri::CsRegularizer::kL1Wavelet;
  options.lambda = absl::GetFlag(FLAGS_lambda);
  options.iterations = absl::GetFlag(FLAGS_iterations);
  options.adaptive_restart = absl::GetFlag(FLAGS_restart);
  options.wavelet = absl::GetFlag(FLAGS_wavelet) == "db4" ? regularizers::WaveletFilter::kDb4
                                                           : regularizers::WaveletFilter::kDb2;
  options.wavelet_min_size = absl::GetFlag(FLAGS_wavelet_min_size);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.shifts_per_iteration = absl::GetFlag(FLAGS_shifts);
  options.random_shift = absl::GetFlag(FLAGS_random_shift);
  if (absl::GetFlag(FLAGS_power_iterations) > 0) options.power_iterations = absl::GetFlag(FLAGS_power_iterations);
  options.lipschitz = absl::GetFlag(FLAGS_lipschitz);
  options.residual_step_bound = !absl::GetFlag(FLAGS_fixed_margin);
  return options;
}

void Recon() {
  const Problem p = Load();
  const mri::SenseGeometry g{p.dims.nx, p.dims.ny, p.dims.coils, p.traj.size(), p.traj.kx.data(), p.traj.ky.data(),
                             p.maps.data.data(), nullptr};
  std::vector<Complex> image(p.dims.nx * p.dims.ny);
  const auto t0 = Clock::now();
  const auto result = bench::ValueOrExit(mri::CsSense(Stream::Cpu(), g, p.kspace.data.data(), Options(), image.data()),
                                         "CsSense");
  const double seconds = bench::SecondsSince(t0);
  auto out = bench::ValueOrExit(formats::MakeCfl({p.dims.nx, p.dims.ny}), "cfl");
  out.data = image;
  CHECK_OK(formats::WriteCfl(Path(absl::GetFlag(FLAGS_out)), out));
  std::printf("ours %.3f %.6g %.6g\n", seconds, result.data_scale, result.lipschitz);
}

void Prox() {
  const int64_t n = absl::GetFlag(FLAGS_n);
  const Stream cpu = Stream::Cpu();
  auto prox = bench::ValueOrExit(
      regularizers::WaveletProx::Create(cpu, {n, n, 1, regularizers::WaveletFilter::kDb2, 16}, 1, true,
                                        absl::GetFlag(FLAGS_shifts)),
      "prox");
  std::vector<Complex> x(n * n, Complex(1, 0.5));
  for (int64_t i = 0; i < n * n; ++i) x[i] *= 1 + 0.001 * (i % 97);
  const double prox_ms = bench::MedianMs(20, [&] { CHECK_OK(prox->Apply(0.01f, x.data())); }, 2);
  const Problem p = Load();
  const mri::SenseGeometry g{p.dims.nx, p.dims.ny, p.dims.coils, p.traj.size(), p.traj.kx.data(), p.traj.ky.data(),
                             p.maps.data.data(), nullptr};
  mri::SenseOperatorOptions o;
  o.use_toeplitz = true;
  auto op = bench::ValueOrExit(mri::SenseOperator::Create(cpu, g, o), "operator");
  std::vector<Complex> a(p.dims.nx * p.dims.ny, Complex(1, 0)), b(a.size());
  const double normal_ms = bench::MedianMs(20, [&] { CHECK_OK(op->Normal(a.data(), b.data())); }, 2);
  std::printf("prox %.3f ms (%lld^2, %d shifts), normal %.3f ms\n", prox_ms, (long long)n, absl::GetFlag(FLAGS_shifts),
              normal_ms);
}

// As mri_bench's: raw and after argmin_alpha ||alpha x - truth||.
void Compare() {
  const auto image = bench::ValueOrExit(formats::ReadCfl(absl::GetFlag(FLAGS_image)), "image");
  const auto truth = bench::ValueOrExit(formats::ReadCfl(Path("truth")), "truth");
  if (image.data.size() != truth.data.size()) {
    std::fprintf(stderr, "image has %zu values, truth %zu\n", image.data.size(), truth.data.size());
    std::exit(1);
  }
  std::complex<double> dot = 0;
  double norm = 0, truth_norm = 0, raw = 0;
  for (size_t i = 0; i < truth.data.size(); ++i) {
    const std::complex<double> x(image.data[i]), t(truth.data[i]);
    dot += std::conj(x) * t;
    norm += std::norm(x);
    truth_norm += std::norm(t);
    raw += std::norm(x - t);
  }
  const std::complex<double> alpha = norm > 0 ? dot / norm : 0.0;
  double scaled = 0;
  for (size_t i = 0; i < truth.data.size(); ++i) {
    scaled += std::norm(alpha * std::complex<double>(image.data[i]) - std::complex<double>(truth.data[i]));
  }
  std::printf("%s %.5f %.5f\n", absl::GetFlag(FLAGS_image).c_str(), std::sqrt(raw / truth_norm),
              std::sqrt(scaled / truth_norm));
}

template <typename T>
T* Put(const Stream& stream, const std::vector<T>& host, std::vector<std::shared_ptr<Buffer>>* keep) {
  const MemoryKind kind = MemoryKindFor(stream);
  auto buffer = bench::ValueOrExit(Buffer::Allocate(kind, host.size() * sizeof(T), stream.ordinal()), "allocate");
  CHECK_OK(CopyBytes(buffer->data(), kind, host.data(), MemoryKind::kHost, host.size() * sizeof(T), stream));
  keep->push_back(buffer);
  return static_cast<T*>(buffer->data());
}

void Gpu() {
  const Problem p = Load();
  const int reps = absl::GetFlag(FLAGS_reps);
  std::printf("# CsSense %s, %lld x %lld, %d coils, %lld points/coil, %d iterations, lambda %g (%s)\n\n",
              absl::GetFlag(FLAGS_regularizer).c_str(), (long long)p.dims.nx, (long long)p.dims.ny, p.dims.coils,
              (long long)p.traj.size(), absl::GetFlag(FLAGS_iterations), absl::GetFlag(FLAGS_lambda),
              DeviceRegistry::Get().Describe().c_str());
  std::printf("| backend | seconds (median of %d, incl. set-up) | speedup vs cpu | rel. l2 vs cpu |\n|---|---|---|---|\n",
              reps);
  std::vector<Stream> streams;
  streams.push_back(Stream::Cpu());
  if (DeviceRegistry::Get().cuda_available()) {
    streams.push_back(bench::ValueOrExit(Stream::Create(Backend::kCuda), "cuda stream"));
  } else {
    std::printf("(cuda skipped: %s)\n", DeviceRegistry::Get().cuda_unavailable_reason().c_str());
  }
  double cpu_seconds = 0;
  std::vector<Complex> cpu_image;
  for (const Stream& stream : streams) {
    std::vector<std::shared_ptr<Buffer>> keep;
    const mri::SenseGeometry g{p.dims.nx, p.dims.ny, p.dims.coils, p.traj.size(), Put(stream, p.traj.kx, &keep),
                               Put(stream, p.traj.ky, &keep), Put(stream, p.maps.data, &keep), nullptr};
    const Complex* kspace = Put(stream, p.kspace.data, &keep);
    std::vector<Complex> host(p.dims.nx * p.dims.ny);
    Complex* image = Put(stream, host, &keep);
    const double ms = bench::MedianMs(
        reps,
        [&] {
          CHECK_OK(mri::CsSense(stream, g, kspace, Options(), image).status());
          CHECK_OK(stream.Synchronize());
        },
        /*warmup=*/1);
    const MemoryKind kind = MemoryKindFor(stream);
    CHECK_OK(CopyBytes(host.data(), MemoryKind::kHost, image, kind, host.size() * sizeof(Complex), stream));
    CHECK_OK(stream.Synchronize());
    double diff = 0, norm = 0;
    if (stream.backend() == Backend::kCpu) {
      cpu_seconds = ms / 1000;
      cpu_image = host;
    }
    for (size_t i = 0; i < host.size(); ++i) {
      diff += std::norm(std::complex<double>(host[i] - cpu_image[i]));
      norm += std::norm(std::complex<double>(cpu_image[i]));
    }
    std::printf("| %s | %.4f | %.1f | %.2e |\n", std::string(BackendName(stream.backend())).c_str(), ms / 1000,
                cpu_seconds / (ms / 1000), std::sqrt(diff / norm));
  }
}

}  // namespace
}  // namespace tessera::recon

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "recon") {
    tessera::recon::Recon();
  } else if (mode == "prox") {
    tessera::recon::Prox();
  } else if (mode == "compare") {
    tessera::recon::Compare();
  } else if (mode == "gpu") {
    tessera::recon::Gpu();
  } else {
    std::fprintf(stderr, "--mode=%s is not one of recon, compare, gpu\n", mode.c_str());
    return 2;
  }
  return 0;
}
