// ct.device_memory_gib through a job (CPU backend, where an explicit budget
// bounds the stream's host memory the same way): fdk within a budget too small
// for the resident run goes out of core (slabs and chunks named in the result's
// geometry) and matches the resident volume; a budget below one slab and one
// view, and an iterative method over the budget, are RESOURCE_EXHAUSTED
// naming the sizes; bad values are INVALID_ARGUMENT naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "common/nifti_io.h"
#include "common/testing/temp_files.h"
#include "kernels/reconstruction/fbp/fdk_chunking.h"
#include "kernels/reconstruction/fbp/filter.h"
#include "services/reconstruction/ct_memory_budget.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/testing/run_in_process.h"

namespace tessera::reconstruction {
namespace {

using ::tessera::reconstruction::testing::InProcessRun;
using ::tessera::reconstruction::testing::RunInProcess;
using ::tessera::testing::FreshTestDir;

constexpr int64_t kSize = 32;
constexpr double kGib = 1024.0 * 1024.0 * 1024.0;

struct Case {
  std::string dir;
  recon::CtGeometry geometry;
};

Case WriteCone() {
  Case c;
  c.dir = FreshTestDir("ct_memory_budget");
  absl::StatusOr<std::string> json = recon::formats::ExampleGeometryJson("cone", kSize);
  EXPECT_TRUE(json.ok()) << json.status();
  std::ofstream(c.dir + "/geometry.json") << *json;
  c.geometry = *recon::formats::ParseGeometryJson(*json);
  absl::StatusOr<NDArray> sinogram =
      recon::phantoms::AnalyticSinogram(recon::phantoms::SheppLogan3D(0.9 * kSize, 0.9 * kSize), c.geometry, 1);
  EXPECT_TRUE(sinogram.ok()) << sinogram.status();
  EXPECT_TRUE(recon::formats::WriteSinogram(*sinogram, c.geometry.projection, c.dir + "/sinogram.nii.gz").ok());
  return c;
}

v1::ReconstructRequest Request(const Case& c, const std::string& method, double gib, int iterations = 0) {
  v1::ReconstructRequest r;
  r.mutable_geometry()->set_path(c.dir + "/geometry.json");
  r.mutable_sinogram()->set_path(c.dir + "/sinogram.nii.gz");
  r.mutable_ct()->set_method(method);
  r.mutable_ct()->set_iterations(iterations);
  if (gib >= 0) r.mutable_ct()->set_device_memory_gib(gib);
  r.set_device("cpu");
  return r;
}

std::vector<float> VolumeOf(const InProcessRun& run) {
  absl::StatusOr<Volume> v = ReadNifti(run.work_dir + "/reconstruction.nii.gz");
  EXPECT_TRUE(v.ok()) << v.status();
  if (!v.ok()) return {};
  return std::vector<float>(v->data.data<float>(), v->data.data<float>() + v->data.num_elements());
}

// The CPU model's bytes for slabs of 8 planes and 8 views of every row.
double SlabBudgetGib(const recon::CtGeometry& g) {
  recon::fbp::FdkChunkInput in;
  in.nx = g.volume.nx;
  in.ny = g.volume.ny;
  in.nz = g.volume.nz;
  in.views = g.projection.num_views();
  in.cols = in.input_cols = g.projection.det_cols;
  in.rows = g.projection.det_rows;
  in.padded = recon::fbp::PaddedLength(in.cols);
  in.texture = false;
  in.fixed_allowance_bytes = 0;
  return static_cast<double>(recon::fbp::FdkDeviceBytes(in, 8, in.rows, 8)) / kGib;
}

TEST(CtMemoryBudgetTest, FdkGoesOutOfCoreWithinASmallBudget) {
  const Case c = WriteCone();
  const InProcessRun resident = RunInProcess(Request(c, "fdk", -1), FreshTestDir("budget_resident"));
  ASSERT_TRUE(resident.outcome.ok()) << resident.outcome.status();
  EXPECT_EQ(resident.outcome->result.geometry().find("out of core"), std::string::npos);
  const InProcessRun streamed = RunInProcess(Request(c, "fdk", SlabBudgetGib(c.geometry)), FreshTestDir("budget_ooc"));
  ASSERT_TRUE(streamed.outcome.ok()) << streamed.outcome.status();
  const std::string& geometry = streamed.outcome->result.geometry();
  EXPECT_NE(geometry.find("out of core"), std::string::npos) << geometry;
  EXPECT_EQ(geometry.find("out of core: 1 slab(s)"), std::string::npos) << geometry;  // several slabs
  const std::vector<float> a = VolumeOf(resident), b = VolumeOf(streamed);
  ASSERT_EQ(a.size(), b.size());
  float peak = 0, worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    peak = std::max(peak, std::fabs(a[i]));
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  EXPECT_GT(peak, 0.5f);
  EXPECT_LE(worst, 1e-5f * peak);  // the batches differ: only the order of the float sums
  // A budget the resident run fits stays resident.
  const InProcessRun roomy = RunInProcess(Request(c, "fdk", 1.0), FreshTestDir("budget_roomy"));
  ASSERT_TRUE(roomy.outcome.ok()) << roomy.outcome.status();
  EXPECT_EQ(roomy.outcome->result.volume_sha256(), resident.outcome->result.volume_sha256());
}

TEST(CtMemoryBudgetTest, TooSmallBudgetsAreResourceExhausted) {
  const Case c = WriteCone();
  const InProcessRun tiny = RunInProcess(Request(c, "fdk", 1e-6), FreshTestDir("budget_tiny"));
  ASSERT_FALSE(tiny.outcome.ok());
  EXPECT_EQ(tiny.outcome.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(tiny.outcome.status().message().find("8 planes of 32 x 32 voxels"), std::string::npos)
      << tiny.outcome.status();
  for (const std::string method : {"cgls", "sart", "os-sart"}) {
    const InProcessRun run = RunInProcess(Request(c, method, 1e-4, 2), FreshTestDir("budget_" + method));
    ASSERT_FALSE(run.outcome.ok()) << method;
    EXPECT_EQ(run.outcome.status().code(), absl::StatusCode::kResourceExhausted) << method;
    EXPECT_NE(run.outcome.status().message().find("ct.device_memory_gib: " + method + " keeps the volume (32 x 32 x 32"),
              std::string::npos)
        << run.outcome.status();
  }
  // Within a budget that holds them they run.
  const InProcessRun cgls = RunInProcess(Request(c, "cgls", 1.0, 2), FreshTestDir("budget_cgls_ok"));
  EXPECT_TRUE(cgls.outcome.ok()) << cgls.outcome.status();
}

TEST(CtMemoryBudgetTest, BadValuesNameTheField) {
  const Case c = WriteCone();
  for (double bad : {-1.0, std::nan(""), 1e9, static_cast<double>(INFINITY)}) {
    const InProcessRun run = RunInProcess(Request(c, "fdk", 0), FreshTestDir("budget_bad"));
    ASSERT_TRUE(run.outcome.ok()) << run.outcome.status();  // 0: no budget on the CPU
    v1::ReconstructRequest r = Request(c, "fdk", 0);
    r.mutable_ct()->set_device_memory_gib(bad);
    const InProcessRun refused = RunInProcess(r, FreshTestDir("budget_bad"));
    ASSERT_FALSE(refused.outcome.ok()) << bad;
    EXPECT_EQ(refused.outcome.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.outcome.status().message().find("ct.device_memory_gib"), std::string::npos)
        << refused.outcome.status();
  }
}

TEST(CtMemoryBudgetTest, IterativeEstimateCountsVolumeProjectionsAndScratch) {
  recon::CtGeometry g;
  g.volume = recon::CenteredVolume(64, 64, 64);
  g.projection = recon::ConeBeam(recon::EvenAngles(90, 6.283185307179586), 1, 1, 96, 96, 200, 100);
  const int64_t n = g.volume.size() * 4, m = g.projection.sinogram_size() * 4;
  for (CtMethod method : {CtMethod::kSart, CtMethod::kCgls, CtMethod::kFistaTv, CtMethod::kAsdPocs}) {
    EXPECT_GT(CtIterativeDeviceBytes(method, g, 1, 1), 2 * (n + m)) << CtMethodName(method);
  }
  EXPECT_GT(CtIterativeDeviceBytes(CtMethod::kOsSart, g, 1, 10), CtIterativeDeviceBytes(CtMethod::kSart, g, 1, 1));
  EXPECT_TRUE(CheckCtIterativeBudget(CtMethod::kCgls, g, 1, 1, 0).ok());  // no budget
  EXPECT_GT(FreeMemoryMargin(int64_t{80} << 30), int64_t{512} << 20);
}

}  // namespace
}  // namespace tessera::reconstruction
