// An ISMRMRD file whose radial acquisitions carry 2 slices x 2 repetitions
// (interleaved in the file) is reconstructed by one MRI job (cgsense) into
// nx x ny x 4, each image bit-identical to the same acquisitions written as a
// one-image ISMRMRD file and reconstructed alone (issue 40).
#include <gtest/gtest.h>

#include <complex>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "common/nifti_io.h"
#include "common/status.h"
#include "common/testing/temp_files.h"
#include "ismrmrd/dataset.h"
#include "ismrmrd/ismrmrd.h"
#include "ismrmrd/xml.h"
#include "services/reconstruction/formats/cfl.h"
#include "services/reconstruction/phantoms/mri_phantom.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/reconstruction_run.h"
#include "services/reconstruction/testing/run_in_process.h"

namespace tessera::reconstruction {
namespace {

using ::tessera::testing::FreshTestDir;

constexpr int kN = 32, kSlices = 2, kRepetitions = 2;

std::string HeaderXml() {
  ISMRMRD::IsmrmrdHeader h;
  ISMRMRD::Encoding e;
  e.encodedSpace.matrixSize = ISMRMRD::MatrixSize(kN, kN, 1);
  e.encodedSpace.fieldOfView_mm = {220, 220, 5};
  e.reconSpace = e.encodedSpace;
  e.trajectory = ISMRMRD::TrajectoryType::RADIAL;
  h.encoding.push_back(e);
  h.experimentalConditions.H1resonanceFrequency_Hz = 63500000;
  std::ostringstream xml;
  ISMRMRD::serialize(h, xml);
  return xml.str();
}

// Image i = repetition + 2 slice: the phantom's k-space times 1 + 0.5 i with
// a phase ramp along the samples scaled by i (so images differ in shape).
void AppendImage(ISMRMRD::Dataset& d, const recon::phantoms::MriPhantom& p, int slice, int repetition, int spoke) {
  const int64_t samples = p.trajectory.dim(1), spokes = p.trajectory.dim(2), coils = p.kspace.dim(3);
  const int i = repetition + kRepetitions * slice;
  ISMRMRD::Acquisition acq(samples, coils, 2);
  acq.idx().slice = slice;
  acq.idx().repetition = repetition;
  for (int64_t s = 0; s < samples; ++s) {
    // ISMRMRD's default unit: fractions of the matrix.
    acq.traj(0, s) = p.trajectory.data[3 * (s + samples * spoke)].real() / kN;
    acq.traj(1, s) = p.trajectory.data[3 * (s + samples * spoke) + 1].real() / kN;
    const std::complex<float> z = (1.f + 0.5f * i) * std::polar(1.f, 0.02f * i * s);
    for (int64_t c = 0; c < coils; ++c) acq.data(s, c) = z * p.kspace.data[s + samples * (spoke + spokes * c)];
  }
  d.appendAcquisition(acq);
}

absl::StatusOr<ReconOutcome> RunJob(const std::string& h5, const std::string& coils, const std::string& work) {
  v1::ReconstructRequest r;
  r.mutable_mri()->set_method("cgsense");
  r.mutable_mri()->mutable_kspace()->set_path(h5);
  r.mutable_mri()->mutable_coils()->set_path(coils);
  r.mutable_mri()->set_iterations(8);
  r.set_device("cpu");
  return testing::RunInProcess(r, work).outcome;
}

TEST(MriIsmrmrdStackTest, SlicesAndRepetitionsMatchEachImageAlone) {
  const std::string dir = FreshTestDir("mri_ismrmrd_stack");
  recon::phantoms::MriPhantomOptions o;
  o.size = kN;
  o.spokes = 20;
  o.coils = 3;
  absl::StatusOr<recon::phantoms::MriPhantom> p = recon::phantoms::MakeMriPhantom(o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(recon::formats::WriteCfl(dir + "/coils", p->maps).ok());
  const int spokes = static_cast<int>(p->trajectory.dim(2));
  {
    ISMRMRD::Dataset d((dir + "/stack.h5").c_str(), "dataset", true);
    d.writeHeader(HeaderXml());
    for (int r = 0; r < spokes; ++r) {
      for (int slice = 0; slice < kSlices; ++slice) {
        for (int rep = 0; rep < kRepetitions; ++rep) AppendImage(d, *p, slice, rep, r);
      }
    }
  }
  const std::string stack_work = FreshTestDir("mri_ismrmrd_stack_work");
  absl::StatusOr<ReconOutcome> stack = RunJob(dir + "/stack.h5", dir + "/coils", stack_work);
  ASSERT_TRUE(stack.ok()) << stack.status();
  EXPECT_EQ(stack->result.dims(2), kSlices * kRepetitions);
  absl::StatusOr<Volume> volume = ReadNifti(stack_work + "/reconstruction.nii.gz");
  ASSERT_TRUE(volume.ok()) << volume.status();
  ASSERT_EQ(volume->data.shape(), (Shape{kN, kN, kSlices * kRepetitions}));
  const float* v = volume->data.data<float>();
  for (int slice = 0; slice < kSlices; ++slice) {
    for (int rep = 0; rep < kRepetitions; ++rep) {
      const int i = rep + kRepetitions * slice;
      // This image's acquisitions copied from the stack file, as a plain
      // one-image file (slice and repetition 0).
      const std::string one = dir + "/image" + std::to_string(i) + ".h5";
      {
        ISMRMRD::Dataset d(one.c_str(), "dataset", true);
        d.writeHeader(HeaderXml());
        for (int r = 0; r < spokes; ++r) {
          ISMRMRD::Dataset src((dir + "/stack.h5").c_str(), "dataset", false);
          ISMRMRD::Acquisition acq;
          src.readAcquisition(static_cast<uint32_t>(i + kSlices * kRepetitions * r), acq);
          acq.idx().slice = 0;
          acq.idx().repetition = 0;
          d.appendAcquisition(acq);
        }
      }
      const std::string work = FreshTestDir("mri_ismrmrd_image" + std::to_string(i));
      absl::StatusOr<ReconOutcome> alone = RunJob(one, dir + "/coils", work);
      ASSERT_TRUE(alone.ok()) << alone.status();
      absl::StatusOr<Volume> image = ReadNifti(work + "/reconstruction.nii.gz");
      ASSERT_TRUE(image.ok()) << image.status();
      const std::vector<float> got(v + i * kN * kN, v + (i + 1) * kN * kN);
      EXPECT_EQ(got, std::vector<float>(image->data.data<float>(), image->data.data<float>() + kN * kN))
          << "slice " << slice << " repetition " << rep;
      if (i > 0) {
        EXPECT_NE(got, std::vector<float>(v, v + kN * kN)) << "images must differ";
      }
    }
  }
}

}  // namespace
}  // namespace tessera::reconstruction
