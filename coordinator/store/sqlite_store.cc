#include "coordinator/store/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace zbpp::coordinator {
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
  stages_written TEXT NOT NULL,           -- ascending ranks, "0,1,3"
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
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) ==
                  SqliteStore::kSchemaVersion,
              "one migration per schema version");

constexpr absl::string_view kMemoryPath = ":memory:";

// The columns SqliteStore::ReadCheckpoint reads, in its order.
#define ZBPP_CHECKPOINT_COLUMNS \
  "job_id, step, directory, stages_written, complete, data_parallel"


// A quoted id for messages; ids are the coordinator's own, but a bad one
// should still read unambiguously.
std::string Quote(const std::string& id) { return absl::StrCat("\"", id, "\""); }

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

// Serializes `message` into `out`; InvalidArgument naming `field` when it
// cannot be (a message over 2 GiB, or a missing required field of proto2).
absl::Status Serialize(const google::protobuf::MessageLite& message,
                       absl::string_view field, std::string* out) {
  if (!message.SerializeToString(out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": cannot be serialized (",
                     message.ByteSizeLong(), " bytes)"));
  }
  return absl::OkStatus();
}

std::string StagesToText(std::vector<int32_t> stages) {
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  return absl::StrJoin(stages, ",");
}

}  // namespace

// Owns one prepared statement for the life of the connection.
class SqliteStore::Statement {
 public:
  Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  absl::Status Prepare(SqliteStore& store, const char* sql)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(store.mu_) {
    int rc = sqlite3_prepare_v3(store.db_, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                &stmt_, nullptr);
    if (rc != SQLITE_OK) {
      return store.Error(rc, absl::StrCat("preparing \"", sql, "\""));
    }
    return absl::OkStatus();
  }

  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Every statement a call may run, prepared once in Create.
struct SqliteStore::Statements {
  Statement begin_immediate, begin_deferred, commit, rollback;
  Statement job_exists, insert_job, update_job, get_job, load_jobs;
  Statement insert_schedule_version, load_schedule_versions;
  Statement insert_cost_snapshot, list_cost_snapshots;
  Statement insert_step_summary, list_step_summaries;
  Statement insert_validation_outcome, list_validation_outcomes;
  Statement put_checkpoint, load_checkpoints, list_checkpoints_at;
  Statement insert_resolve_record, list_resolve_records;
};

// One use of a prepared statement: binds, steps, and resets it (and clears
// its bindings) when it goes out of scope, so a statement never holds a read
// lock or a stale binding between calls. A failed bind is remembered and
// returned by the first Step, so call sites bind without checking each one.
class SqliteStore::Run {
 public:
  explicit Run(const Statement& statement) : stmt_(statement.get()) {}
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  ~Run() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  Run& Text(int index, const std::string& value) {
    return Check(sqlite3_bind_text(stmt_, index, value.data(),
                                   static_cast<int>(value.size()),
                                   SQLITE_TRANSIENT));
  }
  // `value` must outlive the Step calls (no copy).
  Run& Blob(int index, const std::string& value) {
    return Check(sqlite3_bind_blob(stmt_, index, value.data(),
                                   static_cast<int>(value.size()),
                                   SQLITE_STATIC));
  }
  Run& Int(int index, int64_t value) {
    return Check(sqlite3_bind_int64(stmt_, index, value));
  }
  Run& Real(int index, double value) {
    return Check(sqlite3_bind_double(stmt_, index, value));
  }

  // SQLITE_ROW, SQLITE_DONE, or an error code.
  int Step() {
    if (bind_rc_ != SQLITE_OK) return bind_rc_;
    return sqlite3_step(stmt_);
  }

  int64_t ColumnInt(int column) const {
    return sqlite3_column_int64(stmt_, column);
  }
  // NaN for NULL, the form SQLite gives a stored NaN.
  double ColumnReal(int column) const {
    if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    return sqlite3_column_double(stmt_, column);
  }
  std::string ColumnText(int column) const {
    const unsigned char* text = sqlite3_column_text(stmt_, column);
    int bytes = sqlite3_column_bytes(stmt_, column);
    if (text == nullptr) return std::string();
    return std::string(reinterpret_cast<const char*>(text), bytes);
  }
  // Parses a BLOB column into `message`; false when it is not one.
  bool ColumnMessage(int column, google::protobuf::MessageLite* message) const {
    const void* blob = sqlite3_column_blob(stmt_, column);
    int bytes = sqlite3_column_bytes(stmt_, column);
    if (bytes == 0) {  // A zero-length BLOB reads back as a null pointer.
      message->Clear();
      return true;
    }
    return message->ParseFromArray(blob, bytes);
  }

