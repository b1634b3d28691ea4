// libFuzzer target: the coordinator's request validation, for the job,
// worker and rendezvous services (what their gRPC handlers pass to the core
// once the caller is authenticated).
//
// One Coordinator core per process (FakeClock, in-memory SQLite store)
// holding a RUNNING 2-stage job
// on two registered workers (the tests' FakeWorker, on the worker's
// ControlState), so that a ReportStep gets past the worker and
// job lookups to the checks of its content. Input: one selector byte, then a
// serialized protobuf (ParseFromArray; bytes that do not parse are skipped).
//
// Selector bits 5-7 pick the service, the low bits the request:
//   0 (job and steps)
//     bit 0   0: SubmitJobRequest -> Coordinator::SubmitJob
//             1: ReportStepRequest -> Coordinator::ReportStep, where
//     bit 1   fills worker_id, job_id, attempt and stage left empty/zero
//             with those of worker (bit 2) of the running job,
//     bit 3   fills both timing lists, when empty, with valid timings for
//             the stage's actions in the version of the report's step,
//     bit 4   sets step and schedule_version, when both are 0, to the
//             worker's next granted step and its version.
//   1 (workers)
//     bit 0   0: bit 3 clear: RegisterWorkerRequest -> RegisterWorker;
//                bit 3 set: ListWorkersRequest -> ListWorkers
//             1: Heartbeat -> Heartbeat as worker (bit 2)
//   2-7 (rendezvous) SetRequest, GetRequest, WaitRequest, AddRequest,
//       CompareSetRequest, DeleteRequest -> CheckRendezvousAccess, then the
//       RendezvousStore call when it passes (Get and Wait never block: their
//       deadline has passed). With bit 1 an empty context.worker_id and
//       context.scope are those of worker (bit 2) and its attempt.
// The fill-ins let mutations reach deep checks (hop latencies, validation
// results, step completion, re-solves, rendezvous limits) without guessing
// ids.
//
// The state carries over between inputs (steps complete, jobs pile up), as
// in a live coordinator; when the job leaves RUNNING, the core is rebuilt.
// No sleeps: the clock never moves, so no lease expires.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/rendezvous_store.h"
#include "coordinator/store/sqlite_store.h"
#include "testing/fake_pipeline.h"
#include "testing/fake_worker.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/rendezvous.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {
namespace {

using testing::FakeWorker;

// The attempt `w` holds, or an empty one (no job, attempt 0) while it holds
// none.
const v1::Assignment& Held(const FakeWorker& w) {
  static const v1::Assignment* const kNone = new v1::Assignment();
  return w.assignment.has_value() ? *w.assignment : *kNone;
}

// The version in force at `step` for the attempt `w` holds (ControlState's
// answer); null when none applies.
worker::ControlState::VersionPtr VersionFor(const FakeWorker& w, int64_t step) {
  return w.state->VersionFor(Held(w).job_id(), Held(w).attempt(), step);
}

// The coordinator tests' spec (2 stages, 4 microbatches, ZB-1p, a re-solve
// every 2 steps) with steps enough never to finish.
v1::JobSpec RunningSpec() {
  return testing::TestSpec(/*stages=*/2, /*microbatches=*/4, "zb-1p",
                           /*steps=*/1'000'000'000, /*window=*/2);
}

[[noreturn]] void Fail(const absl::Status& status, const char* what) {
  std::cerr << "coordinator_request_fuzz: " << what << ": " << status << "\n";
  std::abort();
}

class Fixture {
 public:
  Fixture() { Build(); }

  void Run(uint8_t selector, const uint8_t* data, size_t size) {
    const int service = selector >> 5;
    if (service == 0) {
      JobRequest(selector, data, size);
    } else if (service == 1) {
      WorkerRequest(selector, data, size);
    } else {
      RendezvousRequest(service, selector, data, size);
    }
    for (FakeWorker& w : workers_) w.Drain();
    absl::StatusOr<v1::Job> job =
        coordinator_->GetJob(job_id_, v1::JOB_VIEW_BASIC);
    if (!job.ok() || job->state() != v1::JOB_STATE_RUNNING) Build();
  }

 private:
  void Build() {
    workers_.clear();
    coordinator_.reset();
    store_.reset();
    absl::StatusOr<std::unique_ptr<SqliteStore>> store =
        SqliteStore::Create({":memory:"});
    if (!store.ok()) Fail(store.status(), "store");
    store_ = *std::move(store);
    Coordinator::Options options;
    options.clock = &clock_;
    options.store = store_.get();
    absl::StatusOr<std::unique_ptr<Coordinator>> created =
        Coordinator::Create(options);
    if (!created.ok()) Fail(created.status(), "create");
    coordinator_ = *std::move(created);
    if (absl::Status st = coordinator_->Recover(); !st.ok()) Fail(st, "recover");
    absl::StatusOr<v1::Job> job = coordinator_->SubmitJob(RunningSpec());
    if (!job.ok()) Fail(job.status(), "submit");
    job_id_ = job->id();
    for (int i = 0; i < 2; ++i) {
      v1::WorkerDescription d;
      d.set_address(absl::StrCat("10.0.0.", i, ":7000"));
      d.set_host("node");
      d.set_device_kind(v1::DEVICE_KIND_CPU);
      d.set_memory_bytes(1 << 30);
      FakeWorker w;
      absl::StatusOr<v1::RegisterWorkerResponse> registered =
          coordinator_->RegisterWorker(d);
      if (!registered.ok()) Fail(registered.status(), "register");
      w.id = registered->worker_id();
      absl::StatusOr<std::shared_ptr<SessionOutbox>> outbox =
          coordinator_->OpenSession(w.id, d.address());
      if (!outbox.ok()) Fail(outbox.status(), "session");
      w.outbox = *outbox;
      workers_.push_back(std::move(w));
    }
    for (FakeWorker& w : workers_) {
      w.Drain();
      v1::Heartbeat hb;
      hb.set_phase(v1::WORKER_PHASE_PREPARING);
      hb.set_job_id(Held(w).job_id());
      hb.set_attempt(Held(w).attempt());
      if (absl::Status st = coordinator_->Heartbeat(w.id, hb); !st.ok()) {
        Fail(st, "heartbeat");
      }
    }
    // Calibration: the profiles the attempt asks for, so that steps are
    // granted and reports reach their checks.
    for (FakeWorker& w : workers_) {
      if (std::optional<v1::ReportProfileRequest> profile = w.TakeProfile()) {
        if (absl::Status st = coordinator_->ReportProfile(*profile); !st.ok()) {
          Fail(st, "profile");
        }
      }
    }
    for (FakeWorker& w : workers_) w.Drain();
  }

  void JobRequest(uint8_t selector, const uint8_t* data, size_t size) {
    if ((selector & 1) == 0) {
      v1::SubmitJobRequest request;
      if (!request.ParseFromArray(data, static_cast<int>(size))) return;
      (void)coordinator_->SubmitJob(request.spec());
    } else {
      v1::ReportStepRequest report;
      if (!report.ParseFromArray(data, static_cast<int>(size))) return;
      FillIn(selector, report);
      (void)coordinator_->ReportStep(report);
    }
  }

  void WorkerRequest(uint8_t selector, const uint8_t* data, size_t size) {
    const int size_int = static_cast<int>(size);
    if (selector & 1) {
      v1::Heartbeat heartbeat;
      if (!heartbeat.ParseFromArray(data, size_int)) return;
      (void)coordinator_->Heartbeat(workers_[(selector >> 2) & 1].id,
                                    heartbeat);
    } else if (selector & 8) {
      v1::ListWorkersRequest request;
      if (!request.ParseFromArray(data, size_int)) return;
      (void)coordinator_->ListWorkers(request);
    } else {
      v1::RegisterWorkerRequest request;
      if (!request.ParseFromArray(data, size_int)) return;
      (void)coordinator_->RegisterWorker(request.worker());
    }
  }

  // Parses a rendezvous request of type `Request`, fills in its context
  // (selector bit 1), and runs `call` on it when the access check passes.
  template <typename Request, typename Call>
  void Rendezvous(uint8_t selector, const uint8_t* data, size_t size,
                  Call call) {
    Request request;
    if (!request.ParseFromArray(data, static_cast<int>(size))) return;
    v1::RendezvousContext& context = *request.mutable_context();
    const FakeWorker& w = workers_[(selector >> 2) & 1];
    if (selector & 2) {
      if (context.worker_id().empty()) context.set_worker_id(w.id);
      if (context.scope().empty()) context.set_scope(Held(w).rendezvous_scope());
    }
    if (!coordinator_
             ->CheckRendezvousAccess(context.worker_id(), context.scope())
             .ok()) {
      return;
    }
    call(coordinator_->rendezvous(), request);
  }

  void RendezvousRequest(int service, uint8_t selector, const uint8_t* data,
                         size_t size) {
    const absl::Time past = absl::InfinitePast();
    switch (service) {
      case 2:
        Rendezvous<v1::SetRequest>(
            selector, data, size, [](RendezvousStore& kv, const auto& r) {
              (void)kv.Set(r.context().scope(), r.key(), r.value());
            });
        break;
      case 3:
        Rendezvous<v1::GetRequest>(
            selector, data, size, [&](RendezvousStore& kv, const auto& r) {
              (void)kv.Get(r.context().scope(), r.key(), past);
            });
        break;
      case 4:
        Rendezvous<v1::WaitRequest>(
            selector, data, size, [&](RendezvousStore& kv, const auto& r) {
              (void)kv.Wait(r.context().scope(),
                            {r.keys().begin(), r.keys().end()}, past);
            });
        break;
      case 5:
        Rendezvous<v1::AddRequest>(
            selector, data, size, [](RendezvousStore& kv, const auto& r) {
              (void)kv.Add(r.context().scope(), r.key(), r.delta());
            });
        break;
      case 6:
        Rendezvous<v1::CompareSetRequest>(
            selector, data, size, [](RendezvousStore& kv, const auto& r) {
              (void)kv.CompareSet(r.context().scope(), r.key(), r.expected(),
                                  r.desired());
            });
        break;
      default:
        Rendezvous<v1::DeleteRequest>(
            selector, data, size, [](RendezvousStore& kv, const auto& r) {
              (void)kv.Delete(r.context().scope(), r.key());
            });
        break;
    }
  }

  void FillIn(uint8_t selector, v1::ReportStepRequest& report) {
    FakeWorker& w = workers_[(selector >> 2) & 1];
    if (selector & 2) {
      if (report.worker_id().empty()) report.set_worker_id(w.id);
      if (report.job_id().empty()) report.set_job_id(Held(w).job_id());
      if (report.attempt() == 0) report.set_attempt(Held(w).attempt());
      if (report.stage() == 0) report.set_stage(Held(w).stage());
    }
    if ((selector & 16) && report.step() == 0 &&
        report.schedule_version() == 0) {
      report.set_step(w.next_step);
      if (const worker::ControlState::VersionPtr v = VersionFor(w, w.next_step)) {
        report.set_schedule_version(v->version());
      }
      if (w.next_step <= w.granted) ++w.next_step;
    }
    if ((selector & 8) && report.action_start_seconds_size() == 0 &&
        report.action_end_seconds_size() == 0) {
      const worker::ControlState::VersionPtr v = VersionFor(w, report.step());
      const int stage = report.stage();
      if (v != nullptr && stage >= 0 &&
          stage < v->schedule().stage_actions_size()) {
        const int n = v->schedule().stage_actions(stage).actions_size();
        for (int i = 0; i < n; ++i) {
          report.add_action_start_seconds(0.01 * i);
          report.add_action_end_seconds(0.01 * i + 0.008);
        }
        report.set_step_seconds(0.01 * n);
        report.set_idle_seconds(0.002 * n);
      }
    }
  }

  FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<FakeWorker> workers_;
  std::string job_id_;
};

}  // namespace
}  // namespace zbpp::coordinator

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* fixture = new zbpp::coordinator::Fixture();
  if (size == 0) return 0;
  fixture->Run(data[0], data + 1, size - 1);
  return 0;
}
