// Helper of bench/registration_vs_elastix.sh: writes issue 17's multimodal
// cases (the ones services/registration/registrar_multimodal_test.cc
// registers, from Debian's mricron-data) as NIfTI files any registration
// program can read, and scores label maps the same way for every program.
//
//   registration_cases list
//   registration_cases make --case NAME --dir DIR
//       DIR/{fixed,fixed_labels,moving,moving_labels}.nii.gz
//   registration_cases dice --fixed-labels F --labels L
//       "<mean Dice, all labels> <mean Dice, labels >= 1000 voxels>" (L
//       resampled onto F's grid by nearest neighbour through the headers
//       when the grids differ, e.g. transformix's output)
//   registration_cases folded --jacobian J
//       number of voxels with a Jacobian determinant <= 0
//   registration_cases register --dir DIR [--deformable_iterations 200,100,50
//       --deformable_lr 0.5 --grad_sigma 1 --warp_sigma 0.5 --mi_bins 32
//       --deformable_model bspline --bspline_spacing 4 ...]
//       registers DIR's pair (default mi) on the CPU (tuning experiments, issue
//       17): "<Dice all> <Dice large> <seconds> <final loss>" and the log
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/nifti_io.h"
#include "services/registration/label_dice.h"
#include "services/registration/registrar.h"
#include "services/registration/synthetic.h"

ABSL_FLAG(std::string, case, "", "case name (registration_cases list)");
ABSL_FLAG(std::string, dir, "", "output directory for make");
ABSL_FLAG(std::string, fixed_labels, "", "reference label map (dice)");
ABSL_FLAG(std::string, labels, "", "label map to score (dice)");
ABSL_FLAG(std::string, jacobian, "", "Jacobian determinant image (folded)");
ABSL_FLAG(std::vector<std::string>, deformable_iterations, {}, "register: per-level deformable iterations");
ABSL_FLAG(std::vector<std::string>, affine_iterations, {}, "register: per-level affine iterations");
ABSL_FLAG(std::vector<std::string>, scales, {}, "register: pyramid factors");
ABSL_FLAG(std::vector<std::string>, rigid_iterations, {}, "register: per-level rigid iterations");
ABSL_FLAG(std::vector<std::string>, stages, {}, "register: stages, e.g. rigid,affine (empty: default)");
ABSL_FLAG(double, linear_lr, -1, "register: rigid/affine Adam step at the coarsest scale (-1: default)");
ABSL_FLAG(double, translation_scale, -1, "register: mm per translation parameter unit (-1: default)");
ABSL_FLAG(double, matrix_scale, -1, "register: matrix entry per parameter unit (-1: default)");
ABSL_FLAG(int64_t, linear_samples, -1, "register: linear-stage samples per iteration (-1: default)");
ABSL_FLAG(std::string, metric, "mi", "register: mi, lncc or mse");
ABSL_FLAG(double, deformable_lr, -1, "register: greedy step, voxels (-1: default)");
ABSL_FLAG(double, grad_sigma, -1, "register: gradient smoothing, voxels (-1: default)");
ABSL_FLAG(double, warp_sigma, -1, "register: field smoothing, voxels (-1: default)");
ABSL_FLAG(int, mi_bins, 0, "register: MI bins (0: default)");
ABSL_FLAG(int, patience, 0, "register: convergence patience (0: default)");
ABSL_FLAG(double, tolerance, -1, "register: convergence tolerance (-1: default)");
ABSL_FLAG(std::string, deformable_step, "", "register: normalized or adam (empty: default)");
ABSL_FLAG(std::string, memory_mode, "", "register: lean or standard (empty: default)");
ABSL_FLAG(int, halve_after, -1, "register: deformable step halves after this many iterations without a new best (-1: default)");
ABSL_FLAG(double, min_step, -1, "register: deformable step floor, fraction of the step (-1: default)");
ABSL_FLAG(std::string, deformable_model, "", "register: greedy or bspline (empty: default)");
ABSL_FLAG(double, bspline_spacing, -1, "register: B-spline control spacing at the finest level, mm (-1: default)");
ABSL_FLAG(bool, trace, false, "register: print every iteration's loss to stderr");
ABSL_FLAG(std::string, templates, "/usr/share/mricron/templates/", "mricron-data directory");

