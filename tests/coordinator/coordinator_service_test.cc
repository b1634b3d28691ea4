// The coordinator's gRPC services in process on 127.0.0.1:0, with fake
// workers (threads speaking the real protocol): a re-solve reaching every
// worker, the token and the worker credential, and attacks on a running
// job. The zbpp-coordinator binary itself is coordinator_daemon_test.cc's.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/call_auth.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/service/job_service.h"
#include "coordinator/service/rendezvous_service.h"
#include "coordinator/service/session_gate.h"
#include "coordinator/service/worker_service.h"
#include "coordinator/store/sqlite_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/coordinator_metrics.h"
#include "prometheus/registry.h"
#include "testing/fake_pipeline.h"
#include "testing/fake_worker.h"
#include "tests/coordinator/grpc_fake_worker.h"
#include "tests/metrics/exposition.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/rendezvous.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::TestSpec;
using testing::TrueCosts;

constexpr char kToken[] = "s3cret";

std::unique_ptr<grpc::ClientContext> Context(bool with_token = true) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(20));
  if (with_token) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  }
  return context;
}

/// Context() carrying `credential` as the worker credential.
std::unique_ptr<grpc::ClientContext> WorkerContext(const std::string& credential) {
  auto context = Context();
  context->AddMetadata(kWorkerCredentialMetadataKey, credential);
  return context;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *SqliteStore::Create({":memory:"});
    Coordinator::Options options;
    options.store = store_.get();
    options.heartbeat_interval_seconds = 1;
    options.heartbeat_timeout_seconds = 60;
    core_ = *Coordinator::Create(options);
    ASSERT_TRUE(core_->Recover().ok());
    registry_ = std::make_shared<prometheus::Registry>();
    metrics::CoordinatorMetrics::Options metrics_options;
    metrics_options.rpc_services = {"zbpp.v1.JobService"};
    metrics_ = *metrics::CoordinatorMetrics::Create(metrics_options, registry_);
    jobs_ = std::make_unique<JobServiceImpl>(
        JobServiceImpl::Options{core_.get(), {metrics_.get(), kToken}});
    // The clock never moves unless a test moves it: no stream is cancelled
    // for its silence behind a test's back.
    session_gate_ = *SessionGate::Create({&gate_clock_, absl::Seconds(10), kMaxUnopened});
    workers_ = std::make_unique<WorkerServiceImpl>(WorkerServiceImpl::Options{
        core_.get(), {nullptr, kToken}, 0.05, session_gate_.get()});
    rendezvous_ = std::make_unique<RendezvousServiceImpl>(
        RendezvousServiceImpl::Options{core_.get(), {nullptr, kToken}});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(jobs_.get());
    builder.RegisterService(workers_.get());
    builder.RegisterService(rendezvous_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                       grpc::InsecureChannelCredentials());
    job_stub_ = zbpp::v1::JobService::NewStub(channel);
    worker_stub_ = zbpp::v1::WorkerService::NewStub(channel);
    rendezvous_stub_ = zbpp::v1::RendezvousService::NewStub(channel);
  }

  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(2));
    server_->Wait();
  }

  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Coordinator> core_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  std::unique_ptr<JobServiceImpl> jobs_;
  static constexpr int kMaxUnopened = 8;
  FakeClock gate_clock_;
  std::unique_ptr<SessionGate> session_gate_;
  std::unique_ptr<WorkerServiceImpl> workers_;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<zbpp::v1::JobService::Stub> job_stub_;
  std::unique_ptr<zbpp::v1::WorkerService::Stub> worker_stub_;
  std::unique_ptr<zbpp::v1::RendezvousService::Stub> rendezvous_stub_;
};

using testing::WorkerLog;

/// testing::RunFakeWorker with this suite's token.
void RunFakeWorker(zbpp::v1::WorkerService::Stub* stub,
                   zbpp::v1::RendezvousService::Stub* kv, int n,
                   const sched::Problem& truth, WorkerLog* log) {
  testing::RunFakeWorker(stub, kv, n, truth, kToken, log);
}

