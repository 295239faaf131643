// apply_transforms on CUDA: against the CPU backend for every interpolation
// with a CUDA path (linear, nearest, bspline) on random inputs and chains, and
// the exactness of a CUDA registration's own warped image and labels.
//   - linear: within 1e-4 of the 10..200 range at any voxel (the sampler
//     kernels round coordinates differently from the CPU reference: relative
//     L2 1e-5 in grid_sampler_cuda_test; one sample on a steep random edge
//     moves most); nearest: at most 0.1% of the labels differ (a point on a
//     rounding boundary);
//   - bspline: positions are float on the device, double on the CPU: 2e-3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <random>
#include <vector>

#include "absl/time/clock.h"

#include "common/nifti_io.h"
#include "common/testing/gpu_test.h"
#include "common/testing/temp_files.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/apply_transforms.h"
#include "kernels/registration/pipeline/outputs.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"

namespace tessera::registration {
namespace {

// Runs outside Bazel on the GPU machine too (no TEST_TMPDIR there).
std::string Tmp(const std::string& name) { return testing::FreshTestDir(name); }

double MaxAbsDiff(const NDArray& a, const NDArray& b) {
  NDArray fa = a.AsType(DType::kFloat64).value(), fb = b.AsType(DType::kFloat64).value();
  double worst = 0;
  for (int64_t i = 0; i < fa.num_elements(); ++i) worst = std::max(worst, std::fabs(fa.data<double>()[i] - fb.data<double>()[i]));
  return worst;
}

bool SameBytes(const NDArray& a, const NDArray& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

Volume Random(std::array<int64_t, 4> n, Geometry g, uint32_t seed, float lo, float hi, bool labels = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Shape shape = {n[0], n[1], n[2]};
  if (n[3] > 1) shape.push_back(n[3]);
  Volume v{NDArray::Allocate(shape, labels ? DType::kInt32 : DType::kFloat32).value(), g, ""};
  for (int64_t i = 0; i < v.data.num_elements(); ++i) {
    if (labels) {
      v.data.data<int32_t>()[i] = static_cast<int32_t>(u(rng));
    } else {
      v.data.data<float>()[i] = u(rng);
    }
  }
  return v;
}

Geometry Grid(std::array<double, 3> spacing, std::array<double, 3> origin) {
  Geometry g;
  g.spacing = spacing;
  g.origin = origin;
  return g;
}

TEST(ApplyTransformsCuda, MatchesCpuForEveryCudaInterpolation) {
  TESSERA_SKIP_WITHOUT_GPU();
  const Volume image = Random({24, 22, 20, 1}, Grid({2, 2.2, 2.5}, {-24, -22, -25}), 1, 10, 200);
  const Volume labels = Random({24, 22, 20, 1}, image.geometry, 2, 0, 9, /*labels=*/true);
  GridSpace reference;
  reference.dims = {21, 23, 18};
  reference.geometry = Grid({2.1, 1.9, 2.4}, {-21, -21, -20});
  const Volume field_on_ref = Random({21, 23, 18, 3}, reference.geometry, 3, -1.5, 1.5);
  const Volume coarse = Random({9, 10, 8, 3}, Grid({5, 5, 5.5}, {-22, -24, -20}), 4, -2, 2);
  const Mat4 affine = {1.02, 0.03, -0.02, 1.5, -0.01, 0.98, 0.04, -2, 0.02, -0.03, 1.01, 0.7, 0, 0, 0, 1};
  const TransformChain registration_form = {{"warp", {}, field_on_ref}, {"affine", affine, {}}};
  const TransformChain general = {{"affine", affine, {}}, {"coarse", {}, coarse}};
  for (const TransformChain* chain : {&registration_form, &general}) {
    for (ApplyInterpolation interp : {ApplyInterpolation::kLinear, ApplyInterpolation::kNearest, ApplyInterpolation::kBspline}) {
      const Volume& input = interp == ApplyInterpolation::kNearest ? labels : image;
      ApplyTransformsOptions o;
      o.interpolation = interp;
      o.device = "cpu";
      const AppliedVolume cpu = ApplyTransformsToVolume(input, reference, *chain, o).value();
      o.device = "cuda";
      const AppliedVolume gpu = ApplyTransformsToVolume(input, reference, *chain, o).value();
      EXPECT_EQ(gpu.backend, "cuda");
      const double diff = MaxAbsDiff(cpu.volume.data, gpu.volume.data);
      std::printf("%s %s: max |cuda - cpu| %.3g\n", chain == &general ? "general" : "registration form",
                  ApplyInterpolationName(interp), diff);
      if (interp == ApplyInterpolation::kNearest) {
        // Labels: a sample point on a rounding boundary may differ; count them.
        int64_t differ = 0;
        for (int64_t i = 0; i < cpu.volume.data.num_elements(); ++i) {
          differ += cpu.volume.data.data<int32_t>()[i] != gpu.volume.data.data<int32_t>()[i];
        }
        EXPECT_LE(differ, cpu.volume.data.num_elements() / 1000);
      } else {
        EXPECT_LT(diff, interp == ApplyInterpolation::kBspline ? 2e-3 * 200 : 1e-4 * 200) << ApplyInterpolationName(interp);
      }
    }
  }
  // Label interpolations run on the CPU with --device cuda, and say so.
  ApplyTransformsOptions o;
  o.interpolation = ApplyInterpolation::kGenericLabel;
  o.device = "cuda";
  const AppliedVolume generic = ApplyTransformsToVolume(labels, reference, general, o).value();
  EXPECT_EQ(generic.backend, "cpu");
  EXPECT_NE(generic.log.front().find("runs on the CPU"), std::string::npos);
}

// A CUDA registration's warped image and labels from its written files, on
// CUDA, bit for bit.
TEST(ApplyTransformsCuda, ReproducesACudaRegistrationsOutputsExactly) {
  TESSERA_SKIP_WITHOUT_GPU();
  const ColinProblem p = MakeColinProblem(IntensityChange::kGamma, 7, 3);
  RegistrationOptions options = QuickColinOptions(Metric::kLncc, {10, 5});
  options.device = "cuda";
  const RegistrationResult r = Register(p.fixed, p.pair.moving, options).value();
  ASSERT_EQ(r.backend, "cuda");
  const NDArray labels = WarpLabels(*p.pair.moving_labels, p.fixed, r, "cuda").value();
  const OutputFiles files = WriteRegistrationOutputs(r, p.fixed, Tmp("cuda_registration"), &labels, false).value();
  const TransformChain chain = {LoadTransformFile(files.warp, false).value(), LoadTransformFile(files.affine, false).value()};
  const GridSpace reference = SpaceOf(p.fixed);
  ApplyTransformsOptions o;
  o.device = "cuda";
  const AppliedVolume image = ApplyTransformsToVolume(p.pair.moving, reference, chain, o).value();
  EXPECT_TRUE(SameBytes(image.volume.data, ReadNifti(files.warped).value().data))
      << "max |diff| " << MaxAbsDiff(image.volume.data, r.warped.data);
  o.interpolation = ApplyInterpolation::kNearest;
  const AppliedVolume applied_labels = ApplyTransformsToVolume(*p.pair.moving_labels, reference, chain, o).value();
  EXPECT_TRUE(SameBytes(applied_labels.volume.data, labels));
}


// The elastix comparison cases (bench/registration_cases.cc, 2 mm), when
// TESSERA_APPLY_CASES names a folder of them (CASE/fixed.nii.gz, moving.nii.gz,
// moving_labels.nii.gz, as `registration_cases make` writes them): a CUDA
// registration (mi, default schedule) writes its files, and apply-transforms on
// CUDA with them gives warped.nii.gz and warped_labels.nii.gz bit for bit (the
// CUDA half of bench/apply_transforms_vs_registration.sh; prints the times).
TEST(ApplyTransformsCuda, ElastixCasesExactOnCuda) {
  TESSERA_SKIP_WITHOUT_GPU();
  const char* root = std::getenv("TESSERA_APPLY_CASES");
  if (root == nullptr) GTEST_SKIP() << "TESSERA_APPLY_CASES not set";
  std::vector<std::string> cases;
  if (DIR* d = opendir(root)) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') cases.push_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(cases.begin(), cases.end());
  ASSERT_FALSE(cases.empty());
  for (const std::string& c : cases) {
    const std::string dir = std::string(root) + "/" + c;
    const Volume fixed = ReadNifti(dir + "/fixed.nii.gz").value();
    const Volume moving = ReadNifti(dir + "/moving.nii.gz").value();
    const Volume moving_labels = ReadNifti(dir + "/moving_labels.nii.gz").value();
    RegistrationOptions options;
    options.metric = Metric::kMi;
    options.device = "cuda";
    const absl::Time t0 = absl::Now();
    const RegistrationResult r = Register(fixed, moving, options).value();
    const double register_s = absl::ToDoubleSeconds(absl::Now() - t0);
    const NDArray labels = WarpLabels(moving_labels, fixed, r, "cuda").value();
    const OutputFiles files = WriteRegistrationOutputs(r, fixed, Tmp("case_" + c), &labels, false).value();
    const absl::Time t1 = absl::Now();
    const TransformChain chain = {LoadTransformFile(files.warp, false).value(),
                                  LoadTransformFile(files.affine, false).value()};
    const GridSpace reference = SpaceOf(ReadNifti(dir + "/fixed.nii.gz").value());
    ApplyTransformsOptions o;
    o.device = "cuda";
    const AppliedVolume image = ApplyTransformsToVolume(moving, reference, chain, o).value();
    const double image_s = absl::ToDoubleSeconds(absl::Now() - t1);
    o.interpolation = ApplyInterpolation::kNearest;
    const absl::Time t2 = absl::Now();
    const AppliedVolume applied_labels = ApplyTransformsToVolume(moving_labels, reference, chain, o).value();
    const double labels_s = absl::ToDoubleSeconds(absl::Now() - t2);
    const NDArray warped = ReadNifti(files.warped).value().data;
    const NDArray warped_labels = ReadNifti(files.warped_labels).value().data.AsType(DType::kInt32).value();
    const double image_diff = MaxAbsDiff(image.volume.data, warped);
    const double labels_diff = MaxAbsDiff(applied_labels.volume.data, warped_labels);
    std::printf("| %s | %s | %.2f | %g | %g | %.3f | %.3f |\n", c.c_str(),
                (std::to_string(fixed.data.dim(0)) + "x" + std::to_string(fixed.data.dim(1)) + "x" +
                 std::to_string(fixed.data.dim(2))).c_str(),
                register_s, image_diff, labels_diff, image_s, labels_s);
    EXPECT_TRUE(SameBytes(image.volume.data, warped)) << c;
    EXPECT_TRUE(SameBytes(applied_labels.volume.data, warped_labels)) << c;
  }
}

}  // namespace
}  // namespace tessera::registration
