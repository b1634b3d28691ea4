#ifndef ZBPP_WORKER_DAEMON_ATTEMPT_RUNNER_H_
#define ZBPP_WORKER_DAEMON_ATTEMPT_RUNNER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/daemon/control_state.h"
#include "worker/daemon/session_client.h"
#include "worker/daemon/step_reporter.h"
#include "worker/data/dataset_file.h"
#include "worker/runtime/stage_trainer.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::worker {

/// Joins one communication group of an attempt: rank `rank` of `size`
/// ranks. `group` names the group within the attempt's rendezvous scope:
/// "pipeline<R>" (replica R's pipeline, rank = stage) or "replicas<S>"
/// (stage S's data-parallel replicas, rank = replica). Called on the
/// training thread, once per group and attempt; an error fails the attempt.
using CommunicatorFactory = std::function<absl::StatusOr<std::unique_ptr<Communicator>>(
    const v1::Assignment& assignment, const std::string& group, int rank, int size)>;

/// The store through which one group of an attempt meets: the
/// coordinator's rendezvous store (worker/comm/rendezvous_store.h) over
/// `channel`, under the assignment's rendezvous_scope, with the session's
/// worker id and call metadata, behind a c10d::PrefixStore of `group`. What
/// the Gloo and NCCL factories share; `timeout` bounds each wait for a key.
c10::intrusive_ptr<c10d::Store> AttemptGroupStore(const std::shared_ptr<grpc::Channel>& channel,
                                                  const SessionClient& session,
                                                  const v1::Assignment& assignment,
                                                  const std::string& group,
                                                  absl::Duration timeout);

/// The daemon's CommunicatorFactory: Gloo (worker/comm/gloo_communicator.h)
/// meeting its peers through the coordinator's rendezvous store
/// (worker/comm/rendezvous_store.h) over `channel`, under the assignment's
/// rendezvous_scope, with the session's worker id and call metadata.
/// `gloo_hostname`: the address Gloo binds and advertises to peers; empty:
/// c10d's default (the host name, falling back to loopback). `timeout`:
/// the longest wait for the rendezvous and for a peer's message. `session`
/// is not owned and must outlive the factory.
CommunicatorFactory GlooCommunicatorFactory(std::shared_ptr<grpc::Channel> channel,
                                            const SessionClient* session,
                                            std::string gloo_hostname, absl::Duration timeout);

/// The daemon's CommunicatorFactory for NCCL (worker/comm/nccl_communicator.h):
/// the same rendezvous as GlooCommunicatorFactory's (the coordinator's
/// store under the assignment's rendezvous_scope, one c10d::PrefixStore per
/// group), NCCL on `device` (this worker's CUDA device), `timeout` for the
/// rendezvous and as NCCL's operation timeout. A CPU `device` (or a
/// machine without a GPU) makes every call FailedPrecondition.
///
/// Defined in attempt_runner_nccl.cc, library zbpp_worker_daemon_nccl,
/// which links libtorch_cuda: only binaries that may run on a GPU
/// (zbpp-worker) link it and hand it to WorkerServer::Options; the
/// CPU-only tests do not. `session` is not owned and must outlive the
/// factory.
CommunicatorFactory NcclCommunicatorFactory(std::shared_ptr<grpc::Channel> channel,
                                            const SessionClient* session, c10::Device device,
                                            absl::Duration timeout);

/// The name of a transport in messages: "Gloo", "NCCL". Assignments
/// without one (from a coordinator that predates JobSpec.transport) run
/// Gloo. Thread-safe.
const char* TransportLabel(v1::Transport transport);

