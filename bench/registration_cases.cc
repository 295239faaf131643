// Helper of bench/registration_vs_elastix.sh: writes issue 17's multimodal
// cases (the ones services/registration/registrar_multimodal_test.cc
// registers, from Debian's mricron-data) as NIfTI files any registration
// program can read, and scores label maps the same way for every program.
//
//   registration_cases list
//   registration_cases make --case NAME --dir DIR [--downsample F]
//       DIR/{fixed,fixed_labels,moving,moving_labels}.nii.gz
//   registration_cases dice --fixed-labels F --labels L
//       "<mean Dice, all labels> <mean Dice, labels >= 1000 voxels>" (L
//       resampled onto F's grid by nearest neighbour through the headers
//       when the grids differ, e.g. transformix's output)
//   registration_cases folded --jacobian J
//       number of voxels with a Jacobian determinant <= 0
//   registration_cases register --dir DIR [--deformable_iterations 200,100,100
//       --deformable_lr 0.5 --grad_sigma 1 --warp_sigma 0.5 --mi_bins 32
//       --deformable_model bspline --bspline_spacing 4 --fixed_blur 0
//       --mi_fixed_window cubic --plateau_window 20 ...]
//       registers DIR's pair (default mi) on the CPU (tuning experiments, issue
//       17): "<Dice all> <Dice large> <seconds> <final loss>" and the log;
//       --out OUT also writes tessera register's files there
//   registration_cases truth --case NAME|identity --dir DIR [--tessera NAME:OUT,...]
//       [--elastix EDIR]
//       (OUT, EDIR relative to DIR unless absolute)
//       the generator's true map (bench/registration_cases_truth.h): Dice of
//       the moving labels warped through it by WarpLabels (the ceiling of two
//       nearest-neighbour resamplings; DIR/truth_labels.nii.gz), each
//       registration's map error against it in mm (tessera: OUT/0Warp.nii.gz +
//       0GenericAffine.mat; elastix: EDIR/def/deformationField.nii from
//       transformix -def all) and Dice per fixed-label size (OUT/
//       warped_labels.nii.gz, EDIR/labels/result.nii); an OUT without
//       0Warp.nii.gz (--stages rigid,affine) is scored as its affine alone.
//       --score_mi_bins B: also each map's MI loss at full resolution
//       (registrar's normalisation; --score_fixed_box, --score_smooth S
//       variants): a map with a lower loss than the true map's shows the
//       metric, not the optimiser, leaving the truth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/registration_flags.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "bench/registration_cases_truth.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/host_setup.h"
#include "kernels/registration/pipeline/label_dice.h"
#include "kernels/registration/pipeline/outputs.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/synthetic.h"

ABSL_FLAG(std::string, case, "", "case name (registration_cases list)");
ABSL_FLAG(std::string, dir, "", "output directory for make");
ABSL_FLAG(int, downsample, 0, "make: downsampling factor of the source volume (0: the case's; 1: full resolution, e.g. 1 mm)");
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
ABSL_FLAG(int, lncc_window, 0, "register: LNCC window, odd, voxels of each level (0: default)");
ABSL_FLAG(std::string, precision, "", "register: lean deformable storage, mixed or full (empty: default)");
ABSL_FLAG(double, fixed_blur, -1, "register: fixed-image blur before the deformable stage with mi or lncc, voxels (-1: default)");
ABSL_FLAG(std::string, mi_fixed_window, "", "register: MI fixed Parzen window, box or cubic (empty: default)");
ABSL_FLAG(std::string, mi_grid_jitter, "", "register: jitter the deformable sampling grid with MI, on or off (empty: default)");
ABSL_FLAG(std::string, mi_voxel_jitter, "", "register: with the grid jitter, one offset per voxel instead of per grid, on or off (empty: default)");
ABSL_FLAG(int, patience, 0, "register: convergence patience (0: default)");
ABSL_FLAG(int64_t, sampling_seed, 0, "register: seed of the random samples and grid jitter (0: default)");
ABSL_FLAG(double, tolerance, -1, "register: convergence tolerance (-1: default)");
ABSL_FLAG(int, plateau_window, -1, "register: deformable window plateau rule, iterations (0: off, -1: default)");
ABSL_FLAG(std::string, dense_finest_linear, "", "register: rigid/affine on the finest level too where the CPU reads every voxel (lncc), on or off (empty: default)");
ABSL_FLAG(std::string, full_finest_deformable, "", "register: the whole deformable budget on the CPU's finest level of a large pyramid, on or off (empty: default, capped)");
ABSL_FLAG(std::string, plateau_window_finest, "", "register: the window plateau rule on the finest level too, on or off (empty: default)");
ABSL_FLAG(double, finest_remaining_gain, -1, "register: the finest level's remaining-gain stop, fraction of |loss| (0: off, -1: default)");
ABSL_FLAG(std::string, deformable_step, "", "register: normalized or adam (empty: default)");
ABSL_FLAG(std::string, memory_mode, "", "register: lean or standard (empty: default)");
ABSL_FLAG(int, halve_after, -1, "register: deformable step halves after this many iterations without a new best (-1: default)");
ABSL_FLAG(double, min_step, -1, "register: deformable step floor, fraction of the step (-1: default)");
ABSL_FLAG(std::string, deformable_model, "", "register: greedy or bspline (empty: default)");
ABSL_FLAG(double, bspline_spacing, -1, "register: B-spline control spacing at the finest level, mm (-1: default)");
ABSL_FLAG(bool, trace, false, "register: print every iteration's loss to stderr");
ABSL_FLAG(std::vector<std::string>, tessera, {}, "truth: NAME:DIR of tessera register outputs to score");
ABSL_FLAG(std::vector<std::string>, smooth_voxels, {}, "truth: also score each map Gaussian-smoothed by these sigmas (voxels)");
ABSL_FLAG(int, score_mi_bins, 0,
          "truth: also print each map's Mattes MI loss at full resolution with this many bins (the registrar's "
          "normalisation; 0: no)");
