// 3-D MRI jobs through BART files (issue 36): exact 4-coil k-space of the 3-D
// Shepp-Logan phantom (ellipsoid_phantom.h) as .cfl files, reconstructed by
// RunInProcess: stack-of-stars CG-SENSE (the kz FFT + slice path), a
// kooshball adjoint (3-D NUFFT, density compensated) and Cartesian 3-D
// CG-SENSE; output volumes nx x ny x nz (NIfTI and .cfl with PHS2 = nz); 3-D
// inputs that do not fit together refused naming the input.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
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
  return testing::WriteMri3dProblem(name, traj, /*centre_half_width=*/2);
}

struct Run3D {
  absl::StatusOr<ReconOutcome> outcome;
  double nrmse = 0;
  std::string work_dir;
};

Run3D RunJob(const Files& f, const std::string& method, bool trajectory, const std::string& coils = "coils") {
  v1::ReconstructRequest r;
  v1::MriOptions* m = r.mutable_mri();
  m->set_method(method);
  m->mutable_kspace()->set_path(f.dir + "/kspace");
  if (trajectory) m->mutable_trajectory()->set_path(f.dir + "/traj");
  m->mutable_coils()->set_path(f.dir + "/" + coils);
  m->set_iterations(15);
  m->set_lambda(1e-3);
  r.set_device("cpu");
  auto done = reconstruction::testing::RunInProcess(r, FreshTestDir("mri3d_work_" + method), {f.dir},
                                                    int64_t{1} << 30);
  Run3D run;
  run.outcome = std::move(done.outcome);
  run.work_dir = done.work_dir;
  if (run.outcome.ok()) {
    absl::StatusOr<Volume> image = ReadNifti(run.work_dir + "/reconstruction.nii.gz");
    EXPECT_TRUE(image.ok()) << image.status();
    if (image.ok()) {
      EXPECT_EQ(image->data.shape(), (std::vector<int64_t>{kN, kN, kN}));
      run.nrmse = testing::VolumeNrmse(image->data, f.truth);
    }
  }
  return run;
}

TEST(Mri3dRunTest, StackOfStarsCgSense) {
  const mri::Trajectory3D t = *mri::StackOfStarsTrajectory(kN, kN, 2 * kN, 28, mri::RadialOrdering::kGoldenAngle);
  const Files f = WriteProblem("mri3d_sos", &t);
  const Run3D cg = RunJob(f, "cgsense", true);
  ASSERT_TRUE(cg.outcome.ok()) << cg.outcome.status();
  const v1::ReconstructionResult& result = cg.outcome->result;
  std::printf("16^3 stack of stars cgsense: NRMSE %.4f; %s\n", cg.nrmse, result.geometry().c_str());
  EXPECT_NE(result.geometry().find("stack of stars"), std::string::npos) << result.geometry();
  EXPECT_EQ(result.dims_size(), 3);
  EXPECT_EQ(result.dims(2), kN);
  EXPECT_LT(cg.nrmse, 0.40);  // 16^3: the voxel-averaged phantom's edges leave ~0.33 even fully sampled
  absl::StatusOr<formats::CflArray> complex_image = formats::ReadCfl(cg.work_dir + "/reconstruction");
  ASSERT_TRUE(complex_image.ok()) << complex_image.status();
  EXPECT_EQ(complex_image->dim(formats::kPhs2Dim), kN);
}

TEST(Mri3dRunTest, KooshballAdjointAndCgSense) {
  const mri::Trajectory3D t = *mri::KooshballTrajectory(kN, 2 * kN, 400);
  const Files f = WriteProblem("mri3d_koosh", &t);
  const Run3D adjoint = RunJob(f, "adjoint", true);
  ASSERT_TRUE(adjoint.outcome.ok()) << adjoint.outcome.status();
  const Run3D cg = RunJob(f, "cgsense", true);
  ASSERT_TRUE(cg.outcome.ok()) << cg.outcome.status();
  std::printf("16^3 kooshball: adjoint NRMSE %.4f, cgsense %.4f; %s\n", adjoint.nrmse, cg.nrmse,
              cg.outcome->result.geometry().c_str());
  EXPECT_NE(cg.outcome->result.geometry().find("3-D NUFFT"), std::string::npos);
  EXPECT_LT(adjoint.nrmse, 0.5);
  EXPECT_LT(cg.nrmse, 0.40);  // 16^3: the voxel-averaged phantom's edges leave ~0.33 even fully sampled
  EXPECT_GT(cg.outcome->result.residual_norms_size(), 1);
}

TEST(Mri3dRunTest, CartesianCgSense) {
  const Files f = WriteProblem("mri3d_cart", nullptr);
  const Run3D cg = RunJob(f, "cgsense", false);
  ASSERT_TRUE(cg.outcome.ok()) << cg.outcome.status();
  std::printf("16^3 Cartesian cgsense: NRMSE %.4f; %s\n", cg.nrmse, cg.outcome->result.geometry().c_str());
  EXPECT_NE(cg.outcome->result.geometry().find("Cartesian 3-D"), std::string::npos);
  EXPECT_LT(cg.nrmse, 0.40);  // 16^3: the voxel-averaged phantom's edges leave ~0.33 even fully sampled
}

TEST(Mri3dRunTest, InconsistentInputsRefused) {
  const mri::Trajectory3D t = *mri::KooshballTrajectory(kN, 2 * kN, 50);
  const Files f = WriteProblem("mri3d_bad", &t);
  // 2-D maps with a 3-D trajectory.
  testing::WriteComplexCfl(f.dir + "/coils2d", {kN, kN, 1, kCoils}, std::vector<Complex>(kN * kN * kCoils, Complex(0.5f, 0)));
  Run3D r = RunJob(f, "cgsense", true, "coils2d");
  ASSERT_FALSE(r.outcome.ok());
  EXPECT_EQ(r.outcome.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.outcome.status().message().find("3-D coil maps"), std::string::npos) << r.outcome.status();
  // 3-D maps with another coil count.
  testing::WriteComplexCfl(f.dir + "/coils3c", {kN, kN, kN, 3}, std::vector<Complex>(kN * kN * kN * 3, Complex(0.5f, 0)));
  r = RunJob(f, "cgsense", true, "coils3c");
  ASSERT_FALSE(r.outcome.ok());
  EXPECT_NE(r.outcome.status().message().find("coils"), std::string::npos) << r.outcome.status();
  // Cartesian: maps of another depth, and sense on 3-D k-space.
  const Files c = WriteProblem("mri3d_bad_cart", nullptr);
  testing::WriteComplexCfl(c.dir + "/coils8", {kN, kN, 8, kCoils}, std::vector<Complex>(kN * kN * 8 * kCoils, Complex(0.5f, 0)));
  r = RunJob(c, "cgsense", false, "coils8");
  ASSERT_FALSE(r.outcome.ok());
  EXPECT_NE(r.outcome.status().message().find("mri.coils: dimension 2 is 8"), std::string::npos)
      << r.outcome.status();
  r = RunJob(c, "sense", false);
  ASSERT_FALSE(r.outcome.ok());
  EXPECT_NE(r.outcome.status().message().find("cgsense"), std::string::npos) << r.outcome.status();
}

}  // namespace
}  // namespace tessera::reconstruction
