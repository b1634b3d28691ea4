// zbppctl costs JOB against the in-process fake coordinator, and the file it
// writes fed to zbpp-sched: the coordinator's prediction for its schedule
// under its cost model must be what zbpp-sched simulates from the exported
// schedule and cost file.

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "api/schedule_proto.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/cli/costs_file.h"
#include "scheduler/schedule_io.h"
#include "tests/client/fake_coordinator.h"
#include "testing/subprocess.h"
#include "tests/client/test_jobs.h"

namespace zbpp::ctltest {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "zbppctl_costs_" +
                           std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// RunningJob's ZB-V version (p=4, v=2, m=8) with costs that differ by
// virtual stage (stage 5 1.5x slower), a hop latency and memory limits, and
// the prediction recomputed for them.
v1::Job JobWithMeasuredCosts(const std::string& id) {
  v1::Job job = RunningJob(id);
  v1::ScheduleVersion& version = *job.mutable_schedule();
  v1::CostModel& costs = *version.mutable_cost_model();
  for (int s = 0; s < costs.virtual_stages_size(); ++s) {
    v1::VirtualStageCost& c = *costs.mutable_virtual_stages(s);
    const double slow = s == 5 ? 1.5 : 1.0;
    c.set_f_seconds(slow * (0.010 + 0.001 * s));
    c.set_b_seconds(slow * 0.012);
    c.set_w_seconds(slow * (0.006 + 0.0005 * s));
    c.set_m_b_bytes(1.0e9 + 1.0e7 * s);
    c.set_m_w_bytes(4.0e8);
  }
  costs.set_comm_seconds(0.0007);
  costs.clear_memory_limit_bytes();
  for (int w = 0; w < 4; ++w) costs.add_memory_limit_bytes(1.0e10);
  absl::StatusOr<TimedSchedule> timed = SimulatedVersion(version);
  if (!timed.ok()) std::abort();  // api/schedule_proto's tests cover it.
  *version.mutable_predicted() = PredictionToProto(timed->timing);
  return job;
}

class ZbppctlCosts : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = FakeCoordinator::Start();
    ASSERT_NE(fake_, nullptr);
    fake_->state().PutJob(JobWithMeasuredCosts("job-1"));
  }
  ProcessResult Zbppctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {ZBPPCTL_BINARY, "--coordinator",
                                     fake_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }

  std::unique_ptr<FakeCoordinator> fake_;
};

TEST_F(ZbppctlCosts, ExportsTheVersionsCostModelAsACostFile) {
  const ProcessResult result = Zbppctl({"costs", "job-1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, StartsWith("# job job-1, schedule version 2 (zb-v)"));
  absl::StatusOr<sched::cli::CostFile> file =
      sched::cli::ParseCostFile(result.out);
  ASSERT_TRUE(file.ok()) << file.status() << "\n" << result.out;
  const v1::Job job = JobWithMeasuredCosts("job-1");
  const v1::CostModel& want = job.schedule().cost_model();
  EXPECT_TRUE(file->per_virtual_stage);
  ASSERT_EQ(static_cast<int>(file->entries.size()), want.virtual_stages_size());
  for (int s = 0; s < want.virtual_stages_size(); ++s) {
    EXPECT_EQ(file->entries[s].f_seconds, want.virtual_stages(s).f_seconds()) << s;
    EXPECT_EQ(file->entries[s].b_seconds, want.virtual_stages(s).b_seconds()) << s;
    EXPECT_EQ(file->entries[s].w_seconds, want.virtual_stages(s).w_seconds()) << s;
    EXPECT_EQ(file->entries[s].m_b_bytes, want.virtual_stages(s).m_b_bytes()) << s;
    EXPECT_EQ(file->entries[s].m_w_bytes, want.virtual_stages(s).m_w_bytes()) << s;
  }
  EXPECT_EQ(file->comm_seconds, want.comm_seconds());
  EXPECT_EQ(file->memory_limit_bytes,
            std::vector<double>(want.memory_limit_bytes().begin(),
                                want.memory_limit_bytes().end()));
}

TEST_F(ZbppctlCosts, ZbppSchedSimulatesTheCoordinatorsPrediction) {
  const ProcessResult costs = Zbppctl({"costs", "job-1"});
  ASSERT_EQ(costs.exit_code, 0) << costs.err;
  const v1::ScheduleVersion version = JobWithMeasuredCosts("job-1").schedule();
  absl::StatusOr<sched::Schedule> schedule = ScheduleFromProto(version.schedule());
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  const std::string schedule_path =
      WriteFile("schedule.csv", sched::ScheduleToCsv(*schedule));
  const std::string costs_path = WriteFile("costs.yaml", costs.out);
  const ProcessResult sim =
      RunProcess({ZBPP_SCHED_BINARY, "simulate", "--import", schedule_path,
                  "--costs", costs_path, "--format", "json"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const nlohmann::json got = nlohmann::json::parse(sim.out);
  EXPECT_DOUBLE_EQ(got["makespan"].get<double>(),
                   version.predicted().makespan_seconds());
  EXPECT_DOUBLE_EQ(got["bubble_rate"].get<double>(),
                   version.predicted().bubble_rate());
  EXPECT_DOUBLE_EQ(got["step_seconds"].get<double>(),
                   version.predicted().step_seconds());
}

TEST_F(ZbppctlCosts, JobWithoutScheduleOrCostModelIsOneErrorLine) {
  v1::Job pending;
  pending.set_id("job-2");
  pending.set_state(v1::JOB_STATE_PENDING);
  fake_->state().PutJob(pending);
  v1::Job no_costs = RunningJob("job-3");
  no_costs.mutable_schedule()->clear_cost_model();
  fake_->state().PutJob(no_costs);
  for (const auto& [job, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"job-2", "no schedule yet (state PENDING)"},
           {"job-3", "schedule version 2 carries no cost model"},
           {"job-9", "NOT_FOUND"}}) {
    const ProcessResult result = Zbppctl({"costs", job});
    EXPECT_EQ(result.exit_code, 1) << job;
    EXPECT_EQ(result.out, "") << job;
    EXPECT_THAT(result.err, StartsWith("zbppctl: costs " + job)) << result.err;
    EXPECT_THAT(result.err, HasSubstr(says)) << job;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
        << result.err;
  }
}

}  // namespace
}  // namespace zbpp::ctltest
