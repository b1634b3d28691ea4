#include "scheduler/schedule_io.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "tests/scheduler/schedule_builder.h"

namespace zbpp::sched {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Schedule FromText(int stages, int chunks, int microbatches,
                  Placement placement,
                  const std::vector<std::vector<std::string>>& rows) {
  return testing::ScheduleFromRows("hand", stages, chunks, microbatches,
                                   placement, rows);
}

// ZB-H1-like order for p=2, m=2 with split B and W.
Schedule TwoStages() {
  return FromText(2, 1, 2, Placement::kLoop,
                  {{"0F0", "0F1", "0I0", "0W0", "0I1", "0W1"},
                   {"1F0", "1I0", "1F1", "1I1", "1W0", "1W1"}});
}

void ExpectSameShape(const Schedule& got, const Schedule& want) {
  EXPECT_EQ(got.stages, want.stages);
  EXPECT_EQ(got.chunks, want.chunks);
  EXPECT_EQ(got.microbatches, want.microbatches);
  EXPECT_EQ(got.stage_of, want.stage_of);
  EXPECT_EQ(got.actions, want.actions);
}

TEST(ScheduleIoCsv, WritesOneRowPerStageInPyTorchActionForm) {
  EXPECT_EQ(ScheduleToCsv(TwoStages()),
            "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1F1,1I1,1W0,1W1\n");
}

TEST(ScheduleIoCsv, RoundTripsLoopPlacement) {
  const Schedule want = TwoStages();
  absl::StatusOr<Schedule> got =
      ScheduleFromCsv(ScheduleToCsv(want), Placement::kLoop);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameShape(*got, want);
}

TEST(ScheduleIoCsv, RoundTripsVPlacementAndInfersChunks) {
  // p=2, v=2 in a V: stage 0 holds virtual stages 0 and 3, stage 1 virtual stages 1, 2.
  const Schedule want = FromText(
      2, 2, 1, Placement::kV,
      {{"0F0", "3F0", "3B0", "0B0"}, {"1F0", "2F0", "2I0", "1I0", "2W0",
                                      "1W0"}});
  absl::StatusOr<Schedule> got =
      ScheduleFromCsv(ScheduleToCsv(want), Placement::kV);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameShape(*got, want);
  EXPECT_THAT(got->stage_of, ElementsAre(0, 1, 1, 0));
}

TEST(ScheduleIoCsv, RoundTripsGeneratedZbH1) {
  absl::StatusOr<Schedule> want =
      Generate("zb-h1", Problem::Uniform(4, 1, 8, VirtualStageCost{}, 0));
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<Schedule> got =
      ScheduleFromCsv(ScheduleToCsv(*want), Placement::kLoop);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameShape(*got, *want);
}

// zbpp's own CSV and JSON carry the vocabulary passes, every stage's S and
// T naming the last virtual stage; PyTorch pipelining's CSV has none.
TEST(ScheduleIoCsv, VocabularyPassesRoundTripInZbppFormsAndPyTorchRefusesThem) {
  const Schedule s = testing::ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop,
                                               {{"0F0", "1S0", "1T0", "0I0", "0W0"},
                                                {"1F0", "1S0", "1T0", "1I0", "1W0"}});
  EXPECT_EQ(ScheduleToCsv(s), "0F0,1S0,1T0,0I0,0W0\n1F0,1S0,1T0,1I0,1W0\n");
  absl::StatusOr<Schedule> csv = ScheduleFromCsv(ScheduleToCsv(s), Placement::kLoop);
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ(csv->actions, s.actions);
  absl::StatusOr<Schedule> json = ScheduleFromJson(ScheduleToJson(s));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, s);
  absl::Status status = ScheduleFromPytorchCsv(ScheduleToCsv(s)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("row 1 (stage 0), cell 2 (1S0): PyTorch pipelining has no vocabulary "
                        "passes"));
}

TEST(ScheduleIoCsv, AcceptsCrLfSpacesAndEmptyIdleCells) {
  absl::StatusOr<Schedule> got = ScheduleFromCsv(
      " 0F0 ,,0B0\r\n1F0, 1B0\r\n", Placement::kLoop);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stages, 2);
  EXPECT_EQ(got->microbatches, 1);
  EXPECT_EQ(ScheduleToCsv(*got), "0F0,0B0\n1F0,1B0\n");
}

TEST(ScheduleIoCsv, BadCellNamesRowAndCell) {
  absl::StatusOr<Schedule> got =
      ScheduleFromCsv("0F0,0B0\n1F0,1X0\n", Placement::kLoop);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(),
              AllOf(HasSubstr("row 2"), HasSubstr("cell 2"), HasSubstr("1X0")));
}

