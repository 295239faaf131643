// Helper of bench/nufft_vs_bart.sh (issue 12): our CPU NUFFT (type 2, the MRI
// forward model) against `bart nufft` on the same .cfl files.
//   --mode=write   random 2-D trajectory (1/FOV units, 3 x M) and image (n x n)
//   --mode=exact   direct NUDFT (double) of the first --exact_points samples
//   --mode=ours    our CPU NUFFT at --tol, prints "ours <seconds>" (in-process:
//                  plan + SetPoints + Execute) and writes ours.cfl
//   --mode=compare prints "<name> <rel l2> <rel l2 after the best complex
//                  scale>" of --a against exact.cfl on the exact samples
//                  (BART scales its NUFFT, so its raw error is not comparable)
#include <chrono>
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
#include "kernels/reconstruction/nufft/nudft.h"
#include "kernels/reconstruction/nufft/nufft.h"
#include "services/reconstruction/formats/cfl.h"

ABSL_FLAG(std::string, mode, "write", "write | exact | ours | compare");
ABSL_FLAG(std::string, dir, "/tmp/nufft_vs_bart", "working directory");
ABSL_FLAG(int64_t, n, 256, "image n x n");
ABSL_FLAG(int64_t, points, 1000000, "trajectory samples");
ABSL_FLAG(int64_t, exact_points, 4000, "samples checked against the direct sum");
ABSL_FLAG(double, tol, 1e-5, "our NUFFT tolerance");
ABSL_FLAG(std::string, a, "ours", "array (base name in --dir) for --mode=compare");

namespace tessera {
namespace {

namespace fmt = recon::formats;
using cf = std::complex<float>;

void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(1);
  }
}
template <typename T>
T Get(absl::StatusOr<T> v) {
  Check(v.status());
  return *std::move(v);
}

std::string Path(const std::string& name) { return absl::GetFlag(FLAGS_dir) + "/" + name; }

// Points in radians (x = 2 pi k / n) from a 3 x M trajectory.
void Radians(const fmt::CflArray& traj, int64_t n, int64_t m, std::vector<double>* x, std::vector<double>* y) {
  x->resize(m), y->resize(m);
  for (int64_t j = 0; j < m; ++j) {
    (*x)[j] = 2 * M_PI * traj.data[3 * j].real() / n;
    (*y)[j] = 2 * M_PI * traj.data[3 * j + 1].real() / n;
  }
}

int Main() {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const int64_t n = absl::GetFlag(FLAGS_n);
  if (mode == "write") {
    const int64_t m = absl::GetFlag(FLAGS_points);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-n / 2.0f, n / 2.0f);
    std::normal_distribution<float> g(0.f, 1.f);
    fmt::CflArray traj = Get(fmt::MakeCfl({3, m}));
    for (int64_t j = 0; j < m; ++j) traj.data[3 * j] = u(rng), traj.data[3 * j + 1] = u(rng);
    fmt::CflArray img = Get(fmt::MakeCfl({n, n}));
    for (auto& v : img.data) v = cf(g(rng), g(rng));
    Check(fmt::WriteCfl(Path("traj"), traj));
    Check(fmt::WriteCfl(Path("img"), img));
    return 0;
  }
  const fmt::CflArray traj = Get(fmt::ReadCfl(Path("traj")));
  const fmt::CflArray img = Get(fmt::ReadCfl(Path("img")));
  const int64_t m = traj.dim(1);
  if (mode == "exact") {
    const int64_t k = std::min(m, absl::GetFlag(FLAGS_exact_points));
    std::vector<double> x, y;
    Radians(traj, n, k, &x, &y);
    std::vector<std::complex<double>> f(img.data.begin(), img.data.end()), c(k);
    recon::nufft::NudftPoints p;
    p.m = k, p.x = x.data(), p.y = y.data();
    recon::nufft::NudftType2({n, n, 1}, p, -1, 1, f.data(), c.data());
    fmt::CflArray out = Get(fmt::MakeCfl({1, k}));
    for (int64_t j = 0; j < k; ++j) out.data[j] = cf(c[j]);
    Check(fmt::WriteCfl(Path("exact"), out));
    return 0;
  }
  if (mode == "ours") {
    std::vector<float> x(m), y(m);
    for (int64_t j = 0; j < m; ++j) {
      x[j] = static_cast<float>(2 * M_PI * traj.data[3 * j].real() / n);
      y[j] = static_cast<float>(2 * M_PI * traj.data[3 * j + 1].real() / n);
    }
    std::vector<cf> f = img.data, c(m);
    const auto t0 = std::chrono::steady_clock::now();
    const Stream cpu = Stream::Cpu();
    recon::nufft::NufftOptions o;
    o.tolerance = absl::GetFlag(FLAGS_tol);
    auto plan = Get(recon::nufft::NufftPlan<float>::Create(cpu, recon::nufft::NufftType::kType2, {n, n, 1}, o));
    Check(plan->SetPoints(m, x.data(), y.data(), nullptr));
    Check(plan->Execute(c.data(), f.data()));
    const double s = bench::SecondsSince(t0);
    fmt::CflArray out = Get(fmt::MakeCfl({1, m}));
    out.data = c;
    Check(fmt::WriteCfl(Path("ours"), out));
    std::printf("ours %.4f\n", s);
    return 0;
  }
  if (mode == "compare") {
    const fmt::CflArray a = Get(fmt::ReadCfl(Path(absl::GetFlag(FLAGS_a))));
    const fmt::CflArray e = Get(fmt::ReadCfl(Path("exact")));
    const int64_t k = e.elements();
    std::complex<double> ae(0, 0);
    double aa = 0, ee = 0, diff = 0;
    for (int64_t j = 0; j < k; ++j) {
      const std::complex<double> av(a.data[j]), ev(e.data[j]);
      ae += std::conj(av) * ev;
      aa += std::norm(av);
      ee += std::norm(ev);
      diff += std::norm(av - ev);
    }
    const std::complex<double> alpha = ae / aa;  // argmin ||alpha a - e||
    double scaled = 0;
    for (int64_t j = 0; j < k; ++j) scaled += std::norm(alpha * std::complex<double>(a.data[j]) - std::complex<double>(e.data[j]));
    std::printf("%s %.3e %.3e\n", absl::GetFlag(FLAGS_a).c_str(), std::sqrt(diff / ee), std::sqrt(scaled / ee));
    return 0;
  }
  std::fprintf(stderr, "unknown --mode %s\n", mode.c_str());
  return 2;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::Main();
}
