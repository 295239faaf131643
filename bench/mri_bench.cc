// MRI reconstruction (issue 12), measured side by side in one run:
//   --mode=bench    CG-SENSE time per iteration and the normal operator
//                   E^H E on CPU and CUDA (radial, golden angle), through the
//                   NUFFT pair and the Toeplitz embedding;
//                   SENSE unfolding pixels/s for R = 2, 4, 8 on CPU and CUDA.
//                   Times are medians of --reps runs after one warm-up.
//   --mode=write    an exact radial Shepp-Logan problem (birdcage coils) as
//                   BART .cfl files in --dir: traj, kspace, maps, truth, dcf.
//   --mode=recon    CG-SENSE (CPU) of --dir's files: writes --dir/ours.cfl,
//                   prints "ours <seconds> <nrmse> <nrmse_scaled>".
//   --mode=compare  prints "<name> <nrmse> <nrmse_scaled>" of --image against
//                   --dir/truth (nrmse_scaled: after the best complex scale,
//                   so BART's internal scaling does not count).
// bench/cgsense_vs_bart.sh drives write / recon / compare against `bart pics`.
//
//   mri_bench [--mode=bench] [--n=256] [--coils=8] [--spokes=201] [--iterations=10]
//             [--reps=3] [--sense_n=512] [--sense_coils=16] [--backends=cpu,cuda]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/memory_kind_for.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/density_compensation.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/sense_unfold.h"
#include "kernels/reconstruction/mri/trajectory.h"
#include "services/reconstruction/formats/cfl.h"

ABSL_FLAG(std::string, mode, "bench", "bench | write | recon | compare");
ABSL_FLAG(int64_t, n, 256, "image size n x n");
ABSL_FLAG(int, coils, 8, "receive coils (birdcage)");
ABSL_FLAG(int64_t, spokes, 201, "radial spokes (golden angle), 2n samples each");
ABSL_FLAG(int, iterations, 10, "CG iterations");
ABSL_FLAG(double, lambda, 1e-4, "CG-SENSE relative Tikhonov weight");
ABSL_FLAG(double, nufft_tolerance, 1e-5, "NUFFT tolerance");
ABSL_FLAG(int, reps, 3, "timed repetitions (median)");
ABSL_FLAG(int64_t, sense_n, 512, "SENSE unfolding image size");
ABSL_FLAG(int, sense_coils, 16, "SENSE unfolding coils");
ABSL_FLAG(std::vector<std::string>, backends, std::vector<std::string>({"cpu", "cuda"}), "backends to time");
ABSL_FLAG(std::string, dir, "/tmp/mri_vs_bart", "directory of the cfl files (write / recon / compare)");
ABSL_FLAG(std::string, image, "", "compare: the cfl image to score");
ABSL_FLAG(bool, toeplitz, true, "recon: the Toeplitz normal operator (as `tessera recon mri` does) instead of the NUFFT pair");

namespace tessera::recon {
namespace {

using Complex = std::complex<float>;
using bench::Clock;

#define CHECK_OK(expr) ::tessera::bench::ExitUnlessOk((expr), #expr)

using bench::Median;

// Median seconds of fn() (after one warm-up), synchronising `stream`.
double TimeIt(const Stream& stream, int reps, const std::function<void()>& fn) {
  return bench::MedianMs(
             reps,
             [&] {
               fn();
               CHECK_OK(stream.Synchronize());
             },
             /*warmup=*/1) /
         1000;
}

std::vector<Complex> RandomComplex(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<Complex> v(n);
  for (auto& x : v) x = Complex(d(rng), d(rng));
  return v;
}

// Host vectors staged on a stream's memory (device Buffers for CUDA).
class Staged {
 public:
  Staged(const Stream& stream) : stream_(stream) {}
  template <typename T>
  T* Put(const std::vector<T>& host) {
    const MemoryKind kind = MemoryKindFor(stream_);
    auto buffer = bench::ValueOrExit(Buffer::Allocate(kind, host.size() * sizeof(T), stream_.ordinal()), "allocate");
    CHECK_OK(CopyBytes(buffer->data(), kind, host.data(), MemoryKind::kHost, host.size() * sizeof(T), stream_));
    buffers_.push_back(buffer);
    return static_cast<T*>(buffer->data());
  }
  template <typename T>
  T* Alloc(size_t n) { return Put(std::vector<T>(n)); }

