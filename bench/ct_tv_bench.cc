// Issue 36 (CT): FISTA-TV and ASD-POCS against SART and CGLS on a 2-D
// modified Shepp-Logan phantom (exact line integrals), parallel beam, few
// views, on the CPU. SART and CGLS are credited with their best iteration
// (NRMSE after every iteration, oracle early stopping); FISTA-TV and ASD-POCS
// report their last iterate (and their best, for reference). Grids over
// tv_weight (FISTA-TV) and alpha (ASD-POCS) are printed in full.
//
//   bazel run -c opt //bench:ct_tv_bench -- --size=128 --views=60 [--range-deg=180]
//       [--noise=0] [--sart-iters=200] [--os-sart-iters=50] [--cgls-iters=100] [--fista-iters=100]
//       [--tv-weights=0.0005,0.001,0.002,0.005,0.01] [--asd-iters=30]
//       [--asd-alphas=0.002] [--asd-subsets=1,10] [--tv-iterations=20]
//       [--fgp-warm=1] [--restart=1]     FISTA-TV: warm-started FGP duals, adaptive restart
//       [--baselines=0]                  skip SART / OS-SART / CGLS
//       [--inverse-crime=1]              data from our projector (diagnostic: no model error)
//       [--upsample=2]                   every method on a 2x finer grid over the same extent, scored
//                                        after 2x2 block averaging to the truth's grid
//       [--write-case=DIR]               write the case for `tessera recon ct` (DIR/geometry.json,
//                                        DIR/sinogram.nii.gz) and exit
//       [--score=V.nii.gz]               print the NRMSE of a reconstruction (the truth's grid) and exit
//       [--trace-at=50,100,200]          also print each run's NRMSE after these iterations
//       [--misfit=1]                     the data misfit ||A truth - y|| / ||y|| of the pixel-averaged
//                                        truth under the distance-driven model on the 1x, 2x, 4x and 8x
//                                        grid (each pixel repeated over its block: the same image, its
//                                        box footprint resolved ever more exactly) and exit
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/device.h"
#include "kernels/reconstruction/ct/dd_projector.h"
#include "kernels/reconstruction/solvers/sparse_view_case.h"
#include "common/nifti_io.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"

