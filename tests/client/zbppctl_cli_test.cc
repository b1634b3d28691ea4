// Runs the zbppctl binary as users and scripts do: usage errors and an
// unreachable coordinator without any server, then every command against an
// in-process fake coordinator (fake_coordinator.h).

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/fake_coordinator.h"
#include "testing/subprocess.h"
#include "tests/client/test_jobs.h"

namespace zbpp::ctltest {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

ProcessResult Zbppctl(const std::vector<std::string>& args,
                      const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {ZBPPCTL_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, env);
}

// Every error is exactly one line "zbppctl: ..." on stderr.
void ExpectOneErrorLine(const ProcessResult& result) {
  EXPECT_THAT(result.err, StartsWith("zbppctl: "));
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
      << result.err;
  EXPECT_THAT(result.err, EndsWith("\n"));
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

std::string WriteTempFile(const std::string& name, const std::string& text) {
  const std::string path =
      ::testing::TempDir() + name + "_" + std::to_string(getpid());
  std::ofstream(path) << text;
  return path;
}

// ---------------------------------------------------------- no server needed

TEST(ZbppctlCli, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {},
           {"launch"},
           {"list", "--bogus"},
           {"status"},
           {"--timeout", "-1", "list"},
           {"status", "j", "--format", "xml"}}) {
    const ProcessResult result = Zbppctl(args);
    EXPECT_EQ(result.exit_code, 2) << result.err;
    ExpectOneErrorLine(result);
    EXPECT_EQ(result.out, "");
  }
}

// A bad --schedule-version or --step is one line naming the flag, before
// any call.
TEST(ZbppctlCli, BadVersionOrStepNamesTheFlag) {
  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"schedule", "j", "--schedule-version", "0"}, "--schedule-version"},
           {{"schedule", "j", "--schedule-version=two"}, "--schedule-version"},
           {{"schedule", "j", "--step", "-1"}, "--step"},
           {{"costs", "j", "--step", "1.5"}, "--step"},
           {{"schedule", "j", "--step", "1", "--schedule-version", "2"}, "--step"},
           {{"schedule", "j", "--format", "measured-trace", "--step", "3"}, "--step"},
           {{"report", "j", "--step", "3"}, "--step"}}) {
    const ProcessResult result = Zbppctl(args);
    EXPECT_EQ(result.exit_code, 2) << result.err;
    ExpectOneErrorLine(result);
    EXPECT_THAT(result.err, HasSubstr(flag));
    EXPECT_EQ(result.out, "");
  }
}

TEST(ZbppctlCli, HelpPrintsUsage) {
  const ProcessResult result = Zbppctl({"--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, StartsWith("usage: zbppctl"));
  EXPECT_EQ(result.err, "");
}

TEST(ZbppctlCli, UnreachableCoordinatorIsOneLineExitOne) {
  const std::string address = absl::StrCat("127.0.0.1:", ClosedLocalPort());
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{
           {"list"},
           {"status", "job-1"},
           {"status", "job-1", "--format", "json"},
           {"watch", "job-1"},
           {"cancel", "job-1"},
           {"schedule", "job-1"},
           {"workers"}}) {
    std::vector<std::string> args = {"--coordinator", address, "--timeout",
                                     "5"};
    args.insert(args.end(), command.begin(), command.end());
    const ProcessResult result = Zbppctl(args);
    EXPECT_EQ(result.exit_code, 1) << command[0];
    ExpectOneErrorLine(result);
    EXPECT_THAT(result.err, StartsWith("zbppctl: cannot reach coordinator at " +
                                       address + ": "))
        << command[0];
    EXPECT_EQ(result.out, "");
  }
}

TEST(ZbppctlCli, CoordinatorComesFromTheEnvironment) {
  const std::string address = absl::StrCat("127.0.0.1:", ClosedLocalPort());
  const ProcessResult result =
      Zbppctl({"workers"}, {"ZBPP_COORDINATOR=" + address});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("cannot reach coordinator at " + address));
}

