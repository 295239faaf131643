#include "common/text_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(TextChecksTest, AcceptsOrdinaryIdsInAnyScript) {
  for (const std::string id : {"subject-0042_R2", "Müller Ω 指紋", "a.b c", "\xf0\x9f\x94\x8d"}) {
    EXPECT_TRUE(CheckIdentifierText(id, "id").ok()) << id;
  }
}

TEST(TextChecksTest, RejectsWhatRendersMisleadingly) {
  const struct {
    std::string text;
    const char* expect;
  } cases[] = {
      {"abc\x01", "U+0001 (a control character) at byte 3"},
      {"ab\xc2\x85" "cd", "U+0085 (a control character) at byte 2"},       // NEXT LINE
      {"x\xe2\x80\xae" "gpj.exe", "U+202E (a bidirectional formatting character) at byte 1"},
      {"\xe2\x81\xa6" "x", "U+2066"},
      {"a\xe2\x80\x8b" "b", "U+200B (a zero-width character)"},
      {"a\xe2\x80\xa8", "U+2028"},
      {"\xef\xbb\xbf" "id", "U+FEFF"},
      {"a\xff", "not valid UTF-8 at byte 1"},
      {"\xc0\xaf", "not valid UTF-8 at byte 0"},        // overlong '/'
      {"\xed\xa0\x80", "not valid UTF-8"},              // surrogate
      {"ab\xe2\x80", "not valid UTF-8 at byte 2"},      // truncated
  };
  for (const auto& c : cases) {
    const absl::Status s = CheckIdentifierText(c.text, "template id");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.expect;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.expect));
    EXPECT_THAT(std::string(s.message()), HasSubstr("template id"));
  }
}

TEST(TextChecksTest, QuoteBoundedCutsAndEscapes) {
  EXPECT_EQ(QuoteBounded("abc"), "'abc'");
  EXPECT_EQ(QuoteBounded("a\nb\\"), "'a\\x0ab\\x5c'");
  const std::string quoted = QuoteBounded(std::string(10240, 'p'), 16);
  EXPECT_EQ(quoted, "'pppppppppppppppp'... (10240 bytes)");
}

}  // namespace
}  // namespace tessera