ABSL_FLAG(bool, score_fixed_box, false, "truth: --score_mi_bins with a box Parzen window on the fixed image");
ABSL_FLAG(double, score_smooth, 0, "truth: --score_mi_bins on images Gaussian-smoothed by this sigma (voxels)");
ABSL_FLAG(std::string, out, "", "register: also write tessera register's output files here (for truth --tessera)");
ABSL_FLAG(std::string, elastix, "", "truth: DIR with labels/result.nii and def/deformationField.nii");
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

const Case* FindCase(const std::string& name) {
  static const std::vector<Case> cases = Cases();
  for (const Case& c : cases) {
    if (name == c.name) return &c;
  }
  std::fprintf(stderr, "registration_cases: unknown case '%s' (see: registration_cases list)\n", name.c_str());
  return nullptr;
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
    const int factor = absl::GetFlag(FLAGS_downsample) > 0 ? absl::GetFlag(FLAGS_downsample) : c.downsample;
    auto fixed = DownsampleImage(*image, factor);
    auto fixed_labels = DownsampleLabels(*labels, factor);
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

// Labels `path` on `fixed`'s grid (nearest neighbour through the headers).
absl::StatusOr<NDArray> LabelsOnGrid(const std::string& path, const Volume& fixed) {
  TESSERA_ASSIGN_OR_RETURN(Volume labels, ReadNifti(path));
  RegistrationResult identity;
  identity.affine_ras = Mat4{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  return WarpLabels(labels, fixed, identity, "cpu");
}

// The registrar's finest-level MI loss of a map (planar RAS displacement on the
// fixed grid): both images normalised as the registrar does, the moving one
// sampled trilinearly at x + d(x), zero outside (its padding).
absl::StatusOr<double> MiLossOfMap(const Volume& fixed, const Volume& moving, const NDArray& d, int bins) {
  TESSERA_ASSIGN_OR_RETURN(NDArray f, NormalizedIntensitiesParallel(fixed, "fixed"));
  TESSERA_ASSIGN_OR_RETURN(NDArray m, NormalizedIntensitiesParallel(moving, "moving"));
  TESSERA_ASSIGN_OR_RETURN(Mat4 to_index, InvertAffine(moving.geometry.IndexToWorld()));
  const Mat4 w = fixed.geometry.IndexToWorld();
  const int64_t n[3] = {f.dim(0), f.dim(1), f.dim(2)}, mn[3] = {m.dim(0), m.dim(1), m.dim(2)};
  const int64_t voxels = n[0] * n[1] * n[2];
  TESSERA_ASSIGN_OR_RETURN(NDArray warped, NDArray::Allocate({n[0], n[1], n[2]}, DType::kFloat32));
  const float* dv = d.data<float>();
  const float* mv = m.data<float>();
  for (int64_t k = 0; k < n[2]; ++k) {
    for (int64_t j = 0; j < n[1]; ++j) {
      for (int64_t i = 0; i < n[0]; ++i) {
        const int64_t at = i + n[0] * (j + n[1] * k);
        double x[3] = {w[0] * i + w[1] * j + w[2] * k + w[3], w[4] * i + w[5] * j + w[6] * k + w[7],
                       w[8] * i + w[9] * j + w[10] * k + w[11]};
        for (int c = 0; c < 3; ++c) x[c] += std::isfinite(dv[c * voxels + at]) ? dv[c * voxels + at] : 1e4;
        double p[3];
        for (int r = 0; r < 3; ++r) p[r] = to_index[r * 4] * x[0] + to_index[r * 4 + 1] * x[1] + to_index[r * 4 + 2] * x[2] + to_index[r * 4 + 3];
        double value = 0;
        int64_t lo[3];
        double t[3];
        bool inside = true;
        for (int c = 0; c < 3 && inside; ++c) {
          inside = p[c] > -1 && p[c] < mn[c];
          lo[c] = static_cast<int64_t>(std::floor(p[c]));
          t[c] = p[c] - lo[c];
        }
        for (int corner = 0; corner < 8 && inside; ++corner) {
          double wt = 1;
          int64_t q[3];
          for (int c = 0; c < 3; ++c) {
            const int bit = (corner >> c) & 1;
            q[c] = lo[c] + bit;
            wt *= bit ? t[c] : 1 - t[c];
          }
          if (q[0] < 0 || q[1] < 0 || q[2] < 0 || q[0] >= mn[0] || q[1] >= mn[1] || q[2] >= mn[2]) continue;
          value += wt * mv[q[0] + mn[0] * (q[1] + mn[1] * q[2])];
        }
        warped.data<float>()[at] = static_cast<float>(value);
      }
    }
  }
  const double sigma = absl::GetFlag(FLAGS_score_smooth);
  if (sigma > 0) {
    TESSERA_RETURN_IF_ERROR(GaussianSmooth(f, &f, {sigma, sigma, sigma}, Stream::Cpu()));
    NDArray w2 = warped;
    TESSERA_ASSIGN_OR_RETURN(w2, warped.AsType(DType::kFloat32));
    TESSERA_RETURN_IF_ERROR(GaussianSmooth(w2, &warped, {sigma, sigma, sigma}, Stream::Cpu()));
  }
  MattesMiOptions options;
  options.bins = bins;
  if (absl::GetFlag(FLAGS_score_fixed_box)) options.fixed_kernel = ParzenKernel::kBox;
  TESSERA_ASSIGN_OR_RETURN(MattesMiResult r, MattesMutualInformation(f, warped, nullptr, options, nullptr, Stream::Cpu()));
  return r.loss;
}

int Truth() {
  // --case identity: the fixed image registered onto itself (truth: x -> x).
  const bool self = absl::GetFlag(FLAGS_case) == "identity";
  const Case* c = self ? nullptr : FindCase(absl::GetFlag(FLAGS_case));
  if (c == nullptr && !self) return 2;
  const std::string dir = absl::GetFlag(FLAGS_dir);
  auto fixed = ReadNifti(dir + "/fixed.nii.gz");
  auto fixed_labels = ReadNifti(dir + "/fixed_labels.nii.gz");
  auto moving_labels = ReadNifti(dir + (self ? "/fixed_labels.nii.gz" : "/moving_labels.nii.gz"));
  for (const auto* v : {&fixed, &fixed_labels, &moving_labels}) {
    if (!v->ok()) return Fail(v->status());
  }
  auto fixed32 = fixed_labels->data.AsType(DType::kInt32);
  if (!fixed32.ok()) return Fail(fixed32.status());
  auto truth = self ? NDArray::Allocate({fixed->data.dim(0), fixed->data.dim(1), fixed->data.dim(2), 3}, DType::kFloat32)
                    : TrueDisplacement(*fixed, c->synth);
  if (!truth.ok()) return Fail(truth.status());
  if (self) std::fill(truth->data<float>(), truth->data<float>() + truth->num_elements(), 0.f);
  // The true map through our own label output path (WarpLabels); unknown
  // voxels are sent far outside (label 0).
  RegistrationResult true_result;
  true_result.affine_ras = Mat4{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  auto far = truth->AsType(DType::kFloat32);
  if (!far.ok()) return Fail(far.status());
  for (int64_t i = 0; i < far->num_elements(); ++i) {
    if (!std::isfinite(far->data<float>()[i])) far->data<float>()[i] = 1e4f;
  }
  true_result.displacement_ras = std::move(*far);
  auto truth_labels = WarpLabels(*moving_labels, *fixed, true_result, "cpu");
  if (!truth_labels.ok()) return Fail(truth_labels.status());
  if (absl::Status s = WriteNifti(Volume{*truth_labels, fixed->geometry, "true map"}, dir + "/truth_labels.nii.gz");
      !s.ok()) {
    return Fail(s);
  }
  auto truth_dice = ComputeDiceMeans(*fixed32, *truth_labels, fixed->geometry);
  if (!truth_dice.ok()) return Fail(truth_dice.status());
  std::printf("true map through WarpLabels: Dice %.4f all / %.4f large\n", truth_dice->mean_all, truth_dice->mean_large);

  std::vector<NDArray> maps = {*truth_labels};
  std::vector<std::string> names = {"true map"};
  const int score_bins = absl::GetFlag(FLAGS_score_mi_bins);
  std::optional<Volume> moving_image;
  if (score_bins > 0) {
    auto m = ReadNifti(dir + "/moving.nii.gz");
    if (!m.ok()) return Fail(m.status());
    moving_image = std::move(*m);
    auto loss = MiLossOfMap(*fixed, *moving_image, *truth, score_bins);
    if (!loss.ok()) return Fail(loss.status());
    std::printf("true map: MI loss %.5f (%d bins)\n", *loss, score_bins);
  }
  auto report = [&](const std::string& name, const Mat4& affine, const NDArray& v, const std::string& labels) -> int {
    auto map = MapDisplacement(fixed->geometry, affine, v);
    if (!map.ok()) return Fail(map.status());
    if (moving_image) {
      auto loss = MiLossOfMap(*fixed, *moving_image, *map, score_bins);
      if (!loss.ok()) return Fail(loss.status());
      std::printf("%s: MI loss %.5f (%d bins)\n", name.c_str(), *loss, score_bins);
    }
    auto err = CompareMaps(*map, *truth, *fixed32, kLargeLabelMinVoxels);
    if (!err.ok()) return Fail(err.status());
    std::printf("%s: map error vs truth over %lld labelled voxels: mean (R, A, S) (%+.3f, %+.3f, %+.3f) mm, "
                "rms %.3f mm (small-label voxels %.3f, %lld; large %.3f), p95 %.3f mm\n",
                name.c_str(), static_cast<long long>(err->voxels), err->mean_ras[0], err->mean_ras[1], err->mean_ras[2],
                err->rms, err->rms_small, static_cast<long long>(err->voxels_small), err->rms_large, err->p95);
    std::printf("%s: rms by label size (1-29 / 30-99 / 100-299 / 300-999 / >= 1000 voxels): %.3f / %.3f / %.3f / "
                "%.3f / %.3f mm\n",
                name.c_str(), err->rms_by_size[0], err->rms_by_size[1], err->rms_by_size[2], err->rms_by_size[3],
                err->rms_by_size[4]);
    auto on_grid = LabelsOnGrid(labels, *fixed);
    if (!on_grid.ok()) return Fail(on_grid.status());
    auto dice = ComputeDiceMeans(*fixed32, *on_grid, fixed->geometry);
    if (!dice.ok()) return Fail(dice.status());
    std::printf("%s: Dice %.4f all / %.4f large\n", name.c_str(), dice->mean_all, dice->mean_large);
    // The same map through our WarpLabels: a convention difference between
    // the program's label resampling and ours shows as disagreeing voxels.
    {
      RegistrationResult through;
      through.affine_ras = affine;
      auto v_copy = v.AsType(DType::kFloat32);
      if (!v_copy.ok()) return Fail(v_copy.status());
      through.displacement_ras = std::move(*v_copy);
      auto ours = WarpLabels(*moving_labels, *fixed, through, "cpu");
      if (!ours.ok()) return Fail(ours.status());
      int64_t differ = 0;
      for (int64_t i = 0; i < ours->num_elements(); ++i) differ += ours->data<int32_t>()[i] != on_grid->data<int32_t>()[i];
      auto odice = ComputeDiceMeans(*fixed32, *ours, fixed->geometry);
      if (!odice.ok()) return Fail(odice.status());
      std::printf("%s: its map through WarpLabels: Dice %.4f all / %.4f large, %lld of %lld voxels differ from its labels\n",
                  name.c_str(), odice->mean_all, odice->mean_large, static_cast<long long>(differ),
                  static_cast<long long>(ours->num_elements()));
    }
    // Is the error high-frequency? The same map smoothed, scored the same way.
    for (const std::string& sigma_text : absl::GetFlag(FLAGS_smooth_voxels)) {
      const double sigma = std::stod(sigma_text);
      RegistrationResult smoothed;
      smoothed.affine_ras = Mat4{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
      auto field = map->AsType(DType::kFloat32);
      if (!field.ok()) return Fail(field.status());
      if (absl::Status s = GaussianSmooth(*map, &*field, {sigma, sigma, sigma}, Stream::Cpu()); !s.ok()) return Fail(s);
      auto serr = CompareMaps(*field, *truth, *fixed32, kLargeLabelMinVoxels);
      if (!serr.ok()) return Fail(serr.status());
      smoothed.displacement_ras = std::move(*field);
      auto warped = WarpLabels(*moving_labels, *fixed, smoothed, "cpu");
      if (!warped.ok()) return Fail(warped.status());
      auto sdice = ComputeDiceMeans(*fixed32, *warped, fixed->geometry);
      if (!sdice.ok()) return Fail(sdice.status());
      std::printf("%s smoothed sigma %.1f voxels: rms %.3f mm, mean (%+.3f, %+.3f, %+.3f), Dice %.4f all / %.4f large\n",
                  name.c_str(), sigma, serr->rms, serr->mean_ras[0], serr->mean_ras[1], serr->mean_ras[2],
                  sdice->mean_all, sdice->mean_large);
    }
    maps.push_back(std::move(*on_grid));
    names.push_back(name);
    return 0;
  };
  for (const std::string& spec : absl::GetFlag(FLAGS_tessera)) {
    std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 1));
    if (parts.size() != 2) {
      std::fprintf(stderr, "registration_cases: --tessera wants NAME:DIR, got '%s'\n", spec.c_str());
      return 2;
    }
    if (!parts[1].empty() && parts[1][0] != '/') parts[1] = dir + "/" + parts[1];  // relative to DIR
    auto affine = ReadItkAffine(parts[1] + "/0GenericAffine.mat");
    if (!affine.ok()) return Fail(affine.status());
    // No 0Warp (a run of linear stages only): the affine alone, a zero field.
    auto warp = ReadAntsWarp(parts[1] + "/0Warp.nii.gz");
    if (!warp.ok() && !absl::IsNotFound(warp.status())) return Fail(warp.status());
    NDArray zero;
    if (!warp.ok()) {
      auto z = NDArray::Allocate({fixed->data.dim(0), fixed->data.dim(1), fixed->data.dim(2), 3}, DType::kFloat32);
      if (!z.ok()) return Fail(z.status());
      std::fill_n(z->data<float>(), z->num_elements(), 0.f);
      zero = std::move(*z);
    }
    if (int rc = report(parts[0], *affine, warp.ok() ? warp->data : zero, parts[1] + "/warped_labels.nii.gz"); rc != 0) {
      return rc;
    }
  }
  if (std::string e = absl::GetFlag(FLAGS_elastix); !e.empty()) {
    if (e[0] != '/') e = dir + "/" + e;  // relative to DIR
    auto def = ReadAntsWarp(e + "/def/deformationField.nii");
    if (!def.ok()) return Fail(def.status());
    const Mat4 identity{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    if (int rc = report("elastix", identity, def->data, e + "/labels/result.nii"); rc != 0) return rc;
  }
  auto table = DiceBySize(*fixed32, maps, names, fixed->geometry);
  if (!table.ok()) return Fail(table.status());
  std::printf("\nmean Dice per fixed-label size (lost: labels absent from the map)\n%s", table->c_str());
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
  o.metric = OptionFlag<Metric>(absl::GetFlag(FLAGS_metric), "--metric");
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
  if (!absl::GetFlag(FLAGS_stages).empty()) o.stages = OptionListFlag<Stage>(absl::GetFlag(FLAGS_stages), "--stages");
  if (absl::GetFlag(FLAGS_linear_lr) > 0) o.linear_lr = absl::GetFlag(FLAGS_linear_lr);
  if (absl::GetFlag(FLAGS_translation_scale) > 0) o.translation_scale_mm = absl::GetFlag(FLAGS_translation_scale);
  if (absl::GetFlag(FLAGS_matrix_scale) > 0) o.matrix_scale = absl::GetFlag(FLAGS_matrix_scale);
  if (absl::GetFlag(FLAGS_linear_samples) >= 0) o.linear_samples = absl::GetFlag(FLAGS_linear_samples);
  if (absl::GetFlag(FLAGS_deformable_lr) > 0) o.deformable_lr_voxels = absl::GetFlag(FLAGS_deformable_lr);
  if (absl::GetFlag(FLAGS_grad_sigma) >= 0) o.smooth_grad_sigma = absl::GetFlag(FLAGS_grad_sigma);
  if (absl::GetFlag(FLAGS_warp_sigma) >= 0) o.smooth_warp_sigma = absl::GetFlag(FLAGS_warp_sigma);
  if (absl::GetFlag(FLAGS_mi_bins) > 0) o.metric_options.mi_bins = absl::GetFlag(FLAGS_mi_bins);
  if (absl::GetFlag(FLAGS_lncc_window) > 0) o.metric_options.lncc_window = absl::GetFlag(FLAGS_lncc_window);
  if (!absl::GetFlag(FLAGS_precision).empty()) o.precision = OptionFlag<Precision>(absl::GetFlag(FLAGS_precision), "--precision");
  if (absl::GetFlag(FLAGS_fixed_blur) >= 0) o.metric_options.fixed_blur_voxels = absl::GetFlag(FLAGS_fixed_blur);
  if (!absl::GetFlag(FLAGS_mi_fixed_window).empty()) o.metric_options.mi_fixed_box = absl::GetFlag(FLAGS_mi_fixed_window) == "box";
  if (!absl::GetFlag(FLAGS_mi_grid_jitter).empty()) o.metric_options.mi_grid_jitter = absl::GetFlag(FLAGS_mi_grid_jitter) == "on";
  if (!absl::GetFlag(FLAGS_mi_voxel_jitter).empty()) o.metric_options.mi_voxel_jitter = absl::GetFlag(FLAGS_mi_voxel_jitter) == "on";
  if (absl::GetFlag(FLAGS_patience) > 0) o.patience = absl::GetFlag(FLAGS_patience);
  if (absl::GetFlag(FLAGS_sampling_seed) > 0) o.sampling_seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_sampling_seed));
  if (absl::GetFlag(FLAGS_tolerance) >= 0) o.tolerance = absl::GetFlag(FLAGS_tolerance);
  if (absl::GetFlag(FLAGS_plateau_window) >= 0) o.plateau_window = absl::GetFlag(FLAGS_plateau_window);
  if (!absl::GetFlag(FLAGS_plateau_window_finest).empty()) o.plateau_window_finest = absl::GetFlag(FLAGS_plateau_window_finest) == "on";
  if (!absl::GetFlag(FLAGS_dense_finest_linear).empty()) o.dense_finest_linear = absl::GetFlag(FLAGS_dense_finest_linear) == "on";
  if (!absl::GetFlag(FLAGS_full_finest_deformable).empty()) {
    o.full_finest_deformable = absl::GetFlag(FLAGS_full_finest_deformable) == "on";
  }
  if (absl::GetFlag(FLAGS_finest_remaining_gain) >= 0) o.finest_remaining_gain = absl::GetFlag(FLAGS_finest_remaining_gain);
  if (!absl::GetFlag(FLAGS_deformable_step).empty()) o.deformable_step = OptionFlag<DeformableStep>(absl::GetFlag(FLAGS_deformable_step), "--deformable_step");
  if (!absl::GetFlag(FLAGS_memory_mode).empty()) o.memory_mode = OptionFlag<MemoryMode>(absl::GetFlag(FLAGS_memory_mode), "--memory_mode");
  if (absl::GetFlag(FLAGS_halve_after) >= 0) o.deformable_halve_after = absl::GetFlag(FLAGS_halve_after);
  if (absl::GetFlag(FLAGS_min_step) > 0) o.deformable_min_step_fraction = absl::GetFlag(FLAGS_min_step);
  if (!absl::GetFlag(FLAGS_deformable_model).empty()) o.deformable_model = OptionFlag<DeformableModel>(absl::GetFlag(FLAGS_deformable_model), "--deformable_model");
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
  if (const std::string out = absl::GetFlag(FLAGS_out); !out.empty()) {
    auto files = WriteRegistrationOutputs(*result, *fixed, out, &*warped, /*inverse_warp=*/false);
    if (!files.ok()) return Fail(files.status());
  }
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
  if (verb == "truth") return Truth();
  std::fprintf(stderr, "usage: registration_cases list | make --case NAME --dir DIR | dice --fixed_labels F --labels L | "
                       "folded --jacobian J | register --dir DIR | truth --case NAME --dir DIR [--tessera NAME:OUT,...] "
                       "[--elastix EDIR]\n");
  return 2;
}
