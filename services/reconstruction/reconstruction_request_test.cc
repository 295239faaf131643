// ResolveReconstructRequest for the MRI and ultrasound modalities (issue 12):
// inputs resolved under the data roots (BART pairs by base name), defaults
// filled in, bad options refused naming the field.
#include "services/reconstruction/reconstruction_request.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tessera::reconstruction {
namespace {

namespace fs = std::filesystem;

class ReconRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / "recon_request_test";
    fs::create_directories(root_);
    for (const char* name : {"ks.cfl", "ks.hdr", "traj.cfl", "traj.hdr", "coils.cfl", "coils.hdr", "raw.h5",
                             "rf.h5", "lonely.cfl"}) {
      std::ofstream(root_ / name) << "x";
    }
  }
  absl::StatusOr<ReconSpec> Resolve(const v1::ReconstructRequest& r) {
    return ResolveReconstructRequest(r, {root_.string()}, 1 << 20, "cpu");
  }
  std::string Path(const std::string& name) const { return (root_ / name).string(); }
  fs::path root_;
};

void ExpectInvalid(const absl::StatusOr<ReconSpec>& s, const std::string& needle) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
}

TEST_F(ReconRequestTest, MriCgSenseResolvesBartPairsByBaseNameOrEitherFile) {
  v1::ReconstructRequest r;
  v1::MriOptions* mri = r.mutable_mri();
  mri->mutable_kspace()->set_path(Path("ks.cfl"));
  mri->mutable_trajectory()->set_path(Path("traj"));
  mri->mutable_coils()->set_path(Path("coils.hdr"));
  absl::StatusOr<ReconSpec> spec = Resolve(r);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->modality, Modality::kMri);
  EXPECT_EQ(spec->mri.method, MriMethod::kCgSense);
  EXPECT_EQ(spec->mri.kspace_path, fs::canonical(root_).string() + "/ks");
  EXPECT_EQ(spec->mri.trajectory_path, fs::canonical(root_).string() + "/traj");
  EXPECT_EQ(spec->mri.coils_path, fs::canonical(root_).string() + "/coils");
  EXPECT_EQ(spec->mri.iterations, 10);
  EXPECT_DOUBLE_EQ(spec->mri.lambda, 0.0);
  EXPECT_TRUE(spec->mri.toeplitz);
}

TEST_F(ReconRequestTest, MriBadOptionsAreNamed) {
  v1::ReconstructRequest base;
  v1::MriOptions* mri = base.mutable_mri();
  mri->mutable_kspace()->set_path(Path("ks"));
  mri->mutable_trajectory()->set_path(Path("traj"));
  mri->mutable_coils()->set_path(Path("coils"));
  ASSERT_TRUE(Resolve(base).ok());

  v1::ReconstructRequest r = base;
  r.mutable_mri()->set_method("grappa");
  ExpectInvalid(Resolve(r), "mri.method: 'grappa' is not one of adjoint, cgsense, sense");
  r = base;
  r.mutable_mri()->set_lambda(-1);
  ExpectInvalid(Resolve(r), "mri.lambda");
  r = base;
  r.mutable_mri()->set_tolerance(0.5);
  ExpectInvalid(Resolve(r), "mri.tolerance");
  r = base;
  r.mutable_mri()->clear_coils();
  ExpectInvalid(Resolve(r), "mri.coils: cgsense needs coil sensitivities");
  r = base;
  r.mutable_mri()->clear_trajectory();
  ASSERT_TRUE(Resolve(r).ok());  // Cartesian CG-SENSE
  r.mutable_mri()->set_method("adjoint");
  ExpectInvalid(Resolve(r), "mri.trajectory: required for adjoint");
  r = base;
  r.mutable_mri()->set_method("sense");
  ExpectInvalid(Resolve(r), "sense reconstructs Cartesian k-space");
  r.mutable_mri()->clear_trajectory();
  r.mutable_mri()->set_acceleration(9);
  ExpectInvalid(Resolve(r), "mri.acceleration must be in [2, 8]");
  r.mutable_mri()->set_acceleration(4);
  absl::StatusOr<ReconSpec> sense = Resolve(r);
  ASSERT_TRUE(sense.ok()) << sense.status();
  EXPECT_DOUBLE_EQ(sense->mri.lambda, 1e-3);
  r = base;
  r.mutable_geometry()->set_path(Path("ks.cfl"));
  ExpectInvalid(Resolve(r), "geometry: not used by mri");
}

