// The "registration" job engine on a small synthetic phantom problem with a
// known answer (CPU backend): validation (server paths only), placement
// needs, a full run through EngineContext (files in the work directory and
// the output_dir, the typed result, progress), cancellation and deadlines.
#include "services/registration/registration_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/nifti_io.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSize = 28;

struct Files {
  std::string root, fixed, moving, fixed_labels, moving_labels;
};

// The phantom and a copy deformed by a known transform, under a data root.
const Files& Problem() {
  static const Files* files = [] {
    auto* f = new Files;
    const char* tmp = std::getenv("TEST_TMPDIR");
    f->root = std::string(tmp != nullptr ? tmp : "/tmp") + "/engine_data";
    fs::create_directories(f->root);
    Phantom phantom = MakePhantom(kSize).value();
    SyntheticOptions synth;
    synth.seed = 4;
    SyntheticPair pair = MakeSyntheticPair(phantom.image, &phantom.labels, synth).value();
    f->fixed = f->root + "/fixed.nii.gz";
    f->moving = f->root + "/moving.nii";
    f->fixed_labels = f->root + "/fixed_labels.nii.gz";
    f->moving_labels = f->root + "/moving_labels.nii.gz";
    EXPECT_TRUE(WriteNifti(phantom.image, f->fixed).ok());
    EXPECT_TRUE(WriteNifti(pair.moving, f->moving).ok());
    EXPECT_TRUE(WriteNifti(phantom.labels, f->fixed_labels).ok());
    EXPECT_TRUE(WriteNifti(*pair.moving_labels, f->moving_labels).ok());
    return f;
  }();
  return *files;
}

std::shared_ptr<const RegistrationEngine> MakeEngine(const std::string& device = "cpu") {
  auto engine = RegistrationEngine::Create({Problem().root}, int64_t{64} << 20, device);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return *engine;
}

v1::RegisterRequest QuickRequest() {
  v1::RegisterRequest r;
  r.mutable_fixed()->set_path(Problem().fixed);
  r.mutable_moving()->set_path("moving.nii");  // relative to the root
  r.mutable_fixed_labels()->set_path(Problem().fixed_labels);
  r.mutable_moving_labels()->set_path(Problem().moving_labels);
  v1::RegistrationOptions* o = r.mutable_options();
  o->set_metric("lncc");
  o->add_scales(2);
  o->add_scales(1);
  for (int n : {20, 10}) o->add_rigid_iterations(n);
  for (int n : {20, 10}) o->add_affine_iterations(n);
  for (int n : {30, 15}) o->add_deformable_iterations(n);
  o->set_inverse_warp(true);
  return r;
}

google::protobuf::Any Pack(const v1::RegisterRequest& r) {
  google::protobuf::Any any;
  any.PackFrom(r);
  return any;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = Problem().root + "/" + name;
  fs::remove_all(dir);
  return dir;
}

TEST(RegistrationEngine, KindAndSpecType) {
  auto engine = MakeEngine();
  EXPECT_EQ(engine->kind(), "registration");
  EXPECT_EQ(engine->spec_type(), "tessera.v1.RegisterRequest");
  EXPECT_EQ(engine->spec_type(), v1::RegisterRequest::descriptor()->full_name());
}

