// The generated zbpp.v1 code: messages round-trip through the wire format,
// schedules keep the scheduler's text form, and the gRPC stubs work against
// an in-process server on 127.0.0.1:0 (unary, server errors, bidi Session).
#include <map>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "common/status_grpc.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/rendezvous.grpc.pb.h"
#include "zbpp/v1/schedule.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

v1::JobSpec ExampleSpec() {
  v1::JobSpec spec;
  spec.set_name("gpt-kjv");
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(8);
  model->set_hidden(256);
  model->set_heads(8);
  model->set_vocab(256);
  model->set_seq_len(128);
  spec.mutable_dataset()->set_builtin("bible-kjv");
  v1::PipelineSpec* pipeline = spec.mutable_pipeline();
  pipeline->set_stages(4);
  pipeline->set_microbatches(8);
  pipeline->set_microbatch_size(2);
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(8.0);
  spec.mutable_optimizer()->set_learning_rate(3e-4);
  spec.mutable_optimizer()->set_beta1(0.0);  // set, though zero
  spec.mutable_optimizer()->set_max_grad_norm(1.0);
  spec.set_validation(v1::VALIDATION_MODE_POST);
  spec.set_steps(100);
  spec.mutable_checkpoint()->set_interval_steps(25);
  spec.mutable_checkpoint()->set_directory("/tmp/ckpt");
  spec.set_seed(0);
  return spec;
}

TEST(Proto, JobSpecRoundTripsThroughTheWireFormat) {
  const v1::JobSpec spec = ExampleSpec();
  std::string bytes;
  ASSERT_TRUE(spec.SerializeToString(&bytes));
  v1::JobSpec parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_TRUE(MessageDifferencer::Equals(spec, parsed));
  // proto3 `optional`: a field set to zero differs from an unset one.
  EXPECT_TRUE(parsed.optimizer().has_beta1());
  EXPECT_FALSE(parsed.optimizer().has_beta2());
  EXPECT_FALSE(parsed.pipeline().has_chunks());
  EXPECT_EQ(parsed.schedule().memory_limit_case(),
            v1::SchedulePolicy::kMemoryLimitMB);
  EXPECT_EQ(parsed.dataset().source_case(), v1::DatasetSpec::kBuiltin);
}

TEST(Proto, ScheduleKeepsTheSchedulerTextForm) {
  const sched::Problem problem = sched::Problem::Uniform(
      4, 2, 8, sched::VirtualStageCost{1, 1, 1, 1, 0.5}, 0);
  absl::StatusOr<sched::Schedule> schedule = sched::Generate("zb-v", problem);
  ASSERT_TRUE(schedule.ok()) << schedule.status();

  v1::Schedule message;
  message.set_name(schedule->name);
  message.set_stages(schedule->stages);
  message.set_chunks(schedule->chunks);
  message.set_microbatches(schedule->microbatches);
  for (int w : schedule->stage_of) message.add_stage_of(w);
  for (const auto& actions : schedule->actions) {
    v1::StageActions* out = message.add_stage_actions();
    for (const sched::Action& a : actions) {
      out->add_actions(sched::ActionToString(a));
    }
  }
  v1::Schedule parsed;
  ASSERT_TRUE(parsed.ParseFromString(message.SerializeAsString()));
  ASSERT_EQ(parsed.stage_actions_size(), schedule->stages);
  for (int w = 0; w < schedule->stages; ++w) {
    const auto& texts = parsed.stage_actions(w).actions();
    ASSERT_EQ(texts.size(), static_cast<int>(schedule->actions[w].size()));
    for (int i = 0; i < texts.size(); ++i) {
      absl::StatusOr<sched::Action> action = sched::ParseAction(texts[i]);
      ASSERT_TRUE(action.ok()) << action.status();
      EXPECT_EQ(*action, schedule->actions[w][i]) << texts[i];
    }
  }
  EXPECT_THAT(parsed.stage_actions(0).actions(0), ::testing::MatchesRegex(
                                                       "[0-9]+[FIWB][0-9]+"));
}

// ---------------------------------------------------------------- servers

constexpr char kLongError[] = "no such job: ";

class FakeJobService final : public v1::JobService::Service {
  grpc::Status SubmitJob(grpc::ServerContext*,
                         const v1::SubmitJobRequest* request,
                         v1::Job* job) override {
    if (request->spec().pipeline().microbatches() < 1) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          "pipeline.microbatches must be >= 1"));
    }
    job->set_id("job-1");
    *job->mutable_spec() = request->spec();
    job->set_state(v1::JOB_STATE_PENDING);
    return grpc::Status::OK;
  }
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::Job*) override {
    // A message far above the trailer limit: must arrive cut, not as an
    // opaque transport failure.
    return ToGrpcStatus(absl::NotFoundError(
        kLongError + request->job_id() + std::string(100000, '\xe2')));
  }
};

// Sends an assignment and a grant after SessionOpen; counts heartbeats.
class FakeWorkerService final : public v1::WorkerService::Service {
 public:
  int heartbeats() {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }

