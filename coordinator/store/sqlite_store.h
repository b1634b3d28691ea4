#ifndef ZBPP_COORDINATOR_STORE_SQLITE_STORE_H_
#define ZBPP_COORDINATOR_STORE_SQLITE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace zbpp::coordinator {

/// The coordinator's default Store: one SQLite database, a file or
/// `:memory:` (docs/control-plane.md, "The control plane").
///
/// Records are kept as serialized protobuf BLOBs, with the columns needed to
/// look them up or order them (job id, state, create time, version, step)
/// beside them. The schema carries its version in `schema_version` and is
/// migrated forward by `Create`. File databases run in WAL mode.
///
/// `Options::exclusive` (the default, what zbpp-coordinator uses: it is the
/// only user of its database) sets `PRAGMA locking_mode = EXCLUSIVE` before
/// the first access: the connection holds the file's lock until it closes,
/// and SQLite keeps the WAL index in heap memory instead of a memory-mapped
/// `-shm` file (sqlite.org/wal.html, "Use of WAL Without Shared-Memory"), so
/// a `-shm` file made unwritable or truncated behind the coordinator's back
/// cannot kill it with SIGBUS — there is none. Another process (a second
/// coordinator, `sqlite3 FILE`) cannot open the database meanwhile.
///
/// Moved files: before each transaction a file store checks that its path
/// and the path's `-wal` still name the files it opened (device and inode,
/// recorded by `Create`). A database or WAL file deleted or replaced while
/// open fails every call with Internal saying so, instead of committing
/// into an unlinked file that a restart would never see.
///
/// Every public call is one `BEGIN IMMEDIATE … COMMIT` transaction, rolled
/// back on any error, so a failed call changes nothing. Errors follow
/// `Store`'s contract, with the SQLite message (and the database path)
/// included: AlreadyExists, NotFound, InvalidArgument naming the field;
/// Unavailable when the database stays busy/locked past
/// `busy_timeout_milliseconds` or on I/O errors and a full disk; Internal for
/// a corrupt database or record, a moved file, and anything else.
///
/// Thread-safety: thread-safe; calls are serialized on one connection.
/// Without `exclusive`, two SqliteStores (or processes) on one file are safe
/// too: SQLite's file locks order them, each waiting up to
/// `busy_timeout_milliseconds`.
class SqliteStore final : public Store {
 public:
  /// How to open the database.
  struct Options {
    // Where.
    /// A file path (created, with its schema, when missing; its directory
    /// must exist), or ":memory:" for a private in-memory database that
    /// lives as long as the store (tests).
    std::string path = ":memory:";

    // Concurrency and durability.
    /// How long a call waits for a lock held by another connection before
    /// it fails with Unavailable, milliseconds; >= 0.
    int busy_timeout_milliseconds = 5000;
    /// true: fsync on every commit (`synchronous=FULL`), so a committed call
    /// survives power loss; false: `synchronous=NORMAL`, which in WAL mode
    /// survives a crash of the process but may lose the last commits on
    /// power loss, for less latency per call.
    bool fsync_every_commit = true;
    /// Files only: `PRAGMA locking_mode = EXCLUSIVE` (the class comment):
    /// no `-shm` file, and no other connection to the file while this store
    /// is open (`Create` fails with Unavailable when another holds it).
    bool exclusive = true;
  };

  /// The newest schema version this binary writes; `Create` migrates older
  /// databases up to it and refuses newer ones (FailedPrecondition).
  static constexpr int kSchemaVersion = 3;
  /// The schema that stores schedule files once per content (a
  /// `schedule_files` table the jobs name by SHA-256); migrating a database
  /// to it moves every job's inline schedule.file_text there.
  static constexpr int kScheduleFilesSchema = 3;

  /// Opens (creating or migrating as needed) the database at
  /// `options.path`. Errors name the path: InvalidArgument for a bad option;
  /// Internal when the file cannot be opened or is not a SQLite database
  /// (e.g. its directory is missing or unwritable, or the file is corrupt);
  /// Unavailable when another connection holds it past the busy timeout;
  /// FailedPrecondition when its schema is newer than `kSchemaVersion`.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Create(Options options);

  /// Closes the database (pending statements are finalized first).
  ~SqliteStore() override;

  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  /// See Store. InvalidArgument for an empty `id`. Schedule files: Store's
  /// contract, in the `schedule_files` table (kScheduleFilesSchema).
  absl::Status CreateJob(const zbpp::v1::Job& job) override;
  /// See Store. Also updates the `state` and `create_time` columns.
  absl::Status UpdateJob(const zbpp::v1::Job& job) override;
  /// See Store.
  absl::StatusOr<zbpp::v1::Job> GetJob(const std::string& job_id) override;