// Issue 36: compressed sensing (cgsense + regularizer, lambda on BART's scale).
TEST_F(ReconRequestTest, MriRegularizer) {
  v1::ReconstructRequest base;
  v1::MriOptions* mri = base.mutable_mri();
  mri->mutable_kspace()->set_path(Path("ks"));
  mri->mutable_trajectory()->set_path(Path("traj"));
  mri->mutable_coils()->set_path(Path("coils"));
  v1::ReconstructRequest r = base;
  r.mutable_mri()->set_regularizer("l1-wavelet");
  absl::StatusOr<ReconSpec> spec = Resolve(r);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->mri.regularizer, MriRegularizer::kL1Wavelet);
  EXPECT_DOUBLE_EQ(spec->mri.lambda, 0.005);  // bart pics -R W:7:0:0.005
  EXPECT_EQ(spec->mri.iterations, 30);        // bart pics' default
  r.mutable_mri()->set_regularizer("tv");
  r.mutable_mri()->set_lambda(0.02);
  r.mutable_mri()->set_iterations(80);
  spec = Resolve(r);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->mri.regularizer, MriRegularizer::kTv);
  EXPECT_DOUBLE_EQ(spec->mri.lambda, 0.02);
  EXPECT_EQ(spec->mri.iterations, 80);
  spec = Resolve(base);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->mri.regularizer, MriRegularizer::kNone);
  r = base;
  r.mutable_mri()->set_regularizer("l0");
  ExpectInvalid(Resolve(r), "mri.regularizer: 'l0' is not one of l1-wavelet, tv");
  r.mutable_mri()->set_regularizer("tv");
  r.mutable_mri()->set_method("adjoint");
  ExpectInvalid(Resolve(r), "mri.regularizer: only with method cgsense");
}

// Issue 36: coil maps by ESPIRiT instead of mri.coils.
TEST_F(ReconRequestTest, MriEspiritCoilEstimation) {
  v1::ReconstructRequest base;
  v1::MriOptions* mri = base.mutable_mri();
  mri->mutable_kspace()->set_path(Path("ks"));
  mri->mutable_trajectory()->set_path(Path("traj"));
  mri->set_coil_estimation("espirit");
  absl::StatusOr<ReconSpec> spec = Resolve(base);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->mri.espirit);
  EXPECT_TRUE(spec->mri.coils_path.empty());
  EXPECT_EQ(spec->mri.calibration_size, 24);
  EXPECT_DOUBLE_EQ(spec->mri.espirit_crop, 0.8);

  v1::ReconstructRequest r = base;
  r.mutable_mri()->set_calibration_size(32);
  r.mutable_mri()->set_espirit_crop(0);
  spec = Resolve(r);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->mri.calibration_size, 32);
  EXPECT_DOUBLE_EQ(spec->mri.espirit_crop, 0.0);

  r = base;
  r.mutable_mri()->set_coil_estimation("walsh");
  ExpectInvalid(Resolve(r), "mri.coil_estimation: unknown \"walsh\"");
  r = base;
  r.mutable_mri()->mutable_coils()->set_path(Path("coils"));
  ExpectInvalid(Resolve(r), "mri.coil_estimation: espirit estimates the coil maps; give no mri.coils");
  r = base;
  r.mutable_mri()->set_calibration_size(4);
  ExpectInvalid(Resolve(r), "mri.calibration_size must be in [8, 64]");
  r.mutable_mri()->set_calibration_size(65);
  ExpectInvalid(Resolve(r), "mri.calibration_size must be in [8, 64]");
  r = base;
  r.mutable_mri()->set_espirit_crop(1.0);
  ExpectInvalid(Resolve(r), "mri.espirit_crop must be in [0, 1)");
  r.mutable_mri()->set_espirit_crop(-0.1);
  ExpectInvalid(Resolve(r), "mri.espirit_crop must be in [0, 1)");
  r = base;
  r.mutable_mri()->clear_coil_estimation();
  r.mutable_mri()->set_calibration_size(24);
  ExpectInvalid(Resolve(r), "mri.calibration_size: only with coil_estimation espirit");
}

