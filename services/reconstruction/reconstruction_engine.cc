#include "services/reconstruction/reconstruction_engine.h"


#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/status.h"
#include "services/common/data_roots.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/reconstruction_run.h"

namespace tessera::reconstruction {
namespace {

// Work vectors of floats beside the volume and the sinogram, per method
// (iterates, residuals, row/column sums, filter scratch).
int64_t DeviceBytes(const ReconSpec& spec, const recon::CtGeometry& g) {
  const int64_t volume = g.volume.size() * 4, sinogram = g.projection.sinogram_size() * 4;
  if (spec.modality == Modality::kPet) return 3 * volume + 3 * sinogram * std::max(1, spec.pet.tof_bins);
  switch (spec.ct.method) {
    case CtMethod::kFbp:
    case CtMethod::kFdk:
      return volume + 3 * sinogram;
    default:
      return 3 * volume + 3 * sinogram;
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ReconstructionEngine>> ReconstructionEngine::Create(
    const std::vector<std::string>& data_roots, int64_t max_input_bytes, const std::string& default_device) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> roots, CanonicalDataRoots(data_roots));
  if (max_input_bytes <= 0) return absl::InvalidArgumentError("max_input_bytes must be positive");
  TESSERA_RETURN_IF_ERROR(CheckDeviceName(default_device, "default device"));
  return std::shared_ptr<const ReconstructionEngine>(
      new ReconstructionEngine(std::move(roots), max_input_bytes, default_device));
}

absl::StatusOr<ReconSpec> ReconstructionEngine::Resolve(const v1::ReconstructRequest& request) const {
  return ResolveReconstructRequest(request, roots_, max_input_bytes_, default_device_);
}

absl::Status ReconstructionEngine::CheckPlan(const ReconstructionPlan& plan) const {
  TESSERA_ASSIGN_OR_RETURN(ReconSpec resolved, Resolve(plan.request));
  return CheckReconInputs(resolved);
}

jobs::ResourceNeeds ReconstructionEngine::NeedsOf(const ReconstructionPlan& plan) const {
  jobs::ResourceNeeds needs;
  absl::StatusOr<ReconSpec> resolved = Resolve(plan.request);
  if (!resolved.ok()) return needs;
  needs.needs_gpu = resolved->device == "cuda";
  // MRI and ultrasound sizes come from their data files, read at run time.
  if (resolved->device == "cpu" || resolved->geometry_path.empty()) return needs;
  absl::StatusOr<recon::CtGeometry> geometry = recon::formats::ReadGeometryJson(resolved->geometry_path);
  if (geometry.ok()) needs.device_bytes = DeviceBytes(*resolved, *geometry);
  return needs;
}

absl::StatusOr<jobs::EngineOutput> ReconstructionEngine::RunPlan(const ReconstructionPlan& plan,
                                                                 jobs::EngineContext& ctx) const {
  TESSERA_ASSIGN_OR_RETURN(ReconSpec resolved, Resolve(plan.request));
  TESSERA_RETURN_IF_ERROR(ctx.CheckContinue());
  ReconRunContext run;
  run.work_dir = ctx.work_dir();
  run.report = [&ctx](const jobs::JobProgress& progress) { ctx.Report(progress); };
  run.check_continue = [&ctx] { return ctx.CheckContinue(); };
  // The job's own device memory, whatever else runs in this process.
  auto memory = std::make_shared<DeviceMemoryTracker>();
  absl::StatusOr<ReconOutcome> outcome;
  {
    ScopedDeviceMemoryCharge charge(memory);
    outcome = RunReconstruction(resolved, run);
  }
  ctx.SetPeakDeviceBytes(static_cast<int64_t>(memory->peak_bytes()));
  if (!outcome.ok()) return outcome.status();
  outcome->result.set_peak_device_bytes(static_cast<int64_t>(memory->peak_bytes()));
  jobs::EngineOutput out;
  out.result.PackFrom(outcome->result);
  TESSERA_ASSIGN_OR_RETURN(out.files, jobs::DescribeWorkFiles(ctx.work_dir(), outcome->work_files));
  return out;
}

}  // namespace tessera::reconstruction