  /// See Store. NotFound for an unknown job; InvalidArgument for an empty
  /// `job_id` or `version` < 1; AlreadyExists for a stored (job, version).
  absl::Status AddScheduleVersion(
      const zbpp::v1::ScheduleVersion& version) override;
  /// See Store: one `INSERT … ON CONFLICT (job_id, step) DO UPDATE`.
  /// NotFound for an unknown job; InvalidArgument for `step` < 0.
  absl::Status PutCostSnapshot(const std::string& job_id, int64_t step,
                               const zbpp::v1::CostModel& costs) override;
  /// See Store, as PutCostSnapshot. NotFound for an unknown job;
  /// InvalidArgument for a negative step.
  absl::Status PutStepSummary(const std::string& job_id,
                              const zbpp::v1::StepSummary& step) override;
  /// See Store. NotFound for an unknown job; InvalidArgument for `limit` <
  /// 0 (0 returns nothing).
  absl::StatusOr<std::vector<zbpp::v1::StepSummary>> ListStepSummaries(
      const std::string& job_id, int64_t from_step, int limit) override;
  /// See Store, as PutCostSnapshot. NotFound for an unknown job;
  /// InvalidArgument for a negative step.
  absl::Status PutValidationOutcome(
      const std::string& job_id,
      const zbpp::v1::ValidationOutcome& outcome) override;
  /// See Store. NotFound for an unknown job.
  absl::StatusOr<std::vector<zbpp::v1::ValidationOutcome>>
  ListValidationOutcomes(const std::string& job_id) override;
  /// See Store. NotFound for an unknown job; InvalidArgument for a negative
  /// step or stage, or data_parallel < 1. `stages_written` is stored sorted
  /// and deduplicated.
  absl::Status PutCheckpoint(const CheckpointRecord& checkpoint) override;
  /// See Store. InvalidArgument for a negative step.
  absl::StatusOr<std::vector<CheckpointRecord>> ListCheckpointsAt(
      const std::string& directory, int64_t step) override;
  /// See Store. NotFound for an unknown job.
  absl::Status AddResolveRecord(const ResolveRecord& record) override;
  /// See Store. NotFound for an unknown job.
  absl::StatusOr<std::vector<ResolveRecord>> ListResolveRecords(
      const std::string& job_id) override;
  /// See Store. NotFound for an unknown job.
  absl::StatusOr<std::vector<std::pair<int64_t, zbpp::v1::CostModel>>>
  ListCostSnapshots(const std::string& job_id) override;
  /// See Store: one transaction, the job's rows in every table.
  absl::Status DeleteJob(const std::string& job_id) override;

  /// See Store: jobs in creation (insertion) order, schedule versions by
  /// (job id, version), checkpoints by (job id, step). One read
  /// transaction, so the three lists are consistent with each other.
  absl::StatusOr<StoredState> LoadAll() override;

  /// See Store: the moved-file check of the class comment (OK in memory).
  absl::Status Probe() override;

  /// The database path this store was opened with (for messages).
  const std::string& path() const { return options_.path; }

 private:
  class Statement;
  struct Statements;
  class Run;

  explicit SqliteStore(Options options);

  absl::Status Open() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Records the device and inode of the database file and its `-wal`.
  absl::Status RecordFiles() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Internal naming the file when one recorded by RecordFiles was deleted
  /// or replaced since; OK for `:memory:`.
  absl::Status CheckFiles() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Migration to kScheduleFilesSchema, inside Migrate's transaction: each
  /// job record's schedule.file_text moved to `schedule_files`, the job's
  /// `schedule_file` column naming it.
  absl::Status MoveScheduleFilesOut() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// CreateJob (`create`) and UpdateJob: the job's row, its schedule file
  /// stored once per content first (Store's contract).
  absl::Status WriteJob(const zbpp::v1::Job& job, bool create) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Prepare() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// What a transaction does: kWrite takes the write lock at BEGIN.
  enum class Access { kRead, kWrite };
  /// Runs `body` inside BEGIN … COMMIT (IMMEDIATE for kWrite), rolling back
  /// when it (or the COMMIT) fails.
  template <typename Body>
  absl::Status InTransaction(Access access, Body body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// OK when `job_id` is stored, NotFound otherwise.
  absl::Status CheckJobExists(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// One write transaction that checks `job_id` is stored (NotFound) and
  /// runs `statement` once, its parameters bound by `bind(Run&)`; `what`
  /// names the record in errors.
  template <typename Bind>
  absl::Status WriteForJob(const std::string& job_id,
                           const Statement& statement,
                           const std::string& what, Bind bind)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// One read transaction that checks `job_id` is stored (NotFound), binds
  /// it to ?1 of `statement` and passes each row to `read(Run&)`.
  template <typename Read>
  absl::Status ReadForJob(const std::string& job_id,
                          const Statement& statement,
                          const std::string& what, Read read)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Steps `run` to its end, passing each row to `read(Run&)`, which
  /// returns a Status; `what` names the rows in errors.
  template <typename Read>
  absl::Status ReadRows(Run& run, const std::string& what, Read read)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Parses BLOB column `column` of the current row into `message`;
  /// Internal naming `what` and the path when it is not one.
  absl::Status ParseColumn(const Run& run, int column,
                           const std::string& what,
                           google::protobuf::MessageLite* message) const;
  /// The checkpoint record in the current row of `run`, whose columns are
  /// job_id, step, directory, stages_written, complete, data_parallel;
  /// Internal naming the path for a malformed one.
  absl::StatusOr<CheckpointRecord> ReadCheckpoint(const Run& run) const;
  /// Runs `sql` (no results) on the connection.
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// A status for SQLite result code `rc` of operation `what`, with the
  /// connection's message and the path.
  absl::Status Error(int rc, const std::string& what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<Statements> statements_ ABSL_GUARDED_BY(mu_);
  /// A file the connection holds open: its path, device and inode.
  struct OpenFile {
    std::string path;
    uint64_t device = 0;
    uint64_t inode = 0;
  };
  std::vector<OpenFile> files_ ABSL_GUARDED_BY(mu_);  ///< Empty in memory.
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_STORE_SQLITE_STORE_H_
