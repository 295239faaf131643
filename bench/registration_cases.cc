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
  std::fprintf(stderr, "usage: registration_cases list | make --case NAME --dir DIR | dice --fixed_labels F --labels L | "
                       "folded --jacobian J\n");
  return 2;
}
