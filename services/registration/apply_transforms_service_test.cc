// RegistrationService.ApplyTransforms end to end (issue 34): a registration
// job (CPU, 3 mm Colin27, few iterations) through the scheduler, then
// apply-transforms jobs that name it (registration_job_id) or its files, on a
// loopback server with both engines. The applied image and labels equal the
// registration job's own warped.nii.gz / warped_labels.nii.gz bit for bit;
// the validation errors the proto promises.
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/nifti_io.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"
#include "services/jobs/job_core.h"
#include "services/registration/apply_transforms_engine.h"
#include "services/registration/registration_engine.h"
#include "services/registration/registration_service.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "services/scheduler/testing/service_testing.h"
#include "services/server/service_host.h"
#include "tessera/v1/registration.grpc.pb.h"

namespace tessera {
namespace {

using scheduler::testing::In;
using scheduler::testing::TmpDir;

struct Server {
  std::unique_ptr<scheduler::testing::InProcessScheduler> jobs;
  std::unique_ptr<RegistrationServiceImpl> service;
  std::unique_ptr<ServiceHost> host;
  std::shared_ptr<grpc::Channel> channel;
  ~Server() {
    host.reset();
    service.reset();
    jobs.reset();
  }
};

class ApplyTransformsServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const registration::ColinProblem p = registration::MakeColinProblem(registration::IntensityChange::kGamma, 7, 3);
    root_ = new std::string(TmpDir() + "/data");
    mkdir(root_->c_str(), 0755);
    ASSERT_TRUE(WriteNifti(p.fixed, *root_ + "/fixed.nii").ok());
    ASSERT_TRUE(WriteNifti(p.pair.moving, *root_ + "/moving.nii").ok());
    ASSERT_TRUE(WriteNifti(*p.pair.moving_labels, *root_ + "/moving_labels.nii").ok());
    const std::string state = TmpDir() + "/state";
    ServerOptions options = scheduler::testing::LoopbackServerOptions();
    options.data_roots = {*root_};
    options.max_volume_bytes = 64 << 20;
    server_ = new Server();
    const std::string uploads = CreateRegistrationUploadDir(state).value();
    const std::string apply_uploads = CreateApplyTransformsUploadDir(state).value();
    auto registration_engine =
        registration::RegistrationEngine::Create({*root_, uploads}, options.max_volume_bytes, "cpu").value();
    auto apply_engine = registration::ApplyTransformsEngine::Create({*root_, uploads, apply_uploads},
                                                                    options.max_volume_bytes, "cpu",
                                                                    jobs::StateSubdir(state, "results"))
                            .value();
    server_->jobs = scheduler::testing::InProcessScheduler::Start(state, {registration_engine, apply_engine}).value();
    server_->service = RegistrationServiceImpl::Create(options).value();
    ASSERT_TRUE(server_->service->AttachScheduler(&server_->jobs->scheduler(), state).ok());
    auto hosted = scheduler::testing::StartLoopbackHost(options, server_->service.get()).value();
    server_->host = std::move(hosted.host);
    server_->channel = std::move(hosted.channel);
    // The registration job every test applies (no inverse warp).
    auto stub = v1::RegistrationService::NewStub(server_->channel);
    v1::RegisterRequest request;
    request.mutable_fixed()->set_path(*root_ + "/fixed.nii");
    request.mutable_moving()->set_path(*root_ + "/moving.nii");
    request.mutable_moving_labels()->set_path(*root_ + "/moving_labels.nii");
    request.set_job_id("reg-1");
    v1::RegistrationOptions* o = request.mutable_options();
    o->set_metric("mse");
    o->add_scales(2);
    o->add_scales(1);
    for (int n : {6, 3}) o->add_rigid_iterations(n), o->add_affine_iterations(n), o->add_deformable_iterations(n);
    o->set_device("cpu");
    grpc::ClientContext context;
    v1::JobStatus status;
    ASSERT_TRUE(stub->Register(&context, request, &status).ok());
    registration_job_ = new std::string(status.job_id());
    const v1::JobInfo info = server_->jobs->WaitUntilEnded(*registration_job_, absl::Seconds(120)).value();
    ASSERT_EQ(info.state(), v1::JOB_STATE_SUCCEEDED) << info.DebugString();
  }

  static void TearDownTestSuite() {
    delete server_;
    delete root_;
    delete registration_job_;
  }

  grpc::Status Apply(const v1::ApplyTransformsRequest& request, v1::JobStatus* status) {
    auto stub = v1::RegistrationService::NewStub(server_->channel);
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(30)));
    return stub->ApplyTransforms(&context, request, status);
  }

  // Runs a request to its end; its result.
  v1::ApplyTransformsResult RunToEnd(const v1::ApplyTransformsRequest& request) {
    v1::JobStatus status;
    const grpc::Status submitted = Apply(request, &status);
    EXPECT_TRUE(submitted.ok()) << submitted.error_message();
    const v1::JobInfo info = server_->jobs->WaitUntilEnded(status.job_id(), absl::Seconds(60)).value();
    EXPECT_EQ(info.state(), v1::JOB_STATE_SUCCEEDED) << info.DebugString();
    auto stub = v1::RegistrationService::NewStub(server_->channel);
    grpc::ClientContext context;
    v1::JobRef ref;
    ref.set_job_id(status.job_id());
    v1::ApplyTransformsResult result;
    const grpc::Status got = stub->GetApplyTransformsResult(&context, ref, &result);
    EXPECT_TRUE(got.ok()) << got.error_message();
    // GetJob answers for apply-transforms jobs too.
    grpc::ClientContext get_context;
    v1::JobStatus job;
    EXPECT_TRUE(stub->GetJob(&get_context, ref, &job).ok());
    return result;
  }

  std::string ResultPath(const std::string& job_id, const std::string& name) {
    return server_->jobs->results_dir() + "/" + job_id + "/" + name;
  }

  static Server* server_;
  static std::string* root_;
  static std::string* registration_job_;
};

