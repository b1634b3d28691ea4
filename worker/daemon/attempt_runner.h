#ifndef ZBPP_WORKER_DAEMON_ATTEMPT_RUNNER_H_
#define ZBPP_WORKER_DAEMON_ATTEMPT_RUNNER_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/daemon/control_state.h"
#include "worker/daemon/session_client.h"
#include "worker/runtime/rank_trainer.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::worker {

/// What RunAttempt needs from the daemon.
struct AttemptEnvironment {
  SessionClient* session = nullptr;   ///< ReportStep and the worker id; not owned.
  ControlState* state = nullptr;      ///< Grants, versions, aborts; not owned.
  std::shared_ptr<grpc::Channel> channel;  ///< For the rendezvous store.
  /// Where corpora are cached as token files.
  std::string cache_dir;
  /// Address Gloo binds and advertises to peers; empty: c10d's default
  /// (the host name, falling back to loopback).
  std::string gloo_hostname;
  /// Longest wait for a peer's message, the rendezvous or a grant.
  absl::Duration comm_timeout = absl::Seconds(120);
  /// Faults to inject in every attempt (--slow-stage, --inject-nan-step).
  FaultInjection faults;
  /// Where the passes run (--device; RankTrainerOptions::device).
  c10::Device device = c10::Device(c10::kCPU);
};

/// How an attempt ended.
struct AttemptOutcome {
  /// OK: all steps ran, or the coordinator aborted the attempt.
  absl::Status status;
  /// The error is in the job itself (a missing corpus, a checkpoint that
  /// does not match the model, a schedule this worker refuses): another
  /// attempt would fail the same way (Heartbeat.job_error).
  bool job_error = false;
};

/// Runs one job attempt on this worker from its Assignment to the end:
/// loads the corpus, joins the Gloo group through the coordinator's
/// rendezvous store, builds the rank's chunks (or restores the assigned
/// checkpoint), measures the link latency to the next rank, then for every
/// step waits for its grant, runs it with the schedule version in force,
/// evaluates (first step, last step and every tenth of the run), writes
/// checkpoints every `checkpoint.interval_steps`, and reports the step.
///
/// The outcome's status is OK when the attempt ran all steps or was aborted
/// by the coordinator, else an error naming what failed (a bad corpus, a
/// checkpoint that does not match the model, a silent peer, a refused
/// schedule). Blocks; runs on the daemon's training thread.
AttemptOutcome RunAttempt(const v1::Assignment& assignment, const AttemptEnvironment& env);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DAEMON_ATTEMPT_RUNNER_H_
