// Dataset paths through real daemons: a FIFO no longer hangs the workers
// (the job fails at once and they take the next job), a worker confined by
// --data-root refuses a file outside its roots without disclosing anything
// about it, and a token file inside them trains.

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/e2e/cluster.h"
#include "zbpp/v1/job.grpc.pb.h"

namespace zbpp::worker::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::zbpp::worker::testing::TestDirectory;
using ::zbpp::worker::testing::WriteFile;

// A failed preparation must be answered in seconds, not by the test's
// timeout.
const absl::Duration kPromptly = absl::Seconds(40);

TEST(DatasetPathE2e, FifoFailsTheJobAtOnceAndTheWorkersTakeTheNextJob) {
  TestDirectory scratch;
  const std::string fifo = scratch / "corpus.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(scratch.path(), 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  v1::JobSpec spec = SmallBibleJob(2);
  spec.mutable_dataset()->set_text_file(fifo);
  absl::StatusOr<v1::Job> job = (*cluster)->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<JobOutcome> outcome = (*cluster)->WaitForEnd(job->id(), kPromptly);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(outcome->job.state_message(),
              HasSubstr(absl::StrCat("dataset.text_file \"", fifo, "\" is a FIFO")));

  // The same workers run the next job.
  absl::StatusOr<JobOutcome> next = (*cluster)->Run(SmallBibleJob(2));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->job.state(), v1::JOB_STATE_SUCCEEDED) << next->job.state_message();
}

TEST(DatasetPathE2e, DataRootsConfineTheWorkersAndATokenFileInsideTrains) {
  TestDirectory scratch;
  std::filesystem::create_directories(scratch / "data");
  std::filesystem::create_directories(scratch / "private");
  // 12,345 bytes outside the roots: neither the number nor the text may
  // reach the job's message.
  WriteFile(scratch / "private/secret.txt", std::string(12345, 's'));
  // 40,000 uint16 ids below a vocabulary of 512 (a cycle with a period
  // coprime to the vocabulary, so that there is something to learn).
  std::string ids;
  for (int i = 0; i < 40000; ++i) {
    const int id = (i * 7) % 509;
    ids.push_back(static_cast<char>(id & 0xff));
    ids.push_back(static_cast<char>(id >> 8));
  }
  WriteFile(scratch / "data/train.bin", ids);

  ClusterOptions options;
  options.directory = scratch.path();
  options.worker_flags = {"--data-root", scratch / "data"};
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  for (const std::string& outside : {scratch / "private/secret.txt", std::string("/etc/shadow"),
                                     scratch / "data/../private/secret.txt"}) {
    v1::JobSpec spec = SmallBibleJob(2);
    spec.mutable_dataset()->set_text_file(outside);
    absl::StatusOr<v1::Job> job = (*cluster)->Submit(spec);
    if (!job.ok()) {
      // The coordinator refuses ".." itself, before any worker sees it.
      EXPECT_THAT(std::string(job.status().message()), HasSubstr("must be a normal path"));
      continue;
    }
    absl::StatusOr<JobOutcome> outcome = (*cluster)->WaitForEnd(job->id(), kPromptly);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(outcome->job.state(), v1::JOB_STATE_FAILED);
    EXPECT_THAT(outcome->job.state_message(),
                HasSubstr(absl::StrCat("dataset.text_file \"", outside,
                                       "\": outside the worker's data roots (--data-root)")));
    EXPECT_THAT(outcome->job.state_message(), Not(HasSubstr("12345")));
  }

  v1::JobSpec spec = SmallBibleJob(3);
  spec.mutable_model()->set_vocab(512);
  spec.mutable_dataset()->mutable_tokens()->set_path(scratch / "data/train.bin");
  absl::StatusOr<JobOutcome> trained = (*cluster)->Run(spec);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_EQ(trained->job.state(), v1::JOB_STATE_SUCCEEDED) << trained->job.state_message();
  EXPECT_GT(trained->job.last_step().loss(), 0);
}

}  // namespace
}  // namespace zbpp::worker::e2e
