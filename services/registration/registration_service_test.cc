// End-to-end tests of tessera.v1.RegistrationService over the scheduler: an
// in-process ServiceHost on loopback (port 0) driven over a real channel, the
// service submitting to a scheduler with an in-process worker and a SQLite
// store (services/scheduler/testing), registering a 2 mm synthetic problem
// made from Colin27 `ch2` + AAL (Debian's mricron-data) on the CPU backend
// with few iterations.
#include "services/registration/registration_service.h"

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"
#include "services/registration/registration_engine.h"
#include "kernels/registration/pipeline/synthetic.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "services/scheduler/testing/service_testing.h"
#include "services/server/service_host.h"
#include "tessera/v1/registration.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using scheduler::testing::Exists;
using scheduler::testing::In;
using scheduler::testing::TmpDir;

constexpr char kCh2[] = "/usr/share/mricron/templates/ch2.nii.gz";
constexpr char kAal[] = "/usr/share/mricron/templates/aal.nii.gz";

// The 2 mm problem, written once as NIfTI files under the data root.
struct Problem {
  Volume fixed, fixed_labels, moving, moving_labels;
  std::string root, fixed_path, fixed_labels_path, moving_path, moving_labels_path;
};

std::unique_ptr<Problem> MakeProblem() {
  auto p = std::make_unique<Problem>();
  absl::StatusOr<Volume> ch2 = ReadNifti(kCh2);
  absl::StatusOr<Volume> aal = ReadNifti(kAal);
  if (!ch2.ok() || !aal.ok()) return nullptr;
  p->fixed = registration::DownsampleImage(*ch2, 2).value();
  p->fixed_labels = registration::DownsampleLabels(*aal, 2).value();
  registration::SyntheticOptions options;
  options.seed = 7;
  registration::SyntheticPair pair = registration::MakeSyntheticPair(p->fixed, &p->fixed_labels, options).value();
  p->moving = pair.moving;
  p->moving_labels = *pair.moving_labels;
  p->root = TmpDir() + "/data";
  mkdir(p->root.c_str(), 0755);
  p->fixed_path = p->root + "/fixed.nii";
  p->fixed_labels_path = p->root + "/fixed_labels.nii";
  p->moving_path = p->root + "/moving.nii";
  p->moving_labels_path = p->root + "/moving_labels.nii";
  for (auto [volume, path] : {std::pair<const Volume*, const std::string*>{&p->fixed, &p->fixed_path},
                              {&p->fixed_labels, &p->fixed_labels_path},
                              {&p->moving, &p->moving_path},
                              {&p->moving_labels, &p->moving_labels_path}}) {
    absl::Status written = WriteNifti(*volume, *path);
    if (!written.ok()) return nullptr;
  }
  return p;
}

// Quick CPU settings: two scales, few iterations.
v1::RegistrationOptions QuickOptions() {
  v1::RegistrationOptions o;
  o.set_metric("lncc");
  o.add_scales(2);
  o.add_scales(1);
  for (int n : {30, 10}) o.add_rigid_iterations(n);
  for (int n : {30, 10}) o.add_affine_iterations(n);
  for (int n : {40, 15}) o.add_deformable_iterations(n);
  o.set_device("cpu");
  return o;
}

ServerOptions TestServerOptions(const std::string& root) {
  ServerOptions options = scheduler::testing::LoopbackServerOptions();
  options.data_roots = {root};
  options.max_volume_bytes = 64 << 20;
  return options;
}

// What `tessera serve` (role all) hosts for registration: the engine (data
// roots: `root` and the service's upload folder), a scheduler over a store in
// `state_dir`, the service attached to it, and a host on a loopback port.
struct TestServer {
  std::unique_ptr<scheduler::testing::InProcessScheduler> jobs;
  std::unique_ptr<RegistrationServiceImpl> service;
  std::unique_ptr<ServiceHost> host;
  std::shared_ptr<grpc::Channel> channel;

  ~TestServer() {
    host.reset();     // first: no more calls
    service.reset();
    jobs.reset();     // stops the scheduler (running jobs are re-queued)
  }
};

absl::StatusOr<std::unique_ptr<TestServer>> StartServer(
    const std::string& root, const std::string& state_dir, RegistrationServiceOptions service_options = {},
    scheduler::testing::InProcessSchedulerOptions scheduler_options = {}) {
  const ServerOptions options = TestServerOptions(root);
  auto server = std::make_unique<TestServer>();
  absl::StatusOr<std::string> uploads = CreateRegistrationUploadDir(state_dir);
  if (!uploads.ok()) return uploads.status();
  absl::StatusOr<std::shared_ptr<const registration::RegistrationEngine>> engine =
      registration::RegistrationEngine::Create({root, *uploads}, options.max_volume_bytes, options.device);
  if (!engine.ok()) return engine.status();
  auto jobs = scheduler::testing::InProcessScheduler::Start(state_dir, {*engine}, scheduler_options);
  if (!jobs.ok()) return jobs.status();
  server->jobs = *std::move(jobs);
  auto service = RegistrationServiceImpl::Create(options, service_options);
  if (!service.ok()) return service.status();
  server->service = *std::move(service);
  absl::Status attached = server->service->AttachScheduler(&server->jobs->scheduler(), state_dir);
  if (!attached.ok()) return attached;
  auto hosted = scheduler::testing::StartLoopbackHost(options, server->service.get());
  if (!hosted.ok()) return hosted.status();
  server->host = std::move(hosted->host);
  server->channel = std::move(hosted->channel);
  return server;
}

class RegistrationServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    problem_ = MakeProblem().release();
    if (problem_ == nullptr) return;
    auto server = StartServer(problem_->root, StateDir());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }

  static void TearDownTestSuite() {
    delete server_;
    delete problem_;
    server_ = nullptr;
    problem_ = nullptr;
  }

  static std::string StateDir() { return TmpDir() + "/state"; }

  void SetUp() override {
    if (problem_ == nullptr) GTEST_SKIP() << "mricron-data (" << kCh2 << ", " << kAal << ") not installed";
    ASSERT_NE(server_, nullptr);
    stub_ = v1::RegistrationService::NewStub(server_->channel);
  }

  grpc::Status Upload(const Volume& volume, int64_t chunk_bytes, v1::UploadedVolume* uploaded) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(60)));
    auto writer = stub_->UploadVolume(&context, uploaded);
    v1::ArrayChunk first;
    v1::VolumeHeader* header = first.mutable_header();
    for (int64_t d : volume.data.shape()) header->add_dims(d);
    header->set_dtype(static_cast<v1::DType>(static_cast<int>(volume.data.dtype())));
    for (double v : volume.geometry.spacing) header->add_spacing(v);
    for (double v : volume.geometry.origin) header->add_origin(v);
    for (double v : volume.geometry.direction) header->add_direction(v);
    const char* bytes = static_cast<const char*>(volume.data.raw_data());
    const int64_t total = static_cast<int64_t>(volume.data.nbytes());
    int64_t offset = 0;
    bool ok = true;
    do {
      v1::ArrayChunk chunk = offset == 0 ? first : v1::ArrayChunk();
      const int64_t size = std::min(chunk_bytes, total - offset);
      chunk.set_offset(offset);
      chunk.set_data(bytes + offset, static_cast<size_t>(size));
      ok = writer->Write(chunk);
      offset += size;
    } while (ok && offset < total);
    writer->WritesDone();
    return writer->Finish();
  }

  std::string UploadOrDie(const Volume& volume) {
    v1::UploadedVolume uploaded;
    grpc::Status status = Upload(volume, 256 << 10, &uploaded);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return uploaded.upload_id();
  }

  grpc::Status Register(const v1::RegisterRequest& request, v1::JobStatus* status) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(30)));
    return stub_->Register(&context, request, status);
  }

  grpc::Status GetJob(const std::string& id, v1::JobStatus* status) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(10)));
    v1::JobRef request;
    request.set_job_id(id);
    return stub_->GetJob(&context, request, status);
  }

  grpc::Status CancelJob(const std::string& id, v1::JobStatus* status) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(10)));
    v1::JobRef request;
    request.set_job_id(id);
    return stub_->CancelJob(&context, request, status);
  }

  grpc::Status GetResult(const std::string& id, v1::RegistrationResult* result) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(10)));
    v1::JobRef request;
    request.set_job_id(id);
    return stub_->GetResult(&context, request, result);
  }

  // Watches a job to its end (or the deadline); returns every message.
  grpc::Status Watch(const std::string& id, std::chrono::milliseconds deadline, std::vector<v1::Progress>* messages) {
    grpc::ClientContext context;
    context.set_deadline(In(deadline));
    v1::JobRef request;
    request.set_job_id(id);
    auto reader = stub_->WatchJob(&context, request);
    v1::Progress progress;
    while (reader->Read(&progress)) messages->push_back(progress);
    return reader->Finish();
  }

  // Downloads an artifact; returns the header and the reassembled bytes.
  grpc::Status Download(const std::string& id, v1::RegistrationArtifact artifact, v1::VolumeHeader* header,
                        std::string* bytes, int* chunks, int chunk_bytes = 0) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(60)));
    v1::DownloadRequest request;
    request.set_job_id(id);
    request.set_artifact(artifact);
    request.set_chunk_bytes(chunk_bytes);
    auto reader = stub_->DownloadResult(&context, request);
    v1::ArrayChunk chunk;
    *chunks = 0;
    bytes->clear();
    while (reader->Read(&chunk)) {
      if (*chunks == 0) {
        EXPECT_TRUE(chunk.has_header());
        *header = chunk.header();
      } else {
        EXPECT_FALSE(chunk.has_header());
      }
      EXPECT_EQ(chunk.offset(), static_cast<int64_t>(bytes->size()));
      bytes->append(chunk.data());
      ++*chunks;
    }
    return reader->Finish();
  }

  static int64_t Product(const v1::VolumeHeader& header) {
    int64_t n = 1;
    for (int64_t d : header.dims()) n *= d;
    return n;
  }

  static Problem* problem_;
  static TestServer* server_;
  std::unique_ptr<v1::RegistrationService::Stub> stub_;
};

