#ifndef ZBPP_METRICS_COORDINATOR_METRICS_H_
#define ZBPP_METRICS_COORDINATOR_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::metrics {

/// Why the coordinator refused a call: the `reason` label of
/// `zbpp_rpc_refusals_total`.
enum class RefusalReason {
  /// A token is configured and the call carries no "authorization" metadata.
  kMissingToken,
  /// The call's "authorization" metadata is not "Bearer <the token>".
  kWrongToken,
  /// Client certificates are required (--tls-client-ca) and the TLS
  /// connection presented none.
  kMissingClientCertificate,
  /// A call naming a worker_id carries no "zbpp-worker-credential" metadata,
  /// or not the credential that worker registered with.
  kWrongWorkerCredential,
};

/// The label value of `reason`: "missing_token", "wrong_token" or
/// "missing_client_certificate" or "wrong_worker_credential".
std::string_view RefusalReasonName(RefusalReason reason);

/// The coordinator's Prometheus metrics (docs/control-plane.md, "Metrics"), registered on
/// a caller-owned `prometheus::Registry` that a `MetricsServer` exposes.
///
/// Families (all names prefixed `zbpp_`; every family has HELP text; label
/// values are bounded — `job_id` by the jobs the coordinator holds, which
/// `RemoveJob` drops when they finish; never a step or microbatch label):
///
/// | name | type | labels | unit | meaning |
/// | --- | --- | --- | --- | --- |
/// | `zbpp_stage_measured_bubble_ratio` | gauge | job_id, stage | ratio in [0,1] | Idle fraction of the stage in the last recorded step: 1 − busy / the step's largest per-stage span (the simulator's definition). |
/// | `zbpp_stage_predicted_bubble_ratio` | gauge | job_id, stage | ratio in [0,1] | The simulator's idle fraction of the stage for the current schedule version under the current cost model. |
/// | `zbpp_stage_idle_seconds` | gauge | job_id, stage | seconds | Time the stage waited for inputs in the last recorded step. |
/// | `zbpp_stage_pass_seconds` | gauge | job_id, stage, pass=F\|B\|W | seconds | Mean measured duration of one pass (forward, input-gradient backward, weight-gradient backward) of the stage in the last recorded step; 0 where the pass did not run (a fused BW is reported under B). |
/// | `zbpp_stage_reduce_seconds` | gauge | job_id, stage | seconds | Mean measured duration of one data-parallel gradient reduction (REDUCE_GRAD) of the stage in the last recorded step, averaged over its replicas; 0 with one replica. |
/// | `zbpp_stage_exposed_reduce_seconds` | gauge | job_id, stage | seconds | How long the stage's last reduction ended after its last pass in the last recorded step (what the passes did not hide), averaged over its replicas; 0 with one replica. |
/// | `zbpp_stage_peak_activation_bytes` | gauge | job_id, stage | bytes | Peak activation memory of the stage in the last recorded step, as its workers measured it (the largest over its replicas); 0 when they did not measure it. |
/// | `zbpp_stage_predicted_peak_activation_bytes` | gauge | job_id, stage | bytes | The simulator's peak activation memory of the stage for the schedule version of the last recorded step under the cost model its predicted bubble ratio uses. |
/// | `zbpp_stage_breakdown_seconds` | gauge | job_id, stage, part | seconds | Where the stage's time went in the last recorded step and in the gap before it (job.proto StepBreakdown, the mean over its replicas). `part` is a StepBreakdown field without `_seconds`: the step's span (compute, input_wait, send_wait, validation_check, reduction_wait, overhead; they sum to the span) and the gap before it (drain, validation, optimizer, evaluation, checkpoint, report, grant, other; they sum to the gap). |
/// | `zbpp_step_duration_seconds` | histogram | job_id | seconds | Measured time of each optimizer step: the longest worker's span from its step start to its last action. |
/// | `zbpp_job_tokens_per_second` | gauge | job_id | tokens per second | Trained tokens per second in the last recorded step. |
/// | `zbpp_job_predicted_step_seconds` | gauge | job_id | seconds | The simulator's step time for the schedule version of the last recorded step under the costs measured through it (StepSummary.predicted_step_seconds): what the step duration compares with; absent until a step carries it. |
/// | `zbpp_job_last_step` | gauge | job_id | step index | 0-based index of the last recorded step (to match the gauges to a step). |
/// | `zbpp_job_schedule_version` | gauge | job_id | version number | Version of the job's current schedule; 0 before the first. |
/// | `zbpp_resolves_total` | counter | job_id, outcome=published\|kept | re-solves | Adaptive re-solves: `published` when a new schedule version was published, `kept` when the current one stayed. |
/// | `zbpp_rollbacks_total` | counter | job_id | steps | Optimistic steps rolled back by post-validation. |
/// | `zbpp_skipped_steps_total` | counter | job_id | steps | Steps skipped because a gradient held inf or nan. |
/// | `zbpp_job_info` | gauge | job_id, transport=gloo\|nccl | 1 | One series per job, 1, labelled with the current attempt's transport: the job-level labels live here instead of on every family (a label that changes at a recovery would restart counters); join with `* on(job_id) group_left(transport) zbpp_job_info`. |
/// | `zbpp_job_layout_blocks` | gauge | job_id, virtual_stage | blocks | Transformer blocks of each virtual stage under the current attempt's layout (Job.layout; docs/training.md, "Uneven stages"). |
/// | `zbpp_workers` | gauge | state | workers | Workers known to the coordinator, by state. |
/// | `zbpp_jobs` | gauge | state | jobs | Jobs known to the coordinator, by state. |
/// | `zbpp_rpc_duration_seconds` | histogram | method, code | seconds | Server-side latency of gRPC calls, by full method name and status code ("OK", "NOT_FOUND", ...). |
/// | `zbpp_rpc_refusals_total` | counter | service, reason=missing_token\|wrong_token\|missing_client_certificate\|wrong_worker_credential | calls | Calls refused as UNAUTHENTICATED, by gRPC service ("zbpp.v1.JobService", ...) and reason. |
/// | `zbpp_store_healthy` | gauge | — | 0 or 1 | 1 while store writes succeed; 0 while one fails and is retried (running jobs get no new steps meanwhile; coordinator/core/store_writer.h). |
/// | `zbpp_store_pending_writes` | gauge | — | writes | Store writes decided and not yet stored, the failing one included. |
/// | `zbpp_store_failed_writes_total` | counter | — | attempts | Failed attempts of store writes (each retry counts). |
/// | `zbpp_store_refused_writes_total` | counter | — | writes | Store writes skipped: refused for their record, or given up at shutdown with the store still failing. |
///
/// The label is `job_id`, not `job`: Prometheus gives every scraped series a
/// `job` label of its own (the scrape job) and would rename ours to
/// `exported_job`.
///
/// Per-job counters and the step histogram appear at 0 the first time a
/// method names the job, so `rate()` and `increase()` see the first event;
/// per-job and per-stage gauges appear on their first value. Series of the
/// states listed in `Options` appear at 0 at creation, and so do those of
/// every reason for each service in `Options::rpc_services`.
///
/// Thread-safety: every method may be called from any thread. One
/// CoordinatorMetrics per registry: a second one on the same registry would
/// share (and fight over) the same families.
class CoordinatorMetrics {
 public:
  struct Options {
    // --- Series that exist before the first event ---
    /// `state` label values of `zbpp_jobs` created at 0 (e.g. "PENDING",
    /// "RUNNING", ...), so a dashboard shows 0 rather than no data.
    std::vector<std::string> job_states;
    /// `state` label values of `zbpp_workers` created at 0.
    std::vector<std::string> worker_states;
    /// `service` label values of `zbpp_rpc_refusals_total` (full gRPC
    /// service names, e.g. "zbpp.v1.JobService") whose series of every
    /// reason are created at 0, so the first refusal is an increase.
    std::vector<std::string> rpc_services;