 private:
  const Stream& stream_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
};

const std::vector<Stream>& Streams() {
  static std::vector<Stream>* cached = nullptr;
  if (cached != nullptr) return *cached;
  auto& streams = *(cached = new std::vector<Stream>);
  for (const std::string& b : absl::GetFlag(FLAGS_backends)) {
    if (b == "cpu") streams.push_back(Stream::Cpu());
    if (b == "cuda") {
      if (!DeviceRegistry::Get().cuda_available()) {
        std::printf("(cuda skipped: %s)\n", DeviceRegistry::Get().cuda_unavailable_reason().c_str());
        continue;
      }
      streams.push_back(bench::ValueOrExit(Stream::Create(Backend::kCuda), "cuda stream"));
    }
  }
  return *cached;
}

void BenchCgSense() {
  const int64_t n = absl::GetFlag(FLAGS_n), spokes = absl::GetFlag(FLAGS_spokes);
  const int coils = absl::GetFlag(FLAGS_coils), iterations = absl::GetFlag(FLAGS_iterations);
  const int reps = absl::GetFlag(FLAGS_reps);
  const auto traj = bench::ValueOrExit(mri::RadialTrajectory(n, 2 * n, spokes, mri::RadialOrdering::kGoldenAngle), "traj");
  const auto maps = bench::ValueOrExit(mri::BirdcageMaps(n, n, {coils, 1.5}), "maps");
  const auto kspace = RandomComplex(traj.size() * coils, 1);  // timing does not depend on values
  const auto x = RandomComplex(n * n, 2);
  std::printf("\n## CG-SENSE, %lld x %lld image, %d coils, %lld spokes x %lld samples (%lld points/coil), NUFFT tol %g\n\n",
              (long long)n, (long long)n, coils, (long long)spokes, (long long)(2 * n), (long long)traj.size(),
              absl::GetFlag(FLAGS_nufft_tolerance));
  std::printf("| backend | normal operator | E^H E ms | CG-SENSE ms/iteration (%d it) | speedup vs cpu (same operator) |\n",
              iterations);
  std::printf("|---|---|---|---|---|\n");
  double cpu_iteration[2] = {0, 0};
  for (const Stream& stream : Streams()) {
    Staged staged(stream);
    mri::SenseGeometry g{n, n, coils, traj.size(), staged.Put(traj.kx), staged.Put(traj.ky), staged.Put(maps), nullptr};
    const Complex* d_k = staged.Put(kspace);
    const Complex* d_x = staged.Put(x);
    Complex* d_out = staged.Alloc<Complex>(n * n);
    for (int toeplitz = 0; toeplitz < 2; ++toeplitz) {
      mri::SenseOperatorOptions op_options;
      op_options.nufft_tolerance = absl::GetFlag(FLAGS_nufft_tolerance);
      op_options.use_toeplitz = toeplitz == 1;
      auto op = bench::ValueOrExit(mri::SenseOperator::Create(stream, g, op_options), "operator");
      const double normal = TimeIt(stream, reps, [&] { CHECK_OK(op->Normal(d_x, d_out)); });
      mri::CgSenseOptions options;
      options.iterations = iterations;
      options.tolerance = 0;
      options.lambda = absl::GetFlag(FLAGS_lambda);
      options.nufft = op_options;
      options.use_toeplitz = toeplitz == 1;
      // Solve time includes operator setup (plans, Toeplitz kernel), spread over the iterations.
      const double solve = TimeIt(stream, reps, [&] { CHECK_OK(mri::CgSense(stream, g, d_k, options, d_out).status()); });
      const double per_iteration = solve / iterations;
      if (stream.backend() == Backend::kCpu) cpu_iteration[toeplitz] = per_iteration;
      const std::string speedup = cpu_iteration[toeplitz] > 0 ? absl::StrCat(cpu_iteration[toeplitz] / per_iteration) : "-";
      std::printf("| %s | %s | %.2f | %.2f | %s |\n", std::string(BackendName(stream.backend())).c_str(),
                  toeplitz ? "Toeplitz" : "NUFFT pair", 1e3 * normal, 1e3 * per_iteration, speedup.c_str());
    }
  }
}

void BenchSense() {
  const int64_t n = absl::GetFlag(FLAGS_sense_n);
  const int coils = absl::GetFlag(FLAGS_sense_coils), reps = absl::GetFlag(FLAGS_reps);
  const auto maps = bench::ValueOrExit(mri::BirdcageMaps(n, n, {coils, 1.5}), "maps");
  std::printf("\n## SENSE unfolding, %lld x %lld image, %d coils (form S^H S + batched Cholesky + scatter)\n\n",
              (long long)n, (long long)n, coils);
  std::printf("| R | backend | ms | Mpixels/s | speedup vs cpu |\n|---|---|---|---|---|\n");
  for (int r : {2, 4, 8}) {
    const mri::SenseShape shape{n, n, coils, r, 1};
    const auto aliased = RandomComplex(shape.aliased_pixels() * coils, 3);
    double cpu_time = 0;
    for (const Stream& stream : Streams()) {
      Staged staged(stream);
      const Complex* d_maps = staged.Put(maps);
      const Complex* d_aliased = staged.Put(aliased);
      Complex* d_image = staged.Alloc<Complex>(n * n);
      const double t = TimeIt(stream, reps, [&] {
        CHECK_OK(mri::SenseUnfold(stream, shape, 1e-3f, d_maps, d_aliased, d_image).status());
      });
      if (stream.backend() == Backend::kCpu) cpu_time = t;
      const std::string speedup = cpu_time > 0 ? absl::StrCat(cpu_time / t) : "-";
      std::printf("| %d | %s | %.2f | %.1f | %s |\n", r, std::string(BackendName(stream.backend())).c_str(), 1e3 * t,
                  n * n / t / 1e6, speedup.c_str());
    }
  }
}

std::string Path(const std::string& name) { return absl::GetFlag(FLAGS_dir) + "/" + name; }

formats::CflArray ToCfl(const std::vector<int64_t>& dims, const std::vector<Complex>& data) {
  auto array = bench::ValueOrExit(formats::MakeCfl(dims), "cfl");
  array.data = data;
  return array;
}

void Write() {
  const int64_t n = absl::GetFlag(FLAGS_n), spokes = absl::GetFlag(FLAGS_spokes);
  const int coils = absl::GetFlag(FLAGS_coils);
  const auto traj = bench::ValueOrExit(mri::RadialTrajectory(n, 2 * n, spokes, mri::RadialOrdering::kGoldenAngle), "traj");
  const auto series = bench::ValueOrExit(mri::BirdcageSeries({coils, 1.5}, 4), "series");
  const auto phantom = mri::SheppLogan(0.9);
  const auto t0 = Clock::now();
  const auto kspace = bench::ValueOrExit(mri::PhantomCoilKspace(phantom, series, traj, n, n), "kspace");
  std::fprintf(stderr, "simulated %lld x %d samples in %.1f s\n", (long long)traj.size(), coils,
               bench::SecondsSince(t0));
  const auto maps = mri::EvaluateCoilSeries(series, n, n);
  const auto truth = mri::RasterizePhantom(phantom, n, n);
  const auto dcf = bench::ValueOrExit(mri::RadialRampDensity(traj), "dcf");
  CHECK_OK(formats::WriteCfl(Path("traj"), formats::TrajectoryToCfl(traj)));
  CHECK_OK(formats::WriteCfl(Path("kspace"), ToCfl({1, 2 * n, spokes, coils}, kspace)));
  CHECK_OK(formats::WriteCfl(Path("maps"), ToCfl({n, n, 1, coils}, maps)));
  CHECK_OK(formats::WriteCfl(Path("truth"), ToCfl({n, n}, std::vector<Complex>(truth.begin(), truth.end()))));
  CHECK_OK(formats::WriteCfl(Path("dcf"), ToCfl({1, 2 * n, spokes}, std::vector<Complex>(dcf.begin(), dcf.end()))));
}

std::pair<double, double> Nrmse(const std::vector<Complex>& image, const std::vector<Complex>& truth) {
  std::complex<double> dot = 0;
  double norm = 0, truth_norm = 0, raw = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    dot += std::conj(std::complex<double>(image[i])) * std::complex<double>(truth[i]);
    norm += std::norm(image[i]);
    truth_norm += std::norm(truth[i]);
    raw += std::norm(image[i] - truth[i]);
  }
  const std::complex<double> alpha = norm > 0 ? dot / norm : 0;  // argmin ||alpha x - t||
  double scaled = 0;
  for (size_t i = 0; i < truth.size(); ++i) scaled += std::norm(alpha * std::complex<double>(image[i]) - std::complex<double>(truth[i]));
  return {std::sqrt(raw / truth_norm), std::sqrt(scaled / truth_norm)};
}

void Recon() {
  const auto traj_cfl = bench::ValueOrExit(formats::ReadCfl(Path("traj")), "traj");
  const auto kspace = bench::ValueOrExit(formats::ReadCfl(Path("kspace")), "kspace");
  const auto maps = bench::ValueOrExit(formats::ReadCfl(Path("maps")), "maps");
  const auto truth = bench::ValueOrExit(formats::ReadCfl(Path("truth")), "truth");
  const auto dims = bench::ValueOrExit(formats::CheckNonCartesianCfl(kspace, traj_cfl, maps), "dims");
  const auto traj = bench::ValueOrExit(formats::TrajectoryFromCfl(traj_cfl), "traj");
  mri::SenseGeometry g{dims.nx, dims.ny, dims.coils, traj.size(), traj.kx.data(), traj.ky.data(), maps.data.data(),
                       nullptr};
  mri::CgSenseOptions options;
  options.iterations = absl::GetFlag(FLAGS_iterations);
  options.lambda = absl::GetFlag(FLAGS_lambda);
  options.tolerance = 0;
  options.nufft.nufft_tolerance = absl::GetFlag(FLAGS_nufft_tolerance);
  options.use_toeplitz = absl::GetFlag(FLAGS_toeplitz);
  std::vector<Complex> image(dims.nx * dims.ny);
  const auto t0 = Clock::now();
  CHECK_OK(mri::CgSense(Stream::Cpu(), g, kspace.data.data(), options, image.data()).status());
  const double seconds = bench::SecondsSince(t0);
  CHECK_OK(formats::WriteCfl(Path("ours"), ToCfl({dims.nx, dims.ny}, image)));
  const auto [raw, scaled] = Nrmse(image, truth.data);
  std::printf("ours %.3f %.4f %.4f\n", seconds, raw, scaled);
}

void Compare() {
  const auto image = bench::ValueOrExit(formats::ReadCfl(absl::GetFlag(FLAGS_image)), "image");
  const auto truth = bench::ValueOrExit(formats::ReadCfl(Path("truth")), "truth");
  if (image.data.size() != truth.data.size()) {
    std::fprintf(stderr, "image has %zu values, truth %zu\n", image.data.size(), truth.data.size());
    std::exit(1);
  }
  const auto [raw, scaled] = Nrmse(image.data, truth.data);
  std::printf("%s %.4f %.4f\n", absl::GetFlag(FLAGS_image).c_str(), raw, scaled);
}

}  // namespace
}  // namespace tessera::recon

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace tessera::recon;
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "bench") {
    std::printf("# mri_bench on %s\n", tessera::DeviceRegistry::Get().Describe().c_str());
    BenchCgSense();
    BenchSense();
  } else if (mode == "write") {
    Write();
  } else if (mode == "recon") {
    Recon();
  } else if (mode == "compare") {
    Compare();
  } else {
    std::fprintf(stderr, "--mode=%s is not one of bench, write, recon, compare\n", mode.c_str());
    return 2;
  }
  return 0;
}