 private:
  Run& Check(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }

  sqlite3_stmt* stmt_;
  int bind_rc_ = SQLITE_OK;
};

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
      if (absl::Status s = Exec(kMigrations[v]); !s.ok()) {
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
       "job) VALUES (?1, ?2, ?3, ?4, ?5)"},
      {&s.update_job,
       "UPDATE jobs SET state = ?2, create_time_seconds = ?3, "
       "create_time_nanos = ?4, job = ?5 WHERE id = ?1"},
      {&s.get_job, "SELECT job FROM jobs WHERE id = ?1"},
      {&s.load_jobs,
       "SELECT job FROM jobs "
       "ORDER BY create_time_seconds, create_time_nanos, rowid"},
      {&s.insert_schedule_version,
       "INSERT INTO schedule_versions (job_id, version, effective_step, "
       "schedule_version) VALUES (?1, ?2, ?3, ?4)"},
      {&s.load_schedule_versions,
       "SELECT schedule_version FROM schedule_versions "
       "ORDER BY job_id, version"},
      {&s.insert_cost_snapshot,
       "INSERT INTO cost_snapshots (job_id, step, cost_model) "
       "VALUES (?1, ?2, ?3)"},
      {&s.list_cost_snapshots,
       "SELECT step, cost_model FROM cost_snapshots WHERE job_id = ?1 "
       "ORDER BY step"},
      {&s.insert_step_summary,
       "INSERT INTO step_summaries (job_id, step, step_summary) "
       "VALUES (?1, ?2, ?3)"},
      {&s.list_step_summaries,
       "SELECT step_summary FROM step_summaries "
       "WHERE job_id = ?1 AND step >= ?2 ORDER BY step LIMIT ?3"},
      {&s.insert_validation_outcome,
       "INSERT INTO validation_outcomes (job_id, step, decision, "
       "validation_outcome) VALUES (?1, ?2, ?3, ?4)"},
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


template <typename Body>
absl::Status SqliteStore::InTransaction(Access access, Body body) {
  // Writes take the write lock up front (IMMEDIATE): a deferred transaction
  // that reads (the job check) and then writes could fail with SQLITE_BUSY
  // mid-way, past the busy handler, when another connection writes. Reads
  // stay deferred: in WAL mode they see one snapshot without blocking
  // writers in other processes.
  if (absl::Status files = CheckFiles(); !files.ok()) return files;
  {
    const bool write = access == Access::kWrite;
    Run begin(write ? statements_->begin_immediate
                    : statements_->begin_deferred);
    if (int rc = begin.Step(); rc != SQLITE_DONE) {
      return Error(rc, write ? "BEGIN IMMEDIATE" : "BEGIN");
    }
  }
  absl::Status status = body();
  if (status.ok()) {
    Run commit(statements_->commit);
    if (int rc = commit.Step(); rc != SQLITE_DONE) {
      status = Error(rc, "COMMIT");
    }
  }
  if (!status.ok() && !sqlite3_get_autocommit(db_)) {
    Run rollback(statements_->rollback);
    (void)rollback.Step();  // Nothing more to do if even this fails.
  }
  return status;
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

template <typename Bind>
absl::Status SqliteStore::WriteForJob(const std::string& job_id,
                                      const Statement& statement,
                                      const std::string& what, Bind bind) {
  return InTransaction(Access::kWrite, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                           mu_) {
    // Checked here rather than left to the foreign key, for a NotFound that
    // names the job instead of "FOREIGN KEY constraint failed".
    if (absl::Status s = CheckJobExists(job_id); !s.ok()) return s;
    Run run(statement);
    bind(run);
    if (int rc = run.Step(); rc != SQLITE_DONE) {
      return Error(rc, absl::StrCat("storing ", what));
    }
    return absl::OkStatus();
  });
}

template <typename Read>
absl::Status SqliteStore::ReadRows(Run& run, const std::string& what,
                                   Read read) {
  int rc;
  while ((rc = run.Step()) == SQLITE_ROW) {
    if (absl::Status s = read(run); !s.ok()) return s;
  }
  if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("reading ", what));
  return absl::OkStatus();
}

