#include "services/reconstruction/testing/mri3d_problem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdlib>

#include "common/testing/temp_files.h"
#include "kernels/reconstruction/mri/ellipsoid_phantom.h"
#include "services/reconstruction/formats/cfl.h"

namespace tessera::reconstruction::testing {
namespace formats = recon::formats;
namespace mri = recon::mri;
using Complex = std::complex<float>;

void WriteComplexCfl(const std::string& path, const std::vector<int64_t>& dims, const std::vector<Complex>& data) {
  absl::StatusOr<formats::CflArray> a = formats::MakeCfl(dims);
  if (!a.ok() || a->data.size() != data.size()) {
    ADD_FAILURE() << path << ": " << (a.ok() ? "size mismatch" : a.status().ToString());
    return;
  }
  a->data = data;
  const absl::Status written = formats::WriteCfl(path, *a);
  if (!written.ok()) ADD_FAILURE() << path << ": " << written;
}

Mri3dFiles WriteMri3dProblem(const std::string& name, const mri::Trajectory3D* traj, int centre_half_width) {
  constexpr int64_t n = kMri3dSize;
  constexpr int coils = kMri3dCoils;
  Mri3dFiles f;
  f.dir = ::tessera::testing::FreshTestDir(name);
  const auto series = *mri::SmoothCoilSeries3D(coils, 1);
  const auto phantom = mri::SheppLogan3D(0.9);
  f.truth = mri::RasterizePhantom3D(phantom, n, n, n);
  WriteComplexCfl(f.dir + "/coils", {n, n, n, coils}, mri::EvaluateCoilSeries3D(series, n, n, n));
  if (traj == nullptr) {
    auto k = *mri::PhantomCartesianKspace3D(phantom, series, n, n, n);
    const int64_t npix = n * n * n;
    for (int64_t p = 0; p < npix; ++p) {
      const int64_t j = (p / n) % n;
      if (std::abs(j - n / 2) > centre_half_width && j % 2 != 0) {
        for (int c = 0; c < coils; ++c) k[p + npix * c] = 0;
      }
    }
    WriteComplexCfl(f.dir + "/kspace", {n, n, n, coils}, k);
    return f;
  }
  std::vector<Complex> t(3 * traj->size());
  for (int64_t j = 0; j < traj->size(); ++j) {
    t[3 * j] = traj->kx[j], t[3 * j + 1] = traj->ky[j], t[3 * j + 2] = traj->kz[j];
  }
  const int64_t readouts = traj->spokes * traj->partitions;
  WriteComplexCfl(f.dir + "/traj", {3, traj->samples, readouts}, t);
  WriteComplexCfl(f.dir + "/kspace", {1, traj->samples, readouts, coils},
        *mri::PhantomCoilKspace3D(phantom, series, traj->size(), traj->kx.data(), traj->ky.data(), traj->kz.data(),
                                  n, n, n));
  return f;
}

double VolumeNrmse(const NDArray& image, const std::vector<float>& truth) {
  double num = 0, den = 0;
  const float* a = image.data<float>();
  for (size_t i = 0; i < truth.size(); ++i) {
    num += (a[i] - truth[i]) * double{a[i] - truth[i]};
    den += double{truth[i]} * truth[i];
  }
  return std::sqrt(num / den);
}

}  // namespace tessera::reconstruction::testing
