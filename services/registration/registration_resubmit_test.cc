// Issue 39: RegistrationService.Register under a known job_id returns the
// existing job after it succeeded, failed (NaN voxels, found when the job
// runs), was cancelled while running, and after a restart on the same job
// store and state directory; another request under the id is ALREADY_EXISTS
// naming it (services/jobs/testing/resubmission.h). A 24^3 phantom on the CPU.
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/grpc_status.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "services/jobs/testing/resubmission.h"
#include "services/registration/registration_engine.h"
#include "services/registration/registration_service.h"
#include "kernels/registration/pipeline/synthetic.h"
#include "tessera/v1/registration.grpc.pb.h"

namespace tessera {
namespace {

using jobs::testing::KindRequest;
using jobs::testing::SubmitAnswer;

class RegistrationKind : public jobs::testing::ResubmitKind {
 public:
  // Writes the phantom pair (and a moving image with a NaN voxel) under `root`.
  static absl::StatusOr<std::unique_ptr<RegistrationKind>> Create(const std::string& root) {
    std::unique_ptr<RegistrationKind> kind(new RegistrationKind(root));
    TESSERA_ASSIGN_OR_RETURN(registration::Phantom phantom, registration::MakePhantom(24));
    registration::SyntheticOptions synth;
    synth.seed = 5;
    TESSERA_ASSIGN_OR_RETURN(registration::SyntheticPair pair,
                             registration::MakeSyntheticPair(phantom.image, nullptr, synth));
    TESSERA_RETURN_IF_ERROR(WriteNifti(phantom.image, root + "/fixed.nii"));
    TESSERA_RETURN_IF_ERROR(WriteNifti(pair.moving, root + "/moving.nii"));
    pair.moving.data.data<float>()[100] = NAN;
    TESSERA_RETURN_IF_ERROR(WriteNifti(pair.moving, root + "/moving_nan.nii"));
    return kind;
  }
  ~RegistrationKind() override { Stop(); }

  absl::StatusOr<std::shared_ptr<const jobs::Engine>> CreateEngine(const std::string& state_dir) override {
    TESSERA_ASSIGN_OR_RETURN(std::string uploads, CreateRegistrationUploadDir(state_dir));
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const registration::RegistrationEngine> engine,
                             registration::RegistrationEngine::Create({root_, uploads}, int64_t{64} << 20, "cpu"));
    return std::shared_ptr<const jobs::Engine>(std::move(engine));
  }
  absl::Status Attach(scheduler::Scheduler* scheduler, const std::string& state_dir) override {
    ServerOptions options;
    options.data_roots = {root_};
    options.device = "cpu";
    TESSERA_ASSIGN_OR_RETURN(service_, RegistrationServiceImpl::Create(options));
    return service_->AttachScheduler(scheduler, state_dir);
  }
  void DestroyService() override { service_.reset(); }

  absl::StatusOr<SubmitAnswer> Submit(KindRequest which, const std::string& request_id) override {
    v1::RegisterRequest request;
    request.set_job_id(request_id);
    request.mutable_fixed()->set_path("fixed.nii");
    request.mutable_moving()->set_path(which == KindRequest::kFails ? "moving_nan.nii" : "moving.nii");
    v1::RegistrationOptions* o = request.mutable_options();
    o->set_metric(which == KindRequest::kChanged ? "mse" : "lncc");
    o->add_scales(2);
    o->add_scales(1);
    for (int n : {10, 5}) o->add_rigid_iterations(n);
    for (int n : {10, 5}) o->add_affine_iterations(n);
    for (int n : {10, 5}) o->add_deformable_iterations(n);
    o->set_device("cpu");
    if (which == KindRequest::kSlow) {  // long, unless cancelled
      o->set_metric("mse");
      o->clear_rigid_iterations();
      o->add_rigid_iterations(100000);
      o->set_patience(100000);
    }
    grpc::ServerContext context;
    v1::JobStatus status;
    TESSERA_RETURN_IF_ERROR(FromGrpcStatus(service_->Register(&context, &request, &status)));
    return SubmitAnswer{status.job_id(), status.state()};
  }
  absl::Status Cancel(const std::string& job_id) override {
    v1::JobStatus status;
    return jobs::testing::CallJobRpc(*service_, &RegistrationServiceImpl::CancelJob, job_id, &status);
  }
  absl::Status ReadResult(const std::string& job_id) override {
    v1::RegistrationResult result;
    TESSERA_RETURN_IF_ERROR(jobs::testing::CallJobRpc(*service_, &RegistrationServiceImpl::GetResult, job_id, &result));
    if (result.job_id() != job_id) return absl::InternalError("the result names job " + result.job_id());
    return absl::OkStatus();
  }

 private:
  explicit RegistrationKind(std::string root) : root_(std::move(root)) {}
  const std::string root_;
  std::unique_ptr<RegistrationServiceImpl> service_;
};

TESSERA_RESUBMISSION_TESTS(RegistrationResubmitTest, RegistrationKind, "reg")

}  // namespace
}  // namespace tessera
