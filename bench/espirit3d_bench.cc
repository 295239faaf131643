// 3-D ESPIRiT (kernels/reconstruction/mri/espirit3d.h) against BART's
// `bart ecalib -m1` on the same 3-D k-space (issue 36), the C++ side of
// bench/espirit3d_vs_bart.sh. Files are BART .cfl in --dir:
//   --mode=write    kspace: the project's own problem, for machines without
//                   BART: exact Cartesian k-space of the 3-D Shepp-Logan with
//                   --coils smooth coils (ellipsoid_phantom.h), --n^3.
//   --mode=espirit  our maps of --dir/kspace (nx x ny x nz x coils, BART's
//                   ecalib defaults: 24^3 region, 6^3 kernel, threshold 0.001,
//                   crop 0.8), median of --reps in-process runs with the
//                   Gram volumes and per-voxel step on --backend (cpu or
//                   cuda); writes maps_ours; prints "espirit <seconds> <kernels>".
//   --mode=mask     kspace_us: kspace on a --ry x --rz grid of (y, z) lines
//                   plus the fully sampled 24^2 (y, z) centre (CG-SENSE input).
//   --mode=compare  per-voxel |<S_a, S_b>| of --maps against --against over
//                   the voxels where --truth is non-zero and both maps are
//                   non-zero (maps unit-norm: 1 = the same up to a phase);
//                   prints "<maps> <against> <mean> <min> <voxels>".
//   --mode=nrmse    ||s |x| - |truth||| / ||truth|| of --recon against --truth
//                   with the best real scale s (tools scale and phase differently).
#include <algorithm>
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
#include "kernels/reconstruction/mri/ellipsoid_phantom.h"
#include "kernels/reconstruction/mri/espirit3d.h"
#include "services/reconstruction/formats/cfl.h"

ABSL_FLAG(std::string, mode, "espirit", "write | espirit | mask | compare | nrmse");
ABSL_FLAG(int64_t, n, 64, "write: volume side");
ABSL_FLAG(int, coils, 8, "write: coils");
ABSL_FLAG(std::string, dir, "/tmp/espirit3d_vs_bart", "directory of the cfl files");
ABSL_FLAG(int, reps, 3, "espirit: timed repetitions (median)");
ABSL_FLAG(std::string, backend, "cpu", "espirit: cpu or cuda (Gram volumes and per-voxel step)");
ABSL_FLAG(int, ry, 2, "mask: keep every ry-th y line");
ABSL_FLAG(int, rz, 2, "mask: keep every rz-th z line");
ABSL_FLAG(std::string, maps, "maps_ours", "compare: maps cfl");
ABSL_FLAG(std::string, against, "maps_bart", "compare: the other maps cfl");
ABSL_FLAG(std::string, truth, "truth", "compare / nrmse: the object (cfl)");
ABSL_FLAG(std::string, recon, "recon_ours", "nrmse: the reconstruction (cfl)");

