#include "kernels/reconstruction/solvers/sparse_view_case.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>

#include "common/status.h"
#include "kernels/reconstruction/ct/dd_projector.h"
#include "kernels/reconstruction/fbp/analytic_phantom.h"
#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/solvers/cgls.h"
#include "kernels/reconstruction/solvers/sart.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace testing {
namespace {

using recon::testing::Ellipsoid;

constexpr double kPi = 3.14159265358979323846;

// Shepp-Logan with Toft's contrast (value, semi-axes a b, centre x y, angle
// in degrees), on [-1, 1]^2.
struct Ellipse {
  double value, a, b, x, y, degrees;
};
constexpr Ellipse kModifiedSheppLogan[] = {
    {1.0, 0.69, 0.92, 0, 0, 0},          {-0.8, 0.6624, 0.874, 0, -0.0184, 0}, {-0.2, 0.11, 0.31, 0.22, 0, -18},
    {-0.2, 0.16, 0.41, -0.22, 0, 18},    {0.1, 0.21, 0.25, 0, 0.35, 0},        {0.1, 0.046, 0.046, 0, 0.1, 0},
    {0.1, 0.046, 0.046, 0, -0.1, 0},     {0.1, 0.046, 0.023, -0.08, -0.605, 0}, {0.1, 0.023, 0.023, 0, -0.606, 0},
    {0.1, 0.023, 0.046, 0.06, -0.605, 0},
};

std::vector<Ellipsoid> Phantom(double half_width) {
  std::vector<Ellipsoid> out;
  for (const Ellipse& e : kModifiedSheppLogan) {
    Ellipsoid p;
    p.center = {e.x * half_width, e.y * half_width, 0};
    p.semi_axes = {e.a * half_width, e.b * half_width, 1};
    p.angle = e.degrees * kPi / 180;
    p.value = e.value;
    out.push_back(p);
  }
  return out;
}

// The phantom averaged over each pixel (4 x 4 samples): what a
// reconstruction on this grid can reach; point samples at pixel centres
// would charge every method for the partial-volume pixels along edges.
std::vector<float> PixelAverages(const VolumeGeometry& volume, const std::vector<Ellipsoid>& phantom) {
  constexpr int kSub = 4;
  VolumeGeometry fine = volume;
  fine.nx *= kSub;
  fine.ny *= kSub;
  const std::vector<float> samples = recon::testing::PhantomVolume(fine, phantom);
  std::vector<float> out(static_cast<size_t>(volume.size()), 0.0f);
  for (int64_t j = 0; j < fine.ny; ++j) {
    for (int64_t i = 0; i < fine.nx; ++i) {
      out[(j / kSub) * volume.nx + i / kSub] += samples[j * fine.nx + i] / (kSub * kSub);
    }
  }
  return out;
}

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Records the NRMSE of x (host memory) after each iteration.
struct Recorder {
  const SparseViewCase* c;
  const std::vector<float>* x;
  Trace trace;
  void Record() {
    const double e = c->upsample > 1 ? Nrmse(ToTruthGrid(*c, *x), c->truth) : Nrmse(*x, c->truth);
    trace.nrmse.push_back(e);
    if (trace.nrmse.size() == 1 || e < trace.best) {
      trace.best = e;
      trace.best_iteration = static_cast<int>(trace.nrmse.size());
    }
    trace.last = e;
  }
};

}  // namespace

SparseViewCase SheppLoganCase(int64_t size, int64_t views, double range, double noise, uint32_t seed) {
  SparseViewCase c;
  const int64_t det = static_cast<int64_t>(std::ceil(size * std::sqrt(2.0))) + 4;
  c.geometry = CtGeometry{CenteredVolume(size, size), ParallelBeam2D(EvenAngles(views, range), 1.0, det)};
  const std::vector<Ellipsoid> phantom = Phantom(0.5 * size);
  // Each detector cell's average over 4 rays: what a detector (and the
  // distance-driven model) measures; one ray at the cell centre misses thin
  // high-contrast structures (the skull) by a few per cent.
  constexpr int kSub = 4;
  const std::vector<float> rays = recon::testing::AnalyticSinogram(
      ParallelBeam2D(EvenAngles(views, range), 1.0 / kSub, det * kSub), phantom);
  c.sinogram.assign(static_cast<size_t>(views * det), 0.0f);
  for (size_t r = 0; r < rays.size(); ++r) c.sinogram[r / kSub] += rays[r] / kSub;
  c.truth = PixelAverages(c.geometry.volume, phantom);
  if (noise > 0) {
    const float peak = *std::max_element(c.sinogram.begin(), c.sinogram.end());
    std::mt19937 rng(seed);
    std::normal_distribution<float> gauss(0.0f, static_cast<float>(noise) * peak);
    for (float& v : c.sinogram) v += gauss(rng);
  }
  return c;
}

SparseViewCase OnFinerGrid(const SparseViewCase& c, int64_t factor) {
  SparseViewCase fine = c;
  fine.geometry.volume.nx = c.geometry.volume.nx * factor;
  fine.geometry.volume.ny = c.geometry.volume.ny * factor;
  fine.upsample = c.upsample * factor;
  return fine;
}

