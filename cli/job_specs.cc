#include "cli/job_specs.h"

#include "cli/apply_transforms_args.h"
#include "cli/fp_subjects.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "kernels/registration/pipeline/option_enums.h"
#include "services/fingerprint/extract/image_template.h"
#include "tessera/v1/fingerprint.pb.h"
#include "tessera/v1/som.pb.h"
#include "cli/recon_args.h"
#include "cli/output_args.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<Args> ParseWords(const std::vector<FlagSpec>& specs, const std::vector<std::string>& words,
                                int first) {
  std::vector<char*> argv;
  std::vector<std::string> copy = words;
  for (std::string& w : copy) argv.push_back(w.data());
  return Args::Parse(specs, static_cast<int>(argv.size()), argv.data(), first);
}

absl::StatusOr<std::vector<int32_t>> ParseIntList(const std::string& flag, const std::string& text) {
  std::vector<int32_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " expects comma-separated integers, got '", text, "'"));
    }
    out.push_back(v);
  }
  return out;
}

// --gpus: "" (none), a count "N" (GPUs 0..N-1) or ordinals with a comma
// ("0,2", "3,"), as `docker --gpus` users expect a count.
absl::StatusOr<std::vector<int32_t>> ParseGpuList(const std::string& text) {
  if (text.empty()) return std::vector<int32_t>{};
  if (text.find(',') != std::string::npos) return ParseIntList("gpus", text);
  int count = 0;
  if (!absl::SimpleAtoi(text, &count) || count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpus '", text, "': expected a count >= 1 or a comma-separated list of GPU ordinals"));
  }
  std::vector<int32_t> out(count);
  for (int i = 0; i < count; ++i) out[i] = i;
  return out;
}

absl::StatusOr<v1::JobSpec> RegisterSpec(const std::vector<std::string>& words) {
  TESSERA_ASSIGN_OR_RETURN(Args args, ParseWords(RegisterFlags(), words, 1));
  TESSERA_ASSIGN_OR_RETURN(v1::RegisterRequest request, RegisterRequestFromArgs(args, true));
  v1::JobSpec spec;
  spec.set_kind("registration");
  spec.mutable_spec()->PackFrom(request);
  return spec;
}

absl::StatusOr<v1::JobSpec> SomTrainSpec(const std::vector<std::string>& words) {
  const std::vector<FlagSpec> flags = {
      {"corpus", "", "corpus file on the server (.csr or libsvm)"},
      {"features", "", "feature names file"},
      {"doc-ids", "", "document ids file"},
      {"map", "32x32", "WIDTHxHEIGHT"},
      {"toroid", "", "toroidal grid", true},
      {"epochs", "40", "at most this many epochs"},
      {"radius-epochs", "", "epochs over which the radius shrinks (default min(10, 3/4 epochs))"},
      {"init", "pca", "pca or random"},
      {"weights", "fp32", "fp32 or fp16"},
      {"device", "", "auto, cpu or cuda (default: the server's)"},
      {"holdout", "0.1", "held-out fraction"},
      {"seed", "1", "random seed"},
      {"out", "", "atlas id (the last path component is used)"},
  };
  TESSERA_ASSIGN_OR_RETURN(Args args, ParseWords(flags, words, 2));
  if (args.Get("corpus").empty() || args.Get("out").empty()) {
    return absl::InvalidArgumentError("som train: --corpus and --out are required");
  }
  v1::CreateAtlasRequest request;
  request.mutable_corpus()->set_path(ServerPath(args.Get("corpus"), true));
  request.mutable_corpus()->set_feature_names_path(ServerPath(args.Get("features"), true));
  request.mutable_corpus()->set_document_ids_path(ServerPath(args.Get("doc-ids"), true));
  const std::vector<std::string> map = absl::StrSplit(absl::AsciiStrToLower(args.Get("map")), 'x');
  int width = 0, height = 0;
  if (map.size() != 2 || !absl::SimpleAtoi(map[0], &width) || !absl::SimpleAtoi(map[1], &height)) {
    return absl::InvalidArgumentError(absl::StrCat("som train: --map '", args.Get("map"), "' is not WIDTHxHEIGHT"));
  }
  v1::AtlasOptions* o = request.mutable_options();
  o->set_width(width);
  o->set_height(height);
  o->set_toroid(args.GetBool("toroid"));
  TESSERA_ASSIGN_OR_RETURN(int epochs, args.GetInt("epochs"));
  o->set_epochs(epochs);
  // The same default as a local `tessera som train`.
  int radius_epochs = std::min(10, std::max(1, (3 * epochs + 3) / 4));
  if (!args.Get("radius-epochs").empty()) {
    TESSERA_ASSIGN_OR_RETURN(radius_epochs, args.GetInt("radius-epochs"));
  }
  o->set_radius_decay_epochs(radius_epochs);
  o->set_init(args.Get("init"));
  o->set_weight_type(args.Get("weights"));
  o->set_device(args.Get("device"));
  double holdout = 0;
  if (!absl::SimpleAtod(args.Get("holdout"), &holdout)) {
    return absl::InvalidArgumentError("som train: --holdout must be a number");
  }
  o->set_holdout_fraction(holdout);
  uint64_t seed = 0;
  if (!absl::SimpleAtoi(args.Get("seed"), &seed)) return absl::InvalidArgumentError("som train: --seed must be an integer");
  o->set_seed(seed);
  request.set_atlas_id(fs::path(args.Get("out")).lexically_normal().filename().string());
  v1::JobSpec spec;
  spec.set_kind("som.train");
  spec.mutable_spec()->PackFrom(request);
  return spec;
}

