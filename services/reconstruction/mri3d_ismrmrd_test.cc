// ISMRMRD files with an encoded matrix z > 1 as 3-D MRI jobs (issue 36):
// Cartesian 3-D lines (kspace_encode_step_2) reconstructed by cgsense equal
// the same k-space given as a BART .cfl bit for bit; a kooshball with 3
// trajectory dimensions goes through the 3-D NUFFT into a 12^3 volume; maps
// of another depth are refused naming the partitions.
#include <gtest/gtest.h>

#include <complex>
#include <sstream>
#include <string>
#include <vector>

#include "common/nifti_io.h"
#include "common/status.h"
#include "common/testing/temp_files.h"
#include "ismrmrd/dataset.h"
#include "ismrmrd/ismrmrd.h"
#include "ismrmrd/xml.h"
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

constexpr int kN = 12, kCoils = 4;

std::string HeaderXml(bool radial) {
  ISMRMRD::IsmrmrdHeader h;
  ISMRMRD::Encoding e;
  e.encodedSpace.matrixSize = ISMRMRD::MatrixSize(kN, kN, kN);
  e.encodedSpace.fieldOfView_mm = {240, 240, 160};
  e.reconSpace = e.encodedSpace;
  e.trajectory = radial ? ISMRMRD::TrajectoryType::RADIAL : ISMRMRD::TrajectoryType::CARTESIAN;
  h.encoding.push_back(e);
  h.experimentalConditions.H1resonanceFrequency_Hz = 63500000;
  std::ostringstream xml;
  ISMRMRD::serialize(h, xml);
  return xml.str();
}

absl::StatusOr<ReconOutcome> RunJob(const std::string& kspace, const std::string& coils, const std::string& work) {
  v1::ReconstructRequest r;
  r.mutable_mri()->set_method("cgsense");
  r.mutable_mri()->mutable_kspace()->set_path(kspace);
  r.mutable_mri()->mutable_coils()->set_path(coils);
  r.mutable_mri()->set_iterations(8);
  r.set_device("cpu");
  return testing::RunInProcess(r, work).outcome;
}

TEST(Mri3dIsmrmrdTest, CartesianEqualsCflAndKooshballIsAVolume) {
  const std::string dir = FreshTestDir("mri3d_ismrmrd");
  const auto series = *mri::SmoothCoilSeries3D(kCoils, 1);
  const auto phantom = mri::SheppLogan3D(0.9);
  testing::WriteComplexCfl(dir + "/coils", {kN, kN, kN, kCoils}, mri::EvaluateCoilSeries3D(series, kN, kN, kN));
  testing::WriteComplexCfl(dir + "/coils8", {kN, kN, 8, kCoils}, std::vector<Complex>(kN * kN * 8 * kCoils, Complex(0.5f, 0)));

  // Cartesian: every (y, z) line with y even or near the centre.
  std::vector<Complex> k = *mri::PhantomCartesianKspace3D(phantom, series, kN, kN, kN);
  const int64_t npix = int64_t{kN} * kN * kN;
  {
    ISMRMRD::Dataset d((dir + "/cart.h5").c_str(), "dataset", true);
    d.writeHeader(HeaderXml(false));
    for (int z = 0; z < kN; ++z) {
      for (int y = 0; y < kN; ++y) {
        const bool kept = y % 2 == 0 || std::abs(y - kN / 2) < 3;
        if (!kept) {
          for (int c = 0; c < kCoils; ++c) {
            for (int x = 0; x < kN; ++x) k[x + kN * (y + kN * (z + int64_t{kN} * c))] = 0;
          }
          continue;
        }
        ISMRMRD::Acquisition acq(kN, kCoils, 0);
        acq.idx().kspace_encode_step_1 = y;
        acq.idx().kspace_encode_step_2 = z;
        acq.center_sample() = kN / 2;
        for (int c = 0; c < kCoils; ++c) {
          for (int x = 0; x < kN; ++x) acq.data(x, c) = k[x + kN * (y + kN * (z + int64_t{kN} * c))];
        }
        d.appendAcquisition(acq);
      }
    }
  }
  testing::WriteComplexCfl(dir + "/cart", {kN, kN, kN, kCoils}, k);
  const std::string h5_work = FreshTestDir("mri3d_h5_work"), cfl_work = FreshTestDir("mri3d_cfl_work");
  absl::StatusOr<ReconOutcome> from_h5 = RunJob(dir + "/cart.h5", dir + "/coils", h5_work);
  ASSERT_TRUE(from_h5.ok()) << from_h5.status();
  absl::StatusOr<ReconOutcome> from_cfl = RunJob(dir + "/cart", dir + "/coils", cfl_work);
  ASSERT_TRUE(from_cfl.ok()) << from_cfl.status();
  auto a = formats::ReadCfl(h5_work + "/reconstruction");
  auto b = formats::ReadCfl(cfl_work + "/reconstruction");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->dim(formats::kPhs2Dim), kN);
  EXPECT_EQ(a->data, b->data);
  EXPECT_NE(from_h5->result.geometry().find("Cartesian 3-D"), std::string::npos);
  EXPECT_DOUBLE_EQ(from_h5->result.spacing(2), 160.0 / kN);

  // Kooshball: trajectory as fractions of the matrix (ISMRMRD's default).
  const mri::Trajectory3D t = *mri::KooshballTrajectory(kN, 2 * kN, 100);
  const auto kk = *mri::PhantomCoilKspace3D(phantom, series, t.size(), t.kx.data(), t.ky.data(), t.kz.data(), kN,
                                            kN, kN);
  {
    ISMRMRD::Dataset d((dir + "/koosh.h5").c_str(), "dataset", true);
    d.writeHeader(HeaderXml(true));
    for (int64_t s = 0; s < t.spokes; ++s) {
      ISMRMRD::Acquisition acq(t.samples, kCoils, 3);
      for (int64_t i = 0; i < t.samples; ++i) {
        const int64_t j = i + t.samples * s;
        acq.traj(0, i) = t.kx[j] / kN, acq.traj(1, i) = t.ky[j] / kN, acq.traj(2, i) = t.kz[j] / kN;
        for (int c = 0; c < kCoils; ++c) acq.data(i, c) = kk[j + t.size() * c];
      }
      d.appendAcquisition(acq);
    }
  }
  const std::string koosh_work = FreshTestDir("mri3d_koosh_work");
  absl::StatusOr<ReconOutcome> koosh = RunJob(dir + "/koosh.h5", dir + "/coils", koosh_work);
  ASSERT_TRUE(koosh.ok()) << koosh.status();
  EXPECT_NE(koosh->result.geometry().find("3-D NUFFT"), std::string::npos) << koosh->result.geometry();
  absl::StatusOr<Volume> v = ReadNifti(koosh_work + "/reconstruction.nii.gz");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->data.shape(), (Shape{kN, kN, kN}));

  absl::StatusOr<ReconOutcome> bad = RunJob(dir + "/koosh.h5", dir + "/coils8", FreshTestDir("mri3d_bad_work"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("encodes 12 partitions"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace tessera::reconstruction
