// ParseItkAffine: ITK's text transform format (as ANTs and Slicer write it)
// beside the MATLAB one, exact round trips of the files we write, and
// refusals that name the line or field at fault.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "absl/strings/str_format.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/testing/random_affine.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration {
namespace {

std::string Tmp(const std::string& name) { return std::string(std::getenv("TEST_TMPDIR")) + "/" + name; }

Mat4 RandomAffine(std::mt19937& rng) { return testing::RandomAffine(rng, 0.3, 20); }

std::array<double, 3> Apply(const Mat4& m, std::array<double, 3> p) {
  std::array<double, 3> q{};
  for (int r = 0; r < 3; ++r) q[r] = m[r * 4] * p[0] + m[r * 4 + 1] * p[1] + m[r * 4 + 2] * p[2] + m[r * 4 + 3];
  return q;
}

// Files we write read back as the same transform to a few ulps of the
// largest term: ITK's T(p) = M (p - c) + c + t rounds in t + c - M c whatever
// the writer picks (the writer nudges t to the closest read-back it can
// reach). Measured here: at most 4.3e-14 mm with centres up to 120 mm. The
// registration's sampler takes float32 affines, which this does not reach
// (apply_transforms_test checks the outputs bit for bit). The text file
// carries 17 digits: the same doubles as the MATLAB one.
TEST(ItkAffineText, BothFormatsRoundTrip) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-120, 120);
  double worst = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const Mat4 t = RandomAffine(rng);
    const std::array<double, 3> centre = {u(rng), u(rng), u(rng)};
    const Mat4 from_mat = ParseItkAffine(ItkAffineBytes(t, centre), "mem.mat").value();
    const Mat4 from_text = ParseItkAffine(ItkAffineText(t, centre), "mem.txt").value();
    for (int i = 0; i < 16; ++i) {
      worst = std::max(worst, std::fabs(from_mat[i] - t[i]));
      EXPECT_EQ(from_text[i], from_mat[i]) << i;
      if (i % 4 != 3) EXPECT_EQ(from_mat[i], t[i]) << i;  // the matrix is written as it is
    }
  }
  EXPECT_LT(worst, 1e-13);
}

TEST(ItkAffineText, WriteItkAffinePicksTheFormatByExtension) {
  std::mt19937 rng(2);
  const Mat4 t = RandomAffine(rng);
  for (const char* name : {"a.txt", "a.tfm", "a.mat"}) {
    ASSERT_TRUE(WriteItkAffine(Tmp(name), t, {1, 2, 3}).ok());
    const Mat4 back = ReadItkAffine(Tmp(name)).value();
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(back[i], t[i], 1e-12) << name << " " << i;
  }
}

// A file as antsRegistration writes it with --write-composite-transform 0 and
// a .txt name: LPS, centre in FixedParameters.
TEST(ItkAffineText, ReadsAHandWrittenAntsFile) {
  const std::string text =
      "#Insight Transform File V1.0\n"
      "#Transform 0\n"
      "Transform: AffineTransform_double_3_3\n"
      "Parameters: 1 0 0 0 1 0 0 0 1 -5 2 3\n"
      "FixedParameters: 10 20 30\n";
  const Mat4 ras = ParseItkAffine(text, "hand.txt").value();
  // Identity matrix: T(p) = p + t in LPS; t = (-5, 2, 3) LPS = (5, -2, 3) RAS.
  const auto q = Apply(ras, {1, 1, 1});
  EXPECT_DOUBLE_EQ(q[0], 6);
  EXPECT_DOUBLE_EQ(q[1], -1);
  EXPECT_DOUBLE_EQ(q[2], 4);
}

