// SchedulerService.DownloadFile and GetPreview (issue 35) over a real channel
// to a host with a token file: test engines write result files (bytes over
// several 1 MiB chunks and one in a sub-folder; a NIfTI volume as a
// registration's warped.nii.gz; a small SOM atlas), and the RPCs are checked
// for content, resume from an offset, who may see a job, and every error.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"
#include "common/png_io.h"
#include "common/status.h"
#include "services/jobs/engine.h"
#include "services/scheduler/scheduler_service.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "services/scheduler/testing/service_testing.h"
#include "services/server/bearer_channel.h"
#include "services/server/service_host.h"
#include "services/som/atlas.h"
#include "services/som/synthetic.h"
#include "services/som/trainer.h"
#include "tessera/v1/registration.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/som.pb.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using scheduler::testing::TmpDir;

constexpr char kAlice[] = "alice-token-0123456789abcdef";  // enroller: submits
constexpr char kBob[] = "bob-token-0123456789abcdef";      // enroller, another owner
constexpr char kAda[] = "ada-token-0123456789abcdef";      // admin

// The bytes of big.bin: a pattern that shows a misplaced chunk.
std::string Pattern(int64_t n) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7919) >> 3);
  return s;
}

// Spec: a tessera.v1.Progress; total_steps bytes of Pattern into big.bin,
// message into sub/small.txt.
class FilesEngine : public jobs::Engine {
 public:
  std::string kind() const override { return "test.files"; }
  std::string spec_type() const override { return "tessera.v1.Progress"; }
  absl::Status Validate(const google::protobuf::Any&) const override { return absl::OkStatus(); }
  absl::StatusOr<jobs::EngineOutput> Run(const google::protobuf::Any& spec, jobs::EngineContext& ctx) const override {
    v1::Progress p;
    TESSERA_RETURN_IF_ERROR(jobs::UnpackSpec(spec, &p));
    std::ofstream(fs::path(ctx.work_dir()) / "big.bin", std::ios::binary) << Pattern(p.total_steps());
    fs::create_directories(fs::path(ctx.work_dir()) / "sub");
    std::ofstream(fs::path(ctx.work_dir()) / "sub" / "small.txt") << p.message();
    jobs::EngineOutput out;
    out.result.PackFrom(p);
    TESSERA_ASSIGN_OR_RETURN(out.files, jobs::DescribeWorkFiles(ctx.work_dir(), {"big.bin", "sub/small.txt"}));
    return out;
  }
};

// Kind "registration" (as far as previews go): a 40 x 30 x 20 volume as
// warped.nii.gz and a text file.
class WarpedEngine : public jobs::Engine {
 public:
  std::string kind() const override { return "registration"; }
  std::string spec_type() const override { return "tessera.v1.RegisterRequest"; }
  absl::Status Validate(const google::protobuf::Any&) const override { return absl::OkStatus(); }
  absl::StatusOr<jobs::EngineOutput> Run(const google::protobuf::Any&, jobs::EngineContext& ctx) const override {
    TESSERA_ASSIGN_OR_RETURN(NDArray data, NDArray::Allocate({40, 30, 20}, DType::kFloat32));
    float* v = data.data<float>();
    for (int64_t i = 0; i < data.num_elements(); ++i) v[i] = static_cast<float>(i % 97);
    Geometry g;
    g.spacing = {1, 1, 2};
    TESSERA_RETURN_IF_ERROR(WriteNifti(Volume{std::move(data), g, ""}, ctx.work_dir() + "/warped.nii.gz"));
    std::ofstream(ctx.work_dir() + "/affine.txt") << "1 0 0 0\n";
    jobs::EngineOutput out;
    out.result.PackFrom(v1::RegistrationResult());
    TESSERA_ASSIGN_OR_RETURN(out.files, jobs::DescribeWorkFiles(ctx.work_dir(), {"affine.txt", "warped.nii.gz"}));
    return out;
  }
};

// Kind "som.train": a 6 x 4 map trained on a small synthetic corpus, saved
// under `atlas_dir`, its summary the result.
class AtlasEngine : public jobs::Engine {
 public:
  explicit AtlasEngine(std::string atlas_dir) : atlas_dir_(std::move(atlas_dir)) {}
  std::string kind() const override { return "som.train"; }
  std::string spec_type() const override { return "tessera.v1.CreateAtlasRequest"; }
  absl::Status Validate(const google::protobuf::Any&) const override { return absl::OkStatus(); }
  absl::StatusOr<jobs::EngineOutput> Run(const google::protobuf::Any&, jobs::EngineContext& ctx) const override {
    som::SyntheticCorpusOptions corpus_options;
    corpus_options.docs = 200;
    corpus_options.features = 40;
    const som::SparseBinaryMatrix corpus = som::GenerateSyntheticCorpus(corpus_options);
    som::TrainOptions options;
    options.grid = som::GridShape{6, 4, som::Topology::kPlanar};
    options.max_epochs = 2;
    TESSERA_ASSIGN_OR_RETURN(som::TrainResult trained, som::TrainSom(corpus, options));
    TESSERA_ASSIGN_OR_RETURN(som::Projection projected,
                             som::ProjectDocuments(trained.model, corpus, Backend::kCpu));
    TESSERA_ASSIGN_OR_RETURN(som::Atlas atlas, som::MakeAtlas(std::move(trained), projected.bmu, {}, {}, options));
    const std::string directory = atlas_dir_ + "/" + ctx.job_id();
    TESSERA_RETURN_IF_ERROR(som::SaveAtlas(atlas, directory));
    v1::AtlasSummary summary;
    summary.set_atlas_id(ctx.job_id());
    summary.set_directory(directory);
    jobs::EngineOutput out;
    out.result.PackFrom(summary);
    return out;
  }

