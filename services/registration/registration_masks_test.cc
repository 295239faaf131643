// Issue 34 through the registration job engine (CPU): RegisterRequest's
// fixed_mask, moving_mask and initial_transform are validated at submit
// (malformed or unsupported transforms, masks with shards > 1, uploads) and
// reach the registrar (the run's log names the given transform; a mask
// changes the result).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/nifti_io.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/synthetic.h"
#include "services/registration/registration_engine.h"

namespace tessera::registration {
namespace {

namespace fs = std::filesystem;

struct Files {
  std::string root, fixed, moving, fixed_mask, moving_mask, affine, bad_affine;
  Mat4 t;
};

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

const Files& Problem() {
  static const Files* files = [] {
    auto* f = new Files;
    const char* tmp = std::getenv("TEST_TMPDIR");
    f->root = std::string(tmp != nullptr ? tmp : "/tmp") + "/masks_data";
    fs::create_directories(f->root);
    Phantom phantom = MakePhantom(24).value();
    // The moving image: the fixed one with its header moved by t, so t is
    // the true fixed -> moving transform.
    const double a = 0.12;
    f->t = {std::cos(a), -std::sin(a), 0, 5, std::sin(a), std::cos(a), 0, -3, 0, 0, 1, 2, 0, 0, 0, 1};
    Volume moving = phantom.image;
    Mat4 index_to_world = phantom.image.geometry.IndexToWorld(), moved{};
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c)
        for (int k = 0; k < 4; ++k) moved[4 * r + c] += f->t[4 * r + k] * index_to_world[4 * k + c];
    moving.geometry = Geometry::FromAffine(moved).value();
    Volume mask = phantom.labels;  // nonzero inside the head
    f->fixed = f->root + "/fixed.nii.gz";
    f->moving = f->root + "/moving.nii.gz";
    f->fixed_mask = f->root + "/fixed_mask.nii.gz";
    f->moving_mask = f->root + "/moving_mask.nii.gz";
    f->affine = f->root + "/0GenericAffine.mat";
    f->bad_affine = f->root + "/broken.txt";
    EXPECT_TRUE(WriteNifti(phantom.image, f->fixed).ok());
    EXPECT_TRUE(WriteNifti(moving, f->moving).ok());
    // The fixed mask leaves out one corner of the head (a "lesion").
    for (int64_t k = 12; k < 24; ++k)
      for (int64_t j = 12; j < 24; ++j)
        for (int64_t i = 12; i < 24; ++i) mask.data.data<int32_t>()[i + 24 * (j + 24 * k)] = 0;
    EXPECT_TRUE(WriteNifti(mask, f->fixed_mask).ok());
    Volume moving_mask = phantom.labels;
    moving_mask.geometry = moving.geometry;
    EXPECT_TRUE(WriteNifti(moving_mask, f->moving_mask).ok());
    EXPECT_TRUE(WriteItkAffine(f->affine, f->t).ok());
    WriteText(f->bad_affine, "#Insight Transform File V1.0\nTransform: AffineTransform_double_3_3\nParameters: 1 2\n");
    return f;
  }();
  return *files;
}

std::shared_ptr<const RegistrationEngine> MakeEngine() {
  auto engine = RegistrationEngine::Create({Problem().root}, int64_t{64} << 20, "cpu");
  EXPECT_TRUE(engine.ok()) << engine.status();
  return *engine;
}

v1::RegisterRequest QuickRequest() {
  v1::RegisterRequest r;
  r.mutable_fixed()->set_path(Problem().fixed);
  r.mutable_moving()->set_path(Problem().moving);
  v1::RegistrationOptions* o = r.mutable_options();
  o->set_metric("mse");
  o->add_scales(2);
  o->add_scales(1);
  o->add_stages("rigid");
  o->add_stages("deformable");
  for (int n : {4, 2}) o->add_rigid_iterations(n);
  for (int n : {4, 2}) o->add_deformable_iterations(n);
  return r;
}

google::protobuf::Any Pack(const v1::RegisterRequest& r) {
  google::protobuf::Any any;
  any.PackFrom(r);
  return any;
}

absl::StatusOr<v1::RegistrationResult> RunJob(const v1::RegisterRequest& r, const std::string& name) {
  const std::string work = Problem().root + "/" + name;
  fs::remove_all(work);
  fs::create_directories(work);
  jobs::EngineContext ctx(name, work, nullptr, absl::InfiniteFuture(), nullptr);
  absl::StatusOr<jobs::EngineOutput> out = MakeEngine()->Run(Pack(r), ctx);
  if (!out.ok()) return out.status();
  v1::RegistrationResult result;
  if (!out->result.UnpackTo(&result)) return absl::InternalError("no RegistrationResult");
  return result;
}

TEST(RegistrationMasks, ValidationRefusesBadTransformsAndUnsupportedMasks) {
  auto engine = MakeEngine();
  v1::RegisterRequest ok = QuickRequest();
  ok.mutable_fixed_mask()->set_path(Problem().fixed_mask);
  ok.mutable_moving_mask()->set_path(Problem().moving_mask);
  ok.mutable_initial_transform()->set_path(Problem().affine);
  EXPECT_TRUE(engine->Validate(Pack(ok)).ok()) << engine->Validate(Pack(ok));

  const auto code_of = [&](const v1::RegisterRequest& r) { return engine->Validate(Pack(r)); };
  v1::RegisterRequest r = QuickRequest();
  r.mutable_initial_transform()->set_path(Problem().bad_affine);
  absl::Status s = code_of(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("initial_transform"), std::string::npos) << s;
  r.mutable_initial_transform()->set_affine_file("not a transform");
  EXPECT_EQ(code_of(r).code(), absl::StatusCode::kInvalidArgument) << code_of(r);
  r.mutable_initial_transform()->set_path("0Warp.nii.gz");
  EXPECT_EQ(code_of(r).code(), absl::StatusCode::kInvalidArgument);
  r.mutable_initial_transform()->set_path("absent.mat");
  EXPECT_EQ(code_of(r).code(), absl::StatusCode::kNotFound);
  r.mutable_initial_transform()->set_registration_job_id("job-1");
  EXPECT_EQ(code_of(r).code(), absl::StatusCode::kInvalidArgument);
  // Inline bytes of a valid file are accepted, inverse too.
  r.mutable_initial_transform()->set_affine_file(ItkAffineBytes(Problem().t));
  r.mutable_initial_transform()->set_inverse(true);
  EXPECT_TRUE(code_of(r).ok()) << code_of(r);

  v1::RegisterRequest sharded = ok;
  sharded.mutable_options()->set_shards(2);
  s = code_of(sharded);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("masks"), std::string::npos) << s;
  v1::RegisterRequest upload = QuickRequest();
  upload.mutable_moving_mask()->set_upload_id("u-1");
  s = code_of(upload);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("moving mask"), std::string::npos) << s;
  v1::RegisterRequest absent = QuickRequest();
  absent.mutable_fixed_mask()->set_path("nope.nii.gz");
  EXPECT_EQ(code_of(absent).code(), absl::StatusCode::kNotFound);
}

