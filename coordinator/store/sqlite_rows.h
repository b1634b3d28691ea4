#ifndef ZBPP_COORDINATOR_STORE_SQLITE_ROWS_H_
#define ZBPP_COORDINATOR_STORE_SQLITE_ROWS_H_

// SqliteStore's internals shared by its files (sqlite_store.cc: the
// connection, schema and statements; sqlite_jobs.cc: the records;
// sqlite_schedule_files.cc: schedule files once per content): its prepared
// statements, one use of a statement (Run), and the transaction templates.
// Include from those files only.

#include <sqlite3.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "coordinator/store/sqlite_store.h"

namespace zbpp::coordinator {
namespace sqlite_detail {

// Stores a schedule file's text (?2) under its SHA-256 (?1), once.
inline constexpr char kInsertScheduleFile[] =
    "INSERT INTO schedule_files (sha256, text) VALUES (?1, ?2) "
    "ON CONFLICT (sha256) DO NOTHING";

// A quoted id for messages; ids are the coordinator's own, but a bad one
// should still read unambiguously.
inline std::string Quote(const std::string& id) { return absl::StrCat("\"", id, "\""); }
// Serializes `message` into `out`; InvalidArgument naming `field` when it
// cannot be (a message over 2 GiB, or a missing required field of proto2).
inline absl::Status Serialize(const google::protobuf::MessageLite& message,
                              absl::string_view field, std::string* out) {
  if (!message.SerializeToString(out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": cannot be serialized (",
                     message.ByteSizeLong(), " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace sqlite_detail

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
  Statement put_cost_snapshot, list_cost_snapshots;
  Statement put_step_summary, list_step_summaries;
  Statement put_validation_outcome, list_validation_outcomes;
  Statement put_checkpoint, load_checkpoints, list_checkpoints_at;
  Statement insert_resolve_record, list_resolve_records;
  /// Schedule files, once per content (sqlite_schedule_files.cc).
  Statement insert_schedule_file, load_schedule_files, load_schedule_file_of_jobs,
      delete_unused_schedule_files;
  /// DeleteJob's, children first (their foreign keys name the job).
  Statement delete_schedule_versions, delete_cost_snapshots, delete_step_summaries,
      delete_validation_outcomes, delete_checkpoints, delete_resolve_records, delete_job;
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
  // SQL NULL.
  Run& Null(int index) { return Check(sqlite3_bind_null(stmt_, index)); }
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
  bool ColumnIsNull(int column) const {
    return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
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

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_STORE_SQLITE_ROWS_H_
