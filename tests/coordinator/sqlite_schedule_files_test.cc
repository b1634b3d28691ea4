// SqliteStore's schedule files: one row per content in `schedule_files`,
// named by SHA-256 from the jobs that carry it, gone with the last of them;
// and the migration that moves the texts a schema-2 database held inline in
// its job records.

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "coordinator/store/sqlite_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/sqlite_store_fixture.h"

namespace zbpp::coordinator::testing {
namespace {

v1::Job JobWithFile(const std::string& id, int64_t create_seconds, const std::string& text) {
  v1::Job job = MakeJob(id, create_seconds);
  job.mutable_spec()->mutable_schedule()->set_file("s.json");
  job.mutable_spec()->mutable_schedule()->set_file_text(text);
  return job;
}

// The one integer `sql` selects from the database at `path`.
int64_t QueryInt(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_ROW) << sql;
  const int64_t value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

TEST(SqliteScheduleFilesTest, OneRowPerContentGoneWithItsLastJob) {
  const std::string path = TestDir() + "/files.db";
  const std::string text(1 << 20, 'x');
  const std::string other = "{\"other\": true}";
  {
    std::unique_ptr<SqliteStore> store = Open(path);
    ASSERT_NE(store, nullptr);
    for (const char* id : {"a", "b", "c"}) {
      ASSERT_TRUE(store->CreateJob(JobWithFile(id, 1, text)).ok()) << id;
    }
    ASSERT_TRUE(store->CreateJob(JobWithFile("d", 2, other)).ok());
    ASSERT_TRUE(store->CreateJob(MakeJob("e", 3)).ok());

    // Read back as given.
    absl::StatusOr<v1::Job> a = store->GetJob("a");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_THAT(*a, EqualsProto(JobWithFile("a", 1, text)));
    EXPECT_THAT(*store->GetJob("e"), EqualsProto(MakeJob("e", 3)));

    // Updated without its text (as the coordinator holds it): it keeps it.
    v1::Job b = JobWithFile("b", 1, "");
    b.set_state(v1::JOB_STATE_RUNNING);
    ASSERT_TRUE(store->UpdateJob(b).ok());
    EXPECT_EQ(store->GetJob("b")->spec().schedule().file_text(), text);
    EXPECT_EQ(store->GetJob("b")->state(), v1::JOB_STATE_RUNNING);

    absl::StatusOr<StoredState> state = store->LoadAll();
    ASSERT_TRUE(state.ok()) << state.status();
    ASSERT_EQ(state->jobs.size(), 5u);
    for (const v1::Job& job : state->jobs) {
      EXPECT_TRUE(job.spec().schedule().file_text().empty()) << job.id();
    }
    EXPECT_EQ(state->schedule_file_of_job,
              (std::map<std::string, std::string>{{"a", Sha256Hex(text)},
                                                  {"b", Sha256Hex(text)},
                                                  {"c", Sha256Hex(text)},
                                                  {"d", Sha256Hex(other)}}));
    EXPECT_EQ(state->schedule_files.size(), 2u);
    EXPECT_EQ(state->schedule_files.at(Sha256Hex(text)), text);
    EXPECT_EQ(state->schedule_files.at(Sha256Hex(other)), other);
  }
  EXPECT_EQ(QueryInt(path, "SELECT count(*) FROM schedule_files"), 2);
  EXPECT_LT(QueryInt(path, "SELECT sum(length(job)) FROM jobs"), 4096)
      << "a job record still holds its file";
  {
    std::unique_ptr<SqliteStore> store = Open(path);
    ASSERT_TRUE(store->DeleteJob("a").ok());
    ASSERT_TRUE(store->DeleteJob("b").ok());
  }
  EXPECT_EQ(QueryInt(path, "SELECT count(*) FROM schedule_files"), 2) << "c still names it";
  {
    std::unique_ptr<SqliteStore> store = Open(path);
    ASSERT_TRUE(store->DeleteJob("c").ok());
  }
  EXPECT_EQ(QueryInt(path, "SELECT count(*) FROM schedule_files"), 1);
  EXPECT_EQ(QueryInt(path, absl::StrCat("SELECT count(*) FROM schedule_files WHERE sha256 = '",
                                        Sha256Hex(other), "'")),
            1);
}

// Schema 2 as released (migrations 1 and 2 of sqlite_store.cc): what a
// database written before schedule files were stored once holds.
constexpr char kSchema2[] = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (2);
CREATE TABLE jobs (
  id TEXT PRIMARY KEY NOT NULL, state INTEGER NOT NULL,
  create_time_seconds INTEGER NOT NULL, create_time_nanos INTEGER NOT NULL,
  job BLOB NOT NULL);
CREATE INDEX jobs_by_create_time ON jobs (create_time_seconds, create_time_nanos);
CREATE INDEX jobs_by_state ON jobs (state, create_time_seconds, create_time_nanos);
CREATE TABLE schedule_versions (job_id TEXT NOT NULL REFERENCES jobs (id),
  version INTEGER NOT NULL, effective_step INTEGER NOT NULL,
  schedule_version BLOB NOT NULL, PRIMARY KEY (job_id, version)) WITHOUT ROWID;
CREATE TABLE cost_snapshots (job_id TEXT NOT NULL REFERENCES jobs (id),
  step INTEGER NOT NULL, cost_model BLOB NOT NULL, PRIMARY KEY (job_id, step)) WITHOUT ROWID;
CREATE TABLE step_summaries (job_id TEXT NOT NULL REFERENCES jobs (id),
  step INTEGER NOT NULL, step_summary BLOB NOT NULL, PRIMARY KEY (job_id, step)) WITHOUT ROWID;
CREATE TABLE validation_outcomes (job_id TEXT NOT NULL REFERENCES jobs (id),
  step INTEGER NOT NULL, decision INTEGER NOT NULL, validation_outcome BLOB NOT NULL,
  PRIMARY KEY (job_id, step)) WITHOUT ROWID;
CREATE TABLE checkpoints (job_id TEXT NOT NULL REFERENCES jobs (id),
  step INTEGER NOT NULL, directory TEXT NOT NULL, stages_written TEXT NOT NULL,
  complete INTEGER NOT NULL, data_parallel INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (job_id, step)) WITHOUT ROWID;
CREATE TABLE resolve_records (seq INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL REFERENCES jobs (id), step INTEGER NOT NULL,
  published INTEGER NOT NULL, version INTEGER NOT NULL, old_makespan_seconds REAL,
  new_makespan_seconds REAL, solve_seconds REAL, reason TEXT NOT NULL);
CREATE INDEX resolve_records_by_job ON resolve_records (job_id, seq);
)sql";

void InsertInline(sqlite3* db, const v1::Job& job) {
  const std::string blob = job.SerializeAsString();
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "INSERT INTO jobs (id, state, create_time_seconds, "
                               "create_time_nanos, job) VALUES (?1, ?2, ?3, 0, ?4)",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  sqlite3_bind_text(stmt, 1, job.id().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(stmt, 2, job.state());
  sqlite3_bind_int64(stmt, 3, job.create_time().seconds());
  sqlite3_bind_blob(stmt, 4, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);
}

TEST(SqliteScheduleFilesTest, MigrationMovesInlineTextsOutOfASchema2Database) {
  const std::string path = TestDir() + "/schema2.db";
  const std::string text(256 << 10, 'y');
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, kSchema2, nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    InsertInline(db, JobWithFile("a", 1, text));
    InsertInline(db, JobWithFile("b", 2, text));
    InsertInline(db, MakeJob("c", 3));
    sqlite3_close(db);
  }
  ASSERT_GT(QueryInt(path, "SELECT sum(length(job)) FROM jobs"), 2 * (256 << 10));
  {
    std::unique_ptr<SqliteStore> store = Open(path);
    ASSERT_NE(store, nullptr);
    absl::StatusOr<StoredState> state = store->LoadAll();
    ASSERT_TRUE(state.ok()) << state.status();
    ASSERT_EQ(state->jobs.size(), 3u);
    EXPECT_EQ(state->schedule_file_of_job,
              (std::map<std::string, std::string>{{"a", Sha256Hex(text)},
                                                  {"b", Sha256Hex(text)}}));
    EXPECT_TRUE(state->jobs[0].spec().schedule().file_text().empty());
    ASSERT_EQ(state->schedule_files.size(), 1u);
    EXPECT_EQ(state->schedule_files.begin()->second, text);
    EXPECT_THAT(*store->GetJob("b"), EqualsProto(JobWithFile("b", 2, text)));
  }
  EXPECT_EQ(QueryInt(path, "SELECT version FROM schema_version"), SqliteStore::kSchemaVersion);
  EXPECT_EQ(QueryInt(path, "SELECT count(*) FROM schedule_files"), 1);
  EXPECT_LT(QueryInt(path, "SELECT sum(length(job)) FROM jobs"), 4096);
  EXPECT_EQ(QueryInt(path, "SELECT count(*) FROM jobs WHERE schedule_file IS NOT NULL"), 2);
}

}  // namespace
}  // namespace zbpp::coordinator::testing
