#include "coordinator/store/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "coordinator/store/sqlite_rows.h"

namespace zbpp::coordinator {

using sqlite_detail::Quote;

namespace {

// Migration i (0-based) takes the schema from version i to i + 1. Append new
// ones; never edit a released one, since databases in the field already ran it.
//
// Records are protobuf BLOBs so that new proto fields need no migration; the
// columns beside them are only what lookups and ordering need. Job ids are
// the coordinator's own ([A-Za-z0-9-_]), so TEXT comparison orders them
// stably. WITHOUT ROWID: every child table is looked up by its primary key.
constexpr const char* kMigrations[] = {
    // 1: the initial schema.
    R"sql(
CREATE TABLE jobs (
  id TEXT PRIMARY KEY NOT NULL,
  state INTEGER NOT NULL,                 -- zbpp.v1.JobState
  create_time_seconds INTEGER NOT NULL,   -- Job.create_time
  create_time_nanos INTEGER NOT NULL,
  job BLOB NOT NULL                       -- zbpp.v1.Job
);
CREATE INDEX jobs_by_create_time
  ON jobs (create_time_seconds, create_time_nanos);
CREATE INDEX jobs_by_state
  ON jobs (state, create_time_seconds, create_time_nanos);

CREATE TABLE schedule_versions (
  job_id TEXT NOT NULL REFERENCES jobs (id),
  version INTEGER NOT NULL,
  effective_step INTEGER NOT NULL,
  schedule_version BLOB NOT NULL,         -- zbpp.v1.ScheduleVersion
  PRIMARY KEY (job_id, version)
) WITHOUT ROWID;

CREATE TABLE cost_snapshots (
  job_id TEXT NOT NULL REFERENCES jobs (id),
  step INTEGER NOT NULL,
  cost_model BLOB NOT NULL,               -- zbpp.v1.CostModel
  PRIMARY KEY (job_id, step)
) WITHOUT ROWID;

CREATE TABLE step_summaries (
  job_id TEXT NOT NULL REFERENCES jobs (id),
  step INTEGER NOT NULL,
  step_summary BLOB NOT NULL,             -- zbpp.v1.StepSummary
  PRIMARY KEY (job_id, step)
) WITHOUT ROWID;

CREATE TABLE validation_outcomes (
  job_id TEXT NOT NULL REFERENCES jobs (id),
  step INTEGER NOT NULL,
  decision INTEGER NOT NULL,              -- zbpp.v1.ValidationDecision
  validation_outcome BLOB NOT NULL,       -- zbpp.v1.ValidationOutcome
  PRIMARY KEY (job_id, step)
) WITHOUT ROWID;

CREATE TABLE checkpoints (
  job_id TEXT NOT NULL REFERENCES jobs (id),
  step INTEGER NOT NULL,
  directory TEXT NOT NULL,
  stages_written TEXT NOT NULL,           -- ascending stages, "0,1,3"
  complete INTEGER NOT NULL,              -- 0 or 1
  PRIMARY KEY (job_id, step)
) WITHOUT ROWID;

-- Several decisions may share a step, so they are ordered by seq.
-- Makespans are NULL where they were NaN (SQLite stores NaN as NULL).
CREATE TABLE resolve_records (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL REFERENCES jobs (id),
  step INTEGER NOT NULL,
  published INTEGER NOT NULL,
  version INTEGER NOT NULL,
  old_makespan_seconds REAL,
  new_makespan_seconds REAL,
  solve_seconds REAL,
  reason TEXT NOT NULL
);
CREATE INDEX resolve_records_by_job ON resolve_records (job_id, seq);
)sql",
    // 2: data x pipeline parallelism. A checkpoint records the replicas of
    // the job that wrote it; every one written before had one.
    R"sql(
ALTER TABLE checkpoints ADD COLUMN data_parallel INTEGER NOT NULL DEFAULT 1;
)sql",
    // 3: schedule files once per content. A job's spec no longer holds
    // its schedule file's text (up to 3 MiB, common/job_limits.h), it names
    // the row here holding it; MoveScheduleFilesOut moves the texts stored
    // inline before.
    R"sql(
CREATE TABLE schedule_files (
  sha256 TEXT PRIMARY KEY NOT NULL,       -- of text, 64 lowercase hex digits
  text BLOB NOT NULL                      -- SchedulePolicy.file_text
) WITHOUT ROWID;
ALTER TABLE jobs ADD COLUMN schedule_file TEXT REFERENCES schedule_files (sha256);
CREATE INDEX jobs_by_schedule_file ON jobs (schedule_file);
)sql",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) ==
                  SqliteStore::kSchemaVersion,
              "one migration per schema version");

