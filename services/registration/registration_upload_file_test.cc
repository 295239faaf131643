// RegistrationService.UploadFile and VolumeSource.file_id (issue 35): a NIfTI
// and a zipped DICOM series (../shared/data/dicom's prostate ADC series,
// zipped here) are uploaded whole, then registered by file_id, applied to
// (ApplyTransforms by file_id), and named again after a restart on the same
// state directory; bad extensions, short streams, unknown and malformed ids.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/dicom/dicom_test_data.h"
#include "common/dicom/test_zip.h"
#include "common/dicom/volume_file.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "services/registration/apply_transforms_engine.h"
#include "services/registration/registration_engine.h"
#include "services/registration/registration_service.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "services/scheduler/testing/service_testing.h"
#include "services/server/service_host.h"
#include "tessera/v1/registration.grpc.pb.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using scheduler::testing::In;
using scheduler::testing::TmpDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// What `tessera serve` hosts for registration: both engines (data roots: the
// service's upload folders), a scheduler over `state_dir`, the service.
struct TestServer {
  std::unique_ptr<scheduler::testing::InProcessScheduler> jobs;
  std::unique_ptr<RegistrationServiceImpl> service;
  std::unique_ptr<ServiceHost> host;
  std::shared_ptr<grpc::Channel> channel;
  ~TestServer() {
    host.reset();
    service.reset();
    jobs.reset();
  }
};

absl::StatusOr<std::unique_ptr<TestServer>> StartServer(const std::string& state_dir) {
  ServerOptions options = scheduler::testing::LoopbackServerOptions();
  options.max_volume_bytes = 64 << 20;
  auto server = std::make_unique<TestServer>();
  TESSERA_ASSIGN_OR_RETURN(std::string uploads, CreateRegistrationUploadDir(state_dir));
  TESSERA_ASSIGN_OR_RETURN(std::string apply_uploads, CreateApplyTransformsUploadDir(state_dir));
  TESSERA_ASSIGN_OR_RETURN(auto engine,
                           registration::RegistrationEngine::Create({uploads}, options.max_volume_bytes, "cpu"));
  TESSERA_ASSIGN_OR_RETURN(auto apply, registration::ApplyTransformsEngine::Create(
                                           {uploads, apply_uploads}, options.max_volume_bytes, "cpu",
                                           jobs::StateSubdir(state_dir, "results")));
  TESSERA_ASSIGN_OR_RETURN(server->jobs, scheduler::testing::InProcessScheduler::Start(state_dir, {engine, apply}));
  TESSERA_ASSIGN_OR_RETURN(server->service, RegistrationServiceImpl::Create(options));
  TESSERA_RETURN_IF_ERROR(server->service->AttachScheduler(&server->jobs->scheduler(), state_dir));
  TESSERA_ASSIGN_OR_RETURN(auto hosted, scheduler::testing::StartLoopbackHost(options, server->service.get()));
  server->host = std::move(hosted.host);
  server->channel = std::move(hosted.channel);
  return server;
}

class RegistrationUploadFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string data = dicom::DicomTestDataDir();
    series_ = data + "/mr-series-adc-prostate";
    if (data.empty() || !fs::is_directory(series_)) GTEST_SKIP() << "no DICOM test data (../shared/data/dicom)";
    dir_ = TmpDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
    auto server = StartServer(dir_ + "/state");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::RegistrationService::NewStub(server_->channel);
  }

  // The series' files zipped, and the same volume as a NIfTI file.
  std::string SeriesZip() {
    std::vector<std::pair<std::string, std::string>> members;
    for (const auto& entry : fs::directory_iterator(series_)) {
      members.emplace_back(entry.path().filename().string(), ReadAll(entry.path().string()));
    }
    return dicom::ZipBytes(members);
  }
  std::string SeriesNifti() {
    absl::StatusOr<Volume> volume = ReadVolumeFile(series_);
    EXPECT_TRUE(volume.ok()) << volume.status();
    const std::string path = dir_ + "/series.nii.gz";
    EXPECT_TRUE(WriteNifti(*volume, path).ok());
    return ReadAll(path);
  }

  // Streams `bytes` as `filename` in 64 KiB chunks; `claimed` (when >= 0)
  // is the total_bytes the first chunk announces.
  grpc::Status Upload(const std::string& filename, const std::string& bytes, v1::UploadedFile* out,
                      int64_t claimed = -1) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(60)));
    auto writer = stub_->UploadFile(&context, out);
    int64_t offset = 0;
    do {
      v1::FileChunk chunk;
      if (offset == 0) {
        chunk.set_filename(filename);
        chunk.set_total_bytes(claimed >= 0 ? claimed : static_cast<int64_t>(bytes.size()));
      }
      chunk.set_offset(offset);
      const size_t n = std::min<size_t>(64 << 10, bytes.size() - offset);
      chunk.set_data(bytes.substr(offset, n));
      offset += n;
      if (!writer->Write(chunk)) break;
    } while (offset < static_cast<int64_t>(bytes.size()));
    writer->WritesDone();
    return writer->Finish();
  }

  std::string UploadOrDie(const std::string& filename, const std::string& bytes) {
    v1::UploadedFile uploaded;
    const grpc::Status status = Upload(filename, bytes, &uploaded);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(uploaded.nbytes(), static_cast<int64_t>(bytes.size()));
    EXPECT_EQ(uploaded.sha256().size(), 64u);
    return uploaded.upload_id();
  }

  v1::JobStatus WaitEnded(const std::string& job_id) {
    v1::JobStatus status;
    for (int i = 0; i < 1200; ++i) {
      grpc::ClientContext context;
      v1::JobRef ref;
      ref.set_job_id(job_id);
      EXPECT_TRUE(stub_->GetJob(&context, ref, &status).ok());
      if (status.state() == v1::JOB_STATE_SUCCEEDED || status.state() == v1::JOB_STATE_FAILED ||
          status.state() == v1::JOB_STATE_CANCELLED) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return status;
  }

  static v1::RegistrationOptions Quick() {
    v1::RegistrationOptions o;
    o.set_metric("lncc");
    o.add_scales(4);
    o.add_rigid_iterations(5);
    o.add_affine_iterations(5);
    o.add_deformable_iterations(5);
    o.set_device("cpu");
    return o;
  }

  grpc::Status Register(const v1::RegisterRequest& request, v1::JobStatus* status) {
    grpc::ClientContext context;
    return stub_->Register(&context, request, status);
  }

  std::string series_, dir_;
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<v1::RegistrationService::Stub> stub_;
};