absl::StatusOr<v1::JobSpec> FpSearchSpec(const std::vector<std::string>& words) {
  const std::vector<FlagSpec> flags = {
      {"gallery", "", "the server's gallery to search, by name (default: 'default'; a name, not a directory: "
                      "the server's galleries live under its --galleries-root)"},
      {"top", "10", "candidates per probe"},
      {"matcher", "", "lssr, dmc, fusion or cascade (default: the server's)"},
      {"format", "auto", "template format: auto, iso, ansi or xyt"},
      {"device", "", "ignored: the server's backend"},
      {"min-quality", "0", "images: refuse those of lower quality (0-100; 0: the server's minimum)"},
      {"ppi", "0", "images: the resolution of files that do not say theirs"},
      {"finger-positions", "", "only templates of these finger positions (e.g. 1,6)"},
      {"impression-types", "", "only templates of these impression types"},
  };
  TESSERA_ASSIGN_OR_RETURN(Args args, ParseWords(flags, words, 2));
  TESSERA_ASSIGN_OR_RETURN(fingerprint::TemplateFilter filter, FilterFromFlags(args));
  if (args.positional().empty()) {
    return absl::InvalidArgumentError("fp search: name at least one probe (template or image file)");
  }
  TESSERA_ASSIGN_OR_RETURN(int min_quality, args.GetInt("min-quality"));
  TESSERA_ASSIGN_OR_RETURN(int ppi, args.GetInt("ppi"));
  v1::SearchBatchRequest request;
  TESSERA_ASSIGN_OR_RETURN(int top, args.GetInt("top"));
  request.set_top_k(top);
  request.set_matcher(args.Get("matcher"));
  request.set_gallery(args.Get("gallery"));  // checked by the server (gallery_names.h)
  for (int f : filter.finger_positions) request.add_finger_positions(f);
  for (int t : filter.impression_types) request.add_impression_types(t);
  for (const std::string& file : args.positional()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("fp search: cannot read '", file, "'"));
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    v1::FingerprintTemplate* probe = request.add_probes();
    if (fingerprint::LooksLikeImage(bytes)) {  // the server extracts it
      probe->mutable_image()->set_data(std::move(bytes));
      probe->mutable_image()->set_min_quality(min_quality);
      probe->mutable_image()->set_ppi(ppi);
      continue;
    }
    probe->set_data(bytes);
    std::string format = args.Get("format");
    if (format == "auto") {
      const std::string ext = absl::AsciiStrToLower(fs::path(file).extension().string());
      format = ext == ".iso" || ext == ".ist" ? "iso" : ext == ".ansi" || ext == ".378" ? "ansi" : ext == ".xyt" ? "xyt" : "";
    }
    probe->set_format(format == "iso"    ? v1::TEMPLATE_FORMAT_ISO19794
                      : format == "ansi" ? v1::TEMPLATE_FORMAT_ANSI378
                      : format == "xyt"  ? v1::TEMPLATE_FORMAT_XYT
                                         : v1::TEMPLATE_FORMAT_AUTO);
  }
  v1::JobSpec spec;
  spec.set_kind("fingerprint.search");
  spec.mutable_spec()->PackFrom(request);
  return spec;
}

}  // namespace

