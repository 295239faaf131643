// The reconstruction job engine (services/jobs/engine.h): kind
// "reconstruction", spec tessera.v1.ReconstructRequest, result
// tessera.v1.ReconstructionResult, one file reconstruction.nii.gz. What the
// scheduler's workers run for ReconstructionService, SchedulerService and
// `tessera job`; `tessera recon` runs it in the foreground.
//
// Inputs are server paths under the data roots (the service rewrites its
// uploads to paths under <state dir>/recon-uploads, which serving processes
// add as a root).
#ifndef TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_ENGINE_H_
#define TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/jobs/engine.h"
#include "services/jobs/typed_engine.h"
#include "services/reconstruction/reconstruction_request.h"
#include "tessera/v1/reconstruction.pb.h"

namespace tessera::reconstruction {

// A job's request as the engine keeps it between its check at submit and its
// run. Resolving it reads the server's files (geometry, data under the roots),
// which may change in between, so the resolution is redone where it is used
// (CheckPlan at submit, RunPlan at run) and not cached in the plan.
struct ReconstructionPlan {
  v1::ReconstructRequest request;
};

class ReconstructionEngine final : public jobs::TypedEngine<v1::ReconstructRequest, ReconstructionPlan> {
 public:
  // `data_roots` must exist; `max_input_bytes` > 0 bounds each input file;
  // `default_device` ("auto", "cpu", "cuda") for requests that leave it empty.
  static absl::StatusOr<std::shared_ptr<const ReconstructionEngine>> Create(
      const std::vector<std::string>& data_roots, int64_t max_input_bytes, const std::string& default_device);

  std::string kind() const override { return "reconstruction"; }

  absl::StatusOr<ReconSpec> Resolve(const v1::ReconstructRequest& request) const;

 protected:
  absl::StatusOr<ReconstructionPlan> MakePlan(const v1::ReconstructRequest& request) const override {
    return ReconstructionPlan{request};
  }
  // ResolveReconstructRequest + CheckReconInputs: a bad geometry or a
  // sinogram that does not match it fails the submit.
  absl::Status CheckPlan(const ReconstructionPlan& plan) const override;
  // needs_gpu for device "cuda"; device_bytes from the geometry (volume,
  // sinogram and the method's work vectors).
  jobs::ResourceNeeds NeedsOf(const ReconstructionPlan& plan) const override;
  absl::StatusOr<jobs::EngineOutput> RunPlan(const ReconstructionPlan& plan, jobs::EngineContext& ctx) const override;

 private:
  ReconstructionEngine(std::vector<std::string> roots, int64_t max_input_bytes, std::string default_device)
      : roots_(std::move(roots)), max_input_bytes_(max_input_bytes), default_device_(std::move(default_device)) {}

  const std::vector<std::string> roots_;
  const int64_t max_input_bytes_;
  const std::string default_device_;
};

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_ENGINE_H_
