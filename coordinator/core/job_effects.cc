// Applying a job's effects (job_effects.h): the one place where a job's
// decisions reach the store, the workers, the rendezvous store, the
// watchers and the metrics.

#include "coordinator/core/job_effects.h"

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {
namespace {

// A write and the error lines' name for it.
void Enqueue(StoreWriter& writer, StoreWrite write) {
  std::string context = DescribeWrite(write);
  writer.Enqueue(
      [write = std::move(write)](Store& store) {
        return std::visit(
            [&store](const auto& w) -> absl::Status {
              using T = std::decay_t<decltype(w)>;
              if constexpr (std::is_same_v<T, zbpp::v1::Job>) {
                return store.UpdateJob(w);
              } else if constexpr (std::is_same_v<T, zbpp::v1::ScheduleVersion>) {
                return store.AddScheduleVersion(w);
              } else if constexpr (std::is_same_v<T, StepSummaryWrite>) {
                return store.PutStepSummary(w.job_id, w.summary);
              } else if constexpr (std::is_same_v<T, ValidationOutcomeWrite>) {
                return store.PutValidationOutcome(w.job_id, w.outcome);
              } else if constexpr (std::is_same_v<T, CheckpointRecord>) {
                return store.PutCheckpoint(w);
              } else if constexpr (std::is_same_v<T, CostSnapshotWrite>) {
                return store.PutCostSnapshot(w.job_id, w.step, w.costs);
              } else {
                return store.AddResolveRecord(w);
              }
            },
            write);
      },
      std::move(context));
}

void Observe(const std::string& job_id, const Observation& observation,
             CoordinatorObserver& observer) {
  std::visit(
      [&](const auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, StepObserved>) {
          observer.OnStep(job_id, o.step);
        } else if constexpr (std::is_same_v<T, VersionObserved>) {
          observer.OnScheduleVersion(job_id, o.version);
        } else if constexpr (std::is_same_v<T, ResolveObserved>) {
          observer.OnResolve(job_id, o.published);
        } else if constexpr (std::is_same_v<T, ValidationObserved>) {
          observer.OnValidation(job_id, o.rolled_back, o.skipped);
        } else if constexpr (std::is_same_v<T, TransportObserved>) {
          observer.OnTransport(job_id, o.transport);
        } else if constexpr (std::is_same_v<T, LayoutObserved>) {
          observer.OnLayout(job_id, o.layout);
        } else if constexpr (std::is_same_v<T, ReplicasObserved>) {
          observer.OnReplicas(job_id, o.active, o.spares);
        } else {
          observer.OnJobFinished(job_id);
        }
      },
      observation);
}

}  // namespace

std::string DescribeWrite(const StoreWrite& write) {
  return std::visit(
      [](const auto& w) -> std::string {
        using T = std::decay_t<decltype(w)>;
        if constexpr (std::is_same_v<T, zbpp::v1::Job>) {
          return absl::StrCat("storing job ", w.id());
        } else if constexpr (std::is_same_v<T, zbpp::v1::ScheduleVersion>) {
          return absl::StrCat("storing schedule version ", w.version(), " of job ",
                              w.job_id());
        } else if constexpr (std::is_same_v<T, StepSummaryWrite>) {
          return absl::StrCat("storing the summary of step ", w.summary.step(), " of job ",
                              w.job_id);
        } else if constexpr (std::is_same_v<T, ValidationOutcomeWrite>) {
          return absl::StrCat("storing the validation outcome of step ", w.outcome.step(),
                              " of job ", w.job_id);
        } else if constexpr (std::is_same_v<T, CheckpointRecord>) {
          return absl::StrCat("storing the checkpoint record of step ", w.step, " of job ",
                              w.job_id);
        } else if constexpr (std::is_same_v<T, CostSnapshotWrite>) {
          return absl::StrCat("storing the cost snapshot of step ", w.step, " of job ",
                              w.job_id);
        } else {
          return absl::StrCat("storing a re-solve of job ", w.job_id, " at step ", w.step);
        }
      },
      write);
}

bool JobEffects::empty() const {
  return writes.empty() && messages.empty() && !release_workers && deleted_scopes.empty() &&
         resolve == nullptr && events.empty() && !close_watchers && observations.empty();
}

void ApplyJobEffects(JobEffects effects, JobWatchers& watchers, const EffectSinks& sinks) {
  for (StoreWrite& write : effects.writes) Enqueue(*sinks.writer, std::move(write));
  for (WorkerMessage& m : effects.messages) {
    sinks.workers->Send(m.worker_id, std::move(m.message));
  }
  if (effects.release_workers) sinks.workers->Release(effects.job_id);
  for (const std::string& scope : effects.deleted_scopes) sinks.rendezvous->DeleteScope(scope);
  if (effects.resolve != nullptr) sinks.solve(std::move(effects.resolve));
  const absl::Time now = sinks.clock->Now();
  for (WatchEvent& e : effects.events) {
    watchers.Emit(effects.job_id, now, std::move(e.event), e.droppable);
  }
  if (effects.close_watchers) watchers.CloseAll(absl::OkStatus());
  if (sinks.observer != nullptr) {
    for (const Observation& o : effects.observations) {
      Observe(effects.job_id, o, *sinks.observer);
    }
  }
}

}  // namespace zbpp::coordinator
