#ifndef ZBPP_TESTS_COORDINATOR_SQLITE_STORE_FIXTURE_H_
#define ZBPP_TESTS_COORDINATOR_SQLITE_STORE_FIXTURE_H_

// Shared by the SQLite store's tests (sqlite_store_test.cc,
// sqlite_store_file_test.cc): stores on a path, records of every kind, a
// store filled with a little of each, and comparisons of what it holds.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "coordinator/store/sqlite_store.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator::testing {

/// A message equal to `expected` (protobuf's MessageDifferencer).
MATCHER_P(EqualsProto, expected, "") {
  return ::google::protobuf::util::MessageDifferencer::Equals(arg, expected);
}

// A fresh, empty directory under the test temp dir, the same for every call
// within one test (of one process; --gtest_repeat runs it again in the same
// directory). mkdtemp makes it new: a name built from the test and the
// pid alone would find an earlier run's database once the pid is reused.
inline std::string TestDir() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test = absl::StrCat(info->test_suite_name(), "_", info->name());
  static std::string* last_test = new std::string;
  static std::string* last_dir = new std::string;
  if (*last_test != test) {
    std::string pattern =
        absl::StrCat(::testing::TempDir(), "/sqlite_store_", test, "_XXXXXX");
    const char* dir = ::mkdtemp(pattern.data());
    EXPECT_NE(dir, nullptr) << "mkdtemp " << pattern;
    *last_test = test;
    *last_dir = dir != nullptr ? dir : pattern;
  }
  return *last_dir;
}