 private:
  grpc::Status Session(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::SessionResponse, v1::SessionRequest>*
          stream) override {
    v1::SessionRequest request;
    if (!stream->Read(&request) || !request.has_open()) {
      return ToGrpcStatus(
          absl::InvalidArgumentError("first message must be SessionOpen"));
    }
    v1::SessionResponse response;
    response.set_sequence(1);
    v1::Assignment* assignment = response.mutable_assignment();
    assignment->set_job_id("job-1");
    assignment->set_attempt(1);
    assignment->set_stage(2);
    assignment->mutable_schedule()->set_version(1);
    assignment->mutable_schedule()->set_effective_step(0);
    stream->Write(response);
    response.Clear();
    response.set_sequence(2);
    response.mutable_grant()->set_job_id("job-1");
    response.mutable_grant()->set_attempt(1);
    response.mutable_grant()->set_through_step(3);
    stream->Write(response);
    while (stream->Read(&request)) {
      if (request.has_heartbeat()) {
        absl::MutexLock lock(&mu_);
        ++heartbeats_;
      }
    }
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
};

class FakeRendezvous final : public v1::RendezvousService::Service {
  grpc::Status Set(grpc::ServerContext*, const v1::SetRequest* request,
                   v1::SetResponse*) override {
    absl::MutexLock lock(&mu_);
    store_[request->context().scope() + "/" + request->key()] =
        request->value();
    return grpc::Status::OK;
  }
  grpc::Status Get(grpc::ServerContext*, const v1::GetRequest* request,
                   v1::GetResponse* response) override {
    absl::MutexLock lock(&mu_);
    auto it = store_.find(request->context().scope() + "/" + request->key());
    if (it == store_.end()) {
      return ToGrpcStatus(absl::NotFoundError("no key " + request->key()));
    }
    response->set_value(it->second);
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  std::map<std::string, std::string> store_ ABSL_GUARDED_BY(mu_);
};

class InProcessServer : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&jobs_);
    builder.RegisterService(&workers_);
    builder.RegisterService(&rendezvous_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    RecordProperty("port", port_);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  static void SetDeadline(grpc::ClientContext& context) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
  }

  int port_ = 0;
  FakeJobService jobs_;
  FakeWorkerService workers_;
  FakeRendezvous rendezvous_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(InProcessServer, UnaryCallCarriesTheSpec) {
  auto stub = v1::JobService::NewStub(channel_);
  grpc::ClientContext context;
  SetDeadline(context);
  v1::SubmitJobRequest request;
  *request.mutable_spec() = ExampleSpec();
  v1::Job job;
  const grpc::Status status = stub->SubmitJob(&context, request, &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(job.id(), "job-1");
  EXPECT_EQ(job.state(), v1::JOB_STATE_PENDING);
  EXPECT_TRUE(MessageDifferencer::Equals(job.spec(), request.spec()));
}

TEST_F(InProcessServer, ServerErrorsArriveAsStatusCodes) {
  auto stub = v1::JobService::NewStub(channel_);
  {
    grpc::ClientContext context;
    SetDeadline(context);
    v1::SubmitJobRequest request;  // microbatches = 0
    v1::Job job;
    const absl::Status status =
        FromGrpcStatus(stub->SubmitJob(&context, request, &job));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("pipeline.microbatches"));
  }
  {
    grpc::ClientContext context;
    SetDeadline(context);
    v1::GetJobRequest request;
    request.set_job_id("j-404");
    v1::Job job;
    const absl::Status status =
        FromGrpcStatus(stub->GetJob(&context, request, &job));
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
    EXPECT_THAT(status.message(), HasSubstr("no such job: j-404"));
    EXPECT_THAT(status.message(), HasSubstr("truncated"));
  }
}

TEST_F(InProcessServer, SessionStreamsBothWays) {
  auto stub = v1::WorkerService::NewStub(channel_);
  grpc::ClientContext context;
  auto stream = stub->Session(&context);
  v1::SessionRequest request;
  request.mutable_open()->set_worker_id("w-1");
  ASSERT_TRUE(stream->Write(request));

  v1::SessionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_TRUE(response.has_assignment());
  EXPECT_EQ(response.assignment().stage(), 2);
  EXPECT_EQ(response.assignment().schedule().version(), 1);
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_TRUE(response.has_grant());
  EXPECT_EQ(response.grant().through_step(), 3);

  for (int i = 0; i < 3; ++i) {
    request.Clear();
    request.mutable_heartbeat()->set_phase(v1::WORKER_PHASE_RUNNING);
    request.mutable_heartbeat()->set_last_completed_step(i);
    ASSERT_TRUE(stream->Write(request));
  }
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&response));  // The server ends the stream.
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(workers_.heartbeats(), 3);
}

TEST_F(InProcessServer, RendezvousSetThenGet) {
  auto stub = v1::RendezvousService::NewStub(channel_);
  v1::RendezvousContext scope;
  scope.set_worker_id("w-1");
  scope.set_scope("job-1/1");
  {
    grpc::ClientContext context;
    SetDeadline(context);
    v1::SetRequest request;
    *request.mutable_context() = scope;
    request.set_key("nccl-id");
    request.set_value(std::string("\0\x01\x02", 3));
    v1::SetResponse response;
    ASSERT_TRUE(stub->Set(&context, request, &response).ok());
  }
  {
    grpc::ClientContext context;
    SetDeadline(context);
    v1::GetRequest request;
    *request.mutable_context() = scope;
    request.set_key("nccl-id");
    v1::GetResponse response;
    ASSERT_TRUE(stub->Get(&context, request, &response).ok());
    EXPECT_EQ(response.value(), std::string("\0\x01\x02", 3));
  }
  {
    grpc::ClientContext context;
    SetDeadline(context);
    v1::GetRequest request;
    *request.mutable_context() = scope;
    request.set_key("missing");
    v1::GetResponse response;
    EXPECT_EQ(stub->Get(&context, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
}

}  // namespace
}  // namespace zbpp
