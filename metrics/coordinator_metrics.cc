#include "metrics/coordinator_metrics.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "api/step_breakdown.h"

namespace zbpp::metrics {

struct CoordinatorMetrics::Families {
  prometheus::Family<prometheus::Gauge>& stage_measured_bubble;
  prometheus::Family<prometheus::Gauge>& stage_predicted_bubble;
  prometheus::Family<prometheus::Gauge>& stage_idle;
  prometheus::Family<prometheus::Gauge>& stage_pass;
  prometheus::Family<prometheus::Gauge>& stage_reduce;
  prometheus::Family<prometheus::Gauge>& stage_exposed_reduce;
  prometheus::Family<prometheus::Gauge>& stage_peak_activation;
  prometheus::Family<prometheus::Gauge>& stage_predicted_peak_activation;
  prometheus::Family<prometheus::Gauge>& stage_breakdown;
  prometheus::Family<prometheus::Histogram>& step_duration;
  prometheus::Family<prometheus::Gauge>& tokens_per_second;
  prometheus::Family<prometheus::Gauge>& predicted_step;
  prometheus::Family<prometheus::Gauge>& last_step;
  prometheus::Family<prometheus::Gauge>& schedule_version;
  prometheus::Family<prometheus::Counter>& resolves;
  prometheus::Family<prometheus::Counter>& rollbacks;
  prometheus::Family<prometheus::Counter>& skipped_steps;
  prometheus::Family<prometheus::Gauge>& job_info;
  prometheus::Family<prometheus::Gauge>& job_layout_blocks;
  prometheus::Family<prometheus::Gauge>& job_replicas;
  prometheus::Family<prometheus::Gauge>& workers;
  prometheus::Family<prometheus::Gauge>& jobs;
  prometheus::Family<prometheus::Histogram>& rpc_duration;
  prometheus::Family<prometheus::Counter>& rpc_refusals;
  prometheus::Family<prometheus::Gauge>& store_healthy;
  prometheus::Family<prometheus::Gauge>& store_pending_writes;
  prometheus::Family<prometheus::Counter>& store_failed_writes;
  prometheus::Family<prometheus::Counter>& store_refused_writes;
};

namespace {

constexpr const char* kPassNames[] = {"F", "B", "W"};

constexpr RefusalReason kRefusalReasons[] = {
    RefusalReason::kMissingToken, RefusalReason::kWrongToken,
    RefusalReason::kMissingClientCertificate,
    RefusalReason::kWrongWorkerCredential};

absl::Status CheckBuckets(const std::vector<double>& buckets,
                          const char* field) {
  if (buckets.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (!std::isfinite(buckets[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "] is not finite"));
    }
    if (i > 0 && !(buckets[i - 1] < buckets[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " is not strictly increasing at [", i, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStates(const std::vector<std::string>& states,
                         const char* field) {
  absl::flat_hash_set<std::string> seen;
  for (const std::string& state : states) {
    // An empty label value is the same as no label to Prometheus.
    if (state.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, " holds \"\""));
    }
    if (!seen.insert(state).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " holds \"", state, "\" twice"));
    }
  }
  return absl::OkStatus();
}

// The span's parts, then the gap's (api/step_breakdown.h): the series of
// zbpp_stage_breakdown_seconds, in BreakdownPartLabels' order.
const std::vector<BreakdownPart>& AllBreakdownParts() {
  static const std::vector<BreakdownPart>* parts = [] {
    auto* out = new std::vector<BreakdownPart>(SpanParts());
    out->insert(out->end(), GapParts().begin(), GapParts().end());
    return out;
  }();
  return *parts;
}

// Returns `*slot`, adding the series to `family` first when it is null.
// prometheus-cpp's Add returns the existing series for known labels, so a
// stale slot cannot duplicate one.
template <typename T, typename... Args>
T& Ensure(prometheus::Family<T>& family, T*& slot,
          const prometheus::Labels& labels, Args&&... args) {
  if (slot == nullptr) slot = &family.Add(labels, std::forward<Args>(args)...);
  return *slot;
}

template <typename T>
void Drop(prometheus::Family<T>& family, T*& slot) {
  if (slot != nullptr) family.Remove(slot);
  slot = nullptr;
}

// Sets the series of `state` in a by-state gauge family (zbpp_workers,
// zbpp_jobs), whose series are cached in `series`.
void SetByState(prometheus::Family<prometheus::Gauge>& family,
                absl::flat_hash_map<std::string, prometheus::Gauge*>& series,
                std::string_view state, int64_t n) {
  if (state.empty()) return;
  const std::string key(state);
  Ensure(family, series[key], {{"state", key}}).Set(static_cast<double>(n));
}

// Raises `counter` to `total`, a running total kept elsewhere (counters only
// go up: a smaller total changes nothing).
void RaiseTo(prometheus::Counter& counter, int64_t total) {
  const double value = static_cast<double>(total);
  if (value > counter.Value()) counter.Increment(value - counter.Value());
}

}  // namespace

std::string_view RefusalReasonName(RefusalReason reason) {
  switch (reason) {
    case RefusalReason::kMissingToken:
      return "missing_token";
    case RefusalReason::kWrongToken:
      return "wrong_token";
    case RefusalReason::kMissingClientCertificate:
      return "missing_client_certificate";
    case RefusalReason::kWrongWorkerCredential:
      return "wrong_worker_credential";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> CoordinatorMetrics::Create(
    Options options, std::shared_ptr<prometheus::Registry> registry) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("registry is null");
  }
  for (absl::Status status :
       {CheckStates(options.job_states, "job_states"),
        CheckStates(options.worker_states, "worker_states"),
        CheckStates(options.rpc_services, "rpc_services"),
        CheckBuckets(options.step_duration_buckets_seconds,
                     "step_duration_buckets_seconds"),
        CheckBuckets(options.rpc_duration_buckets_seconds,
                     "rpc_duration_buckets_seconds")}) {
    if (!status.ok()) return status;
  }

  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  prometheus::Registry& r = *registry;
  std::unique_ptr<Families> families;
  // prometheus-cpp reports a name held by another metric type (or an
  // invalid name) by throwing std::invalid_argument; the names here are
  // valid constants, so only the first can happen.
  try {
    families.reset(new Families{
        BuildGauge()
            .Name("zbpp_stage_measured_bubble_ratio")
            .Help("Idle fraction of the stage in the last recorded "
                  "step, 1 - busy / the step's largest per-stage span (the "
                  "simulator's definition), in [0,1].")
            .Register(r),
        BuildGauge()
            .Name("zbpp_stage_predicted_bubble_ratio")
            .Help("Idle fraction of the stage that the simulator "
                  "predicts for the current schedule version under the "
                  "current cost model, in [0,1].")
            .Register(r),
        BuildGauge()
            .Name("zbpp_stage_idle_seconds")
            .Help("Seconds the stage waited for inputs in the last "
                  "recorded step.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_stage_pass_seconds")
            .Help("Mean measured seconds of one F, B or W pass of the "
                  "stage in the last recorded step; 0 where the pass "
                  "did not run (a fused BW counts as B).")
            .Register(r),
        BuildGauge()
            .Name("zbpp_stage_reduce_seconds")
            .Help("Mean measured seconds of one data-parallel gradient "
                  "reduction (REDUCE_GRAD) of the stage in the last "
                  "recorded step, averaged over its replicas; 0 with one "
                  "replica.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_stage_exposed_reduce_seconds")
            .Help("Seconds the stage's last data-parallel gradient "
                  "reduction ended after its last pass in the last recorded "
                  "step (the reduction the passes did not hide), averaged "
                  "over its replicas; 0 with one replica.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_stage_peak_activation_bytes")
            .Help("Peak activation memory of the stage in the last "
                  "recorded step as its workers measured it (the largest "
                  "over its replicas), in bytes; 0 when not measured.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_stage_predicted_peak_activation_bytes")
            .Help("The simulator's peak activation memory of the stage "
                  "for the schedule version of the last recorded step "
                  "under the current cost model, in bytes.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_stage_breakdown_seconds")
            .Help("Seconds of the stage's last recorded step and of "
                  "the gap before it, by part: compute, input_wait, "
                  "send_wait, validation_check, reduction_wait and overhead "
                  "sum to the step's span; drain, validation, optimizer, "
                  "evaluation, checkpoint, report, grant and other to the "
                  "gap. The mean over the stage's replicas.")
            .Register(r),
        BuildHistogram()
            .Name("zbpp_step_duration_seconds")
            .Help("Measured time of each optimizer step: the longest worker's "
                  "span from its step start to its last action, in seconds.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_job_tokens_per_second")
            .Help("Trained tokens per second in the last recorded step.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_job_predicted_step_seconds")
            .Help("The simulator's step time for the schedule version of the "
                  "last recorded step under the costs measured through it, in "
                  "seconds: what its step duration compares with.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_job_last_step")
            .Help("0-based index of the job's last recorded step.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_job_schedule_version")
            .Help("Version of the job's current schedule; 0 before the first.")
            .Register(r),
        BuildCounter()
            .Name("zbpp_resolves_total")
            .Help("Adaptive re-solves of the job's schedule, by outcome: "
                  "published (a new version) or kept (the current one).")
            .Register(r),
        BuildCounter()
            .Name("zbpp_rollbacks_total")
            .Help("Optimistic steps of the job rolled back by "
                  "post-validation.")
            .Register(r),
        BuildCounter()
            .Name("zbpp_skipped_steps_total")
            .Help("Steps of the job skipped because a gradient held inf or "
                  "nan.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_job_info")
            .Help("1 for the job's current attempt, labelled with what it "
                  "runs on: transport (gloo or nccl). Join it to another "
                  "job series with * on(job_id) group_left(transport).")
            .Register(r),
        BuildGauge()
            .Name("zbpp_job_layout_blocks")
            .Help("Transformer blocks of each virtual stage under the job's "
                  "current layout.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_job_replicas")
            .Help("The job's data-parallel replicas running steps "
                  "(state=active: fewer than pipeline.data_parallel while "
                  "DEGRADED) and its spare workers (state=spare: surviving "
                  "workers of broken replicas holding a stage for it).")
            .Register(r),
        BuildGauge()
            .Name("zbpp_workers")
            .Help("Workers known to the coordinator, by state.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_jobs")
            .Help("Jobs known to the coordinator, by state.")
            .Register(r),
        BuildHistogram()
            .Name("zbpp_rpc_duration_seconds")
            .Help("Server-side latency of gRPC calls to the coordinator, by "
                  "full method name and status code, in seconds.")
            .Register(r),
        BuildCounter()
            .Name("zbpp_rpc_refusals_total")
            .Help("Calls to the coordinator refused as UNAUTHENTICATED, by "
                  "gRPC service and reason: missing_token, wrong_token, "
                  "missing_client_certificate or wrong_worker_credential.")
            .Register(r),
        BuildGauge()
            .Name("zbpp_store_healthy")
            .Help("1 while the coordinator's store writes succeed, 0 while "
                  "one is failing and retried (jobs get no new steps "
                  "meanwhile).")
            .Register(r),
        BuildGauge()
            .Name("zbpp_store_pending_writes")
            .Help("Store writes decided and not yet stored, the failing one "
                  "included.")
            .Register(r),
        BuildCounter()
            .Name("zbpp_store_failed_writes_total")
            .Help("Failed attempts of store writes (each retry counts).")
            .Register(r),
        BuildCounter()
            .Name("zbpp_store_refused_writes_total")
            .Help("Store writes skipped: refused for their record, or given "
                  "up at shutdown with the store still failing.")
            .Register(r),
    });
  } catch (const std::exception& e) {
    return absl::AlreadyExistsError(absl::StrCat(
        "cannot register the coordinator's metric families: ", e.what()));
  }
  return std::unique_ptr<CoordinatorMetrics>(new CoordinatorMetrics(
      std::move(options), std::move(registry), std::move(families)));
}

CoordinatorMetrics::CoordinatorMetrics(
    Options options, std::shared_ptr<prometheus::Registry> registry,
    std::unique_ptr<Families> families)
    : options_(std::move(options)),
      registry_(std::move(registry)),
      families_(std::move(families)) {
  absl::MutexLock lock(&mu_);
  for (const std::string& state : options_.job_states) {
    job_counts_[state] = &families_->jobs.Add({{"state", state}});
  }
  for (const std::string& state : options_.worker_states) {
    workers_[state] = &families_->workers.Add({{"state", state}});
  }
  store_healthy_ = &families_->store_healthy.Add({});
  store_healthy_->Set(1);
  store_pending_ = &families_->store_pending_writes.Add({});
  store_failed_ = &families_->store_failed_writes.Add({});
  store_refused_ = &families_->store_refused_writes.Add({});
  absl::MutexLock rpc_lock(&rpc_mu_);
  for (const std::string& service : options_.rpc_services) {
    for (RefusalReason reason : kRefusalReasons) {
      refusals_[{service, reason}] = &families_->rpc_refusals.Add(
          {{"service", service},
           {"reason", std::string(RefusalReasonName(reason))}});
    }
  }
}

CoordinatorMetrics::~CoordinatorMetrics() = default;

CoordinatorMetrics::JobSeries& CoordinatorMetrics::Job(
    std::string_view job_id) {
  auto [it, inserted] = jobs_.try_emplace(std::string(job_id));
  JobSeries& job = it->second;
  if (inserted) {
    // Counters and the histogram start at 0 so that the first event is an
    // increase that rate() sees, not the appearance of a series.
    const std::string id(job_id);
    job.step_duration = &families_->step_duration.Add(
        {{"job_id", id}}, options_.step_duration_buckets_seconds);
    job.resolves_published = &families_->resolves.Add(
        {{"job_id", id}, {"outcome", "published"}});
    job.resolves_kept =
        &families_->resolves.Add({{"job_id", id}, {"outcome", "kept"}});
    job.rollbacks = &families_->rollbacks.Add({{"job_id", id}});
    job.skipped_steps = &families_->skipped_steps.Add({{"job_id", id}});
  }
  return job;
}

void CoordinatorMetrics::RecordStep(std::string_view job_id,
                                    const zbpp::v1::StepSummary& summary) {
  if (job_id.empty()) return;
  const std::string id(job_id);
  absl::MutexLock lock(&mu_);
  JobSeries& job = Job(id);
  if (std::isfinite(summary.step_seconds()) && summary.step_seconds() >= 0) {
    job.step_duration->Observe(summary.step_seconds());
  }
  const prometheus::Labels job_labels = {{"job_id", id}};
  Ensure(families_->tokens_per_second, job.tokens_per_second, job_labels)
      .Set(summary.tokens_per_second());
  if (summary.predicted_step_seconds() > 0) {
    Ensure(families_->predicted_step, job.predicted_step, job_labels)
        .Set(summary.predicted_step_seconds());
  }
  Ensure(families_->last_step, job.last_step, job_labels)
      .Set(static_cast<double>(summary.step()));
  Ensure(families_->schedule_version, job.schedule_version, job_labels)
      .Set(static_cast<double>(summary.schedule_version()));

  for (const zbpp::v1::StageStepStats& stats : summary.stages()) {
    if (stats.stage() < 0) continue;
    StageSeries& stage = job.stages[stats.stage()];
    const prometheus::Labels labels = {{"job_id", id},
                                       {"stage", std::to_string(stats.stage())}};
    Ensure(families_->stage_measured_bubble, stage.measured_bubble, labels)
        .Set(stats.measured_bubble_rate());
    Ensure(families_->stage_predicted_bubble, stage.predicted_bubble, labels)
        .Set(stats.predicted_bubble_rate());
    Ensure(families_->stage_idle, stage.idle, labels)
        .Set(stats.idle_seconds());
    const double pass_seconds[] = {stats.f_seconds(), stats.b_seconds(),
                                   stats.w_seconds()};
    for (int p = 0; p < 3; ++p) {
      prometheus::Labels pass_labels = labels;
      pass_labels.emplace("pass", kPassNames[p]);
      Ensure(families_->stage_pass, stage.pass[p], pass_labels)
          .Set(pass_seconds[p]);
    }
    Ensure(families_->stage_reduce, stage.reduce, labels).Set(stats.reduce_seconds());
    Ensure(families_->stage_exposed_reduce, stage.exposed_reduce, labels)
        .Set(stats.exposed_reduce_seconds());
    Ensure(families_->stage_peak_activation, stage.peak_activation, labels)
        .Set(stats.peak_activation_bytes());
    Ensure(families_->stage_predicted_peak_activation, stage.predicted_peak_activation, labels)
        .Set(stats.predicted_peak_activation_bytes());
    const std::vector<BreakdownPart>& parts = AllBreakdownParts();
    stage.breakdown.resize(parts.size(), nullptr);
    for (size_t i = 0; i < parts.size(); ++i) {
      prometheus::Labels part_labels = labels;
      part_labels.emplace("part", BreakdownPartLabels()[i]);
      Ensure(families_->stage_breakdown, stage.breakdown[i], part_labels)
          .Set(parts[i].Of(stats.breakdown()));
    }
  }
}

const std::vector<std::string>& CoordinatorMetrics::BreakdownPartLabels() {
  static const std::vector<std::string>* labels = [] {
    auto* out = new std::vector<std::string>;
    for (const BreakdownPart& part : AllBreakdownParts()) {
      out->emplace_back(absl::StripSuffix(part.field, "_seconds"));
    }
    return out;
  }();
  return *labels;
}

void CoordinatorMetrics::SetPredicted(std::string_view job_id, int stage,
                                      double ratio) {
  if (job_id.empty() || stage < 0) return;
  const std::string id(job_id);
  absl::MutexLock lock(&mu_);
  StageSeries& series = Job(id).stages[stage];
  Ensure(families_->stage_predicted_bubble, series.predicted_bubble,
         {{"job_id", id}, {"stage", std::to_string(stage)}})
      .Set(ratio);
}

void CoordinatorMetrics::SetScheduleVersion(std::string_view job_id,
                                            int64_t version) {
  if (job_id.empty()) return;
  const std::string id(job_id);
  absl::MutexLock lock(&mu_);
  Ensure(families_->schedule_version, Job(id).schedule_version,
         {{"job_id", id}})
      .Set(static_cast<double>(version));
}

void CoordinatorMetrics::SetTransport(std::string_view job_id, std::string_view transport) {
  if (job_id.empty() || transport.empty()) return;
  const std::string id(job_id);
  absl::MutexLock lock(&mu_);
  JobSeries& job = Job(id);
  if (job.info != nullptr && job.transport == transport) return;
  // One series per job: the attempt's transport replaces the last one's.
  Drop(families_->job_info, job.info);
  job.transport = std::string(transport);
  Ensure(families_->job_info, job.info, {{"job_id", id}, {"transport", job.transport}})
      .Set(1);
}

void CoordinatorMetrics::SetLayout(std::string_view job_id, const std::vector<int>& layout) {
  if (job_id.empty()) return;
  const std::string id(job_id);
  absl::MutexLock lock(&mu_);
  JobSeries& job = Job(id);
  while (job.layout_blocks.size() > layout.size()) {
    Drop(families_->job_layout_blocks, job.layout_blocks.back());
    job.layout_blocks.pop_back();
  }
  job.layout_blocks.resize(layout.size(), nullptr);
  for (size_t k = 0; k < layout.size(); ++k) {
    Ensure(families_->job_layout_blocks, job.layout_blocks[k],
           {{"job_id", id}, {"virtual_stage", std::to_string(k)}})
        .Set(layout[k]);
  }
}

void CoordinatorMetrics::SetReplicas(std::string_view job_id, int active, int spares) {
  if (job_id.empty()) return;
  const std::string id(job_id);
  absl::MutexLock lock(&mu_);
  JobSeries& job = Job(id);
  Ensure(families_->job_replicas, job.replicas_active, {{"job_id", id}, {"state", "active"}})
      .Set(active);
  Ensure(families_->job_replicas, job.replicas_spare, {{"job_id", id}, {"state", "spare"}})
      .Set(spares);
}

void CoordinatorMetrics::RecordResolve(std::string_view job_id,
                                       bool published) {
  if (job_id.empty()) return;
  absl::MutexLock lock(&mu_);
  JobSeries& job = Job(job_id);
  (published ? job.resolves_published : job.resolves_kept)->Increment();
}

void CoordinatorMetrics::AddRollbacks(std::string_view job_id, int64_t n) {
  if (job_id.empty() || n < 0) return;
  absl::MutexLock lock(&mu_);
  Job(job_id).rollbacks->Increment(static_cast<double>(n));
}

void CoordinatorMetrics::AddSkippedSteps(std::string_view job_id, int64_t n) {
  if (job_id.empty() || n < 0) return;
  absl::MutexLock lock(&mu_);
  Job(job_id).skipped_steps->Increment(static_cast<double>(n));
}

void CoordinatorMetrics::SetWorkers(std::string_view state, int64_t n) {
  absl::MutexLock lock(&mu_);
  SetByState(families_->workers, workers_, state, n);
}

void CoordinatorMetrics::SetJobs(std::string_view state, int64_t n) {
  absl::MutexLock lock(&mu_);
  SetByState(families_->jobs, job_counts_, state, n);
}

void CoordinatorMetrics::SetStore(bool healthy, int64_t pending,
                                  int64_t failed_writes,
                                  int64_t refused_writes) {
  absl::MutexLock lock(&mu_);
  store_healthy_->Set(healthy ? 1 : 0);
  store_pending_->Set(static_cast<double>(std::max<int64_t>(pending, 0)));
  RaiseTo(*store_failed_, failed_writes);
  RaiseTo(*store_refused_, refused_writes);
}

void CoordinatorMetrics::ObserveRpc(std::string_view method,
                                    absl::StatusCode code, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return;
  std::pair<std::string, absl::StatusCode> key(std::string(method), code);
  absl::MutexLock lock(&rpc_mu_);
  prometheus::Histogram*& slot = rpcs_[key];
  Ensure(families_->rpc_duration, slot,
         {{"method", key.first}, {"code", absl::StatusCodeToString(code)}},
         options_.rpc_duration_buckets_seconds)
      .Observe(seconds);
}

void CoordinatorMetrics::CountRefusal(std::string_view service,
                                      RefusalReason reason) {
  if (service.empty()) return;
  std::pair<std::string, RefusalReason> key(std::string(service), reason);
  absl::MutexLock lock(&rpc_mu_);
  prometheus::Counter*& slot = refusals_[key];
  Ensure(families_->rpc_refusals, slot,
         {{"service", key.first},
          {"reason", std::string(RefusalReasonName(reason))}})
      .Increment();
}

void CoordinatorMetrics::RemoveJob(std::string_view job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(std::string(job_id));
  if (it == jobs_.end()) return;
  JobSeries& job = it->second;
  Families& f = *families_;
  for (auto& [unused, stage] : job.stages) {
    Drop(f.stage_measured_bubble, stage.measured_bubble);
    Drop(f.stage_predicted_bubble, stage.predicted_bubble);
    Drop(f.stage_idle, stage.idle);
    for (prometheus::Gauge*& pass : stage.pass) Drop(f.stage_pass, pass);
    Drop(f.stage_reduce, stage.reduce);
    Drop(f.stage_exposed_reduce, stage.exposed_reduce);
    Drop(f.stage_peak_activation, stage.peak_activation);
    Drop(f.stage_predicted_peak_activation, stage.predicted_peak_activation);
    for (prometheus::Gauge*& part : stage.breakdown) Drop(f.stage_breakdown, part);
  }
  Drop(f.step_duration, job.step_duration);
  Drop(f.resolves, job.resolves_published);
  Drop(f.resolves, job.resolves_kept);
  Drop(f.rollbacks, job.rollbacks);
  Drop(f.skipped_steps, job.skipped_steps);
  Drop(f.tokens_per_second, job.tokens_per_second);
  Drop(f.predicted_step, job.predicted_step);
  Drop(f.last_step, job.last_step);
  Drop(f.schedule_version, job.schedule_version);
  Drop(f.job_info, job.info);
  for (prometheus::Gauge*& blocks : job.layout_blocks) Drop(f.job_layout_blocks, blocks);
  Drop(f.job_replicas, job.replicas_active);
  Drop(f.job_replicas, job.replicas_spare);
  jobs_.erase(it);
}

}  // namespace zbpp::metrics