/// What RunAttempt needs from the daemon.
struct AttemptEnvironment {
  StepReporter* reporter = nullptr;   ///< Where step reports go; not owned.
  ControlState* state = nullptr;      ///< Grants, versions, aborts; not owned.
  /// Joins the attempt's groups over Gloo (GlooCommunicatorFactory in the
  /// daemon): Assignment.transport GLOO, or none.
  CommunicatorFactory communicators;
  /// Joins them over NCCL (NcclCommunicatorFactory): Assignment.transport
  /// NCCL. Null when this binary has no NCCL: such an assignment then fails
  /// the attempt (FailedPrecondition).
  CommunicatorFactory nccl_communicators;
  /// Where corpora are cached as token files.
  std::string cache_dir;
  /// Where dataset files may be opened (--data-root); empty: anywhere.
  DataRoots data_roots;
  /// Longest wait for a peer's message or a grant.
  absl::Duration comm_timeout = absl::Seconds(120);
  /// Longest wait for the answer to one step report
  /// (StepReporter::ReportStep's timeout).
  absl::Duration report_timeout = absl::Seconds(30);
  /// Faults to inject in every attempt (--slow-stage, --inject-nan-step).
  FaultInjection faults;
  /// Synthetic compute (--synthetic-compute; benchmarking, not training):
  /// passes wait the times of the Assignment's cost model, scaled; the
  /// noise seed is the job's.
  std::optional<SyntheticComputeSource> synthetic;
  /// Where the passes run (--device; StageTrainerOptions::device).
  c10::Device device = c10::Device(c10::kCPU);
};

/// A stage's trainer kept between two attempts of a job, and what it holds
/// (docs/elastic.md, "Held state"): RunAttempt leaves it here after a fault
/// or an abort, and the next attempt with Assignment.resume_from_memory
/// takes it. Owned by the daemon, used on its training thread only.
struct HeldStage {
  v1::HeldState state;              ///< Reported in heartbeats (ControlState::SetHeld).
  std::vector<int> virtual_stages;  ///< The trainer's, in model order.
  /// The job's id and spec fingerprint (as its checkpoints' owner files):
  /// a job of the same id from another coordinator database does not
  /// resume from it.
  std::string owner;
  std::unique_ptr<StageTrainer> trainer;  ///< Null: nothing held.
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
/// loads the corpus, joins the attempt's groups over the assignment's
/// transport (env.communicators for Gloo, env.nccl_communicators for NCCL;
/// NCCL on a worker whose device is not CUDA, or without an NCCL factory,
/// fails the attempt with FailedPrecondition saying so),
/// builds the stage's chunks (or restores the assigned
/// checkpoint), measures the link latency to the next stage, profiles its
/// virtual stages and sends the profile (env.reporter's ReportProfile) when
/// the assignment asks for it (Assignment.profile; still PREPARING, a
/// profile that fails is a job error), then for every step waits for its
/// grant, runs it with the schedule version in force,
/// evaluates (first step, last step and every tenth of the run), writes
/// checkpoints every `checkpoint.interval_steps`, and reports the step
/// (env.reporter). An AbortCommand releases a step blocked on a peer at
/// once (ControlState::SetAbortHook, Communicator::Abort).
///
/// `held`: with Assignment.resume_from_memory the attempt takes the trainer
/// held there (same job and stage, held at start_step - 1; else it fails
/// with FailedPrecondition, no job error) instead of building one; without,
/// it drops what is held first. An attempt that ends for a fault or an abort
/// (not a job error, not the job's last step) leaves its trainer there,
/// settled by StageTrainer::Hold, and says so through env.state->SetHeld.
///
/// The outcome's status is OK when the attempt ran all steps or was aborted
/// by the coordinator, else an error naming what failed (a bad corpus, a
/// checkpoint that does not match the model, a silent peer, a refused
/// schedule, a report the coordinator did not take, prefixed "reporting
/// step N: " or "reporting the calibration profile: "). Blocks; runs on the daemon's training thread, one attempt
/// at a time per ControlState.
AttemptOutcome RunAttempt(const v1::Assignment& assignment, const AttemptEnvironment& env,
                          HeldStage& held);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DAEMON_ATTEMPT_RUNNER_H_
