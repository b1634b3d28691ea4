#include "coordinator/store/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

MATCHER_P(EqualsProto, expected, "") {
  return MessageDifferencer::Equals(arg, expected);
}

// A fresh directory under the test temp dir, unique per test.
std::string TestDir() {
  const testing::TestInfo* info =
      testing::UnitTest::GetInstance()->current_test_info();
  std::string dir =
      absl::StrCat(testing::TempDir(), "/sqlite_store_", info->test_suite_name(),
                   "_", info->name(), "_", ::getpid());
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::unique_ptr<SqliteStore> Open(const std::string& path) {
  SqliteStore::Options options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

// The error of opening `path`; OK when it opens.
absl::Status CreateStatus(const std::string& path) {
  SqliteStore::Options options;
  options.path = path;
  return SqliteStore::Create(options).status();
}

v1::Job MakeJob(const std::string& id, int64_t create_seconds) {
  v1::Job job;
  job.set_id(id);
  job.set_state(v1::JOB_STATE_PENDING);
  job.mutable_spec()->set_name(absl::StrCat("spec of ", id));
  job.mutable_create_time()->set_seconds(create_seconds);
  job.mutable_create_time()->set_nanos(250);
  job.set_last_checkpoint_step(-1);
  return job;
}

v1::ScheduleVersion MakeVersion(const std::string& job_id, int64_t version,
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

v1::StepSummary MakeStep(int64_t step) {
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

v1::ValidationOutcome MakeOutcome(int64_t step) {
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

v1::CostModel MakeCosts(double f_seconds) {
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
void ExpectSameState(const StoredState& a, const StoredState& b) {
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
void Populate(Store& store) {
  ASSERT_TRUE(store.CreateJob(MakeJob("job-b", 200)).ok());
  ASSERT_TRUE(store.CreateJob(MakeJob("job-a", 100)).ok());
  for (const char* id : {"job-a", "job-b"}) {
    ASSERT_TRUE(store.AddScheduleVersion(MakeVersion(id, 1, 0)).ok());
    ASSERT_TRUE(store.AddScheduleVersion(MakeVersion(id, 2, 10)).ok());
    for (int64_t step = 0; step < 3; ++step) {
      ASSERT_TRUE(store.AddStepSummary(id, MakeStep(step)).ok());
      ASSERT_TRUE(store.AddValidationOutcome(id, MakeOutcome(step)).ok());
    }
    ASSERT_TRUE(store.AddCostSnapshot(id, 5, MakeCosts(0.1)).ok());
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

StoredState LoadAllOrDie(Store& store) {
  absl::StatusOr<StoredState> state = store.LoadAll();
  EXPECT_TRUE(state.ok()) << state.status();
  return state.ok() ? *std::move(state) : StoredState();
}

// ---------------------------------------------------------------------------
// Round trips.

TEST(SqliteStoreTest, JobRoundTrip) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  v1::Job job = MakeJob("job-1", 42);
  job.mutable_spec()->mutable_pipeline()->set_stages(4);
  job.add_assignments()->set_worker_id("w-7");
  ASSERT_TRUE(store->CreateJob(job).ok());
  absl::StatusOr<v1::Job> got = store->GetJob("job-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, EqualsProto(job));

  job.set_state(v1::JOB_STATE_FAILED);
  job.set_state_message("worker w-7 lost");
  ASSERT_TRUE(store->UpdateJob(job).ok());
  got = store->GetJob("job-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, EqualsProto(job));
}

TEST(SqliteStoreTest, ScheduleVersionRoundTrip) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  v1::ScheduleVersion v2 = MakeVersion("j", 2, 8);
  v1::ScheduleVersion v1 = MakeVersion("j", 1, 0);
  ASSERT_TRUE(store->AddScheduleVersion(v2).ok());
  ASSERT_TRUE(store->AddScheduleVersion(v1).ok());
  StoredState state = LoadAllOrDie(*store);
  EXPECT_THAT(state.schedule_versions,
              ElementsAre(EqualsProto(v1), EqualsProto(v2)));
}

TEST(SqliteStoreTest, CostSnapshotRoundTrip) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  ASSERT_TRUE(store->AddCostSnapshot("j", 20, MakeCosts(0.2)).ok());
  ASSERT_TRUE(store->AddCostSnapshot("j", 10, MakeCosts(0.1)).ok());
  ASSERT_TRUE(store->AddCostSnapshot("j", 30, v1::CostModel()).ok());
  auto snapshots = store->ListCostSnapshots("j");
  ASSERT_TRUE(snapshots.ok()) << snapshots.status();
  ASSERT_THAT(*snapshots, SizeIs(3));
  EXPECT_EQ((*snapshots)[0].first, 10);
  EXPECT_THAT((*snapshots)[0].second, EqualsProto(MakeCosts(0.1)));
  EXPECT_EQ((*snapshots)[1].first, 20);
  EXPECT_THAT((*snapshots)[1].second, EqualsProto(MakeCosts(0.2)));
  EXPECT_EQ((*snapshots)[2].first, 30);  // An empty message: zero bytes.
  EXPECT_THAT((*snapshots)[2].second, EqualsProto(v1::CostModel()));
}

TEST(SqliteStoreTest, StepSummariesRoundTripAndPage) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("other", 1)).ok());
  for (int64_t step : {3, 0, 4, 1, 2}) {
    ASSERT_TRUE(store->AddStepSummary("j", MakeStep(step)).ok());
  }
  ASSERT_TRUE(store->AddStepSummary("other", MakeStep(2)).ok());

  auto all = store->ListStepSummaries("j", 0, 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_THAT(*all, SizeIs(5));
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_THAT((*all)[i], EqualsProto(MakeStep(i)));
  }
  auto page = store->ListStepSummaries("j", 2, 2);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, ElementsAre(EqualsProto(MakeStep(2)),
                                 EqualsProto(MakeStep(3))));
  auto none = store->ListStepSummaries("j", 2, 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());
  EXPECT_EQ(store->ListStepSummaries("j", 0, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SqliteStoreTest, ValidationOutcomesRoundTrip) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  v1::ValidationOutcome skipped = MakeOutcome(1);
  skipped.set_decision(v1::VALIDATION_DECISION_SKIPPED);
  skipped.set_found_inf_nan(true);
  skipped.set_global_grad_norm(std::nan(""));
  skipped.set_clip_coefficient(0);
  ASSERT_TRUE(store->AddValidationOutcome("j", skipped).ok());
  ASSERT_TRUE(store->AddValidationOutcome("j", MakeOutcome(0)).ok());
  auto outcomes = store->ListValidationOutcomes("j");
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  ASSERT_THAT(*outcomes, SizeIs(2));
  EXPECT_THAT((*outcomes)[0], EqualsProto(MakeOutcome(0)));
  EXPECT_EQ((*outcomes)[1].decision(), v1::VALIDATION_DECISION_SKIPPED);
  EXPECT_TRUE(std::isnan((*outcomes)[1].global_grad_norm()));
  EXPECT_TRUE((*outcomes)[1].found_inf_nan());
}

TEST(SqliteStoreTest, CheckpointRoundTripAndReplace) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  ASSERT_TRUE(store->PutCheckpoint({"j", 100, "/ckpt/100", {2}, false}).ok());
  ASSERT_TRUE(store->PutCheckpoint({"j", 50, "/ckpt/50", {}, false}).ok());
  // Replaces (j, 100); stages come back sorted and deduplicated.
  ASSERT_TRUE(
      store->PutCheckpoint({"j", 100, "/ckpt/100", {2, 0, 1, 2}, true}).ok());
  StoredState state = LoadAllOrDie(*store);
  ASSERT_THAT(state.checkpoints, SizeIs(2));
  EXPECT_EQ(state.checkpoints[0].step, 50);
  EXPECT_THAT(state.checkpoints[0].stages_written, IsEmpty());
  EXPECT_FALSE(state.checkpoints[0].complete);
  EXPECT_EQ(state.checkpoints[1].job_id, "j");
  EXPECT_EQ(state.checkpoints[1].step, 100);
  EXPECT_EQ(state.checkpoints[1].directory, "/ckpt/100");
  EXPECT_THAT(state.checkpoints[1].stages_written, ElementsAre(0, 1, 2));
  EXPECT_TRUE(state.checkpoints[1].complete);
}

TEST(SqliteStoreTest, CheckpointsKeepTheirDataParallelismAndAreFoundByDirectory) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(store->CreateJob(MakeJob(id, 1)).ok());
  CheckpointRecord record{"b", 9, "/ckpt/run/", {0, 1}, true};
  record.data_parallel = 4;
  ASSERT_TRUE(store->PutCheckpoint(record).ok());
  record.job_id = "a";
  record.directory = "/ckpt/run";
  record.data_parallel = 1;
  ASSERT_TRUE(store->PutCheckpoint(record).ok());
  // Incomplete, another step, another directory: not found.
  ASSERT_TRUE(store->PutCheckpoint({"c", 9, "/ckpt/run", {0}, false}).ok());
  ASSERT_TRUE(store->PutCheckpoint({"c", 8, "/ckpt/run", {0, 1}, true}).ok());
  ASSERT_TRUE(store->PutCheckpoint({"c", 10, "/ckpt/other", {0, 1}, true}).ok());

  absl::StatusOr<std::vector<CheckpointRecord>> found = store->ListCheckpointsAt("/ckpt/run", 9);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_THAT(*found, SizeIs(2));
  EXPECT_EQ((*found)[0].job_id, "a");
  EXPECT_EQ((*found)[0].data_parallel, 1);
  EXPECT_EQ((*found)[1].job_id, "b");
  EXPECT_EQ((*found)[1].data_parallel, 4);
  EXPECT_THAT((*found)[1].stages_written, ElementsAre(0, 1));
  EXPECT_THAT(*store->ListCheckpointsAt("/ckpt/run//", 9), SizeIs(2));
  EXPECT_THAT(*store->ListCheckpointsAt("/ckpt/ru", 9), IsEmpty());
  EXPECT_EQ(store->ListCheckpointsAt("/ckpt/run", -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  // LoadAll keeps it too: by (job, step), b's at 9 comes after a's.
  const std::vector<CheckpointRecord> all = LoadAllOrDie(*store).checkpoints;
  ASSERT_THAT(all, SizeIs(5));
  EXPECT_EQ(all[1].job_id, "b");
  EXPECT_EQ(all[1].data_parallel, 4);

  record.data_parallel = 0;
  const absl::Status bad = store->PutCheckpoint(record);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("checkpoint.data_parallel"));
}

TEST(SqliteStoreTest, SchemaOneCheckpointsMigrateAsOneReplica) {
  const std::string path = TestDir() + "/v1.db";
  {
    std::unique_ptr<SqliteStore> store = Open(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
    ASSERT_TRUE(store->PutCheckpoint({"j", 3, "/ckpt", {0}, true}).ok());
  }
  // What schema 1 held: the checkpoints table without data_parallel.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "ALTER TABLE checkpoints DROP COLUMN data_parallel; "
                         "UPDATE schema_version SET version = 1",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  std::unique_ptr<SqliteStore> store = Open(path);
  ASSERT_NE(store, nullptr);
  StoredState state = LoadAllOrDie(*store);
  ASSERT_THAT(state.checkpoints, SizeIs(1));
  EXPECT_EQ(state.checkpoints[0].data_parallel, 1);
  EXPECT_THAT(*store->ListCheckpointsAt("/ckpt", 3), SizeIs(1));
}

TEST(SqliteStoreTest, ResolveRecordsRoundTripInLoggedOrder) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  ResolveRecord first;
  first.job_id = "j";
  first.step = 20;
  first.published = false;
  first.old_makespan_seconds = 3.0;
  first.new_makespan_seconds = 2.99;
  first.solve_seconds = 0.004;
  first.reason = "gain 0.3% below threshold";
  ResolveRecord second = first;
  second.step = 20;  // Same step: order is the order logged.
  second.published = true;
  second.version = 2;
  second.new_makespan_seconds = std::nan("");
  second.reason = "published";
  ASSERT_TRUE(store->AddResolveRecord(first).ok());
  ASSERT_TRUE(store->AddResolveRecord(second).ok());
  auto records = store->ListResolveRecords("j");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_THAT(*records, SizeIs(2));
  const ResolveRecord& a = (*records)[0];
  EXPECT_EQ(a.job_id, "j");
  EXPECT_EQ(a.step, 20);
  EXPECT_FALSE(a.published);
  EXPECT_EQ(a.version, 0);
  EXPECT_EQ(a.old_makespan_seconds, 3.0);
  EXPECT_EQ(a.new_makespan_seconds, 2.99);
  EXPECT_EQ(a.solve_seconds, 0.004);
  EXPECT_EQ(a.reason, "gain 0.3% below threshold");
  const ResolveRecord& b = (*records)[1];
  EXPECT_TRUE(b.published);
  EXPECT_EQ(b.version, 2);
  EXPECT_TRUE(std::isnan(b.new_makespan_seconds));
  EXPECT_EQ(b.reason, "published");
}

TEST(SqliteStoreTest, LoadAllOrdersJobsByCreateTime) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("late", 300)).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("early", 100)).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("tie-first", 200)).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("tie-second", 200)).ok());
  StoredState state = LoadAllOrDie(*store);
  ASSERT_THAT(state.jobs, SizeIs(4));
  EXPECT_EQ(state.jobs[0].id(), "early");
  EXPECT_EQ(state.jobs[1].id(), "tie-first");
  EXPECT_EQ(state.jobs[2].id(), "tie-second");
  EXPECT_EQ(state.jobs[3].id(), "late");
}

