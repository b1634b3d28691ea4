#include "tests/coordinator/core/job_harness.h"

#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/job_state.h"
#include "api/pipeline_shape.h"
#include "coordinator/core/resolver.h"

namespace zbpp::coordinator::testing {

void RecordingObserver::OnStep(const std::string& job_id, const v1::StepSummary& step) {
  Record(absl::StrCat("step ", job_id, " ", step.step()));
}
void RecordingObserver::OnScheduleVersion(const std::string& job_id, int64_t version) {
  Record(absl::StrCat("version ", job_id, " ", version));
}
void RecordingObserver::OnResolve(const std::string& job_id, bool published) {
  Record(absl::StrCat("resolve ", job_id, published ? " published" : " dropped"));
}
void RecordingObserver::OnValidation(const std::string& job_id, bool rolled_back,
                                     bool skipped) {
  Record(absl::StrCat("validation ", job_id, rolled_back ? " rolled back" : "",
                      skipped ? " skipped" : ""));
}
void RecordingObserver::OnTransport(const std::string& job_id, v1::Transport transport) {
  Record(absl::StrCat("transport ", job_id, " ", v1::Transport_Name(transport)));
}
void RecordingObserver::OnJobFinished(const std::string& job_id) {
  Record(absl::StrCat("finished ", job_id));
}

std::vector<std::string> RecordingObserver::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

void RecordingObserver::Record(std::string call) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(std::move(call));
}

JobHarness::JobHarness() {
  store_ = *SqliteStore::Create({":memory:"});
  faulty_store_ = std::make_unique<FaultyStore>(store_.get());
  StoreWriter::Options writer_options;
  writer_options.store = faulty_store_.get();
  writer_ = *StoreWriter::Create(writer_options);
  registry_ = *WorkerRegistry::Create({.clock = &clock_});
  rendezvous_ = *RendezvousStore::Create({});
  context_.clock = &clock_;
  context_.store_healthy = [this] { return writer_->Healthy(); };
  context_.workers = registry_.get();
  sinks_ = {&clock_, writer_.get(), registry_.get(), rendezvous_.get(), &observer_,
            [this](std::unique_ptr<ResolveTask> task) { solves_.push_back(std::move(task)); }};
}

void JobHarness::Apply(Job& job) { ApplyJobEffects(job.TakeEffects(), job.watchers(), sinks_); }

std::unique_ptr<ResolveTask> JobHarness::TakeSolve() {
  if (solves_.empty()) return nullptr;
  std::unique_ptr<ResolveTask> task = std::move(solves_.front());
  solves_.erase(solves_.begin());
  return task;
}

std::unique_ptr<Job> JobHarness::NewJob(const v1::JobSpec& spec, int64_t seq) {
  v1::Job proto;
  proto.set_id(absl::StrCat("job-", seq));
  *proto.mutable_spec() = spec;
  proto.set_state(v1::JOB_STATE_PENDING);
  proto.set_last_checkpoint_step(-1);
  EXPECT_TRUE(store_->CreateJob(proto).ok());
  return std::make_unique<Job>(seq, proto, context_);
}

std::vector<FakeWorker> JobHarness::AddWorkers(int n) {
  std::vector<FakeWorker> workers;
  for (int i = 0; i < n; ++i) {
    v1::WorkerDescription d;
    d.set_address(absl::StrCat("10.0.0.", registered_++, ":7000"));
    d.set_host("node");
    d.set_device_kind(v1::DEVICE_KIND_CPU);
    d.set_memory_bytes(uint64_t{1} << 30);
    absl::StatusOr<Registration> added = registry_->Add(d, "digest");
    EXPECT_TRUE(added.ok()) << added.status();
    FakeWorker w;
    w.id = added->worker_id;
    w.address = d.address();
    w.outbox = registry_->OpenSession(w.id, d.address())->outbox;
    workers.push_back(std::move(w));
  }
  return workers;
}