TEST(RegistrationEngine, CreateChecksItsArguments) {
  EXPECT_EQ(RegistrationEngine::Create({Problem().root + "/missing"}, 1 << 20, "cpu").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(RegistrationEngine::Create({Problem().root}, 0, "cpu").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RegistrationEngine::Create({Problem().root}, 1 << 20, "gpu").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegistrationEngine, ValidateAcceptsServerPathsAndRefusesUploads) {
  auto engine = MakeEngine();
  EXPECT_TRUE(engine->Validate(Pack(QuickRequest())).ok());

  v1::RegisterRequest upload = QuickRequest();
  upload.mutable_moving()->set_upload_id("u-123");
  absl::Status s = engine->Validate(Pack(upload));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("server path"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("moving"), absl::string_view::npos) << s;

  v1::RegisterRequest missing = QuickRequest();
  missing.clear_fixed();
  EXPECT_EQ(engine->Validate(Pack(missing)).code(), absl::StatusCode::kInvalidArgument);

  v1::RegisterRequest outside = QuickRequest();
  outside.mutable_fixed()->set_path("/etc/hostname");
  EXPECT_EQ(engine->Validate(Pack(outside)).code(), absl::StatusCode::kPermissionDenied);

  v1::RegisterRequest absent = QuickRequest();
  absent.mutable_fixed()->set_path("nope.nii.gz");
  EXPECT_EQ(engine->Validate(Pack(absent)).code(), absl::StatusCode::kNotFound);

  v1::RegisterRequest bad_option = QuickRequest();
  bad_option.mutable_options()->set_metric("ssd");
  EXPECT_EQ(engine->Validate(Pack(bad_option)).code(), absl::StatusCode::kInvalidArgument);

  google::protobuf::Any wrong;
  wrong.PackFrom(v1::JobRef());
  EXPECT_EQ(engine->Validate(wrong).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RegistrationEngine, NeedsEstimateDeviceMemoryFromTheFixedHeader) {
  v1::RegisterRequest r = QuickRequest();
  jobs::ResourceNeeds cpu = MakeEngine("cpu")->Needs(Pack(r));
  EXPECT_FALSE(cpu.needs_gpu);
  EXPECT_EQ(cpu.device_bytes, 0);  // no device memory on the CPU backend

  jobs::ResourceNeeds any = MakeEngine("auto")->Needs(Pack(r));
  EXPECT_FALSE(any.needs_gpu);  // the CPU backend works too
  EXPECT_EQ(any.device_bytes, RegistrationEngine::kDeviceBytesPerFixedVoxel * kSize * kSize * kSize);

  r.mutable_options()->set_device("cuda");
  jobs::ResourceNeeds cuda = MakeEngine("cpu")->Needs(Pack(r));
  EXPECT_TRUE(cuda.needs_gpu);
  EXPECT_EQ(cuda.device_bytes, any.device_bytes);
}

TEST(RegistrationEngine, RunsToFilesResultAndProgress) {
  auto engine = MakeEngine();
  const std::string work = FreshDir("work");
  const std::string out_dir = FreshDir("out");
  fs::create_directories(work);
  v1::RegisterRequest request = QuickRequest();
  request.set_output_dir("out");
  std::vector<jobs::JobProgress> progress;
  jobs::EngineContext ctx("job-1", work, nullptr, absl::InfiniteFuture(),
                          [&](const jobs::JobProgress& p) { progress.push_back(p); });
  absl::StatusOr<jobs::EngineOutput> out = engine->Run(Pack(request), ctx);
  ASSERT_TRUE(out.ok()) << out.status();

  // The ANTs-style files, in the work directory and copied to output_dir.
  std::map<std::string, int64_t> files;
  for (const jobs::EngineFile& f : out->files) files[f.name] = f.bytes;
  const std::set<std::string> expected = {"warped.nii.gz", "warped_labels.nii.gz", "0GenericAffine.mat",
                                          "0Warp.nii.gz", "0InverseWarp.nii.gz"};
  ASSERT_EQ(files.size(), expected.size());
  for (const std::string& name : expected) {
    ASSERT_EQ(files.count(name), 1u) << name;
    EXPECT_GT(files[name], 0) << name;
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(work + "/" + name)), files[name]) << name;
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(out_dir + "/" + name)), files[name]) << name;
  }
  absl::StatusOr<Volume> warped = ReadNifti(work + "/warped.nii.gz");
  ASSERT_TRUE(warped.ok()) << warped.status();
  EXPECT_EQ(warped->data.shape(), (Shape{kSize, kSize, kSize}));

  // The typed result: registered back (the labels overlap better).
  v1::RegistrationResult result;
  ASSERT_TRUE(out->result.UnpackTo(&result));
  EXPECT_EQ(result.job_id(), "job-1");
  EXPECT_EQ(result.backend(), "cpu");
  EXPECT_LT(result.final_loss(), result.initial_loss());
  ASSERT_TRUE(result.has_dice_before() && result.has_dice_after());
  EXPECT_GT(result.dice_after(), result.dice_before() + 0.05);
  EXPECT_EQ(result.files().warped(), out_dir + "/warped.nii.gz");  // the output_dir copies
  EXPECT_EQ(result.files().inverse_warp(), out_dir + "/0InverseWarp.nii.gz");
  EXPECT_NE(result.summary_json().find(out_dir), std::string::npos);
  EXPECT_EQ(result.summary_json().find(work), std::string::npos);  // work paths move when published
  EXPECT_EQ(result.artifacts_size(), 5);
  EXPECT_EQ(ctx.peak_device_bytes(), 0);  // CPU backend

  // Progress: every stage, a never-decreasing fraction, loss and scale.
  std::set<std::string> stages;
  double fraction = 0;
  int with_loss = 0;
  for (const jobs::JobProgress& p : progress) {
    stages.insert(p.stage);
    EXPECT_GE(p.fraction, fraction);
    fraction = p.fraction;
    if (p.metrics.count("loss") && p.metrics.count("scale")) ++with_loss;
  }
  EXPECT_EQ(stages, (std::set<std::string>{"input", "init", "rigid", "affine", "deformable", "output"}));
  EXPECT_EQ(progress.front().stage, "input");
  EXPECT_EQ(progress.back().stage, "output");
  EXPECT_GT(with_loss, 20);
  EXPECT_NEAR(fraction, 0.95, 1e-9);
}

