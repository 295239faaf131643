#include "kernels/reconstruction/mri/espirit_gridding.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/cartesian_sense.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/density_compensation.h"
#include "kernels/reconstruction/mri/sense_stack.h"

namespace tessera {
namespace recon {
namespace mri {

using Complex = std::complex<float>;

// The low-resolution images are least-squares NUFFT inverses (BART's `nufft -i`):
// CG on the density-weighted normal equations (the weights precondition), a few
// iterations from 0 with light Tikhonov regularisation. The plain weighted
// adjoint is off by ~60 % at k = 0, where radial density compensation is poor.
constexpr int kInverseIterations = 10;
constexpr double kInverseLambda = 1e-3;

absl::StatusOr<std::vector<Complex>> GriddedCalibration(const Trajectory2D& trajectory, const Complex* kspace,
                                                        int coils, int64_t size) {
  if (size < 2 || coils < 1) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: calibration size ", size, " with ", coils, " coils"));
  }
  // Gridded on twice the region (samples with |k| < size), whose centre is kept: the
  // box's truncation ringing and wrap-around stay mostly outside the calibration region.
  const int64_t grid = 2 * size;
  const float half = 0.5f * static_cast<float>(grid);
  std::vector<int64_t> inside;
  for (int64_t j = 0; j < trajectory.size(); ++j) {
    if (std::abs(trajectory.kx[j]) < half && std::abs(trajectory.ky[j]) < half) inside.push_back(j);
  }
  const int64_t m = static_cast<int64_t>(inside.size());
  if (m < size * size) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: only ", m, " samples within |k| < ", size,
                                                   " (calibration size ", size, ")"));
  }
  Trajectory2D centre;  // the samples inside, as one "spoke"
  centre.samples = m;
  centre.spokes = 1;
  centre.kx.resize(m);
  centre.ky.resize(m);
  std::vector<Complex> samples(static_cast<size_t>(m) * coils);
  for (int64_t i = 0; i < m; ++i) {
    centre.kx[i] = trajectory.kx[inside[i]];
    centre.ky[i] = trajectory.ky[inside[i]];
    for (int c = 0; c < coils; ++c) samples[c * m + i] = kspace[c * trajectory.size() + inside[i]];
  }
  // Density of the centre samples only (a preconditioner here; off only near the box's
  // edge, where neighbours outside are missing): far cheaper than the whole trajectory.
  TESSERA_ASSIGN_OR_RETURN(std::vector<float> w, PipeMenonDensity(centre));
  const std::vector<float>& kx = centre.kx;
  const std::vector<float>& ky = centre.ky;
  const Stream cpu = Stream::Cpu();
  const std::vector<Complex> unit(static_cast<size_t>(grid * grid), Complex(1, 0));
  SenseGeometry g{grid, grid, 1, m, kx.data(), ky.data(), unit.data(), w.data()};
  std::vector<Complex> images(static_cast<size_t>(grid * grid) * coils);
  CgSenseOptions options;
  options.iterations = kInverseIterations;
  options.lambda = kInverseLambda;
  options.use_toeplitz = true;  // iterations by FFTs only; the NUFFT pair only for E^H W y
  // The coils as a stack of one-coil "slices": one NUFFT plan per worker, not per coil.
  TESSERA_RETURN_IF_ERROR(CgSenseStack(cpu, SenseStack{g, coils, 0}, samples.data(), options, images.data()).status());
  TESSERA_RETURN_IF_ERROR(cpu.Synchronize());
  TESSERA_RETURN_IF_ERROR(CenteredForwardFft2d(grid, grid, coils, images.data()));
  return ExtractCentre(images.data(), grid, grid, coils, size, size);
}

absl::StatusOr<EspiritMaps> EspiritNonCartesian(const Trajectory2D& trajectory, const Complex* kspace, int coils,
                                                int64_t nx, int64_t ny, const EspiritOptions& options) {
  const int64_t size = std::min<int64_t>({options.calibration_size, nx, ny});
  TESSERA_ASSIGN_OR_RETURN(std::vector<Complex> calibration, GriddedCalibration(trajectory, kspace, coils, size));
  return EspiritFromCalibration(calibration, size, size, coils, nx, ny, options);
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