std::vector<FlagSpec> RegisterFlags() {
  std::vector<FlagSpec> flags = {
      {"fixed", "", "fixed (reference) volume, NIfTI"},
      {"moving", "", "moving volume, NIfTI"},
      {"out", "", "output directory (warped.nii.gz, 0GenericAffine.mat, 0Warp.nii.gz, ...)"},
      {"fixed-labels", "", "label map on the fixed grid (for Dice)"},
      {"moving-labels", "", "label map of the moving image (warped to warped_labels.nii.gz)"},
      {"metric", "lncc", "similarity: mse, lncc or mi"},
      {"stages", "rigid,affine,deformable", "comma-separated stages"},
      {"scales", "4,2,1", "downsampling factors, coarse to fine"},
      {"init", "com", "initial transform: com (centres of mass) or none (headers)"},
      {"initial-transform", "",
       "start from this affine instead of --init: ANTs 0GenericAffine.mat or ITK text (.txt/.tfm), fixed -> moving"},
      {"fixed-mask", "", "mask in the fixed image's space (nonzero = the metric uses the voxel; any grid)"},
      {"moving-mask", "", "mask in the moving image's space (a voxel counts when its mapped point is inside)"},
      {"lncc-window", "7", "LNCC window, voxels (odd)"},
      {"mi-bins", "32", "mutual-information histogram bins"},
      {"deformable-step", "normalized", "deformable step rule: normalized (greedy, ANTs) or adam (per voxel)"},
      {"memory-mode", "lean", "deformable stage memory: lean or standard (same result)"},
      {"deformable-model", "greedy", "deformable transform: greedy (dense field) or bspline (control grid, as elastix)"},
      {"bspline-spacing-mm", "10", "B-spline control spacing at the finest level, mm (coarser levels double it)"},
      {"precision", "mixed",
       "lean deformable stage storage: full (float, 36 B/voxel) or mixed (fp16 images + bf16 gradient, 26 B/voxel; "
       "lncc, one shard)"},
      {"linear-samples", "8192", "voxels drawn per rigid/affine iteration on the CPU (0 = every voxel)"},
      {"plateau-window-finest", "",
       "on or off: the deformable stage's window plateau stop on the finest level too (empty: the server's default, "
       "on)"},
      {"dense-finest-linear", "",
       "on or off: rigid and affine on the finest level too where the CPU must read every voxel (lncc) of a large "
       "image (empty: the default, off)"},
      {"full-finest-deformable", "",
       "on or off: the whole deformable budget on the finest level of a large image on the CPU (empty: the default, "
       "off: at most 40 iterations where the next coarser level has >= 2^18 voxels)"},
      {"finest-remaining-gain", "",
       "the finest deformable level's remaining-gain stop, a fraction of |loss| in [0, 1) (empty: the default, 0 = "
       "off)"},
      {"seed", "1", "seed of the sampled iterations (same seed, same result)"},
      {"shards", "0", "deformable stage split along z into H ranks (0 = one per GPU of --gpus, or 1)"},
      {"gpus", "", "GPUs of the sharded ranks: a count N (GPUs 0..N-1) or a list of ordinals such as 0,2 (or 3,)"},
      {"device-memory-budget", "0",
       "device memory the deformable stage may hold, e.g. 20G, 512M or bytes (0 = no limit); beyond it the stage "
       "runs out of core (shards in host memory take turns on the GPU)"},
      {"inverse-warp", "", "also write 0InverseWarp.nii.gz", true},
      {"device", "auto", "compute backend: auto, cpu or cuda"},
      {"quiet", "", "no progress on stderr", true},
  };
  for (FlagSpec& f : OutputFormatFlags("the warped image as the derived DICOM series warped_dicom/, the warped labels "
                                       "as the DICOM SEG warped_labels_seg.dcm, no NIfTI of them; the transforms stay "
                                       "ITK/ANTs files")) {
    flags.push_back(std::move(f));
  }
  return flags;
}

