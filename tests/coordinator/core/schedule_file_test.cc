#include "coordinator/core/schedule_file.h"

#include <memory>
#include <string>

#include "common/job_limits.h"
#include "coordinator/core/planning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/schedule_io.h"
#include "testing/fake_pipeline.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using zbpp::v1::JobSpec;

/// The coordinator tests' spec on 2 stages with 8 microbatches, running
/// schedule `name`.
JobSpec NamedSpec(const std::string& name) {
  return testing::TestSpec(/*stages=*/2, /*microbatches=*/8, name);
}

/// NamedSpec(name) whose schedule is given as `text`, in file "s".
JobSpec FileSpec(const std::string& name, const std::string& text) {
  JobSpec spec = NamedSpec(name);
  spec.mutable_schedule()->clear_name();
  spec.mutable_schedule()->set_file("s");
  spec.mutable_schedule()->set_file_text(text);
  return spec;
}

sched::Schedule Generated(const std::string& name) {
  return *sched::Generate(name, *InitialProblem(NamedSpec(name)));
}

TEST(ScheduleFile, JsonAndPytorchCsvOfAGeneratedScheduleAreAccepted) {
  const sched::Schedule zbv = Generated("zb-v");
  const JobSpec json = FileSpec("zb-v", sched::ScheduleToJson(zbv));
  EXPECT_TRUE(ValidateJobSpec(json).ok()) << ValidateJobSpec(json);
  // The file fixes chunks and placement: ZB-V's two chunks in a V.
  const absl::StatusOr<sched::Problem> problem = InitialProblem(json);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->chunks, 2);
  const absl::StatusOr<sched::Schedule> schedule =
      ScheduleFromFile(json, *problem);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_EQ(schedule->stage_of, zbv.stage_of);
  EXPECT_EQ(schedule->actions, zbv.actions);

  const JobSpec csv = FileSpec("zb-h1", sched::ScheduleToCsv(Generated("zb-h1")));
  EXPECT_TRUE(ValidateJobSpec(csv).ok()) << ValidateJobSpec(csv);
}

TEST(ScheduleFile, ItsFieldsGoTogetherAndExcludeAName) {
  const std::string text = sched::ScheduleToJson(Generated("1f1b"));
  JobSpec named = FileSpec("1f1b", text);
  named.mutable_schedule()->set_name("1f1b");
  EXPECT_THAT(ValidateJobSpec(named).message(), HasSubstr("schedule.name: must be empty"));
  JobSpec no_text = FileSpec("1f1b", "");
  EXPECT_THAT(ValidateJobSpec(no_text).message(), HasSubstr("schedule.file_text: required"));
  JobSpec no_file = FileSpec("1f1b", text);
  no_file.mutable_schedule()->clear_file();
  EXPECT_THAT(ValidateJobSpec(no_file).message(), HasSubstr("schedule.file: required"));
  JobSpec huge = FileSpec("1f1b", std::string(kMaxScheduleFileBytes + 1, ' '));
  EXPECT_THAT(ValidateJobSpec(huge).message(), HasSubstr("schedule.file_text: must be at most"));
}

TEST(ScheduleFile, ShapeMemoryAndCompletenessAreChecked) {
  const std::string text = sched::ScheduleToJson(Generated("gpipe"));
  JobSpec four_stages = FileSpec("gpipe", text);
  four_stages.mutable_pipeline()->set_stages(4);
  const absl::Status shape = ValidateJobSpec(four_stages);
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.message(), HasSubstr("pipeline.stages: 4 but schedule.file \"s\" has 2 workers"));

  JobSpec fewer = FileSpec("gpipe", text);
  fewer.mutable_pipeline()->set_microbatches(4);
  EXPECT_THAT(ValidateJobSpec(fewer).message(), HasSubstr("pipeline.microbatches: 4 but"));

  // GPipe holds all 8 microbatches' activations: over a 2 M_B limit.
  JobSpec tight = FileSpec("gpipe", text);
  tight.mutable_schedule()->set_memory_limit_m_b(2);
  const absl::Status memory = ValidateJobSpec(tight);
  EXPECT_EQ(memory.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(memory.message(), HasSubstr("schedule.memory_limit_m_b: schedule.file \"s\" peaks at"));

  sched::Schedule incomplete = Generated("gpipe");
  incomplete.actions[1].pop_back();
  const absl::Status missing =
      ValidateJobSpec(FileSpec("gpipe", sched::ScheduleToJson(incomplete)));
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), HasSubstr("schedule.file_text: schedule.file \"s\": "));

  const absl::Status garbage = ValidateJobSpec(FileSpec("gpipe", "0F0,zz"));
  EXPECT_THAT(garbage.message(), HasSubstr("schedule.file_text: schedule.file \"s\": "));
}

TEST(ScheduleFile, DataParallelReductionsArePlacedByTheCoordinator) {
  JobSpec spec = FileSpec("zb-1p", sched::ScheduleToJson(Generated("zb-1p")));
  spec.mutable_pipeline()->set_data_parallel(2);
  const absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  const absl::StatusOr<sched::Schedule> schedule = ScheduleFromFile(spec, *problem);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  int reductions = 0;
  for (const auto& actions : schedule->actions) {
    for (const sched::Action& action : actions) {
      reductions += sched::IsVirtualStageReduction(action) ? 1 : 0;
    }
  }
  EXPECT_EQ(reductions, problem->num_virtual_stages());
  // A file that already holds them is refused: the coordinator places them.
  const absl::Status twice =
      ValidateJobSpec(FileSpec("zb-1p", sched::ScheduleToJson(*schedule)));
  EXPECT_THAT(twice.message(), HasSubstr("holds REDUCE_GRAD"));
}

TEST(ScheduleFile, IsKeptUnlessAReSolveIsAsked) {
  const JobSpec named = NamedSpec("zb-1p");
  EXPECT_FALSE(ResolveDisabled(named));
  JobSpec file = FileSpec("zb-1p", sched::ScheduleToJson(Generated("zb-1p")));
  EXPECT_TRUE(ResolveDisabled(file));
  file.mutable_schedule()->mutable_resolve()->set_disabled(false);
  EXPECT_FALSE(ResolveDisabled(file));
  JobSpec named_off = named;
  named_off.mutable_schedule()->mutable_resolve()->set_disabled(true);
  EXPECT_TRUE(ResolveDisabled(named_off));
  EXPECT_EQ(FileResolver(Generated("zb-v")), "zb-v");
  EXPECT_EQ(FileResolver(Generated("zb-1p")), "zb-auto");
}

// One text per content, shared while a job holds it, gone with the last.
TEST(ScheduleFileTexts, OneTextPerContentWhileHeld) {
  ScheduleFileTexts texts;
  std::shared_ptr<const std::string> a = texts.Intern("h1", "text one");
  std::shared_ptr<const std::string> b = texts.Intern("h1", "text one");
  std::shared_ptr<const std::string> c = texts.Intern("h2", "text two");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(*c, "text two");
  EXPECT_EQ(texts.size(), 2u);
  a.reset();
  EXPECT_EQ(texts.size(), 2u) << "b still holds h1";
  b.reset();
  EXPECT_EQ(texts.size(), 1u);
  EXPECT_EQ(*texts.Intern("h1", "text one"), "text one");
  JobSpec spec;
  AttachScheduleFileText(c, spec);
  EXPECT_EQ(spec.schedule().file_text(), "text two");
  AttachScheduleFileText(nullptr, spec);
  EXPECT_EQ(spec.schedule().file_text(), "text two") << "null leaves the spec as it is";
}

}  // namespace
}  // namespace zbpp::coordinator
