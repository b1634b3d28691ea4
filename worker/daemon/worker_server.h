#ifndef ZBPP_WORKER_DAEMON_WORKER_SERVER_H_
#define ZBPP_WORKER_DAEMON_WORKER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/daemon/attempt_runner.h"
#include "worker/daemon/control_state.h"
#include "worker/daemon/session_client.h"
#include "worker/runtime/stage_trainer.h"

namespace zbpp::worker {

/// The worker daemon as an object: its own gRPC server (health and
/// reflection), the registration and Session with the coordinator
/// (SessionClient), and the training loop that runs every assignment
/// (RunAttempt) over the transport the coordinator chose (Gloo, or NCCL
/// with `Options.nccl_factory`). zbpp-worker (worker/daemon/worker_main.cc) is its
/// flags around Create and RunTrainingLoop.
///
/// Thread-safe: the accessors and Shutdown from any thread;
/// RunTrainingLoop on one thread at a time.
class WorkerServer {
 public:
  /// The daemon's flags' values (docs/training.md; worker_main.cc's usage).
  struct Options {
    /// The coordinator's "HOST:PORT" (--coordinator).
    std::string coordinator;
    /// How to reach it: plaintext or TLS (--tls-ca, --tls-cert, --tls-key;
    /// common/channel_credentials.h ClientCredentials).
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    /// Where the passes run (--device).
    c10::Device device = c10::Device(c10::kCPU);
    /// This worker's own gRPC server, "HOST:PORT" (--listen); port 0: any.
    std::string listen = "127.0.0.1:0";
    /// Where corpora are cached as token files (--cache-dir).
    std::string cache_dir;
    /// Where dataset files may be opened (--data-root, resolved by
    /// ResolveDataRoots; zbpp-worker requires one); empty: anywhere the
    /// worker's user may read (in-process tests only).
    DataRoots data_roots;
    /// Address Gloo binds and advertises (--gloo-hostname); empty: c10d's
    /// default.
    std::string gloo_hostname;
    /// WorkerDescription.name (--name).
    std::string name;
    /// Memory the coordinator plans with, bytes (--memory-bytes); 0: the
    /// device's (DeviceMemoryBytes).
    uint64_t memory_bytes = 0;
    /// Longest wait for a peer, the rendezvous or a grant (--comm-timeout).
    absl::Duration comm_timeout = absl::Seconds(120);
    /// File holding the coordinator's bearer token (--token-file); empty:
    /// none.
    std::string token_file;
    /// Faults to inject (--slow-stage, --inject-nan-step).
    FaultInjection faults;
    /// Synthetic compute (--synthetic-compute); benchmarking, not training.
    std::optional<SyntheticComputeSource> synthetic;

    // --- NCCL (zbpp-worker sets these; CPU-only tests leave them) ---
    /// Makes the factory of NCCL groups from the channel to the
    /// coordinator, the session, `device` and `comm_timeout`:
    /// NcclCommunicatorFactory (attempt_runner.h). Null: this binary has no
    /// NCCL, and an assignment with transport NCCL fails.
    std::function<CommunicatorFactory(std::shared_ptr<grpc::Channel>, const SessionClient*,
                                      c10::Device, absl::Duration)>
        nccl_factory;
    /// WorkerDescription.device_identity: GpuIdentity of `device` (its
    /// UUID), by which the coordinator tells GPUs apart; empty for a CPU
    /// worker (or one whose GPU could not be identified: it never gets
    /// NCCL).
    std::string device_identity;
    /// WorkerDescription.nccl_shared_gpu_test: TEST-ONLY, set with
    /// --nccl-shared-gpu-test-host-id, after ConfigureNcclForSharedGpuTests.
    bool nccl_shared_gpu_test = false;
  };

  /// Starts the worker's server, then registers with the coordinator and
  /// opens the Session; health is SERVING once it returns. On failure
  /// nothing keeps running and the error's message is the daemon's one
  /// error line (without the "zbpp-worker: " prefix): "--listen: cannot
  /// listen on ...", "--token-file: ...", or SessionClient::Create's
  /// ("cannot reach the coordinator at ...", "registering with the
  /// coordinator at ...").
  static absl::StatusOr<std::unique_ptr<WorkerServer>> Create(Options options);

  /// Shuts down (if not yet). RunTrainingLoop must have returned.
  ~WorkerServer();
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  /// The id the coordinator gave this worker (changes when it registers
  /// again).
  std::string worker_id() const;
  /// The address advertised to the coordinator (WorkerDescription.address):
  /// the --listen host (the host name for a wildcard) and the bound port.
  std::string address() const;

  /// Runs assignments one after another: each from its Assignment to the
  /// end (RunAttempt); a failed one is reported in the heartbeat
  /// (WORKER_PHASE_FAILED) until the coordinator aborts it. Returns once
  /// Shutdown was called and no attempt is running.
  void RunTrainingLoop();

  /// Closes the Session and stops the worker's server; RunTrainingLoop
  /// returns when the attempt in progress (if any) ends. Idempotent.
  void Shutdown();

 private:
  explicit WorkerServer(Options options);
  /// Frees the held stage state and stops reporting it.
  void DropHeld();

  Options options_;
  ControlState state_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string address_;
  std::unique_ptr<SessionClient> session_;
  AttemptEnvironment env_;
  /// The stage state kept between two attempts (training thread only).
  HeldStage held_;
  std::atomic<bool> shutdown_{false};
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DAEMON_WORKER_SERVER_H_