 private:
  const std::string atlas_dir_;
};

class JobFilesServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TmpDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ + "/tokens") << kAlice << " alice reader,enroller\n"
                                    << kBob << " bob reader,enroller\n"
                                    << kAda << " ada admin\n";
    auto jobs = scheduler::testing::InProcessScheduler::Start(
        dir_ + "/state", {std::make_shared<FilesEngine>(), std::make_shared<WarpedEngine>(),
                          std::make_shared<AtlasEngine>(dir_ + "/atlases")});
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    jobs_ = *std::move(jobs);
    service_ = std::make_unique<SchedulerServiceImpl>(&jobs_->scheduler());
    ServerOptions options = scheduler::testing::LoopbackServerOptions();
    options.token_file = dir_ + "/tokens";
    host_ = std::make_unique<ServiceHost>(options);
    host_->AddService(service_.get());
    absl::StatusOr<BoundPorts> ports = host_->Start();
    ASSERT_TRUE(ports.ok()) << ports.status();
    target_ = absl::StrCat("127.0.0.1:", ports->grpc_port);
  }
  void TearDown() override {
    host_.reset();
    service_.reset();
    jobs_.reset();
  }

  std::unique_ptr<v1::SchedulerService::Stub> Stub(const std::string& token) {
    return v1::SchedulerService::NewStub(
        CreateBearerChannel(target_, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), token));
  }

  // Submits `spec` as alice and waits for the job to end; its id.
  std::string RunJob(const google::protobuf::Message& spec) {
    v1::SubmitJobRequest request;
    request.mutable_spec()->mutable_spec()->PackFrom(spec);
    grpc::ClientContext context;
    v1::JobInfo info;
    const grpc::Status s = Stub(kAlice)->Submit(&context, request, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (int i = 0; i < 600 && info.state() != v1::JOB_STATE_SUCCEEDED && info.state() != v1::JOB_STATE_FAILED; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      grpc::ClientContext get_context;
      v1::JobRef ref;
      ref.set_job_id(info.job_id());
      EXPECT_TRUE(Stub(kAlice)->Get(&get_context, ref, &info).ok());
    }
    EXPECT_EQ(info.state(), v1::JOB_STATE_SUCCEEDED) << info.error_message();
    return info.job_id();
  }

  // Every chunk of a download; the status.
  grpc::Status Download(const std::string& token, const std::string& job_id, const std::string& name,
                        int64_t offset, std::vector<v1::FileChunk>* chunks) {
    grpc::ClientContext context;
    v1::DownloadJobFileRequest request;
    request.set_job_id(job_id);
    request.set_name(name);
    request.set_offset(offset);
    auto reader = Stub(token)->DownloadFile(&context, request);
    v1::FileChunk chunk;
    while (reader->Read(&chunk)) chunks->push_back(chunk);
    return reader->Finish();
  }

  grpc::Status Preview(const std::string& job_id, const std::string& name, int max_edge, v1::JobPreview* out) {
    grpc::ClientContext context;
    v1::JobPreviewRequest request;
    request.set_job_id(job_id);
    request.set_name(name);
    request.set_max_edge(max_edge);
    return Stub(kAlice)->GetPreview(&context, request, out);
  }

  std::string dir_, target_;
  std::unique_ptr<scheduler::testing::InProcessScheduler> jobs_;
  std::unique_ptr<SchedulerServiceImpl> service_;
  std::unique_ptr<ServiceHost> host_;
};

