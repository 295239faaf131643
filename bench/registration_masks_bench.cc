// Issue 34's evidence for registration masks: a pathology-like occlusion.
// The fixed image is Colin27 (Debian's mricron-data, ch2.nii.gz with the AAL
// labels, downsampled to 2 mm) with a large spherical "lesion" the moving
// image lacks: bright (--lesion bright: the sphere set to the image maximum,
// like an enhancing tumour) or resected (--lesion resected: set to 0, like a
// resection cavity). The moving image is the same-modality case of
// bench/registration_cases (a known affine + smooth deformation, gamma
// intensity change, seed 7), made from the lesion-free image. Each metric
// registers the pair twice on the CPU, without a mask and with a fixed mask
// that excludes the lesion (dilated by --margin_mm), and the moving labels
// are warped and scored against the fixed labels:
//   dice_all / dice_large  mean Dice over all labels / labels >= 1000 voxels
//                          (label_dice.h), on the whole fixed grid;
//   dice_near              mean Dice over all labels, counting only voxels
//                          within --near_mm of the lesion's surface, outside
//                          it (where the lesion pulls the unmasked field).
//
//   registration_masks_bench [--metrics mse,lncc,mi] [--lesion bright|resected]
//       [--radius_mm 20] [--margin_mm 4] [--near_mm 20] [--device cpu]
// Prints one markdown table row per metric and run.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "kernels/registration/pipeline/label_dice.h"
#include "kernels/registration/pipeline/option_enums.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/synthetic.h"

ABSL_FLAG(std::vector<std::string>, metrics, std::vector<std::string>({"mse", "lncc", "mi"}), "metrics to run");
ABSL_FLAG(std::string, lesion, "bright", "bright (sphere at the image maximum) or resected (sphere at 0)");
ABSL_FLAG(double, radius_mm, 20, "lesion radius, mm");
ABSL_FLAG(double, margin_mm, 4, "the mask excludes the lesion dilated by this much, mm");
ABSL_FLAG(double, near_mm, 20, "dice_near: voxels within this distance of the lesion's surface");
ABSL_FLAG(std::string, device, "cpu", "cpu, cuda or auto");
ABSL_FLAG(std::string, templates, "/usr/share/mricron/templates/", "mricron-data directory");