Server* ApplyTransformsServiceTest::server_ = nullptr;
std::string* ApplyTransformsServiceTest::root_ = nullptr;
std::string* ApplyTransformsServiceTest::registration_job_ = nullptr;

bool SameBytes(const NDArray& a, const NDArray& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST_F(ApplyTransformsServiceTest, RegistrationJobReproducesItsWarpedImageAndLabels) {
  v1::ApplyTransformsRequest request;
  request.mutable_reference()->set_path(*root_ + "/fixed.nii");
  request.mutable_input()->set_path(*root_ + "/moving.nii");
  request.add_transforms()->set_registration_job_id("reg-1");  // the client's id works too
  const v1::ApplyTransformsResult image = RunToEnd(request);
  EXPECT_EQ(image.backend(), "cpu");
  EXPECT_EQ(image.interpolation(), "linear");
  ASSERT_EQ(image.files_size(), 1);
  const Volume applied = ReadNifti(ResultPath(image.job_id(), "applied.nii.gz")).value();
  const Volume warped = ReadNifti(ResultPath(*registration_job_, "warped.nii.gz")).value();
  EXPECT_TRUE(SameBytes(applied.data, warped.data));

  request.mutable_input()->set_path(*root_ + "/moving_labels.nii");
  request.set_interpolation("nearest");
  const v1::ApplyTransformsResult labels = RunToEnd(request);
  const Volume applied_labels = ReadNifti(ResultPath(labels.job_id(), "applied.nii.gz")).value();
  const Volume warped_labels = ReadNifti(ResultPath(*registration_job_, "warped_labels.nii.gz")).value();
  EXPECT_TRUE(SameBytes(applied_labels.data.AsType(DType::kInt32).value(), warped_labels.data.AsType(DType::kInt32).value()));

  // The same through the job's files by path (the output_dir copies).
  v1::ApplyTransformsRequest by_path = request;
  by_path.clear_transforms();
  by_path.add_transforms()->set_path(ResultPath(*registration_job_, "0Warp.nii.gz"));
  by_path.add_transforms()->set_path(ResultPath(*registration_job_, "0GenericAffine.mat"));
  v1::JobStatus status;
  // The results folder is not a data root: only registration_job_id reaches it.
  EXPECT_EQ(Apply(by_path, &status).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(ApplyTransformsServiceTest, PointsThroughTheJobsChain) {
  v1::ApplyTransformsRequest request;
  request.set_points_csv("x,y,z,label\n0,0,0,a\n10,-20,5,b\n");
  request.add_transforms()->set_registration_job_id(*registration_job_);
  request.set_output_dir(*root_ + "/points_out");
  const v1::ApplyTransformsResult result = RunToEnd(request);
  EXPECT_EQ(result.points(), 2);
  ASSERT_EQ(result.output_paths_size(), 1);
  struct stat st;
  EXPECT_EQ(stat(result.output_paths(0).c_str(), &st), 0);
}

TEST_F(ApplyTransformsServiceTest, RefusesBadRequests) {
  const auto code = [&](const v1::ApplyTransformsRequest& r) {
    v1::JobStatus status;
    return Apply(r, &status).error_code();
  };
  v1::ApplyTransformsRequest base;
  base.mutable_reference()->set_path(*root_ + "/fixed.nii");
  base.mutable_input()->set_path(*root_ + "/moving.nii");
  EXPECT_EQ(code(base), grpc::StatusCode::INVALID_ARGUMENT);  // no transforms
  base.add_transforms()->set_registration_job_id(*registration_job_);
  v1::ApplyTransformsRequest both = base;
  both.set_points_csv("x,y,z\n1,2,3\n");
  EXPECT_EQ(code(both), grpc::StatusCode::INVALID_ARGUMENT);
  v1::ApplyTransformsRequest interp = base;
  interp.set_interpolation("cubic");
  EXPECT_EQ(code(interp), grpc::StatusCode::INVALID_ARGUMENT);
  v1::ApplyTransformsRequest unknown = base;
  unknown.mutable_transforms(0)->set_registration_job_id("no-such-job");
  EXPECT_EQ(code(unknown), grpc::StatusCode::NOT_FOUND);
  v1::ApplyTransformsRequest inverse = base;
  inverse.mutable_transforms(0)->set_inverse(true);  // the job has no inverse warp
  EXPECT_EQ(code(inverse), grpc::StatusCode::FAILED_PRECONDITION);
  v1::ApplyTransformsRequest field_inverse = base;
  v1::TransformSource* t = field_inverse.mutable_transforms(0);
  t->set_path(*root_ + "/moving.nii");
  t->set_inverse(true);
  EXPECT_EQ(code(field_inverse), grpc::StatusCode::INVALID_ARGUMENT);
  v1::ApplyTransformsRequest bad_affine = base;
  bad_affine.mutable_transforms(0)->set_affine_file("#Insight Transform File V1.0\nTransform: Nope_double_3_3\n");
  EXPECT_EQ(code(bad_affine), grpc::StatusCode::INVALID_ARGUMENT);
  v1::ApplyTransformsRequest outside = base;
  outside.mutable_input()->set_path("/etc/passwd");
  EXPECT_EQ(code(outside), grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace
}  // namespace tessera
