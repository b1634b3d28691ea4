// An in-process stand-in for zbpp-coordinator's JobService and
// WorkerService, for driving the zbppctl binary in tests: jobs live in a
// map, WatchJob plays events the test scripted.

#ifndef ZBPP_TESTS_CLIENT_FAKE_COORDINATOR_H_
#define ZBPP_TESTS_CLIENT_FAKE_COORDINATOR_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::ctltest {

/// The fake's state, shared by both services. Thread-safe.
class FakeState {
 public:
  /// Adds `job` as it is (its id must be set; SubmitJob hands out
  /// "sub-1", "sub-2", ...).
  void PutJob(const v1::Job& job);
  /// Adds an older schedule version of a job for GetScheduleVersion, which
  /// also answers with each job's Job.schedule.
  void PutVersion(const v1::ScheduleVersion& version);
  /// The step summaries ListSteps returns for `job_id`, in one page.
  void PutSteps(const std::string& job_id, std::vector<v1::StepSummary> steps);
  /// The stored job; a default Job when absent.
  v1::Job GetJob(const std::string& id);
  /// Events WatchJob sends for `job_id` after its snapshot, then ends OK.
  void ScriptWatch(const std::string& job_id, std::vector<v1::JobEvent> events);
  /// Workers ListWorkers returns, in pages of at most the page limit.
  void SetWorkers(std::vector<v1::Worker> workers);
  /// The most workers one ListWorkers page holds (the page size when the
  /// request leaves it 0); 1000 by default (the coordinator's largest page).
  void SetWorkersPageLimit(int limit);
  /// When not empty, SubmitJob and CancelJob require `Bearer <token>`.
  void RequireToken(const std::string& token);
  /// SubmitJob answers `status` from now on (OK: submits again), as the
  /// coordinator does when its store refuses the job.
  void FailSubmits(grpc::Status status);
  /// The `authorization` metadata of the last call ("" when none).
  std::string last_authorization();
  /// The deadline of the last unary call was set.
  bool last_call_had_deadline();

  grpc::Status Submit(grpc::ServerContext* context, const v1::JobSpec& spec,
                      v1::Job* job);
  grpc::Status Get(grpc::ServerContext* context, const std::string& id,
                   v1::Job* job);
  grpc::Status List(grpc::ServerContext* context,
                    v1::ListJobsResponse* response);
  grpc::Status Version(grpc::ServerContext* context,
                       const v1::GetScheduleVersionRequest& request,
                       v1::ScheduleVersion* version);
  grpc::Status Steps(grpc::ServerContext* context, const v1::ListStepsRequest& request,
                     v1::ListStepsResponse* response);
  grpc::Status Cancel(grpc::ServerContext* context, const std::string& id,
                      v1::Job* job);
  grpc::Status Watch(grpc::ServerContext* context, const std::string& id,
                     grpc::ServerWriter<v1::JobEvent>* writer);
  grpc::Status Workers(grpc::ServerContext* context,
                       const v1::ListWorkersRequest& request,
                       v1::ListWorkersResponse* response);

 private:
  grpc::Status Authorize(grpc::ServerContext* context, bool required)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<std::string, v1::Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);  // Submission order.
  std::map<std::pair<std::string, int64_t>, v1::ScheduleVersion> versions_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<v1::StepSummary>> steps_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<v1::JobEvent>> scripts_
      ABSL_GUARDED_BY(mu_);
  std::vector<v1::Worker> workers_ ABSL_GUARDED_BY(mu_);
  int workers_page_limit_ ABSL_GUARDED_BY(mu_) = 1000;
  std::string token_ ABSL_GUARDED_BY(mu_);
  std::string last_authorization_ ABSL_GUARDED_BY(mu_);
  bool last_deadline_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status submit_status_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

/// Both fake services on a gRPC server at 127.0.0.1:<port 0>.
class FakeCoordinator {
 public:
  /// Starts serving; nullptr when the server cannot start.
  static std::unique_ptr<FakeCoordinator> Start();
  ~FakeCoordinator();

  /// "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  FakeState& state() { return *state_; }

 private:
  FakeCoordinator() = default;
  std::unique_ptr<FakeState> state_;
  std::unique_ptr<v1::JobService::Service> jobs_;
  std::unique_ptr<v1::WorkerService::Service> workers_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace zbpp::ctltest

#endif  // ZBPP_TESTS_CLIENT_FAKE_COORDINATOR_H_