TEST_F(RegistrationUploadFileTest, NiftiAndZippedSeriesRegisterAndApplyByFileId) {
  const std::string fixed = UploadOrDie("fixed.nii.gz", SeriesNifti());
  const std::string moving = UploadOrDie("series.zip", SeriesZip());
  EXPECT_THAT(fixed, ::testing::EndsWith(".nii.gz"));
  EXPECT_THAT(moving, ::testing::EndsWith(".zip"));

  v1::RegisterRequest request;
  request.mutable_fixed()->set_file_id(fixed);
  request.mutable_moving()->set_file_id(moving);
  *request.mutable_options() = Quick();
  v1::JobStatus submitted;
  ASSERT_TRUE(Register(request, &submitted).ok());
  const v1::JobStatus done = WaitEnded(submitted.job_id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.last_progress().message();

  // The result's grid is the fixed (NIfTI) one; the moving zip was read.
  grpc::ClientContext result_context;
  v1::JobRef ref;
  ref.set_job_id(submitted.job_id());
  v1::RegistrationResult result;
  ASSERT_TRUE(stub_->GetResult(&result_context, ref, &result).ok());

  // ApplyTransforms takes file ids too (linked into its own upload folder).
  v1::ApplyTransformsRequest apply;
  apply.mutable_reference()->set_file_id(fixed);
  apply.mutable_input()->set_file_id(moving);
  apply.add_transforms()->set_registration_job_id(submitted.job_id());
  apply.set_device("cpu");
  grpc::ClientContext apply_context;
  v1::JobStatus applied;
  const grpc::Status s = stub_->ApplyTransforms(&apply_context, apply, &applied);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::JobStatus apply_done = WaitEnded(applied.job_id());
  EXPECT_EQ(apply_done.state(), v1::JOB_STATE_SUCCEEDED) << apply_done.last_progress().message();
  EXPECT_TRUE(fs::exists(dir_ + "/state/apply_uploads/" + moving));
}

TEST_F(RegistrationUploadFileTest, FileIdsOutliveARestart) {
  const std::string fixed = UploadOrDie("a.nii.gz", SeriesNifti());
  // A new process on the same state directory: the file is still there.
  stub_.reset();
  server_.reset();
  auto server = StartServer(dir_ + "/state");
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  stub_ = v1::RegistrationService::NewStub(server_->channel);
  v1::RegisterRequest request;
  request.mutable_fixed()->set_file_id(fixed);
  request.mutable_moving()->set_file_id(fixed);
  *request.mutable_options() = Quick();
  v1::JobStatus submitted;
  const grpc::Status s = Register(request, &submitted);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(WaitEnded(submitted.job_id()).state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(RegistrationUploadFileTest, BadUploadsAndIdsAreRefusedNamingTheField) {
  v1::UploadedFile out;
  grpc::Status s = Upload("notes.txt", "hello", &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr(".zip"));
  // The stream ends before the bytes it announced.
  s = Upload("short.nii", std::string(1000, 'x'), &out, 5000);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  // Nothing but finished uploads in the folder.
  for (const auto& entry : fs::directory_iterator(dir_ + "/state/uploads")) {
    ADD_FAILURE() << "left behind: " << entry.path();
  }

  const std::string fixed = UploadOrDie("fixed.nii.gz", SeriesNifti());
  v1::RegisterRequest request;
  request.mutable_fixed()->set_file_id(fixed);
  request.mutable_moving()->set_file_id("up-f-0123456789ab-nosuchfile.nii");
  *request.mutable_options() = Quick();
  v1::JobStatus status;
  s = Register(request, &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("moving: file_id"));
  for (const std::string& bad : std::vector<std::string>{"../state/uploads/" + fixed, "up-f-x/../../etc/passwd.nii",
                                                         "/etc/passwd", "up-f-abc.txt"}) {
    request.mutable_moving()->set_file_id(bad);
    s = Register(request, &status);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_THAT(s.error_message(), HasSubstr("moving: file_id")) << bad;
  }
  request.mutable_moving()->set_file_id(fixed);
  request.mutable_fixed_mask()->set_file_id("up-f-0123456789ab-gone.nii.gz");
  s = Register(request, &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("fixed mask: file_id"));
}

}  // namespace
}  // namespace tessera