Problem* RegistrationServiceTest::problem_ = nullptr;
TestServer* RegistrationServiceTest::server_ = nullptr;

TEST_F(RegistrationServiceTest, UploadRegisterWatchAndDownload) {
  v1::UploadedVolume fixed;
  ASSERT_TRUE(Upload(problem_->fixed, 300 << 10, &fixed).ok());  // chunks split voxels
  EXPECT_EQ(fixed.nbytes(), static_cast<int64_t>(problem_->fixed.data.nbytes()));
  EXPECT_GT(fixed.expires_unix_ms(), 0);
  EXPECT_EQ(fixed.header().dims_size(), 3);
  const std::string moving = UploadOrDie(problem_->moving);
  ASSERT_FALSE(moving.empty());

  v1::RegisterRequest request;
  request.mutable_fixed()->set_upload_id(fixed.upload_id());
  request.mutable_moving()->set_upload_id(moving);
  *request.mutable_options() = QuickOptions();
  v1::JobStatus status;
  grpc::Status rpc = Register(request, &status);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_FALSE(status.job_id().empty());
  EXPECT_TRUE(status.state() == v1::JOB_STATE_QUEUED || status.state() == v1::JOB_STATE_RUNNING)
      << v1::JobState_Name(status.state());
  // The uploads went to files, which the scheduler's job names.
  for (const std::string& id : {fixed.upload_id(), moving}) {
    EXPECT_TRUE(Exists(StateDir() + "/uploads/" + id + ".nii")) << id;
  }
  absl::StatusOr<v1::JobInfo> info = server_->jobs->scheduler().Get(status.job_id());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->kind(), "registration");

  std::vector<v1::Progress> messages;
  rpc = Watch(status.job_id(), std::chrono::seconds(300), &messages);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_GE(messages.size(), 5u);
  EXPECT_EQ(messages.back().state(), v1::JOB_STATE_SUCCEEDED) << messages.back().message();
  EXPECT_DOUBLE_EQ(messages.back().fraction(), 1.0);
  int with_loss = 0;
  double last_fraction = 0;
  for (size_t i = 0; i + 1 < messages.size(); ++i) {
    const v1::Progress& m = messages[i];
    EXPECT_EQ(m.job_id(), status.job_id());
    EXPECT_TRUE(m.state() == v1::JOB_STATE_QUEUED || m.state() == v1::JOB_STATE_RUNNING);
    if (m.metrics().count("loss") > 0) ++with_loss;
    EXPECT_GE(m.fraction(), last_fraction - 1e-12) << m.stage() << " " << m.message();
    last_fraction = m.fraction();
  }
  EXPECT_GE(with_loss, 3);
  // Throttled: far fewer messages than iterations (about 10 a second).
  EXPECT_LT(messages.size(), 400u);

  v1::RegistrationResult result;
  rpc = GetResult(status.job_id(), &result);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(result.job_id(), status.job_id());
  EXPECT_LT(result.final_loss(), result.initial_loss());
  EXPECT_FALSE(result.has_dice_before());  // no labels
  EXPECT_EQ(result.affine_ras_size(), 16);
  EXPECT_EQ(result.backend(), "cpu");
  EXPECT_GT(result.log_size(), 0);
  EXPECT_TRUE(result.has_min_jacobian());
  EXPECT_EQ(result.files().warped(), "");  // no output_dir
  EXPECT_EQ(result.metric(), "lncc");
  EXPECT_THAT(result.summary_json(), HasSubstr("\"final_loss\""));

  v1::VolumeHeader header;
  std::string bytes;
  int chunks = 0;
  rpc = Download(status.job_id(), v1::REGISTRATION_ARTIFACT_WARPED, &header, &bytes, &chunks);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_EQ(header.dims_size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(header.dims(i), problem_->fixed.data.dim(i));
  EXPECT_EQ(header.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), Product(header) * 4);
  EXPECT_GT(chunks, 1);  // 3.6 MB in 1 MiB chunks
  ASSERT_EQ(header.spacing_size(), 3);
  EXPECT_DOUBLE_EQ(header.spacing(0), problem_->fixed.geometry.spacing[0]);
  const float* warped = reinterpret_cast<const float*>(bytes.data());
  double sum = 0;
  for (int64_t i = 0; i < Product(header); ++i) {
    ASSERT_TRUE(std::isfinite(warped[i]));
    sum += warped[i];
  }
  EXPECT_GT(sum, 0);

  rpc = Download(status.job_id(), v1::REGISTRATION_ARTIFACT_WARP, &header, &bytes, &chunks, 100000);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_EQ(header.dims_size(), 4);
  EXPECT_EQ(header.dims(3), 3);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), Product(header) * 4);
  EXPECT_GT(chunks, 100);

  rpc = Download(status.job_id(), v1::REGISTRATION_ARTIFACT_AFFINE, &header, &bytes, &chunks);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(chunks, 1);
  EXPECT_EQ(header.dtype(), v1::DTYPE_UINT8);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), header.dims(0));
  EXPECT_THAT(bytes, HasSubstr("AffineTransform_double_3_3"));

  // Not produced: no labels given, no inverse requested.
  EXPECT_EQ(Download(status.job_id(), v1::REGISTRATION_ARTIFACT_WARPED_LABELS, &header, &bytes, &chunks).error_code(),
            grpc::StatusCode::NOT_FOUND);
  rpc = Download(status.job_id(), v1::REGISTRATION_ARTIFACT_INVERSE_WARP, &header, &bytes, &chunks);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(rpc.error_message(), HasSubstr("inverse_warp"));
  EXPECT_EQ(Download(status.job_id(), v1::REGISTRATION_ARTIFACT_UNSPECIFIED, &header, &bytes, &chunks).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Watching an ended job sends its final state at once.
  messages.clear();
  ASSERT_TRUE(Watch(status.job_id(), std::chrono::seconds(10), &messages).ok());
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(RegistrationServiceTest, RegisterByPathsWithLabelsIdempotently) {
  v1::RegisterRequest request;
  request.mutable_fixed()->set_path(problem_->fixed_path);
  request.mutable_moving()->set_path("moving.nii");  // relative to the data root
  request.mutable_fixed_labels()->set_path(problem_->fixed_labels_path);
  request.mutable_moving_labels()->set_path(problem_->moving_labels_path);
  *request.mutable_options() = QuickOptions();
  request.mutable_options()->set_inverse_warp(true);
  request.set_job_id("paths-with-labels.1");
  request.set_output_dir("out-labels");  // created under the root
  // The engine plans (parses) the request once for the whole job: submit
  // checks, placement and the run (issue 30).
  absl::StatusOr<std::shared_ptr<const jobs::Engine>> engine =
      server_->jobs->engines().FindKind("registration");
  ASSERT_TRUE(engine.ok()) << engine.status();
  const auto* registration = dynamic_cast<const registration::RegistrationEngine*>(engine->get());
  ASSERT_NE(registration, nullptr);
  const int64_t plans_before = registration->plans_made();
  v1::JobStatus first, again;
  grpc::Status rpc = Register(request, &first);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  // The scheduler names the job; the client's id is its request id, and
  // every job call takes either.
  ASSERT_FALSE(first.job_id().empty());
  EXPECT_NE(first.job_id(), "paths-with-labels.1");
  absl::StatusOr<v1::JobInfo> info = server_->jobs->scheduler().Get(first.job_id());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->request_id(), "paths-with-labels.1");
  ASSERT_TRUE(GetJob("paths-with-labels.1", &again).ok());
  EXPECT_EQ(again.job_id(), first.job_id());

  // The same id again with the same request is the same job; with another
  // request, ALREADY_EXISTS naming the id (issue 39).
  ASSERT_TRUE(Register(request, &again).ok());
  EXPECT_EQ(again.job_id(), first.job_id());
  EXPECT_EQ(again.created_unix_ms(), first.created_unix_ms());
  v1::RegisterRequest other = request;
  other.mutable_options()->set_metric("mse");
  rpc = Register(other, &again);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::ALREADY_EXISTS) << rpc.error_message();
  EXPECT_THAT(rpc.error_message(), HasSubstr("job_id 'paths-with-labels.1'"));

  std::vector<v1::Progress> messages;
  rpc = Watch("paths-with-labels.1", std::chrono::seconds(300), &messages);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_FALSE(messages.empty());
  ASSERT_EQ(messages.back().state(), v1::JOB_STATE_SUCCEEDED) << messages.back().message();

  // And after it ended: still the same job, not a new run.
  ASSERT_TRUE(Register(request, &again).ok());
  EXPECT_EQ(again.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(registration->plans_made() - plans_before, 1);

  v1::RegistrationResult result;
  rpc = GetResult("paths-with-labels.1", &result);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(result.job_id(), first.job_id());
  ASSERT_TRUE(result.has_dice_before());
  ASSERT_TRUE(result.has_dice_after());
  std::printf("mean Dice %.3f -> %.3f, loss %.4f -> %.4f, %.1f s\n", result.dice_before(), result.dice_after(),
              result.initial_loss(), result.final_loss(), result.seconds());
  EXPECT_GT(result.dice_after(), result.dice_before() + 0.05);
  EXPECT_LT(result.folded_percent(), 1.0);
  EXPECT_EQ(result.metric(), "lncc");
  const std::string out = problem_->root + "/out-labels";
  EXPECT_EQ(result.files().warped(), out + "/warped.nii.gz");
  for (const std::string& path : {result.files().warped(), result.files().warped_labels(), result.files().affine(),
                                  result.files().warp(), result.files().inverse_warp()}) {
    EXPECT_TRUE(Exists(path)) << "'" << path << "'";
  }

  v1::VolumeHeader header;
  std::string bytes;
  int chunks = 0;
  rpc = Download("paths-with-labels.1", v1::REGISTRATION_ARTIFACT_WARPED_LABELS, &header, &bytes, &chunks);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(header.dtype(), v1::DTYPE_INT32);
  ASSERT_EQ(header.dims_size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(header.dims(i), problem_->fixed.data.dim(i));
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), Product(header) * 4);
  rpc = Download(first.job_id(), v1::REGISTRATION_ARTIFACT_INVERSE_WARP, &header, &bytes, &chunks);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(header.dims_size(), 4);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), Product(header) * 4);
  // The inverse undoes the forward field: their sum at a voxel is small
  // where the field is smooth (RAS mm, planar: both from ANTs' LPS files).
  std::string forward;
  ASSERT_TRUE(Download(first.job_id(), v1::REGISTRATION_ARTIFACT_WARP, &header, &forward, &chunks).ok());
  ASSERT_EQ(forward.size(), bytes.size());
  const float* v = reinterpret_cast<const float*>(forward.data());
  const float* w = reinterpret_cast<const float*>(bytes.data());
  double v_norm = 0, sum_norm = 0;
  for (size_t i = 0; i < forward.size() / 4; ++i) {
    v_norm += std::abs(v[i]);
    sum_norm += std::abs(v[i] + w[i]);
  }
  EXPECT_GT(v_norm, 0);
  EXPECT_LT(sum_norm, 0.5 * v_norm);
}

