// ct.method fista-tv and asd-pocs through the engine (issue 36): a 48^2
// parallel-beam Shepp-Logan from 30 exact views runs with the defaults
// (fista-tv 50 iterations; asd-pocs at most 20 OS-ASD-POCS iterations on 10
// subsets), reports per-iteration progress and residuals, and lands closer
// to the data than where it started; a two-slice stack equals each slice
// alone; a limited-angle scan (which FBP refuses) runs; the tv_* fields are refused outside these methods or out of range,
// naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/nifti_io.h"
#include "common/testing/temp_files.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/testing/run_in_process.h"

namespace tessera::reconstruction {
namespace {

using ::tessera::reconstruction::testing::InProcessRun;
using ::tessera::reconstruction::testing::RunInProcess;
using ::tessera::testing::FreshTestDir;

constexpr int64_t kSize = 48, kViews = 30;

// geometry.json, sinogram.nii.gz and a two-slice stack (slice 1 = 2 x slice 0).
std::string WriteCase() {
  const std::string dir = FreshTestDir("ct_tv_case");
  absl::StatusOr<std::string> json = recon::formats::ExampleGeometryJson("parallel", kSize, kViews);
  EXPECT_TRUE(json.ok()) << json.status();
  std::ofstream(dir + "/geometry.json") << *json;
  const recon::CtGeometry g = *recon::formats::ParseGeometryJson(*json);
  absl::StatusOr<NDArray> sinogram =
      recon::phantoms::AnalyticSinogram(recon::phantoms::SheppLogan2D(0.9 * kSize), g, 2);
  EXPECT_TRUE(sinogram.ok()) << sinogram.status();
  EXPECT_TRUE(recon::formats::WriteSinogram(*sinogram, g.projection, dir + "/sinogram.nii.gz").ok());
  const int64_t n = g.projection.sinogram_size();
  Volume stack;
  stack.data = *NDArray::Allocate({g.projection.det_cols, g.projection.num_views(), 2}, DType::kFloat32);
  for (int64_t i = 0; i < n; ++i) {
    stack.data.data<float>()[i] = sinogram->data<float>()[i];
    stack.data.data<float>()[n + i] = 2 * sinogram->data<float>()[i];
  }
  EXPECT_TRUE(WriteNifti(stack, dir + "/stack.nii.gz").ok());
  NDArray twice = *NDArray::Allocate(recon::formats::SinogramShape(g.projection), DType::kFloat32);
  for (int64_t i = 0; i < n; ++i) twice.data<float>()[i] = 2 * sinogram->data<float>()[i];
  EXPECT_TRUE(recon::formats::WriteSinogram(twice, g.projection, dir + "/twice.nii.gz").ok());
  return dir;
}

v1::ReconstructRequest Request(const std::string& dir, const std::string& method, const std::string& sinogram) {
  v1::ReconstructRequest r;
  r.mutable_geometry()->set_path(dir + "/geometry.json");
  r.mutable_sinogram()->set_path(dir + "/" + sinogram);
  r.mutable_ct()->set_method(method);
  r.set_device("cpu");
  return r;
}

const std::string& CaseDir() {
  static const std::string* dir = new std::string(WriteCase());
  return *dir;
}

TEST(CtTvRunTest, FistaTvRunsWithItsDefaults) {
  const InProcessRun run = RunInProcess(Request(CaseDir(), "fista-tv", "sinogram.nii.gz"), FreshTestDir("ct_tv_f"));
  ASSERT_TRUE(run.outcome.ok()) << run.outcome.status();
  const v1::ReconstructionResult& result = run.outcome->result;
  EXPECT_EQ(result.method(), "fista-tv");
  EXPECT_EQ(result.iterations(), 50);
  ASSERT_EQ(result.residual_norms_size(), 50);
  EXPECT_LT(result.residual_norms(49), 0.2 * result.residual_norms(0));
  EXPECT_NE(std::find(run.messages.begin(), run.messages.end(),
                      "fista-tv: iteration 50 of 50, ||Ax - y|| = " +
                          absl::StrFormat("%.6g", result.residual_norms(49))),
            run.messages.end());
}

TEST(CtTvRunTest, AsdPocsRunsOnTenSubsetsByDefault) {
  v1::ReconstructRequest r = Request(CaseDir(), "asd-pocs", "sinogram.nii.gz");
  const InProcessRun run = RunInProcess(r, FreshTestDir("ct_tv_a"));
  ASSERT_TRUE(run.outcome.ok()) << run.outcome.status();
  const v1::ReconstructionResult& result = run.outcome->result;
  EXPECT_GE(result.iterations(), 2);
  EXPECT_LE(result.iterations(), 20);
  ASSERT_EQ(result.residual_norms_size(), result.iterations());
  EXPECT_LT(result.residual_norms(result.iterations() - 1), result.residual_norms(0));
  absl::StatusOr<Volume> volume = ReadNifti(run.work_dir + "/reconstruction.nii.gz");
  ASSERT_TRUE(volume.ok()) << volume.status();
  float lowest = 0;
  for (int64_t i = 0; i < volume->data.num_elements(); ++i) lowest = std::min(lowest, volume->data.data<float>()[i]);
  // Positivity is applied before the TV steps, which move voxels by at most
  // a small step each: nothing far below 0.
  EXPECT_GT(lowest, -0.05f);
}

TEST(CtTvRunTest, StackSlicesEqualEachSliceAlone) {
  for (const char* method : {"fista-tv", "asd-pocs"}) {
    v1::ReconstructRequest r = Request(CaseDir(), method, "stack.nii.gz");
    r.mutable_ct()->set_iterations(5);
    const InProcessRun stack = RunInProcess(r, FreshTestDir("ct_tv_s"));
    ASSERT_TRUE(stack.outcome.ok()) << stack.outcome.status();
    r.mutable_sinogram()->set_path(CaseDir() + "/twice.nii.gz");
    const InProcessRun alone = RunInProcess(r, FreshTestDir("ct_tv_s1"));
    ASSERT_TRUE(alone.outcome.ok()) << alone.outcome.status();
    absl::StatusOr<Volume> s = ReadNifti(stack.work_dir + "/reconstruction.nii.gz");
    absl::StatusOr<Volume> a = ReadNifti(alone.work_dir + "/reconstruction.nii.gz");
    ASSERT_TRUE(s.ok() && a.ok());
    const int64_t pixels = kSize * kSize;
    const std::vector<float> got(s->data.data<float>() + pixels, s->data.data<float>() + 2 * pixels);
    const std::vector<float> want(a->data.data<float>(), a->data.data<float>() + pixels);
    EXPECT_EQ(got, want) << method;
  }
}

// 30 views over 120 degrees: FBP refuses it, so asd-pocs runs without a data
// tolerance (0) instead of failing; fista-tv needs none.
TEST(CtTvRunTest, LimitedAngleRuns) {
  const std::string dir = FreshTestDir("ct_tv_limited");
  std::string angles;
  for (int v = 0; v < kViews; ++v) absl::StrAppend(&angles, v ? ", " : "", v * (2 * M_PI / 3) / kViews);
  const std::string json = absl::StrCat(R"({"vol_geom": {"GridColCount": )", kSize, R"(, "GridRowCount": )", kSize,
                                        R"(}, "proj_geom": {"type": "parallel", "DetectorWidth": 1.0, )",
                                        R"("DetectorCount": 72, "ProjectionAngles": [)", angles, "]}}");
  std::ofstream(dir + "/geometry.json") << json;
  const recon::CtGeometry g = *recon::formats::ParseGeometryJson(json);
  absl::StatusOr<NDArray> sinogram =
      recon::phantoms::AnalyticSinogram(recon::phantoms::SheppLogan2D(0.9 * kSize), g, 2);
  ASSERT_TRUE(sinogram.ok()) << sinogram.status();
  ASSERT_TRUE(recon::formats::WriteSinogram(*sinogram, g.projection, dir + "/sinogram.nii.gz").ok());
  EXPECT_FALSE(RunInProcess(Request(dir, "fbp", "sinogram.nii.gz"), FreshTestDir("ct_tv_l0")).outcome.ok());
  for (const char* method : {"asd-pocs", "fista-tv"}) {
    v1::ReconstructRequest r = Request(dir, method, "sinogram.nii.gz");
    r.mutable_ct()->set_iterations(8);
    const InProcessRun run = RunInProcess(r, FreshTestDir("ct_tv_l1"));
    ASSERT_TRUE(run.outcome.ok()) << method << ": " << run.outcome.status();
    const v1::ReconstructionResult& result = run.outcome->result;
    ASSERT_GE(result.residual_norms_size(), 2) << method;
    EXPECT_LT(result.residual_norms(result.residual_norms_size() - 1), result.residual_norms(0)) << method;
  }
}

TEST(CtTvRunTest, TvFieldsAreCheckedNamingTheField) {
  auto refused = [](v1::ReconstructRequest r, const std::string& field) {
    const InProcessRun run = RunInProcess(r, FreshTestDir("ct_tv_bad"));
    ASSERT_FALSE(run.outcome.ok()) << field;
    EXPECT_EQ(run.outcome.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(run.outcome.status().message().find(field), std::string::npos) << run.outcome.status();
  };
  v1::ReconstructRequest r = Request(CaseDir(), "sart", "sinogram.nii.gz");
  r.mutable_ct()->set_tv_weight(0.01);
  refused(r, "ct.tv_weight");
  r = Request(CaseDir(), "cgls", "sinogram.nii.gz");
  r.mutable_ct()->set_tv_iterations(5);
  refused(r, "ct.tv_iterations");
  for (double bad : {0.0, -1.0, std::nan("")}) {
    r = Request(CaseDir(), "fista-tv", "sinogram.nii.gz");
    r.mutable_ct()->set_tv_weight(bad);
    refused(r, "ct.tv_weight");
  }
  r = Request(CaseDir(), "asd-pocs", "sinogram.nii.gz");
  r.mutable_ct()->set_tv_iterations(-3);
  refused(r, "ct.tv_iterations");
  r = Request(CaseDir(), "fista-tv", "sinogram.nii.gz");
  r.mutable_ct()->set_subsets(4);
  refused(r, "ct.subsets");
}

}  // namespace
}  // namespace tessera::reconstruction