    // --- Histogram buckets (upper bounds, strictly increasing) ---
    /// Buckets of `zbpp_step_duration_seconds`, seconds: 5 ms .. 10 min.
    std::vector<double> step_duration_buckets_seconds = {
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
        2.5,   5,    10,    25,   60,  120,  300, 600};
    /// Buckets of `zbpp_rpc_duration_seconds`, seconds: 100 µs .. 10 s.
    std::vector<double> rpc_duration_buckets_seconds = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
        0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};
  };

  /// Registers every family above on `registry`.
  /// InvalidArgument for a null registry, empty or duplicate state or
  /// service names, or buckets that are empty, not finite or not strictly
  /// increasing;
  /// AlreadyExists when `registry` already holds one of the names with
  /// another metric type.
  static absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> Create(
      Options options, std::shared_ptr<prometheus::Registry> registry);

  /// Leaves the families and their series in the registry.
  ~CoordinatorMetrics();

  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  /// Records one completed step of `job_id`: observes `step_seconds` in the
  /// step histogram (skipped when negative or not finite), sets tokens per
  /// second, the last step, the schedule version, and for each entry of
  /// `summary.stages` the stage's measured and predicted bubble ratio, idle
  /// seconds, F/B/W seconds, reduction and exposed reduction seconds,
  /// measured and predicted peak activation bytes and every part of its
  /// breakdown (BreakdownPartLabels). Values are exposed as given (the
  /// proto promises ratios in [0,1]). Entries with a negative stage are
  /// ignored; an empty `job_id` ignores the call.
  void RecordStep(std::string_view job_id, const zbpp::v1::StepSummary& summary)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Sets the predicted bubble ratio ([0,1]) of one stage of the job's
  /// current schedule, e.g. when a schedule version is published before any
  /// step ran on it. Ignored for an empty `job_id` or a negative stage.
  void SetPredicted(std::string_view job_id, int stage, double ratio)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Sets the job's current schedule version (e.g. at publication).
  void SetScheduleVersion(std::string_view job_id, int64_t version)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Sets `zbpp_job_info{job_id, transport}` to 1, dropping the job's
  /// series of another transport (the coordinator resolves it per attempt:
  /// a recovery may change it). `transport` is a bounded set: "gloo" or
  /// "nccl". Ignored for an empty `job_id` or `transport`.
  void SetTransport(std::string_view job_id, std::string_view transport)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Sets `zbpp_job_layout_blocks{job_id, virtual_stage}` to each virtual
  /// stage's blocks under `layout` (Job.layout), dropping the series of
  /// virtual stages it no longer has. Ignored for an empty `job_id`.
  void SetLayout(std::string_view job_id, const std::vector<int>& layout)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Sets `zbpp_job_replicas{job_id, state}`: state "active" to the
  /// replicas running steps (Job.replicas_active; fewer than
  /// pipeline.data_parallel while DEGRADED, docs/elastic.md), "spare" to
  /// the spare workers kept for the job. Ignored for an empty `job_id`.
  void SetReplicas(std::string_view job_id, int active, int spares)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Counts one adaptive re-solve: outcome "published" when it published a
  /// new schedule version, "kept" otherwise.
  void RecordResolve(std::string_view job_id, bool published)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Adds `n` (>= 0; negative is ignored) rolled-back steps to the job.
  void AddRollbacks(std::string_view job_id, int64_t n = 1)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Adds `n` (>= 0; negative is ignored) skipped (inf/nan) steps to the job.
  void AddSkippedSteps(std::string_view job_id, int64_t n = 1)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Sets the number of workers in `state` (a bounded set of names, e.g.
  /// the coordinator's "REGISTERED", "ASSIGNED", "LOST"). The caller sets
  /// every state it knows, including those that fell to 0.
  void SetWorkers(std::string_view state, int64_t n) ABSL_LOCKS_EXCLUDED(mu_);

  /// Sets the number of jobs in `state` ("PENDING", "RUNNING", ...).
  void SetJobs(std::string_view state, int64_t n) ABSL_LOCKS_EXCLUDED(mu_);

  /// Observes one RPC's server-side latency in seconds. `method` is the full
  /// gRPC method name ("/zbpp.v1.JobService/SubmitJob"), a bounded set;
  /// `code` is exposed as absl's name for it ("OK", "NOT_FOUND", ...; gRPC
  /// codes have the same numbers). Negative or non-finite seconds are
  /// ignored.
  void ObserveRpc(std::string_view method, absl::StatusCode code,
                  double seconds) ABSL_LOCKS_EXCLUDED(rpc_mu_);

  /// Counts one call refused as UNAUTHENTICATED. `service` is the full gRPC
  /// service name ("zbpp.v1.WorkerService"); the caller keeps it to a
  /// bounded set (never a name taken unchecked from a request). An empty
  /// `service` ignores the call.
  void CountRefusal(std::string_view service, RefusalReason reason)
      ABSL_LOCKS_EXCLUDED(rpc_mu_);

  /// Sets the store series from the store writer's state
  /// (StoreWriter::Health): `healthy`, the `pending` writes, and the totals
  /// since the coordinator started of failed attempts and refused writes
  /// (the counters advance to them; a smaller total is ignored). The
  /// store series exist from creation (healthy 1, the others 0).
  void SetStore(bool healthy, int64_t pending, int64_t failed_writes,
                int64_t refused_writes) ABSL_LOCKS_EXCLUDED(mu_);

  /// The `part` label values of `zbpp_stage_breakdown_seconds`, in
  /// job.proto's order: the span's parts (api/step_breakdown.h SpanParts),
  /// then the gap's (GapParts), each its field without `_seconds`.
  static const std::vector<std::string>& BreakdownPartLabels();

  /// Drops every series labelled with `job_id` (call when a job reaches a
  /// terminal state, after its last update) so the number of series stays
  /// bounded. Unknown ids are a no-op. A later call naming the job creates
  /// its series afresh (counters restart at 0, which Prometheus reads as a
  /// counter reset).
  void RemoveJob(std::string_view job_id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Series of one stage of one job; created on first use.
  struct StageSeries {
    prometheus::Gauge* measured_bubble = nullptr;
    prometheus::Gauge* predicted_bubble = nullptr;
    prometheus::Gauge* idle = nullptr;
    std::array<prometheus::Gauge*, 3> pass = {};  // F, B, W
    prometheus::Gauge* reduce = nullptr;
    prometheus::Gauge* exposed_reduce = nullptr;
    prometheus::Gauge* peak_activation = nullptr;
    prometheus::Gauge* predicted_peak_activation = nullptr;
    /// By BreakdownPartLabels' index; created with the stage's first step.
    std::vector<prometheus::Gauge*> breakdown;
  };
  // Series of one job. Counters and the histogram exist from the first
  // mention; gauges from their first value.
  struct JobSeries {
    prometheus::Histogram* step_duration = nullptr;
    prometheus::Counter* resolves_published = nullptr;
    prometheus::Counter* resolves_kept = nullptr;
    prometheus::Counter* rollbacks = nullptr;
    prometheus::Counter* skipped_steps = nullptr;
    prometheus::Gauge* tokens_per_second = nullptr;
    prometheus::Gauge* predicted_step = nullptr;
    prometheus::Gauge* last_step = nullptr;
    prometheus::Gauge* schedule_version = nullptr;
    prometheus::Gauge* info = nullptr;  // zbpp_job_info
    std::vector<prometheus::Gauge*> layout_blocks;  // By virtual stage.
    prometheus::Gauge* replicas_active = nullptr;   // zbpp_job_replicas
    prometheus::Gauge* replicas_spare = nullptr;
    std::string transport;              // Its `transport` label.
    std::map<int, StageSeries> stages;
  };

  struct Families;  // the registered families; defined in the .cc

  CoordinatorMetrics(Options options,
                     std::shared_ptr<prometheus::Registry> registry,
                     std::unique_ptr<Families> families);

  JobSeries& Job(std::string_view job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  // Keeps the families (owned by the registry) alive.
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::unique_ptr<Families> families_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, JobSeries> jobs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Gauge*> workers_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Gauge*> job_counts_
      ABSL_GUARDED_BY(mu_);
  prometheus::Gauge* store_healthy_ ABSL_GUARDED_BY(mu_) = nullptr;
  prometheus::Gauge* store_pending_ ABSL_GUARDED_BY(mu_) = nullptr;
  prometheus::Counter* store_failed_ ABSL_GUARDED_BY(mu_) = nullptr;
  prometheus::Counter* store_refused_ ABSL_GUARDED_BY(mu_) = nullptr;

  // Separate from mu_: RPCs are observed on every call, from gRPC threads.
  absl::Mutex rpc_mu_;
  absl::flat_hash_map<std::pair<std::string, absl::StatusCode>,
                      prometheus::Histogram*>
      rpcs_ ABSL_GUARDED_BY(rpc_mu_);
  absl::flat_hash_map<std::pair<std::string, RefusalReason>,
                      prometheus::Counter*>
      refusals_ ABSL_GUARDED_BY(rpc_mu_);
};

}  // namespace zbpp::metrics

#endif  // ZBPP_METRICS_COORDINATOR_METRICS_H_
