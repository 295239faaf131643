// ReconstructionService over a real gRPC channel, as `tessera serve` hosts it
// (engine + in-process scheduler + the adapter): upload a geometry and a
// sinogram, reconstruct, watch per-iteration progress, fetch the summary and
// the volume; uploads that are truncated, oversized or of an unknown kind;
// idempotent request ids; bad requests refused at submit naming the field;
// cancel; a worker without a scheduler.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/nifti_io.h"
#include "services/common/file_upload.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/formats/ultrasound_h5.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/mri_phantom.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/phantoms/ultrasound_phantom.h"
#include "services/reconstruction/reconstruction_engine.h"
#include "services/reconstruction/reconstruction_service.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "services/scheduler/testing/service_testing.h"
#include "services/server/service_host.h"
#include "tessera/v1/reconstruction.grpc.pb.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TmpDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(base ? base : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct TestServer {
  std::shared_ptr<const reconstruction::ReconstructionEngine> engine;
  std::unique_ptr<scheduler::testing::InProcessScheduler> jobs;
  std::unique_ptr<ReconstructionServiceImpl> service;
  std::unique_ptr<ServiceHost> host;
  std::shared_ptr<grpc::Channel> channel;
  ~TestServer() {
    host.reset();
    service.reset();
    jobs.reset();
  }
};

absl::StatusOr<std::unique_ptr<TestServer>> StartServer(const std::string& root, const std::string& state_dir,
                                                        int64_t max_file_bytes = 64 << 20,
                                                        ReconstructionServiceOptions service_options = {}) {
  ServerOptions options = scheduler::testing::LoopbackServerOptions();
  options.data_roots = {root};
  options.max_volume_bytes = max_file_bytes;
  options.device = "cpu";
  auto server = std::make_unique<TestServer>();
  absl::StatusOr<std::string> uploads = CreateReconstructionUploadDir(state_dir);
  if (!uploads.ok()) return uploads.status();
  auto engine = reconstruction::ReconstructionEngine::Create({root, *uploads}, options.max_volume_bytes, "cpu");
  if (!engine.ok()) return engine.status();
  server->engine = *engine;
  auto jobs = scheduler::testing::InProcessScheduler::Start(state_dir, {*engine});
  if (!jobs.ok()) return jobs.status();
  server->jobs = *std::move(jobs);
  auto service = ReconstructionServiceImpl::Create(options, service_options);
  if (!service.ok()) return service.status();
  server->service = *std::move(service);
  if (absl::Status s = server->service->AttachScheduler(&server->jobs->scheduler(), state_dir); !s.ok()) return s;
  auto hosted = scheduler::testing::StartLoopbackHost(options, server->service.get());
  if (!hosted.ok()) return hosted.status();
  server->host = std::move(hosted->host);
  server->channel = std::move(hosted->channel);
  return server;
}

// Sends `bytes` as FileChunks of `chunk` bytes; `declared` < 0 declares the
// true size.
grpc::Status Upload(v1::ReconstructionService::Stub& stub, const std::string& filename, const std::string& bytes,
                    v1::UploadedFile* out, int64_t chunk = 4096, int64_t declared = -1) {
  grpc::ClientContext ctx;
  auto writer = stub.UploadFile(&ctx, out);
  for (int64_t offset = 0; offset < static_cast<int64_t>(bytes.size()) || offset == 0; offset += chunk) {
    v1::FileChunk c;
    if (offset == 0) {
      c.set_filename(filename);
      c.set_total_bytes(declared >= 0 ? declared : static_cast<int64_t>(bytes.size()));
    }
    c.set_offset(offset);
    c.set_data(bytes.substr(offset, chunk));
    if (!writer->Write(c)) break;
    if (bytes.empty()) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

class ReconstructionServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TmpDir("recon-root");
    auto server = StartServer(root_, TmpDir("recon-state"));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::ReconstructionService::NewStub(server_->channel);
    // A 2-D parallel problem: geometry JSON and the exact sinogram of a
    // Shepp-Logan phantom.
    absl::StatusOr<std::string> json = recon::formats::ExampleGeometryJson("parallel", 48);
    ASSERT_TRUE(json.ok());
    geometry_json_ = *json;
    std::ofstream(root_ + "/geometry.json") << geometry_json_;
    absl::StatusOr<recon::CtGeometry> g = recon::formats::ParseGeometryJson(geometry_json_);
    ASSERT_TRUE(g.ok());
    geometry_ = *g;
    absl::StatusOr<NDArray> sinogram =
        recon::phantoms::AnalyticSinogram(recon::phantoms::SheppLogan2D(40), geometry_, 1);
    ASSERT_TRUE(sinogram.ok());
    ASSERT_TRUE(recon::formats::WriteSinogram(*sinogram, geometry_.projection, root_ + "/sinogram.nii.gz").ok());
  }

  std::string root_;
  std::string geometry_json_;
  recon::CtGeometry geometry_;
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<v1::ReconstructionService::Stub> stub_;
};