TEST_F(RegistrationServiceTest, CancelRunningJob) {
  v1::RegisterRequest request;
  request.mutable_fixed()->set_path(problem_->fixed_path);
  request.mutable_moving()->set_path(problem_->moving_path);
  v1::RegistrationOptions* o = request.mutable_options();
  *o = QuickOptions();
  o->clear_rigid_iterations();
  o->add_rigid_iterations(5000);  // long, unless cancelled
  o->set_patience(100000);         // no early convergence
  o->set_metric("mse");
  v1::JobStatus status;
  grpc::Status rpc = Register(request, &status);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();

  // Wait until it iterates.
  for (int i = 0; i < 600; ++i) {
    ASSERT_TRUE(GetJob(status.job_id(), &status).ok());
    if (status.state() == v1::JOB_STATE_RUNNING && status.last_progress().step() > 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(status.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(status.last_progress().stage(), "rigid");
  EXPECT_GT(status.last_progress().metrics().at("loss"), 0);

  // A watcher whose deadline passes ends without affecting the job.
  std::vector<v1::Progress> messages;
  rpc = Watch(status.job_id(), std::chrono::milliseconds(700), &messages);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << rpc.error_message();
  EXPECT_GE(messages.size(), 1u);
  EXPECT_LE(messages.size(), 12u);  // throttled to about ten a second
  v1::RegistrationResult result;
  EXPECT_EQ(GetResult(status.job_id(), &result).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  ASSERT_TRUE(CancelJob(status.job_id(), &status).ok());
  messages.clear();
  rpc = Watch(status.job_id(), std::chrono::seconds(60), &messages);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back().state(), v1::JOB_STATE_CANCELLED);
  ASSERT_TRUE(GetJob(status.job_id(), &status).ok());
  EXPECT_EQ(status.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_THAT(status.error_message(), HasSubstr("CANCELLED"));
  rpc = GetResult(status.job_id(), &result);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(rpc.error_message(), HasSubstr("cancelled"));
  // Cancelling again is harmless.
  ASSERT_TRUE(CancelJob(status.job_id(), &status).ok());
  EXPECT_EQ(status.state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(RegistrationServiceTest, NanVoxelsFailTheJobWithInvalidArgument) {
  Volume nan = problem_->moving;
  nan.data = problem_->moving.data.Clone().value();
  nan.data.data<float>()[1234] = NAN;
  const std::string fixed = UploadOrDie(problem_->fixed);
  const std::string moving = UploadOrDie(nan);
  v1::RegisterRequest request;
  request.mutable_fixed()->set_upload_id(fixed);
  request.mutable_moving()->set_upload_id(moving);
  *request.mutable_options() = QuickOptions();
  v1::JobStatus status;
  grpc::Status rpc = Register(request, &status);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  std::vector<v1::Progress> messages;
  ASSERT_TRUE(Watch(status.job_id(), std::chrono::seconds(60), &messages).ok());
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back().state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(messages.back().message(), HasSubstr("NaN"));

  ASSERT_TRUE(GetJob(status.job_id(), &status).ok());
  EXPECT_EQ(status.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(status.error_message(), HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(status.error_message(), HasSubstr("NaN"));
  v1::RegistrationResult result;
  rpc = GetResult(status.job_id(), &result);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rpc.error_message(), HasSubstr("NaN"));
}

TEST_F(RegistrationServiceTest, BadRequestsGetClearStatuses) {
  v1::JobStatus status;
  v1::RegistrationResult result;
  std::vector<v1::Progress> messages;
  v1::VolumeHeader header;
  std::string bytes;
  int chunks = 0;

  // Unknown ids.
  EXPECT_EQ(GetJob("no-such-job", &status).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(CancelJob("no-such-job", &status).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GetResult("no-such-job", &result).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Watch("no-such-job", std::chrono::seconds(5), &messages).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Download("no-such-job", v1::REGISTRATION_ARTIFACT_WARPED, &header, &bytes, &chunks).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GetJob("", &status).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::RegisterRequest base;
  base.mutable_fixed()->set_path(problem_->fixed_path);
  base.mutable_moving()->set_path(problem_->moving_path);
  *base.mutable_options() = QuickOptions();

  v1::RegisterRequest request = base;
  request.mutable_moving()->set_upload_id("up-nonexistent");
  grpc::Status rpc = Register(request, &status);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(rpc.error_message(), HasSubstr("up-nonexistent"));

  request = base;
  request.mutable_options()->set_metric("ncc");
  rpc = Register(request, &status);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rpc.error_message(), HasSubstr("metric"));

  request = base;
  request.mutable_options()->add_stages("bspline");
  rpc = Register(request, &status);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rpc.error_message(), HasSubstr("bspline"));

  for (auto edit : std::vector<void (*)(v1::RegisterRequest*)>{
           [](v1::RegisterRequest* r) { r->mutable_options()->set_lncc_window(4); },
           [](v1::RegisterRequest* r) { r->mutable_options()->set_mi_bins(1000); },
           [](v1::RegisterRequest* r) { r->mutable_options()->add_scales(4); },  // 2, 1, 4: not coarse to fine
           [](v1::RegisterRequest* r) { r->mutable_options()->add_affine_iterations(-1); },
           [](v1::RegisterRequest* r) { r->mutable_options()->set_init("moments"); },
           [](v1::RegisterRequest* r) { r->mutable_options()->set_device("tpu"); },
           [](v1::RegisterRequest* r) { r->clear_moving(); },
           [](v1::RegisterRequest* r) { r->set_job_id("bad id!"); },
       }) {
    request = base;
    edit(&request);
    rpc = Register(request, &status);
    EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << rpc.error_message();
  }

  // Outside the data roots.
  request = base;
  request.mutable_fixed()->set_path(kCh2);
  rpc = Register(request, &status);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(rpc.error_message(), HasSubstr("outside"));
  request = base;
  request.mutable_moving_labels()->set_path("../../etc/passwd");
  EXPECT_EQ(Register(request, &status).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  request = base;
  request.set_output_dir("/tmp/tessera-elsewhere");
  EXPECT_EQ(Register(request, &status).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  request = base;
  request.mutable_fixed()->set_path("missing.nii.gz");
  EXPECT_EQ(Register(request, &status).error_code(), grpc::StatusCode::NOT_FOUND);

  // Uploads: too large for the volume limit (rejected on the header), not 3-D.
  {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(10)));
    v1::UploadedVolume uploaded;
    auto writer = stub_->UploadVolume(&context, &uploaded);
    v1::ArrayChunk chunk;
    for (int64_t d : {512, 512, 512}) chunk.mutable_header()->add_dims(d);
    chunk.mutable_header()->set_dtype(v1::DTYPE_FLOAT32);
    chunk.set_data(std::string(1024, '\0'));
    writer->Write(chunk);
    writer->WritesDone();
    rpc = writer->Finish();
    EXPECT_EQ(rpc.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << rpc.error_message();
  }
  Volume flat;
  flat.data = NDArray::Allocate({64, 64}, DType::kFloat32).value();
  std::memset(flat.data.raw_data(), 0, flat.data.nbytes());
  const std::string flat_id = UploadOrDie(flat);
  request = base;
  request.mutable_fixed()->set_upload_id(flat_id);
  rpc = Register(request, &status);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rpc.error_message(), HasSubstr("3-D"));
  // Short upload.
  {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(10)));
    v1::UploadedVolume uploaded;
    auto writer = stub_->UploadVolume(&context, &uploaded);
    v1::ArrayChunk chunk;
    for (int64_t d : {8, 8, 8}) chunk.mutable_header()->add_dims(d);
    chunk.mutable_header()->set_dtype(v1::DTYPE_FLOAT32);
    chunk.set_data(std::string(100, '\0'));
    writer->Write(chunk);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::DATA_LOSS);
  }
}

TEST_F(RegistrationServiceTest, JobsAndResultsSurviveARestart) {
  // A server of its own on its own state directory; upload files no job
  // needs are deleted at once (grace 0) when the service attaches.
  const std::string state_dir = TmpDir() + "/restart-state";
  RegistrationServiceOptions service_options;
  service_options.upload_file_grace = absl::ZeroDuration();
  service_options.upload_sweep_interval = absl::InfiniteDuration();
  auto server = StartServer(problem_->root, state_dir, service_options);
  ASSERT_TRUE(server.ok()) << server.status();
  stub_ = v1::RegistrationService::NewStub((*server)->channel);

  const std::string fixed = UploadOrDie(problem_->fixed);
  const std::string moving = UploadOrDie(problem_->moving);
  v1::RegisterRequest request;
  request.mutable_fixed()->set_upload_id(fixed);
  request.mutable_moving()->set_upload_id(moving);
  *request.mutable_options() = QuickOptions();
  request.set_job_id("survives-restart");
  v1::JobStatus status;
  grpc::Status rpc = Register(request, &status);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  const std::string job_id = status.job_id();
  // While the job may still run, its upload files stay.
  absl::StatusOr<int> swept = (*server)->service->SweepUploadFiles();
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 0);
  std::vector<v1::Progress> messages;
  rpc = Watch(job_id, std::chrono::seconds(300), &messages);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  ASSERT_EQ(messages.back().state(), v1::JOB_STATE_SUCCEEDED) << messages.back().message();
  v1::RegistrationResult before;
  ASSERT_TRUE(GetResult(job_id, &before).ok());
  v1::VolumeHeader header;
  std::string warped_before, warp_before, affine_before;
  int chunks = 0;
  ASSERT_TRUE(Download(job_id, v1::REGISTRATION_ARTIFACT_WARPED, &header, &warped_before, &chunks).ok());
  ASSERT_TRUE(Download(job_id, v1::REGISTRATION_ARTIFACT_WARP, &header, &warp_before, &chunks).ok());
  ASSERT_TRUE(Download(job_id, v1::REGISTRATION_ARTIFACT_AFFINE, &header, &affine_before, &chunks).ok());

  // Everything goes: service, scheduler, host, the uploads in memory.
  stub_.reset();
  server->reset();
  server = StartServer(problem_->root, state_dir, service_options);
  ASSERT_TRUE(server.ok()) << server.status();
  stub_ = v1::RegistrationService::NewStub((*server)->channel);

  // The upload files were swept at start-up: the job that named them ended.
  EXPECT_FALSE(Exists(state_dir + "/uploads/" + fixed + ".nii"));
  EXPECT_FALSE(Exists(state_dir + "/uploads/" + moving + ".nii"));
  for (const std::string& id : {job_id, std::string("survives-restart")}) {
    ASSERT_TRUE(GetJob(id, &status).ok()) << id;
    EXPECT_EQ(status.job_id(), job_id);
    EXPECT_EQ(status.state(), v1::JOB_STATE_SUCCEEDED);
    v1::RegistrationResult after;
    rpc = GetResult(id, &after);
    ASSERT_TRUE(rpc.ok()) << rpc.error_message();
    EXPECT_EQ(after.job_id(), job_id);
    EXPECT_EQ(after.final_loss(), before.final_loss());
    EXPECT_EQ(after.summary_json(), before.summary_json());
    std::string bytes;
    rpc = Download(id, v1::REGISTRATION_ARTIFACT_WARPED, &header, &bytes, &chunks);
    ASSERT_TRUE(rpc.ok()) << rpc.error_message();
    EXPECT_TRUE(bytes == warped_before);
    ASSERT_TRUE(Download(id, v1::REGISTRATION_ARTIFACT_WARP, &header, &bytes, &chunks).ok());
    EXPECT_TRUE(bytes == warp_before);
    ASSERT_TRUE(Download(id, v1::REGISTRATION_ARTIFACT_AFFINE, &header, &bytes, &chunks).ok());
    EXPECT_EQ(bytes, affine_before);
  }
  // Its id still names it: registering again does not run it again (even
  // though its uploads are gone from memory).
  ASSERT_TRUE(Register(request, &status).ok());
  EXPECT_EQ(status.job_id(), job_id);
  EXPECT_EQ(status.state(), v1::JOB_STATE_SUCCEEDED);
  messages.clear();
  ASSERT_TRUE(Watch("survives-restart", std::chrono::seconds(10), &messages).ok());
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].state(), v1::JOB_STATE_SUCCEEDED);
  stub_.reset();
}

// A process without a scheduler (`tessera serve --role worker`) refuses jobs.
TEST(RegistrationServiceWorkerTest, WithoutASchedulerEveryCallIsFailedPrecondition) {
  const std::string root = TmpDir() + "/worker";
  mkdir(root.c_str(), 0755);
  const ServerOptions options = TestServerOptions(root);
  auto service = RegistrationServiceImpl::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  auto hosted = scheduler::testing::StartLoopbackHost(options, service->get());
  ASSERT_TRUE(hosted.ok()) << hosted.status();
  auto stub = v1::RegistrationService::NewStub(hosted->channel);

  v1::RegisterRequest request;
  request.mutable_fixed()->set_path("fixed.nii");
  request.mutable_moving()->set_path("moving.nii");
  v1::JobStatus status;
  grpc::ClientContext register_context;
  grpc::Status rpc = stub->Register(&register_context, request, &status);
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(rpc.error_message(), HasSubstr("SchedulerService"));
  grpc::ClientContext get_context;
  v1::JobRef job;
  job.set_job_id("job-1");
  EXPECT_EQ(stub->GetJob(&get_context, job, &status).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  grpc::ClientContext upload_context;
  v1::UploadedVolume uploaded;
  auto writer = stub->UploadVolume(&upload_context, &uploaded);
  v1::ArrayChunk chunk;
  for (int64_t d : {2, 2, 2}) chunk.mutable_header()->add_dims(d);
  chunk.mutable_header()->set_dtype(v1::DTYPE_FLOAT32);
  chunk.set_data(std::string(32, '\0'));
  writer->Write(chunk);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// A server with a tiny upload store and a one-job queue.
TEST(RegistrationServiceLimitsTest, FullUploadStoreAndQueueAreResourceExhausted) {
  const std::string root = TmpDir() + "/limits";
  mkdir(root.c_str(), 0755);
  RegistrationServiceOptions service_options;
  service_options.upload_store_bytes = 3000;
  service_options.upload_file_grace = absl::ZeroDuration();
  service_options.upload_sweep_interval = absl::InfiniteDuration();
  scheduler::testing::InProcessSchedulerOptions scheduler_options;
  scheduler_options.max_queued = 1;
  auto server = StartServer(root, root + "/state", service_options, scheduler_options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::RegistrationService::NewStub((*server)->channel);

  const auto upload = [&](int n, v1::UploadedVolume* uploaded) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(10)));
    auto writer = stub->UploadVolume(&context, uploaded);
    v1::ArrayChunk chunk;
    for (int64_t d : {n, n, n}) chunk.mutable_header()->add_dims(d);
    chunk.mutable_header()->set_dtype(v1::DTYPE_FLOAT32);
    std::vector<float> values(n * n * n);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7);
    chunk.set_data(values.data(), values.size() * sizeof(float));
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  };
  v1::UploadedVolume a, b, c;
  ASSERT_TRUE(upload(8, &a).ok());   // 2048 bytes
  grpc::Status rpc = upload(8, &b);  // would make 4096 > 3000
  EXPECT_EQ(rpc.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(rpc.error_message(), HasSubstr("full"));
  ASSERT_TRUE(upload(5, &c).ok());   // 500 more bytes fit

  // One slot, a queue of one: the first (long) job runs, the second waits,
  // the third is refused.
  v1::RegisterRequest request;
  request.mutable_fixed()->set_upload_id(a.upload_id());
  request.mutable_moving()->set_upload_id(a.upload_id());
  request.mutable_options()->set_device("cpu");
  request.mutable_options()->add_rigid_iterations(100000);
  request.mutable_options()->set_patience(100000);
  request.mutable_options()->add_scales(1);
  request.mutable_options()->add_stages("rigid");
  const auto submit = [&](v1::JobStatus* status) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(10)));
    return stub->Register(&context, request, status);
  };
  v1::JobStatus running, queued, refused;
  ASSERT_TRUE(submit(&running).ok());
  for (int i = 0; i < 500 && running.state() != v1::JOB_STATE_RUNNING; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    grpc::ClientContext context;
    v1::JobRef job;
    job.set_job_id(running.job_id());
    ASSERT_TRUE(stub->GetJob(&context, job, &running).ok());
  }
  ASSERT_EQ(running.state(), v1::JOB_STATE_RUNNING);
  rpc = submit(&queued);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(queued.state(), v1::JOB_STATE_QUEUED);
  {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(10)));
    rpc = stub->Register(&context, request, &refused);
    EXPECT_EQ(rpc.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << rpc.error_message();
    EXPECT_THAT(rpc.error_message(), HasSubstr("retry after"));
    const auto& trailers = context.GetServerTrailingMetadata();
    EXPECT_EQ(trailers.count("grpc-retry-pushback-ms"), 1u);
  }
  // The refused job left nothing behind: the store holds the two others.
  v1::ListJobsRequest list;
  absl::StatusOr<v1::ListJobsResponse> listed = (*server)->jobs->scheduler().List(list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->jobs_size(), 2);
  // The upload file both jobs name stays while they may run.
  absl::StatusOr<int> swept = (*server)->service->SweepUploadFiles();
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 0);
  EXPECT_TRUE(Exists(root + "/state/uploads/" + a.upload_id() + ".nii"));
  // Destroying the server stops the scheduler, which cancels the running job.
}

}  // namespace
}  // namespace tessera
