// 3-D MRI (issue 36): "128^3 8-coil stack-of-stars CG-SENSE, 20 iterations,
// GPU < 2 s". Times ReconstructNonCartesian3D end to end (host kz FFT, the
// uploads, the per-slice operators with their Toeplitz kernels, CG, the
// download) on each backend in one run: the stack-of-stars path, and with
// --compare_nufft the 3-D NUFFT path on the same data (what a kooshball
// takes). Medians of --reps runs after one warm-up.
//
// Data do not change the work (CG runs all iterations: tolerance 0), so the
// k-space is random and the maps are unit-modulus linear phases / sqrt(coils);
// accuracy is tested in kernels/reconstruction/mri/noncartesian_3d_test.
//
//   mri3d_bench [--n=128] [--coils=8] [--spokes=128] [--iterations=20]
//               [--reps=3] [--backends=cpu,cuda] [--compare_nufft]
#include <cmath>
#include <complex>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_util.h"
#include "common/device.h"
#include "common/parallel.h"
#include "kernels/reconstruction/mri/noncartesian_3d.h"
#include "kernels/reconstruction/mri/trajectory.h"

ABSL_FLAG(int64_t, n, 128, "volume n x n x n (n partitions)");
ABSL_FLAG(int, coils, 8, "receive coils");
ABSL_FLAG(int64_t, spokes, 128, "radial spokes per partition (golden angle), 2n samples each");
ABSL_FLAG(int, iterations, 20, "CG iterations");
ABSL_FLAG(int, reps, 3, "timed repetitions (median)");
ABSL_FLAG(std::vector<std::string>, backends, std::vector<std::string>({"cpu", "cuda"}), "backends to time");
ABSL_FLAG(bool, compare_nufft, false, "also time the 3-D NUFFT path on the same data");

namespace tessera {
namespace {

using Complex = std::complex<float>;
namespace mri = recon::mri;

int Main() {
  const int64_t n = absl::GetFlag(FLAGS_n), spokes = absl::GetFlag(FLAGS_spokes);
  const int coils = absl::GetFlag(FLAGS_coils);
  const mri::Trajectory3D t = bench::ValueOrExit(
      mri::StackOfStarsTrajectory(n, n, 2 * n, spokes, mri::RadialOrdering::kGoldenAngle), "trajectory");
  const int64_t points = t.size(), voxels = n * n * n;
  std::vector<Complex> kspace(coils * points), maps(coils * voxels);
  ParallelFor(coils, [&](int64_t begin, int64_t end, int) {
    for (int64_t c = begin; c < end; ++c) {
      std::mt19937 rng(static_cast<unsigned>(c + 1));
      std::normal_distribution<float> g(0, 1);
      for (int64_t j = 0; j < points; ++j) kspace[c * points + j] = Complex(g(rng), g(rng));
      const float norm = 1 / std::sqrt(static_cast<float>(coils));
      for (int64_t p = 0; p < voxels; ++p) {
        const double phase = 2 * 3.14159265358979 * (c + 1) * ((p % n) + 2.0 * (p / (n * n))) / (8.0 * n);
        maps[c * voxels + p] = std::polar(norm, static_cast<float>(phase));
      }
    }
  }, 1);
  const mri::NonCartesian3D problem{n, n, n, coils, points, t.kx.data(), t.ky.data(), t.kz.data(), kspace.data(),
                                    maps.data(), nullptr};
  std::printf("3-D CG-SENSE: %lld^3, %d coils, stack of stars %lld spokes x %lld samples x %lld partitions "
              "(%lld points per coil), %d iterations, Toeplitz, NUFFT tolerance 1e-5, CPU threads %d\n",
              static_cast<long long>(n), coils, static_cast<long long>(spokes), static_cast<long long>(2 * n),
              static_cast<long long>(n), static_cast<long long>(points), absl::GetFlag(FLAGS_iterations),
              CpuThreads());
  std::vector<Complex> image(voxels);
  for (const std::string& b : absl::GetFlag(FLAGS_backends)) {
    Stream stream = Stream::Cpu();
    if (b == "cuda") {
      if (!DeviceRegistry::Get().cuda_available()) {
        std::printf("(cuda skipped: %s)\n", DeviceRegistry::Get().cuda_unavailable_reason().c_str());
        continue;
      }
      stream = bench::ValueOrExit(Stream::Create(Backend::kCuda), "cuda stream");
    }
    for (bool stack : {true, false}) {
      if (!stack && !absl::GetFlag(FLAGS_compare_nufft)) continue;
      mri::Recon3DOptions options;
      options.allow_stack_of_stars = stack;
      options.cg.iterations = absl::GetFlag(FLAGS_iterations);
      options.cg.tolerance = 0;
      options.cg.lambda = 1e-3;
      options.cg.use_toeplitz = true;
      options.cg.nufft.nufft_tolerance = 1e-5;
      mri::Recon3DResult last;
      const double ms = bench::MedianMs(absl::GetFlag(FLAGS_reps), [&] {
        last = bench::ValueOrExit(mri::ReconstructNonCartesian3D(stream, problem, options, image.data()), "recon");
      }, /*warmup=*/1);
      std::printf("%-4s %-38s %9.3f s  (%d iterations)\n", b.c_str(), mri::Path3DName(last.path), ms / 1000,
                  last.iterations);
    }
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::Main();
}
