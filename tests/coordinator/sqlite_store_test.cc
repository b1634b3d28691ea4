// The SQLite store (coordinator/store/sqlite_store.h): every record kind
// round-trips, a step's records are replaced, LoadAll's order, and calls
// that fail change nothing and say what and where. Files, schemas, concurrency and the file under the store
// are sqlite_store_file_test.cc's.

#include "coordinator/store/sqlite_store.h"

#include <sqlite3.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/sqlite_store_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using testing::EqualsProto;
using testing::ExpectSameState;
using testing::LoadAllOrDie;
using testing::MakeCosts;
using testing::MakeJob;
using testing::MakeOutcome;
using testing::MakeStep;
using testing::MakeVersion;
using testing::Open;
using testing::Populate;
using testing::TestDir;

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
  ASSERT_TRUE(store->PutCostSnapshot("j", 20, MakeCosts(0.2)).ok());
  ASSERT_TRUE(store->PutCostSnapshot("j", 10, MakeCosts(0.1)).ok());
  ASSERT_TRUE(store->PutCostSnapshot("j", 30, v1::CostModel()).ok());
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
    ASSERT_TRUE(store->PutStepSummary("j", MakeStep(step)).ok());
  }
  ASSERT_TRUE(store->PutStepSummary("other", MakeStep(2)).ok());

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
  ASSERT_TRUE(store->PutValidationOutcome("j", skipped).ok());
  ASSERT_TRUE(store->PutValidationOutcome("j", MakeOutcome(0)).ok());
  auto outcomes = store->ListValidationOutcomes("j");
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  ASSERT_THAT(*outcomes, SizeIs(2));
  EXPECT_THAT((*outcomes)[0], EqualsProto(MakeOutcome(0)));
  EXPECT_EQ((*outcomes)[1].decision(), v1::VALIDATION_DECISION_SKIPPED);
  EXPECT_TRUE(std::isnan((*outcomes)[1].global_grad_norm()));
  EXPECT_TRUE((*outcomes)[1].found_inf_nan());
}

// A replayed step's summary, validation outcome and cost snapshot replace
// its first run's (store.h, "Replayed steps"): one record per step, the
// last one Put; other steps and jobs keep theirs.
TEST(SqliteStoreTest, PutReplacesTheRecordsOfAStep) {
  std::unique_ptr<SqliteStore> store = Open(":memory:");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(MakeJob("j", 1)).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("other", 1)).ok());
  for (const char* job : {"j", "other"}) {
    for (int64_t step : {0, 1}) {
      ASSERT_TRUE(store->PutStepSummary(job, MakeStep(step)).ok());
      ASSERT_TRUE(store->PutValidationOutcome(job, MakeOutcome(step)).ok());
      ASSERT_TRUE(store->PutCostSnapshot(job, step, MakeCosts(0.1)).ok());
    }
  }
  v1::StepSummary replayed = MakeStep(1);
  replayed.set_schedule_version(7);
  replayed.set_step_seconds(9.5);
  v1::ValidationOutcome skipped = MakeOutcome(1);  // Was CLIPPED.
  skipped.set_decision(v1::VALIDATION_DECISION_SKIPPED);
  skipped.set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
  skipped.set_clip_coefficient(0);
  skipped.clear_rolled_back_stages();
  ASSERT_TRUE(store->PutStepSummary("j", replayed).ok());
  ASSERT_TRUE(store->PutValidationOutcome("j", skipped).ok());
  ASSERT_TRUE(store->PutCostSnapshot("j", 1, MakeCosts(0.7)).ok());

  auto steps = store->ListStepSummaries("j", 0, 100);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_THAT(*steps, ElementsAre(EqualsProto(MakeStep(0)), EqualsProto(replayed)));
  auto outcomes = store->ListValidationOutcomes("j");
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_THAT(*outcomes, ElementsAre(EqualsProto(MakeOutcome(0)), EqualsProto(skipped)));
  auto costs = store->ListCostSnapshots("j");
  ASSERT_TRUE(costs.ok()) << costs.status();
  ASSERT_THAT(*costs, SizeIs(2));
  EXPECT_THAT((*costs)[0].second, EqualsProto(MakeCosts(0.1)));
  EXPECT_EQ((*costs)[1].first, 1);
  EXPECT_THAT((*costs)[1].second, EqualsProto(MakeCosts(0.7)));
  // The other job's step 1 is its own.
  auto other = store->ListStepSummaries("other", 0, 100);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(*other, ElementsAre(EqualsProto(MakeStep(0)), EqualsProto(MakeStep(1))));
  auto other_outcomes = store->ListValidationOutcomes("other");
  ASSERT_TRUE(other_outcomes.ok()) << other_outcomes.status();
  EXPECT_THAT(*other_outcomes,
              ElementsAre(EqualsProto(MakeOutcome(0)), EqualsProto(MakeOutcome(1))));
  auto other_costs = store->ListCostSnapshots("other");
  ASSERT_TRUE(other_costs.ok()) << other_costs.status();
  ASSERT_THAT(*other_costs, SizeIs(2));
  EXPECT_THAT((*other_costs)[1].second, EqualsProto(MakeCosts(0.1)));
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
  // What schema 1 held: the checkpoints table without data_parallel (and
  // nothing of schema 3's schedule files).
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "ALTER TABLE checkpoints DROP COLUMN data_parallel; "
                         "DROP INDEX jobs_by_schedule_file; "
                         "ALTER TABLE jobs DROP COLUMN schedule_file; "
                         "DROP TABLE schedule_files; "
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
      {"step of unknown job", store->PutStepSummary("nope", MakeStep(1)),
       absl::StatusCode::kNotFound},
      {"negative step", store->PutStepSummary("job-a", MakeStep(-1)),
       absl::StatusCode::kInvalidArgument},
      {"outcome of unknown job",
       store->PutValidationOutcome("nope", MakeOutcome(7)),
       absl::StatusCode::kNotFound},
      {"costs of unknown job", store->PutCostSnapshot("nope", 5, MakeCosts(9)),
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

  absl::Status missing = store->PutStepSummary("ghost", MakeStep(0));
  EXPECT_THAT(missing.message(), HasSubstr("\"ghost\""));
  absl::Status bad = store->AddScheduleVersion(MakeVersion("j", -3, 0));
  EXPECT_THAT(bad.message(), HasSubstr("schedule_version.version"));
}

}  // namespace
}  // namespace zbpp::coordinator