template <typename Read>
absl::Status SqliteStore::ReadForJob(const std::string& job_id,
                                     const Statement& statement,
                                     const std::string& what, Read read) {
  return InTransaction(Access::kRead, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                          mu_) {
    if (absl::Status s = CheckJobExists(job_id); !s.ok()) return s;
    Run run(statement);
    run.Text(1, job_id);
    return ReadRows(run, what, read);
  });
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

// ---------------------------------------------------------------------------
// Jobs.

absl::Status SqliteStore::CreateJob(const zbpp::v1::Job& job) {
  if (job.id().empty()) return absl::InvalidArgumentError("job.id: empty");
  std::string blob;
  if (absl::Status s = Serialize(job, "job", &blob); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return InTransaction(Access::kWrite, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                           mu_) {
    Run run(statements_->insert_job);
    run.Text(1, job.id())
        .Int(2, job.state())
        .Int(3, job.create_time().seconds())
        .Int(4, job.create_time().nanos())
        .Blob(5, blob);
    if (int rc = run.Step(); rc != SQLITE_DONE) {
      return Error(rc, absl::StrCat("storing job ", Quote(job.id())));
    }
    return absl::OkStatus();
  });
}

absl::Status SqliteStore::UpdateJob(const zbpp::v1::Job& job) {
  if (job.id().empty()) return absl::InvalidArgumentError("job.id: empty");
  std::string blob;
  if (absl::Status s = Serialize(job, "job", &blob); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return WriteForJob(job.id(), statements_->update_job,
                     absl::StrCat("job ", Quote(job.id())), [&](Run& run) {
                       run.Text(1, job.id())
                           .Int(2, job.state())
                           .Int(3, job.create_time().seconds())
                           .Int(4, job.create_time().nanos())
                           .Blob(5, blob);
                     });
}

absl::StatusOr<zbpp::v1::Job> SqliteStore::GetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  const std::string what = absl::StrCat("job ", Quote(job_id));
  std::optional<zbpp::v1::Job> job;
  absl::Status status = InTransaction(
      Access::kRead, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        Run run(statements_->get_job);
        run.Text(1, job_id);
        return ReadRows(run, what, [&](Run& row) {
          return ParseColumn(row, 0, what, &job.emplace());
        });
      });
  if (!status.ok()) return status;
  if (!job.has_value()) return absl::NotFoundError(what + " not found");
  return *std::move(job);
}

// ---------------------------------------------------------------------------
// Per-job histories.

