// The load generator of coordinator_load_bench: fake workers that register
// with a zbpp-coordinator over gRPC, hold a Session stream (callback API),
// heartbeat and report the steps they are granted with the simulator's
// timings of the true costs. One driver thread ticks them (LoadWorker::Tick),
// so hundreds of workers cost a few threads.

#ifndef ZBPP_BENCH_COORDINATOR_LOAD_WORKER_H_
#define ZBPP_BENCH_COORDINATOR_LOAD_WORKER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "bench/latencies.h"
#include "scheduler/problem.h"
#include "testing/fake_worker.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::bench {

/// Per-action start/end of every stage of one schedule version under
/// `truth`, simulated once and shared by the job's workers.
struct VersionTimings {
  std::vector<std::vector<double>> start, end;  // [stage][action], seconds
  std::vector<double> busy;                     // [stage], seconds
};

/// The timings of `version` simulated on `truth` (empty when the version
/// does not convert or simulate).
std::shared_ptr<const VersionTimings> SimulateVersion(const v1::ScheduleVersion& version,
                                                      const sched::Problem& truth);

/// The step report of `worker_id` (assigned `a`) for `step` under schedule
/// `version`, with the timings `t` of that version.
v1::ReportStepRequest BuildReport(const std::string& worker_id, const v1::Assignment& a,
                                  int64_t step, int64_t version, const VersionTimings& t);

/// What the load phase measures (shared by every fake worker).
struct LoadStats {
  std::atomic<bool> measuring{false};
  Latencies report;            // ReportStep, client side
  Latencies heartbeat_write;   // Session heartbeat Write -> OnWriteDone
  Latencies register_worker;   // RegisterWorker, client side (setup)
  Latencies version_delivery;  // ScheduleVersion.publish_time -> received
  std::atomic<int64_t> reports_ok{0}, reports_failed{0};
  std::atomic<int64_t> heartbeats{0}, heartbeats_skipped{0};
  std::atomic<int64_t> reports_in_flight{0};
  absl::Mutex mu;
  std::map<std::string, int64_t> failures ABSL_GUARDED_BY(mu);
};

/// Simulated timings per (job, version), computed on first use.
/// Thread-safe.
class TimingCache {
 public:
  explicit TimingCache(sched::Problem truth) : truth_(std::move(truth)) {}
  std::shared_ptr<const VersionTimings> Get(const v1::ScheduleVersion& version)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const sched::Problem truth_;
  absl::Mutex mu_;
  std::map<std::pair<std::string, int64_t>, std::shared_ptr<const VersionTimings>> cache_
      ABSL_GUARDED_BY(mu_);
};

class LoadWorker;

/// The worker's Session stream (callback API): reads on gRPC's threads,
/// heartbeat writes from the driver thread, one write in flight at a time.
class SessionReactor final
    : public grpc::ClientBidiReactor<v1::SessionRequest, v1::SessionResponse> {
 public:
  SessionReactor(LoadWorker* worker, LoadStats* stats) : worker_(worker), stats_(stats) {}

  // Opens the Session of worker `id` registered at `address`, with its
  // credential (RegisterWorkerResponse.credential).
  void Start(v1::WorkerService::Stub* stub, const std::string& id, const std::string& address,
             const std::string& credential);
  /// Sends a heartbeat unless the previous write is still in flight.
  void Heartbeat(const v1::Heartbeat& heartbeat);
  void Stop() {
    context_.TryCancel();
    RemoveHold();
  }
  void WaitDone() { done_.WaitForNotificationWithTimeout(absl::Seconds(10)); }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override { done_.Notify(); }

 private:
  LoadWorker* const worker_;
  LoadStats* const stats_;
  grpc::ClientContext context_;
  v1::SessionRequest out_;
  v1::SessionResponse in_;
  std::atomic<bool> writing_{false};
  bool counted_write_ = false;
  absl::Time sent_;
  absl::Notification done_;
};

/// One fake worker: registration, its Session, and the steps it is
/// granted, reported one at a time.
class LoadWorker {
 public:
  /// Worker `index` (its address and host derive from it) on `channel`.
  LoadWorker(int index, std::shared_ptr<grpc::Channel> channel, LoadStats* stats,
             TimingCache* timings);

  /// Registers (counted in stats.register_worker) and opens the Session.
  absl::Status Register();
  /// A Session message (called on a gRPC thread).
  void Receive(const v1::SessionResponse& m) ABSL_LOCKS_EXCLUDED(mu_);
  /// One tick of the driver: a heartbeat, the calibration profile its
  /// attempt asks for, and the next granted step.
  void Tick() ABSL_LOCKS_EXCLUDED(mu_);

  void Stop() { session_.Stop(); }
  void WaitDone() { session_.WaitDone(); }
  /// Assigned and past its first step.
  bool running() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Sends `request` asynchronously; the callback counts it and moves to the
  // next step when it succeeded.
  void Send(v1::ReportStepRequest request);
  // Sends the attempt's calibration profile (Assignment.profile) and waits
  // for the answer; a refusal is counted as a failed report.
  void SendProfile(v1::ReportProfileRequest request);

  const int index_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  LoadStats* const stats_;
  TimingCache* const timings_;
  std::string id_;
  std::string credential_;  // RegisterWorkerResponse.credential
  SessionReactor session_;

  absl::Mutex mu_;
  // The Session protocol (ControlState) and the next step to report.
  coordinator::testing::FakeWorker protocol_ ABSL_GUARDED_BY(mu_);
  bool report_in_flight_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zbpp::bench

#endif  // ZBPP_BENCH_COORDINATOR_LOAD_WORKER_H_
