// `tessera register`: registers a moving volume to a fixed one on this
// machine, writes the ANTs-style outputs to --out and prints a JSON summary
// on stdout (progress goes to stderr).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "services/registration/registration_job.h"

namespace tessera::cli {
namespace {

std::vector<FlagSpec> RegisterFlags() {
  return {
      {"fixed", "", "fixed (reference) volume, NIfTI"},
      {"moving", "", "moving volume, NIfTI"},
      {"out", "", "output directory (warped.nii.gz, 0GenericAffine.mat, 0Warp.nii.gz, ...)"},
      {"fixed-labels", "", "label map on the fixed grid (for Dice)"},
      {"moving-labels", "", "label map of the moving image (warped to warped_labels.nii.gz)"},
      {"metric", "lncc", "similarity: mse, lncc or mi"},
      {"stages", "rigid,affine,deformable", "comma-separated stages"},
      {"scales", "4,2,1", "downsampling factors, coarse to fine"},
      {"init", "com", "initial transform: com (centres of mass) or none (headers)"},
      {"lncc-window", "7", "LNCC window, voxels (odd)"},
      {"mi-bins", "32", "mutual-information histogram bins"},
      {"inverse-warp", "", "also write 0InverseWarp.nii.gz", true},
      {"device", "auto", "compute backend: auto, cpu or cuda"},
      {"quiet", "", "no progress on stderr", true},
  };
}

absl::StatusOr<std::vector<int>> ParseInts(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      return absl::InvalidArgumentError("--" + flag + " expects comma-separated integers, got '" + text + "'");
    }
    out.push_back(v);
  }
  return out;
}

int Usage(const std::vector<FlagSpec>& specs, FILE* out, int rc) {
  std::fprintf(out, "usage: tessera register --fixed F.nii.gz --moving M.nii.gz --out DIR [flags]\n%s",
               FlagsHelp(specs).c_str());
  return rc;
}

}  // namespace

int RunRegister(int argc, char** argv) {
  const std::vector<FlagSpec> specs = RegisterFlags();
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok()) {
    std::fprintf(stderr, "tessera register: %s\n", std::string(args.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
  if (args->help()) return Usage(specs, stdout, 0);
  if (args->Get("fixed").empty() || args->Get("moving").empty() || args->Get("out").empty()) {
    std::fprintf(stderr, "tessera register: --fixed, --moving and --out are required\n");
    return Usage(specs, stderr, 2);
  }
  registration::RegistrationOptions options;
  options.metric = args->Get("metric");
  options.stages = absl::StrSplit(args->Get("stages"), ',', absl::SkipEmpty());
  options.init = args->Get("init");
  options.device = args->Get("device");
  auto scales = ParseInts("scales", args->Get("scales"));
  auto window = args->GetInt("lncc-window");
  auto bins = args->GetInt("mi-bins");
  for (const absl::Status& s : {scales.status(), window.status(), bins.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "tessera register: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  options.scales = *scales;
  options.metric_options.lncc_window = *window;
  options.metric_options.mi_bins = *bins;

  auto inputs = registration::ReadRegistrationInputs(args->Get("fixed"), args->Get("moving"),
                                                     args->Get("fixed-labels"), args->Get("moving-labels"));
  if (!inputs.ok()) {
    std::fprintf(stderr, "tessera register: %s\n", std::string(inputs.status().message()).c_str());
    return 1;
  }
  const bool quiet = args->GetBool("quiet");
  std::string last_key;
  auto progress = [&](const registration::RegistrationProgress& p) {
    if (quiet) return;
    const std::string key = p.stage + std::to_string(p.scale);
    if (key != last_key || p.iteration % 25 == 0) {
      std::fprintf(stderr, "[%s x%d] iteration %d/%d loss %.6g\n", p.stage.c_str(), p.scale, p.iteration,
                   p.max_iterations, p.loss);
      last_key = key;
    }
  };
  auto summary = registration::RunRegistration(*inputs, options, args->Get("out"), args->GetBool("inverse-warp"),
                                               progress);
  if (!summary.ok()) {
    std::fprintf(stderr, "tessera register: %s\n", summary.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", registration::SummaryToJson(*summary, options).c_str());
  return 0;
}

}  // namespace tessera::cli