TEST(ZbppctlCli, MissingTokenFileIsAnError) {
  const ProcessResult result =
      Zbppctl({"--token-file", "/nonexistent/token", "list"});
  EXPECT_EQ(result.exit_code, 1);
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err,
              HasSubstr("cannot read token file /nonexistent/token"));
}

// ------------------------------------------------------ against a fake server

class ZbppctlFakeServer : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = FakeCoordinator::Start();
    ASSERT_NE(fake_, nullptr);
    fake_->state().PutJob(RunningJob("job-1"));
  }
  ProcessResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--coordinator", fake_->address()});
    return Zbppctl(args);
  }
  FakeState& state() { return fake_->state(); }

  std::unique_ptr<FakeCoordinator> fake_;
};

TEST_F(ZbppctlFakeServer, SubmitPrintsTheNewIdAlone) {
  const ProcessResult result =
      Run({"submit", ZBPP_EXAMPLES_DIR "/gpt-bible-cpu.yaml"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "sub-1\n");
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(state().GetJob("sub-1").spec().model().architecture(), "gpt");
  EXPECT_TRUE(state().last_call_had_deadline());
}

TEST_F(ZbppctlFakeServer, SubmitRefusedByTheServerNamesTheField) {
  const std::string path = WriteTempFile(
      "zero_microbatches.yaml", "pipeline: {stages: 2, microbatches: 0}\n");
  const ProcessResult result = Run({"submit", path});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "");
  ExpectOneErrorLine(result);
  EXPECT_EQ(result.err, "zbppctl: submit " + path +
                            ": INVALID_ARGUMENT: pipeline.microbatches must "
                            "be >= 1, got 0\n");
}

// An UNAVAILABLE the coordinator itself answers (its store is failing) is
// printed as it is, not as "cannot reach coordinator".
TEST_F(ZbppctlFakeServer, SubmitRefusedByTheStoreSaysWhy) {
  const std::string why =
      "storing job job-3: SQLite database /var/lib/zbpp.db: COMMIT: disk I/O "
      "error (disk I/O error)";
  state().FailSubmits(grpc::Status(grpc::StatusCode::UNAVAILABLE, why));
  const ProcessResult result =
      Run({"submit", ZBPP_EXAMPLES_DIR "/gpt-bible-cpu.yaml"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "");
  ExpectOneErrorLine(result);
  EXPECT_EQ(result.err, "zbppctl: " + why + "\n");
}

// schedule.file is read next to the spec and travels as schedule.file_text.
TEST_F(ZbppctlFakeServer, SubmitCarriesTheScheduleFile) {
  const std::string csv = "0F0,0F1,1B0\n1F0,0B0\n";
  const std::string schedule = WriteTempFile("mine.csv", csv);
  const std::string name = schedule.substr(schedule.rfind('/') + 1);
  const std::string path = WriteTempFile(
      "with_file.yaml", "pipeline: {stages: 2, microbatches: 2}\nschedule: "
                        "{file: " + name + "}\n");
  ASSERT_EQ(path.substr(0, path.rfind('/')),
            schedule.substr(0, schedule.rfind('/')));
  ProcessResult result = Run({"submit", path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(state().GetJob("sub-1").spec().schedule().file(), name);
  EXPECT_EQ(state().GetJob("sub-1").spec().schedule().file_text(), csv);

  const std::string missing = WriteTempFile(
      "missing_file.yaml", "schedule: {file: nowhere.csv}\n");
  result = Run({"submit", missing});
  EXPECT_EQ(result.exit_code, 1);
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err, HasSubstr("schedule.file: cannot read \""));
  EXPECT_EQ(state().GetJob("sub-2").id(), "") << "nothing was submitted";
}

TEST_F(ZbppctlFakeServer, SubmitOfBadYamlOrNoFileFailsBeforeTheServer) {
  const std::string path = WriteTempFile("bad.yaml", "model: [1,\n");
  ProcessResult result = Run({"submit", path});
  EXPECT_EQ(result.exit_code, 1);
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err, HasSubstr("INVALID_ARGUMENT: yaml: "));
  result = Run({"submit", "/nonexistent/job.yaml"});
  EXPECT_EQ(result.exit_code, 1);
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err, HasSubstr("cannot read /nonexistent/job.yaml"));
  EXPECT_EQ(state().GetJob("sub-1").id(), "") << "nothing was submitted";
}

