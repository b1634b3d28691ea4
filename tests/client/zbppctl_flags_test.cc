// zbppctl's command-line parsing: every command, flag placement, defaults
// and each usage error.

#include "client/zbppctl_flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::ctl {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<CtlOptions> Parse(std::vector<std::string> args,
                                 const std::string& env = "") {
  return ParseCommandLine(args, env);
}

TEST(ZbppctlFlags, DefaultsApplyWithoutFlags) {
  absl::StatusOr<CtlOptions> options = Parse({"list"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->command, Command::kList);
  EXPECT_EQ(options->coordinator, "127.0.0.1:50051");
  EXPECT_EQ(options->timeout_seconds, 10.0);
  EXPECT_EQ(options->token_file, "");
  EXPECT_EQ(options->format, "table");
}

TEST(ZbppctlFlags, EnvironmentCoordinatorYieldsToTheFlag) {
  EXPECT_EQ(Parse({"list"}, "10.0.0.1:7")->coordinator, "10.0.0.1:7");
  EXPECT_EQ(Parse({"--coordinator", "h:1", "list"}, "10.0.0.1:7")->coordinator,
            "h:1");
}

TEST(ZbppctlFlags, GlobalFlagsGoBeforeOrAfterTheCommand) {
  absl::StatusOr<CtlOptions> options =
      Parse({"--coordinator=h:9", "status", "job-1", "--timeout", "2.5",
             "--token-file", "/t", "--format", "json"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->command, Command::kStatus);
  EXPECT_EQ(options->argument, "job-1");
  EXPECT_EQ(options->coordinator, "h:9");
  EXPECT_EQ(options->timeout_seconds, 2.5);
  EXPECT_EQ(options->token_file, "/t");
  EXPECT_EQ(options->format, "json");
}

TEST(ZbppctlFlags, EveryCommandParses) {
  const std::vector<std::pair<std::vector<std::string>, Command>> cases = {
      {{"submit", "job.yaml"}, Command::kSubmit},
      {{"list"}, Command::kList},
      {{"status", "j"}, Command::kStatus},
      {{"watch", "j"}, Command::kWatch},
      {{"cancel", "j"}, Command::kCancel},
      {{"schedule", "j", "--format", "chrome-trace"}, Command::kSchedule},
      {{"workers"}, Command::kWorkers},
      {{"--help"}, Command::kHelp},
      {{"help"}, Command::kHelp},
      {{"status", "-h"}, Command::kHelp},
  };
  for (const auto& [args, command] : cases) {
    absl::StatusOr<CtlOptions> options = Parse(args);
    ASSERT_TRUE(options.ok()) << args[0] << ": " << options.status();
    EXPECT_EQ(options->command, command) << args[0];
    if (command != Command::kHelp) {
      EXPECT_STREQ(CommandName(command), args[0].c_str());
    }
  }
}

TEST(ZbppctlFlags, UsageErrorsSayWhatIsWrong) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "missing command"},
      {{"frobnicate"}, "unknown command \"frobnicate\""},
      {{"status"}, "status needs a JOB"},
      {{"submit"}, "submit needs a FILE"},
      {{"list", "extra"}, "unexpected argument \"extra\" for list"},
      {{"status", "a", "b"}, "unexpected argument \"b\""},
      {{"list", "--verbose"}, "unknown flag --verbose"},
      {{"list", "--timeout"}, "flag --timeout needs a value"},
      {{"list", "--timeout", "0"}, "--timeout must be a number of seconds > 0"},
      {{"list", "--timeout", "soon"}, "got \"soon\""},
      {{"list", "--timeout=inf"}, "--timeout must be"},
      {{"list", "--coordinator", ""}, "--coordinator must not be empty"},
      {{"list", "--format", "json"}, "list takes no --format"},
      {{"status", "j", "--format", "svg"},
       "--format for status must be one of table, json, got \"svg\""},
      {{"schedule", "j", "--format", "png"}, "table, svg, chrome-trace"},
      {{"--timeout", "1", "--timeout", "2", "list"}, "repeated flag --timeout"},
      {{"status", "job-\xE9"}, "JOB: not valid UTF-8 (byte 0xE9 at offset 4)"},
      {{"status", "j", "--schedule-version", "2"}, "status takes no --schedule-version"},
      {{"schedule", "j", "--schedule-version", "0"},
       "--schedule-version must be a version number >= 1, got \"0\""},
      {{"costs", "j", "--schedule-version=v2"}, "got \"v2\""},
      {{"schedule", "j", "--format", "measured-trace", "--schedule-version", "2"},
       "--format measured-trace takes no --schedule-version"},
      {{"cancel", "\xC0\xAF"}, "JOB: not valid UTF-8 (byte 0xC0 at offset 0)"},
      {{"schedule", "j", "--step", "-2"}, "--step must be a step number >= 0, got \"-2\""},
      {{"costs", "j", "--step=last"}, "--step must be a step number >= 0, got \"last\""},
      {{"status", "j", "--step", "2"}, "status takes no --step"},
      {{"schedule", "j", "--step", "2", "--schedule-version", "3"},
       "--step and --schedule-version both pick a version"},
      {{"schedule", "j", "--format=measured-trace", "--step", "0"},
       "--format measured-trace takes no --step"},
  };
  for (const auto& [args, message] : cases) {
    absl::StatusOr<CtlOptions> options = Parse(args);
    ASSERT_FALSE(options.ok()) << message;
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(options.status().message()), HasSubstr(message));
  }
}

TEST(ZbppctlFlags, ScheduleVersionPicksAVersionOfScheduleAndCosts) {
  EXPECT_EQ(Parse({"schedule", "j"})->schedule_version, 0);
  absl::StatusOr<CtlOptions> options =
      Parse({"schedule", "j", "--schedule-version", "2", "--format", "svg"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->schedule_version, 2);
  EXPECT_EQ(options->format, "svg");
  options = Parse({"--schedule-version=7", "costs", "j"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->command, Command::kCosts);
  EXPECT_EQ(options->schedule_version, 7);
}

TEST(ZbppctlFlags, StepPicksTheVersionInForceForScheduleAndCosts) {
  EXPECT_FALSE(Parse({"schedule", "j"})->step.has_value());
  absl::StatusOr<CtlOptions> options = Parse({"schedule", "j", "--step", "0"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->step, 0);
  EXPECT_EQ(options->schedule_version, 0);
  options = Parse({"costs", "j", "--step=41"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->step, 41);
}

TEST(ZbppctlFlags, UsageNamesEveryCommand) {
  for (const char* command :
       {"submit", "list", "status", "watch", "cancel", "schedule", "workers"}) {
    EXPECT_THAT(UsageText(), HasSubstr(command));
  }
}

}  // namespace
}  // namespace zbpp::ctl