TEST_F(ServiceTest, StragglerGetsShorterScheduleAllWorkersSwitchTogether) {
  const zbpp::v1::JobSpec spec = testing::Uncalibrated(TestSpec(4, 8, "zb-1p", 12, 2));
  zbpp::v1::SubmitJobRequest submit;
  *submit.mutable_spec() = spec;
  zbpp::v1::Job job;
  ASSERT_TRUE(job_stub_->SubmitJob(Context(true).get(), submit, &job).ok());

  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  std::vector<WorkerLog> logs(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(RunFakeWorker, worker_stub_.get(),
                         rendezvous_stub_.get(), i, std::cref(truth),
                         &logs[i]);
  }
  for (auto& t : threads) t.join();

  zbpp::v1::GetJobRequest get;
  get.set_job_id(job.id());
  zbpp::v1::Job done;
  ASSERT_TRUE(job_stub_->GetJob(Context().get(), get, &done).ok());
  EXPECT_EQ(done.state(), zbpp::v1::JOB_STATE_SUCCEEDED)
      << done.state_message();
  ASSERT_GE(done.schedule_version(), 2);
  for (const auto& log : logs) {
    EXPECT_EQ(log.error, "");
    EXPECT_TRUE(log.rendezvous_ok);
    ASSERT_GE(log.worker.versions.size(), 2u);
  }
  const zbpp::v1::ScheduleVersion& v2 = logs[0].worker.versions[1];
  EXPECT_EQ(v2.reason(), zbpp::v1::SCHEDULE_CHANGE_REASON_RESOLVE);
  // Shorter than the old schedule under the same measured costs.
  EXPECT_LT(v2.predicted().makespan_seconds(),
            v2.previous_predicted().makespan_seconds());
  // Every worker ran each step with the same version; the switch to v2
  // happened at its effective step on all of them.
  for (int64_t step = 0; step < 12; ++step) {
    for (const auto& log : logs) {
      ASSERT_TRUE(log.worker.version_of_step.count(step)) << step;
      EXPECT_EQ(log.worker.version_of_step.at(step),
                logs[0].worker.version_of_step.at(step));
    }
  }
  EXPECT_EQ(logs[0].worker.version_of_step.at(v2.effective_step() - 1), 1);
  EXPECT_EQ(logs[0].worker.version_of_step.at(v2.effective_step()), 2);

  // The measured timeline of the last step: every rank, one start and end
  // per action of the version it ran.
  const zbpp::v1::StepTimeline& timeline = done.last_step_timeline();
  EXPECT_EQ(timeline.step(), 11);
  ASSERT_EQ(timeline.stages_size(), 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(timeline.stages(r).action_start_seconds_size(),
              done.schedule().schedule().stage_actions(r).actions_size());
  }

  // The training curve, paged: every step once, ascending, with its stages.
  std::vector<int64_t> seen;
  zbpp::v1::ListStepsRequest list;
  list.set_job_id(job.id());
  list.set_page_size(5);
  int pages = 0;
  do {
    zbpp::v1::ListStepsResponse page;
    ASSERT_TRUE(job_stub_->ListSteps(Context().get(), list, &page).ok());
    ++pages;
    for (const auto& step : page.steps()) {
      seen.push_back(step.step());
      EXPECT_EQ(step.stages_size(), 4);
    }
    list.set_from_step(page.next_from_step());
  } while (list.from_step() >= 0);
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(seen.size(), 12u);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(seen[i], i);

  zbpp::v1::ListStepsResponse none;
  list.set_from_step(-1);
  EXPECT_EQ(job_stub_->ListSteps(Context().get(), list, &none).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  list.set_from_step(0);
  list.set_job_id("job-unknown");
  EXPECT_EQ(job_stub_->ListSteps(Context().get(), list, &none).error_code(),
            grpc::StatusCode::NOT_FOUND);

  // Every version by number: the one the last step ran, and version 1.
  zbpp::v1::GetScheduleVersionRequest get_version;
  get_version.set_job_id(job.id());
  zbpp::v1::ScheduleVersion version;
  for (int64_t number : {timeline.schedule_version(), int64_t{1}}) {
    get_version.set_version(number);
    grpc::Status got = job_stub_->GetScheduleVersion(Context().get(), get_version, &version);
    ASSERT_TRUE(got.ok()) << got.error_message();
    EXPECT_EQ(version.version(), number);
    EXPECT_EQ(version.job_id(), job.id());
  }
  EXPECT_EQ(version.reason(), zbpp::v1::SCHEDULE_CHANGE_REASON_INITIAL);
  // Bad requests name the field.
  get_version.set_version(0);
  grpc::Status bad = job_stub_->GetScheduleVersion(Context().get(), get_version, &version);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("version: must be >= 1"));
  get_version.set_version(done.schedule_version() + 1);
  bad = job_stub_->GetScheduleVersion(Context().get(), get_version, &version);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(bad.error_message(), HasSubstr("version: job " + job.id() + " has no schedule"));
  get_version.set_version(1);
  get_version.set_job_id("");
  bad = job_stub_->GetScheduleVersion(Context().get(), get_version, &version);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("job_id: required"));
  get_version.set_job_id("job-unknown");
  EXPECT_EQ(job_stub_->GetScheduleVersion(Context().get(), get_version, &version).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, BadSpecIsInvalidArgumentAndChangesNothing) {
  zbpp::v1::SubmitJobRequest submit;
  *submit.mutable_spec() = TestSpec();
  zbpp::v1::Job job;
  ASSERT_TRUE(job_stub_->SubmitJob(Context(true).get(), submit, &job).ok());
  submit.mutable_spec()->mutable_pipeline()->set_microbatches(0);
  grpc::Status s = job_stub_->SubmitJob(Context(true).get(), submit, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("pipeline.microbatches"));
  zbpp::v1::ListJobsResponse listed;
  ASSERT_TRUE(job_stub_->ListJobs(Context().get(), {}, &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 1);
}

// zbpp_rpc_refusals_total{service="zbpp.v1.JobService",reason=`reason`};
// -1 when the series does not exist.
double JobServiceRefusals(const prometheus::Registry& registry,
                          const std::string& reason) {
  return metrics::testing::FindSample(
             metrics::testing::Serialize(registry), "zbpp_rpc_refusals_total",
             {{"service", "zbpp.v1.JobService"}, {"reason", reason}})
      .value_or(-1);
}

// Each refusal is UNAUTHENTICATED and counted once under its reason; calls
// with the token, and calls that need none, are not refusals.
TEST_F(ServiceTest, TokenRequiredForSubmitAndCancel) {
  // Created at 0 for the service listed in the metrics' options.
  for (const char* reason :
       {"missing_token", "wrong_token", "missing_client_certificate"}) {
    EXPECT_EQ(JobServiceRefusals(*registry_, reason), 0) << reason;
  }
  zbpp::v1::SubmitJobRequest submit;
  *submit.mutable_spec() = TestSpec();
  zbpp::v1::Job job;
  const grpc::Status missing =
      job_stub_->SubmitJob(Context(false).get(), submit, &job);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(missing.error_message(), HasSubstr("authorization"));
  EXPECT_EQ(JobServiceRefusals(*registry_, "missing_token"), 1);
  EXPECT_EQ(JobServiceRefusals(*registry_, "wrong_token"), 0);
  auto wrong = Context(false);
  wrong->AddMetadata("authorization", "Bearer nope");
  const grpc::Status refused = job_stub_->SubmitJob(wrong.get(), submit, &job);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(refused.error_message(), "wrong bearer token");
  EXPECT_EQ(JobServiceRefusals(*registry_, "wrong_token"), 1);
  ASSERT_TRUE(job_stub_->SubmitJob(Context(true).get(), submit, &job).ok());
  zbpp::v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  zbpp::v1::Job cancelled;
  EXPECT_EQ(job_stub_->CancelJob(Context(false).get(), cancel, &cancelled)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(JobServiceRefusals(*registry_, "missing_token"), 2);
  ASSERT_TRUE(
      job_stub_->CancelJob(Context(true).get(), cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), zbpp::v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job_stub_->CancelJob(Context(true).get(), cancel, &cancelled)
                .error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  zbpp::v1::GetJobRequest get;
  get.set_job_id("job-404");
  EXPECT_EQ(job_stub_->GetJob(Context().get(), get, &job).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(JobServiceRefusals(*registry_, "missing_token"), 2);
  EXPECT_EQ(JobServiceRefusals(*registry_, "wrong_token"), 1);
  EXPECT_EQ(JobServiceRefusals(*registry_, "missing_client_certificate"), 0);
}

TEST_F(ServiceTest, WatchStreamsUntilTerminal) {
  zbpp::v1::SubmitJobRequest submit;
  *submit.mutable_spec() = TestSpec();
  zbpp::v1::Job job;
  ASSERT_TRUE(job_stub_->SubmitJob(Context(true).get(), submit, &job).ok());
  auto watch_context = Context();
  zbpp::v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  auto reader = job_stub_->WatchJob(watch_context.get(), watch);
  zbpp::v1::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_TRUE(event.has_snapshot());
  zbpp::v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  ASSERT_TRUE(job_stub_->CancelJob(Context(true).get(), cancel, &job).ok());
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.state_change().new_state(), zbpp::v1::JOB_STATE_CANCELLED);
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_TRUE(reader->Finish().ok());
}

TEST_F(ServiceTest, SessionMustStartWithOpenAndKnownWorker) {
  auto context = Context();
  auto stream = worker_stub_->Session(context.get());
  zbpp::v1::SessionRequest hb;
  hb.mutable_heartbeat();
  stream->Write(hb);
  stream->WritesDone();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto context2 = WorkerContext("0123");
  auto stream2 = worker_stub_->Session(context2.get());
  zbpp::v1::SessionRequest open;
  open.mutable_open()->set_worker_id("worker-404");
  open.mutable_open()->set_address("10.0.0.4:7000");
  stream2->Write(open);
  stream2->WritesDone();
  EXPECT_EQ(stream2->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// Session streams that send nothing: once each held a server thread for
// good. Past kMaxUnopened the next is refused at once; at the timeout the
// gate cancels the silent ones and their threads return.
TEST_F(ServiceTest, SilentSessionStreamsAreCappedThenCancelled) {
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<zbpp::v1::SessionRequest,
                                                       zbpp::v1::SessionResponse>>>
      silent;
  for (int i = 0; i < kMaxUnopened; ++i) {
    contexts.push_back(Context());
    silent.push_back(worker_stub_->Session(contexts.back().get()));
  }
  // The handlers admit them on the server's threads.
  for (int polls = 0; session_gate_->unopened() < kMaxUnopened && polls < 1000; ++polls) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(session_gate_->unopened(), kMaxUnopened);
  auto context = Context();
  auto refused = worker_stub_->Session(context.get());
  const grpc::Status status = refused->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("SessionOpen"));
  gate_clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(session_gate_->CancelExpired(), kMaxUnopened);
  for (auto& stream : silent) {
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_EQ(session_gate_->unopened(), 0);
}

/// A worker of RunningJob: what only it knows (its credential) and what
/// anyone could learn (id, address).
struct RealWorker {
  std::string id;
  std::string address;
  std::string credential;
  std::shared_ptr<SessionOutbox> outbox;
};

/// Attacks on a running job: its real workers hold their sessions (through
/// the core); the attacker knows their ids, addresses and the job, not the
/// credentials.
class AttackTest : public ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    job_ = *core_->SubmitJob(TestSpec(2, 4, "1f1b", 8));
    for (int n = 1; n <= 2; ++n) {
      zbpp::v1::WorkerDescription d;
      d.set_address(absl::StrCat("10.0.0.", n, ":7000"));
      d.set_host("node");
      d.set_device_kind(zbpp::v1::DEVICE_KIND_CPU);
      d.set_memory_bytes(1 << 30);
      zbpp::v1::RegisterWorkerResponse registered = *core_->RegisterWorker(d);
      RealWorker w{registered.worker_id(), d.address(), registered.credential(),
                   *core_->OpenSession(registered.worker_id(), d.address())};
      workers_held_.push_back(w);
    }
    for (RealWorker& w : workers_held_) {
      std::vector<SessionMessage> messages;
      ASSERT_TRUE(w.outbox->Pop(absl::InfinitePast(), &messages).ok());
      ASSERT_FALSE(messages.empty());
      ASSERT_TRUE(messages[0]->has_assignment());
      scope_ = messages[0]->assignment().rendezvous_scope();
      attempt_ = messages[0]->assignment().attempt();
      zbpp::v1::Heartbeat hb;
      hb.set_phase(zbpp::v1::WORKER_PHASE_RUNNING);
      hb.set_job_id(job_.id());
      hb.set_attempt(attempt_);
      ASSERT_TRUE(core_->Heartbeat(w.id, hb).ok());
    }
    ASSERT_EQ(JobNow().state(), zbpp::v1::JOB_STATE_RUNNING);
  }

  zbpp::v1::Job JobNow() { return *core_->GetJob(job_.id(), zbpp::v1::JOB_VIEW_BASIC); }

  /// Opens a Session as `w` with `context`, then sends a FAILED heartbeat
  /// with job_error; returns the messages it could read and the status.
  grpc::Status OpenAsWorker(const RealWorker& w, grpc::ClientContext* context,
                            std::vector<zbpp::v1::SessionResponse>* read) {
    auto stream = worker_stub_->Session(context);
    zbpp::v1::SessionRequest open;
    open.mutable_open()->set_worker_id(w.id);
    open.mutable_open()->set_address(w.address);
    stream->Write(open);
    zbpp::v1::SessionRequest hb;
    hb.mutable_heartbeat()->set_phase(zbpp::v1::WORKER_PHASE_FAILED);
    hb.mutable_heartbeat()->set_job_id(job_.id());
    hb.mutable_heartbeat()->set_attempt(attempt_);
    hb.mutable_heartbeat()->set_job_error(true);
    hb.mutable_heartbeat()->set_error(std::string(3 << 20, 'x'));
    stream->Write(hb);
    stream->WritesDone();
    zbpp::v1::SessionResponse message;
    while (stream->Read(&message)) read->push_back(message);
    return stream->Finish();
  }

  zbpp::v1::Job job_;
  std::vector<RealWorker> workers_held_;
  std::string scope_;
  int64_t attempt_ = 0;
};

TEST_F(AttackTest, ForgedReportStepIsRefusedAndTheJobUnaffected) {
  const RealWorker& w = workers_held_[0];
  zbpp::v1::ReportStepRequest report;
  report.set_worker_id(w.id);
  report.set_job_id(job_.id());
  report.set_attempt(attempt_);
  report.set_step(0);
  report.set_schedule_version(1);
  report.set_stage(0);
  report.set_loss(0.001);
  zbpp::v1::ReportStepResponse response;
  for (const std::string& credential :
       {std::string(), workers_held_[1].credential, std::string(32, '0')}) {
    auto context = credential.empty() ? Context() : WorkerContext(credential);
    const grpc::Status refused = worker_stub_->ReportStep(context.get(), report, &response);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(refused.error_message(), HasSubstr(w.id));
    EXPECT_THAT(refused.error_message(), HasSubstr(kWorkerCredentialMetadataKey));
    if (!credential.empty()) {
      EXPECT_THAT(refused.error_message(), ::testing::Not(HasSubstr(credential)));
    }
  }
  const zbpp::v1::Job after = JobNow();
  EXPECT_EQ(after.state(), zbpp::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(after.steps_completed(), 0);
  // The real worker's own report gets past authentication.
  EXPECT_NE(worker_stub_->ReportStep(WorkerContext(w.credential).get(), report, &response)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// ReportProfile over gRPC: the worker's credential, then the core's checks
// (each naming its field); the real profiles complete the calibration.
TEST_F(AttackTest, ProfilesNeedTheCredentialAndAreCheckedFieldByField) {
  const RealWorker& w = workers_held_[0];
  zbpp::v1::ReportProfileRequest profile;
  profile.set_worker_id(w.id);
  profile.set_job_id(job_.id());
  profile.set_attempt(attempt_);
  profile.set_stage(0);
  profile.set_repetitions(3);
  zbpp::v1::VirtualStageProfile* entry = profile.add_virtual_stages();
  entry->set_virtual_stage(0);
  entry->set_f_seconds(0.01);
  entry->set_b_seconds(0.01);
  entry->set_w_seconds(0.005);
  entry->set_m_b_bytes(1 << 20);
  entry->set_m_w_bytes(1 << 21);  // Above M_B.
  zbpp::v1::ReportProfileResponse response;
  grpc::Status s = worker_stub_->ReportProfile(
      WorkerContext(workers_held_[1].credential).get(), profile, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  s = worker_stub_->ReportProfile(WorkerContext(w.credential).get(), profile, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), ::testing::StartsWith("virtual_stages[0].m_w_bytes: "));
  entry->set_m_w_bytes(1 << 19);
  profile.set_attempt(attempt_ + 1);
  s = worker_stub_->ReportProfile(WorkerContext(w.credential).get(), profile, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  profile.set_attempt(attempt_);
  EXPECT_TRUE(
      worker_stub_->ReportProfile(WorkerContext(w.credential).get(), profile, &response).ok());
  EXPECT_EQ(JobNow().schedule_version(), 1);  // Stage 1's is still missing.
  profile.set_worker_id(workers_held_[1].id);
  profile.set_stage(1);
  profile.mutable_virtual_stages(0)->set_virtual_stage(1);
  EXPECT_TRUE(worker_stub_->ReportProfile(WorkerContext(workers_held_[1].credential).get(),
                                          profile, &response)
                  .ok());
  EXPECT_EQ(JobNow().schedule_version(), 2);
}

TEST_F(AttackTest, ForgedHeartbeatWithJobErrorIsRefused) {
  std::vector<zbpp::v1::SessionResponse> read;
  auto context = Context();
  const grpc::Status refused = OpenAsWorker(workers_held_[0], context.get(), &read);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(JobNow().state(), zbpp::v1::JOB_STATE_RUNNING);
}

TEST_F(AttackTest, SessionImpersonationIsRefusedAndDisclosesNothing) {
  for (const std::string& credential : {std::string(), workers_held_[1].credential}) {
    std::vector<zbpp::v1::SessionResponse> read;
    auto context = credential.empty() ? Context() : WorkerContext(credential);
    const grpc::Status refused = OpenAsWorker(workers_held_[0], context.get(), &read);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(read.empty()) << "disclosed: " << read[0].DebugString();
  }
  // The real session was not taken over: it still gets the job's messages.
  std::vector<SessionMessage> messages;
  EXPECT_TRUE(workers_held_[0].outbox->Pop(absl::InfinitePast(), &messages).ok());
}

TEST_F(AttackTest, SecondLiveSessionIsRefused) {
  // Even with the credential (a restarted process of the same worker, or a
  // stolen secret): the open session is not handed over.
  std::vector<zbpp::v1::SessionResponse> read;
  auto context = WorkerContext(workers_held_[0].credential);
  const grpc::Status refused = OpenAsWorker(workers_held_[0], context.get(), &read);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(refused.error_message(), HasSubstr(workers_held_[0].id));
  EXPECT_TRUE(read.empty());
  EXPECT_EQ(JobNow().state(), zbpp::v1::JOB_STATE_RUNNING);
}

TEST_F(AttackTest, RendezvousWithoutTheCredentialIsRefused) {
  const RealWorker& w = workers_held_[0];
  zbpp::v1::RendezvousContext who;
  who.set_worker_id(w.id);
  who.set_scope(scope_);
  ASSERT_TRUE(core_->rendezvous().Set(scope_, "rank_0", "10.0.0.1:9").ok());
  zbpp::v1::SetRequest set;
  *set.mutable_context() = who;
  set.set_key("rank_0");
  set.set_value("evil:1");
  zbpp::v1::SetResponse set_response;
  zbpp::v1::GetRequest get;
  *get.mutable_context() = who;
  get.set_key("rank_0");
  zbpp::v1::GetResponse get_response;
  zbpp::v1::DeleteRequest del;
  *del.mutable_context() = who;
  del.set_key("rank_0");
  zbpp::v1::DeleteResponse del_response;
  for (const std::string& credential : {std::string(), workers_held_[1].credential}) {
    auto c1 = credential.empty() ? Context() : WorkerContext(credential);
    auto c2 = credential.empty() ? Context() : WorkerContext(credential);
    auto c3 = credential.empty() ? Context() : WorkerContext(credential);
    EXPECT_EQ(rendezvous_stub_->Set(c1.get(), set, &set_response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(rendezvous_stub_->Get(c2.get(), get, &get_response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(rendezvous_stub_->Delete(c3.get(), del, &del_response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(get_response.value(), "");
  absl::StatusOr<std::string> kept = core_->rendezvous().Get(
      scope_, "rank_0", absl::InfinitePast(), [] { return false; });
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, "10.0.0.1:9");
  ASSERT_TRUE(
      rendezvous_stub_->Get(WorkerContext(w.credential).get(), get, &get_response).ok());
  EXPECT_EQ(get_response.value(), "10.0.0.1:9");
}

}  // namespace
}  // namespace zbpp::coordinator
