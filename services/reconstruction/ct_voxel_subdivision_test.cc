// ct.voxel_subdivision through the engine (issue 36): an iterative method
// asked for a 2x finer grid returns exactly what the same method returns on
// a vol_geom twice as fine over the same window, block-averaged 2 x 2 (so the
// option is geometry plus an average, nothing else); a stack's slices each
// start from zero; on exact sparse-view data the finer grid brings fista-tv
// closer to the pixel-averaged phantom; bad values and a finer grid over the
// device budget are refused naming the field.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/temp_files.h"
#include "kernels/reconstruction/grid_subdivision.h"
#include "services/reconstruction/ct_memory_budget.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/testing/ct_phantom_files.h"
#include "services/reconstruction/testing/run_in_process.h"

namespace tessera::reconstruction {
namespace {

using ::tessera::reconstruction::testing::CtPhantomFiles;
using ::tessera::reconstruction::testing::InProcessRun;
using ::tessera::reconstruction::testing::Nrmse;
using ::tessera::reconstruction::testing::RunInProcess;
using ::tessera::testing::FreshTestDir;

constexpr int64_t kSize = 40, kViews = 24;

// The case, plus fine.json: the same window at 2x.
const CtPhantomFiles& TheCase() {
  static const CtPhantomFiles* c = [] {
    auto* files = new CtPhantomFiles(testing::WriteCtPhantomFiles("ct_subdivision_case", kSize, kViews));
    absl::StatusOr<recon::CtGeometry> fine = recon::SubdividedGeometry(files->geometry, 2);
    EXPECT_TRUE(fine.ok()) << fine.status();
    EXPECT_TRUE(recon::formats::WriteGeometryJsonFile(*fine, files->dir + "/fine.json").ok());
    return files;
  }();
  return *c;
}

v1::ReconstructRequest Request(const std::string& geometry, const std::string& method, int iterations,
                               int subdivision, const std::string& sinogram = "sinogram.nii.gz") {
  v1::ReconstructRequest r = testing::CtRequest(TheCase().dir, geometry, sinogram, method, iterations, "cpu");
  r.mutable_ct()->set_voxel_subdivision(subdivision);
  return r;
}

std::vector<float> Reconstruct(const v1::ReconstructRequest& r, std::string* geometry_text = nullptr) {
  return testing::ReconstructToVector(r, geometry_text);
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