constexpr absl::string_view kMemoryPath = ":memory:";

// The columns SqliteStore::ReadCheckpoint reads, in its order.
#define ZBPP_CHECKPOINT_COLUMNS \
  "job_id, step, directory, stages_written, complete, data_parallel"


bool IsTransient(int primary_code) {
  switch (primary_code) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_PROTOCOL:
      return true;
    default:
      return false;
  }
}

}  // namespace

SqliteStore::SqliteStore(Options options) : options_(std::move(options)) {}

SqliteStore::~SqliteStore() {
  absl::MutexLock lock(&mu_);
  statements_.reset();  // Finalized before the connection closes.
  sqlite3_close(db_);
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Create(
    Options options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError(
        "path: empty; give a database file or \":memory:\"");
  }
  if (options.busy_timeout_milliseconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("busy_timeout_milliseconds: ",
                     options.busy_timeout_milliseconds, " is negative"));
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(options)));
  absl::MutexLock lock(&store->mu_);
  if (absl::Status status = store->Open(); !status.ok()) return status;
  if (absl::Status status = store->Migrate(); !status.ok()) return status;
  if (absl::Status status = store->Prepare(); !status.ok()) return status;
  if (absl::Status status = store->RecordFiles(); !status.ok()) return status;
  return store;
}

absl::Status SqliteStore::Open() {
  // NOMUTEX: mu_ already serializes every use of the connection.
  int rc = sqlite3_open_v2(
      options_.path.c_str(), &db_,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      nullptr);
  if (rc != SQLITE_OK) {
    // db_ may be null (out of memory) or hold the error; Error handles both.
    return Error(rc, "opening the database");
  }
  sqlite3_extended_result_codes(db_, 1);
  if (sqlite3_db_readonly(db_, "main") == 1) {
    return absl::InternalError(absl::StrCat(
        "SQLite database ", options_.path,
        ": opened read-only (the file or its directory is not writable)"));
  }
  sqlite3_busy_timeout(db_, options_.busy_timeout_milliseconds);

  // Before the first access (SQLite decides then whether the WAL index is
  // a -shm file): the class comment.
  if (options_.exclusive && options_.path != kMemoryPath) {
    if (absl::Status status = Exec("PRAGMA locking_mode = EXCLUSIVE");
        !status.ok()) {
      return status;
    }
  }
  // The first statements read the file, so a file that is not a database
  // fails here, with SQLITE_NOTADB naming the path.
  if (absl::Status status = Exec("PRAGMA foreign_keys = ON"); !status.ok()) {
    return status;
  }
  if (options_.path != kMemoryPath) {
    // WAL: readers never block the writer, and a commit is one append.
    sqlite3_stmt* stmt = nullptr;
    rc = sqlite3_prepare_v2(db_, "PRAGMA journal_mode = WAL", -1, &stmt,
                            nullptr);
    std::string mode;
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        mode = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
        rc = SQLITE_OK;
      }
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_OK) return Error(rc, "setting journal_mode=WAL");
    if (mode != "wal") {
      return absl::InternalError(
          absl::StrCat("SQLite database ", options_.path,
                       ": cannot use WAL mode (journal_mode is \"", mode,
                       "\")"));
    }
  }
  return Exec(options_.fsync_every_commit ? "PRAGMA synchronous = FULL"
                                          : "PRAGMA synchronous = NORMAL");
}

absl::Status SqliteStore::Migrate() {
  // One IMMEDIATE transaction for the check and all migrations, so two
  // coordinators opening a new file at once cannot both migrate it.
  if (absl::Status status = Exec("BEGIN IMMEDIATE"); !status.ok()) {
    return status;
  }
  absl::Status status = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (absl::Status s = Exec(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            "version INTEGER NOT NULL)");
        !s.ok()) {
      return s;
    }
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, "SELECT version FROM schema_version", -1,
                                &stmt, nullptr);
    int64_t version = 0;
    int rows = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      version = sqlite3_column_int64(stmt, 0);
      ++rows;
      rc = SQLITE_OK;
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return Error(rc, "reading schema_version");
    if (rows > 1) {
      return absl::InternalError(absl::StrCat(
          "SQLite database ", options_.path, ": schema_version holds ", rows,
          " rows, expected one"));
    }
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "SQLite database ", options_.path, ": schema version ", version,
          " is newer than this coordinator supports (", kSchemaVersion,
          "); run a newer zbpp-coordinator"));
    }
    if (rows == 0) {
      if (absl::Status s = Exec("INSERT INTO schema_version VALUES (0)");
          !s.ok()) {
        return s;
      }
    }
    for (int64_t v = version; v < kSchemaVersion; ++v) {
      absl::Status s = Exec(kMigrations[v]);
      // The texts sit inside protobuf BLOBs, out of SQL's reach.
      if (s.ok() && v + 1 == kScheduleFilesSchema) s = MoveScheduleFilesOut();
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat("migrating to schema ",
                                                   v + 1, ": ", s.message()));
      }
      const std::string set_version =
          absl::StrCat("UPDATE schema_version SET version = ", v + 1);
      if (absl::Status s = Exec(set_version.c_str()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }();
  if (status.ok()) status = Exec("COMMIT");
  if (!status.ok() && !sqlite3_get_autocommit(db_)) {
    (void)Exec("ROLLBACK");
  }
  return status;
}