TEST(SqliteStoreTest, EmptyStoreLoadsNothing) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  StoredState state = LoadAllOrDie(*store);
  EXPECT_THAT(state.jobs, IsEmpty());
  EXPECT_THAT(state.schedule_versions, IsEmpty());
  EXPECT_THAT(state.checkpoints, IsEmpty());
}

// ---------------------------------------------------------------------------
// Failed calls change nothing.

TEST(SqliteStoreTest, RejectedCallsLeaveStateUnchanged) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  Populate(*store);
  const StoredState before = LoadAllOrDie(*store);
  auto steps_before = store->ListStepSummaries("job-a", 0, 100);
  ASSERT_TRUE(steps_before.ok());

  struct Case {
    const char* name;
    absl::Status status;
    absl::StatusCode code;
  };
  v1::Job changed = MakeJob("job-a", 999);
  changed.set_state(v1::JOB_STATE_CANCELLED);
  ResolveRecord orphan_record;
  orphan_record.job_id = "nope";
  const Case cases[] = {
      {"duplicate job", store->CreateJob(changed),
       absl::StatusCode::kAlreadyExists},
      {"job without id", store->CreateJob(v1::Job()),
       absl::StatusCode::kInvalidArgument},
      {"update unknown job", store->UpdateJob(MakeJob("nope", 1)),
       absl::StatusCode::kNotFound},
      {"duplicate version",
       store->AddScheduleVersion(MakeVersion("job-a", 2, 99)),
       absl::StatusCode::kAlreadyExists},
      {"version of unknown job",
       store->AddScheduleVersion(MakeVersion("nope", 1, 0)),
       absl::StatusCode::kNotFound},
      {"version 0", store->AddScheduleVersion(MakeVersion("job-a", 0, 0)),
       absl::StatusCode::kInvalidArgument},
      {"duplicate step", store->AddStepSummary("job-a", MakeStep(1)),
       absl::StatusCode::kAlreadyExists},
      {"step of unknown job", store->AddStepSummary("nope", MakeStep(1)),
       absl::StatusCode::kNotFound},
      {"negative step", store->AddStepSummary("job-a", MakeStep(-1)),
       absl::StatusCode::kInvalidArgument},
      {"duplicate outcome",
       store->AddValidationOutcome("job-a", MakeOutcome(2)),
       absl::StatusCode::kAlreadyExists},
      {"outcome of unknown job",
       store->AddValidationOutcome("nope", MakeOutcome(7)),
       absl::StatusCode::kNotFound},
      {"duplicate cost snapshot",
       store->AddCostSnapshot("job-a", 5, MakeCosts(9)),
       absl::StatusCode::kAlreadyExists},
      {"costs of unknown job", store->AddCostSnapshot("nope", 5, MakeCosts(9)),
       absl::StatusCode::kNotFound},
      {"checkpoint of unknown job",
       store->PutCheckpoint({"nope", 1, "/x", {0}, true}),
       absl::StatusCode::kNotFound},
      {"checkpoint with negative stage",
       store->PutCheckpoint({"job-a", 2, "/x", {-1}, true}),
       absl::StatusCode::kInvalidArgument},
      {"re-solve of unknown job", store->AddResolveRecord(orphan_record),
       absl::StatusCode::kNotFound},
      {"get unknown job", store->GetJob("nope").status(),
       absl::StatusCode::kNotFound},
      {"list steps of unknown job",
       store->ListStepSummaries("nope", 0, 10).status(),
       absl::StatusCode::kNotFound},
      {"list outcomes of unknown job",
       store->ListValidationOutcomes("nope").status(),
       absl::StatusCode::kNotFound},
      {"list re-solves of unknown job",
       store->ListResolveRecords("nope").status(),
       absl::StatusCode::kNotFound},
      {"list costs of unknown job", store->ListCostSnapshots("nope").status(),
       absl::StatusCode::kNotFound},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.name << ": " << c.status;
    EXPECT_FALSE(c.status.message().empty()) << c.name;
  }

  ExpectSameState(LoadAllOrDie(*store), before);
  auto steps_after = store->ListStepSummaries("job-a", 0, 100);
  ASSERT_TRUE(steps_after.ok());
  ASSERT_EQ(steps_after->size(), steps_before->size());
  for (size_t i = 0; i < steps_after->size(); ++i) {
    EXPECT_THAT((*steps_after)[i], EqualsProto((*steps_before)[i]));
  }
  auto costs = store->ListCostSnapshots("job-a");
  ASSERT_TRUE(costs.ok());
  ASSERT_THAT(*costs, SizeIs(1));
  EXPECT_THAT((*costs)[0].second, EqualsProto(MakeCosts(0.1)));
}

