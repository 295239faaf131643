// ESPIRiT (kernels/reconstruction/mri/espirit.h) against BART's `bart ecalib`
// (issue 36), the C++ side of bench/espirit_vs_bart.sh:
//   --mode=write    an exact Shepp-Logan problem with 8 birdcage coils in
//                   --dir: Cartesian (--kind=cartesian: full n x n k-space,
//                   and for CG-SENSE its R = 2 lines plus the 24 centre lines
//                   as a Cartesian "trajectory" cg_traj / cg_kspace) or radial
//                   (golden angle, 2n samples per spoke; cg_* = the same data);
//                   true maps (maps_true) and the pixel-averaged truth.
//   --mode=espirit  our ESPIRiT of --dir/kspace (with --dir/traj when radial:
//                   the gridded centre first), median of --reps in-process runs,
//                   the per-pixel step on --backend (cpu or cuda),
//                   writes maps_ours; prints "espirit <seconds> <kernels>".
//   --mode=cgsense  CG-SENSE (CPU) of cg_kspace / cg_traj with --maps; prints
//                   "<maps> <nrmse>": ||s |x| - truth|| / ||truth|| with the best
//                   real scale s (maps from different tools differ in phase and
//                   BART rescales, so magnitudes are compared).
//
//   espirit_bench --mode=write --kind=cartesian --n=128 --dir=/tmp/espirit_vs_bart
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_util.h"
#include "common/device.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/espirit.h"
#include "kernels/reconstruction/mri/espirit_gridding.h"
#include "kernels/reconstruction/mri/trajectory.h"
#include "services/reconstruction/formats/cfl.h"

ABSL_FLAG(std::string, mode, "write", "write | espirit | cgsense");
ABSL_FLAG(std::string, kind, "cartesian", "write: cartesian or radial");
ABSL_FLAG(int64_t, n, 128, "image size n x n");
ABSL_FLAG(int, coils, 8, "receive coils (birdcage)");
ABSL_FLAG(int64_t, spokes, 101, "radial spokes (golden angle), 2n samples each");
ABSL_FLAG(int, reps, 3, "espirit: timed repetitions (median)");
ABSL_FLAG(int, iterations, 20, "cgsense: CG iterations");
ABSL_FLAG(double, lambda, 1e-4, "cgsense: relative Tikhonov weight");
ABSL_FLAG(std::string, maps, "maps_ours", "cgsense: the maps cfl (in --dir)");
ABSL_FLAG(std::string, dir, "/tmp/espirit_vs_bart", "directory of the cfl files");
ABSL_FLAG(std::string, backend, "cpu", "espirit: cpu or cuda (the per-pixel step; gridding and calibration on the host)");

namespace tessera::recon {
namespace {

namespace mri = recon::mri;
using Complex = std::complex<float>;

#define CHECK_OK(expr) ::tessera::bench::ExitUnlessOk((expr), #expr)

std::string Path(const std::string& name) { return absl::GetFlag(FLAGS_dir) + "/" + name; }

formats::CflArray ToCfl(const std::vector<int64_t>& dims, const std::vector<Complex>& data) {
  auto array = bench::ValueOrExit(formats::MakeCfl(dims), "cfl");
  array.data = data;
  return array;
}

void Write() {
  const int64_t n = absl::GetFlag(FLAGS_n), spokes = absl::GetFlag(FLAGS_spokes);
  const int coils = absl::GetFlag(FLAGS_coils);
  const auto series = bench::ValueOrExit(mri::BirdcageSeries({coils, 1.5}, 4), "series");
  const auto phantom = mri::SheppLogan(0.9);
  const auto truth = mri::RasterizePhantom(phantom, n, n);
  CHECK_OK(formats::WriteCfl(Path("maps_true"), ToCfl({n, n, 1, coils}, mri::EvaluateCoilSeries(series, n, n))));
  CHECK_OK(formats::WriteCfl(Path("truth"), ToCfl({n, n}, std::vector<Complex>(truth.begin(), truth.end()))));
  std::remove(Path("traj.cfl").c_str());
  std::remove(Path("traj.hdr").c_str());
  if (absl::GetFlag(FLAGS_kind) == "radial") {
    const auto traj = bench::ValueOrExit(mri::RadialTrajectory(n, 2 * n, spokes, mri::RadialOrdering::kGoldenAngle), "traj");
    const auto kspace = bench::ValueOrExit(mri::PhantomCoilKspace(phantom, series, traj, n, n), "kspace");
    for (const char* name : {"traj", "cg_traj"}) CHECK_OK(formats::WriteCfl(Path(name), formats::TrajectoryToCfl(traj)));
    for (const char* name : {"kspace", "cg_kspace"}) {
      CHECK_OK(formats::WriteCfl(Path(name), ToCfl({1, 2 * n, spokes, coils}, kspace)));
    }
    return;
  }
  // Cartesian: the full grid (k = u - n/2), then R = 2 lines + the 24 centre lines for CG-SENSE.
  mri::Trajectory2D grid;
  grid.samples = n;
  grid.spokes = n;
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t u = 0; u < n; ++u) {
      grid.kx.push_back(static_cast<float>(u - n / 2));
      grid.ky.push_back(static_cast<float>(v - n / 2));
    }
  }
  const auto kspace = bench::ValueOrExit(mri::PhantomCoilKspace(phantom, series, grid, n, n), "kspace");
  CHECK_OK(formats::WriteCfl(Path("kspace"), ToCfl({n, n, 1, coils}, kspace)));
  std::vector<int64_t> lines;
  for (int64_t v = 0; v < n; ++v) {
    if (v % 2 == 0 || std::abs(v - n / 2) < 12) lines.push_back(v);
  }
  mri::Trajectory2D cg;
  cg.samples = n;
  cg.spokes = static_cast<int64_t>(lines.size());
  std::vector<Complex> cg_kspace(static_cast<size_t>(n * cg.spokes * coils));
  for (int64_t l = 0; l < cg.spokes; ++l) {
    for (int64_t u = 0; u < n; ++u) {
      cg.kx.push_back(static_cast<float>(u - n / 2));
      cg.ky.push_back(static_cast<float>(lines[l] - n / 2));
      for (int c = 0; c < coils; ++c) cg_kspace[(c * cg.spokes + l) * n + u] = kspace[(c * n + lines[l]) * n + u];
    }
  }
  CHECK_OK(formats::WriteCfl(Path("cg_traj"), formats::TrajectoryToCfl(cg)));
  CHECK_OK(formats::WriteCfl(Path("cg_kspace"), ToCfl({1, n, cg.spokes, coils}, cg_kspace)));
}