namespace {

// "20G", "512M", "64K" (powers of 1024, optional trailing B/iB) or plain bytes.
absl::StatusOr<int64_t> ParseByteSize(const char* flag, const std::string& text) {
  std::string t = absl::AsciiStrToUpper(text);
  for (const char* suffix : {"IB", "B"}) {
    if (t.size() > std::strlen(suffix) && absl::EndsWith(t, suffix) && !std::isdigit(t[t.size() - std::strlen(suffix) - 1] & 0xff) ) {
      t.resize(t.size() - std::strlen(suffix));
      break;
    }
  }
  int shift = 0;
  if (!t.empty() && (t.back() == 'K' || t.back() == 'M' || t.back() == 'G' || t.back() == 'T')) {
    shift = t.back() == 'K' ? 10 : t.back() == 'M' ? 20 : t.back() == 'G' ? 30 : 40;
    t.pop_back();
  }
  double value = 0;
  if (t.empty() || !absl::SimpleAtod(t, &value) || !std::isfinite(value) || value < 0 || value * std::ldexp(1.0, shift) > 9e18) {
    return absl::InvalidArgumentError(absl::StrCat("register: --", flag, " '", text,
                                                   "': expected bytes >= 0 with an optional K, M, G or T suffix"));
  }
  return static_cast<int64_t>(std::llround(value * std::ldexp(1.0, shift)));
}

}  // namespace

absl::StatusOr<v1::RegisterRequest> RegisterRequestFromArgs(const Args& args, bool absolute) {
  if (args.Get("fixed").empty() || args.Get("moving").empty() || args.Get("out").empty()) {
    return absl::InvalidArgumentError("register: --fixed, --moving and --out are required");
  }
  v1::RegisterRequest r;
  r.mutable_fixed()->set_path(ServerPath(args.Get("fixed"), absolute));
  r.mutable_moving()->set_path(ServerPath(args.Get("moving"), absolute));
  if (!args.Get("fixed-labels").empty()) r.mutable_fixed_labels()->set_path(ServerPath(args.Get("fixed-labels"), absolute));
  if (!args.Get("moving-labels").empty()) {
    r.mutable_moving_labels()->set_path(ServerPath(args.Get("moving-labels"), absolute));
  }
  r.set_output_dir(ServerPath(args.Get("out"), absolute));
  if (!args.Get("fixed-mask").empty()) r.mutable_fixed_mask()->set_path(ServerPath(args.Get("fixed-mask"), absolute));
  if (!args.Get("moving-mask").empty()) r.mutable_moving_mask()->set_path(ServerPath(args.Get("moving-mask"), absolute));
  if (!args.Get("initial-transform").empty()) {
    r.mutable_initial_transform()->set_path(ServerPath(args.Get("initial-transform"), absolute));
  }
  v1::RegistrationOptions* o = r.mutable_options();
  o->set_metric(args.Get("metric"));
  for (absl::string_view s : absl::StrSplit(args.Get("stages"), ',', absl::SkipEmpty())) o->add_stages(std::string(s));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> scales, ParseIntList("scales", args.Get("scales")));
  for (int32_t s : scales) o->add_scales(s);
  o->set_init(args.Get("init"));
  TESSERA_ASSIGN_OR_RETURN(int window, args.GetInt("lncc-window"));
  TESSERA_ASSIGN_OR_RETURN(int bins, args.GetInt("mi-bins"));
  o->set_lncc_window(window);
  o->set_mi_bins(bins);
  o->set_inverse_warp(args.GetBool("inverse-warp"));
  // The named values are checked here too, to name the flag (the server
  // checks the request again).
  using registration::ParseOption;
  const std::string step = args.Get("deformable-step"), memory = args.Get("memory-mode");
  const std::string model = args.Get("deformable-model"), precision = args.Get("precision");
  TESSERA_RETURN_IF_ERROR(ParseOption<registration::Metric>(args.Get("metric"), "register: --metric").status());
  TESSERA_RETURN_IF_ERROR(ParseOption<registration::Init>(args.Get("init"), "register: --init").status());
  TESSERA_RETURN_IF_ERROR(ParseOption<registration::DeformableStep>(step, "register: --deformable-step").status());
  TESSERA_RETURN_IF_ERROR(ParseOption<registration::MemoryMode>(memory, "register: --memory-mode").status());
  TESSERA_RETURN_IF_ERROR(ParseOption<registration::DeformableModel>(model, "register: --deformable-model").status());
  TESSERA_RETURN_IF_ERROR(ParseOption<registration::Precision>(precision, "register: --precision").status());
  o->set_deformable_step(step);
  o->set_memory_mode(memory);
  double spacing = 0;
  if (!absl::SimpleAtod(args.Get("bspline-spacing-mm"), &spacing) || !std::isfinite(spacing) || !(spacing > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("register: --bspline-spacing-mm '", args.Get("bspline-spacing-mm"),
                                                   "': expected a number of mm > 0"));
  }
  o->set_deformable_model(model);
  o->set_bspline_spacing_mm(spacing);
  o->set_precision(precision);
  int64_t samples = 0;
  uint64_t seed = 0;
  if (!absl::SimpleAtoi(args.Get("linear-samples"), &samples) || samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("register: --linear-samples '", args.Get("linear-samples"), "': expected an integer >= 0"));
  }
  if (!absl::SimpleAtoi(args.Get("seed"), &seed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("register: --seed '", args.Get("seed"), "': expected an integer >= 0"));
  }
  o->set_linear_samples(samples);
  o->set_seed(seed);
  const std::string gain = args.Get("finest-remaining-gain");
  // on / off switches of RegistrationOptions (empty: the server's default).
  for (const auto& [flag, set] : std::initializer_list<std::pair<const char*, void (v1::RegistrationOptions::*)(bool)>>{
           {"plateau-window-finest", &v1::RegistrationOptions::set_plateau_window_finest},
           {"dense-finest-linear", &v1::RegistrationOptions::set_dense_finest_linear},
           {"full-finest-deformable", &v1::RegistrationOptions::set_full_finest_deformable}}) {
    const std::string value = args.Get(flag);
    if (value.empty()) continue;
    if (value != "on" && value != "off") {
      return absl::InvalidArgumentError(absl::StrCat("register: --", flag, " '", value, "': expected on or off"));
    }
    (o->*set)(value == "on");
  }
  if (!gain.empty()) {
    double g = 0;
    if (!absl::SimpleAtod(gain, &g) || !std::isfinite(g) || g < 0 || g >= 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("register: --finest-remaining-gain '", gain, "': expected a fraction in [0, 1)"));
    }
    o->set_finest_remaining_gain(g);
  }
  int shards = 0;
  if (!absl::SimpleAtoi(args.Get("shards"), &shards) || shards < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("register: --shards '", args.Get("shards"), "': expected an integer >= 0"));
  }
  o->set_shards(shards);
  TESSERA_ASSIGN_OR_RETURN(const int64_t budget, ParseByteSize("device-memory-budget", args.Get("device-memory-budget")));
  o->set_device_memory_budget_bytes(budget);
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> gpus, ParseGpuList(args.Get("gpus")));
  for (int32_t g : gpus) o->add_gpus(g);
  o->set_device(args.Get("device"));
  TESSERA_RETURN_IF_ERROR(OutputOptionsFromArgs(args, absolute, r.mutable_output()));
  return r;
}