absl::Status JobHarness::StartAttempt(Job& job, std::vector<FakeWorker>& workers) {
  if (const Job::EndedAttempt* ended = job.AwaitingHeld()) {
    job.DecideRecovery(std::vector<std::optional<int64_t>>(ended->workers.size()));
    Apply(job);
  }
  const absl::Status prepared = job.Prepare();
  Apply(job);
  if (!prepared.ok()) return prepared;
  for (const FakeWorker& w : workers) registry_->ConfirmIdle(w.id);
  absl::StatusOr<std::vector<std::string>> taken =
      registry_->Assign(job.id(), static_cast<int>(workers.size()));
  if (!taken.ok()) return taken.status();
  const absl::Status begun =
      job.BeginAttempt(*std::move(taken), {v1::TRANSPORT_GLOO, "gloo: as the job spec asks"});
  Apply(job);
  return begun;
}

void JobHarness::AcknowledgeAll(Job& job, std::vector<FakeWorker>& workers) {
  for (FakeWorker& w : workers) {
    w.Drain();
    if (!w.assignment.has_value()) continue;
    absl::StatusOr<bool> running = job.Acknowledge(w.id);
    Apply(job);
    EXPECT_TRUE(running.ok()) << running.status();
  }
}

std::string JobHarness::HeldBy(const std::string& worker_id) const {
  absl::StatusOr<const WorkerRecord*> record = registry_->Get(worker_id);
  if (!record.ok() || (*record)->state != WorkerState::kAssigned) return "";
  return (*record)->job_id;
}

int64_t JobHarness::StoredJobUpdates() {
  EXPECT_TRUE(writer_->Flush().ok());
  return faulty_store_->stored("UpdateJob");
}

std::vector<v1::JobEvent> JobHarness::Events(WatchOutbox& watch) {
  std::vector<v1::JobEvent> events;
  watch.Pop(absl::InfinitePast(), &events).IgnoreError();  // Closed: what it held.
  return events;
}

std::vector<std::string> JobHarness::StateChanges(const std::vector<v1::JobEvent>& events) {
  std::vector<std::string> changes;
  for (const v1::JobEvent& event : events) {
    if (!event.has_state_change()) continue;
    changes.push_back(absl::StrCat(JobStateName(event.state_change().old_state()), "->",
                                   JobStateName(event.state_change().new_state())));
  }
  return changes;
}

void JobHarness::Spawn(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (std::thread& thread : threads) thread.join();
}

bool JobHarness::SendProfile(Job& job, const v1::ReportProfileRequest& profile, int index) {
  const absl::Status reported = job.ReportProfile(profile, index);
  Apply(job);
  if (!reported.ok()) {
    ADD_FAILURE() << "worker " << profile.worker_id() << " profile: " << reported;
    return false;
  }
  if (std::unique_ptr<ResolveTask> task = TakeSolve()) {
    // Solved under the mutex here: the harness has no resolver thread.
    SolveResolve(*task);
    job.FinishResolve(*task);
    Apply(job);
  }
  return true;
}

void JobHarness::RunWorker(Job& job, FakeWorker& worker, const sched::Problem& truth) {
  const int stages = job.stages();
  while (true) {
    std::vector<SessionMessage> messages;
    if (!worker.outbox->Pop(absl::Now() + absl::Seconds(10), &messages).ok() ||
        messages.empty()) {
      return;
    }
    for (const SessionMessage& message : messages) worker.Apply(*message);
    if (!worker.assignment.has_value()) return;  // Aborted: the job ended.
    const int index = WorkerOf(Stage(worker.assignment->stage()),
                               Replica(worker.assignment->replica()), stages)
                          .value();
    if (std::optional<v1::ReportProfileRequest> profile = worker.TakeProfile()) {
      absl::MutexLock lock(&mu_);
      if (!SendProfile(job, *profile, index)) return;
    }
    while (worker.next_step <= worker.granted) {
      const v1::ReportStepRequest report = worker.Report(worker.next_step, truth);
      absl::MutexLock lock(&mu_);
      const absl::Status reported = job.ReportStep(report, index);
      Apply(job);
      if (!reported.ok()) {
        ADD_FAILURE() << "worker " << worker.id << " step " << worker.next_step << ": "
                      << reported;
        return;
      }
      if (std::unique_ptr<ResolveTask> task = TakeSolve()) {
        resolve_steps_.push_back(task->record.step);
        job.FinishResolve(*task);
        Apply(job);
      }
      ++worker.next_step;
    }
  }
}

}  // namespace zbpp::coordinator::testing
