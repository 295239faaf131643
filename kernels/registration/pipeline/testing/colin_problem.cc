#include "kernels/registration/pipeline/testing/colin_problem.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/nifti_io.h"

namespace tessera::registration {

ColinProblem MakeColinProblem(IntensityChange intensity, uint64_t seed, int factor) {
  constexpr char kCh2[] = "/usr/share/mricron/templates/ch2.nii.gz";
  constexpr char kAal[] = "/usr/share/mricron/templates/aal.nii.gz";
  ColinProblem p;
  auto ch2 = ReadNifti(kCh2);
  auto aal = ReadNifti(kAal);
  EXPECT_TRUE(ch2.ok() && aal.ok()) << "mricron-data missing? " << ch2.status() << " " << aal.status();
  p.fixed = DownsampleImage(*ch2, factor).value();
  p.fixed_labels = DownsampleLabels(*aal, factor).value();
  SyntheticOptions options;
  options.seed = seed;
  options.intensity = intensity;
  p.pair = MakeSyntheticPair(p.fixed, &p.fixed_labels, options).value();
  return p;
}

RegistrationOptions QuickColinOptions(Metric metric, std::vector<int> deformable_iterations) {
  RegistrationOptions o;
  o.metric = metric;
  o.scales = {2, 1};
  o.rigid_iterations = {40, 20};
  o.affine_iterations = {40, 20};
  o.deformable_iterations = std::move(deformable_iterations);
  o.device = "cpu";
  o.smooth_grad_sigma = 3;
  // The bounded (out-of-core) path does not blur the fixed image for MI or LNCC
  // (metric.h): off here, so the in-core / bounded comparisons stay exact.
  o.metric_options.fixed_blur_voxels = 0;
  // Nor do the sharded and out-of-core stages jitter the grid (metric.h).
  o.metric_options.mi_grid_jitter = false;
  return o;
}

bool LogHas(const std::vector<std::string>& log, const std::string& text) {
  return std::any_of(log.begin(), log.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

}  // namespace tessera::registration