// The rotation families against their matrices: a 90 degree turn about z.
TEST(ItkAffineText, RigidFamiliesAgreeOnARotationAboutZ) {
  const double h = std::sqrt(0.5);  // versor of 90 degrees about z: (0, 0, sin 45)
  const std::string euler = "#Insight Transform File V1.0\nTransform: Euler3DTransform_double_3_3\n"
                            "Parameters: 0 0 1.5707963267948966 1 2 3\nFixedParameters: 10 0 0 0\n";
  const std::string versor = "#Insight Transform File V1.0\nTransform: VersorRigid3DTransform_double_3_3\n"
                             "Parameters: 0 0 " + absl::StrFormat("%.17g", h) + " 1 2 3\nFixedParameters: 10 0 0\n";
  const std::string affine = "#Insight Transform File V1.0\nTransform: AffineTransform_double_3_3\n"
                             "Parameters: 0 -1 0 1 0 0 0 0 1 1 2 3\nFixedParameters: 10 0 0\n";
  const std::string similarity = "#Insight Transform File V1.0\nTransform: Similarity3DTransform_double_3_3\n"
                                 "Parameters: 0 0 " + absl::StrFormat("%.17g", h) + " 1 2 3 1\nFixedParameters: 10 0 0\n";
  const Mat4 want = ParseItkAffine(affine, "affine").value();
  for (const std::string* s : {&euler, &versor, &similarity}) {
    const Mat4 got = ParseItkAffine(*s, "rigid").value();
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << *s << " " << i;
  }
  const Mat4 shift = ParseItkAffine("#Insight Transform File V1.0\nTransform: TranslationTransform_double_3_3\n"
                                    "Parameters: 1 2 3\nFixedParameters:\n",
                                    "translation")
                         .value();
  const auto q = Apply(shift, {0, 0, 0});
  EXPECT_DOUBLE_EQ(q[0], -1);  // LPS (1, 2, 3) is RAS (-1, -2, 3)
  EXPECT_DOUBLE_EQ(q[1], -2);
  EXPECT_DOUBLE_EQ(q[2], 3);
}

// A composite of linear transforms is their product (the last listed first).
TEST(ItkAffineText, CompositeOfLinearTransformsComposes) {
  const std::string text =
      "#Insight Transform File V1.0\n#Transform 0\nTransform: CompositeTransform_double_3_3\n"
      "#Transform 1\nTransform: TranslationTransform_double_3_3\nParameters: 0 0 10\nFixedParameters: \n"
      "#Transform 2\nTransform: AffineTransform_double_3_3\nParameters: 2 0 0 0 2 0 0 0 2 0 0 0\n"
      "FixedParameters: 0 0 0\n";
  const Mat4 m = ParseItkAffine(text, "composite.txt").value();
  const auto q = Apply(m, {0, 0, 1});  // scaled first (z = 2), then shifted (z = 12)
  EXPECT_DOUBLE_EQ(q[2], 12);
}

TEST(ItkAffineText, MalformedFilesNameTheLineOrField) {
  struct Case {
    std::string text, expect;
  };
  const std::string head = "#Insight Transform File V1.0\n#Transform 0\n";
  const Case cases[] = {
      {head + "Transform: AffineTransform_double_3_3\nParameters: 1 0 0 0 1 0 0 0 1 0 0\nFixedParameters: 0 0 0\n",
       "needs 12 Parameters, got 11"},
      {head + "Transform: AffineTransform_double_3_3\nParameters: 1 0 0 0 1 x 0 0 1 0 0 0\n", "line 4: 'x'"},
      {head + "Transform: AffineTransform_double_3_3\nParameters: 1 0 0 0 1 0 0 0 1 0 0 0\nFixedParameters: 0 0\n",
       "FixedParameters"},
      {head + "Transform: BSplineTransform_double_3_3\nParameters: 1\n", "unsupported transform"},
      {head + "Transform: AffineTransform_double_2_2\nParameters: 1 0 0 1 0 0\n", "not a 3-D ITK transform"},
      {head + "Parameters: 1 2 3\n", "line 3: Parameters before any Transform"},
      {head + "Transform: AffineTransform_double_3_3\n", "Transform without Parameters"},
      {head + "Transform AffineTransform_double_3_3\n", "line 3: expected 'Key: value'"},
      {head, "no Transform"},
      {head + "Transform: VersorRigid3DTransform_double_3_3\nParameters: 1 1 1 0 0 0\n", "versor norm"},
  };
  for (const Case& c : cases) {
    const auto r = ParseItkAffine(c.text, "bad.txt");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(std::string(r.status().message()).find(c.expect), std::string::npos) << r.status();
    EXPECT_NE(std::string(r.status().message()).find("bad.txt"), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace tessera::registration