namespace tessera::registration {
namespace {

struct Case {
  const char* name;
  const char* image;
  const char* labels;
  int downsample;
  SyntheticOptions synth;
};

SyntheticOptions Synth(uint64_t seed, IntensityChange intensity) {
  SyntheticOptions s;
  s.seed = seed;
  s.intensity = intensity;
  return s;
}

// Keep in step with registrar_multimodal_test.cc.
std::vector<Case> Cases() {
  std::vector<Case> cases;
  SyntheticOptions s = Synth(11, IntensityChange::kNonMonotonic);
  s.axis_order = {2, 0, 1};
  s.flip = {true, false, true};
  cases.push_back({"nonmonotonic_reoriented", "ch2.nii.gz", "aal.nii.gz", 2, s});
  s = Synth(5, IntensityChange::kT2Like);
  s.bias_fraction = 0.2;
  s.noise_fraction = 0.02;
  cases.push_back({"t2like_bias_noise", "ch2.nii.gz", "aal.nii.gz", 2, s});
  s = Synth(3, IntensityChange::kInverted);
  s.crop_high = {0, 0, 0.2};
  cases.push_back({"inverted_partial_fov", "ch2.nii.gz", "aal.nii.gz", 2, s});
  s = Synth(13, IntensityChange::kNonMonotonic);
  s.noise_fraction = 0.03;
  s.bias_fraction = 0.3;
  s.axis_order = {1, 0, 2};
  s.flip = {false, true, false};
  cases.push_back({"nonmonotonic_noise_bias_flipped", "ch2.nii.gz", "aal.nii.gz", 2, s});
  s = Synth(17, IntensityChange::kT2Like);
  s.flip = {true, false, false};
  cases.push_back({"ch2bet_t2like", "ch2bet.nii.gz", "aal.nii.gz", 2, s});
  s = Synth(19, IntensityChange::kNonMonotonic);
  s.axis_order = {0, 2, 1};
  cases.push_back({"macaque_nonmonotonic", "inia19-t1-brain.nii.gz", "inia19-NeuroMaps.nii.gz", 3, s});
  s = Synth(7, IntensityChange::kGamma);
  cases.push_back({"same_modality_gamma", "ch2.nii.gz", "aal.nii.gz", 2, s});
  return cases;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "registration_cases: %s\n", s.ToString().c_str());
  return 1;
}

int Make() {
  const std::string name = absl::GetFlag(FLAGS_case), dir = absl::GetFlag(FLAGS_dir);
  for (const Case& c : Cases()) {
    if (name != c.name) continue;
    const std::string t = absl::GetFlag(FLAGS_templates);
    auto image = ReadNifti(t + c.image);
    auto labels = ReadNifti(t + c.labels);
    if (!image.ok()) return Fail(image.status());
    if (!labels.ok()) return Fail(labels.status());
    auto fixed = DownsampleImage(*image, c.downsample);
    auto fixed_labels = DownsampleLabels(*labels, c.downsample);
    if (!fixed.ok()) return Fail(fixed.status());
    if (!fixed_labels.ok()) return Fail(fixed_labels.status());
    auto pair = MakeSyntheticPair(*fixed, &*fixed_labels, c.synth);
    if (!pair.ok()) return Fail(pair.status());
    for (const auto& [volume, file] : {std::pair<const Volume*, const char*>{&*fixed, "fixed"},
                                       {&*fixed_labels, "fixed_labels"},
                                       {&pair->moving, "moving"},
                                       {&*pair->moving_labels, "moving_labels"}}) {
      if (absl::Status s = WriteNifti(*volume, dir + "/" + file + ".nii.gz"); !s.ok()) return Fail(s);
    }
    return 0;
  }
  std::fprintf(stderr, "registration_cases: unknown case '%s' (see: registration_cases list)\n", name.c_str());
  return 2;
}

int Dice() {
  auto fixed = ReadNifti(absl::GetFlag(FLAGS_fixed_labels));
  auto labels = ReadNifti(absl::GetFlag(FLAGS_labels));
  if (!fixed.ok()) return Fail(fixed.status());
  if (!labels.ok()) return Fail(labels.status());
  // Through the headers (identity in world space), nearest neighbour: a
  // no-op on the same grid, and what puts transformix's output on ours.
  RegistrationResult identity;
  identity.affine_ras = Mat4{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  auto on_fixed = WarpLabels(*labels, *fixed, identity, "cpu");
  if (!on_fixed.ok()) return Fail(on_fixed.status());
  auto fixed32 = fixed->data.AsType(DType::kInt32);
  if (!fixed32.ok()) return Fail(fixed32.status());
  auto dice = ComputeDiceMeans(*fixed32, *on_fixed, fixed->geometry);
  if (!dice.ok()) return Fail(dice.status());
  std::printf("%.4f %.4f\n", dice->mean_all, dice->mean_large);
  return 0;
}

int Folded() {
  auto jac = ReadNifti(absl::GetFlag(FLAGS_jacobian));
  if (!jac.ok()) return Fail(jac.status());
  auto f = jac->data.AsType(DType::kFloat32);
  if (!f.ok()) return Fail(f.status());
  int64_t folded = 0;
  for (int64_t i = 0; i < f->num_elements(); ++i) folded += !(f->data<float>()[i] > 0.f);
  std::printf("%lld\n", static_cast<long long>(folded));
  return 0;
}

int RegisterCase() {
  const std::string dir = absl::GetFlag(FLAGS_dir);
  auto fixed = ReadNifti(dir + "/fixed.nii.gz");
  auto moving = ReadNifti(dir + "/moving.nii.gz");
  auto fixed_labels = ReadNifti(dir + "/fixed_labels.nii.gz");
  auto moving_labels = ReadNifti(dir + "/moving_labels.nii.gz");
  for (const auto* v : {&fixed, &moving, &fixed_labels, &moving_labels}) {
    if (!v->ok()) return Fail(v->status());
  }
  RegistrationOptions o;
  o.metric = absl::GetFlag(FLAGS_metric);
  o.device = "cpu";
  if (!absl::GetFlag(FLAGS_deformable_iterations).empty()) {
    o.deformable_iterations.clear();
    for (const std::string& n : absl::GetFlag(FLAGS_deformable_iterations)) o.deformable_iterations.push_back(std::stoi(n));
  }
  if (!absl::GetFlag(FLAGS_affine_iterations).empty()) {
    o.affine_iterations.clear();
    for (const std::string& n : absl::GetFlag(FLAGS_affine_iterations)) o.affine_iterations.push_back(std::stoi(n));
  }
  if (!absl::GetFlag(FLAGS_scales).empty()) {
    o.scales.clear();
    for (const std::string& n : absl::GetFlag(FLAGS_scales)) o.scales.push_back(std::stoi(n));
  }
  if (!absl::GetFlag(FLAGS_rigid_iterations).empty()) {
    o.rigid_iterations.clear();
    for (const std::string& n : absl::GetFlag(FLAGS_rigid_iterations)) o.rigid_iterations.push_back(std::stoi(n));
  }
  if (!absl::GetFlag(FLAGS_stages).empty()) o.stages = absl::GetFlag(FLAGS_stages);
  if (absl::GetFlag(FLAGS_linear_lr) > 0) o.linear_lr = absl::GetFlag(FLAGS_linear_lr);
  if (absl::GetFlag(FLAGS_translation_scale) > 0) o.translation_scale_mm = absl::GetFlag(FLAGS_translation_scale);
  if (absl::GetFlag(FLAGS_matrix_scale) > 0) o.matrix_scale = absl::GetFlag(FLAGS_matrix_scale);
  if (absl::GetFlag(FLAGS_linear_samples) >= 0) o.linear_samples = absl::GetFlag(FLAGS_linear_samples);
  if (absl::GetFlag(FLAGS_deformable_lr) > 0) o.deformable_lr_voxels = absl::GetFlag(FLAGS_deformable_lr);
  if (absl::GetFlag(FLAGS_grad_sigma) >= 0) o.smooth_grad_sigma = absl::GetFlag(FLAGS_grad_sigma);
  if (absl::GetFlag(FLAGS_warp_sigma) >= 0) o.smooth_warp_sigma = absl::GetFlag(FLAGS_warp_sigma);
  if (absl::GetFlag(FLAGS_mi_bins) > 0) o.metric_options.mi_bins = absl::GetFlag(FLAGS_mi_bins);
  if (absl::GetFlag(FLAGS_patience) > 0) o.patience = absl::GetFlag(FLAGS_patience);
  if (absl::GetFlag(FLAGS_tolerance) >= 0) o.tolerance = absl::GetFlag(FLAGS_tolerance);
  if (!absl::GetFlag(FLAGS_deformable_step).empty()) o.deformable_step = absl::GetFlag(FLAGS_deformable_step);
  if (!absl::GetFlag(FLAGS_memory_mode).empty()) o.memory_mode = absl::GetFlag(FLAGS_memory_mode);
  if (absl::GetFlag(FLAGS_halve_after) >= 0) o.deformable_halve_after = absl::GetFlag(FLAGS_halve_after);
  if (absl::GetFlag(FLAGS_min_step) > 0) o.deformable_min_step_fraction = absl::GetFlag(FLAGS_min_step);
  if (!absl::GetFlag(FLAGS_deformable_model).empty()) o.deformable_model = absl::GetFlag(FLAGS_deformable_model);
  if (absl::GetFlag(FLAGS_bspline_spacing) > 0) o.bspline_spacing_mm = absl::GetFlag(FLAGS_bspline_spacing);
  ProgressCallback trace = nullptr;
  if (absl::GetFlag(FLAGS_trace)) {
    trace = [](const RegistrationProgress& p) {
      std::fprintf(stderr, "%s x%d %d/%d %.5f\n", p.stage.c_str(), p.scale, p.iteration, p.max_iterations, p.loss);
    };
  }
  auto result = Register(*fixed, *moving, o, trace);
  if (!result.ok()) return Fail(result.status());
  auto warped = WarpLabels(*moving_labels, *fixed, *result, "cpu");
  if (!warped.ok()) return Fail(warped.status());
  auto fixed32 = fixed_labels->data.AsType(DType::kInt32);
  if (!fixed32.ok()) return Fail(fixed32.status());
  auto dice = ComputeDiceMeans(*fixed32, *warped, fixed->geometry);
  if (!dice.ok()) return Fail(dice.status());
  std::printf("%.4f %.4f %.1f %.5f folded %lld\n", dice->mean_all, dice->mean_large, result->seconds,
              result->final_loss, static_cast<long long>(result->jacobian.nonpositive));
  for (const std::string& line : result->log) std::printf("  %s\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace tessera::registration

int main(int argc, char** argv) {
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  const std::string verb = rest.size() > 1 ? rest[1] : "";
  using namespace tessera::registration;
  if (verb == "list") {
    for (const auto& c : Cases()) std::printf("%s\n", c.name);
    return 0;
  }
  if (verb == "make") return Make();
  if (verb == "dice") return Dice();
  if (verb == "folded") return Folded();
  if (verb == "register") return RegisterCase();
  std::fprintf(stderr, "usage: registration_cases list | make --case NAME --dir DIR | dice --fixed_labels F --labels L | "
                       "folded --jacobian J\n");
  return 2;
}