TEST(SqliteStoreTest, ErrorsSayWhatAndWhere) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  ASSERT_TRUE(store->AddScheduleVersion(MakeVersion("j", 1, 0)).ok());
  absl::Status duplicate = store->AddScheduleVersion(MakeVersion("j", 1, 0));
  EXPECT_EQ(duplicate.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(duplicate.message(), HasSubstr("schedule version 1"));
  EXPECT_THAT(duplicate.message(), HasSubstr("\"j\""));
  EXPECT_THAT(duplicate.message(), HasSubstr("UNIQUE constraint failed"));
  EXPECT_THAT(duplicate.message(), HasSubstr(":memory:"));

  absl::Status missing = store->AddStepSummary("ghost", MakeStep(0));
  EXPECT_THAT(missing.message(), HasSubstr("\"ghost\""));
  absl::Status bad = store->AddScheduleVersion(MakeVersion("j", -3, 0));
  EXPECT_THAT(bad.message(), HasSubstr("schedule_version.version"));
}

// ---------------------------------------------------------------------------
// Files: restart, bad paths, schema versions.

TEST(SqliteStoreTest, RestartedCoordinatorRecoversEverything) {
  const std::string path = TestDir() + "/coordinator.db";
  StoredState before;
  std::vector<v1::StepSummary> steps_before;
  std::vector<ResolveRecord> resolves_before;
  {
    std::unique_ptr<SqliteStore> store = Open(path);
    ASSERT_NE(store, nullptr);
    Populate(*store);
    before = LoadAllOrDie(*store);
    steps_before = *store->ListStepSummaries("job-b", 0, 100);
    resolves_before = *store->ListResolveRecords("job-b");
  }  // The coordinator exits.
  std::unique_ptr<SqliteStore> store = Open(path);
  ASSERT_NE(store, nullptr);
  StoredState after = LoadAllOrDie(*store);
  ExpectSameState(after, before);
  ASSERT_THAT(after.jobs, SizeIs(2));
  EXPECT_EQ(after.jobs[0].id(), "job-a");
  EXPECT_EQ(after.jobs[0].state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(after.schedule_versions, SizeIs(4));
  EXPECT_THAT(after.checkpoints, SizeIs(2));

  auto steps_after = store->ListStepSummaries("job-b", 0, 100);
  ASSERT_TRUE(steps_after.ok());
  ASSERT_EQ(steps_after->size(), steps_before.size());
  for (size_t i = 0; i < steps_before.size(); ++i) {
    EXPECT_THAT((*steps_after)[i], EqualsProto(steps_before[i]));
  }
  auto resolves_after = store->ListResolveRecords("job-b");
  ASSERT_TRUE(resolves_after.ok());
  ASSERT_EQ(resolves_after->size(), resolves_before.size());
  EXPECT_EQ((*resolves_after)[0].reason, resolves_before[0].reason);
  auto outcomes = store->ListValidationOutcomes("job-b");
  ASSERT_TRUE(outcomes.ok());
  EXPECT_THAT(*outcomes, SizeIs(3));
  auto costs = store->ListCostSnapshots("job-b");
  ASSERT_TRUE(costs.ok());
  EXPECT_THAT(*costs, SizeIs(1));

  // Still writable after the restart, and the keys are still enforced.
  EXPECT_EQ(store->AddScheduleVersion(MakeVersion("job-a", 2, 10)).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(store->AddScheduleVersion(MakeVersion("job-a", 3, 20)).ok());
}

TEST(SqliteStoreTest, FileDatabaseUsesWal) {
  const std::string path = TestDir() + "/wal.db";
  std::unique_ptr<SqliteStore> store = Open(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  struct stat st;
  EXPECT_EQ(::stat((path + "-wal").c_str(), &st), 0)
      << "no write-ahead log beside " << path;
  EXPECT_EQ(store->path(), path);
}

TEST(SqliteStoreTest, MemoryDatabasesArePrivate) {
  std::unique_ptr<SqliteStore> a = Open(":memory:");
  std::unique_ptr<SqliteStore> b = Open(":memory:");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->CreateJob(MakeJob("j", 1)).ok());
  EXPECT_TRUE(a->GetJob("j").ok());
  EXPECT_EQ(b->GetJob("j").status().code(), absl::StatusCode::kNotFound);
}

TEST(SqliteStoreTest, MissingDirectoryNamesThePath) {
  const std::string path = TestDir() + "/no/such/dir/coordinator.db";
  absl::Status status = CreateStatus(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("unable to open"));
}

TEST(SqliteStoreTest, DirectoryAsPathNamesThePath) {
  const std::string path = TestDir();
  absl::Status status = CreateStatus(path);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(path));
}

TEST(SqliteStoreTest, CorruptFileNamesThePath) {
  const std::string path = TestDir() + "/corrupt.db";
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 512; ++i) out << "this is not a SQLite database\n";
  }
  absl::Status status = CreateStatus(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("not a database"));
}

