// `promtool check metrics` (Debian package prometheus) must accept the
// coordinator's /metrics with no lint warning in every job state: no job, a
// running job with steps, a failed job removed. Skipped when promtool is not on
// the PATH.

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "metrics/coordinator_metrics.h"
#include "metrics/metrics_server.h"
#include "tests/metrics/exposition.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::metrics {
namespace {

// Full path of `promtool` on the PATH, or "" when there is none.
std::string FindPromtool() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/promtool");
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `promtool check metrics` on `exposition` (through a file on stdin).
PromtoolResult CheckMetrics(const std::string& promtool,
                            const std::string& exposition,
                            const std::string& name) {
  const std::string file = absl::StrCat(
      ::testing::TempDir(), "/zbpp_metrics_", ::getpid(), "_", name, ".prom");
  std::ofstream(file) << exposition;
  const std::string command =
      absl::StrCat("'", promtool, "' check metrics < '", file, "' 2>&1");
  PromtoolResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) {
    result.output.append(buffer, n);
  }
  const int status = ::pclose(pipe);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  std::remove(file.c_str());
  return result;
}

zbpp::v1::StepSummary Step(int64_t step, int stages) {
  zbpp::v1::StepSummary summary;
  summary.set_step(step);
  summary.set_schedule_version(1);
  summary.set_step_seconds(0.8 + 0.01 * step);
  summary.set_tokens_per_second(8192 / summary.step_seconds());
  summary.set_measured_bubble_rate(0.12);
  summary.set_predicted_bubble_rate(0.1);
  for (int stage = 0; stage < stages; ++stage) {
    zbpp::v1::StageStepStats* stats = summary.add_stages();
    stats->set_stage(stage);
    stats->set_worker_id(absl::StrCat("worker-", stage + 1));
    stats->set_measured_bubble_rate(0.1 + 0.01 * stage);
    stats->set_predicted_bubble_rate(0.1);
    stats->set_idle_seconds(0.08 + 0.001 * stage);
    stats->set_comm_seconds(0.01);
    stats->set_f_seconds(0.01);
    stats->set_b_seconds(0.012);
    stats->set_w_seconds(0.008);
    stats->set_peak_activation_bytes(1.5e6 + 1e5 * stage);
    stats->set_predicted_peak_activation_bytes(1.4e6);
    stats->mutable_breakdown()->set_compute_seconds(0.6);
    stats->mutable_breakdown()->set_input_wait_seconds(0.08);
    stats->mutable_breakdown()->set_grant_seconds(0.002);
  }
  return summary;
}

// Every per-stage family the coordinator exports, with the extra label a
// series of it carries (none: ""; the value that must exist).
struct StageFamily {
  const char* name;
  const char* label;
  const char* value;
};
constexpr StageFamily kStageFamilies[] = {
    {"zbpp_stage_measured_bubble_ratio", "", ""},
    {"zbpp_stage_predicted_bubble_ratio", "", ""},
    {"zbpp_stage_idle_seconds", "", ""},
    {"zbpp_stage_pass_seconds", "pass", "W"},
    {"zbpp_stage_reduce_seconds", "", ""},
    {"zbpp_stage_exposed_reduce_seconds", "", ""},
    {"zbpp_stage_peak_activation_bytes", "", ""},
    {"zbpp_stage_predicted_peak_activation_bytes", "", ""},
    {"zbpp_stage_breakdown_seconds", "part", "input_wait"},
};