// "recon ct|pet|mri|us ...": --out is the server-side output directory.
absl::StatusOr<v1::JobSpec> ReconSpec(const std::vector<std::string>& words) {
  const std::string modality = words.size() >= 2 ? words[1] : "";
  if (modality != "ct" && modality != "pet" && modality != "mri" && modality != "us") {
    return absl::InvalidArgumentError("recon: the first word must be ct, pet, mri or us");
  }
  TESSERA_ASSIGN_OR_RETURN(Args args, ParseWords(ReconFlags(modality), words, 2));
  TESSERA_ASSIGN_OR_RETURN(v1::ReconstructRequest request, ReconRequestFromArgs(args, modality, true));
  request.set_output_dir(ServerPath(args.Get("out"), true));
  v1::JobSpec spec;
  spec.set_kind("reconstruction");
  spec.mutable_spec()->PackFrom(request);
  return spec;
}

absl::StatusOr<v1::JobSpec> JobSpecFromCommandLine(const std::vector<std::string>& words) {
  if (!words.empty() && words[0] == "register") return RegisterSpec(words);
  if (words.size() >= 2 && words[0] == "som" && words[1] == "train") return SomTrainSpec(words);
  if (words.size() >= 2 && words[0] == "fp" && words[1] == "search") return FpSearchSpec(words);
  if (!words.empty() && words[0] == "recon") return ReconSpec(words);
  if (!words.empty() && words[0] == "apply-transforms") return ApplyTransformsSpec(words);
  return absl::InvalidArgumentError(
      "job submit: the verbs that run as jobs are `register ...`, `som train ...`, `fp search ...`, "
      "`recon ct|pet|mri|us ...` and `apply-transforms ...`");
}

}  // namespace tessera::cli