TEST(SqliteStoreTest, BadOptionsAreInvalidArgument) {
  SqliteStore::Options options;
  options.path = "";
  EXPECT_EQ(SqliteStore::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.path = ":memory:";
  options.busy_timeout_milliseconds = -1;
  EXPECT_EQ(SqliteStore::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SqliteStoreTest, RefusesNewerSchema) {
  const std::string path = TestDir() + "/future.db";
  { ASSERT_NE(Open(path), nullptr); }
  // A later coordinator migrated this file past what this one knows.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE schema_version SET version = 99",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  absl::Status status = CreateStatus(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("99"));
}

TEST(SqliteStoreTest, CorruptRecordIsInternalNamingTheTable) {
  const std::string path = TestDir() + "/bad-row.db";
  {
    std::unique_ptr<SqliteStore> store = Open(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE jobs SET job = x'ffffffff'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  std::unique_ptr<SqliteStore> store = Open(path);
  ASSERT_NE(store, nullptr);
  absl::Status load = store->LoadAll().status();
  EXPECT_EQ(load.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(load.message(), HasSubstr(path));
  EXPECT_THAT(load.message(), HasSubstr("jobs"));
  EXPECT_THAT(load.message(), HasSubstr("zbpp.v1.Job"));
  absl::Status get = store->GetJob("j").status();
  EXPECT_EQ(get.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(get.message(), HasSubstr("\"j\""));
}

TEST(SqliteStoreTest, NewFileGetsTheCurrentSchemaVersion) {
  const std::string path = TestDir() + "/version.db";
  { ASSERT_NE(Open(path), nullptr); }
  { ASSERT_NE(Open(path), nullptr); }  // Reopening migrates nothing.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT version FROM schema_version", -1,
                               &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), SqliteStore::kSchemaVersion);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE);  // Exactly one row.
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// ---------------------------------------------------------------------------
// Concurrency.

TEST(SqliteStoreTest, ConcurrentWritersLoseNothing) {
  std::unique_ptr<SqliteStore> store = Open(TestDir() + "/concurrent.db");
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8;
  constexpr int kStepsPerThread = 50;
  std::atomic<int> outcomes_stored{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, &outcomes_stored, t] {
      const std::string id = absl::StrCat("job-", t);
      EXPECT_TRUE(store->CreateJob(MakeJob(id, t)).ok());
      for (int step = 0; step < kStepsPerThread; ++step) {
        EXPECT_TRUE(store->AddStepSummary(id, MakeStep(step)).ok());
        // Every thread also appends to job 0's history (once job 0
        // exists): all threads contend for the same rows' table and index.
        absl::Status s = store->AddValidationOutcome(
            "job-0", MakeOutcome(t * kStepsPerThread + step));
        EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kNotFound) << s;
        if (s.ok()) ++outcomes_stored;
      }
      EXPECT_TRUE(store->AddScheduleVersion(MakeVersion(id, 1, 0)).ok());
    });
  }
  for (std::thread& thread : threads) thread.join();

  StoredState state = LoadAllOrDie(*store);
  EXPECT_THAT(state.jobs, SizeIs(kThreads));
  EXPECT_THAT(state.schedule_versions, SizeIs(kThreads));
  for (int t = 0; t < kThreads; ++t) {
    auto steps = store->ListStepSummaries(absl::StrCat("job-", t), 0, 1000);
    ASSERT_TRUE(steps.ok()) << steps.status();
    EXPECT_THAT(*steps, SizeIs(kStepsPerThread)) << "job-" << t;
  }
  auto outcomes = store->ListValidationOutcomes("job-0");
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_EQ(static_cast<int>(outcomes->size()), outcomes_stored.load());
  EXPECT_GT(outcomes_stored.load(), 0);
}

TEST(SqliteStoreTest, TwoStoresOnOneFileSerializeTheirWrites) {
  // Two connections (as two coordinator processes would have) writing the
  // same file at once: BEGIN IMMEDIATE + the busy timeout order them.
  const std::string path = TestDir() + "/shared.db";
  SqliteStore::Options options;
  options.path = path;
  options.exclusive = false;
  auto a = SqliteStore::Create(options);
  auto b = SqliteStore::Create(options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*a)->CreateJob(MakeJob("j", 1)).ok());
  constexpr int kSteps = 100;
  auto writer = [](SqliteStore* store, int parity) {
    for (int step = parity; step < kSteps; step += 2) {
      absl::Status s = store->AddStepSummary("j", MakeStep(step));
      EXPECT_TRUE(s.ok()) << s;
    }
  };
  std::thread ta(writer, a->get(), 0);
  std::thread tb(writer, b->get(), 1);
  ta.join();
  tb.join();
  for (SqliteStore* store : {a->get(), b->get()}) {
    auto steps = store->ListStepSummaries("j", 0, 1000);
    ASSERT_TRUE(steps.ok()) << steps.status();
    ASSERT_THAT(*steps, SizeIs(kSteps));
    for (int i = 0; i < kSteps; ++i) EXPECT_EQ((*steps)[i].step(), i);
  }
}