TEST_F(ReconstructionServiceTest, UploadReconstructWatchAndDownload) {
  v1::UploadedFile geometry, sinogram;
  ASSERT_TRUE(Upload(*stub_, "geometry.json", geometry_json_, &geometry).ok());
  const std::string sino_bytes = ReadFile(root_ + "/sinogram.nii.gz");
  grpc::Status up = Upload(*stub_, "scan.nii.gz", sino_bytes, &sinogram, 1000);
  ASSERT_TRUE(up.ok()) << up.error_message();
  EXPECT_EQ(sinogram.nbytes(), static_cast<int64_t>(sino_bytes.size()));
  EXPECT_EQ(sinogram.sha256().size(), 64u);
  EXPECT_THAT(sinogram.upload_id(), ::testing::EndsWith(".nii.gz"));

  v1::ReconstructRequest request;
  request.mutable_geometry()->set_upload_id(geometry.upload_id());
  request.mutable_sinogram()->set_upload_id(sinogram.upload_id());
  request.mutable_ct()->set_method("cgls");
  request.mutable_ct()->set_iterations(6);
  request.set_request_id("scan-42");
  request.set_output_dir("out");
  v1::JobStatus status;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub_->Reconstruct(&ctx, request, &status);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // The same request id returns the same job.
  v1::JobStatus again;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Reconstruct(&ctx, request, &again).ok());
  }
  EXPECT_EQ(again.job_id(), status.job_id());

  // Watch until the end: per-iteration progress with the residual.
  std::vector<v1::Progress> seen;
  {
    grpc::ClientContext ctx;
    v1::JobRef job;
    job.set_job_id("scan-42");  // the request id works as a job id
    auto reader = stub_->WatchJob(&ctx, job);
    v1::Progress p;
    while (reader->Read(&p)) seen.push_back(p);
    ASSERT_TRUE(reader->Finish().ok());
  }
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().state(), v1::JOB_STATE_SUCCEEDED);
  // Checked at submit and run: the request is unpacked into one plan (the
  // retry above is decided by the job core before any engine check).
  EXPECT_EQ(server_->engine->plans_made(), 1);

  v1::ReconstructionResult result;
  {
    grpc::ClientContext ctx;
    v1::JobRef job;
    job.set_job_id(status.job_id());
    grpc::Status s = stub_->GetResult(&ctx, job, &result);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(result.method(), "cgls");
  EXPECT_EQ(result.iterations(), 6);
  EXPECT_EQ(result.residual_norms_size(), 6);
  EXPECT_EQ(result.backend(), "cpu");
  EXPECT_EQ(result.output_path(), fs::canonical(root_).string() + "/out/reconstruction.nii.gz");
  EXPECT_TRUE(fs::exists(result.output_path()));

  // Download: the volume with its world geometry, equal to the output copy.
  std::string bytes;
  v1::VolumeHeader header;
  {
    grpc::ClientContext ctx;
    v1::ReconDownloadRequest download;
    download.set_job_id(status.job_id());
    download.set_chunk_bytes(1000);
    auto reader = stub_->DownloadResult(&ctx, download);
    v1::ArrayChunk chunk;
    while (reader->Read(&chunk)) {
      if (chunk.has_header()) header = chunk.header();
      bytes += chunk.data();
    }
    grpc::Status s = reader->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(header.dims_size(), 3);
  EXPECT_EQ(header.dims(0), 48);
  EXPECT_EQ(header.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_NEAR(header.origin(0), geometry_.volume.VoxelCenter(0, 0, 0).x, 1e-4);
  absl::StatusOr<Volume> copy = ReadNifti(result.output_path());
  ASSERT_TRUE(copy.ok());
  ASSERT_EQ(bytes.size(), copy->data.nbytes());
  EXPECT_EQ(0, std::memcmp(bytes.data(), copy->data.raw_data(), bytes.size()));
  absl::StatusOr<std::string> sha = Sha256OfFile(result.output_path());
  ASSERT_TRUE(sha.ok());
  EXPECT_EQ(*sha, result.volume_sha256());
}

// Issue 12: an ultrasound job from an uploaded PICMUS HDF5 file and an MRI job
// from BART files named by server path, through the same RPCs as CT.
v1::ReconstructionResult RunToResult(v1::ReconstructionService::Stub& stub, const v1::ReconstructRequest& request) {
  v1::JobStatus status;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub.Reconstruct(&ctx, request, &status);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  v1::JobRef job;
  job.set_job_id(status.job_id());
  {
    grpc::ClientContext ctx;
    auto reader = stub.WatchJob(&ctx, job);
    v1::Progress p;
    while (reader->Read(&p)) {
    }
    EXPECT_TRUE(reader->Finish().ok());
  }
  v1::ReconstructionResult result;
  grpc::ClientContext ctx;
  grpc::Status s = stub.GetResult(&ctx, job, &result);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return result;
}

TEST_F(ReconstructionServiceTest, UltrasoundAndMriJobsRunThroughTheSameRpcs) {
  recon::phantoms::UltrasoundPhantomOptions us_options;
  us_options.channels = 32;
  us_options.transmits = 3;
  absl::StatusOr<recon::phantoms::UltrasoundPhantom> us = recon::phantoms::MakeUltrasoundPhantom(us_options);
  ASSERT_TRUE(us.ok()) << us.status();
  ASSERT_TRUE(recon::formats::WriteUltrasoundH5(us->acquisition, root_ + "/rf.h5").ok());
  v1::UploadedFile rf;
  grpc::Status up = Upload(*stub_, "rf.h5", ReadFile(root_ + "/rf.h5"), &rf, 1 << 20);
  ASSERT_TRUE(up.ok()) << up.error_message();
  EXPECT_THAT(rf.upload_id(), ::testing::EndsWith(".h5"));
  v1::ReconstructRequest request;
  request.mutable_ultrasound()->mutable_channel_data()->set_upload_id(rf.upload_id());
  request.mutable_ultrasound()->set_method("mv");
  request.mutable_ultrasound()->set_subarray(8);
  for (int p : {64, 64}) request.mutable_ultrasound()->add_pixels(p);
  request.set_output_dir("us-out");
  v1::ReconstructionResult result = RunToResult(*stub_, request);
  EXPECT_EQ(result.modality(), "ultrasound");
  EXPECT_EQ(result.method(), "mv");
  EXPECT_THAT(result.files(), ::testing::ElementsAre("reconstruction.nii.gz", "reconstruction.png"));
  EXPECT_TRUE(fs::exists(root_ + "/us-out/reconstruction.png"));

  recon::phantoms::MriPhantomOptions mri_options;
  mri_options.size = 32;
  mri_options.coils = 4;
  absl::StatusOr<recon::phantoms::MriPhantom> mri = recon::phantoms::MakeMriPhantom(mri_options);
  ASSERT_TRUE(mri.ok()) << mri.status();
  ASSERT_TRUE(recon::phantoms::WriteMriPhantom(*mri, root_ + "/mri").ok());
  v1::ReconstructRequest mri_request;
  mri_request.mutable_mri()->mutable_kspace()->set_path("mri/kspace");
  mri_request.mutable_mri()->mutable_trajectory()->set_path("mri/traj.cfl");
  mri_request.mutable_mri()->mutable_coils()->set_path("mri/coils.hdr");
  mri_request.mutable_mri()->set_iterations(4);
  result = RunToResult(*stub_, mri_request);
  EXPECT_EQ(result.modality(), "mri");
  EXPECT_EQ(result.method(), "cgsense");
  EXPECT_EQ(result.iterations(), 4);
  EXPECT_THAT(result.files(),
              ::testing::ElementsAre("reconstruction.nii.gz", "reconstruction.cfl", "reconstruction.hdr"));

  // A BART input missing its .hdr is refused at submit, naming the field.
  fs::remove(root_ + "/mri/coils.hdr");
  v1::JobStatus status;
  grpc::ClientContext ctx;
  grpc::Status s = stub_->Reconstruct(&ctx, mri_request, &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("mri.coils"));
}

TEST_F(ReconstructionServiceTest, BadUploadsGetClearStatuses) {
  v1::UploadedFile out;
  grpc::Status s = Upload(*stub_, "scan.exe", "abc", &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr(".nii.gz"));
  // Names are checked like ids (issue 31): no newline, NUL or separators.
  for (const std::string name : {std::string("scan\n.nii"), std::string("scan\0x.nii", 10), std::string("a\\b.nii")}) {
    s = Upload(*stub_, name, "abc", &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_EQ(s.error_message().find('\n'), std::string::npos) << s.error_message();
  }
  // Declares more than it sends: DATA_LOSS, and nothing is kept.
  s = Upload(*stub_, "scan.nii", std::string(100, 'x'), &out, 10, 200);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS);
  // Over the limit (a server of 1 KiB files).
  const std::string small_state = TmpDir("recon-state-small");
  auto small = StartServer(root_, small_state, 1024);
  ASSERT_TRUE(small.ok());
  auto small_stub = v1::ReconstructionService::NewStub((*small)->channel);
  s = Upload(*small_stub, "scan.nii", std::string(5000, 'x'), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // A caller's uploads are bounded by its quota (here 3000 bytes).
  ReconstructionServiceOptions quota;
  quota.upload_quota_bytes = 3000;
  auto quoted = StartServer(root_, TmpDir("recon-state-quota"), 1 << 20, quota);
  ASSERT_TRUE(quoted.ok());
  auto quoted_stub = v1::ReconstructionService::NewStub((*quoted)->channel);
  EXPECT_TRUE(Upload(*quoted_stub, "a.nii", std::string(2000, 'x'), &out).ok());
  s = Upload(*quoted_stub, "b.nii", std::string(2000, 'x'), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("upload quota"));
  EXPECT_TRUE(Upload(*quoted_stub, "c.nii", std::string(900, 'x'), &out).ok());
  // Nothing but finished uploads in the upload folder.
  for (const auto& entry : fs::directory_iterator(small_state + "/recon-uploads")) {
    ADD_FAILURE() << "left behind: " << entry.path();
  }
}

TEST_F(ReconstructionServiceTest, BadRequestsAreRefusedAtSubmitNamingTheField) {
  const auto submit = [&](const v1::ReconstructRequest& r) {
    grpc::ClientContext ctx;
    v1::JobStatus status;
    return stub_->Reconstruct(&ctx, r, &status);
  };
  v1::ReconstructRequest r;
  r.mutable_geometry()->set_path("geometry.json");
  r.mutable_sinogram()->set_path("sinogram.nii.gz");
  r.mutable_ct()->set_method("fdk");
  grpc::Status s = submit(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("ct.method"));
  r.mutable_ct()->set_method("fbp");
  r.mutable_sinogram()->set_path("geometry.json");
  s = submit(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("sinogram"));
  r.mutable_sinogram()->set_path("/etc/passwd");
  EXPECT_EQ(submit(r).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // A 10 KB path: the real error comes back, quoting a bounded prefix (an
  // echo of the whole path would exceed the client's metadata limit).
  r.mutable_sinogram()->set_path("/" + std::string(10240, 'p'));
  s = submit(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message().substr(0, 200);
  EXPECT_LT(s.error_message().size(), 1024u);
  EXPECT_THAT(s.error_message(), HasSubstr("(10241 bytes)"));
  r.mutable_sinogram()->set_upload_id("rf-nonexistent.nii");
  EXPECT_EQ(submit(r).error_code(), grpc::StatusCode::NOT_FOUND);
  r.mutable_sinogram()->set_upload_id("../../etc/passwd");
  EXPECT_EQ(submit(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r.clear_ct();
  r.mutable_sinogram()->set_path("sinogram.nii.gz");
  s = submit(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("ct, pet, mri or ultrasound"));
}

TEST_F(ReconstructionServiceTest, CancelARunningJob) {
  v1::ReconstructRequest r;
  r.mutable_geometry()->set_path("geometry.json");
  r.mutable_sinogram()->set_path("sinogram.nii.gz");
  r.mutable_ct()->set_method("sart");
  r.mutable_ct()->set_iterations(10000);
  v1::JobStatus status;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Reconstruct(&ctx, r, &status).ok());
  }
  // Wait for it to run, then cancel.
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext ctx;
    v1::JobRef job;
    job.set_job_id(status.job_id());
    v1::JobStatus now;
    ASSERT_TRUE(stub_->GetJob(&ctx, job, &now).ok());
    if (now.state() == v1::JOB_STATE_RUNNING && now.last_progress().step() > 0) break;
    absl::SleepFor(absl::Milliseconds(25));
  }
  {
    grpc::ClientContext ctx;
    v1::JobRef job;
    job.set_job_id(status.job_id());
    v1::JobStatus after;
    ASSERT_TRUE(stub_->CancelJob(&ctx, job, &after).ok());
  }
  absl::StatusOr<v1::JobInfo> ended = server_->jobs->WaitUntilEnded(status.job_id(), absl::Seconds(30));
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::JOB_STATE_CANCELLED);
  grpc::ClientContext ctx;
  v1::JobRef job;
  job.set_job_id(status.job_id());
  v1::ReconstructionResult result;
  EXPECT_EQ(stub_->GetResult(&ctx, job, &result).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(ReconstructionServiceWorkerTest, WithoutASchedulerEveryCallIsFailedPrecondition) {
  ServerOptions options = scheduler::testing::LoopbackServerOptions();
  auto service = ReconstructionServiceImpl::Create(options);
  ASSERT_TRUE(service.ok());
  auto hosted = scheduler::testing::StartLoopbackHost(options, service->get());
  ASSERT_TRUE(hosted.ok());
  auto stub = v1::ReconstructionService::NewStub(hosted->channel);
  grpc::ClientContext ctx;
  v1::JobStatus status;
  grpc::Status s = stub->Reconstruct(&ctx, v1::ReconstructRequest(), &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("SchedulerService"));
  v1::UploadedFile out;
  EXPECT_EQ(Upload(*stub, "g.json", "{}", &out).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

}  // namespace
}  // namespace tessera