std::vector<float> ToTruthGrid(const SparseViewCase& c, const std::vector<float>& x) {
  if (c.upsample <= 1) return x;
  const int64_t f = c.upsample, nx = c.geometry.volume.nx, ny = c.geometry.volume.ny, cx = nx / f;
  std::vector<float> out(c.truth.size(), 0.0f);
  for (int64_t j = 0; j < ny; ++j) {
    for (int64_t i = 0; i < nx; ++i) out[(j / f) * cx + i / f] += x[j * nx + i] / static_cast<float>(f * f);
  }
  return out;
}

double Nrmse(const std::vector<float>& x, const std::vector<float>& truth) {
  double num = 0, den = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    num += (static_cast<double>(x[i]) - truth[i]) * (static_cast<double>(x[i]) - truth[i]);
    den += static_cast<double>(truth[i]) * truth[i];
  }
  return std::sqrt(num / den);
}

absl::StatusOr<Trace> RunBaseline(const SparseViewCase& c, Baseline method, int iterations, bool non_negative,
                                  int subsets) {
  const Stream cpu = Stream::Cpu();
  ct::DdProjectorOptions po;
  po.num_subsets = subsets;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ct::DdProjector> op, ct::DdProjector::Create(c.geometry, cpu, po));
  std::vector<float> x(static_cast<size_t>(c.geometry.volume.size()), 0.0f);
  Recorder rec{&c, &x, {}};
  SolverOptions o;
  o.iterations = iterations;
  o.subsets = subsets;
  o.non_negative = non_negative;
  o.progress = [&](int, int, double) {
    rec.Record();
    return absl::OkStatus();
  };
  const double start = Now();
  if (method == Baseline::kCgls) {
    TESSERA_RETURN_IF_ERROR(Cgls(*op, c.sinogram.data(), x.data(), o).status());
  } else {
    TESSERA_RETURN_IF_ERROR(Sart(*op, c.sinogram.data(), x.data(), o).status());
  }
  rec.trace.seconds = Now() - start;
  rec.trace.last_x = x;
  return rec.trace;
}

absl::StatusOr<Trace> RunFistaTv(const SparseViewCase& c, const FistaTvOptions& options) {
  const Stream cpu = Stream::Cpu();
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ct::DdProjector> op, ct::DdProjector::Create(c.geometry, cpu));
  std::vector<float> x(static_cast<size_t>(c.geometry.volume.size()), 0.0f);
  Recorder rec{&c, &x, {}};
  FistaTvOptions o = options;
  o.progress = [&](int, int, double) {
    rec.Record();
    return absl::OkStatus();
  };
  const regularizers::TvShape shape{c.geometry.volume.nx, c.geometry.volume.ny, 1, 1};
  const double start = Now();
  TESSERA_RETURN_IF_ERROR(FistaTv(*op, shape, c.sinogram.data(), x.data(), o).status());
  rec.trace.seconds = Now() - start;
  rec.trace.last_x = x;
  return rec.trace;
}

absl::StatusOr<Trace> RunAsdPocs(const SparseViewCase& c, AsdPocsOptions options) {
  const Stream cpu = Stream::Cpu();
  ct::DdProjectorOptions po;
  po.num_subsets = options.subsets;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ct::DdProjector> op, ct::DdProjector::Create(c.geometry, cpu, po));
  const double start = Now();
  if (options.epsilon < 0) {
    // As the engine (ct_tv_methods.cc): 0 where FBP refuses (limited angle).
    options.epsilon = 0;
    absl::StatusOr<std::unique_ptr<fbp::FbpPlan>> fbp = fbp::FbpPlan::Create(c.geometry, cpu, {});
    if (fbp.ok()) {
      std::vector<float> image(static_cast<size_t>(c.geometry.volume.size())), reprojected(c.sinogram.size());
      TESSERA_RETURN_IF_ERROR((*fbp)->Run(c.sinogram.data(), image.data()));
      TESSERA_RETURN_IF_ERROR(op->Forward(image.data(), reprojected.data()));
      double sq = 0;
      for (size_t i = 0; i < reprojected.size(); ++i) {
        const double d = static_cast<double>(reprojected[i]) - c.sinogram[i];
        sq += d * d;
      }
      options.epsilon = 0.2 * std::sqrt(sq);
    }
  }
  std::vector<float> x(static_cast<size_t>(c.geometry.volume.size()), 0.0f);
  Recorder rec{&c, &x, {}};
  options.progress = [&](int, int, double) {
    rec.Record();
    return absl::OkStatus();
  };
  const regularizers::TvShape shape{c.geometry.volume.nx, c.geometry.volume.ny, 1, 1};
  TESSERA_RETURN_IF_ERROR(AsdPocs(*op, shape, c.sinogram.data(), x.data(), options).status());
  rec.trace.seconds = Now() - start;
  rec.trace.last_x = x;
  return rec.trace;
}

}  // namespace testing
}  // namespace solvers
}  // namespace recon
}  // namespace tessera
