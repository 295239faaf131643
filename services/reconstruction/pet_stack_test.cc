// PET sinogram stacks (issue 40): a 2-D geometry with a NIfTI sinogram of
// (cols, projections, slices) is reconstructed by OSEM in one job into nx x ny
// x slices, each slice bit-identical (CPU) to that sinogram reconstructed
// alone, with one attenuation map for all slices or one per slice; a stack
// with corrections (randoms) or a map of another slice count is refused at
// submit naming the input.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "common/nifti_io.h"
#include "common/testing/temp_files.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/phantoms/pet_phantom.h"
#include "services/reconstruction/phantoms/rasterize.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/reconstruction_run.h"
#include "services/reconstruction/testing/run_in_process.h"

namespace tessera::reconstruction {
namespace {

using ::tessera::testing::FreshTestDir;

constexpr int64_t kSize = 32, kSlices = 3;

struct Stack {
  std::string dir;
  recon::CtGeometry geometry;
};

// geometry.json; stack.nii.gz, slice s the phantom's expected counts (with
// slice s's attenuation) times 1 + s; mu.nii.gz (one map) and mu_stack.nii.gz
// (slice s: mu x (1 - 0.2 s)); slice<s>.nii.gz and mu<s>.nii.gz alone.
Stack WriteStack() {
  Stack c;
  c.dir = FreshTestDir("pet_stack");
  const std::string json = *recon::formats::ExampleGeometryJson("parallel", kSize);
  std::ofstream(c.dir + "/geometry.json") << json;
  c.geometry = *recon::formats::ParseGeometryJson(json);
  const recon::ProjectionGeometry& p = c.geometry.projection;
  const recon::VolumeGeometry& v = c.geometry.volume;
  const recon::phantoms::PetPhantom phantom = recon::phantoms::MakePetPhantom(0.9 * kSize, true);
  const NDArray mu = *recon::phantoms::Rasterize(phantom.attenuation, v, 2);
  EXPECT_TRUE(recon::formats::WriteVolume(mu, v, c.dir + "/mu.nii.gz").ok());
  recon::phantoms::PetSimulationOptions options;
  options.poisson = false;
  options.total_counts = 1e5;
  const recon::phantoms::PetSinogram counts = *recon::phantoms::SimulatePetSinogram(phantom, c.geometry, options);
  const int64_t n = p.sinogram_size();
  Volume stack, mu_stack;
  stack.data = *NDArray::Allocate({p.det_cols, p.num_views(), kSlices}, DType::kFloat32);
  mu_stack.data = *NDArray::Allocate({v.nx, v.ny, kSlices}, DType::kFloat32);
  for (int64_t s = 0; s < kSlices; ++s) {
    NDArray slice = *NDArray::Allocate(recon::formats::SinogramShape(p), DType::kFloat32);
    for (int64_t i = 0; i < n; ++i) slice.data<float>()[i] = (1 + s) * counts.expected.data<float>()[i];
    std::copy_n(slice.data<float>(), n, stack.data.data<float>() + s * n);
    EXPECT_TRUE(recon::formats::WriteSinogram(slice, p, c.dir + "/slice" + std::to_string(s) + ".nii.gz").ok());
    NDArray mu_s = *NDArray::Allocate({v.nx, v.ny, 1}, DType::kFloat32);
    for (int64_t i = 0; i < v.size(); ++i) mu_s.data<float>()[i] = (1 - 0.2f * s) * mu.data<float>()[i];
    std::copy_n(mu_s.data<float>(), v.size(), mu_stack.data.data<float>() + s * v.size());
    EXPECT_TRUE(recon::formats::WriteVolume(mu_s, v, c.dir + "/mu" + std::to_string(s) + ".nii.gz").ok());
  }
  EXPECT_TRUE(WriteNifti(stack, c.dir + "/stack.nii.gz").ok());
  EXPECT_TRUE(WriteNifti(mu_stack, c.dir + "/mu_stack.nii.gz").ok());
  return c;
}

using ::tessera::reconstruction::testing::InProcessRun;
using ::tessera::reconstruction::testing::RunInProcess;

InProcessRun Reconstruct(const Stack& c, const std::string& sinogram, const std::string& mu,
                   const std::string& randoms = "") {
  v1::ReconstructRequest r;
  r.mutable_geometry()->set_path(c.dir + "/geometry.json");
  r.mutable_sinogram()->set_path(c.dir + "/" + sinogram);
  r.mutable_pet()->set_method("osem");
  r.mutable_pet()->set_iterations(2);
  r.mutable_pet()->set_subsets(4);
  if (!mu.empty()) r.mutable_pet()->mutable_attenuation()->set_path(c.dir + "/" + mu);
  if (!randoms.empty()) r.mutable_pet()->mutable_randoms()->set_path(c.dir + "/" + randoms);
  r.set_device("cpu");
  return RunInProcess(r, FreshTestDir("pet_stack_work"));
}

void ExpectSlicesMatchAlone(bool mu_per_slice) {
  const Stack c = WriteStack();
  const InProcessRun stack = Reconstruct(c, "stack.nii.gz", mu_per_slice ? "mu_stack.nii.gz" : "mu.nii.gz");
  ASSERT_TRUE(stack.outcome.ok()) << stack.outcome.status();
  EXPECT_EQ(stack.outcome->result.dims(2), kSlices);
  EXPECT_EQ(stack.outcome->result.log_likelihood_size(), kSlices);
  absl::StatusOr<Volume> volume = ReadNifti(stack.work_dir + "/reconstruction.nii.gz");
  ASSERT_TRUE(volume.ok()) << volume.status();
  ASSERT_EQ(volume->data.shape(), (Shape{kSize, kSize, kSlices}));
  const int64_t pixels = kSize * kSize;
  const float* v = volume->data.data<float>();
  for (int64_t s = 0; s < kSlices; ++s) {
    const InProcessRun alone = Reconstruct(c, "slice" + std::to_string(s) + ".nii.gz",
                                     mu_per_slice ? "mu" + std::to_string(s) + ".nii.gz" : "mu.nii.gz");
    ASSERT_TRUE(alone.outcome.ok()) << alone.outcome.status();
    absl::StatusOr<Volume> image = ReadNifti(alone.work_dir + "/reconstruction.nii.gz");
    ASSERT_TRUE(image.ok()) << image.status();
    const std::vector<float> got(v + s * pixels, v + (s + 1) * pixels);
    EXPECT_EQ(got, std::vector<float>(image->data.data<float>(), image->data.data<float>() + pixels))
        << "slice " << s << (mu_per_slice ? " (a map per slice)" : "");
    if (s > 0) {
      EXPECT_NE(got, std::vector<float>(v, v + pixels)) << "slices must differ";
    }
  }
}

TEST(PetStackTest, SlicesMatchEachSliceAloneWithOneMap) { ExpectSlicesMatchAlone(false); }
TEST(PetStackTest, SlicesMatchEachSliceAloneWithAMapPerSlice) { ExpectSlicesMatchAlone(true); }

TEST(PetStackTest, StacksWithCorrectionsOrAnotherMapCountAreRefused) {
  const Stack c = WriteStack();
  InProcessRun bad = Reconstruct(c, "stack.nii.gz", "mu.nii.gz", "slice0.nii.gz");
  ASSERT_FALSE(bad.outcome.ok());
  EXPECT_EQ(bad.outcome.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.outcome.status().message().find("randoms, scatter and normalization take one 2-D sinogram"),
            std::string::npos)
      << bad.outcome.status();
  Volume two;
  two.data = *NDArray::Allocate({kSize, kSize, 2}, DType::kFloat32);
  std::fill_n(two.data.data<float>(), two.data.num_elements(), 0.001f);
  ASSERT_TRUE(WriteNifti(two, c.dir + "/mu_two.nii.gz").ok());
  bad = Reconstruct(c, "stack.nii.gz", "mu_two.nii.gz");
  ASSERT_FALSE(bad.outcome.ok());
  EXPECT_NE(bad.outcome.status().message().find("pet.attenuation"), std::string::npos) << bad.outcome.status();
}

}  // namespace
}  // namespace tessera::reconstruction
