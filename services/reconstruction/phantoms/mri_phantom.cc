#include "services/reconstruction/phantoms/mri_phantom.h"

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera::recon::phantoms {

namespace mri = recon::mri;

absl::StatusOr<MriPhantom> MakeMriPhantom(const MriPhantomOptions& o) {
  if (o.kind != "radial" && o.kind != "cartesian") {
    return absl::InvalidArgumentError(absl::StrCat("kind '", o.kind, "' is not one of radial, cartesian"));
  }
  if (o.size < 8 || o.size > 1024 || o.size % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("size must be even and in [8, 1024], got ", o.size));
  }
  if (o.coils < 1 || o.coils > 32) {
    return absl::InvalidArgumentError(absl::StrCat("coils must be in [1, 32], got ", o.coils));
  }
  if (o.spokes < 0 || o.spokes > 16 * o.size) {
    return absl::InvalidArgumentError(absl::StrCat("spokes must be in [0, ", 16 * o.size, "], got ", o.spokes));
  }
  if (o.kind == "cartesian" && (o.acceleration < 1 || o.acceleration > 8 || o.size % o.acceleration != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("acceleration must be in [1, 8] and divide the size ", o.size, ", got ", o.acceleration));
  }
  const int64_t n = o.size;
  MriPhantom p;
  const std::vector<mri::Ellipse> phantom = mri::SheppLogan(0.9);
  TESSERA_ASSIGN_OR_RETURN(const mri::CoilMapSeries series, mri::BirdcageSeries({o.coils, 1.5}, 4));
  mri::Trajectory2D traj;
  if (o.kind == "radial") {
    TESSERA_ASSIGN_OR_RETURN(traj, mri::RadialTrajectory(n, 2 * n, o.spokes > 0 ? o.spokes : n / 2,
                                                         mri::RadialOrdering::kGoldenAngle));
    p.trajectory = formats::TrajectoryToCfl(traj);
  } else {
    // The acquired lines (y = 0, R, 2R, ... in index units) as a trajectory;
    // their samples are scattered into the zero-filled n x n grid below.
    traj.samples = n;
    traj.spokes = n / o.acceleration;
    for (int64_t line = 0; line < traj.spokes; ++line) {
      for (int64_t x = 0; x < n; ++x) {
        traj.kx.push_back(static_cast<float>(x - n / 2));
        traj.ky.push_back(static_cast<float>(line * o.acceleration - n / 2));
      }
    }
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::complex<float>> samples,
                           mri::PhantomCoilKspace(phantom, series, traj, n, n));
  if (o.kind == "radial") {
    TESSERA_ASSIGN_OR_RETURN(p.kspace, formats::MakeCfl({1, traj.samples, traj.spokes, o.coils}));
    p.kspace.data = std::move(samples);
  } else {
    TESSERA_ASSIGN_OR_RETURN(p.kspace, formats::MakeCfl({n, n, 1, o.coils}));
    const int64_t points = traj.size();
    for (int c = 0; c < o.coils; ++c) {
      for (int64_t line = 0; line < traj.spokes; ++line) {
        const int64_t y = line * o.acceleration;
        for (int64_t x = 0; x < n; ++x) p.kspace.data[x + n * (y + n * c)] = samples[c * points + line * n + x];
      }
    }
  }
  TESSERA_ASSIGN_OR_RETURN(p.maps, formats::MakeCfl({n, n, 1, o.coils}));
  p.maps.data = mri::EvaluateCoilSeries(series, n, n);
  TESSERA_ASSIGN_OR_RETURN(p.truth, formats::MakeCfl({n, n}));
  const std::vector<float> truth = mri::RasterizePhantom(phantom, n, n);
  for (int64_t i = 0; i < n * n; ++i) p.truth.data[i] = truth[i];
  return p;
}

absl::Status WriteMriPhantom(const MriPhantom& p, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  TESSERA_RETURN_IF_ERROR(formats::WriteCfl(dir + "/kspace", p.kspace));
  if (!p.trajectory.data.empty()) TESSERA_RETURN_IF_ERROR(formats::WriteCfl(dir + "/traj", p.trajectory));
  TESSERA_RETURN_IF_ERROR(formats::WriteCfl(dir + "/coils", p.maps));
  return formats::WriteCfl(dir + "/truth", p.truth);
}

}  // namespace tessera::recon::phantoms