TEST_F(ReconRequestTest, MriMissingHalfOfABartPairIsNotFound) {
  v1::ReconstructRequest r;
  r.mutable_mri()->set_method("adjoint");
  r.mutable_mri()->mutable_kspace()->set_path(Path("lonely.cfl"));
  r.mutable_mri()->mutable_trajectory()->set_path(Path("traj"));
  const absl::StatusOr<ReconSpec> spec = Resolve(r);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("mri.kspace"), std::string::npos) << spec.status();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound) << spec.status();
}

TEST_F(ReconRequestTest, MriIsmrmrdCarriesItsTrajectory) {
  v1::ReconstructRequest r;
  r.mutable_mri()->set_method("adjoint");
  r.mutable_mri()->mutable_kspace()->set_path(Path("raw.h5"));
  absl::StatusOr<ReconSpec> spec = Resolve(r);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(IsHdf5Path(spec->mri.kspace_path));
  EXPECT_TRUE(spec->mri.trajectory_path.empty());
}

TEST_F(ReconRequestTest, UltrasoundDefaultsAndBadOptions) {
  v1::ReconstructRequest base;
  base.mutable_ultrasound()->mutable_channel_data()->set_path(Path("rf.h5"));
  absl::StatusOr<ReconSpec> spec = Resolve(base);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->modality, Modality::kUltrasound);
  EXPECT_EQ(spec->ultrasound.method, UltrasoundMethod::kDas);
  EXPECT_EQ(spec->ultrasound.nx, 256);
  EXPECT_DOUBLE_EQ(spec->ultrasound.dynamic_range_db, 60);

  v1::ReconstructRequest r = base;
  r.mutable_ultrasound()->set_method("mv");
  r.mutable_ultrasound()->set_subarray(32);
  r.mutable_ultrasound()->add_x_mm(-10);
  r.mutable_ultrasound()->add_x_mm(10);
  r.mutable_ultrasound()->add_pixels(128);
  r.mutable_ultrasound()->add_pixels(300);
  spec = Resolve(r);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ultrasound.method, UltrasoundMethod::kMv);
  EXPECT_EQ(spec->ultrasound.subarray, 32);
  EXPECT_EQ(spec->ultrasound.nz, 300);

  r = base;
  r.mutable_ultrasound()->set_subarray(129);
  ExpectInvalid(Resolve(r), "ultrasound.subarray must be in [1, 128]");
  r = base;
  r.mutable_ultrasound()->set_loading(-0.1);
  ExpectInvalid(Resolve(r), "ultrasound.loading");
  r = base;
  r.mutable_ultrasound()->add_z_mm(40);
  r.mutable_ultrasound()->add_z_mm(5);
  ExpectInvalid(Resolve(r), "ultrasound.z_mm must be [min, max] with min < max");
  r = base;
  r.mutable_ultrasound()->add_pixels(64);
  ExpectInvalid(Resolve(r), "ultrasound.pixels must be [nx, nz]");
  r = base;
  r.mutable_ultrasound()->set_method("fk");
  ExpectInvalid(Resolve(r), "ultrasound.method: 'fk' is not one of das, mv");
  r = base;
  r.mutable_ultrasound()->clear_channel_data();
  ExpectInvalid(Resolve(r), "ultrasound.channel_data: required");
}

}  // namespace
}  // namespace tessera::reconstruction