namespace tessera::registration {
namespace {

// World position of voxel (i, j, k).
std::array<double, 3> World(const Mat4& m, int64_t i, int64_t j, int64_t k) {
  return {m[0] * i + m[1] * j + m[2] * k + m[3], m[4] * i + m[5] * j + m[6] * k + m[7],
          m[8] * i + m[9] * j + m[10] * k + m[11]};
}

// Distance of every fixed voxel's centre from the lesion centre, mm.
std::vector<double> Distances(const Volume& v, const std::array<double, 3>& centre) {
  const Mat4 m = v.geometry.IndexToWorld();
  const int64_t nx = v.data.dim(0), ny = v.data.dim(1), nz = v.data.dim(2);
  std::vector<double> d(static_cast<size_t>(nx * ny * nz));
  for (int64_t k = 0; k < nz; ++k)
    for (int64_t j = 0; j < ny; ++j)
      for (int64_t i = 0; i < nx; ++i) {
        const auto w = World(m, i, j, k);
        d[i + nx * (j + ny * k)] =
            std::sqrt((w[0] - centre[0]) * (w[0] - centre[0]) + (w[1] - centre[1]) * (w[1] - centre[1]) +
                      (w[2] - centre[2]) * (w[2] - centre[2]));
      }
  return d;
}

NDArray Keep(const NDArray& labels, const std::vector<double>& dist, double lo, double hi) {
  NDArray out = labels.AsType(DType::kInt32).value();
  for (size_t v = 0; v < dist.size(); ++v) {
    if (!(dist[v] > lo && dist[v] <= hi)) out.data<int32_t>()[v] = 0;
  }
  return out;
}

absl::Status Main() {
  const std::string t = absl::GetFlag(FLAGS_templates);
  TESSERA_ASSIGN_OR_RETURN(Volume image, ReadNifti(t + "ch2.nii.gz"));
  TESSERA_ASSIGN_OR_RETURN(Volume labels, ReadNifti(t + "aal.nii.gz"));
  TESSERA_ASSIGN_OR_RETURN(Volume fixed, DownsampleImage(image, 2));
  TESSERA_ASSIGN_OR_RETURN(Volume fixed_labels, DownsampleLabels(labels, 2));
  SyntheticOptions synth;
  synth.seed = 7;
  synth.intensity = IntensityChange::kGamma;
  TESSERA_ASSIGN_OR_RETURN(SyntheticPair pair, MakeSyntheticPair(fixed, &fixed_labels, synth));

  // The lesion: centred in the left hemisphere's white matter, 25 mm left
  // of the labelled brain's centre.
  const Mat4 m = fixed.geometry.IndexToWorld();
  const int64_t nx = fixed.data.dim(0), ny = fixed.data.dim(1), nz = fixed.data.dim(2);
  std::array<double, 3> centre = {0, 0, 0};
  int64_t n = 0;
  NDArray lab32 = fixed_labels.data.AsType(DType::kInt32).value();
  for (int64_t k = 0; k < nz; ++k)
    for (int64_t j = 0; j < ny; ++j)
      for (int64_t i = 0; i < nx; ++i) {
        if (lab32.data<int32_t>()[i + nx * (j + ny * k)] == 0) continue;
        const auto w = World(m, i, j, k);
        for (int c = 0; c < 3; ++c) centre[c] += w[c];
        ++n;
      }
  for (int c = 0; c < 3; ++c) centre[c] /= static_cast<double>(n);
  centre[0] -= 25;  // RAS: left is -x
  centre[2] += 10;
  const double radius = absl::GetFlag(FLAGS_radius_mm), margin = absl::GetFlag(FLAGS_margin_mm);
  const std::vector<double> dist = Distances(fixed, centre);
  NDArray f32 = fixed.data.AsType(DType::kFloat32).value();
  float max_value = 0;
  for (int64_t v = 0; v < f32.num_elements(); ++v) max_value = std::max(max_value, f32.data<float>()[v]);
  const bool bright = absl::GetFlag(FLAGS_lesion) == "bright";
  if (!bright && absl::GetFlag(FLAGS_lesion) != "resected") {
    return absl::InvalidArgumentError("--lesion must be bright or resected");
  }
  auto mask = std::make_shared<Volume>();
  mask->geometry = fixed.geometry;
  mask->data = NDArray::Allocate(fixed.data.shape(), DType::kUInt8).value();
  int64_t lesion_voxels = 0;
  for (size_t v = 0; v < dist.size(); ++v) {
    if (dist[v] <= radius) {
      f32.data<float>()[v] = bright ? max_value : 0.f;
      ++lesion_voxels;
    }
    mask->data.data<uint8_t>()[v] = dist[v] <= radius + margin ? 0 : 1;
  }
  fixed.data = f32;
  const double near = absl::GetFlag(FLAGS_near_mm);
  const NDArray fixed_near = Keep(fixed_labels.data, dist, radius, radius + near);
  std::printf("lesion %s, radius %.0f mm (%lld voxels at 2 mm), centre (%.1f, %.1f, %.1f) mm RAS; mask excludes "
              "radius + %.0f mm; dice_near: %.0f..%.0f mm from the centre\n",
              absl::GetFlag(FLAGS_lesion).c_str(), radius, static_cast<long long>(lesion_voxels), centre[0],
              centre[1], centre[2], margin, radius, radius + near);
  TESSERA_ASSIGN_OR_RETURN(DiceMeans before, ComputeDiceMeans(fixed_labels.data, pair.moving_labels->data, fixed.geometry));
  std::printf("before registration: dice_all %.4f, dice_large %.4f\n\n", before.mean_all, before.mean_large);
  std::printf("| metric | mask | dice_all | dice_large | dice_near | final loss | seconds |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const std::string& name : absl::GetFlag(FLAGS_metrics)) {
    TESSERA_ASSIGN_OR_RETURN(Metric metric, ParseOption<Metric>(name, "--metrics"));
    for (bool masked : {false, true}) {
      RegistrationOptions o;
      o.metric = metric;
      o.device = absl::GetFlag(FLAGS_device);
      if (masked) o.fixed_mask = mask;
      absl::StatusOr<RegistrationResult> r = Register(fixed, pair.moving, o);
      if (!r.ok()) return r.status();
      TESSERA_ASSIGN_OR_RETURN(NDArray warped, WarpLabels(*pair.moving_labels, fixed, *r, o.device));
      TESSERA_ASSIGN_OR_RETURN(DiceMeans all, ComputeDiceMeans(fixed_labels.data, warped, fixed.geometry));
      TESSERA_ASSIGN_OR_RETURN(DiceMeans local, ComputeDiceMeans(fixed_near, Keep(warped, dist, radius, radius + near), fixed.geometry));
      std::printf("| %s | %s | %.4f | %.4f | %.4f | %.5g | %.1f |\n", name.c_str(),
                  masked ? "fixed (lesion excluded)" : "none", all.mean_all, all.mean_large, local.mean_all,
                  r->final_loss, r->seconds);
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tessera::registration

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = tessera::registration::Main();
  if (!s.ok()) std::fprintf(stderr, "registration_masks_bench: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
