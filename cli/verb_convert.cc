// `tessera convert IN... OUT.nii[.gz]`: a DICOM series (a directory, a zip,
// or files) to NIfTI, with the geometry dcm2niix gives it
// (common/dicom/dicom_series.h). Writing DICOM is not implemented yet.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "common/dicom/dicom_series.h"
#include "common/nifti_io.h"

namespace tessera::cli {

int RunConvert(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"series", "", "which series of a mixed input: SeriesInstanceUID or 1-based index"},
  };
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok() || args->help() || args->positional().size() < 2) {
    if (!args.ok()) std::fprintf(stderr, "tessera convert: %s\n", std::string(args.status().message()).c_str());
    std::fprintf(stderr,
                 "usage: tessera convert [--series UID|N] IN... OUT.nii[.gz]\n"
                 "  IN: a DICOM series directory, a zip of one, or DICOM files\n");
    return args.ok() && args->help() ? 0 : 2;
  }
  std::vector<std::string> inputs = args->positional();
  const std::string out = inputs.back();
  inputs.pop_back();
  if (!absl::EndsWith(out, ".nii") && !absl::EndsWith(out, ".nii.gz")) {
    std::fprintf(stderr, "tessera convert: %s: the output must be .nii or .nii.gz (writing DICOM is not supported yet)\n",
                 out.c_str());
    return 2;
  }
  dicom::DicomReadOptions options;
  options.series = args->Get("series");
  auto series = dicom::ReadDicomSeries(inputs, options);
  if (!series.ok()) {
    std::fprintf(stderr, "tessera convert: %s\n", std::string(series.status().message()).c_str());
    return 1;
  }
  if (absl::Status s = WriteNifti(series->volume, out); !s.ok()) {
    std::fprintf(stderr, "tessera convert: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const Geometry& g = series->volume.geometry;
  std::printf("%s: %s %s, spacing %g x %g x %g mm, orientation %s, %s series %s (%d files)\n", out.c_str(),
              absl::StrJoin(series->volume.data.shape(), "x").c_str(),
              std::string(DTypeName(series->volume.data.dtype())).c_str(), g.spacing[0], g.spacing[1], g.spacing[2],
              g.AxisCodes().c_str(), series->info.modality.c_str(), series->info.series_instance_uid.c_str(),
              series->info.num_files);
  return 0;
}

}  // namespace tessera::cli
