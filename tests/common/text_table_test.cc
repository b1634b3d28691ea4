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

TEST(FormatTable, EmptyCellsAndRows) {
  EXPECT_EQ(FormatTable({}), "");
  EXPECT_EQ(FormatTable({{}, {"", "b"}}), "\n  b\n");
}

}  // namespace
}  // namespace zbpp
