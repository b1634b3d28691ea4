#ifndef ZBPP_COORDINATOR_CORE_TRANSPORT_CHOICE_H_
#define ZBPP_COORDINATOR_CORE_TRANSPORT_CHOICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "zbpp/v1/job_spec.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// One worker chosen for a job, at its place in the job.
struct PlacedWorker {
  std::string worker_id;
  int stage = 0;    ///< Its stage, in [0, p).
  int replica = 0;  ///< Its replica, in [0, d).
  /// As the worker registered; null when the registry has none (the worker
  /// counts as one without a GPU). Not owned.
  const zbpp::v1::WorkerDescription* description = nullptr;
};

/// The transport one attempt of a job runs on.
struct TransportChoice {
  /// TRANSPORT_GLOO or TRANSPORT_NCCL, never AUTO.
  zbpp::v1::Transport transport = zbpp::v1::TRANSPORT_GLOO;
  /// Why, for people (Job.transport_reason), e.g. "auto: every worker has a
  /// GPU of its own" or "auto: worker-3 (stage 1) has no GPU".
  std::string reason;
};

/// The GPU a worker registered (WorkerDescription host and device_identity)
/// as a key equal for every worker on that GPU: a UUID ("GPU-…" or "MIG-…",
/// as cudaDeviceProp::uuid and nvidia-smi give it) names the device on any
/// host, case aside; a PCI bus id names it on `host`, normalised (case,
/// domain padding: "0000:1B:00.0", "00000000:1b:00.0" and "1b:00.0" are one
/// device); anything else is compared as given, on `host`. Pure.
std::string GpuKey(const std::string& host, const std::string& identity);

/// Resolves the job spec's `requested` transport for the workers that
/// would run the job (job_spec.proto Transport; docs/training.md, "Transport"):
///  * AUTO: NCCL when every worker is a CUDA worker with a
///    device_identity and no two of them registered the same GPU (GpuKey:
///    the same UUID on any host, or the same PCI bus id on one host) —
///    every worker has a GPU of its own — and Gloo otherwise, the reason naming the first worker (or
///    pair) that decided it. Workers sharing a GPU get Gloo under AUTO even
///    with nccl_shared_gpu_test: the test setting is slow, and asked for
///    explicitly.
///  * GLOO: Gloo.
///  * NCCL: NCCL when every worker has a GPU of its own, or when those that
///    share one all registered with nccl_shared_gpu_test (tests).
///
/// Errors: InvalidArgument naming `transport` and the workers, for NCCL
/// with a worker that has no GPU ("transport: nccl needs a GPU of its own
/// for every worker; worker-3 (stage 1) has no GPU (device cpu)"), one that
/// registered no device identity, or two that share a GPU without the
/// test setting ("...; worker-1 (stage 0) and worker-2 (stage 1) share GPU
/// 0000:1B:00.0 on host gpu-7"); InvalidArgument naming `transport` for a
/// value that is not a Transport. `workers` in worker-index order; the
/// first offender in that order is named. Thread-safe (pure).
absl::StatusOr<TransportChoice> ChooseTransport(zbpp::v1::Transport requested,
                                                const std::vector<PlacedWorker>& workers);

/// Whether `candidate` may join `chosen` (workers already chosen for one
/// job) as a worker of a job over NCCL, so that ChooseTransport(NCCL, ...)
/// accepts what worker choice picks: a CUDA worker with a device identity
/// whose GPU (host, identity) none of `chosen` has, unless both run the
/// shared-GPU test setting (nccl_shared_gpu_test). Worker choice skips the
/// others and the job waits for workers that qualify rather than failing
/// on the first free ones. Thread-safe (pure).
bool JoinsNcclWorkers(const zbpp::v1::WorkerDescription& candidate,
                    const std::vector<const zbpp::v1::WorkerDescription*>& chosen);

/// "GLOO" / "NCCL" / "AUTO": the value's name without its prefix, for
/// messages and metric labels (lower-cased there). Thread-safe.
std::string TransportName(zbpp::v1::Transport transport);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_TRANSPORT_CHOICE_H_