TEST(RegistrationEngine, WithoutOutputDirTheResultNamesNoFiles) {
  auto engine = MakeEngine();
  const std::string work = FreshDir("work_only");
  fs::create_directories(work);
  v1::RegisterRequest request = QuickRequest();
  request.mutable_options()->set_inverse_warp(false);
  request.clear_moving_labels();
  jobs::EngineContext ctx("job-2", work, nullptr, absl::InfiniteFuture(), nullptr);
  absl::StatusOr<jobs::EngineOutput> out = engine->Run(Pack(request), ctx);
  ASSERT_TRUE(out.ok()) << out.status();
  std::set<std::string> names;
  for (const jobs::EngineFile& f : out->files) names.insert(f.name);
  EXPECT_EQ(names, (std::set<std::string>{"warped.nii.gz", "0GenericAffine.mat", "0Warp.nii.gz"}));
  v1::RegistrationResult result;
  ASSERT_TRUE(out->result.UnpackTo(&result));
  EXPECT_TRUE(result.files().warped().empty());
  EXPECT_FALSE(result.has_dice_after());
}

TEST(RegistrationEngine, CancelFlagStopsTheRunWithCancelled) {
  auto engine = MakeEngine();
  const std::string work = FreshDir("cancelled");
  fs::create_directories(work);
  std::atomic<bool> cancel{false};
  int reports_after_cancel = 0;
  jobs::EngineContext ctx("job-3", work, &cancel, absl::InfiniteFuture(), [&](const jobs::JobProgress& p) {
    if (cancel.load()) ++reports_after_cancel;
    if (p.stage == "rigid" && p.step >= 3) cancel = true;
  });
  absl::StatusOr<jobs::EngineOutput> out = engine->Run(Pack(QuickRequest()), ctx);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_LE(reports_after_cancel, 1);  // stopped within an iteration
}

TEST(RegistrationEngine, PastDeadlineStopsWithDeadlineExceeded) {
  auto engine = MakeEngine();
  const std::string work = FreshDir("late");
  fs::create_directories(work);
  jobs::EngineContext ctx("job-4", work, nullptr, absl::Now() - absl::Seconds(1), nullptr);
  EXPECT_EQ(engine->Run(Pack(QuickRequest()), ctx).status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace tessera::registration
