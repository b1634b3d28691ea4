#include "bench/coordinator_load_worker.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/schedule_proto.h"
#include "api/time_proto.h"
#include "common/call_auth.h"
#include "scheduler/simulator.h"

namespace zbpp::bench {
namespace {

// A ReportStep in flight (callback API): deleted by its callback.
struct ReportCall {
  grpc::ClientContext context;
  v1::ReportStepRequest request;
  v1::ReportStepResponse response;
  absl::Time start;
};

}  // namespace

std::shared_ptr<const VersionTimings> SimulateVersion(const v1::ScheduleVersion& version,
                                                      const sched::Problem& truth) {
  auto out = std::make_shared<VersionTimings>();
  absl::StatusOr<sched::Schedule> schedule =
      ScheduleFromProto(version.schedule());
  if (!schedule.ok()) return out;
  absl::StatusOr<sched::SimulationResult> sim =
      sched::Simulate(truth, *schedule);
  if (!sim.ok()) return out;
  for (const auto& stage : sim->timings) {
    out->start.emplace_back();
    out->end.emplace_back();
    out->busy.push_back(0);
    for (const auto& t : stage) {
      out->start.back().push_back(t.start_seconds);
      out->end.back().push_back(t.end_seconds);
      out->busy.back() += t.end_seconds - t.start_seconds;
    }
  }
  return out;
}

v1::ReportStepRequest BuildReport(const std::string& worker_id, const v1::Assignment& a,
                                  int64_t step, int64_t version, const VersionTimings& t) {
  const int stage = a.stage();
  v1::ReportStepRequest r;
  r.set_worker_id(worker_id);
  r.set_job_id(a.job_id());
  r.set_attempt(a.attempt());
  r.set_step(step);
  r.set_schedule_version(version);
  r.set_stage(stage);
  if (stage >= static_cast<int>(t.start.size())) return r;
  r.mutable_action_start_seconds()->Add(t.start[stage].begin(),
                                        t.start[stage].end());
  r.mutable_action_end_seconds()->Add(t.end[stage].begin(), t.end[stage].end());
  const double end =
      t.end[stage].empty()
          ? 0
          : *std::max_element(t.end[stage].begin(), t.end[stage].end());
  r.set_step_seconds(end);
  r.set_idle_seconds(std::max(0.0, end - t.busy[stage]));
  r.set_comm_seconds(0.1 * r.idle_seconds());
  r.set_local_grad_norm_sq(1.0 + 0.01 * stage);
  r.set_peak_memory_bytes(uint64_t{1} << 30);
  if (stage == a.spec().pipeline().stages() - 1) r.set_loss(2.5);
  return r;
}

std::shared_ptr<const VersionTimings> TimingCache::Get(const v1::ScheduleVersion& version) {
  const auto key = std::make_pair(version.job_id(), version.version());
  absl::MutexLock lock(&mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  return cache_[key] = SimulateVersion(version, truth_);
}

void SessionReactor::Start(v1::WorkerService::Stub* stub, const std::string& id,
                           const std::string& address, const std::string& credential) {
  context_.AddMetadata(zbpp::kWorkerCredentialMetadataKey, credential);
  stub->async()->Session(&context_, this);
  out_.mutable_open()->set_worker_id(id);
  out_.mutable_open()->set_address(address);
  writing_ = true;
  counted_write_ = false;
  StartWrite(&out_);
  StartRead(&in_);
  AddHold();
  StartCall();
}

void SessionReactor::Heartbeat(const v1::Heartbeat& heartbeat) {
  bool expected = false;
  if (!writing_.compare_exchange_strong(expected, true)) {
    ++stats_->heartbeats_skipped;
    return;
  }
  *out_.mutable_heartbeat() = heartbeat;
  counted_write_ = true;
  sent_ = absl::Now();
  ++stats_->heartbeats;
  StartWrite(&out_);
}

void SessionReactor::OnReadDone(bool ok) {
  if (!ok) return;
  worker_->Receive(in_);
  StartRead(&in_);
}

void SessionReactor::OnWriteDone(bool ok) {
  if (counted_write_ && stats_->measuring) {
    stats_->heartbeat_write.Add(absl::ToDoubleSeconds(absl::Now() - sent_));
  }
  writing_ = false;
}

LoadWorker::LoadWorker(int index, std::shared_ptr<grpc::Channel> channel, LoadStats* stats,
                       TimingCache* timings)
    : index_(index),
      stub_(v1::WorkerService::NewStub(std::move(channel))),
      stats_(stats),
      timings_(timings),
      session_(this, stats) {}

absl::Status LoadWorker::Register() {
  v1::RegisterWorkerRequest request;
  auto* d = request.mutable_worker();
  d->set_address(absl::StrCat("127.0.0.1:", 20000 + index_));
  d->set_host(absl::StrCat("node-", index_ / 8));
  d->set_device_kind(v1::DEVICE_KIND_CUDA);
  d->set_device_index(index_ % 8);
  d->set_memory_bytes(uint64_t{80} << 30);
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
  const absl::Time start = absl::Now();
  grpc::Status s = stub_->RegisterWorker(&context, request, &response);
  stats_->register_worker.Add(absl::ToDoubleSeconds(absl::Now() - start));
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  id_ = response.worker_id();
  credential_ = response.credential();
  session_.Start(stub_.get(), id_, d->address(), credential_);
  return absl::OkStatus();
}

void LoadWorker::Receive(const v1::SessionResponse& m) {
  absl::MutexLock lock(&mu_);
  const size_t known = protocol_.versions.size();
  protocol_.Apply(m);
  if (m.has_schedule() && protocol_.versions.size() > known && stats_->measuring) {
    const absl::Time published = FromTimestamp(m.schedule().publish_time());
    stats_->version_delivery.Add(absl::ToDoubleSeconds(absl::Now() - published));
  }
}

void LoadWorker::Tick() {
  v1::Heartbeat hb;
  std::optional<v1::ReportStepRequest> report;
  std::optional<v1::ReportProfileRequest> profile;
  {
    absl::MutexLock lock(&mu_);
    // Calibration: the profile echoes the assignment's cost model.
    profile = protocol_.TakeProfile();
    if (profile.has_value()) profile->set_worker_id(id_);
    const std::optional<v1::Assignment>& assignment = protocol_.assignment;
    const int64_t next_step = protocol_.next_step;
    if (!assignment.has_value()) {
      hb.set_phase(v1::WORKER_PHASE_IDLE);
    } else {
      hb.set_job_id(assignment->job_id());
      hb.set_attempt(assignment->attempt());
      hb.set_last_completed_step(next_step - 1);
      hb.set_memory_used_bytes(uint64_t{40} << 30);
      const bool runnable = next_step <= protocol_.granted;
      hb.set_phase(next_step == assignment->start_step() && !runnable
                       ? v1::WORKER_PHASE_PREPARING
                   : runnable ? v1::WORKER_PHASE_RUNNING
                              : v1::WORKER_PHASE_WAITING);
      const v1::ScheduleVersion& version = protocol_.VersionFor(next_step);
      hb.set_schedule_version(version.version());
      if (runnable && !report_in_flight_) {
        report_in_flight_ = true;
        report = BuildReport(id_, *assignment, next_step, version.version(),
                             *timings_->Get(version));
      }
    }
  }
  session_.Heartbeat(hb);
  if (profile.has_value()) SendProfile(*std::move(profile));
  if (report.has_value()) Send(*std::move(report));
}

void LoadWorker::SendProfile(v1::ReportProfileRequest request) {
  // Once per attempt, so synchronous: a refusal is counted like a report's.
  grpc::ClientContext context;
  context.AddMetadata(zbpp::kWorkerCredentialMetadataKey, credential_);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::ReportProfileResponse response;
  grpc::Status s = stub_->ReportProfile(&context, request, &response);
  if (s.ok()) return;
  ++stats_->reports_failed;
  absl::MutexLock lock(&stats_->mu);
  ++stats_->failures[absl::StrCat("ReportProfile ", s.error_code(), " ", s.error_message())];
}

bool LoadWorker::running() {
  absl::MutexLock lock(&mu_);
  return protocol_.assignment.has_value() && protocol_.next_step > 0;
}

void LoadWorker::Send(v1::ReportStepRequest request) {
  auto* call = new ReportCall;
  call->request = std::move(request);
  call->context.AddMetadata(zbpp::kWorkerCredentialMetadataKey, credential_);
  call->context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(20));
  ++stats_->reports_in_flight;
  call->start = absl::Now();
  stub_->async()->ReportStep(
      &call->context, &call->request, &call->response,
      [this, call](grpc::Status s) {
        const double seconds =
            absl::ToDoubleSeconds(absl::Now() - call->start);
        if (stats_->measuring) stats_->report.Add(seconds);
        {
          absl::MutexLock lock(&mu_);
          report_in_flight_ = false;
          if (s.ok()) ++protocol_.next_step;
        }
        if (s.ok()) {
          ++stats_->reports_ok;
        } else {
          ++stats_->reports_failed;
          absl::MutexLock lock(&stats_->mu);
          ++stats_->failures[absl::StrCat(s.error_code(), " ",
                                          s.error_message())];
        }
        delete call;
        --stats_->reports_in_flight;
      });
}

}  // namespace zbpp::bench
