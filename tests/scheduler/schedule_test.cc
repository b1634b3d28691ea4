#include "scheduler/schedule.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Schedule, TextFormMatchesPyTorchPipelining) {
  EXPECT_EQ(ActionToString({PassKind::kF, VirtualStage(2), 0}), "2F0");
  EXPECT_EQ(ActionToString({PassKind::kB, VirtualStage(1), 3}), "1I3");
  EXPECT_EQ(ActionToString({PassKind::kW, VirtualStage(1), 3}), "1W3");
  EXPECT_EQ(ActionToString({PassKind::kBW, VirtualStage(0), 1}), "0B1");
  EXPECT_EQ(ActionToString({PassKind::kF, VirtualStage(12), 345}), "12F345");
  EXPECT_EQ(ActionToString({PassKind::kS, VirtualStage(3), 0}), "3S0");
  EXPECT_EQ(ActionToString({PassKind::kT, VirtualStage(3), 5}), "3T5");
}

TEST(Schedule, ParseRoundTrips) {
  for (PassKind kind : {PassKind::kF, PassKind::kB, PassKind::kW, PassKind::kBW, PassKind::kS,
                        PassKind::kT}) {
    for (int virtual_stage : {0, 7, 63}) {
      for (int mb : {0, 9, 511}) {
        const Action action{kind, VirtualStage(virtual_stage), mb};
        absl::StatusOr<Action> parsed = ParseAction(ActionToString(action));
        ASSERT_TRUE(parsed.ok()) << parsed.status();
        EXPECT_EQ(*parsed, action);
      }
    }
  }
}

TEST(Schedule, ParseRejectsMalformedText) {
  for (const char* text : {"", "F0", "3X1", "3F", "3Fx", "-1F0", "1F-2",
                           "99999999999F0", "1F 2"}) {
    absl::StatusOr<Action> parsed = ParseAction(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << text;
    EXPECT_THAT(std::string(parsed.status().message()),
                HasSubstr(std::string("\"") + text + "\""));
  }
}

TEST(Schedule, ParseNamesEveryPassLetterAndRefusesABucketOnAVocabularyPass) {
  EXPECT_THAT(std::string(ParseAction("3X1").status().message()),
              HasSubstr("pass must be one of F, I, W, B, S, T, REDUCE_GRAD"));
  EXPECT_THAT(std::string(ParseAction("3S1@0").status().message()),
              HasSubstr("only W and REDUCE_GRAD take a bucket"));
}

TEST(Schedule, LoopPlacementIsRoundRobin) {
  EXPECT_THAT(PlaceVirtualStages(Placement::kLoop, 3, 2),
              ElementsAre(0, 1, 2, 0, 1, 2));
}

TEST(Schedule, VPlacementFoldsBack) {
  EXPECT_THAT(PlaceVirtualStages(Placement::kV, 3, 2),
              ElementsAre(0, 1, 2, 2, 1, 0));
  EXPECT_TRUE(PlaceVirtualStages(Placement::kV, 3, 3).empty());
}

}  // namespace
}  // namespace zbpp::sched
