// 3-D MRI jobs with mri.coil_estimation espirit (issue 36): exact 4-coil
// k-space of the 16^3 Shepp-Logan phantom (ellipsoid_phantom.h) as BART
// files without coil maps; 3-D ESPIRiT (espirit3d.h) estimates them from the
// Cartesian centre or the gridded centre of a kooshball / stack of stars, and
// CG-SENSE with them reaches the NRMSE of CG-SENSE with the true maps (within
// 10 %); the result's geometry names the 3-D calibration box.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <string>
#include <vector>

#include "common/nifti_io.h"
#include "common/testing/temp_files.h"
#include "kernels/reconstruction/mri/ellipsoid_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"
#include "services/reconstruction/formats/cfl.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/reconstruction_run.h"
#include "services/reconstruction/testing/mri3d_problem.h"
#include "services/reconstruction/testing/run_in_process.h"

namespace tessera::reconstruction {
namespace {

using ::tessera::testing::FreshTestDir;
namespace formats = recon::formats;
namespace mri = recon::mri;
using Complex = std::complex<float>;

constexpr int64_t kN = testing::kMri3dSize;
constexpr int kCoils = testing::kMri3dCoils;
using Files = testing::Mri3dFiles;

Files WriteProblem(const std::string& name, const mri::Trajectory3D* traj) {
  return testing::WriteMri3dProblem(name, traj, /*centre_half_width=*/5);
}

struct Run3D {
  absl::StatusOr<ReconOutcome> outcome;
  double nrmse = 0;
};

// cgsense with the true maps, or (espirit) maps estimated at calibration_size 12.
Run3D RunJob(const Files& f, bool trajectory, bool espirit) {
  v1::ReconstructRequest r;
  v1::MriOptions* m = r.mutable_mri();
  m->set_method("cgsense");
  m->mutable_kspace()->set_path(f.dir + "/kspace");
  if (trajectory) m->mutable_trajectory()->set_path(f.dir + "/traj");
  if (espirit) {
    m->set_coil_estimation("espirit");
    m->set_calibration_size(12);
  } else {
    m->mutable_coils()->set_path(f.dir + "/coils");
  }
  m->set_iterations(10);
  m->set_lambda(1e-3);
  r.set_device("cpu");
  auto done = reconstruction::testing::RunInProcess(r, FreshTestDir(espirit ? "mri3d_espirit_work" : "mri3d_work"),
                                                    {f.dir}, int64_t{1} << 30);
  Run3D run;
  run.outcome = std::move(done.outcome);
  if (run.outcome.ok()) {
    absl::StatusOr<Volume> image = ReadNifti(done.work_dir + "/reconstruction.nii.gz");
    EXPECT_TRUE(image.ok()) << image.status();
    if (image.ok()) {
      EXPECT_EQ(image->data.shape(), (std::vector<int64_t>{kN, kN, kN}));
      run.nrmse = testing::VolumeNrmse(image->data, f.truth);
    }
  }
  return run;
}

void ExpectEspiritAsGoodAsTrueMaps(const Files& f, bool trajectory, const char* what, const char* box) {
  const Run3D with_maps = RunJob(f, trajectory, false);
  ASSERT_TRUE(with_maps.outcome.ok()) << with_maps.outcome.status();
  const Run3D with_espirit = RunJob(f, trajectory, true);
  ASSERT_TRUE(with_espirit.outcome.ok()) << with_espirit.outcome.status();
  const std::string& geometry = with_espirit.outcome->result.geometry();
  std::printf("16^3 %s cgsense NRMSE: true maps %.4f, 3-D ESPIRiT %.4f; %s\n", what, with_maps.nrmse,
              with_espirit.nrmse, geometry.c_str());
  EXPECT_LT(with_espirit.nrmse, 1.10 * with_maps.nrmse) << what;
  EXPECT_NE(geometry.find(std::string("coil maps: ESPIRiT 3-D (calibration ") + box + ")"), std::string::npos)
      << geometry;
}

TEST(Mri3dEspiritRunTest, CartesianCgSense) {
  ExpectEspiritAsGoodAsTrueMaps(WriteProblem("mri3d_espirit_cart", nullptr), false, "Cartesian", "12 x 12 x 12");
}

TEST(Mri3dEspiritRunTest, KooshballCgSense) {
  const mri::Trajectory3D t = *mri::KooshballTrajectory(kN, 2 * kN, 400);
  ExpectEspiritAsGoodAsTrueMaps(WriteProblem("mri3d_espirit_koosh", &t), true, "kooshball", "12 x 12 x 12");
}

TEST(Mri3dEspiritRunTest, StackOfStarsCgSense) {
  const mri::Trajectory3D t = *mri::StackOfStarsTrajectory(kN, kN, 2 * kN, 28, mri::RadialOrdering::kGoldenAngle);
  ExpectEspiritAsGoodAsTrueMaps(WriteProblem("mri3d_espirit_sos", &t), true, "stack of stars", "12 x 12 x 12");
}

}  // namespace
}  // namespace tessera::reconstruction
