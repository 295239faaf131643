// Ultrasound jobs through the files and the request a user gives (issue 12):
// simulated point targets written in the PICMUS HDF5 layout, beamformed by
// DAS and MV via RunReconstruction; the B-mode NIfTI puts its brightest pixel
// at a target, MV's mainlobe is narrower than DAS's, and bad requests are
// refused naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/nifti_io.h"
#include "common/testing/temp_files.h"
#include "kernels/reconstruction/ultrasound/simulator.h"
#include "services/reconstruction/formats/ultrasound_h5.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/reconstruction_run.h"

namespace tessera::reconstruction {
namespace {

using ::tessera::testing::FreshTestDir;

namespace fs = std::filesystem;
namespace us = recon::ultrasound;

constexpr double kFc = 5e6;

// One point target at (0, 20 mm) seen by 64 elements, 3 plane waves, IQ.
std::string WriteTargetFile(const std::string& dir) {
  const us::LinearArray probe = us::LinearArray::Uniform(64, 0.3e-3, kFc);
  const us::TransmitSequence sequence = us::TransmitSequence::PlaneWaves(3, 6 * M_PI / 180);
  us::Sampling sampling;
  sampling.sampling_frequency_hz = 4 * kFc;
  sampling.sound_speed = 1540;
  sampling.demodulation_frequency_hz = kFc;
  us::SimulationOptions options;
  options.relative_noise = 1e-3;
  auto acquisition = us::Simulate(probe, sequence, sampling, us::SamplesForDepth(probe, sequence, sampling, 26e-3),
                                  {{0.0, 20e-3, 1.0}}, options);
  EXPECT_TRUE(acquisition.ok()) << acquisition.status();
  const std::string path = dir + "/targets.h5";
  EXPECT_TRUE(recon::formats::WriteUltrasoundH5(*acquisition, path).ok());
  return path;
}

absl::StatusOr<ReconSpec> Spec(const std::string& dir, const std::string& method,
                               const std::string& file = "targets.h5", bool deterministic = false) {
  v1::ReconstructRequest r;
  r.set_deterministic(deterministic);
  v1::UltrasoundOptions* u = r.mutable_ultrasound();
  u->mutable_channel_data()->set_path(dir + "/" + file);
  u->set_method(method);
  u->set_subarray(16);
  for (double x : {-5.0, 5.0}) u->add_x_mm(x);
  for (double z : {15.0, 25.0}) u->add_z_mm(z);
  for (int p : {101, 101}) u->add_pixels(p);
  r.set_device("cpu");
  return ResolveReconstructRequest(r, {dir}, int64_t{1} << 30, "cpu");
}

// Pixels of the row through the brightest pixel within 6 dB of it.
struct Brightest {
  int64_t ix = 0, iz = 0, width_6db = 0;
};
Brightest Analyse(const NDArray& db, int64_t nx, int64_t nz) {
  Brightest b;
  const float* v = db.data<float>();
  for (int64_t i = 0; i < nx * nz; ++i) {
    if (v[i] > v[b.ix + nx * b.iz]) b.ix = i % nx, b.iz = i / nx;
  }
  for (int64_t ix = 0; ix < nx; ++ix) b.width_6db += v[ix + nx * b.iz] >= v[b.ix + nx * b.iz] - 6 ? 1 : 0;
  return b;
}

TEST(UltrasoundRunTest, DasAndMvImageThePointTargetAndMvIsNarrower) {
  const std::string dir = FreshTestDir("us_run");
  WriteTargetFile(dir);
  int64_t width[2] = {0, 0};
  int m = 0;
  for (const char* method : {"das", "mv"}) {
    absl::StatusOr<ReconSpec> spec = Spec(dir, method);
    ASSERT_TRUE(spec.ok()) << spec.status();
    ASSERT_TRUE(CheckReconInputs(*spec).ok());
    ReconRunContext ctx;
    ctx.work_dir = FreshTestDir(std::string("us_work_") + method);
    absl::StatusOr<ReconOutcome> out = RunReconstruction(*spec, ctx);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->result.modality(), "ultrasound");
    EXPECT_EQ(out->result.method(), method);
    ASSERT_EQ(out->result.files_size(), 2);
    EXPECT_TRUE(fs::exists(ctx.work_dir + "/reconstruction.png"));
    absl::StatusOr<Volume> image = ReadNifti(ctx.work_dir + "/reconstruction.nii.gz");
    ASSERT_TRUE(image.ok()) << image.status();
    ASSERT_EQ(image->data.dim(0), 101);
    ASSERT_EQ(image->data.dim(1), 101);
    const Brightest b = Analyse(image->data, 101, 101);
    // The grid spans x -5..5 mm and z 15..25 mm in 0.1 mm steps: the target
    // (0, 20 mm) is pixel (50, 50); within half a wavelength (0.15 mm).
    EXPECT_NEAR(b.ix, 50, 2) << method;
    EXPECT_NEAR(b.iz, 50, 2) << method;
    width[m++] = b.width_6db;
  }
  EXPECT_LT(width[1], width[0]) << "MV -6 dB width " << width[1] << " px vs DAS " << width[0];
}

// The same data as a USTB .uff (formats/make_ustb_uff.py, doubles) beamforms
// to the same B-mode as our layout, and deterministic runs report the flag.
TEST(UltrasoundRunTest, UstbUffFileGivesTheSameImageAsThePicmusLayout) {
  if (std::system("/usr/bin/python3 -c 'import h5py' 2>/dev/null") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 has no h5py (Debian python3-h5py)";
  }
  const std::string dir = FreshTestDir("us_uff");
  const std::string h5 = WriteTargetFile(dir);
  const std::string cmd = "/usr/bin/python3 services/reconstruction/formats/make_ustb_uff.py --float64 '" + h5 +
                          "' '" + dir + "/targets.uff'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<float> images[2];
  int i = 0;
  for (const char* file : {"targets.h5", "targets.uff"}) {
    absl::StatusOr<ReconSpec> spec = Spec(dir, "das", file, /*deterministic=*/true);
    ASSERT_TRUE(spec.ok()) << spec.status();
    ReconRunContext ctx;
    ctx.work_dir = FreshTestDir(std::string("us_uff_work_") + std::to_string(i));
    absl::StatusOr<ReconOutcome> out = RunReconstruction(*spec, ctx);
    ASSERT_TRUE(out.ok()) << file << ": " << out.status();
    EXPECT_TRUE(out->result.deterministic());
    absl::StatusOr<Volume> image = ReadNifti(ctx.work_dir + "/reconstruction.nii.gz");
    ASSERT_TRUE(image.ok()) << image.status();
    const float* v = image->data.data<float>();
    images[i++].assign(v, v + 101 * 101);
  }
  EXPECT_EQ(images[0], images[1]);
}

TEST(UltrasoundRunTest, BadInputsAreRefusedNamingTheField) {
  const std::string dir = FreshTestDir("us_bad");
  WriteTargetFile(dir);
  v1::ReconstructRequest r;
  r.mutable_ultrasound()->mutable_channel_data()->set_path(dir + "/targets.h5");
  r.mutable_ultrasound()->set_method("mv");
  r.mutable_ultrasound()->set_subarray(100);  // > 64 channels
  absl::StatusOr<ReconSpec> spec = ResolveReconstructRequest(r, {dir}, int64_t{1} << 30, "cpu");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const absl::Status too_long = CheckReconInputs(*spec);
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("ultrasound.subarray 100 is more than the data's 64 channels"), std::string::npos)
      << too_long;

  // A file that is not HDF5.
  FILE* f = std::fopen((dir + "/junk.h5").c_str(), "w");
  std::fputs("not hdf5", f);
  std::fclose(f);
  r.mutable_ultrasound()->mutable_channel_data()->set_path(dir + "/junk.h5");
  r.mutable_ultrasound()->set_subarray(0);
  spec = ResolveReconstructRequest(r, {dir}, int64_t{1} << 30, "cpu");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const absl::Status junk = CheckReconInputs(*spec);
  EXPECT_EQ(junk.code(), absl::StatusCode::kInvalidArgument) << junk;
  EXPECT_NE(junk.message().find("ultrasound.channel_data"), std::string::npos) << junk;
}

}  // namespace
}  // namespace tessera::reconstruction
