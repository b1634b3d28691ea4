// coordinator/core/store_queries.h over an in-memory SQLite store:
// CheckResumable (a checkpoint resumes only with the data_parallel that
// wrote it), CheckListStepsRequest's refusals and ListStoredSteps' pages.

#include "coordinator/core/store_queries.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/store/sqlite_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class StoreQueriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store =
        SqliteStore::Create({});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  /// Creates job `job_id` and records its checkpoint of `step` in
  /// /ckpt, written with `data_parallel` replicas; `complete` or not.
  void Checkpoint(const std::string& job_id, int64_t step, int data_parallel,
                  bool complete = true) {
    v1::Job job;
    job.set_id(job_id);
    if (!store_->GetJob(job_id).ok()) {
      ASSERT_TRUE(store_->CreateJob(job).ok());
    }
    CheckpointRecord record;
    record.job_id = job_id;
    record.step = step;
    record.directory = "/ckpt";
    record.stages_written =
        complete ? std::vector<int32_t>{0, 1} : std::vector<int32_t>{0};
    record.complete = complete;
    record.data_parallel = data_parallel;
    ASSERT_TRUE(store_->PutCheckpoint(record).ok());
  }

  /// A spec resuming /ckpt (with `directory`) at `step` with `data_parallel`
  /// replicas (0: the field unset, meaning 1).
  static v1::JobSpec Resuming(int64_t step, int data_parallel,
                              const std::string& directory = "/ckpt") {
    v1::JobSpec spec;
    spec.mutable_checkpoint()->set_directory(directory);
    spec.mutable_checkpoint()->set_resume_step(step);
    if (data_parallel > 0)
      spec.mutable_pipeline()->set_data_parallel(data_parallel);
    return spec;
  }

  std::unique_ptr<SqliteStore> store_;
};

TEST_F(StoreQueriesTest, ASpecThatResumesNothingIsResumable) {
  Checkpoint("job-1", 10, 2);
  v1::JobSpec spec;
  spec.mutable_checkpoint()->set_directory("/ckpt");
  EXPECT_TRUE(CheckResumable(*store_, spec).ok());
}

TEST_F(StoreQueriesTest, ResumesWithTheDataParallelThatWroteTheCheckpoint) {
  Checkpoint("job-1", 10, 2);
  Checkpoint("job-2", 20, 1);
  EXPECT_TRUE(CheckResumable(*store_, Resuming(10, 2)).ok());
  EXPECT_TRUE(CheckResumable(*store_, Resuming(20, 1)).ok());
  // An unset data_parallel is 1.
  EXPECT_TRUE(CheckResumable(*store_, Resuming(20, 0)).ok());
  // The same directory up to trailing slashes.
  EXPECT_TRUE(CheckResumable(*store_, Resuming(10, 2, "/ckpt/")).ok());
}

TEST_F(StoreQueriesTest, RefusesAnotherDataParallelNamingTheCheckpoint) {
  Checkpoint("job-1", 10, 2);
  for (int data_parallel : {0, 1, 4}) {
    const absl::Status status =
        CheckResumable(*store_, Resuming(10, data_parallel));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << data_parallel;
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr(absl::StrCat(
                          "pipeline.data_parallel: ",
                          data_parallel == 0 ? 1 : data_parallel,
                          " cannot resume the checkpoint of step 10 in /ckpt")),
                      HasSubstr("job job-1 wrote it with data_parallel = 2")));
  }
}

// What no complete record says (an unfinished checkpoint, another step or
// directory, nothing recorded) is not the coordinator's to refuse: the
// workers find the files or fail the job naming them.
TEST_F(StoreQueriesTest, AStepWithoutACompleteRecordIsNotRefused) {
  Checkpoint("job-1", 10, 2, /*complete=*/false);
  EXPECT_TRUE(CheckResumable(*store_, Resuming(10, 1)).ok());
  EXPECT_TRUE(CheckResumable(*store_, Resuming(11, 1)).ok());
  EXPECT_TRUE(CheckResumable(*store_, Resuming(10, 1, "/elsewhere")).ok());
}

TEST(CheckListStepsRequestTest, RefusesNegativeFromStepAndPageSize) {
  v1::ListStepsRequest request;
  EXPECT_TRUE(CheckListStepsRequest(request).ok());
  request.set_from_step(-1);
  EXPECT_EQ(CheckListStepsRequest(request).message(),
            "from_step: must be >= 0, got -1");
  request.set_from_step(0);
  request.set_page_size(-5);
  EXPECT_EQ(CheckListStepsRequest(request).message(),
            "page_size: must be >= 0, got -5");
}

TEST_F(StoreQueriesTest, ListsStepsInPagesAndSaysWhereTheNextStarts) {
  v1::Job job;
  job.set_id("job-1");
  ASSERT_TRUE(store_->CreateJob(job).ok());
  for (int64_t step = 0; step < 5; ++step) {
    v1::StepSummary summary;
    summary.set_step(step);
    ASSERT_TRUE(store_->PutStepSummary("job-1", summary).ok());
  }
  v1::ListStepsRequest request;
  request.set_job_id("job-1");
  request.set_from_step(1);
  request.set_page_size(2);
  absl::StatusOr<v1::ListStepsResponse> page =
      ListStoredSteps(*store_, request);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->steps_size(), 2);
  EXPECT_EQ(page->steps(0).step(), 1);
  EXPECT_EQ(page->steps(1).step(), 2);
  EXPECT_EQ(page->next_from_step(), 3);
  request.set_from_step(3);
  page = ListStoredSteps(*store_, request);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->steps_size(), 2);
  EXPECT_EQ(page->next_from_step(),
            -1);  // Exactly the last two: no page follows.
  request.set_from_step(0);
  request.set_page_size(0);  // 0: the default page, here all five.
  page = ListStoredSteps(*store_, request);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->steps_size(), 5);
  EXPECT_EQ(page->next_from_step(), -1);
}

}  // namespace
}  // namespace zbpp::coordinator
