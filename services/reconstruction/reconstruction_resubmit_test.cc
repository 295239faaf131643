// Issue 39: ReconstructionService.Reconstruct under a known request_id
// returns the existing job after it succeeded, failed (a truncated sinogram
// file: its header passes the submit, its voxels fail the job), was cancelled while iterating,
// and after a restart on the same job store and state directory; another
// request under the id is ALREADY_EXISTS naming it
// (services/jobs/testing/resubmission.h). A 2-D parallel CT problem (48
// pixels, the exact sinogram of a Shepp-Logan phantom) on the CPU.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/grpc_status.h"
#include "common/status.h"
#include "services/jobs/testing/resubmission.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/reconstruction_engine.h"
#include "services/reconstruction/reconstruction_service.h"
#include "tessera/v1/reconstruction.grpc.pb.h"

namespace tessera {
namespace {

using jobs::testing::KindRequest;
using jobs::testing::SubmitAnswer;

class ReconstructionKind : public jobs::testing::ResubmitKind {
 public:
  // Writes geometry.json, sinogram.nii.gz and truncated.nii.gz under `root`.
  static absl::StatusOr<std::unique_ptr<ReconstructionKind>> Create(const std::string& root) {
    std::unique_ptr<ReconstructionKind> kind(new ReconstructionKind(root));
    TESSERA_ASSIGN_OR_RETURN(std::string json, recon::formats::ExampleGeometryJson("parallel", 48));
    std::ofstream(root + "/geometry.json") << json;
    TESSERA_ASSIGN_OR_RETURN(recon::CtGeometry geometry, recon::formats::ParseGeometryJson(json));
    TESSERA_ASSIGN_OR_RETURN(NDArray sinogram,
                             recon::phantoms::AnalyticSinogram(recon::phantoms::SheppLogan2D(40), geometry, 1));
    TESSERA_RETURN_IF_ERROR(recon::formats::WriteSinogram(sinogram, geometry.projection, root + "/sinogram.nii.gz"));
    // Its header reads (the submit checks it), its voxels do not (the job reads them).
    std::ifstream whole(root + "/sinogram.nii.gz", std::ios::binary);
    std::string head(1000, '\0');
    whole.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(root + "/truncated.nii.gz", std::ios::binary) << head;
    return kind;
  }
  ~ReconstructionKind() override { Stop(); }

  absl::StatusOr<std::shared_ptr<const jobs::Engine>> CreateEngine(const std::string& state_dir) override {
    TESSERA_ASSIGN_OR_RETURN(std::string uploads, CreateReconstructionUploadDir(state_dir));
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const reconstruction::ReconstructionEngine> engine,
                             reconstruction::ReconstructionEngine::Create({root_, uploads}, 64 << 20, "cpu"));
    return std::shared_ptr<const jobs::Engine>(std::move(engine));
  }
  absl::Status Attach(scheduler::Scheduler* scheduler, const std::string& state_dir) override {
    ServerOptions options;
    options.data_roots = {root_};
    options.device = "cpu";
    TESSERA_ASSIGN_OR_RETURN(service_, ReconstructionServiceImpl::Create(options));
    return service_->AttachScheduler(scheduler, state_dir);
  }
  void DestroyService() override { service_.reset(); }

  absl::StatusOr<SubmitAnswer> Submit(KindRequest which, const std::string& request_id) override {
    v1::ReconstructRequest request;
    request.set_request_id(request_id);
    request.mutable_geometry()->set_path("geometry.json");
    request.mutable_sinogram()->set_path(which == KindRequest::kFails ? "truncated.nii.gz" : "sinogram.nii.gz");
    request.mutable_ct()->set_method("cgls");
    request.mutable_ct()->set_iterations(which == KindRequest::kChanged ? 4 : 3);
    if (which == KindRequest::kSlow) {  // long, unless cancelled
      request.mutable_ct()->set_method("sart");
      request.mutable_ct()->set_iterations(10000);
    }
    grpc::ServerContext context;
    v1::JobStatus status;
    TESSERA_RETURN_IF_ERROR(FromGrpcStatus(service_->Reconstruct(&context, &request, &status)));
    return SubmitAnswer{status.job_id(), status.state()};
  }
  absl::Status Cancel(const std::string& job_id) override {
    v1::JobStatus status;
    return jobs::testing::CallJobRpc(*service_, &ReconstructionServiceImpl::CancelJob, job_id, &status);
  }
  absl::Status ReadResult(const std::string& job_id) override {
    v1::ReconstructionResult result;
    TESSERA_RETURN_IF_ERROR(jobs::testing::CallJobRpc(*service_, &ReconstructionServiceImpl::GetResult, job_id, &result));
    if (result.iterations() != 3 || result.residual_norms_size() != 3) {
      return absl::InternalError(result.ShortDebugString());
    }
    return absl::OkStatus();
  }

 private:
  explicit ReconstructionKind(std::string root) : root_(std::move(root)) {}
  const std::string root_;
  std::unique_ptr<ReconstructionServiceImpl> service_;
};

TESSERA_RESUBMISSION_TESTS(ReconstructionResubmitTest, ReconstructionKind, "recon")

}  // namespace
}  // namespace tessera
