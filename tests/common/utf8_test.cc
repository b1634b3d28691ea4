#include "common/utf8.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  for (const std::string& text : std::vector<std::string>{
       "", "plain ascii", "caf\xC3\xA9", "\xE2\x82\xAC 5", "\xF0\x9F\x98\x80",
        "\xED\x9F\xBF" /* U+D7FF */, "\xEE\x80\x80" /* U+E000 */,
        "\xF4\x8F\xBF\xBF" /* U+10FFFF */, std::string("nul\0inside", 10)}) {
    EXPECT_TRUE(CheckUtf8("name", text).ok()) << text;
  }
}

TEST(Utf8, NamesTheFieldTheByteAndItsOffset) {
  const absl::Status status = CheckUtf8("name", "Andr\xE9 run");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "name: not valid UTF-8 (byte 0xE9 at offset 4)");
}

TEST(Utf8, RefusesEveryIllFormedSequence) {
  struct Case {
    std::string text;
    std::string where;
  };
  for (const Case& c : std::vector<Case>{
           {"a\x80", "byte 0x80 at offset 1"},          // Lone continuation.
           {"\xC0\xAF", "byte 0xC0 at offset 0"},       // Overlong '/'.
           {"\xC1\xBF", "byte 0xC1 at offset 0"},       // Overlong.
           {"\xE0\x80\xAF", "byte 0xE0 at offset 0"},   // Overlong, 3 bytes.
           {"\xF0\x80\x80\xAF", "byte 0xF0 at offset 0"},  // Overlong, 4.
           {"x\xED\xA0\x80", "byte 0xED at offset 1"},  // Surrogate U+D800.
           {"\xED\xBF\xBF", "byte 0xED at offset 0"},   // Surrogate U+DFFF.
           {"\xF4\x90\x80\x80", "byte 0xF4 at offset 0"},  // U+110000.
           {"\xF5\x80\x80\x80", "byte 0xF5 at offset 0"},
           {"\xFF", "byte 0xFF at offset 0"},
           {"ab\xE2\x82", "byte 0xE2 at offset 2"},     // Cut short.
           {"\xE2\x28\xA1", "byte 0xE2 at offset 0"},   // Bad second byte.
           {"\xE2\x82\x28", "byte 0xE2 at offset 0"},   // Bad third byte.
       }) {
    const absl::Status status = CheckUtf8("f", c.text);
    EXPECT_EQ(status.message(), "f: not valid UTF-8 (" + c.where + ")")
        << ::testing::PrintToString(c.text);
  }
}

}  // namespace
}  // namespace zbpp
