// `tessera recon mri` in 3-D as users run it (issue 36): BART files of a
// 16^3 4-coil kooshball and Cartesian problem (exact k-space of the 3-D
// Shepp-Logan), reconstructed to a 16 x 16 x 16 NIfTI; the summary names the
// path; a 3-D trajectory with 2-D maps exits 2 naming the maps.
#include <complex>
#include <string>
#include <vector>

#include "cli/testing/run_tessera.h"
#include "common/nifti_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reconstruction/mri/ellipsoid_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"
#include "services/reconstruction/formats/cfl.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using cli::testing::CliResult;
using cli::testing::RunTessera;
namespace formats = recon::formats;
namespace mri = recon::mri;
using Complex = std::complex<float>;

constexpr int64_t kN = 16;
constexpr int kCoils = 4;

std::string Tmp(const std::string& name) { return cli::testing::TestTmp(name); }

void Write(const std::string& name, const std::vector<int64_t>& dims, std::vector<Complex> data) {
  formats::CflArray a = *formats::MakeCfl(dims);
  ASSERT_EQ(a.data.size(), data.size()) << name;
  a.data = std::move(data);
  ASSERT_TRUE(formats::WriteCfl(Tmp(name), a).ok()) << name;
}

TEST(ReconMri3dCliTest, KooshballAndCartesianVolumes) {
  const auto series = *mri::SmoothCoilSeries3D(kCoils, 1);
  const auto phantom = mri::SheppLogan3D(0.9);
  Write("coils", {kN, kN, kN, kCoils}, mri::EvaluateCoilSeries3D(series, kN, kN, kN));
  const mri::Trajectory3D t = *mri::KooshballTrajectory(kN, 2 * kN, 300);
  std::vector<Complex> traj(3 * t.size());
  for (int64_t j = 0; j < t.size(); ++j) traj[3 * j] = t.kx[j], traj[3 * j + 1] = t.ky[j], traj[3 * j + 2] = t.kz[j];
  Write("traj", {3, t.samples, t.spokes}, traj);
  Write("kspace", {1, t.samples, t.spokes, kCoils},
        *mri::PhantomCoilKspace3D(phantom, series, t.size(), t.kx.data(), t.ky.data(), t.kz.data(), kN, kN, kN));
  Write("cart", {kN, kN, kN, kCoils}, *mri::PhantomCartesianKspace3D(phantom, series, kN, kN, kN));

  CliResult r = RunTessera({"recon", "mri", "--kspace", Tmp("kspace"), "--traj", Tmp("traj.cfl"), "--coils",
                            Tmp("coils.hdr"), "--method", "cgsense", "--iterations", "8", "--out", Tmp("koosh.nii.gz")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("3-D NUFFT"));
  absl::StatusOr<Volume> v = ReadNifti(Tmp("koosh.nii.gz"));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->data.shape(), (Shape{kN, kN, kN}));

  r = RunTessera({"recon", "mri", "--kspace", Tmp("cart"), "--coils", Tmp("coils"), "--method", "cgsense",
                  "--iterations", "5", "--out", Tmp("cart.nii.gz")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Cartesian 3-D"));
  v = ReadNifti(Tmp("cart.nii.gz"));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->data.shape(), (Shape{kN, kN, kN}));

  Write("coils2d", {kN, kN, 1, kCoils}, std::vector<Complex>(kN * kN * kCoils, Complex(0.5f, 0)));
  r = RunTessera({"recon", "mri", "--kspace", Tmp("kspace"), "--traj", Tmp("traj"), "--coils", Tmp("coils2d"),
                  "--method", "cgsense", "--out", Tmp("bad.nii.gz")});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr("3-D coil maps"));
}

}  // namespace
}  // namespace tessera