namespace {

using tessera::bench::ExitUnlessOk;
using tessera::bench::FlagValue;
using tessera::bench::ValueOrExit;
namespace solvers = tessera::recon::solvers;
namespace t = tessera::recon::solvers::testing;

std::vector<double> DoubleList(const char* v) {
  std::vector<double> out;
  for (absl::string_view s : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    double d = 0;
    if (!absl::SimpleAtod(s, &d)) {
      std::fprintf(stderr, "not a number: %s\n", std::string(s).c_str());
      std::exit(2);
    }
    out.push_back(d);
  }
  return out;
}

// --trace-at: the NRMSE after these iterations, printed under each row.
std::vector<double> g_trace_at;

void Row(const std::string& method, const std::string& setting, const t::Trace& r) {
  std::printf("| %s | %s | %.4f (it %d of %zu) | %.4f | %.2f |\n", method.c_str(), setting.c_str(), r.best,
              r.best_iteration, r.nrmse.size(), r.last, r.seconds);
  if (g_trace_at.empty()) return;
  std::printf("    NRMSE at iteration");
  for (double it : g_trace_at) {
    const size_t k = static_cast<size_t>(it);
    if (k >= 1 && k <= r.nrmse.size()) std::printf(" %zu: %.4f", k, r.nrmse[k - 1]);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  int size = 128, views = 60, sart_iters = 200, os_sart_iters = 50, cgls_iters = 100, fista_iters = 100, asd_iters = 30, tv_iterations = 20;
  double range_deg = 180, noise = 0;
  bool fgp_warm = false, restart = false, baselines = true, inverse_crime = false;
  std::string write_case, score;
  bool misfit = false;
  int upsample = 1;
  std::vector<double> tv_weights = {0.0005, 0.001, 0.002, 0.005, 0.01}, asd_alphas = {0.002}, asd_subsets = {1, 10};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (const char* v = FlagValue(a, "--size")) size = std::atoi(v);
    else if (const char* v = FlagValue(a, "--views")) views = std::atoi(v);
    else if (const char* v = FlagValue(a, "--range-deg")) range_deg = std::atof(v);
    else if (const char* v = FlagValue(a, "--noise")) noise = std::atof(v);
    else if (const char* v = FlagValue(a, "--sart-iters")) sart_iters = std::atoi(v);
    else if (const char* v = FlagValue(a, "--cgls-iters")) cgls_iters = std::atoi(v);
    else if (const char* v = FlagValue(a, "--os-sart-iters")) os_sart_iters = std::atoi(v);
    else if (const char* v = FlagValue(a, "--fista-iters")) fista_iters = std::atoi(v);
    else if (const char* v = FlagValue(a, "--asd-iters")) asd_iters = std::atoi(v);
    else if (const char* v = FlagValue(a, "--tv-iterations")) tv_iterations = std::atoi(v);
    else if (const char* v = FlagValue(a, "--tv-weights")) tv_weights = DoubleList(v);
    else if (const char* v = FlagValue(a, "--fgp-warm")) fgp_warm = std::atoi(v) != 0;
    else if (const char* v = FlagValue(a, "--restart")) restart = std::atoi(v) != 0;
    else if (const char* v = FlagValue(a, "--baselines")) baselines = std::atoi(v) != 0;
    else if (const char* v = FlagValue(a, "--inverse-crime")) inverse_crime = std::atoi(v) != 0;
    else if (const char* v = FlagValue(a, "--upsample")) upsample = std::atoi(v);
    else if (const char* v = FlagValue(a, "--write-case")) write_case = v;
    else if (const char* v = FlagValue(a, "--score")) score = v;
    else if (const char* v = FlagValue(a, "--misfit")) misfit = std::atoi(v) != 0;
    else if (const char* v = FlagValue(a, "--trace-at")) g_trace_at = DoubleList(v);
    else if (const char* v = FlagValue(a, "--asd-alphas")) asd_alphas = DoubleList(v);
    else if (const char* v = FlagValue(a, "--asd-subsets")) asd_subsets = DoubleList(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", a);
      return 2;
    }
  }
  const double kPi = 3.14159265358979323846;
  t::SparseViewCase c = t::SheppLoganCase(size, views, range_deg * kPi / 180, noise);
  if (inverse_crime) {
    // Diagnostic: data from our own projector of the pixel-averaged truth (no
    // model error), to separate the model-error floor from the method's.
    const tessera::Stream cpu = tessera::Stream::Cpu();
    auto op = ValueOrExit(tessera::recon::ct::DdProjector::Create(c.geometry, cpu), "projector");
    ExitUnlessOk(op->Forward(c.truth.data(), c.sinogram.data()), "forward");
    std::printf("(inverse crime: data = the distance-driven projection of the truth)\n");
  }
  // The engine's path (`tessera recon ct`, e.g. with --voxel-subdivision):
  // the same data as files, and the NRMSE of what it wrote.
  if (!write_case.empty()) {
    ExitUnlessOk(tessera::recon::formats::WriteGeometryJsonFile(c.geometry, write_case + "/geometry.json"), "geometry");
    tessera::NDArray y = ValueOrExit(
        tessera::NDArray::Allocate({static_cast<int64_t>(c.sinogram.size())}, tessera::DType::kFloat32), "sinogram");
    std::copy(c.sinogram.begin(), c.sinogram.end(), y.data<float>());
    ExitUnlessOk(tessera::recon::formats::WriteSinogram(y, c.geometry.projection, write_case + "/sinogram.nii.gz"),
                 "sinogram");
    std::printf("wrote %s/geometry.json and %s/sinogram.nii.gz\n", write_case.c_str(), write_case.c_str());
    return 0;
  }
  if (misfit) {
    // Does a more exact projector of the same pixels fit the data better? The
    // distance-driven footprint of a pixel is a box of the projected width;
    // the exact one a trapezoid. On a grid f times finer each pixel's
    // footprint is a sum of f^2 small boxes, which tends to the exact one.
    const tessera::Stream cpu = tessera::Stream::Cpu();
    double yy = 0;
    for (float v : c.sinogram) yy += double{v} * v;
    for (int f : {1, 2, 4, 8}) {
      const t::SparseViewCase fine = t::OnFinerGrid(c, f);
      const int64_t nx = fine.geometry.volume.nx, cx = c.geometry.volume.nx;
      std::vector<float> x(static_cast<size_t>(fine.geometry.volume.size()));
      for (int64_t j = 0; j < fine.geometry.volume.ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) x[j * nx + i] = c.truth[(j / f) * cx + i / f];
      }
      auto op = ValueOrExit(tessera::recon::ct::DdProjector::Create(fine.geometry, cpu), "projector");
      std::vector<float> ax(c.sinogram.size());
      ExitUnlessOk(op->Forward(x.data(), ax.data()), "forward");
      double rr = 0;
      for (size_t r = 0; r < ax.size(); ++r) rr += (double{ax[r]} - c.sinogram[r]) * (double{ax[r]} - c.sinogram[r]);
      std::printf("pixel-averaged truth, distance-driven model on the %dx grid: misfit %.4f\n", f, std::sqrt(rr / yy));
    }
    return 0;
  }
  if (!score.empty()) {
    const tessera::Volume v = ValueOrExit(tessera::ReadNifti(score), "score");
    if (v.data.num_elements() != static_cast<int64_t>(c.truth.size())) {
      std::fprintf(stderr, "%s has %lld voxels, the truth %zu\n", score.c_str(),
                   static_cast<long long>(v.data.num_elements()), c.truth.size());
      return 1;
    }
    const std::vector<float> x(v.data.data<float>(), v.data.data<float>() + v.data.num_elements());
    std::printf("NRMSE %.4f %s\n", t::Nrmse(x, c.truth), score.c_str());
    return 0;
  }
  if (upsample > 1) {
    c = t::OnFinerGrid(c, upsample);
    std::printf("every method on a %dx finer grid (%lldx%lld voxels of %.3g mm), scored after %dx%d block averaging\n",
                upsample, static_cast<long long>(c.geometry.volume.nx), static_cast<long long>(c.geometry.volume.ny),
                1.0 / upsample, upsample, upsample);
  }
  std::printf("modified Shepp-Logan %dx%d (1 mm), parallel beam, %d views over %.0f deg, noise sigma %.3g x max(y)\n\n",
              size, size, views, range_deg, noise);
  std::printf("| method | setting | best NRMSE (iteration) | last NRMSE | seconds |\n|---|---|---|---|---|\n");
  if (baselines) {
  Row("SART", "lambda 1, x >= 0", ValueOrExit(t::RunBaseline(c, t::Baseline::kSart, sart_iters, true), "sart"));
  Row("OS-SART", "10 subsets, x >= 0",
      ValueOrExit(t::RunBaseline(c, t::Baseline::kSart, os_sart_iters, true, 10), "os-sart"));
  Row("CGLS", "unconstrained", ValueOrExit(t::RunBaseline(c, t::Baseline::kCgls, cgls_iters, false), "cgls"));
  Row("CGLS", "projected, x >= 0", ValueOrExit(t::RunBaseline(c, t::Baseline::kCgls, cgls_iters, true), "cgls nn"));
  }
  for (double w : tv_weights) {
    for (bool nn : {false, true}) {
      solvers::FistaTvOptions o;
      o.iterations = fista_iters;
      o.tv_weight = w;
      o.tv_iterations = tv_iterations;
      o.non_negative = nn;
      o.warm_start_tv = fgp_warm;
      o.adaptive_restart = restart;
      char setting[128];
      std::snprintf(setting, sizeof setting, "tv_weight %g, %d FGP%s%s, %s", w, tv_iterations,
                    fgp_warm ? " warm" : "", restart ? ", restart" : "", nn ? "x >= 0" : "free");
      Row("FISTA-TV", setting, ValueOrExit(t::RunFistaTv(c, o), "fista-tv"));
    }
  }
  for (double alpha : asd_alphas) {
    for (double s : asd_subsets) {
      solvers::AsdPocsOptions o;
      o.iterations = asd_iters;
      o.alpha = alpha;
      o.tv_iterations = tv_iterations;
      o.subsets = static_cast<int>(s);
      o.epsilon = -1;  // TIGRE's default from the FBP
      char setting[96];
      std::snprintf(setting, sizeof setting, "alpha %g, ng %d, %d subset(s)", alpha, tv_iterations, o.subsets);
      Row("ASD-POCS", setting, ValueOrExit(t::RunAsdPocs(c, o), "asd-pocs"));
    }
  }
  return 0;
}
