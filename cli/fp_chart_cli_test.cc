// `tessera fp chart` as users run it: two images (synthetic prints written as
// PNG) and two FVC2002 templates give a PNG chart of the size the JSON says
// and the explanation's score and pairs; --json writes the summary to a
// file; bad flags exit 2 and unreadable inputs exit 1 naming the file.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "cli/testing/run_tessera.h"
#include "common/png_io.h"
#include "services/fingerprint/extract/synthetic_print.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/image/image_decode.h"
#include "services/fingerprint/search/match_explain.h"

namespace tessera {
namespace {

using cli::testing::CliResult;
using cli::testing::ReadWholeFile;
using cli::testing::RunTessera;
using cli::testing::TestTmp;

std::string PrintPng(uint32_t finger, uint32_t impression) {
  fingerprint::SyntheticPrintOptions o;
  o.finger = finger;
  o.impression = impression;
  const fingerprint::GrayImage g = fingerprint::SyntheticPrint(o);
  Image8 img = Image8::Make(g.width, g.height, 1);
  img.pixels = g.pixels;
  const std::string path = TestTmp(absl::StrCat("print_", finger, "_", impression, ".png"));
  EXPECT_TRUE(WritePng(img, path).ok());
  return path;
}

// The chart file decodes and has the size the summary gives.
void ExpectChart(const nlohmann::json& j, const std::string& png_path) {
  const std::string png = ReadWholeFile(png_path);
  absl::StatusOr<fingerprint::GrayImage> decoded = fingerprint::DecodeGrayImage(png);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, j["chart"]["width"].get<int>());
  EXPECT_EQ(decoded->height, j["chart"]["height"].get<int>());
}

TEST(FpChartCliTest, ImagesGiveAChartAndTheirPairs) {
  const std::string a = PrintPng(3, 0), b = PrintPng(3, 1), out = TestTmp("images.png");
  CliResult r = RunTessera({"fp", "chart", "--probe", a, "--candidate", b, "--ppi", "500", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["probe"]["source"], "image");
  EXPECT_EQ(j["candidate"]["ppi"].get<double>(), 500.0);
  ASSERT_GE(j["pairs"].size(), 2u);
  EXPECT_TRUE(j["alignment"]["valid"].get<bool>());
  EXPECT_GT(j["score"].get<double>(), 0.0);
  for (const auto& p : j["pairs"]) {
    EXPECT_LT(p["probe_index"].get<int>(), j["probe"]["minutiae"].get<int>());
    EXPECT_GE(p["residual"].get<double>(), 0.0);
  }
  // Side by side at scale 1: wider than the two 300-px prints together.
  EXPECT_GT(j["chart"]["width"].get<int>(), 600);
  ExpectChart(j, out);
}

TEST(FpChartCliTest, TemplatesGiveTheExplanationsScore) {
  absl::StatusOr<std::string> dir = fingerprint::FindFingerprintDataDir();
  if (!dir.ok()) GTEST_SKIP() << dir.status();
  const std::string p = *dir + "/fvc2002/DB1_B/101_1.iso", c = *dir + "/fvc2002/DB1_B/101_2.iso";
  const std::string out = TestTmp("templates.png"), json = TestTmp("templates.json");
  CliResult r = RunTessera({"fp", "chart", "--probe", p, "--candidate", c, "--out", out, "--json", json});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;  // the summary went to --json
  const nlohmann::json j = nlohmann::json::parse(ReadWholeFile(json));
  EXPECT_EQ(j["probe"]["source"], "template");
  std::vector<std::vector<fingerprint::MinutiaPoint>> points;
  for (const std::string& path : {p, c}) {
    absl::StatusOr<std::vector<fingerprint::Template>> views = fingerprint::ReadTemplateFile(path);
    ASSERT_TRUE(views.ok()) << views.status();
    points.emplace_back();
    for (const fingerprint::Minutia& m : (*views)[0].minutiae) {
      points.back().push_back({static_cast<float>(m.x), static_cast<float>(m.y), static_cast<float>(m.angle)});
    }
  }
  absl::StatusOr<fingerprint::MatchExplanation> e = fingerprint::ExplainMatch(points[0], points[1]);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(j["score"].get<float>(), e->score);
  ASSERT_EQ(j["pairs"].size(), e->pairs.size());
  for (size_t k = 0; k < e->pairs.size(); ++k) {
    EXPECT_EQ(j["pairs"][k]["probe_index"].get<int>(), e->pairs[k].probe_index);
    EXPECT_EQ(j["pairs"][k]["candidate_index"].get<int>(), e->pairs[k].gallery_index);
  }
  EXPECT_NEAR(j["rms_residual"].get<double>(), e->rms_residual, 1e-9);
  EXPECT_TRUE(j["within_genuine_bound"].get<bool>());  // two impressions of one finger
  ExpectChart(j, out);
}

TEST(FpChartCliTest, BadFlagsAndInputs) {
  const std::string a = PrintPng(4, 0);
  EXPECT_EQ(RunTessera({"fp", "chart", "--probe", a, "--candidate", a}).code, 2);  // no --out
  EXPECT_EQ(RunTessera({"fp", "chart", "--probe", a, "--candidate", a, "--out", TestTmp("x.png"), "--scale", "9"}).code,
            2);
  CliResult r = RunTessera({"fp", "chart", "--probe", TestTmp("missing.iso"), "--candidate", a, "--out",
                            TestTmp("x.png"), "--ppi", "500"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "missing.iso")) << r.err;
  // A PNG without a resolution needs --ppi.
  r = RunTessera({"fp", "chart", "--probe", a, "--candidate", a, "--out", TestTmp("x.png")});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "ppi")) << r.err;
  // --probe-finger is for transactions.
  r = RunTessera({"fp", "chart", "--probe", a, "--candidate", a, "--out", TestTmp("x.png"), "--ppi", "500",
                  "--probe-finger", "2"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "transactions only")) << r.err;
}

}  // namespace
}  // namespace tessera
