// `tessera convert IN... OUT.nii[.gz]`: a DICOM series (a directory, a zip,
// or files) to NIfTI, with the geometry dcm2niix gives it
// (common/dicom/dicom_series.h).
// `tessera convert [--reference SERIES] [--series-description TEXT] IN OUTDIR/`
// (or an existing OUTDIR, or --to dicom): a NIfTI (or a DICOM series) written
// as a derived DICOM series (common/dicom/dicom_writer.h).
// `tessera convert --to seg [--reference SERIES] LABELS.nii OUT.dcm`: a label
// map as one DICOM Segmentation (common/dicom/dicom_seg.h); a SEG given as IN
// converts back to NIfTI labels. `--deidentify` (DICOM outputs): the basic
// confidentiality profile with a random salt per run, or the salt in
// --deidentify-salt-file (so that several runs share the new study's UIDs).
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "common/dicom/dicom_seg.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_writer.h"
#include "common/dicom/volume_file.h"
#include "common/nifti_io.h"

namespace tessera::cli {
namespace {

// The de-identification a DICOM output gets from the flags; false on a bad salt file.
bool DeidentificationFrom(const Args& args, dicom::Deidentification* out) {
  out->enabled = args.GetBool("deidentify");
  if (!out->enabled) return true;
  const std::string file = args.Get("deidentify-salt-file");
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    if (!in.good() && !in.eof()) return false;
    out->salt = bytes.str();
    return !out->salt.empty();
  }
  std::random_device random;  // the kernel's entropy (getrandom)
  for (int i = 0; i < 8; ++i) out->salt += absl::StrFormat("%08x", random());
  return true;
}

// One input as a volume: a NIfTI, a SEG's labels, or a DICOM series (--series picks among several).
absl::StatusOr<Volume> ReadInput(const std::vector<std::string>& inputs, const std::string& series_choice) {
  if (inputs.size() == 1 && (absl::EndsWith(inputs[0], ".nii") || absl::EndsWith(inputs[0], ".nii.gz") ||
                             dicom::IsDicomSegFile(inputs[0]))) {
    return ReadVolumeFile(inputs[0]);
  }
  dicom::DicomReadOptions read_options;
  read_options.series = series_choice;
  absl::StatusOr<dicom::DicomSeries> series = dicom::ReadDicomSeries(inputs, read_options);
  if (!series.ok()) return series.status();
  return std::move(series->volume);
}

}  // namespace