// ---------------------------------------------------------------------------
// The file under the store: exclusive lock, no -shm, moved files.

bool Exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

TEST(SqliteStoreTest, ExclusiveFileStoreHasNoShmFileAndLocksOutOthers) {
  const std::string path = TestDir() + "/exclusive.db";
  std::unique_ptr<SqliteStore> store = Open(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  ASSERT_TRUE(store->AddStepSummary("j", MakeStep(0)).ok());
  EXPECT_TRUE(Exists(path + "-wal"));
  // The WAL index lives in heap memory: no -shm file to SIGBUS on.
  EXPECT_FALSE(Exists(path + "-shm"));
  SqliteStore::Options second;
  second.path = path;
  second.busy_timeout_milliseconds = 0;
  absl::Status status = SqliteStore::Create(second).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr(path));
}

TEST(SqliteStoreTest, ExclusiveStoreOfAProcessThatDiedReopensWithItsCommits) {
  const std::string path = TestDir() + "/killed.db";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A coordinator killed mid-run: commits in the WAL, the lock held, no
    // close (the OS drops the lock).
    SqliteStore::Options options;
    options.path = path;
    auto store = SqliteStore::Create(options);
    const bool ok = store.ok() && (*store)->CreateJob(MakeJob("j", 1)).ok() &&
                    (*store)->AddStepSummary("j", MakeStep(0)).ok();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::unique_ptr<SqliteStore> store = Open(path);
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(LoadAllOrDie(*store).jobs, SizeIs(1));
  EXPECT_THAT(*store->ListStepSummaries("j", 0, 10), SizeIs(1));
}

