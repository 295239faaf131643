#include "services/reconstruction/testing/ct_phantom_files.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "common/nifti_io.h"
#include "common/testing/temp_files.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/phantoms/rasterize.h"
#include "services/reconstruction/testing/run_in_process.h"

namespace tessera::reconstruction::testing {

CtPhantomFiles WriteCtPhantomFiles(const std::string& name, int64_t size, int64_t views) {
  CtPhantomFiles c;
  c.dir = ::tessera::testing::FreshTestDir(name);
  absl::StatusOr<std::string> json = recon::formats::ExampleGeometryJson("parallel", size, views);
  EXPECT_TRUE(json.ok()) << json.status();
  if (!json.ok()) return c;
  std::ofstream(c.dir + "/geometry.json") << *json;
  c.geometry = *recon::formats::ParseGeometryJson(*json);
  const recon::phantoms::Phantom phantom = recon::phantoms::SheppLogan2D(0.9 * size);
  absl::StatusOr<NDArray> sinogram = recon::phantoms::AnalyticSinogram(phantom, c.geometry, 4);
  EXPECT_TRUE(sinogram.ok()) << sinogram.status();
  if (!sinogram.ok()) return c;
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
  if (truth.ok()) c.truth.assign(truth->data<float>(), truth->data<float>() + truth->num_elements());
  return c;
}

v1::ReconstructRequest CtRequest(const std::string& dir, const std::string& geometry, const std::string& sinogram,
                                 const std::string& method, int iterations, const std::string& device) {
  v1::ReconstructRequest r;
  r.mutable_geometry()->set_path(dir + "/" + geometry);
  r.mutable_sinogram()->set_path(dir + "/" + sinogram);
  r.mutable_ct()->set_method(method);
  r.mutable_ct()->set_iterations(iterations);
  r.set_device(device);
  return r;
}

std::vector<float> ReconstructToVector(const v1::ReconstructRequest& request, std::string* geometry_text) {
  const InProcessRun run = RunInProcess(request, ::tessera::testing::FreshTestDir("ct_phantom_run"));
  EXPECT_TRUE(run.outcome.ok()) << run.outcome.status();
  if (!run.outcome.ok()) return {};
  if (geometry_text != nullptr) *geometry_text = run.outcome->result.geometry();
  absl::StatusOr<Volume> v = ReadNifti(run.work_dir + "/reconstruction.nii.gz");
  EXPECT_TRUE(v.ok()) << v.status();
  if (!v.ok()) return {};
  return std::vector<float>(v->data.data<float>(), v->data.data<float>() + v->data.num_elements());
}

double Nrmse(const std::vector<float>& x, const std::vector<float>& truth) {
  if (x.size() != truth.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    num += (double{x[i]} - truth[i]) * (double{x[i]} - truth[i]);
    den += double{truth[i]} * truth[i];
  }
  return std::sqrt(num / den);
}

}  // namespace tessera::reconstruction::testing