void Espirit() {
  const auto kspace = bench::ValueOrExit(formats::ReadCfl(Path("kspace")), "kspace");
  const int coils = static_cast<int>(kspace.dim(formats::kCoilDim));
  const auto truth = bench::ValueOrExit(formats::ReadCfl(Path("truth")), "truth");
  const int64_t n = truth.dim(0);
  const bool radial = formats::ReadCflHeader(Path("traj")).ok();
  mri::Trajectory2D traj;
  if (radial) traj = bench::ValueOrExit(formats::TrajectoryFromCfl(bench::ValueOrExit(formats::ReadCfl(Path("traj")), "traj")), "traj");
  Stream stream = Stream::Cpu();
  if (absl::GetFlag(FLAGS_backend) == "cuda") stream = bench::ValueOrExit(Stream::Create(Backend::kCuda), "cuda stream");
  std::vector<double> times;
  mri::EspiritMaps maps;
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    const auto t0 = bench::Clock::now();
    if (radial) {
      const int64_t size = std::min<int64_t>(24, n);
      const auto calibration = bench::ValueOrExit(mri::GriddedCalibration(traj, kspace.data.data(), coils, size), "gridding");
      maps = bench::ValueOrExit(mri::EspiritFromCalibration(stream, calibration, size, size, coils, n, n), "espirit");
    } else {
      maps = bench::ValueOrExit(mri::EspiritCartesian(stream, kspace.data.data(), n, n, coils), "espirit");
    }
    times.push_back(bench::SecondsSince(t0));
  }
  std::sort(times.begin(), times.end());
  if (radial) {  // the gridding alone, for the split
    const auto t0 = bench::Clock::now();
    bench::ValueOrExit(mri::GriddedCalibration(traj, kspace.data.data(), coils, std::min<int64_t>(24, n)), "gridding");
    std::fprintf(stderr, "gridding %.4f s\n", bench::SecondsSince(t0));
  }
  CHECK_OK(formats::WriteCfl(Path("maps_ours"), ToCfl({n, n, 1, coils}, maps.maps)));
  std::printf("espirit %.4f %d\n", times[times.size() / 2], maps.kernels);
}

void CgSense() {
  const auto traj_cfl = bench::ValueOrExit(formats::ReadCfl(Path("cg_traj")), "cg_traj");
  const auto kspace = bench::ValueOrExit(formats::ReadCfl(Path("cg_kspace")), "cg_kspace");
  auto maps = bench::ValueOrExit(formats::ReadCfl(Path(absl::GetFlag(FLAGS_maps))), "maps");
  const auto truth = bench::ValueOrExit(formats::ReadCfl(Path("truth")), "truth");
  const int64_t n = truth.dim(0);
  const int coils = static_cast<int>(kspace.dim(formats::kCoilDim));
  if (maps.data.size() != static_cast<size_t>(n * n * coils)) {
    std::fprintf(stderr, "maps have %zu values, expected %lld x %lld x %d\n", maps.data.size(), (long long)n,
                 (long long)n, coils);
    std::exit(1);
  }
  const auto traj = bench::ValueOrExit(formats::TrajectoryFromCfl(traj_cfl), "cg_traj");
  mri::SenseGeometry g{n, n, coils, traj.size(), traj.kx.data(), traj.ky.data(), maps.data.data(), nullptr};
  mri::CgSenseOptions options;
  options.iterations = absl::GetFlag(FLAGS_iterations);
  options.lambda = absl::GetFlag(FLAGS_lambda);
  options.tolerance = 0;
  options.use_toeplitz = true;
  std::vector<Complex> image(n * n);
  CHECK_OK(mri::CgSense(Stream::Cpu(), g, kspace.data.data(), options, image.data()).status());
  double at = 0, aa = 0, tt = 0;
  for (int64_t i = 0; i < n * n; ++i) {
    const double a = std::abs(image[i]), t = truth.data[i].real();
    at += a * t, aa += a * a, tt += t * t;
  }
  const double s = aa > 0 ? at / aa : 0;
  double err = 0;
  for (int64_t i = 0; i < n * n; ++i) {
    const double d = s * std::abs(image[i]) - truth.data[i].real();
    err += d * d;
  }
  std::printf("%s %.4f\n", absl::GetFlag(FLAGS_maps).c_str(), std::sqrt(err / tt));
}

}  // namespace
}  // namespace tessera::recon

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "write") {
    tessera::recon::Write();
  } else if (mode == "espirit") {
    tessera::recon::Espirit();
  } else if (mode == "cgsense") {
    tessera::recon::CgSense();
  } else {
    std::fprintf(stderr, "--mode=%s is not one of write, espirit, cgsense\n", mode.c_str());
    return 2;
  }
  return 0;
}
