#include "kernels/reconstruction/mri/espirit_gridding3d.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/centered_fft.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/espirit3d.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;

// As in 2-D (espirit_gridding.cc): a few CG iterations from 0, light Tikhonov.
constexpr int kInverseIterations = 10;
constexpr double kInverseLambda = 1e-3;
constexpr float kCell = 1.0f;  // k-space cell side of the density (1/FOV); 2 measured worse

// 1 / (samples in the sample's unit k-space cell): the density-compensation
// preconditioner (dense centres of radial trajectories weigh less). The
// analytic kooshball weights (noncartesian_3d.h) measured no better here
// (15.6 % vs 14.2 % from the exact centre in espirit3d_test).
std::vector<float> CellCountDensity(const std::vector<float>& kx, const std::vector<float>& ky,
                                    const std::vector<float>& kz) {
  auto cell = [&](size_t i) {
    const int64_t x = static_cast<int64_t>(std::floor(kx[i] / kCell + 0.5f));
    const int64_t y = static_cast<int64_t>(std::floor(ky[i] / kCell + 0.5f));
    const int64_t z = static_cast<int64_t>(std::floor(kz[i] / kCell + 0.5f));
    return ((z + 4096) * 8192 + (y + 4096)) * 8192 + (x + 4096);
  };
  std::unordered_map<int64_t, int> counts;
  for (size_t i = 0; i < kx.size(); ++i) ++counts[cell(i)];
  std::vector<float> w(kx.size());
  for (size_t i = 0; i < kx.size(); ++i) w[i] = 1.0f / static_cast<float>(counts[cell(i)]);
  return w;
}

}  // namespace

absl::StatusOr<std::vector<Complex>> GriddedCalibration3d(int64_t points, const float* kx, const float* ky,
                                                          const float* kz, const Complex* kspace, int coils,
                                                          int64_t size) {
  if (size < 2 || coils < 1 || points < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("espirit: calibration size ", size, " with ", coils, " coils and ", points, " samples"));
  }
  if (kx == nullptr || ky == nullptr || kz == nullptr || kspace == nullptr) {
    return absl::InvalidArgumentError("espirit: null trajectory or k-space");
  }
  // Gridded on twice the region, whose centre is kept (the box's truncation ringing falls outside it).
  const int64_t grid = 2 * size, voxels = grid * grid * grid;
  const float half = 0.5f * static_cast<float>(grid);
  std::vector<int64_t> inside;
  for (int64_t j = 0; j < points; ++j) {
    if (std::abs(kx[j]) < half && std::abs(ky[j]) < half && std::abs(kz[j]) < half) inside.push_back(j);
  }
  const int64_t m = static_cast<int64_t>(inside.size());
  if (m < size * size * size) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: only ", m, " samples within |k| < ", size,
                                                   " along every axis (calibration size ", size, ")"));
  }
  std::vector<float> cx(m), cy(m), cz(m);
  std::vector<Complex> samples(static_cast<size_t>(m) * coils);
  for (int64_t i = 0; i < m; ++i) {
    cx[i] = kx[inside[i]], cy[i] = ky[inside[i]], cz[i] = kz[inside[i]];
    for (int c = 0; c < coils; ++c) samples[c * m + i] = kspace[c * points + inside[i]];
  }
  const std::vector<float> w = CellCountDensity(cx, cy, cz);
  const std::vector<Complex> unit(static_cast<size_t>(voxels), Complex(1, 0));
  SenseGeometry g{grid, grid, 1, m, cx.data(), cy.data(), unit.data(), w.data()};
  g.nz = grid;
  g.kz = cz.data();
  CgSenseOptions options;
  options.iterations = kInverseIterations;
  options.lambda = kInverseLambda;
  options.use_toeplitz = true;
  const Stream cpu = Stream::Cpu();
  std::vector<Complex> images(static_cast<size_t>(voxels) * coils);
  // One operator (NUFFT plan, Toeplitz kernel) for every coil.
  SenseOperatorOptions op_options = options.nufft;
  op_options.use_toeplitz = true;
  TESSERA_ASSIGN_OR_RETURN(auto op, SenseOperator::Create(cpu, g, op_options));
  for (int c = 0; c < coils; ++c) {
    TESSERA_RETURN_IF_ERROR(CgSense(cpu, *op, samples.data() + c * m, options, images.data() + c * voxels).status());
  }
  TESSERA_ASSIGN_OR_RETURN(auto fft, CenteredFft::Create(cpu, {grid, grid, grid}, coils));
  TESSERA_RETURN_IF_ERROR(fft->Execute(images.data(), -1));
  return ExtractCentre3d(images.data(), {grid, grid, grid}, coils, {size, size, size});
}

absl::StatusOr<EspiritMaps> Espirit3dNonCartesian(const Stream& stream, int64_t points, const float* kx,
                                                  const float* ky, const float* kz, const Complex* kspace, int coils,
                                                  std::array<int64_t, 3> image, const EspiritOptions& options) {
  const int64_t size = std::min<int64_t>({options.calibration_size, image[0], image[1], image[2]});
  TESSERA_ASSIGN_OR_RETURN(std::vector<Complex> calibration,
                           GriddedCalibration3d(points, kx, ky, kz, kspace, coils, size));
  return Espirit3dFromCalibration(stream, calibration, {size, size, size}, coils, image, options);
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
