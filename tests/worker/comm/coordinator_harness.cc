#include "tests/worker/comm/coordinator_harness.h"

#include <chrono>
#include <utility>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "testing/fake_pipeline.h"
#include "testing/fake_worker.h"

namespace zbpp::worker::testing {

absl::StatusOr<std::unique_ptr<CoordinatorHarness>> CoordinatorHarness::Start() {
  std::unique_ptr<CoordinatorHarness> h(new CoordinatorHarness());
  absl::StatusOr<std::unique_ptr<coordinator::SqliteStore>> store =
      coordinator::SqliteStore::Create({":memory:"});
  if (!store.ok()) return store.status();
  h->store_ = *std::move(store);
  coordinator::Coordinator::Options options;
  options.store = h->store_.get();
  options.heartbeat_interval_seconds = 1;
  options.heartbeat_timeout_seconds = 600;
  absl::StatusOr<std::unique_ptr<coordinator::Coordinator>> core =
      coordinator::Coordinator::Create(options);
  if (!core.ok()) return core.status();
  h->core_ = *std::move(core);
  if (absl::Status s = h->core_->Recover(); !s.ok()) return s;
  h->service_ = std::make_unique<coordinator::RendezvousServiceImpl>(
      coordinator::RendezvousServiceImpl::Options{h->core_.get(), nullptr});
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(h->service_.get());
  h->server_ = builder.BuildAndStart();
  if (h->server_ == nullptr || port == 0) {
    return absl::UnavailableError("cannot listen on 127.0.0.1:0");
  }
  h->channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                    grpc::InsecureChannelCredentials());
  return h;
}

CoordinatorHarness::~CoordinatorHarness() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(2));
    server_->Wait();
  }
}

absl::StatusOr<std::vector<RendezvousIdentity>> CoordinatorHarness::AssignJob(
    int size) {
  absl::StatusOr<v1::Job> job =
      core_->SubmitJob(coordinator::testing::TestSpec(size));
  if (!job.ok()) return job.status();
  std::vector<coordinator::testing::FakeWorker> workers(size);
  for (coordinator::testing::FakeWorker& w : workers) {
    v1::WorkerDescription d;
    d.set_address(absl::StrCat("127.0.0.1:", 7000 + workers_registered_++));
    d.set_host("localhost");
    d.set_device_kind(v1::DEVICE_KIND_CPU);
    d.set_memory_bytes(1 << 30);
    absl::StatusOr<v1::RegisterWorkerResponse> registered =
        core_->RegisterWorker(d);
    if (!registered.ok()) return registered.status();
    w.id = registered->worker_id();
    w.credential = registered->credential();
    absl::StatusOr<std::shared_ptr<coordinator::SessionOutbox>> outbox =
        core_->OpenSession(w.id, d.address());
    if (!outbox.ok()) return outbox.status();
    w.outbox = *outbox;
  }
  v1::Heartbeat idle;
  idle.set_phase(v1::WORKER_PHASE_IDLE);
  for (const coordinator::testing::FakeWorker& w : workers) {
    if (absl::Status s = core_->Heartbeat(w.id, idle); !s.ok()) return s;
  }
  std::vector<RendezvousIdentity> ranks(size);
  for (coordinator::testing::FakeWorker& w : workers) {
    w.Drain();
    if (!w.closed.ok()) return w.closed;
    if (!w.assignment.has_value() || w.assignment->job_id() != job->id()) continue;
    ranks[w.assignment->stage()] = {
        w.id, w.assignment->rendezvous_scope(),
        {{kWorkerCredentialMetadataKey, w.credential}}};
  }
  for (int r = 0; r < size; ++r) {
    if (ranks[r].worker_id.empty()) {
      return absl::InternalError(
          absl::StrCat("job ", job->id(), ": no worker was assigned rank ", r));
    }
  }
  return ranks;
}

}  // namespace zbpp::worker::testing