absl::Status SqliteStore::AddScheduleVersion(
    const zbpp::v1::ScheduleVersion& version) {
  if (version.job_id().empty()) {
    return absl::InvalidArgumentError("schedule_version.job_id: empty");
  }
  if (version.version() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule_version.version: ", version.version(), " is below 1"));
  }
  std::string blob;
  if (absl::Status s = Serialize(version, "schedule_version", &blob);
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  return WriteForJob(version.job_id(), statements_->insert_schedule_version,
                     absl::StrCat("schedule version ", version.version(),
                                  " of job ", Quote(version.job_id())),
                     [&](Run& run) {
                       run.Text(1, version.job_id())
                           .Int(2, version.version())
                           .Int(3, version.effective_step())
                           .Blob(4, blob);
                     });
}

absl::Status SqliteStore::AddCostSnapshot(const std::string& job_id,
                                          int64_t step,
                                          const zbpp::v1::CostModel& costs) {
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step: ", step, " is negative"));
  }
  std::string blob;
  if (absl::Status s = Serialize(costs, "costs", &blob); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return WriteForJob(job_id, statements_->insert_cost_snapshot,
                     absl::StrCat("the cost snapshot of job ", Quote(job_id),
                                  " at step ", step),
                     [&](Run& run) {
                       run.Text(1, job_id).Int(2, step).Blob(3, blob);
                     });
}

absl::StatusOr<std::vector<std::pair<int64_t, zbpp::v1::CostModel>>>
SqliteStore::ListCostSnapshots(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  const std::string what = absl::StrCat("cost snapshots of job ", Quote(job_id));
  std::vector<std::pair<int64_t, zbpp::v1::CostModel>> snapshots;
  absl::Status status = ReadForJob(
      job_id, statements_->list_cost_snapshots, what, [&](Run& row) {
        auto& [step, costs] = snapshots.emplace_back();
        step = row.ColumnInt(0);
        return ParseColumn(row, 1, what, &costs);
      });
  if (!status.ok()) return status;
  return snapshots;
}

absl::Status SqliteStore::AddStepSummary(const std::string& job_id,
                                         const zbpp::v1::StepSummary& step) {
  if (step.step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step.step: ", step.step(), " is negative"));
  }
  std::string blob;
  if (absl::Status s = Serialize(step, "step", &blob); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return WriteForJob(
      job_id, statements_->insert_step_summary,
      absl::StrCat("step ", step.step(), " of job ", Quote(job_id)),
      [&](Run& run) { run.Text(1, job_id).Int(2, step.step()).Blob(3, blob); });
}

absl::StatusOr<std::vector<zbpp::v1::StepSummary>>
SqliteStore::ListStepSummaries(const std::string& job_id, int64_t from_step,
                               int limit) {
  if (limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: ", limit, " is negative"));
  }
  absl::MutexLock lock(&mu_);
  const std::string what = absl::StrCat("step summaries of job ", Quote(job_id));
  std::vector<zbpp::v1::StepSummary> steps;
  absl::Status status = InTransaction(
      Access::kRead, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (absl::Status s = CheckJobExists(job_id); !s.ok()) return s;
        Run run(statements_->list_step_summaries);
        run.Text(1, job_id).Int(2, from_step).Int(3, limit);
        return ReadRows(run, what, [&](Run& row) {
          return ParseColumn(row, 0, what, &steps.emplace_back());
        });
      });
  if (!status.ok()) return status;
  return steps;
}

absl::Status SqliteStore::AddValidationOutcome(
    const std::string& job_id, const zbpp::v1::ValidationOutcome& outcome) {
  if (outcome.step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("outcome.step: ", outcome.step(), " is negative"));
  }
  std::string blob;
  if (absl::Status s = Serialize(outcome, "outcome", &blob); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  return WriteForJob(job_id, statements_->insert_validation_outcome,
                     absl::StrCat("the validation outcome of step ",
                                  outcome.step(), " of job ", Quote(job_id)),
                     [&](Run& run) {
                       run.Text(1, job_id)
                           .Int(2, outcome.step())
                           .Int(3, outcome.decision())
                           .Blob(4, blob);
                     });
}

absl::StatusOr<std::vector<zbpp::v1::ValidationOutcome>>
SqliteStore::ListValidationOutcomes(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  const std::string what =
      absl::StrCat("validation outcomes of job ", Quote(job_id));
  std::vector<zbpp::v1::ValidationOutcome> outcomes;
  absl::Status status = ReadForJob(
      job_id, statements_->list_validation_outcomes, what, [&](Run& row) {
        return ParseColumn(row, 0, what, &outcomes.emplace_back());
      });
  if (!status.ok()) return status;
  return outcomes;
}

absl::Status SqliteStore::PutCheckpoint(const CheckpointRecord& checkpoint) {
  if (checkpoint.job_id.empty()) {
    return absl::InvalidArgumentError("checkpoint.job_id: empty");
  }
  if (checkpoint.step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint.step: ", checkpoint.step, " is negative"));
  }
  for (int32_t stage : checkpoint.stages_written) {
    if (stage < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint.stages_written: stage ", stage, " is negative"));
    }
  }
  if (checkpoint.data_parallel < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint.data_parallel: must be >= 1, got ", checkpoint.data_parallel));
  }
  const std::string stages = StagesToText(checkpoint.stages_written);
  absl::MutexLock lock(&mu_);
  return WriteForJob(checkpoint.job_id, statements_->put_checkpoint,
                     absl::StrCat("the checkpoint of job ",
                                  Quote(checkpoint.job_id), " at step ",
                                  checkpoint.step),
                     [&](Run& run) {
                       run.Text(1, checkpoint.job_id)
                           .Int(2, checkpoint.step)
                           .Text(3, checkpoint.directory)
                           .Text(4, stages)
                           .Int(5, checkpoint.complete ? 1 : 0)
                           .Int(6, checkpoint.data_parallel);
                     });
}

absl::StatusOr<std::vector<CheckpointRecord>> SqliteStore::ListCheckpointsAt(
    const std::string& directory, int64_t step) {
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("step: ", step, " is negative"));
  }
  absl::MutexLock lock(&mu_);
  std::vector<CheckpointRecord> records;
  absl::Status status = InTransaction(
      Access::kRead, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        Run run(statements_->list_checkpoints_at);
        run.Text(1, directory).Int(2, step);
        return ReadRows(run, "checkpoints", [&](Run& row) {
          absl::StatusOr<CheckpointRecord> record = ReadCheckpoint(row);
          if (!record.ok()) return record.status();
          records.push_back(*std::move(record));
          return absl::OkStatus();
        });
      });
  if (!status.ok()) return status;
  return records;
}

