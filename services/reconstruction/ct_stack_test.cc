// CT sinogram stacks (issue 40): a 2-D geometry with a NIfTI sinogram of
// (cols, projections, slices) is reconstructed in one job into nx x ny x
// slices, each slice bit-identical (CPU) to the same sinogram reconstructed
// alone, for fbp (parallel and fan) and cgls; the volume's affine stacks the
// slices along z around the 2-D slab's centre; progress per slice; stacks
// that do not fit the geometry are refused at submit naming the shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/nifti_io.h"
#include "common/testing/temp_files.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/reconstruction_run.h"
#include "services/reconstruction/testing/run_in_process.h"

namespace tessera::reconstruction {
namespace {

using ::tessera::testing::FreshTestDir;
namespace fs = std::filesystem;

constexpr int64_t kSize = 48, kSlices = 3;

struct Stack {
  std::string dir;
  recon::CtGeometry geometry;
};

// geometry.json, stack.nii.gz (slice s: the Shepp-Logan's exact sinogram
// scaled by 1 + s, plus a ramp along the columns times s, so slices differ
// in shape too) and slice<s>.nii.gz, each slice alone.
Stack WriteStack(const std::string& type) {
  Stack c;
  c.dir = FreshTestDir("ct_stack_" + type);
  absl::StatusOr<std::string> json = recon::formats::ExampleGeometryJson(type, kSize);
  EXPECT_TRUE(json.ok()) << json.status();
  std::ofstream(c.dir + "/geometry.json") << *json;
  c.geometry = *recon::formats::ParseGeometryJson(*json);
  const recon::ProjectionGeometry& p = c.geometry.projection;
  absl::StatusOr<NDArray> one =
      recon::phantoms::AnalyticSinogram(recon::phantoms::SheppLogan2D(0.9 * kSize), c.geometry, 2);
  EXPECT_TRUE(one.ok()) << one.status();
  const int64_t n = p.sinogram_size();
  Volume stack;
  stack.data = *NDArray::Allocate({p.det_cols, p.num_views(), kSlices}, DType::kFloat32);
  for (int64_t s = 0; s < kSlices; ++s) {
    NDArray slice = *NDArray::Allocate(recon::formats::SinogramShape(p), DType::kFloat32);
    for (int64_t i = 0; i < n; ++i) {
      slice.data<float>()[i] = (1 + s) * one->data<float>()[i] + 0.01f * s * static_cast<float>(i % p.det_cols);
    }
    std::copy_n(slice.data<float>(), n, stack.data.data<float>() + s * n);
    EXPECT_TRUE(recon::formats::WriteSinogram(slice, p, c.dir + "/slice" + std::to_string(s) + ".nii.gz").ok());
  }
  EXPECT_TRUE(WriteNifti(stack, c.dir + "/stack.nii.gz").ok());
  return c;
}

using ::tessera::reconstruction::testing::InProcessRun;
using ::tessera::reconstruction::testing::RunInProcess;

InProcessRun Reconstruct(const Stack& c, const std::string& sinogram, const std::string& method,
                         int iterations = 0) {
  v1::ReconstructRequest r;
  r.mutable_geometry()->set_path(c.dir + "/geometry.json");
  r.mutable_sinogram()->set_path(c.dir + "/" + sinogram);
  r.mutable_ct()->set_method(method);
  r.mutable_ct()->set_iterations(iterations);
  r.set_device("cpu");
  return RunInProcess(r, FreshTestDir("ct_stack_work_" + method));
}

void ExpectSlicesMatchAlone(const std::string& type, const std::string& method, int iterations) {
  const Stack c = WriteStack(type);
  const InProcessRun stack = Reconstruct(c, "stack.nii.gz", method, iterations);
  ASSERT_TRUE(stack.outcome.ok()) << stack.outcome.status();
  const v1::ReconstructionResult& result = stack.outcome->result;
  ASSERT_EQ(result.dims_size(), 3);
  EXPECT_EQ(result.dims(2), kSlices);
  EXPECT_NE(result.geometry().find("a stack of 3 slices"), std::string::npos) << result.geometry();
  EXPECT_EQ(std::count(stack.messages.begin(), stack.messages.end(), method + ": slice 3 of 3 done"), 1);
  absl::StatusOr<Volume> volume = ReadNifti(stack.work_dir + "/reconstruction.nii.gz");
  ASSERT_TRUE(volume.ok()) << volume.status();
  ASSERT_EQ(volume->data.shape(), (Shape{kSize, kSize, kSlices}));
  // Slices 1 mm apart (the 2-D slab's thickness), centred on the slab (z = 0).
  EXPECT_NEAR(volume->geometry.origin[2], -1.0, 1e-6);
  EXPECT_NEAR(volume->geometry.spacing[2], 1.0, 1e-6);
  const int64_t pixels = kSize * kSize;
  const float* v = volume->data.data<float>();
  for (int64_t s = 0; s < kSlices; ++s) {
    const InProcessRun alone = Reconstruct(c, "slice" + std::to_string(s) + ".nii.gz", method, iterations);
    ASSERT_TRUE(alone.outcome.ok()) << alone.outcome.status();
    absl::StatusOr<Volume> image = ReadNifti(alone.work_dir + "/reconstruction.nii.gz");
    ASSERT_TRUE(image.ok()) << image.status();
    const std::vector<float> got(v + s * pixels, v + (s + 1) * pixels);
    const std::vector<float> want(image->data.data<float>(), image->data.data<float>() + pixels);
    EXPECT_EQ(got, want) << type << " " << method << " slice " << s;
    if (s > 0) {
      EXPECT_NE(got, std::vector<float>(v, v + pixels)) << "slices must differ";
    }
  }
}

TEST(CtStackTest, ParallelFbpSlicesMatchEachSliceAlone) { ExpectSlicesMatchAlone("parallel", "fbp", 0); }
TEST(CtStackTest, FanFbpSlicesMatchEachSliceAlone) { ExpectSlicesMatchAlone("fanflat", "fbp", 0); }
TEST(CtStackTest, CglsSlicesMatchEachSliceAlone) { ExpectSlicesMatchAlone("parallel", "cgls", 4); }

TEST(CtStackTest, StacksThatDoNotFitAreRefused) {
  const Stack c = WriteStack("parallel");
  const recon::ProjectionGeometry& p = c.geometry.projection;
  Volume wrong;  // one column short
  wrong.data = *NDArray::Allocate({p.det_cols - 1, p.num_views(), kSlices}, DType::kFloat32);
  std::fill_n(wrong.data.data<float>(), wrong.data.num_elements(), 1.0f);
  ASSERT_TRUE(WriteNifti(wrong, c.dir + "/wrong.nii.gz").ok());
  const InProcessRun run = Reconstruct(c, "wrong.nii.gz", "fbp");
  ASSERT_FALSE(run.outcome.ok());
  EXPECT_EQ(run.outcome.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(run.outcome.status().message().find("(x slices)"), std::string::npos) << run.outcome.status();
  // A NaN in slice 2 names the slice.
  absl::StatusOr<Volume> stack = ReadNifti(c.dir + "/stack.nii.gz");
  ASSERT_TRUE(stack.ok());
  stack->data.data<float>()[2 * p.sinogram_size() + 5] = NAN;
  ASSERT_TRUE(WriteNifti(*stack, c.dir + "/nan.nii.gz").ok());
  const InProcessRun with_nan = Reconstruct(c, "nan.nii.gz", "fbp");
  ASSERT_FALSE(with_nan.outcome.ok());
  EXPECT_NE(with_nan.outcome.status().message().find("slice 2"), std::string::npos) << with_nan.outcome.status();
}

}  // namespace
}  // namespace tessera::reconstruction