inline std::unique_ptr<SqliteStore> Open(const std::string& path) {
  SqliteStore::Options options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

inline v1::Job MakeJob(const std::string& id, int64_t create_seconds) {
  v1::Job job;
  job.set_id(id);
  job.set_state(v1::JOB_STATE_PENDING);
  job.mutable_spec()->set_name(absl::StrCat("spec of ", id));
  job.mutable_create_time()->set_seconds(create_seconds);
  job.mutable_create_time()->set_nanos(250);
  job.set_last_checkpoint_step(-1);
  return job;
}

inline v1::ScheduleVersion MakeVersion(const std::string& job_id, int64_t version,
                                       int64_t effective_step) {
  v1::ScheduleVersion v;
  v.set_job_id(job_id);
  v.set_version(version);
  v.set_effective_step(effective_step);
  v1::Schedule* schedule = v.mutable_schedule();
  schedule->set_name("zb-h1");
  schedule->set_stages(2);
  schedule->set_chunks(1);
  schedule->set_microbatches(2);
  schedule->add_stage_of(0);
  schedule->add_stage_of(1);
  for (const char* action : {"0F0", "0F1", "0I0", "0I1", "0W0", "0W1"}) {
    schedule->add_stage_actions()->add_actions(action);
  }
  v.mutable_cost_model()->set_comm_seconds(0.001);
  v.mutable_cost_model()->add_virtual_stages()->set_f_seconds(0.5);
  v.mutable_predicted()->set_makespan_seconds(3.25);
  v.set_reason(version == 1 ? v1::SCHEDULE_CHANGE_REASON_INITIAL
                            : v1::SCHEDULE_CHANGE_REASON_RESOLVE);
  v.set_reason_detail("stage 1 1.5x slower than modeled");
  v.mutable_publish_time()->set_seconds(1'700'000'000 + version);
  return v;
}

inline v1::StepSummary MakeStep(int64_t step) {
  v1::StepSummary s;
  s.set_step(step);
  s.set_schedule_version(1);
  s.set_loss(2.5 - 0.01 * step);
  s.set_step_seconds(0.75);
  s.set_tokens_per_second(1e5);
  v1::StageStepStats* stage = s.add_stages();
  stage->set_stage(0);
  stage->set_worker_id("w-0");
  stage->set_f_seconds(0.01);
  return s;
}

inline v1::ValidationOutcome MakeOutcome(int64_t step) {
  v1::ValidationOutcome o;
  o.set_step(step);
  o.set_decision(step % 2 == 0 ? v1::VALIDATION_DECISION_COMMITTED
                               : v1::VALIDATION_DECISION_CLIPPED);
  o.set_mode(v1::VALIDATION_MODE_POST);
  o.set_global_grad_norm(1.5);
  o.set_clip_coefficient(step % 2 == 0 ? 1.0 : 0.66);
  if (step % 2 == 1) o.add_rolled_back_stages(1);
  return o;
}

inline v1::CostModel MakeCosts(double f_seconds) {
  v1::CostModel c;
  v1::VirtualStageCost* stage = c.add_virtual_stages();
  stage->set_f_seconds(f_seconds);
  stage->set_b_seconds(2 * f_seconds);
  stage->set_w_seconds(f_seconds);
  stage->set_m_b_bytes(1 << 20);
  c.set_comm_seconds(0.002);
  c.add_memory_limit_bytes(1e9);
  return c;
}

// Two StoredStates hold the same records in the same order.
inline void ExpectSameState(const StoredState& a, const StoredState& b) {
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_THAT(a.jobs[i], EqualsProto(b.jobs[i])) << "job " << i;
  }
  ASSERT_EQ(a.schedule_versions.size(), b.schedule_versions.size());
  for (size_t i = 0; i < a.schedule_versions.size(); ++i) {
    EXPECT_THAT(a.schedule_versions[i], EqualsProto(b.schedule_versions[i]))
        << "schedule version " << i;
  }
  ASSERT_EQ(a.checkpoints.size(), b.checkpoints.size());
  for (size_t i = 0; i < a.checkpoints.size(); ++i) {
    EXPECT_EQ(a.checkpoints[i].job_id, b.checkpoints[i].job_id);
    EXPECT_EQ(a.checkpoints[i].step, b.checkpoints[i].step);
    EXPECT_EQ(a.checkpoints[i].directory, b.checkpoints[i].directory);
    EXPECT_EQ(a.checkpoints[i].stages_written,
              b.checkpoints[i].stages_written);
    EXPECT_EQ(a.checkpoints[i].complete, b.checkpoints[i].complete);
  }
}

// Fills `store` with a little of everything, for two jobs.
inline void Populate(Store& store) {
  ASSERT_TRUE(store.CreateJob(MakeJob("job-b", 200)).ok());
  ASSERT_TRUE(store.CreateJob(MakeJob("job-a", 100)).ok());
  for (const char* id : {"job-a", "job-b"}) {
    ASSERT_TRUE(store.AddScheduleVersion(MakeVersion(id, 1, 0)).ok());
    ASSERT_TRUE(store.AddScheduleVersion(MakeVersion(id, 2, 10)).ok());
    for (int64_t step = 0; step < 3; ++step) {
      ASSERT_TRUE(store.PutStepSummary(id, MakeStep(step)).ok());
      ASSERT_TRUE(store.PutValidationOutcome(id, MakeOutcome(step)).ok());
    }
    ASSERT_TRUE(store.PutCostSnapshot(id, 5, MakeCosts(0.1)).ok());
    ASSERT_TRUE(store.PutCheckpoint({id, 2, "/ckpt/2", {1, 0}, true}).ok());
    ResolveRecord record;
    record.job_id = id;
    record.step = 9;
    record.published = true;
    record.version = 2;
    record.old_makespan_seconds = 4;
    record.new_makespan_seconds = 3;
    record.reason = "stage 1 slower";
    ASSERT_TRUE(store.AddResolveRecord(record).ok());
  }
  v1::Job running = MakeJob("job-a", 100);
  running.set_state(v1::JOB_STATE_RUNNING);
  running.set_steps_completed(3);
  ASSERT_TRUE(store.UpdateJob(running).ok());
}

inline StoredState LoadAllOrDie(Store& store) {
  absl::StatusOr<StoredState> state = store.LoadAll();
  EXPECT_TRUE(state.ok()) << state.status();
  return state.ok() ? *std::move(state) : StoredState();
}

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTS_COORDINATOR_SQLITE_STORE_FIXTURE_H_
