// `tessera convert IN... OUT.nii[.gz]`: a DICOM series (a directory, a zip,
// or files) to NIfTI, with the geometry dcm2niix gives it
// (common/dicom/dicom_series.h).
// `tessera convert [--reference SERIES] [--series-description TEXT] IN OUTDIR/`
// (or an existing OUTDIR, or --to dicom): a NIfTI (or a DICOM series) written
// as a derived DICOM series (common/dicom/dicom_writer.h).
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_writer.h"
#include "common/nifti_io.h"

namespace tessera::cli {

int RunConvert(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"series", "", "which series of a mixed input: SeriesInstanceUID or 1-based index"},
      {"to", "", "output format: nifti or dicom (default: from OUT)"},
      {"reference", "", "DICOM output: the series whose patient and study it keeps"},
      {"series-description", "", "DICOM output: SeriesDescription (default: tessera convert)"},
  };
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok() || args->help() || args->positional().size() < 2) {
    if (!args.ok()) std::fprintf(stderr, "tessera convert: %s\n", std::string(args.status().message()).c_str());
    std::fprintf(stderr,
                 "usage: tessera convert [--series UID|N] IN... OUT.nii[.gz]\n"
                 "       tessera convert [--to dicom] [--reference SERIES_DIR] [--series-description TEXT] IN OUT_DIR/\n"
                 "  IN: a DICOM series directory, a zip of one, or DICOM files; a NIfTI for DICOM output\n"
                 "  DICOM output: OUT_DIR ends in '/', is an existing directory, or --to dicom\n");
    return args.ok() && args->help() ? 0 : 2;
  }
  std::vector<std::string> inputs = args->positional();
  const std::string out = inputs.back();
  inputs.pop_back();
  const std::string to = args->Get("to");
  if (!to.empty() && to != "dicom" && to != "nifti") {
    std::fprintf(stderr, "tessera convert: --to must be dicom or nifti\n");
    return 2;
  }
  struct stat st;
  const bool to_dicom = to == "dicom" || (to.empty() && (absl::EndsWith(out, "/") ||
                                                          (stat(out.c_str(), &st) == 0 && S_ISDIR(st.st_mode))));
  if (to_dicom) {
    Volume volume;
    if (inputs.size() == 1 && (absl::EndsWith(inputs[0], ".nii") || absl::EndsWith(inputs[0], ".nii.gz"))) {
      auto nii = ReadNifti(inputs[0]);
      if (!nii.ok()) {
        std::fprintf(stderr, "tessera convert: %s\n", std::string(nii.status().message()).c_str());
        return 1;
      }
      volume = std::move(*nii);
    } else {
      dicom::DicomReadOptions read_options;
      read_options.series = args->Get("series");
      auto series = dicom::ReadDicomSeries(inputs, read_options);
      if (!series.ok()) {
        std::fprintf(stderr, "tessera convert: %s\n", std::string(series.status().message()).c_str());
        return 1;
      }
      volume = std::move(series->volume);
    }
    dicom::DicomWriteOptions write_options;
    write_options.reference = args->Get("reference");
    write_options.series_description = args->Get("series-description");
    if (write_options.series_description.empty()) write_options.series_description = "tessera convert";
    auto written = dicom::WriteDicomSeries(volume, out, write_options);
    if (!written.ok()) {
      std::fprintf(stderr, "tessera convert: %s\n", std::string(written.status().message()).c_str());
      return 1;
    }
    std::printf("%s: %zu DICOM files, %s, series %s, study %s, rescale slope %g intercept %g (max error %g)\n",
                out.c_str(), written->files.size(), absl::StrJoin(volume.data.shape(), "x").c_str(),
                written->series_instance_uid.c_str(), written->study_instance_uid.c_str(), written->rescale_slope,
                written->rescale_intercept, written->max_abs_error);
    return 0;
  }
  if (!absl::EndsWith(out, ".nii") && !absl::EndsWith(out, ".nii.gz")) {
    std::fprintf(stderr, "tessera convert: %s: the output must be .nii or .nii.gz (or a directory for DICOM: OUT/ or --to dicom)\n",
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
