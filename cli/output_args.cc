#include "cli/output_args.h"

#include "absl/strings/str_cat.h"

namespace tessera::cli {

std::vector<FlagSpec> OutputFormatFlags(const std::string& dicom_outputs) {
  return {
      {"output-format", "nifti", absl::StrCat("result volumes as nifti, dicom (", dicom_outputs, ") or both")},
      {"deidentify", "",
       "DICOM outputs: apply the DICOM basic confidentiality profile (pseudonymous patient, no dates, new UIDs)",
       true},
      {"reference-series", "",
       "DICOM outputs: a DICOM series (directory or file) whose patient and study they keep (register: default "
       "the fixed image when it is DICOM; else a new study)"},
      {"series-description", "", "DICOM outputs: the SeriesDescription (default: what made it)"},
  };
}

absl::Status OutputOptionsFromArgs(const Args& args, bool absolute, v1::OutputOptions* options) {
  const std::string format = args.Get("output-format");
  if (format != "nifti" && format != "dicom" && format != "both") {
    return absl::InvalidArgumentError(
        absl::StrCat("--output-format '", format, "': expected nifti, dicom or both"));
  }
  const bool dicom = format != "nifti";
  for (const char* flag : {"deidentify", "reference-series", "series-description"}) {
    const bool set = std::string(flag) == "deidentify" ? args.GetBool(flag) : !args.Get(flag).empty();
    if (set && !dicom) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " applies to DICOM outputs only: add --output-format dicom or both"));
    }
  }
  options->set_format(format);
  options->set_deidentify(args.GetBool("deidentify"));
  if (!args.Get("reference-series").empty()) {
    options->set_reference_series(ServerPath(args.Get("reference-series"), absolute));
  }
  options->set_series_description(args.Get("series-description"));
  return absl::OkStatus();
}

}  // namespace tessera::cli