namespace tessera::recon {
namespace {

namespace mri = recon::mri;
using Complex = std::complex<float>;

std::string Path(const std::string& name) { return absl::GetFlag(FLAGS_dir) + "/" + name; }

formats::CflArray Read(const std::string& name) { return bench::ValueOrExit(formats::ReadCfl(Path(name)), name.c_str()); }

void Write() {
  const int64_t n = absl::GetFlag(FLAGS_n);
  const int coils = absl::GetFlag(FLAGS_coils);
  const auto series = bench::ValueOrExit(mri::SmoothCoilSeries3D(coils, 1), "coil series");
  auto kspace = bench::ValueOrExit(formats::MakeCfl({n, n, n, coils}), "cfl");
  kspace.data = bench::ValueOrExit(mri::PhantomCartesianKspace3D(mri::SheppLogan3D(0.9), series, n, n, n), "kspace");
  bench::ExitUnlessOk(formats::WriteCfl(Path("kspace"), kspace), "kspace");
}

void Espirit() {
  const auto kspace = Read("kspace");
  const std::array<int64_t, 3> dims = {kspace.dim(0), kspace.dim(1), kspace.dim(2)};
  const int coils = static_cast<int>(kspace.dim(formats::kCoilDim));
  Stream stream = Stream::Cpu();
  if (absl::GetFlag(FLAGS_backend) == "cuda") stream = bench::ValueOrExit(Stream::Create(Backend::kCuda), "cuda stream");
  std::vector<double> times;
  mri::EspiritMaps maps;
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) {
    const auto t0 = bench::Clock::now();
    maps = bench::ValueOrExit(mri::Espirit3dCartesian(stream, kspace.data.data(), dims, coils), "espirit");
    times.push_back(bench::SecondsSince(t0));
  }
  std::sort(times.begin(), times.end());
  auto out = bench::ValueOrExit(formats::MakeCfl({dims[0], dims[1], dims[2], coils}), "cfl");
  out.data = maps.maps;
  bench::ExitUnlessOk(formats::WriteCfl(Path("maps_ours"), out), "maps_ours");
  std::printf("espirit %.4f %d\n", times[times.size() / 2], maps.kernels);
}

void Mask() {
  auto kspace = Read("kspace");
  const int64_t nx = kspace.dim(0), ny = kspace.dim(1), nz = kspace.dim(2), coils = kspace.dim(formats::kCoilDim);
  const int ry = absl::GetFlag(FLAGS_ry), rz = absl::GetFlag(FLAGS_rz);
  int64_t kept = 0;
  for (int64_t w = 0; w < nz; ++w) {
    for (int64_t v = 0; v < ny; ++v) {
      const bool centre = std::abs(v - ny / 2) < 12 && std::abs(w - nz / 2) < 12;
      const bool keep = centre || (v % ry == 0 && w % rz == 0);
      kept += keep;
      if (keep) continue;
      for (int64_t c = 0; c < coils; ++c) {
        std::fill_n(kspace.data.begin() + ((c * nz + w) * ny + v) * nx, nx, Complex(0, 0));
      }
    }
  }
  bench::ExitUnlessOk(formats::WriteCfl(Path("kspace_us"), kspace), "kspace_us");
  std::fprintf(stderr, "mask: %lld of %lld (y, z) lines (R = %.2f)\n", static_cast<long long>(kept),
               static_cast<long long>(ny * nz), static_cast<double>(ny * nz) / kept);
}

void Compare() {
  const auto a = Read(absl::GetFlag(FLAGS_maps)), b = Read(absl::GetFlag(FLAGS_against));
  const auto truth = Read(absl::GetFlag(FLAGS_truth));
  const int64_t voxels = truth.dim(0) * truth.dim(1) * truth.dim(2);
  const int64_t coils = a.dim(formats::kCoilDim);
  if (a.data.size() != b.data.size() || a.data.size() != static_cast<size_t>(voxels * coils)) {
    std::fprintf(stderr, "compare: maps of %zu and %zu values, truth of %lld voxels\n", a.data.size(), b.data.size(),
                 static_cast<long long>(voxels));
    std::exit(1);
  }
  double sum = 0, least = 1;
  int64_t counted = 0;
  for (int64_t i = 0; i < voxels; ++i) {
    if (truth.data[i] == Complex(0, 0)) continue;
    std::complex<double> dot = 0;
    double na = 0, nb = 0;
    for (int64_t c = 0; c < coils; ++c) {
      const std::complex<double> x(a.data[c * voxels + i]), y(b.data[c * voxels + i]);
      dot += std::conj(x) * y, na += std::norm(x), nb += std::norm(y);
    }
    if (na == 0 || nb == 0) continue;
    const double match = std::abs(dot) / std::sqrt(na * nb);
    sum += match, least = std::min(least, match), ++counted;
  }
  std::printf("%s %s %.5f %.5f %lld\n", absl::GetFlag(FLAGS_maps).c_str(), absl::GetFlag(FLAGS_against).c_str(),
              counted ? sum / counted : 0.0, least, static_cast<long long>(counted));
}

void Nrmse() {
  const auto image = Read(absl::GetFlag(FLAGS_recon)), truth = Read(absl::GetFlag(FLAGS_truth));
  const size_t n = truth.data.size();
  if (image.data.size() < n) {
    std::fprintf(stderr, "nrmse: %zu values in the reconstruction, %zu in the truth\n", image.data.size(), n);
    std::exit(1);
  }
  double at = 0, aa = 0, tt = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = std::abs(image.data[i]), t = std::abs(truth.data[i]);
    at += x * t, aa += x * x, tt += t * t;
  }
  const double s = aa > 0 ? at / aa : 0;
  double err = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = s * std::abs(image.data[i]) - std::abs(truth.data[i]);
    err += d * d;
  }
  std::printf("%s %.4f\n", absl::GetFlag(FLAGS_recon).c_str(), std::sqrt(err / tt));
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
  } else if (mode == "mask") {
    tessera::recon::Mask();
  } else if (mode == "compare") {
    tessera::recon::Compare();
  } else if (mode == "nrmse") {
    tessera::recon::Nrmse();
  } else {
    std::fprintf(stderr, "--mode=%s is not one of write, espirit, mask, compare, nrmse\n", mode.c_str());
    return 2;
  }
  return 0;
}
