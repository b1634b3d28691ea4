// common/text_table: the exact bytes zbpp-sched and zbppctl print.
#include "common/text_table.h"

#include "gtest/gtest.h"

namespace zbpp {
namespace {

TEST(FormatTable, PadsColumnsTwoSpacesApartWithoutTrailingBlanks) {
  EXPECT_EQ(FormatTable({{"ID", "NAME", "STATE"},
                         {"job-10", "gpt", "RUNNING"},
                         {"j", "a-longer-name", "-"}}),
            "ID      NAME           STATE\n"
            "job-10  gpt            RUNNING\n"
            "j       a-longer-name  -\n");
}

TEST(FormatTable, RaggedRowsAlignTheColumnsTheyHave) {
  EXPECT_EQ(FormatTable({{"key:", "value"}, {"a-long-key:"}, {"k:", "v", "x"}}),
            "key:         value\n"
            "a-long-key:\n"
            "k:           v      x\n");
}

// A job or worker name is the submitter's: its escape sequences must not
// reach the terminal (one cleared the screen and set the window title).
TEST(FormatTable, ControlBytesArePrintedEscaped) {
  EXPECT_EQ(PrintableText("a\x1b]0;pwned\x07" "b\x1b[2J"), "a\\x1b]0;pwned\\x07b\\x1b[2J");
  EXPECT_EQ(PrintableText("two\nlines\tand\rtab\x7f"), "two lines and tab\\x7f");
  EXPECT_EQ(PrintableText("ünïcode stays"), "ünïcode stays");
  EXPECT_EQ(FormatTable({{"\x1b[2J", "x"}, {"abcdefgh", "y"}}),
            "\\x1b[2J   x\n"
            "abcdefgh  y\n");
}

TEST(FormatTable, EmptyCellsAndRows) {
  EXPECT_EQ(FormatTable({}), "");
  EXPECT_EQ(FormatTable({{}, {"", "b"}}), "\n  b\n");
}

}  // namespace
}  // namespace zbpp