TEST(ScheduleIoCsv, VirtualStageOnTheWrongStageNamesRowAndCell) {
  // Virtual stage 1 belongs to stage 1 under loop placement, not to row 1.
  absl::StatusOr<Schedule> got =
      ScheduleFromCsv("0F0,1F0,1B0,0B0\n\n", Placement::kLoop);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(),
              AllOf(HasSubstr("row 1"), HasSubstr("cell 2"),
                    HasSubstr("held by stage 1")));
}

TEST(ScheduleIoCsv, RefusesEmptyInputAndUnevenVirtualStageCount) {
  EXPECT_THAT(ScheduleFromCsv("", Placement::kLoop).status().message(),
              HasSubstr("no rows"));
  // 3 virtual stages over 2 rows cannot be v whole chunks.
  EXPECT_THAT(
      ScheduleFromCsv("0F0,2F0\n1F0\n", Placement::kLoop).status().message(),
      HasSubstr("not a multiple"));
  // V placement needs exactly 2 chunks; this CSV has 1.
  EXPECT_THAT(
      ScheduleFromCsv("0F0,0B0\n1F0,1B0\n", Placement::kV).status().message(),
      HasSubstr("2 chunks"));
}

TEST(ScheduleIoJson, RoundTripsNameAndShape) {
  const Schedule want = TwoStages();
  absl::StatusOr<Schedule> got = ScheduleFromJson(ScheduleToJson(want));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->name, "hand");
  ExpectSameShape(*got, want);
}

TEST(ScheduleIoJson, RoundTripsGenerated1F1B) {
  absl::StatusOr<Schedule> want =
      Generate("1f1b", Problem::Uniform(3, 1, 5, VirtualStageCost{}, 0));
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<Schedule> got = ScheduleFromJson(ScheduleToJson(*want));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->name, want->name);
  ExpectSameShape(*got, *want);
}

TEST(ScheduleIoJson, WritesTheDocumentedFields) {
  EXPECT_EQ(ScheduleToJson(FromText(1, 1, 1, Placement::kLoop,
                                    {{"0F0", "0B0"}})),
            R"({"name":"hand","stages":1,"chunks":1,"microbatches":1,)"
            R"("stage_of":[0],"actions":[["0F0","0B0"]]})");
}

TEST(ScheduleIoJson, ErrorsNameTheField) {
  const std::string head =
      R"({"name":"x","stages":2,"chunks":1,"microbatches":1,)";
  struct Case {
    std::string json;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"{not json", "does not parse"},
      {"[1,2]", "must be an object"},
      {R"({"chunks":1,"microbatches":1})", "\"stages\""},
      {R"({"stages":0,"chunks":1,"microbatches":1})", "\"stages\""},
      {R"({"stages":2,"chunks":"1","microbatches":1})", "\"chunks\""},
      {head + R"("stage_of":[0],"actions":[[],[]]})",
       "\"stage_of\""},
      {head + R"("stage_of":[0,5],"actions":[[],[]]})",
       "stage_of[1]"},
      {head + R"("stage_of":[0,1],"actions":[[]]})", "\"actions\""},
      {head + R"("stage_of":[0,1],"actions":[["0F0"],["1F0",7]]})",
       "actions[1][1]"},
      {head + R"("stage_of":[0,1],"actions":[["0F0"],["1Q0"]]})",
       "actions[1][0]"},
      {head + R"("stage_of":[0,1],"actions":[["0F0"],["1F3"]]})",
       "actions[1][0]"},
      {head + R"("stage_of":[0,1],"actions":[["1F0"],[]]})",
       "actions[0][0]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Schedule> got = ScheduleFromJson(c.json);
    ASSERT_FALSE(got.ok()) << c.json;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << c.json;
    EXPECT_THAT(got.status().message(), HasSubstr(c.field)) << c.json;
  }
}

// p = 2, m = 1, fused backward, with PyTorch's transfers where
// _add_send_recv puts them (torch/distributed/pipelining/schedules.py).
constexpr char kTwoRanksWithComms[] =
    "0UNSHARD,0F0,0SEND_F0,0RECV_B0,0B0,0REDUCE_GRAD,0RESHARD\n"
    "1UNSHARD,1RECV_F0,1F0,1B0,1SEND_B0,1REDUCE_GRAD,1RESHARD\n";

