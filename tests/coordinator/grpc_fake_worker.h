#ifndef ZBPP_TESTS_COORDINATOR_GRPC_FAKE_WORKER_H_
#define ZBPP_TESTS_COORDINATOR_GRPC_FAKE_WORKER_H_

// A fake worker (fake_worker.h) speaking the real protocol over gRPC, for
// the tests that run the coordinator's services in process.

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "common/call_auth.h"
#include "testing/fake_pipeline.h"
#include "testing/fake_worker.h"
#include "zbpp/v1/rendezvous.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::coordinator::testing {

/// A context with a 20 s deadline carrying the bearer `token` and the
/// worker `credential` (each when not empty).
inline std::unique_ptr<grpc::ClientContext> CallContext(const std::string& token,
                                                        const std::string& credential) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  if (!credential.empty()) context->AddMetadata(kWorkerCredentialMetadataKey, credential);
  return context;
}

/// What one fake worker saw and did.
struct WorkerLog {
  /// The worker, its versions and the version it ran each step with.
  FakeWorker worker;
  std::string error;
  bool rendezvous_ok = false;
};

/// One fake worker (testing::FakeWorker, on the worker's ControlState) over
/// gRPC: register, Session, every message applied; on its assignment a
/// PREPARING heartbeat and the rendezvous, then every granted step reported
/// (timings simulated on `truth`), until the attempt is aborted (the job's
/// end). Every call carries "authorization: Bearer `token`" (none when
/// empty).
inline void RunFakeWorker(zbpp::v1::WorkerService::Stub* stub,
                          zbpp::v1::RendezvousService::Stub* kv, int n,
                          const sched::Problem& truth, const std::string& token,
                          WorkerLog* log) {
  const auto Context = [&token] { return CallContext(token, ""); };
  const auto WorkerContext = [&token](const std::string& credential) {
    return CallContext(token, credential);
  };
  zbpp::v1::RegisterWorkerRequest reg;
  reg.mutable_worker()->set_address(absl::StrCat("127.0.0.1:", 9000 + n));
  reg.mutable_worker()->set_host("localhost");
  reg.mutable_worker()->set_device_kind(zbpp::v1::DEVICE_KIND_CPU);
  reg.mutable_worker()->set_memory_bytes(1 << 30);
  zbpp::v1::RegisterWorkerResponse registered;
  grpc::Status s = stub->RegisterWorker(Context().get(), reg, &registered);
  if (!s.ok()) {
    log->error = s.error_message();
    return;
  }
  FakeWorker& w = log->worker;
  w.id = registered.worker_id();
  w.credential = registered.credential();
  grpc::ClientContext session;
  if (!token.empty()) session.AddMetadata("authorization", absl::StrCat("Bearer ", token));
  session.AddMetadata(kWorkerCredentialMetadataKey, w.credential);
  auto stream = stub->Session(&session);
  zbpp::v1::SessionRequest open;
  open.mutable_open()->set_worker_id(w.id);
  open.mutable_open()->set_address(reg.worker().address());
  stream->Write(open);
  bool prepared = false;
  zbpp::v1::SessionResponse message;
  while (w.aborts == 0 && stream->Read(&message)) {
    w.Apply(message);
    if (!w.assignment.has_value()) continue;
    const zbpp::v1::Assignment& assignment = *w.assignment;
    if (!prepared) {
      prepared = true;
      w.state->SetPhase(zbpp::v1::WORKER_PHASE_PREPARING);
      zbpp::v1::SessionRequest hb;
      *hb.mutable_heartbeat() = w.state->Heartbeat();
      stream->Write(hb);
      // The communicator bootstrap: every rank adds 1 and waits for all.
      zbpp::v1::AddRequest add;
      add.mutable_context()->set_worker_id(w.id);
      add.mutable_context()->set_scope(assignment.rendezvous_scope());
      add.set_key("joined");
      add.set_delta(1);
      zbpp::v1::AddResponse added;
      zbpp::v1::SetRequest set;
      *set.mutable_context() = add.context();
      set.set_key(absl::StrCat("rank-", assignment.stage()));
      set.set_value("addr");
      zbpp::v1::SetResponse set_response;
      zbpp::v1::WaitRequest wait;
      *wait.mutable_context() = add.context();
      for (int r = 0; r < assignment.peers_size(); ++r) {
        wait.add_keys(absl::StrCat("rank-", r));
      }
      wait.set_timeout_seconds(10);
      zbpp::v1::WaitResponse waited;
      log->rendezvous_ok =
          kv->Add(WorkerContext(w.credential).get(), add, &added).ok() &&
          kv->Set(WorkerContext(w.credential).get(), set, &set_response).ok() &&
          kv->Wait(WorkerContext(w.credential).get(), wait, &waited).ok();
    }
    if (std::optional<zbpp::v1::ReportProfileRequest> profile = w.TakeProfile()) {
      // Calibration: the profile once the groups are joined, as zbpp-worker.
      zbpp::v1::ReportProfileResponse profiled;
      grpc::Status p = stub->ReportProfile(WorkerContext(w.credential).get(), *profile,
                                           &profiled);
      if (!p.ok()) {
        log->error = p.error_message();
        session.TryCancel();
        break;
      }
    }
    for (; w.next_step <= w.granted; ++w.next_step) {
      zbpp::v1::ReportStepResponse reported;
      grpc::Status r = stub->ReportStep(WorkerContext(w.credential).get(),
                                        w.Report(w.next_step, truth), &reported);
      if (!r.ok()) {
        log->error = r.error_message();
        session.TryCancel();
        break;
      }
    }
  }
  stream->WritesDone();
  session.TryCancel();
  stream->Finish().ok();
}

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTS_COORDINATOR_GRPC_FAKE_WORKER_H_
