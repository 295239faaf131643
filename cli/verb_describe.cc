// `tessera describe FILE`: the same summary the VolumeService gives, computed
// locally (no server), for checking a file before submitting work. A DICOM
// series (directory, zip or files) is described with its identity and affine,
// a DICOM SEG file with its segments.
#include <cstdio>
#include <map>

#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "absl/strings/str_format.h"
#include "common/array_stats.h"
#include "common/dicom/dicom_seg.h"
#include "common/dicom/dicom_series.h"
#include "common/device.h"
#include "common/nifti_io.h"

namespace tessera::cli {
namespace {

// One DICOM series given as `inputs` (a directory, a zip, or its files).
int DescribeDicom(const std::vector<std::string>& inputs, const std::string& series_choice, Stream& stream) {
  dicom::DicomReadOptions options;
  options.series = series_choice;
  auto series = dicom::ReadDicomSeries(inputs, options);
  const std::string name = absl::StrJoin(inputs, " ");
  if (!series.ok()) {
    std::fprintf(stderr, "tessera describe: %s\n", std::string(series.status().message()).c_str());
    return 1;
  }
  const Volume& v = series->volume;
  const dicom::DicomSeriesInfo& info = series->info;
  const Geometry& g = v.geometry;
  std::printf("%s: DICOM %s series, %d files, %s %s, spacing %g x %g x %g mm, origin (%g, %g, %g), orientation %s\n",
              name.c_str(), info.modality.c_str(), info.num_files, absl::StrJoin(v.data.shape(), "x").c_str(),
              std::string(DTypeName(v.data.dtype())).c_str(), g.spacing[0], g.spacing[1], g.spacing[2], g.origin[0],
              g.origin[1], g.origin[2], g.AxisCodes().c_str());
  std::printf("  series description \"%s\"  series number %d\n", info.series_description.c_str(), info.series_number);
  std::printf("  patient %s  study %s  series %s\n", info.patient_id.c_str(), info.study_instance_uid.c_str(),
              info.series_instance_uid.c_str());
  std::printf("  transfer syntax %s\n", info.transfer_syntax.c_str());
  const Mat4 m = g.IndexToWorld();
  std::printf("  affine (RAS, as dcm2niix's sform):\n");
  for (int r = 0; r < 3; ++r) {
    std::printf("    %s\n", absl::StrFormat("%10.4f %10.4f %10.4f %10.4f", m[r * 4], m[r * 4 + 1], m[r * 4 + 2],
                                            m[r * 4 + 3]).c_str());
  }
  auto stats = ComputeArrayStats(v.data, stream);
  if (!stats.ok()) {
    std::fprintf(stderr, "tessera describe: %s: %s\n", name.c_str(), std::string(stats.status().message()).c_str());
    return 1;
  }
  std::printf("  min %g  max %g  mean %g  sd %g  non-finite %lld  (on %s)\n", stats->min, stats->max, stats->mean,
              stats->stddev, static_cast<long long>(stats->nonfinite_count),
              std::string(BackendName(stream.backend())).c_str());
  return 0;
}

// A DICOM Segmentation file: its grid, segments (label value, name, voxels) and identity.
int DescribeSeg(const std::string& path) {
  auto seg = dicom::ReadDicomSeg(path);
  if (!seg.ok()) {
    std::fprintf(stderr, "tessera describe: %s\n", std::string(seg.status().message()).c_str());
    return 1;
  }
  const Volume& v = seg->labels;
  const Geometry& g = v.geometry;
  std::printf("%s: DICOM SEG, %zu segments, %s int32 labels, spacing %g x %g x %g mm, origin (%g, %g, %g), "
              "orientation %s\n",
              path.c_str(), seg->segment_names.size(), absl::StrJoin(v.data.shape(), "x").c_str(), g.spacing[0],
              g.spacing[1], g.spacing[2], g.origin[0], g.origin[1], g.origin[2], g.AxisCodes().c_str());
  std::printf("  series %s  frame of reference %s\n", seg->series_instance_uid.c_str(),
              seg->frame_of_reference_uid.c_str());
  std::map<int64_t, int64_t> voxels;
  const int32_t* p = v.data.data<int32_t>();
  for (int64_t i = 0; i < v.data.num_elements(); ++i) {
    if (p[i] != 0) ++voxels[p[i]];
  }
  for (const auto& [value, name] : seg->segment_names) {
    std::printf("  label %lld \"%s\": %lld voxels\n", static_cast<long long>(value), name.c_str(),
                static_cast<long long>(voxels[value]));
  }
  return 0;
}

}  // namespace

int RunDescribe(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"device", "auto", "compute backend: auto, cpu or cuda"},
      {"series", "", "DICOM: which series of a mixed input (SeriesInstanceUID or 1-based index)"},
  };
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok() || args->help() || args->positional().empty()) {
    if (!args.ok()) std::fprintf(stderr, "tessera describe: %s\n", std::string(args.status().message()).c_str());
    std::fprintf(stderr,
                 "usage: tessera describe [--device=auto] FILE.nii[.gz]...\n"
                 "       tessera describe [--series UID|N] DICOM_DIR | SERIES.zip | FILE.dcm...\n"
                 "       tessera describe SEG.dcm  (a DICOM Segmentation: its grid and segments)\n"
                 "  (DICOM files given together are one series)\n");
    return args.ok() && args->help() ? 0 : 2;
  }
  auto backend = ResolveBackend(args->Get("device"));
  if (!backend.ok()) {
    std::fprintf(stderr, "tessera describe: %s\n", std::string(backend.status().message()).c_str());
    return 2;
  }
  auto stream = Stream::Create(*backend);
  if (!stream.ok()) {
    std::fprintf(stderr, "tessera describe: %s\n", std::string(stream.status().message()).c_str());
    return 1;
  }
  int rc = 0;
  std::vector<std::string> dicom_files;
  for (const std::string& path : args->positional()) {
    if (dicom::IsDicomSegFile(path)) {
      if (DescribeSeg(path) != 0) rc = 1;
      continue;
    }
    if (dicom::IsDicomPath(path)) {
      dicom_files.push_back(path);
      continue;
    }
    NiftiInfo info;
    auto volume = ReadNifti(path, &info);
    if (!volume.ok()) {
      std::fprintf(stderr, "tessera describe: %s\n", std::string(volume.status().message()).c_str());
      rc = 1;
      continue;
    }
    auto stats = ComputeArrayStats(volume->data, *stream);
    if (!stats.ok()) {
      std::fprintf(stderr, "tessera describe: %s: %s\n", path.c_str(), std::string(stats.status().message()).c_str());
      rc = 1;
      continue;
    }
    const Geometry& g = volume->geometry;
    std::printf("%s: NIfTI-%d %s %s, spacing %g x %g x %g mm, origin (%g, %g, %g), orientation %s\n", path.c_str(),
                info.version, absl::StrJoin(volume->data.shape(), "x").c_str(),
                std::string(DTypeName(volume->data.dtype())).c_str(), g.spacing[0], g.spacing[1], g.spacing[2],
                g.origin[0], g.origin[1], g.origin[2], g.AxisCodes().c_str());
    std::printf("  min %g  max %g  mean %g  sd %g  non-finite %lld  (on %s)\n", stats->min, stats->max, stats->mean,
                stats->stddev, static_cast<long long>(stats->nonfinite_count),
                std::string(BackendName(stream->backend())).c_str());
  }
  if (!dicom_files.empty() && DescribeDicom(dicom_files, args->Get("series"), *stream) != 0) rc = 1;
  return rc;
}

}  // namespace tessera::cli