TEST(PromtoolTest, ExpositionIsLintCleanInEveryJobState) {
  const std::string promtool = FindPromtool();
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not on the PATH (Debian package prometheus)";
  }

  auto registry = std::make_shared<prometheus::Registry>();
  CoordinatorMetrics::Options options;
  options.job_states = {"PENDING",   "ASSIGNING", "RUNNING", "RECOVERING",
                        "SUCCEEDED", "FAILED",    "CANCELLED"};
  options.worker_states = {"REGISTERED", "ASSIGNED", "LOST"};
  auto metrics = CoordinatorMetrics::Create(options, registry);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  auto server = MetricsServer::Create({}, registry);
  ASSERT_TRUE(server.ok()) << server.status();

  // Checks both what the registry serializes to and what a scrape returns
  // (the server's own serialization and headers).
  auto check = [&](const std::string& state) {
    SCOPED_TRACE(state);
    auto reply = testing::HttpGet((*server)->port(), MetricsServer::kPath);
    ASSERT_TRUE(reply.ok()) << reply.status();
    for (const auto& [source, text] :
         {std::pair<std::string, std::string>{"registry",
                                              testing::Serialize(*registry)},
          std::pair<std::string, std::string>{"scrape", reply->body}}) {
      const PromtoolResult result =
          CheckMetrics(promtool, text, absl::StrCat(state, "_", source));
      EXPECT_EQ(result.exit_code, 0)
          << source << ": promtool says:\n" << result.output << "\non:\n" << text;
      EXPECT_EQ(result.output, "")
          << source << ": promtool says:\n" << result.output << "\non:\n" << text;
    }
  };

  // 1. No job.
  check("no_job");

  // 2. A running job with steps, a re-solve, a rollback, a skipped step and
  //    RPCs.
  (*metrics)->SetJobs("RUNNING", 1);
  (*metrics)->SetWorkers("ASSIGNED", 4);
  for (int stage = 0; stage < 4; ++stage) {
    (*metrics)->SetPredicted("job-1", stage, 0.1);
  }
  (*metrics)->SetScheduleVersion("job-1", 1);
  for (int step = 0; step < 5; ++step) (*metrics)->RecordStep("job-1", Step(step, 4));
  (*metrics)->RecordResolve("job-1", true);
  (*metrics)->AddRollbacks("job-1");
  (*metrics)->AddSkippedSteps("job-1");
  (*metrics)->ObserveRpc("/zbpp.v1.WorkerService/ReportStep",
                         absl::StatusCode::kOk, 0.0004);
  (*metrics)->ObserveRpc("/zbpp.v1.JobService/GetJob",
                         absl::StatusCode::kNotFound, 0.0001);
  check("running");
  // Every stage of the running job has a series in every per-stage family
  // (a family not fed by RecordStep would be missing here).
  const std::string running = testing::Serialize(*registry);
  for (const StageFamily& family : kStageFamilies) {
    for (int stage = 0; stage < 4; ++stage) {
      std::map<std::string, std::string> labels = {{"job_id", "job-1"},
                                                   {"stage", std::to_string(stage)}};
      if (*family.label != '\0') labels[family.label] = family.value;
      EXPECT_TRUE(testing::FindSample(running, family.name, labels).has_value())
          << family.name << " has no series for stage " << stage;
    }
  }

  // 3. The job failed and its series were removed.
  (*metrics)->SetJobs("RUNNING", 0);
  (*metrics)->SetJobs("FAILED", 1);
  (*metrics)->SetWorkers("ASSIGNED", 0);
  (*metrics)->SetWorkers("LOST", 4);
  (*metrics)->RemoveJob("job-1");
  check("job_removed");
  EXPECT_EQ(testing::Serialize(*registry).find("job-1"), std::string::npos);
}

// The harness itself: a lint problem must show as exit 3 with output, so the
// test above cannot pass by not running promtool properly.
TEST(PromtoolTest, HarnessSeesLintProblems) {
  const std::string promtool = FindPromtool();
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not on the PATH (Debian package prometheus)";
  }
  const PromtoolResult result = CheckMetrics(
      promtool,
      "# HELP zbpp_bad_counter A counter without _total.\n"
      "# TYPE zbpp_bad_counter counter\n"
      "zbpp_bad_counter 1\n",
      "harness");
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("_total"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace zbpp::metrics
