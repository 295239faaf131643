#include "kernels/registration/pipeline/registration_job.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace tessera::registration {
namespace {

using Json = nlohmann::ordered_json;

RegistrationSummary Summary() {
  RegistrationSummary s;
  RegistrationResult& r = s.result;
  r.backend = "cpu";
  r.initial_loss = -0.4333031234;
  r.final_loss = -1.509281;
  r.seconds = 1234567.0;
  r.peak_device_bytes = 62380992;
  r.jacobian.voxels = 10;
  r.jacobian.min_det = 0.40875712;
  r.affine_ras = Mat4{0.9957321, 0, 0, -3.019761, 0, 1, 0, 4.472, 0, 0, 1, 0, 0, 0, 0, 1};
  r.log = {"line \"one\"", "tab\there"};
  s.dice_after = 0.97864912;
  s.dice_large_after = NAN;
  s.dice_labels = 116;
  s.dice_large_labels = 72;
  s.files.warped = "/out/warped.nii.gz";
  s.files.affine = "/out/a\"b.mat";
  return s;
}

RegistrationOptions Options() {
  RegistrationOptions o;
  o.metric = Metric::kMi;
  o.stages = {Stage::kRigid, Stage::kAffine};
  o.scales = {4, 2, 1};
  return o;
}

// The keys, their order and the values (6 significant digits, integers where
// they are integral, null for missing or non-finite) that the summary has
// always had: this text is what the hand-written JSON produced.
TEST(RegistrationJobTest, SummaryJsonKeepsItsKeysOrderAndValues) {
  const std::string before =
      R"js({"metric": "mi", "stages": ["rigid", "affine"], "scales": [4, 2, 1], "backend": "cpu", )js"
      R"js("initial_loss": -0.433303, "final_loss": -1.50928, "dice_before": null, "dice_after": 0.978649, )js"
      R"js("dice_large_before": null, "dice_large_after": null, "dice_definition": {"dice_before/after": )js"
      R"js("mean over all labels present in either map (background 0 excluded)", "dice_large_before/after": )js"
      R"js("mean over labels with >= 1000 voxels in the fixed labels", "labels": 116, "large_labels": 72, )js"
      R"js("large_min_voxels": 1000}, "folded_percent": 0, "min_jacobian": 0.408757, "seconds": 1.23457e+06, )js"
      R"js("peak_device_bytes": 62380992, "affine_ras": [0.995732, 0, 0, -3.01976, 0, 1, 0, 4.472, 0, 0, 1, 0, )js"
      R"js(0, 0, 0, 1], "files": {"warped": "/out/warped.nii.gz", "affine": "/out/a\"b.mat"}, )js"
      R"js("log": ["line \"one\"", "tab\there"]})js";
  const std::string text = SummaryToJson(Summary(), Options());
  const Json now = Json::parse(text);
  EXPECT_EQ(now, Json::parse(before)) << text;  // ordered: the key order counts too
  EXPECT_TRUE(now["folded_percent"].is_number_integer()) << text;
  EXPECT_TRUE(now["dice_after"].is_number_float()) << text;
  EXPECT_EQ(now["log"][1], "tab\there");
}

TEST(RegistrationJobTest, SummaryJsonWithoutDeformableOrFiles) {
  RegistrationSummary s = Summary();
  s.result.jacobian.voxels = 0;
  s.result.log.clear();
  s.files = OutputFiles();
  const Json j = Json::parse(SummaryToJson(s, Options()));
  EXPECT_TRUE(j["min_jacobian"].is_null());
  EXPECT_EQ(j["files"], Json::object());
  EXPECT_EQ(j["log"], Json::array());
}

// A path that is not UTF-8 still gives valid JSON (the bytes are replaced).
TEST(RegistrationJobTest, SummaryJsonIsValidForAnyBytes) {
  RegistrationSummary s = Summary();
  s.files.warped = "/out/\xff\xfe.nii.gz";
  const std::string text = SummaryToJson(s, Options());
  ASSERT_TRUE(Json::accept(text)) << text;
  EXPECT_EQ(Json::parse(text)["files"]["warped"], "/out/\xEF\xBF\xBD\xEF\xBF\xBD.nii.gz");
}

}  // namespace
}  // namespace tessera::registration
