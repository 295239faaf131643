#include "cli/apply_transforms_args.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/output_args.h"
#include "common/status.h"
#include "kernels/registration/pipeline/apply_transforms.h"

namespace tessera::cli {
namespace {

std::string Absolute(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

absl::StatusOr<double> GetDouble(const Args& args, const char* flag) {
  double v = 0;
  if (!absl::SimpleAtod(args.Get(flag), &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat("apply-transforms: --", flag, " expects a number, got '",
                                                   args.Get(flag), "'"));
  }
  return v;
}

}  // namespace

std::vector<FlagSpec> ApplyTransformsFlags(bool job) {
  std::vector<FlagSpec> flags = {
      {"reference", "", "the output grid (NIfTI or a DICOM series; its geometry only)"},
      {"input", "", "image or label map to resample (NIfTI or a DICOM series)"},
      {"points", "", "or a point set: CSV with a header, x,y,z in LPS mm (other columns kept)"},
      {"transform", "",
       "a transform file, ANTs order (the first listed is applied first to a reference point): "
       "0Warp.nii.gz, 0GenericAffine.mat, ITK .txt/.tfm; '[F,1]' inverts an affine",
       false, true},
      {"interpolation", "linear", "linear, nearest, bspline, label (ANTs MultiLabel) or generic-label"},
      {"label-sigma-mm", "0", "label: the Gaussian's sigma in mm (0: the input's mean spacing)"},
      {"default-value", "0", "value outside the input"},
      {"device", "auto", "auto, cpu or cuda (label and generic-label run on the CPU)"},
  };
  if (job) {
    flags.push_back({"registration-job", "",
                     "a succeeded registration job of the server: its warp then affine, after any --transform"});
    flags.push_back({"inverse", "", "with --registration-job: its inverse chain (needs the job's inverse warp)", true});
    flags.push_back({"output-dir", "", "server directory the results are also written to"});
    for (FlagSpec& f : OutputFormatFlags("applied_dicom/ (applied_seg.dcm for label maps)")) flags.push_back(std::move(f));
  } else {
    flags.push_back({"out", "", "the result: .nii/.nii.gz for an image or label map, .csv for points"});
    flags.push_back({"quiet", "", "print only the JSON summary", true});
  }
  return flags;
}

absl::StatusOr<v1::ApplyTransformsRequest> ApplyTransformsRequestFromArgs(const Args& args, bool job) {
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("apply-transforms: unexpected argument '", args.positional()[0], "'"));
  }
  v1::ApplyTransformsRequest request;
  const bool has_input = !args.Get("input").empty(), has_points = !args.Get("points").empty();
  if (has_input == has_points) {
    return absl::InvalidArgumentError(has_input ? "apply-transforms: give --input or --points, not both"
                                                : "apply-transforms: --input (or --points) is required");
  }
  if (has_input && args.Get("reference").empty()) {
    return absl::InvalidArgumentError("apply-transforms: --reference is required with --input");
  }
  if (!args.Get("reference").empty()) request.mutable_reference()->set_path(Absolute(args.Get("reference")));
  if (has_input) request.mutable_input()->set_path(Absolute(args.Get("input")));
  if (has_points) request.set_points_path(Absolute(args.Get("points")));
  for (const std::string& t : args.GetAll("transform")) {
    absl::StatusOr<std::pair<std::string, bool>> parsed = registration::ParseAntsTransformArg(t);
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("apply-transforms: --transform ", parsed.status().message()));
    v1::TransformSource* source = request.add_transforms();
    source->set_path(Absolute(parsed->first));
    source->set_inverse(parsed->second);
  }
  if (job && !args.Get("registration-job").empty()) {
    v1::TransformSource* source = request.add_transforms();
    source->set_registration_job_id(args.Get("registration-job"));
    source->set_inverse(args.GetBool("inverse"));
  } else if (job && args.GetBool("inverse")) {
    return absl::InvalidArgumentError("apply-transforms: --inverse goes with --registration-job (files: '[F,1]')");
  }
  if (request.transforms().empty()) {
    return absl::InvalidArgumentError(job ? "apply-transforms: give --transform (repeatable) or --registration-job"
                                          : "apply-transforms: give --transform (repeatable)");
  }
  const absl::StatusOr<registration::ApplyInterpolation> interp =
      registration::ParseApplyInterpolation(args.Get("interpolation"));
  if (!interp.ok()) return absl::InvalidArgumentError(absl::StrCat("apply-transforms: --", interp.status().message()));
  request.set_interpolation(registration::ApplyInterpolationName(*interp));
  TESSERA_ASSIGN_OR_RETURN(const double sigma, GetDouble(args, "label-sigma-mm"));
  if (sigma < 0) return absl::InvalidArgumentError("apply-transforms: --label-sigma-mm must be >= 0");
  request.set_label_sigma_mm(sigma);
  TESSERA_ASSIGN_OR_RETURN(const double default_value, GetDouble(args, "default-value"));
  request.set_default_value(default_value);
  const std::string device = args.Get("device");
  if (device != "auto" && device != "cpu" && device != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("apply-transforms: --device '", device, "' is not auto, cpu or cuda"));
  }
  request.set_device(device);
  if (job) {
    if (!args.Get("output-dir").empty()) request.set_output_dir(Absolute(args.Get("output-dir")));
    TESSERA_RETURN_IF_ERROR(OutputOptionsFromArgs(args, /*absolute=*/true, request.mutable_output()));
  }
  return request;
}

absl::StatusOr<v1::JobSpec> ApplyTransformsSpec(const std::vector<std::string>& words) {
  std::vector<char*> argv;
  std::vector<std::string> copy = words;
  for (std::string& w : copy) argv.push_back(w.data());
  TESSERA_ASSIGN_OR_RETURN(Args args, Args::Parse(ApplyTransformsFlags(true), static_cast<int>(argv.size()), argv.data(), 1));
  TESSERA_ASSIGN_OR_RETURN(v1::ApplyTransformsRequest request, ApplyTransformsRequestFromArgs(args, true));
  v1::JobSpec spec;
  spec.set_kind("apply_transforms");
  spec.mutable_spec()->PackFrom(request);
  return spec;
}

}  // namespace tessera::cli