absl::Status SqliteStore::Prepare() {
  statements_ = std::make_unique<Statements>();
  Statements& s = *statements_;
  const std::pair<Statement*, const char*> all[] = {
      {&s.begin_immediate, "BEGIN IMMEDIATE"},
      {&s.begin_deferred, "BEGIN DEFERRED"},
      {&s.commit, "COMMIT"},
      {&s.rollback, "ROLLBACK"},
      {&s.job_exists, "SELECT 1 FROM jobs WHERE id = ?1"},
      {&s.insert_job,
       "INSERT INTO jobs (id, state, create_time_seconds, create_time_nanos, "
       "job, schedule_file) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
      {&s.update_job,
       "UPDATE jobs SET state = ?2, create_time_seconds = ?3, "
       "create_time_nanos = ?4, job = ?5, schedule_file = coalesce(?6, schedule_file) "
       "WHERE id = ?1"},
      {&s.get_job,
       "SELECT job, text FROM jobs LEFT JOIN schedule_files "
       "ON schedule_file = sha256 WHERE id = ?1"},
      {&s.load_schedule_file_of_jobs,
       "SELECT id, schedule_file FROM jobs WHERE schedule_file IS NOT NULL"},
      {&s.load_jobs,
       "SELECT job FROM jobs "
       "ORDER BY create_time_seconds, create_time_nanos, rowid"},
      {&s.insert_schedule_version,
       "INSERT INTO schedule_versions (job_id, version, effective_step, "
       "schedule_version) VALUES (?1, ?2, ?3, ?4)"},
      {&s.load_schedule_versions,
       "SELECT schedule_version FROM schedule_versions "
       "ORDER BY job_id, version"},
      // A replayed step's record replaces its first run's (store.h,
      // "Replayed steps"): an upsert, so a replay is no failed statement.
      {&s.put_cost_snapshot,
       "INSERT INTO cost_snapshots (job_id, step, cost_model) "
       "VALUES (?1, ?2, ?3) "
       "ON CONFLICT (job_id, step) DO UPDATE SET cost_model = excluded.cost_model"},
      {&s.list_cost_snapshots,
       "SELECT step, cost_model FROM cost_snapshots WHERE job_id = ?1 "
       "ORDER BY step"},
      {&s.put_step_summary,
       "INSERT INTO step_summaries (job_id, step, step_summary) "
       "VALUES (?1, ?2, ?3) "
       "ON CONFLICT (job_id, step) DO UPDATE SET step_summary = excluded.step_summary"},
      {&s.list_step_summaries,
       "SELECT step_summary FROM step_summaries "
       "WHERE job_id = ?1 AND step >= ?2 ORDER BY step LIMIT ?3"},
      {&s.put_validation_outcome,
       "INSERT INTO validation_outcomes (job_id, step, decision, "
       "validation_outcome) VALUES (?1, ?2, ?3, ?4) "
       "ON CONFLICT (job_id, step) DO UPDATE SET decision = excluded.decision, "
       "validation_outcome = excluded.validation_outcome"},
      {&s.list_validation_outcomes,
       "SELECT validation_outcome FROM validation_outcomes "
       "WHERE job_id = ?1 ORDER BY step"},
      {&s.put_checkpoint,
       "INSERT INTO checkpoints (" ZBPP_CHECKPOINT_COLUMNS ") "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
       "ON CONFLICT (job_id, step) DO UPDATE SET "
       "directory = excluded.directory, "
       "stages_written = excluded.stages_written, "
       "complete = excluded.complete, "
       "data_parallel = excluded.data_parallel"},
      {&s.load_checkpoints,
       "SELECT " ZBPP_CHECKPOINT_COLUMNS
       " FROM checkpoints ORDER BY job_id, step"},
      {&s.list_checkpoints_at,
       "SELECT " ZBPP_CHECKPOINT_COLUMNS
       " FROM checkpoints WHERE rtrim(directory, '/') = rtrim(?1, '/') "
       "AND step = ?2 AND complete = 1 ORDER BY job_id"},
      {&s.insert_resolve_record,
       "INSERT INTO resolve_records (job_id, step, published, version, "
       "old_makespan_seconds, new_makespan_seconds, solve_seconds, reason) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
      {&s.list_resolve_records,
       "SELECT step, published, version, old_makespan_seconds, "
       "new_makespan_seconds, solve_seconds, reason FROM resolve_records "
       "WHERE job_id = ?1 ORDER BY seq"},
      {&s.delete_schedule_versions, "DELETE FROM schedule_versions WHERE job_id = ?1"},
      {&s.delete_cost_snapshots, "DELETE FROM cost_snapshots WHERE job_id = ?1"},
      {&s.delete_step_summaries, "DELETE FROM step_summaries WHERE job_id = ?1"},
      {&s.delete_validation_outcomes, "DELETE FROM validation_outcomes WHERE job_id = ?1"},
      {&s.delete_checkpoints, "DELETE FROM checkpoints WHERE job_id = ?1"},
      {&s.delete_resolve_records, "DELETE FROM resolve_records WHERE job_id = ?1"},
      {&s.delete_job, "DELETE FROM jobs WHERE id = ?1"},
      {&s.insert_schedule_file, sqlite_detail::kInsertScheduleFile},
      {&s.load_schedule_files, "SELECT sha256, text FROM schedule_files"},
      {&s.delete_unused_schedule_files,
       "DELETE FROM schedule_files WHERE NOT EXISTS "
       "(SELECT 1 FROM jobs WHERE schedule_file = schedule_files.sha256)"},
  };
  for (const auto& [statement, sql] : all) {
    if (absl::Status status = statement->Prepare(*this, sql); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::RecordFiles() {
  if (options_.path == kMemoryPath) return absl::OkStatus();
  for (const std::string& path :
       {options_.path, absl::StrCat(options_.path, "-wal")}) {
    struct stat info;
    if (stat(path.c_str(), &info) != 0) {
      return absl::InternalError(absl::StrCat(
          "SQLite database ", options_.path, ": ", path,
          " is missing right after opening it (WAL mode keeps it)"));
    }
    files_.push_back({path, static_cast<uint64_t>(info.st_dev),
                      static_cast<uint64_t>(info.st_ino)});
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Probe() {
  absl::MutexLock lock(&mu_);
  return CheckFiles();
}

absl::Status SqliteStore::CheckFiles() const {
  for (const OpenFile& file : files_) {
    struct stat info;
    const bool gone = stat(file.path.c_str(), &info) != 0;
    if (!gone && static_cast<uint64_t>(info.st_dev) == file.device &&
        static_cast<uint64_t>(info.st_ino) == file.inode) {
      continue;
    }
    return absl::InternalError(absl::StrCat(
        "SQLite database ", options_.path, ": ", file.path,
        gone ? " was deleted" : " was replaced by another file",
        " while the coordinator had it open; nothing more is written, since "
        "it would go to a file no restart reads. Put the file back, or stop "
        "the coordinator (what it has not stored is lost) and restore the "
        "database from a backup"));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Exec(const char* sql) {
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    // The first line of the SQL says which statement failed.
    absl::string_view first(sql);
    first = first.substr(0, first.find('\n', 1));
    return Error(rc, absl::StrCat("running \"", first, "\""));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Error(int rc, const std::string& what) const {
  const char* message =
      db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string text = absl::StrCat("SQLite database ", options_.path, ": ",
                                  what, ": ", message, " (",
                                  sqlite3_errstr(rc), ")");
  switch (rc) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
      return absl::AlreadyExistsError(std::move(text));
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return absl::NotFoundError(std::move(text));
    default:
      break;
  }
  if (IsTransient(rc & 0xff)) return absl::UnavailableError(std::move(text));
  return absl::InternalError(std::move(text));
}


absl::Status SqliteStore::CheckJobExists(const std::string& job_id) {
  Run run(statements_->job_exists);
  run.Text(1, job_id);
  int rc = run.Step();
  if (rc == SQLITE_ROW) return absl::OkStatus();
  if (rc == SQLITE_DONE) {
    return absl::NotFoundError(absl::StrCat("job ", Quote(job_id),
                                            " not found"));
  }
  return Error(rc, absl::StrCat("looking up job ", Quote(job_id)));
}

absl::Status SqliteStore::ParseColumn(
    const Run& run, int column, const std::string& what,
    google::protobuf::MessageLite* message) const {
  if (run.ColumnMessage(column, message)) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("SQLite database ", options_.path,
                                          ": ", what, " holds a row that is "
                                          "not a valid ",
                                          message->GetTypeName()));
}

}  // namespace zbpp::coordinator
