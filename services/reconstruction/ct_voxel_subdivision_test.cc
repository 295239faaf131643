// ct.voxel_subdivision through the engine (issue 36): an iterative method
// asked for a 2x finer grid returns exactly what the same method returns on
// a vol_geom twice as fine over the same window, block-averaged 2 x 2 (so the
// option is geometry plus an average, nothing else); a stack's slices each
// start from zero; on exact sparse-view data the finer grid brings fista-tv
// closer to the pixel-averaged phantom; bad values and a finer grid over the
// device budget are refused naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/nifti_io.h"
#include "common/testing/temp_files.h"
#include "kernels/reconstruction/grid_subdivision.h"
#include "services/reconstruction/ct_memory_budget.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/phantoms/rasterize.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/testing/run_in_process.h"

namespace tessera::reconstruction {
namespace {

using ::tessera::reconstruction::testing::InProcessRun;
using ::tessera::reconstruction::testing::RunInProcess;
using ::tessera::testing::FreshTestDir;

constexpr int64_t kSize = 40, kViews = 24;

struct Case {
  std::string dir;
  recon::CtGeometry geometry;
  std::vector<float> truth;  // the phantom averaged over each output pixel
};

// geometry.json (kSize^2 of 1 mm), fine.json (the same window at 2x), exact
// detector-cell averages of a Shepp-Logan in sinogram.nii.gz and a two-slice
// stack (slice 1 = 2 x slice 0) in stack.nii.gz.
Case MakeCase() {
  Case c;
  c.dir = FreshTestDir("ct_subdivision_case");
  absl::StatusOr<std::string> json = recon::formats::ExampleGeometryJson("parallel", kSize, kViews);
  EXPECT_TRUE(json.ok()) << json.status();
  std::ofstream(c.dir + "/geometry.json") << *json;
  c.geometry = *recon::formats::ParseGeometryJson(*json);
  absl::StatusOr<recon::CtGeometry> fine = recon::SubdividedGeometry(c.geometry, 2);
  EXPECT_TRUE(fine.ok()) << fine.status();
  EXPECT_TRUE(recon::formats::WriteGeometryJsonFile(*fine, c.dir + "/fine.json").ok());
  const recon::phantoms::Phantom phantom = recon::phantoms::SheppLogan2D(0.9 * kSize);
  absl::StatusOr<NDArray> sinogram = recon::phantoms::AnalyticSinogram(phantom, c.geometry, 4);
  EXPECT_TRUE(sinogram.ok()) << sinogram.status();
  EXPECT_TRUE(recon::formats::WriteSinogram(*sinogram, c.geometry.projection, c.dir + "/sinogram.nii.gz").ok());
  const int64_t n = c.geometry.projection.sinogram_size();
  Volume stack;
  stack.data = *NDArray::Allocate({c.geometry.projection.det_cols, c.geometry.projection.num_views(), 2},
                                  DType::kFloat32);
  for (int64_t i = 0; i < n; ++i) {
    stack.data.data<float>()[i] = sinogram->data<float>()[i];
    stack.data.data<float>()[n + i] = 2 * sinogram->data<float>()[i];
  }
  EXPECT_TRUE(WriteNifti(stack, c.dir + "/stack.nii.gz").ok());
  absl::StatusOr<NDArray> truth = recon::phantoms::Rasterize(phantom, c.geometry.volume, 4);
  EXPECT_TRUE(truth.ok()) << truth.status();
  c.truth.assign(truth->data<float>(), truth->data<float>() + truth->num_elements());
  return c;
}

const Case& TheCase() {
  static const Case* c = new Case(MakeCase());
  return *c;
}

v1::ReconstructRequest Request(const std::string& geometry, const std::string& method, int iterations,
                               int subdivision, const std::string& sinogram = "sinogram.nii.gz") {
  v1::ReconstructRequest r;
  r.mutable_geometry()->set_path(TheCase().dir + "/" + geometry);
  r.mutable_sinogram()->set_path(TheCase().dir + "/" + sinogram);
  r.mutable_ct()->set_method(method);
  r.mutable_ct()->set_iterations(iterations);
  r.mutable_ct()->set_voxel_subdivision(subdivision);
  r.set_device("cpu");
  return r;
}

std::vector<float> Reconstruct(const v1::ReconstructRequest& r, std::string* geometry_text = nullptr) {
  const InProcessRun run = RunInProcess(r, FreshTestDir("ct_subdivision_run"));
  EXPECT_TRUE(run.outcome.ok()) << run.outcome.status();
  if (!run.outcome.ok()) return {};
  if (geometry_text != nullptr) *geometry_text = run.outcome->result.geometry();
  absl::StatusOr<Volume> v = ReadNifti(run.work_dir + "/reconstruction.nii.gz");
  EXPECT_TRUE(v.ok()) << v.status();
  if (!v.ok()) return {};
  return std::vector<float>(v->data.data<float>(), v->data.data<float>() + v->data.num_elements());
}

double Nrmse(const std::vector<float>& x, const std::vector<float>& truth) {
  double num = 0, den = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    num += (double{x[i]} - truth[i]) * (double{x[i]} - truth[i]);
    den += double{truth[i]} * truth[i];
  }
  return std::sqrt(num / den);
}

TEST(CtVoxelSubdivisionTest, IsTheMethodOnTheFinerGridBlockAveraged) {
  const recon::BlockShape blocks = recon::SubdivisionBlocks(TheCase().geometry, 2);
  for (const char* method : {"sart", "os-sart", "cgls", "fista-tv", "asd-pocs"}) {
    std::string text;
    const std::vector<float> got = Reconstruct(Request("geometry.json", method, 4, 2), &text);
    const std::vector<float> fine = Reconstruct(Request("fine.json", method, 4, 1));
    ASSERT_EQ(got.size(), static_cast<size_t>(kSize * kSize)) << method;
    ASSERT_EQ(fine.size(), static_cast<size_t>(4 * kSize * kSize)) << method;
    std::vector<float> want(got.size());
    ASSERT_TRUE(recon::BlockAverage(Stream::Cpu(), fine.data(), blocks, want.data()).ok());
    EXPECT_EQ(got, want) << method;
    EXPECT_NE(text.find("solved on a 2x finer grid (80x80x1), block-averaged"), std::string::npos) << text;
  }
}

TEST(CtVoxelSubdivisionTest, OneAndZeroAreTheOutputGrid) {
  const std::vector<float> plain = Reconstruct(Request("geometry.json", "sart", 3, 0));
  EXPECT_EQ(Reconstruct(Request("geometry.json", "sart", 3, 1)), plain);
  EXPECT_NE(Reconstruct(Request("geometry.json", "sart", 3, 2)), plain);
}

TEST(CtVoxelSubdivisionTest, StackSlicesEachStartFromZero) {
  const std::vector<float> stack = Reconstruct(Request("geometry.json", "cgls", 4, 2, "stack.nii.gz"));
  const std::vector<float> alone = Reconstruct(Request("geometry.json", "cgls", 4, 2));
  ASSERT_EQ(stack.size(), 2 * alone.size());
  const std::vector<float> first(stack.begin(), stack.begin() + alone.size());
  EXPECT_EQ(first, alone);
  // CGLS from 0 is linear in the data: slice 1 (2 x the data) is 2 x slice 0.
  for (size_t i = 0; i < alone.size(); ++i) EXPECT_NEAR(stack[alone.size() + i], 2 * alone[i], 1e-4) << i;
}

// Exact line integrals (detector cells averaged over 4 rays) of a phantom
// with sub-pixel edges: the 1-pixel model cannot fit them; the 2x grid can
// fit them better, and its block average lands closer to the pixel averages.
TEST(CtVoxelSubdivisionTest, FinerGridLowersFistaTvErrorOnExactData) {
  const double native = Nrmse(Reconstruct(Request("geometry.json", "fista-tv", 80, 1)), TheCase().truth);
  const double finer = Nrmse(Reconstruct(Request("geometry.json", "fista-tv", 80, 2)), TheCase().truth);
  std::printf("fista-tv 80 it NRMSE: native %.4f, 2x grid %.4f\n", native, finer);
  EXPECT_LT(finer, 0.85 * native);
}

TEST(CtVoxelSubdivisionTest, BadValuesAreRefusedNamingTheField) {
  for (const auto& [method, value] : {std::pair<const char*, int>{"sart", -1}, {"fista-tv", 65}, {"fbp", 2}, {"", 2}}) {
    const InProcessRun run = RunInProcess(Request("geometry.json", method, 0, value), FreshTestDir("ct_sub_bad"));
    ASSERT_FALSE(run.outcome.ok()) << method << " " << value;
    EXPECT_EQ(run.outcome.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(run.outcome.status().message().find("ct.voxel_subdivision"), std::string::npos)
        << run.outcome.status();
  }
}

// A budget that holds the job on its own grid but not on the 4x finer one.
TEST(CtVoxelSubdivisionTest, FinerGridOverTheDeviceBudgetIsRefused) {
  const recon::CtGeometry& g = TheCase().geometry;
  const recon::CtGeometry fine = *recon::SubdividedGeometry(g, 4);
  const int64_t native = CtIterativeDeviceBytes(CtMethod::kCgls, g, 1, 1);
  const int64_t finer = CtIterativeDeviceBytes(CtMethod::kCgls, g, 1, 1, &fine);
  ASSERT_LT(native, finer);
  v1::ReconstructRequest r = Request("geometry.json", "cgls", 2, 4);
  r.mutable_ct()->set_device_memory_gib(0.5 * static_cast<double>(native + finer) / (int64_t{1} << 30));
  const InProcessRun refused = RunInProcess(r, FreshTestDir("ct_sub_budget"));
  ASSERT_FALSE(refused.outcome.ok());
  EXPECT_EQ(refused.outcome.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.outcome.status().message().find("finer grid of 160 x 160 x 1 (ct.voxel_subdivision)"),
            std::string::npos)
      << refused.outcome.status();
  r.mutable_ct()->set_voxel_subdivision(1);
  EXPECT_TRUE(RunInProcess(r, FreshTestDir("ct_sub_budget1")).outcome.ok());
}

}  // namespace
}  // namespace tessera::reconstruction
