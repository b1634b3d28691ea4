// What a list and a stored text may cost, on a CoordinatorServer in process
// over gRPC (whose default message limit is 4 MiB): ListJobs' basic view
// carries no schedule file text, pages are followed, CancelJob's reason and
// a request's job id are bounded, and the active-job cap refuses a submit.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "common/job_limits.h"
#include "coordinator/core/planning.h"
#include "coordinator/server/coordinator_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/schedule_io.h"
#include "testing/fake_pipeline.h"
#include "tests/coordinator/grpc_fake_worker.h"
#include "zbpp/v1/job.grpc.pb.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::CallContext;

std::unique_ptr<CoordinatorServer> StartServer(int max_active_jobs = 1000) {
  CoordinatorServer::Options options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "127.0.0.1:0";
  options.db = ":memory:";
  options.core.max_active_jobs = max_active_jobs;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Create(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// A spec running its generator's schedule from a JSON file padded with
// whitespace to just under the 3 MiB a file may hold.
v1::JobSpec WithLargeScheduleFile() {
  v1::JobSpec spec = testing::TestSpec(2, 4, "zb-1p", 10);
  const sched::Schedule schedule =
      *sched::Generate(spec.schedule().name(), *InitialProblem(spec));
  std::string text = sched::ScheduleToJson(schedule);
  text.append(kMaxScheduleFileBytes - 16 - text.size(), ' ');
  spec.mutable_schedule()->clear_name();
  spec.mutable_schedule()->set_file("big.json");
  spec.mutable_schedule()->set_file_text(text);
  return spec;
}

TEST(JobListLimitsTest, ListOfJobsWithThreeMebibyteScheduleFilesFitsOneMessage) {
  std::unique_ptr<CoordinatorServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = WithLargeScheduleFile();
  ASSERT_GT(submit.spec().schedule().file_text().size(), (size_t{3} << 20) - 1024);
  for (int i = 0; i < 3; ++i) {
    v1::Job job;
    const grpc::Status submitted = jobs->SubmitJob(CallContext("", "").get(), submit, &job);
    ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  }
  v1::ListJobsResponse listed;
  const grpc::Status status = jobs->ListJobs(CallContext("", "").get(), {}, &listed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(listed.jobs_size(), 3);
  for (const v1::Job& job : listed.jobs()) {
    EXPECT_EQ(job.spec().schedule().file(), "big.json");
    EXPECT_EQ(job.spec().schedule().file_text(), "");
  }
  // One job in full still carries it.
  v1::GetJobRequest get;
  get.set_job_id(listed.jobs(0).id());
  get.set_view(v1::JOB_VIEW_FULL);
  v1::Job full;
  ASSERT_TRUE(jobs->GetJob(CallContext("", "").get(), get, &full).ok());
  EXPECT_EQ(full.spec().schedule().file_text(), submit.spec().schedule().file_text());

  // Pages of one: each job once, newest first.
  v1::ListJobsRequest page_request;
  page_request.set_page_size(1);
  std::vector<std::string> seen;
  do {
    v1::ListJobsResponse page;
    ASSERT_TRUE(jobs->ListJobs(CallContext("", "").get(), page_request, &page).ok());
    for (const v1::Job& job : page.jobs()) seen.push_back(job.id());
    page_request.set_page_token(page.next_page_token());
  } while (!page_request.page_token().empty());
  EXPECT_EQ(seen, (std::vector<std::string>{"job-3", "job-2", "job-1"}));
}

TEST(JobListLimitsTest, LongReasonsAndJobIdsAreRefusedNamingTheField) {
  std::unique_ptr<CoordinatorServer> server = StartServer();
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = testing::TestSpec(2, 4);
  v1::Job job;
  ASSERT_TRUE(jobs->SubmitJob(CallContext("", "").get(), submit, &job).ok());

  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  cancel.set_reason(std::string(1 << 20, 'r'));
  v1::Job cancelled;
  grpc::Status refused = jobs->CancelJob(CallContext("", "").get(), cancel, &cancelled);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("reason: at most 1024 bytes, got 1048576"));
  v1::GetJobRequest get;
  get.set_job_id(job.id());
  v1::Job unchanged;
  ASSERT_TRUE(jobs->GetJob(CallContext("", "").get(), get, &unchanged).ok());
  EXPECT_EQ(unchanged.state(), v1::JOB_STATE_PENDING);

  get.set_job_id(std::string(1 << 20, 'j'));
  refused = jobs->GetJob(CallContext("", "").get(), get, &unchanged);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("job_id: at most 64 bytes"));
  EXPECT_LT(refused.error_message().size(), 200u);

  cancel.set_reason(std::string(1024, 'r'));
  ASSERT_TRUE(jobs->CancelJob(CallContext("", "").get(), cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.state_message(), cancel.reason());
}

TEST(JobListLimitsTest, SubmitPastTheActiveJobCapIsResourceExhausted) {
  std::unique_ptr<CoordinatorServer> server = StartServer(/*max_active_jobs=*/2);
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = testing::TestSpec(2, 4);
  v1::Job job;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(jobs->SubmitJob(CallContext("", "").get(), submit, &job).ok());
  }
  grpc::Status refused = jobs->SubmitJob(CallContext("", "").get(), submit, &job);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-active-jobs"));
  // A finished job no longer counts.
  v1::CancelJobRequest cancel;
  cancel.set_job_id("job-1");
  v1::Job cancelled;
  ASSERT_TRUE(jobs->CancelJob(CallContext("", "").get(), cancel, &cancelled).ok());
  const grpc::Status submitted = jobs->SubmitJob(CallContext("", "").get(), submit, &job);
  EXPECT_TRUE(submitted.ok()) << submitted.error_message();
  EXPECT_EQ(job.id(), "job-3");
}

}  // namespace
}  // namespace zbpp::coordinator