TEST(SqliteStoreTest, DeletedDatabaseFileFailsEveryCallNamingIt) {
  const std::string path = TestDir() + "/deleted.db";
  std::unique_ptr<SqliteStore> store = Open(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  ASSERT_EQ(::unlink(path.c_str()), 0);
  absl::Status write = store->AddStepSummary("j", MakeStep(0));
  EXPECT_EQ(write.code(), absl::StatusCode::kInternal) << write;
  EXPECT_THAT(write.message(), HasSubstr(path + " was deleted"));
  EXPECT_EQ(store->CreateJob(MakeJob("k", 2)).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(store->LoadAll().status().code(), absl::StatusCode::kInternal);
}

TEST(SqliteStoreTest, ReplacedWalFileFailsWritesNamingIt) {
  const std::string path = TestDir() + "/replaced.db";
  std::unique_ptr<SqliteStore> store = Open(path);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  const std::string other = TestDir() + "/other";
  { std::ofstream(other) << "not the WAL"; }
  ASSERT_EQ(::rename(other.c_str(), (path + "-wal").c_str()), 0);
  absl::Status write = store->AddStepSummary("j", MakeStep(0));
  EXPECT_EQ(write.code(), absl::StatusCode::kInternal) << write;
  EXPECT_THAT(write.message(), HasSubstr(path + "-wal was replaced"));
}

}  // namespace
}  // namespace zbpp::coordinator
