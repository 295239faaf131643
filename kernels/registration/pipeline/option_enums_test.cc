#include "kernels/registration/pipeline/option_enums.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera::registration {
namespace {

// Every value's name parses back to it, and the choices list every name.
template <typename E>
void ExpectRoundTrip(const std::vector<E>& values) {
  const std::string choices = OptionChoices<E>();
  for (const E value : values) {
    const char* name = OptionName(value);
    absl::StatusOr<E> parsed = ParseOption<E>(name, "field");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, value) << name;
    EXPECT_NE(choices.find(name), std::string::npos) << choices;
  }
}

TEST(OptionEnums, NamesRoundTrip) {
  ExpectRoundTrip<Metric>({Metric::kMse, Metric::kLncc, Metric::kMi});
  ExpectRoundTrip<Stage>({Stage::kRigid, Stage::kAffine, Stage::kDeformable});
  ExpectRoundTrip<Init>({Init::kCentreOfMass, Init::kNone});
  ExpectRoundTrip<DeformableStep>({DeformableStep::kNormalized, DeformableStep::kAdam});
  ExpectRoundTrip<DeformableModel>({DeformableModel::kGreedy, DeformableModel::kBspline});
  ExpectRoundTrip<MemoryMode>({MemoryMode::kLean, MemoryMode::kStandard});
  ExpectRoundTrip<Precision>({Precision::kFull, Precision::kMixed});
  EXPECT_STREQ(OptionName(Init::kCentreOfMass), "com");
  EXPECT_EQ(OptionChoices<Metric>(), "mse, lncc, mi");
}

TEST(OptionEnums, UnknownNameNamesFieldAndChoices) {
  const absl::Status s = ParseOption<Metric>("LNCC", "options.metric").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "options.metric 'LNCC' is not one of mse, lncc, mi");
  EXPECT_FALSE(ParseOption<Precision>("", "options.precision").ok());
}

TEST(OptionEnums, ListStopsAtTheFirstUnknownName) {
  absl::StatusOr<std::vector<Stage>> ok = ParseOptions<Stage>({"affine", "deformable"}, "stages");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, (std::vector<Stage>{Stage::kAffine, Stage::kDeformable}));
  absl::StatusOr<std::vector<Stage>> bad = ParseOptions<Stage>({"affine", "warp"}, "stages: stage");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("'warp'"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace tessera::registration
