// zbppctl report's activation memory (client/zbppctl_memory.h): each
// stage's measured peak next to the simulator's, in the table and the JSON,
// and the stage held most beyond its prediction named.

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/zbppctl_json.h"
#include "client/zbppctl_memory.h"
#include "client/zbppctl_report.h"
#include "nlohmann/json.hpp"
#include "tests/client/test_jobs.h"

namespace zbpp::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kMiB = 1024 * 1024;

using ctltest::TwoStageJob;

// 20 steps, a step every 0.5 s. Stage s is predicted to peak at (8 + 2s)
// MiB; stage 0 measures 8 MiB, stage 1 `stage1_mib` MiB on step 10 and
// 9 MiB on the others. Step 0 (warm-up, outside the report's window)
// measures 100 MiB on both.
std::vector<v1::StepSummary> Steps(double stage1_mib) {
  std::vector<v1::StepSummary> steps;
  for (int i = 0; i < 20; ++i) {
    v1::StepSummary s;
    s.set_step(i);
    s.set_loss(3);
    s.set_step_seconds(0.4);
    s.mutable_complete_time()->set_seconds(10 + i / 2);
    s.mutable_complete_time()->set_nanos(i % 2 ? 500000000 : 0);
    for (int r = 0; r < 2; ++r) {
      v1::StageStepStats* st = s.add_stages();
      st->set_stage(r);
      const double mib = i == 0 ? 100 : r == 0 ? 8 : i == 10 ? stage1_mib : 9;
      st->set_peak_activation_bytes(mib * kMiB);
      st->set_predicted_peak_activation_bytes((8 + 2 * r) * kMiB);
    }
    steps.push_back(s);
  }
  return steps;
}

TEST(ReportMemory, NamesTheStageHeldMostBeyondItsPrediction) {
  const TrainingReport r = *BuildReport(TwoStageJob(), Steps(14));
  const ActivationMemory& m = r.activation_memory;
  EXPECT_TRUE(m.measured);
  // The window's largest, not step 0's warm-up 100 MiB.
  EXPECT_DOUBLE_EQ(m.peak_bytes[0], 8 * kMiB);
  EXPECT_DOUBLE_EQ(m.peak_bytes[1], 14 * kMiB);
  EXPECT_DOUBLE_EQ(m.predicted_peak_bytes[1], 10 * kMiB);
  EXPECT_DOUBLE_EQ(*m.ratio[0], 1.0);
  EXPECT_DOUBLE_EQ(*m.ratio[1], 1.4);
  EXPECT_EQ(m.over_prediction_stage, 1);

  const std::string table = ReportTable(r);
  EXPECT_THAT(table, HasSubstr("STAGE  MEASURED_MIB  PREDICTED_MIB  RATIO\n"
                               "0      8.00          8.00           1.00\n"
                               "1      14.00         10.00          1.40\n"));
  EXPECT_THAT(table, HasSubstr("memory: stage 1 held 1.40x its predicted activation memory "
                               "(14.00 MiB measured, 10.00 MiB predicted)\n"));

  const nlohmann::json json = nlohmann::json::parse(ReportJson(r))["activation_memory"];
  EXPECT_EQ(json["measured"], true);
  ASSERT_EQ(json["stages"].size(), 2u);
  EXPECT_DOUBLE_EQ(json["stages"][1]["peak_mib"].get<double>(), 14);
  EXPECT_DOUBLE_EQ(json["stages"][1]["predicted_peak_mib"].get<double>(), 10);
  EXPECT_DOUBLE_EQ(json["stages"][1]["peak_bytes"].get<double>(), 14 * kMiB);
  EXPECT_DOUBLE_EQ(json["stages"][1]["ratio"].get<double>(), 1.4);
  EXPECT_EQ(json["over_prediction"]["stage"], 1);
  EXPECT_DOUBLE_EQ(json["over_prediction"]["ratio"].get<double>(), 1.4);
}

TEST(ReportMemory, WithinTheMarginNoStageIsNamed) {
  // 10.9 MiB against 10: 1.09x, under the 1.1x margin.
  const TrainingReport r = *BuildReport(TwoStageJob(), Steps(10.9));
  EXPECT_FALSE(r.activation_memory.over_prediction_stage.has_value());
  const std::string table = ReportTable(r);
  EXPECT_THAT(table, HasSubstr("memory: every measured stage within 1.1x of its predicted "
                               "activation memory\n"));
  EXPECT_THAT(table, Not(HasSubstr(" held ")));
  EXPECT_TRUE(nlohmann::json::parse(ReportJson(r))["activation_memory"]["over_prediction"]
                  .is_null());
}

// A re-solve may change the prediction between steps: the ratio compares a
// step's measurement with that step's prediction.
TEST(ReportMemory, TheLargestStepIsComparedWithItsOwnPrediction) {
  std::vector<v1::StepSummary> steps = Steps(14);
  for (size_t i = 10; i < steps.size(); ++i) {
    steps[i].mutable_stages(1)->set_predicted_peak_activation_bytes(13 * kMiB);
  }
  const ActivationMemory m = BuildReport(TwoStageJob(), steps)->activation_memory;
  EXPECT_DOUBLE_EQ(m.predicted_peak_bytes[1], 13 * kMiB);
  EXPECT_FALSE(m.over_prediction_stage.has_value()) << *m.ratio[1];
}

TEST(ReportMemory, UnmeasuredStagesShowOnlyThePrediction) {
  std::vector<v1::StepSummary> steps = Steps(14);
  for (v1::StepSummary& s : steps) {
    for (v1::StageStepStats& st : *s.mutable_stages()) st.clear_peak_activation_bytes();
  }
  const TrainingReport r = *BuildReport(TwoStageJob(), steps);
  EXPECT_FALSE(r.activation_memory.measured);
  const std::string table = ReportTable(r);
  EXPECT_THAT(table, HasSubstr("1      -             10.00          -\n"));
  EXPECT_THAT(table, HasSubstr("memory: the workers did not measure their activation memory\n"));
  const nlohmann::json json = nlohmann::json::parse(ReportJson(r))["activation_memory"];
  EXPECT_EQ(json["measured"], false);
  EXPECT_TRUE(json["stages"][1]["peak_bytes"].is_null());
  EXPECT_TRUE(json["stages"][1]["ratio"].is_null());
  EXPECT_DOUBLE_EQ(json["stages"][1]["predicted_peak_bytes"].get<double>(), 10 * kMiB);

  // A coordinator that predates both: no memory section at all.
  for (v1::StepSummary& s : steps) {
    for (v1::StageStepStats& st : *s.mutable_stages()) st.clear_predicted_peak_activation_bytes();
  }
  const TrainingReport old = *BuildReport(TwoStageJob(), steps);
  EXPECT_THAT(ReportTable(old), Not(HasSubstr("activation memory")));
  EXPECT_THAT(ReportTable(old), Not(HasSubstr("memory:")));
  EXPECT_TRUE(nlohmann::json::parse(ReportJson(old))["activation_memory"].is_null());
}

}  // namespace
}  // namespace zbpp::ctl
