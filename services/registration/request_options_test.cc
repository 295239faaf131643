// RegisterRequest options -> registrar options, and the progress a request
// reports (fraction from the planned iterations, job progress fields).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/device.h"
#include "services/registration/request_options.h"
#include "services/registration/request_progress.h"

namespace tessera::registration {
namespace {

TEST(RequestOptions, DefaultsValidationAndProgressFraction) {
  absl::StatusOr<RegistrationOptions> o = ToRegistrarOptions(v1::RegistrationOptions(), "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  const RegistrationOptions defaults;
  EXPECT_EQ(o->metric, defaults.metric);
  EXPECT_EQ(o->stages, defaults.stages);
  EXPECT_EQ(o->scales, defaults.scales);
  EXPECT_EQ(o->deformable_iterations, defaults.deformable_iterations);
  EXPECT_EQ(o->metric_options.lncc_window, defaults.metric_options.lncc_window);
  EXPECT_EQ(o->patience, defaults.patience);
  EXPECT_EQ(o->tolerance, defaults.tolerance);
  EXPECT_EQ(o->device, "cpu");

  v1::RegistrationOptions proto;
  proto.set_metric("mi");
  proto.set_mi_bins(48);
  proto.add_stages("affine");
  proto.add_scales(2);
  proto.add_scales(1);
  proto.add_affine_iterations(10);
  proto.set_tolerance(0);
  proto.set_init("none");
  o = ToRegistrarOptions(proto, "auto");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->metric_options.mi_bins, 48);
  EXPECT_EQ(o->tolerance, 0);
  EXPECT_EQ(o->init, Init::kNone);
  EXPECT_EQ(o->metric, Metric::kMi);
  EXPECT_EQ(o->stages, std::vector<Stage>{Stage::kAffine});
  proto.set_tolerance(NAN);
  EXPECT_EQ(ToRegistrarOptions(proto, "auto").status().code(), absl::StatusCode::kInvalidArgument);

  // Affine only, 10 iterations at each of two scales: 20 planned.
  RegistrationProgress p;
  p.stage = "init";
  EXPECT_EQ(EstimateFraction(*o, p), 0);
  p.stage = "affine";
  p.scale = 2;
  p.iteration = 5;
  EXPECT_NEAR(EstimateFraction(*o, p), 0.95 * 5 / 20, 1e-12);
  p.scale = 1;
  p.iteration = 10;
  EXPECT_NEAR(EstimateFraction(*o, p), 0.95, 1e-12);
  p.stage = "output";
  EXPECT_NEAR(EstimateFraction(*o, p), 0.95, 1e-12);
}

TEST(RequestOptions, StepMemoryModeSamplesAndSeedAreParsedAndBadValuesNamed) {
  absl::StatusOr<RegistrationOptions> o = ParseRegistrationOptions(v1::RegistrationOptions(), "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  const RegistrationOptions defaults;
  EXPECT_EQ(o->deformable_step, defaults.deformable_step);
  EXPECT_EQ(o->memory_mode, defaults.memory_mode);
  EXPECT_EQ(o->linear_samples, defaults.linear_samples);
  EXPECT_EQ(o->sampling_seed, defaults.sampling_seed);

  v1::RegistrationOptions proto;
  proto.set_deformable_step("adam");
  proto.set_memory_mode("standard");
  proto.set_linear_samples(0);
  proto.set_seed(42);
  o = ParseRegistrationOptions(proto, "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->deformable_step, DeformableStep::kAdam);
  EXPECT_EQ(o->memory_mode, MemoryMode::kStandard);
  EXPECT_EQ(o->linear_samples, 0);
  EXPECT_EQ(o->sampling_seed, 42u);

  for (auto [edit, needle] : std::vector<std::pair<std::function<void(v1::RegistrationOptions*)>, std::string>>{
           {[](v1::RegistrationOptions* p) { p->set_deformable_step("sgd"); }, "'sgd'"},
           {[](v1::RegistrationOptions* p) { p->set_memory_mode("tiny"); }, "'tiny'"},
           {[](v1::RegistrationOptions* p) { p->set_linear_samples(-5); }, "-5"}}) {
    v1::RegistrationOptions bad = proto;
    edit(&bad);
    const absl::Status s = ParseRegistrationOptions(bad, "cpu").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  }
}

TEST(RequestOptions, FinestLevelStopRulesAreParsedAndBadGainsNamed) {
  absl::StatusOr<RegistrationOptions> o = ParseRegistrationOptions(v1::RegistrationOptions(), "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  const RegistrationOptions defaults;
  EXPECT_EQ(o->plateau_window_finest, defaults.plateau_window_finest);
  EXPECT_EQ(o->finest_remaining_gain, defaults.finest_remaining_gain);

  v1::RegistrationOptions proto;
  proto.set_plateau_window_finest(!defaults.plateau_window_finest);
  proto.set_finest_remaining_gain(0.001);
  o = ParseRegistrationOptions(proto, "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->plateau_window_finest, !defaults.plateau_window_finest);
  EXPECT_EQ(o->finest_remaining_gain, 0.001);

  for (double bad : {-0.1, 1.0, std::nan("")}) {
    proto.set_finest_remaining_gain(bad);
    const absl::Status s = ParseRegistrationOptions(proto, "cpu").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("finest_remaining_gain"), std::string::npos) << s;
  }
}

TEST(RequestOptions, FullFinestDeformableIsParsed) {
  absl::StatusOr<RegistrationOptions> o = ParseRegistrationOptions(v1::RegistrationOptions(), "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->full_finest_deformable);  // unset: the registrar's default (capped where it applies)
  for (const bool full : {true, false}) {
    v1::RegistrationOptions proto;
    proto.set_full_finest_deformable(full);
    o = ParseRegistrationOptions(proto, "cpu");
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->full_finest_deformable, full);
  }
}

TEST(RequestOptions, DenseFinestLinearIsParsed) {
  absl::StatusOr<RegistrationOptions> o = ParseRegistrationOptions(v1::RegistrationOptions(), "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->dense_finest_linear);  // unset: the registrar's default (skip where it applies)
  for (const bool dense : {true, false}) {
    v1::RegistrationOptions proto;
    proto.set_dense_finest_linear(dense);
    o = ParseRegistrationOptions(proto, "cpu");
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->dense_finest_linear, dense);
  }
}

TEST(RequestOptions, DeformableModelAndBsplineSpacingAreParsedAndBadValuesNamed) {
  absl::StatusOr<RegistrationOptions> o = ParseRegistrationOptions(v1::RegistrationOptions(), "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  const RegistrationOptions defaults;
  EXPECT_EQ(o->deformable_model, defaults.deformable_model);
  EXPECT_EQ(o->bspline_spacing_mm, defaults.bspline_spacing_mm);

  v1::RegistrationOptions proto;
  proto.set_deformable_model("bspline");
  proto.set_bspline_spacing_mm(7.5);
  o = ParseRegistrationOptions(proto, "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->deformable_model, DeformableModel::kBspline);
  EXPECT_EQ(o->bspline_spacing_mm, 7.5);

  for (auto [edit, needle] : std::vector<std::pair<std::function<void(v1::RegistrationOptions*)>, std::string>>{
           {[](v1::RegistrationOptions* p) { p->set_deformable_model("thin-plate"); }, "options.deformable_model 'thin-plate'"},
           {[](v1::RegistrationOptions* p) { p->set_bspline_spacing_mm(0); }, "options.bspline_spacing_mm 0"},
           {[](v1::RegistrationOptions* p) { p->set_bspline_spacing_mm(-2); }, "options.bspline_spacing_mm -2"},
           {[](v1::RegistrationOptions* p) { p->set_bspline_spacing_mm(NAN); }, "options.bspline_spacing_mm nan"},
           {[](v1::RegistrationOptions* p) { p->set_shards(2); }, "options.shards is 2"}}) {
    v1::RegistrationOptions bad = proto;
    edit(&bad);
    const absl::Status s = ParseRegistrationOptions(bad, "cpu").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  }
}

TEST(RequestOptions, PrecisionIsParsedAndBadValuesNamed) {
  EXPECT_EQ(ParseRegistrationOptions(v1::RegistrationOptions(), "cpu")->precision, RegistrationOptions().precision);
  v1::RegistrationOptions proto;
  proto.set_precision("mixed");
  absl::StatusOr<RegistrationOptions> o = ParseRegistrationOptions(proto, "cpu");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->precision, Precision::kMixed);
  proto.set_precision("fp8");
  const absl::Status s = ParseRegistrationOptions(proto, "cpu").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("options.precision 'fp8'"), std::string::npos) << s;
}

TEST(RequestOptions, ShardsDefaultToOnePerListedGpuAndBadListsAreNamed) {
  v1::RegistrationOptions proto;
  EXPECT_EQ(ParseRegistrationOptions(proto, "auto")->shards, 1);
  proto.add_gpus(0);
  proto.add_gpus(2);
  absl::StatusOr<RegistrationOptions> o = ParseRegistrationOptions(proto, "auto");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shards, 2);
  EXPECT_EQ(o->gpus, (std::vector<int>{0, 2}));
  proto.set_shards(6);  // several ranks per GPU
  EXPECT_EQ(ParseRegistrationOptions(proto, "auto")->shards, 6);

  for (auto [edit, needle] : std::vector<std::pair<std::function<void(v1::RegistrationOptions*)>, std::string>>{
           {[](v1::RegistrationOptions* p) { p->set_shards(-1); }, "options.shards -1"},
           {[](v1::RegistrationOptions* p) { p->set_shards(65); }, "options.shards 65"},
           {[](v1::RegistrationOptions* p) { p->add_gpus(2); }, "GPU 2 twice"},
           {[](v1::RegistrationOptions* p) { p->add_gpus(-3); }, "options.gpus[2] = -3"},
           {[](v1::RegistrationOptions* p) { p->set_device("cpu"); }, "device is cpu"}}) {
    v1::RegistrationOptions bad = proto;
    edit(&bad);
    const absl::Status s = ParseRegistrationOptions(bad, "auto").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  }
}

TEST(RequestOptions, DeviceIsParsedEverywhereButCheckedOnlyByToRegistrarOptions) {
  v1::RegistrationOptions proto;
  proto.set_device("cuda");
  absl::StatusOr<RegistrationOptions> parsed = ParseRegistrationOptions(proto, "auto");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->device, "cuda");
  if (!DeviceRegistry::Get().cuda_available()) {
    EXPECT_EQ(ToRegistrarOptions(proto, "auto").status().code(), absl::StatusCode::kFailedPrecondition);
  }
  proto.set_device("tpu");
  EXPECT_EQ(ParseRegistrationOptions(proto, "auto").status().code(), absl::StatusCode::kInvalidArgument);
  proto.clear_device();
  EXPECT_EQ(ParseRegistrationOptions(proto, "cpu")->device, "cpu");  // the server's default
}

TEST(RequestProgress, JobProgressCarriesStageLossScaleAndANeverDecreasingFraction) {
  RegistrationOptions o;
  o.stages = {Stage::kAffine};
  o.scales = {2, 1};
  o.affine_iterations = {10, 10};
  std::vector<jobs::JobProgress> seen;
  ProgressCallback callback = ToJobProgress(o, [&](const jobs::JobProgress& p) { seen.push_back(p); });
  callback(RegistrationProgress{"affine", 2, 5, 10, 0.5});
  callback(RegistrationProgress{"affine", 1, 1, 10, 0.25});
  ProgressCallback copy = callback;  // copies share the running maximum
  copy(RegistrationProgress{"init", 1, 0, 0, 0.75});
  copy(RegistrationProgress{"output", 1, 0, 0, 0});
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].stage, "affine");
  EXPECT_EQ(seen[0].step, 5);
  EXPECT_EQ(seen[0].total_steps, 10);
  EXPECT_EQ(seen[0].metrics.at("loss"), 0.5);
  EXPECT_EQ(seen[0].metrics.at("scale"), 2);
  EXPECT_NEAR(seen[0].fraction, 0.95 * 5 / 20, 1e-12);
  EXPECT_NEAR(seen[1].fraction, 0.95 * 11 / 20, 1e-12);
  EXPECT_EQ(seen[2].fraction, seen[1].fraction);  // "init" would be 0: never goes back
  EXPECT_NEAR(seen[3].fraction, 0.95, 1e-12);
  EXPECT_EQ(seen[3].metrics.count("loss"), 0u);
  EXPECT_EQ(seen[3].message, "writing results");
  EXPECT_EQ(ReadingInputsProgress().stage, "input");
}

}  // namespace
}  // namespace tessera::registration
