// The SQLite store's file (coordinator/store/sqlite_store.h): a restart
// recovers everything, bad paths and corrupt files are named, schema
// versions, concurrent writers, the exclusive lock, and a database deleted
// or replaced under a running store.

#include "coordinator/store/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/sqlite_store_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using testing::EqualsProto;
using testing::ExpectSameState;
using testing::LoadAllOrDie;
using testing::MakeJob;
using testing::MakeOutcome;
using testing::MakeStep;
using testing::MakeVersion;
using testing::Open;
using testing::Populate;
using testing::TestDir;

// The error of opening `path`; OK when it opens.
absl::Status CreateStatus(const std::string& path) {
  SqliteStore::Options options;
  options.path = path;
  return SqliteStore::Create(options).status();
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
        EXPECT_TRUE(store->PutStepSummary(id, MakeStep(step)).ok());
        // Every thread also appends to job 0's history (once job 0
        // exists): all threads contend for the same rows' table and index.
        absl::Status s = store->PutValidationOutcome(
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
      absl::Status s = store->PutStepSummary("j", MakeStep(step));
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
  ASSERT_TRUE(store->PutStepSummary("j", MakeStep(0)).ok());
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
                    (*store)->PutStepSummary("j", MakeStep(0)).ok();
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
  absl::Status write = store->PutStepSummary("j", MakeStep(0));
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
  absl::Status write = store->PutStepSummary("j", MakeStep(0));
  EXPECT_EQ(write.code(), absl::StatusCode::kInternal) << write;
  EXPECT_THAT(write.message(), HasSubstr(path + "-wal was replaced"));
}

}  // namespace
}  // namespace zbpp::coordinator
