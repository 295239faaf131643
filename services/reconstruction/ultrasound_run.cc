#include "services/reconstruction/ultrasound_run.h"

#include <algorithm>
#include <complex>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "kernels/reconstruction/ultrasound/beamform.h"
#include "services/reconstruction/formats/ultrasound_h5.h"
#include "services/reconstruction/formats/ultrasound_image.h"
#include "services/reconstruction/recon_run_util.h"

namespace tessera::reconstruction {
namespace {

namespace fs = std::filesystem;
namespace us = recon::ultrasound;

constexpr char kImageFile[] = "reconstruction.nii.gz";
constexpr char kPngFile[] = "reconstruction.png";

struct UltrasoundPlan {
  us::Acquisition acquisition;
  us::ImageGrid grid;
  us::BeamformOptions options;
};

absl::StatusOr<UltrasoundPlan> Plan(const ReconSpec& spec) {
  const UltrasoundSpec& u = spec.ultrasound;
  UltrasoundPlan plan;
  absl::StatusOr<us::Acquisition> acquisition = recon::formats::ReadUltrasoundH5(spec.ultrasound.channel_data_path);
  if (!acquisition.ok()) return Annotate(acquisition.status(), "ultrasound.channel_data");
  plan.acquisition = *std::move(acquisition);
  const int channels = plan.acquisition.data.channels;
  // The default grid (the element span, 5 mm to the deepest sample), with the
  // request's extents (mm) replacing either axis.
  plan.grid = us::DefaultImageGrid(plan.acquisition, u.nx, u.nz);
  const double x_min = u.x_mm.empty() ? plan.grid.x(0) : u.x_mm[0] * 1e-3;
  const double x_max = u.x_mm.empty() ? plan.grid.x(u.nx - 1) : u.x_mm[1] * 1e-3;
  const double z_min = u.z_mm.empty() ? plan.grid.z(0) : u.z_mm[0] * 1e-3;
  const double z_max = u.z_mm.empty() ? plan.grid.z(u.nz - 1) : u.z_mm[1] * 1e-3;
  plan.grid = us::ImageGrid::Span(u.nx, u.nz, x_min, x_max, z_min, z_max);
  if (absl::Status s = us::ValidateImageGrid(plan.grid); !s.ok()) return Annotate(s, "ultrasound grid");
  plan.options.method =
      u.method == UltrasoundMethod::kMv ? us::BeamformMethod::kMinimumVariance : us::BeamformMethod::kDelayAndSum;
  plan.options.das.f_number = u.f_number;
  plan.options.mv.subarray = u.subarray > 0 ? u.subarray : std::max(1, std::min(us::kMaxSubarray, channels / 2));
  plan.options.mv.loading = u.loading;
  if (plan.options.method == us::BeamformMethod::kMinimumVariance && plan.options.mv.subarray > channels) {
    return absl::InvalidArgumentError(absl::StrCat("ultrasound.subarray ", plan.options.mv.subarray,
                                                   " is more than the data's ", channels, " channels"));
  }
  if (absl::Status s = us::ValidateBeamformOptions(plan.options, channels); !s.ok()) return Annotate(s, "ultrasound");
  return plan;
}

}  // namespace

absl::Status CheckUltrasoundInputs(const ReconSpec& spec) { return Plan(spec).status(); }

absl::Status RunUltrasound(const ReconSpec& spec, const ReconRunContext& ctx, const Stream& stream,
                           ReconOutcome* out) {
  TESSERA_ASSIGN_OR_RETURN(UltrasoundPlan plan, Plan(spec));
  TESSERA_RETURN_IF_ERROR(Continue(ctx));
  const us::ChannelData& d = plan.acquisition.data;
  Report(ctx, "reconstruct", 0, 1, 0.1, {},
         absl::StrFormat("%s beamforming: %d channels, %d transmits, %lld samples -> %d x %d pixels",
                         UltrasoundMethodName(spec.ultrasound.method), d.channels, d.transmits,
                         static_cast<long long>(d.samples), plan.grid.nx, plan.grid.nz));
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::complex<float>> image,
                           us::Beamform(plan.acquisition, plan.grid, plan.options, stream.backend()));
  TESSERA_RETURN_IF_ERROR(Continue(ctx));
  Report(ctx, "reconstruct", 1, 1, 0.95, {}, "beamformed");

  const double db = spec.ultrasound.dynamic_range_db;
  TESSERA_RETURN_IF_ERROR(
      recon::formats::WriteBModeNifti(image, plan.grid, db, (fs::path(ctx.work_dir) / kImageFile).string()));
  TESSERA_RETURN_IF_ERROR(
      recon::formats::WriteBModePng(image, plan.grid, db, (fs::path(ctx.work_dir) / kPngFile).string()));
  out->work_files = {kImageFile, kPngFile};
  v1::ReconstructionResult& result = out->result;
  result.set_modality("ultrasound");
  result.set_method(UltrasoundMethodName(spec.ultrasound.method));
  result.set_geometry(absl::StrFormat(
      "linear array, %d elements, %d %s transmits; image x %.1f..%.1f mm, z %.1f..%.1f mm, %.0f dB", d.channels,
      d.transmits, plan.acquisition.sequence.kind == us::TransmitKind::kPlaneWave ? "plane-wave" : "synthetic-aperture",
      plan.grid.x(0) * 1e3, plan.grid.x(plan.grid.nx - 1) * 1e3, plan.grid.z(0) * 1e3,
      plan.grid.z(plan.grid.nz - 1) * 1e3, db));
  for (int64_t v : {int64_t{plan.grid.nx}, int64_t{plan.grid.nz}, int64_t{1}}) result.add_dims(v);
  for (double v : {plan.grid.dx * 1e3, plan.grid.dz * 1e3, 1.0}) result.add_spacing(v);
  return absl::OkStatus();
}

}  // namespace tessera::reconstruction