absl::StatusOr<CheckpointRecord> SqliteStore::ReadCheckpoint(const Run& row) const {
  CheckpointRecord checkpoint;
  checkpoint.job_id = row.ColumnText(0);
  checkpoint.step = row.ColumnInt(1);
  checkpoint.directory = row.ColumnText(2);
  for (absl::string_view part :
       absl::StrSplit(row.ColumnText(3), ',', absl::SkipEmpty())) {
    int32_t stage;
    if (!absl::SimpleAtoi(part, &stage)) {
      return absl::InternalError(absl::StrCat(
          "SQLite database ", options_.path, ": checkpoint of job ",
          Quote(checkpoint.job_id), " at step ", checkpoint.step,
          ": stages_written holds \"", part, "\""));
    }
    checkpoint.stages_written.push_back(stage);
  }
  checkpoint.complete = row.ColumnInt(4) != 0;
  checkpoint.data_parallel = static_cast<int32_t>(row.ColumnInt(5));
  return checkpoint;
}

absl::Status SqliteStore::AddResolveRecord(const ResolveRecord& record) {
  if (record.job_id.empty()) {
    return absl::InvalidArgumentError("record.job_id: empty");
  }
  absl::MutexLock lock(&mu_);
  return WriteForJob(record.job_id, statements_->insert_resolve_record,
                     absl::StrCat("a re-solve record of job ",
                                  Quote(record.job_id)),
                     [&](Run& run) {
                       run.Text(1, record.job_id)
                           .Int(2, record.step)
                           .Int(3, record.published ? 1 : 0)
                           .Int(4, record.version)
                           .Real(5, record.old_makespan_seconds)
                           .Real(6, record.new_makespan_seconds)
                           .Real(7, record.solve_seconds)
                           .Text(8, record.reason);
                     });
}

absl::StatusOr<std::vector<ResolveRecord>> SqliteStore::ListResolveRecords(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  std::vector<ResolveRecord> records;
  absl::Status status = ReadForJob(
      job_id, statements_->list_resolve_records,
      absl::StrCat("re-solve records of job ", Quote(job_id)), [&](Run& row) {
        ResolveRecord& record = records.emplace_back();
        record.job_id = job_id;
        record.step = row.ColumnInt(0);
        record.published = row.ColumnInt(1) != 0;
        record.version = row.ColumnInt(2);
        record.old_makespan_seconds = row.ColumnReal(3);
        record.new_makespan_seconds = row.ColumnReal(4);
        record.solve_seconds = row.ColumnReal(5);
        record.reason = row.ColumnText(6);
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return records;
}

// ---------------------------------------------------------------------------
// Recovery.

absl::StatusOr<StoredState> SqliteStore::LoadAll() {
  absl::MutexLock lock(&mu_);
  StoredState state;
  absl::Status status = InTransaction(
      Access::kRead, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        {
          Run run(statements_->load_jobs);
          if (absl::Status s = ReadRows(run, "jobs", [&](Run& row) {
                return ParseColumn(row, 0, "jobs", &state.jobs.emplace_back());
              });
              !s.ok()) {
            return s;
          }
        }
        {
          Run run(statements_->load_schedule_versions);
          if (absl::Status s = ReadRows(run, "schedule_versions", [&](Run& row) {
                return ParseColumn(row, 0, "schedule_versions",
                                   &state.schedule_versions.emplace_back());
              });
              !s.ok()) {
            return s;
          }
        }
        Run run(statements_->load_checkpoints);
        return ReadRows(run, "checkpoints", [&](Run& row) {
          absl::StatusOr<CheckpointRecord> checkpoint = ReadCheckpoint(row);
          if (!checkpoint.ok()) return checkpoint.status();
          state.checkpoints.push_back(*std::move(checkpoint));
          return absl::OkStatus();
        });
      });
  if (!status.ok()) return status;
  return state;
}

}  // namespace zbpp::coordinator