// A Latin-1 name (or JOB) would reach the coordinator as a request protobuf
// cannot parse, refused as INTERNAL with an empty message; zbppctl names the
// field and the byte instead, and sends nothing.
TEST_F(ZbppctlFakeServer, TextThatIsNotUtf8IsNamedBeforeTheServer) {
  const std::string path = WriteTempFile(
      "latin1.yaml", "name: Andr\xE9\npipeline: {stages: 2, microbatches: 4}\n");
  ProcessResult result = Run({"submit", path});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "");
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err,
              HasSubstr("name: not valid UTF-8 (byte 0xE9 at offset 4)"));
  EXPECT_THAT(result.err, Not(HasSubstr("INTERNAL")));
  EXPECT_EQ(state().GetJob("sub-1").id(), "") << "nothing was submitted";

  result = Run({"status", "job-\xE9"});
  EXPECT_EQ(result.exit_code, 2);
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err,
              HasSubstr("JOB: not valid UTF-8 (byte 0xE9 at offset 4)"));
}

TEST_F(ZbppctlFakeServer, StatusJsonShowsTheJob) {
  const ProcessResult result = Run({"status", "job-1", "--format", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  const nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["id"], "job-1");
  EXPECT_EQ(json["state"], "JOB_STATE_RUNNING");
  EXPECT_EQ(json["step"], 50);
  EXPECT_EQ(json["schedule_version"], 2);
  EXPECT_DOUBLE_EQ(json["loss"].get<double>(), 2.5);
  ASSERT_EQ(json["stages"].size(), 4u);
  EXPECT_TRUE(json["stages"][2].contains("predicted_bubble_rate"));
  EXPECT_TRUE(state().last_call_had_deadline());
}

TEST_F(ZbppctlFakeServer, StatusTable) {
  const ProcessResult result = Run({"status", "job-1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("RUNNING"));
  EXPECT_THAT(result.out, HasSubstr("50/100"));
}

TEST_F(ZbppctlFakeServer, UnknownJobIsNotFound) {
  for (const std::string command : {"status", "cancel", "watch", "schedule"}) {
    const ProcessResult result = Run({command, "job-404"});
    EXPECT_EQ(result.exit_code, 1) << command;
    ExpectOneErrorLine(result);
    EXPECT_THAT(result.err,
                StartsWith("zbppctl: " + command + " job-404: NOT_FOUND: "));
    EXPECT_THAT(result.err, HasSubstr("job \"job-404\" not found"));
  }
}

TEST_F(ZbppctlFakeServer, ListShowsEveryJobNewestFirst) {
  v1::Job pending;
  pending.set_id("job-2");
  pending.set_state(v1::JOB_STATE_PENDING);
  state().PutJob(pending);
  const ProcessResult result = Run({"list"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 3u) << result.out;
  EXPECT_THAT(lines[0], StartsWith("ID"));
  EXPECT_THAT(lines[1], StartsWith("job-2"));
  EXPECT_THAT(lines[2], StartsWith("job-1"));
}

TEST_F(ZbppctlFakeServer, CancelThenCancelAgain) {
  ProcessResult result = Run({"cancel", "job-1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "job-1 CANCELLED\n");
  EXPECT_EQ(state().GetJob("job-1").state(), v1::JOB_STATE_CANCELLED);
  result = Run({"cancel", "job-1"});
  EXPECT_EQ(result.exit_code, 1);
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err, HasSubstr("FAILED_PRECONDITION"));
}

TEST_F(ZbppctlFakeServer, BearerTokenFromTheTokenFile) {
  state().RequireToken("tok-5f0c9e7a1b3d4c6e8f2a0b1c3d5e7f90");
  ProcessResult result = Run({"cancel", "job-1"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("UNAUTHENTICATED"));
  const std::string token = WriteTempFile("token", "tok-5f0c9e7a1b3d4c6e8f2a0b1c3d5e7f90\n");
  result = Run({"--token-file", token, "cancel", "job-1"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(state().last_authorization(), "Bearer tok-5f0c9e7a1b3d4c6e8f2a0b1c3d5e7f90");
}

TEST_F(ZbppctlFakeServer, WatchPrintsOneLinePerEventAndSucceeds) {
  state().ScriptWatch(
      "job-1", {StepEvent(50, 2.4), StepEvent(51, 2.3),
                StateEvent(v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED)});
  const ProcessResult result = Run({"watch", "job-1"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 4u) << result.out;
  EXPECT_EQ(lines[0],
            "snapshot job=job-1 state=RUNNING step=50/100 schedule_version=2");
  EXPECT_THAT(lines[1], StartsWith("step job=job-1 step=51/100 loss=2.4000 "));
  EXPECT_THAT(lines[2], StartsWith("step job=job-1 step=52/100 loss=2.3000 "));
  EXPECT_EQ(lines[3], "state job=job-1 state=SUCCEEDED previous=RUNNING");
}

TEST_F(ZbppctlFakeServer, WatchOnATerminalDrawsAProgressBar) {
  state().ScriptWatch(
      "job-1", {StepEvent(50, 2.4),
                StateEvent(v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED)});
  const ProcessResult result = RunInTerminal(
      {ZBPPCTL_BINARY, "--coordinator", fake_->address(), "watch", "job-1"});
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out,
              StartsWith("RUNNING [###############...............] 50/100"));
  EXPECT_THAT(result.out,
              HasSubstr("\r\x1b[KRUNNING [###############...............] "
                        "51/100  loss 2.4000  1234 tok/s  bubble 12.5%"));
  EXPECT_THAT(result.out,
              HasSubstr("state job=job-1 state=SUCCEEDED previous=RUNNING\r\n"
                        "SUCCEEDED ["));
  EXPECT_THAT(result.out, Not(HasSubstr("snapshot job=")));
}

TEST_F(ZbppctlFakeServer, WatchExitCodeFollowsTheFinalState) {
  state().ScriptWatch("job-1",
                      {StateEvent(v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED,
                                  "worker w-3 lost")});
  ProcessResult result = Run({"watch", "job-1"});
  EXPECT_EQ(result.exit_code, 3);
  ExpectOneErrorLine(result);
  EXPECT_EQ(result.err, "zbppctl: job job-1 FAILED: worker w-3 lost\n");

  state().ScriptWatch(
      "job-1", {StateEvent(v1::JOB_STATE_RUNNING, v1::JOB_STATE_CANCELLED)});
  result = Run({"watch", "job-1"});
  EXPECT_EQ(result.exit_code, 4);
  ExpectOneErrorLine(result);

  // A stream that ends while the job still runs is an error too.
  state().ScriptWatch("job-1", {StepEvent(50, 2.0)});
  result = Run({"watch", "job-1"});
  EXPECT_EQ(result.exit_code, 1);
  ExpectOneErrorLine(result);
}

TEST_F(ZbppctlFakeServer, ScheduleInEveryFormat) {
  ProcessResult result = Run({"schedule", "job-1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("stage 3: "));
  result = Run({"schedule", "job-1", "--format", "svg"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("<svg"));
  result = Run({"schedule", "job-1", "--format", "chrome-trace"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NO_THROW(nlohmann::json::parse(result.out));

  v1::Job pending;
  pending.set_id("job-2");
  pending.set_state(v1::JOB_STATE_PENDING);
  state().PutJob(pending);
  result = Run({"schedule", "job-2"});
  EXPECT_EQ(result.exit_code, 1);
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err, HasSubstr("no schedule yet (state PENDING)"));
}

// A job whose latest version was published after its last step (a
// re-solve came out while the last step ran): schedule shows, and the
// measured trace draws, the version that ran that step; --schedule-version
// reads any version.
TEST_F(ZbppctlFakeServer, ScheduleShowsTheVersionThatRanTheLastStep) {
  const v1::ScheduleVersion ran = ZbVScheduleVersion("job-3");  // Version 2.
  v1::Job job = RunningJob("job-3");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.set_steps_completed(100);
  job.mutable_last_step()->set_step(99);
  v1::ScheduleVersion later = ran;
  later.set_version(3);
  later.set_effective_step(100);
  job.set_schedule_version(3);
  *job.mutable_schedule() = later;
  v1::StepTimeline* timeline = job.mutable_last_step_timeline();
  timeline->set_step(99);
  timeline->set_schedule_version(2);
  for (const v1::StageActions& worker : ran.schedule().stage_actions()) {
    v1::StageTimeline* rank = timeline->add_stages();
    for (int i = 0; i < worker.actions_size(); ++i) {
      rank->add_action_start_seconds(0.01 * i);
      rank->add_action_end_seconds(0.01 * i + 0.009);
    }
  }
  state().PutJob(job);
  state().PutVersion(ran);

  ProcessResult result = Run({"schedule", "job-3"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, StartsWith("job job-3 schedule v2 from step 40 "));
  result = Run({"schedule", "job-3", "--format", "measured-trace"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NO_THROW(nlohmann::json::parse(result.out));
  EXPECT_THAT(result.out, HasSubstr("step 99 (measured)"));

  result = Run({"schedule", "job-3", "--schedule-version", "3"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, StartsWith("job job-3 schedule v3 from step 100 "));
  result = Run({"costs", "job-3", "--schedule-version", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, StartsWith("# job job-3, schedule version 2 "));
  result = Run({"schedule", "job-3", "--schedule-version", "9"});
  EXPECT_EQ(result.exit_code, 1);
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err, HasSubstr("NOT_FOUND: version: job job-3 has no schedule version 9"));
}

// Versions 1 (INITIAL) and 2 (CALIBRATION) share effective step 0, so 2
// ran steps 0 to 39; 3 (RESOLVE) ran 40 to 99; 4 came out after the last
// step. --step picks the version in force, the later of those sharing a
// step; the report names the versions that ran the first and the last step
// with their predictions, whatever the job published after.
TEST_F(ZbppctlFakeServer, VersionsSharingAnEffectiveStepAndOneAfterTheLastStep) {
  std::vector<v1::ScheduleVersion> versions;
  const std::pair<v1::ScheduleChangeReason, int64_t> published[] = {
      {v1::SCHEDULE_CHANGE_REASON_INITIAL, 0},
      {v1::SCHEDULE_CHANGE_REASON_CALIBRATION, 0},
      {v1::SCHEDULE_CHANGE_REASON_RESOLVE, 40},
      {v1::SCHEDULE_CHANGE_REASON_RESOLVE, 100}};
  for (const auto& [reason, effective_step] : published) {
    v1::ScheduleVersion version = ZbVScheduleVersion("job-4");
    version.set_version(static_cast<int64_t>(versions.size()) + 1);
    version.set_effective_step(effective_step);
    version.set_reason(reason);
    version.clear_reason_detail();
    version.mutable_predicted()->set_step_seconds(0.1 * version.version());
    versions.push_back(version);
    state().PutVersion(version);
  }
  v1::Job job = RunningJob("job-4");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.set_steps_completed(100);
  job.set_schedule_version(4);
  *job.mutable_schedule() = versions[3];
  v1::StepTimeline* timeline = job.mutable_last_step_timeline();
  timeline->set_step(99);
  timeline->set_schedule_version(3);
  for (const v1::StageActions& stage : versions[2].schedule().stage_actions()) {
    v1::StageTimeline* measured = timeline->add_stages();
    for (int i = 0; i < stage.actions_size(); ++i) {
      measured->add_action_start_seconds(0.01 * i);
      measured->add_action_end_seconds(0.01 * i + 0.009);
    }
  }
  state().PutJob(job);
  std::vector<v1::StepSummary> steps;
  for (int i = 0; i < 100; ++i) {
    v1::StepSummary step;
    step.set_step(i);
    step.set_schedule_version(i < 40 ? 2 : 3);
    step.set_step_seconds(0.45);
    step.mutable_complete_time()->set_seconds(1000 + i);
    steps.push_back(step);
  }
  state().PutSteps("job-4", steps);

  for (const auto& [step, version] : std::vector<std::pair<std::string, std::string>>{
           {"0", "v2 from step 0 (CALIBRATION)"},
           {"39", "v2 from step 0 (CALIBRATION)"},
           {"40", "v3 from step 40 (RESOLVE)"},
           {"99", "v3 from step 40 (RESOLVE)"}}) {
    const ProcessResult result = Run({"schedule", "job-4", "--step", step});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_THAT(result.out, StartsWith("job job-4 schedule " + version + "\n")) << step;
  }
  ProcessResult result = Run({"schedule", "job-4", "--step", "0", "--format", "svg"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("v2 (CALIBRATION, from step 0) as planned: p=4"));
  result = Run({"costs", "job-4", "--step", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, StartsWith("# job job-4, schedule version 2 "));
  result = Run({"schedule", "job-4", "--step", "100"});
  EXPECT_EQ(result.exit_code, 1);
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err, HasSubstr("--step: job job-4 runs steps 0 to 99, got 100"));

  result = Run({"schedule", "job-4", "--format", "measured-trace"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("zb-v v3 step 99 (measured)"));
  result = Run({"report", "job-4"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out,
              HasSubstr("\nfirst step:   step 0 ran v2 (CALIBRATION, from step 0): predicted "
                        "step 0.2000 s"));
  EXPECT_THAT(result.out,
              HasSubstr("\nlast step:    step 99 ran v3 (RESOLVE, from step 40): predicted "
                        "step 0.3000 s"));
  EXPECT_THAT(result.out, HasSubstr("; measured 0.4500 s (median of its 60 steps in the "
                                    "window), 1.500x the prediction\n"));
  result = Run({"report", "job-4", "--format", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["first_step_version"]["version"], 2);
  EXPECT_EQ(json["last_step_version"]["version"], 3);

  // A version the coordinator no longer holds is left out, not an error.
  steps.front().set_schedule_version(7);
  state().PutSteps("job-4", steps);
  result = Run({"report", "job-4"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, Not(HasSubstr("first step:")));
  EXPECT_THAT(result.out, HasSubstr("\nlast step:    step 99 ran v3 "));
}

TEST_F(ZbppctlFakeServer, Workers) {
  v1::Worker worker;
  worker.set_worker_id("w-0");
  worker.mutable_description()->set_host("node-a");
  worker.set_state(v1::WORKER_STATE_IDLE);
  state().SetWorkers({worker});
  const ProcessResult result = Run({"workers"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1], StartsWith("w-0  -     node-a"));
}

// More workers than one ListWorkers page: zbppctl follows next_page_token
// and lists every worker once, in the server's order.
TEST_F(ZbppctlFakeServer, WorkersFetchesEveryPage) {
  std::vector<v1::Worker> workers;
  for (int i = 1; i <= 7; ++i) {
    v1::Worker worker;
    worker.set_worker_id(absl::StrCat("worker-", i));
    worker.mutable_description()->set_host("node-a");
    worker.set_state(v1::WORKER_STATE_IDLE);
    workers.push_back(worker);
  }
  state().SetWorkers(workers);
  state().SetWorkersPageLimit(3);
  const ProcessResult result = Run({"workers"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 8u) << result.out;
  for (int i = 1; i <= 7; ++i) {
    EXPECT_THAT(lines[i], StartsWith(absl::StrCat("worker-", i, " ")));
  }
}

}  // namespace
}  // namespace zbpp::ctltest