int RunConvert(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"series", "", "which series of a mixed input: SeriesInstanceUID or 1-based index"},
      {"to", "", "output format: nifti, dicom (a series) or seg (labels as one Segmentation file) (default: from OUT)"},
      {"reference", "", "DICOM output: the series whose patient and study it keeps"},
      {"series-description", "", "DICOM output: SeriesDescription (default: tessera convert)"},
      {"deidentify", "", "DICOM output: apply the basic confidentiality profile (PS3.15 E.1.1)", true},
      {"deidentify-salt-file", "", "with --deidentify: the secret that keys the new UIDs (default: random)"},
  };
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok() || args->help() || args->positional().size() < 2) {
    if (!args.ok()) std::fprintf(stderr, "tessera convert: %s\n", std::string(args.status().message()).c_str());
    std::fprintf(stderr,
                 "usage: tessera convert [--series UID|N] IN... OUT.nii[.gz]\n"
                 "       tessera convert [--to dicom] [--reference SERIES_DIR] [--series-description TEXT] IN OUT_DIR/\n"
                 "       tessera convert --to seg [--reference SERIES_DIR] [--series-description TEXT] LABELS OUT.dcm\n"
                 "  IN: a DICOM series directory, a zip of one, or DICOM files; a NIfTI for DICOM output;\n"
                 "      a DICOM SEG file (its labels)\n"
                 "  DICOM output: OUT_DIR ends in '/', is an existing directory, or --to dicom;\n"
                 "      --deidentify [--deidentify-salt-file FILE] applies the basic confidentiality profile\n");
    return args.ok() && args->help() ? 0 : 2;
  }
  std::vector<std::string> inputs = args->positional();
  const std::string out = inputs.back();
  inputs.pop_back();
  const std::string to = args->Get("to");
  if (!to.empty() && to != "dicom" && to != "nifti" && to != "seg") {
    std::fprintf(stderr, "tessera convert: --to must be nifti, dicom or seg\n");
    return 2;
  }
  struct stat st;
  const bool to_seg = to == "seg";
  const bool to_dicom = to == "dicom" || (to.empty() && (absl::EndsWith(out, "/") ||
                                                          (stat(out.c_str(), &st) == 0 && S_ISDIR(st.st_mode))));
  dicom::Deidentification deidentify;
  if (!DeidentificationFrom(*args, &deidentify)) {
    std::fprintf(stderr, "tessera convert: --deidentify-salt-file %s: cannot read it, or it is empty\n",
                 args->Get("deidentify-salt-file").c_str());
    return 2;
  }
  if (deidentify.enabled && !to_dicom && !to_seg) {
    std::fprintf(stderr, "tessera convert: --deidentify applies to DICOM outputs (OUT_DIR/, --to dicom or --to seg)\n");
    return 2;
  }
  if (to_seg) {
    auto labels = ReadInput(inputs, args->Get("series"));
    if (!labels.ok()) {
      std::fprintf(stderr, "tessera convert: %s\n", std::string(labels.status().message()).c_str());
      return 1;
    }
    dicom::DicomSegWriteOptions seg_options;
    seg_options.reference = args->Get("reference");
    seg_options.series_description = args->Get("series-description");
    if (seg_options.series_description.empty()) seg_options.series_description = "tessera convert: labels";
    seg_options.deidentify = deidentify;
    auto written = dicom::WriteDicomSeg(*labels, out, seg_options);
    if (!written.ok()) {
      std::fprintf(stderr, "tessera convert: %s\n", std::string(written.status().message()).c_str());
      return 1;
    }
    std::printf("%s: DICOM Segmentation, %s labels, series %s, study %s%s\n", out.c_str(),
                absl::StrJoin(labels->data.shape(), "x").c_str(), written->series_instance_uid.c_str(),
                written->study_instance_uid.c_str(), deidentify.enabled ? ", de-identified" : "");
    return 0;
  }
  if (to_dicom) {
    auto volume = ReadInput(inputs, args->Get("series"));
    if (!volume.ok()) {
      std::fprintf(stderr, "tessera convert: %s\n", std::string(volume.status().message()).c_str());
      return 1;
    }
    dicom::DicomWriteOptions write_options;
    write_options.reference = args->Get("reference");
    write_options.series_description = args->Get("series-description");
    if (write_options.series_description.empty()) write_options.series_description = "tessera convert";
    write_options.deidentify = deidentify;
    // A conversion keeps its input's values: with a CT reference, HU.
    write_options.values_are_hounsfield = true;
    auto written = dicom::WriteDicomSeries(*volume, out, write_options);
    if (!written.ok()) {
      std::fprintf(stderr, "tessera convert: %s\n", std::string(written.status().message()).c_str());
      return 1;
    }
    std::printf("%s: %zu DICOM files, %s, series %s, study %s, rescale slope %g intercept %g (max error %g)\n",
                out.c_str(), written->files.size(), absl::StrJoin(volume->data.shape(), "x").c_str(),
                written->series_instance_uid.c_str(), written->study_instance_uid.c_str(), written->rescale_slope,
                written->rescale_intercept, written->max_abs_error);
    return 0;
  }
  if (!absl::EndsWith(out, ".nii") && !absl::EndsWith(out, ".nii.gz")) {
    std::fprintf(stderr, "tessera convert: %s: the output must be .nii or .nii.gz (or a directory for DICOM: OUT/ or --to dicom; a SEG: --to seg)\n",
                 out.c_str());
    return 2;
  }
  if (inputs.size() == 1 && dicom::IsDicomSegFile(inputs[0])) {  // a SEG's labels
    auto seg = dicom::ReadDicomSeg(inputs[0]);
    if (!seg.ok()) {
      std::fprintf(stderr, "tessera convert: %s\n", std::string(seg.status().message()).c_str());
      return 1;
    }
    if (absl::Status s = WriteNifti(seg->labels, out); !s.ok()) {
      std::fprintf(stderr, "tessera convert: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("%s: %s int32 labels, %zu segments, from DICOM Segmentation series %s\n", out.c_str(),
                absl::StrJoin(seg->labels.data.shape(), "x").c_str(), seg->segment_names.size(),
                seg->series_instance_uid.c_str());
    return 0;
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