TEST_F(JobFilesServiceTest, DownloadsAFileInChunksAndResumesFromAnOffset) {
  const int64_t size = (5 << 20) / 2 + 123;  // 2.5 MiB + a little: three chunks
  v1::Progress spec;
  spec.set_total_steps(size);
  spec.set_message("small one");
  const std::string job = RunJob(spec);
  const std::string expected = Pattern(size);

  std::vector<v1::FileChunk> chunks;
  grpc::Status s = Download(kAlice, job, "big.bin", 0, &chunks);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].filename(), "big.bin");
  EXPECT_EQ(chunks[0].total_bytes(), size);
  std::string got;
  for (const v1::FileChunk& c : chunks) {
    EXPECT_EQ(c.offset(), static_cast<int64_t>(got.size()));
    EXPECT_LE(c.data().size(), 1u << 20);
    got += c.data();
  }
  EXPECT_TRUE(got == expected);

  // Resume: from byte 1.5 MiB on.
  chunks.clear();
  const int64_t from = 3 << 19;
  ASSERT_TRUE(Download(kAlice, job, "big.bin", from, &chunks).ok());
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks[0].offset(), from);
  EXPECT_EQ(chunks[0].total_bytes(), size);
  got.clear();
  for (const v1::FileChunk& c : chunks) got += c.data();
  EXPECT_TRUE(got == expected.substr(from));

  // A name with one '/' (a file in a sub-folder of the results); at the end:
  // one chunk naming it, no data.
  chunks.clear();
  ASSERT_TRUE(Download(kAlice, job, "sub/small.txt", 0, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].data(), "small one");
  chunks.clear();
  ASSERT_TRUE(Download(kAlice, job, "sub/small.txt", 9, &chunks).ok());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].total_bytes(), 9);
  EXPECT_TRUE(chunks[0].data().empty());

  // An admin may download it too.
  chunks.clear();
  EXPECT_TRUE(Download(kAda, job, "sub/small.txt", 0, &chunks).ok());
}

TEST_F(JobFilesServiceTest, DownloadErrors) {
  v1::Progress spec;
  spec.set_total_steps(10);
  const std::string job = RunJob(spec);
  std::vector<v1::FileChunk> chunks;
  // Another owner's job does not exist for bob.
  grpc::Status s = Download(kBob, job, "big.bin", 0, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(chunks.empty());
  EXPECT_EQ(Download(kAlice, "no-such-job", "big.bin", 0, &chunks).error_code(), grpc::StatusCode::NOT_FOUND);
  // Names are matched against the result's files, never joined as paths.
  for (const std::string& name : {std::string("../jobs.db"), std::string("sub/../big.bin"), std::string("/etc/passwd"),
                                  std::string("nope.bin")}) {
    s = Download(kAlice, job, name, 0, &chunks);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << name;
    EXPECT_THAT(s.error_message(), HasSubstr("big.bin")) << name;  // what it has
  }
  EXPECT_EQ(Download(kAlice, job, "", 0, &chunks).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Download(kAlice, job, "big.bin", -1, &chunks).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = Download(kAlice, job, "big.bin", 11, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(s.error_message(), HasSubstr("10 bytes"));
  EXPECT_TRUE(chunks.empty());

  // Deleted results: FAILED_PRECONDITION.
  grpc::ClientContext context;
  v1::JobRef ref;
  ref.set_job_id(job);
  v1::JobInfo info;
  ASSERT_TRUE(Stub(kAlice)->Delete(&context, ref, &info).ok());
  s = Download(kAlice, job, "big.bin", 0, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("deleted"));
}

TEST_F(JobFilesServiceTest, PreviewsAVolumeAsOrthogonalSlices) {
  const std::string job = RunJob(v1::RegisterRequest());
  v1::JobPreview preview;
  grpc::Status s = Preview(job, "", 0, &preview);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(preview.name(), "warped.nii.gz");
  // sagittal (30 x 40 mm: 30 x 20 voxels) | coronal (40 x 20) | axial (40 x 30), 4 px apart: one voxel a pixel.
  EXPECT_EQ(preview.width(), 30 + 4 + 40 + 4 + 40);
  EXPECT_EQ(preview.height(), 30);
  const std::string png_path = dir_ + "/preview.png";
  std::ofstream(png_path, std::ios::binary) << preview.png();
  absl::StatusOr<Image8> image = ReadPng(png_path);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, preview.width());
  EXPECT_EQ(image->height, preview.height());

  // Shrunk to the asked edge, aspect kept; the named file.
  ASSERT_TRUE(Preview(job, "warped.nii.gz", 64, &preview).ok());
  EXPECT_EQ(preview.width(), 64);
  EXPECT_EQ(preview.height(), 16);  // 30 * 64 / 118, rounded

  EXPECT_EQ(Preview(job, "", 63, &preview).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Preview(job, "", 2049, &preview).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Preview(job, "affine.txt", 0, &preview).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Preview(job, "../jobs.db", 0, &preview).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Preview("no-such-job", "", 0, &preview).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(JobFilesServiceTest, PreviewsAnAtlasAsItsUMatrix) {
  const std::string job = RunJob(v1::CreateAtlasRequest());
  v1::JobPreview preview;
  grpc::Status s = Preview(job, "", 256, &preview);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(preview.name(), "u-matrix");
  EXPECT_LE(std::max(preview.width(), preview.height()), 256);
  EXPECT_GE(preview.width(), 6 * 30);  // cells as large as fit
  EXPECT_EQ(Preview(job, "warped.nii.gz", 0, &preview).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(JobFilesServiceTest, NoPreviewWithoutAnImageResult) {
  v1::Progress spec;
  spec.set_total_steps(10);
  const std::string job = RunJob(spec);
  v1::JobPreview preview;
  const grpc::Status s = Preview(job, "", 0, &preview);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("no image result"));
}

}  // namespace
}  // namespace tessera