TEST(RegistrationMasks, MasksAndTheInitialTransformReachTheRegistrar) {
  absl::StatusOr<v1::RegistrationResult> plain = RunJob(QuickRequest(), "plain");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(plain->log(0).find("centre-of-mass"), std::string::npos) << plain->log(0);

  v1::RegisterRequest given = QuickRequest();
  given.mutable_initial_transform()->set_path(Problem().affine);
  absl::StatusOr<v1::RegistrationResult> with_t = RunJob(given, "given");
  ASSERT_TRUE(with_t.ok()) << with_t.status();
  EXPECT_NE(with_t->log(0).find("init: given transform"), std::string::npos) << with_t->log(0);
  EXPECT_LT(with_t->initial_loss(), plain->initial_loss());

  v1::RegisterRequest masked = given;
  masked.mutable_fixed_mask()->set_path(Problem().fixed_mask);
  masked.mutable_moving_mask()->set_path(Problem().moving_mask);
  absl::StatusOr<v1::RegistrationResult> with_masks = RunJob(masked, "masked");
  ASSERT_TRUE(with_masks.ok()) << with_masks.status();
  EXPECT_NE(with_masks->final_loss(), with_t->final_loss());
  EXPECT_NE(with_masks->initial_loss(), with_t->initial_loss());
}

}  // namespace
}  // namespace tessera::registration