TEST(ScheduleIoPytorchCsv, ReadsTransfersAndIgnoresUnshardReshard) {
  absl::StatusOr<PytorchCsvImport> got =
      ScheduleFromPytorchCsv(kTwoRanksWithComms);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->communication_actions, 4);
  EXPECT_EQ(got->ignored_actions, 4);
  EXPECT_EQ(got->overlapped_actions, 0);
  EXPECT_EQ(got->schedule.stages, 2);
  EXPECT_EQ(got->schedule.chunks, 1);
  EXPECT_EQ(got->schedule.microbatches, 1);
  EXPECT_THAT(got->schedule.stage_of, ElementsAre(0, 1));
  EXPECT_EQ(ScheduleToCsv(got->schedule),
            "0F0,0B0,0REDUCE_GRAD\n1F0,1B0,1REDUCE_GRAD\n");
  absl::StatusOr<SimulationResult> sim = Simulate(
      Problem::Uniform(2, 1, 1, VirtualStageCost{}, 0), got->schedule);
  EXPECT_TRUE(sim.ok()) << sim.status();
}

TEST(ScheduleIoPytorchCsv, SplitsOverlapIntoItsActionsInOrder) {
  absl::StatusOr<PytorchCsvImport> got =
      ScheduleFromPytorchCsv("0F0,,(0F1;0B0)OVERLAP_F_B,0I1,0W1\n");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->overlapped_actions, 1);
  EXPECT_EQ(ScheduleToCsv(got->schedule), "0F0,0F1,0B0,0I1,0W1\n");
}

TEST(ScheduleIoPytorchCsv, InfersVPlacementFromTheRows) {
  absl::StatusOr<PytorchCsvImport> got = ScheduleFromPytorchCsv(
      "0F0,3F0,3I0,0I0,3W0,0W0\n1F0,2F0,2I0,1I0,2W0,1W0\n");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->schedule.chunks, 2);
  EXPECT_EQ(got->schedule.stage_of, PlaceVirtualStages(Placement::kV, 2, 2));
  absl::StatusOr<PytorchCsvImport> loop = ScheduleFromPytorchCsv(
      "0F0,2F0,2I0,0I0,2W0,0W0\n1F0,3F0,3I0,1I0,3W0,1W0\n");
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_EQ(loop->schedule.stage_of,
            PlaceVirtualStages(Placement::kLoop, 2, 2));
}

TEST(ScheduleIoPytorchCsv, RefusesTransfersThatDoNotMatchTheDependencies) {
  struct Case {
    std::string csv;
    std::string says;
  };
  const std::vector<Case> cases = {
      // The forward's send is missing.
      {"0F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
       "row 1 (stage 0), cell 1 (0F0): no 0SEND_F0 after it"},
      // The receive of the backward is missing.
      {"0F0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
       "row 1 (stage 0), cell 3 (0B0): no 0RECV_B0 before it"},
      // A send before the pass whose output it sends.
      {"0SEND_F0,0F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
       "row 1 (stage 0), cell 1 (0SEND_F0): before 0F0 (cell 2)"},
      // A receive after the pass it feeds.
      {"0F0,0SEND_F0,0B0,0RECV_B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
       "cell 4 (0RECV_B0): after 0B0 (cell 3)"},
      // The last virtual stage sends no forward output.
      {"0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1SEND_F0,1B0,1SEND_B0\n",
       "row 2 (stage 1), cell 3 (1SEND_F0): no matching dependency, virtual stage 1 "
       "is the last virtual stage"},
      // Two chunks of one stage hand over without a transfer.
      {"0F0,0SEND_F0,1F0,1B0,0B0\n", "virtual stage 1 is on the same stage"},
      // A transfer on the wrong row.
      {"0F0,0SEND_F0,1SEND_B0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
       "(1SEND_B0): virtual stage 1 is held by stage 1, not 0"},
      {"0F0,0SEND_F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
       "cell 3 (0SEND_F0): repeats row 1 (stage 0), cell 2"},
      {"0F0,0SEND_F,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
       "cell 2: bad action \"0SEND_F\": must end with the microbatch"},
      {"0F0,(0F1;0B0)OVERLAP,0B1\n", "(a;b)OVERLAP_F_B"},
      {"0F0,(0F1;0REDUCE_GRAD)OVERLAP_F_B,0B0,0B1\n", "compute actions only"},
      // A virtual stage on two rows, and rows of unequal size.
      {"0F0,1B0\n1F0,0B0\n", "virtual stage 1 is also in row 1 (stage 0)"},
      {"0F0,1F0,2F0,2B0,1B0,0B0\n3F0,3B0\n", "holds 3 virtual stage(s), not 2"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PytorchCsvImport> got = ScheduleFromPytorchCsv(c.csv);
    ASSERT_FALSE(got.ok()) << c.csv;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << c.csv;
    EXPECT_THAT(got.status().message(), HasSubstr(c.says)) << c.csv;
  }
}

TEST(ScheduleIoPytorchCsv, ReadsScheduleToCsvBack) {
  const Schedule want = TwoStages();
  absl::StatusOr<PytorchCsvImport> got =
      ScheduleFromPytorchCsv(ScheduleToCsv(want));
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameShape(got->schedule, want);
}

}  // namespace
}  // namespace zbpp::sched
