#include "coordinator/store/sqlite_store.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "coordinator/store/sqlite_rows.h"

// SqliteStore's records: jobs, their histories, checkpoints, re-solve
// records, and what Recover loads (the connection and the schema are
// sqlite_store.cc's).

namespace zbpp::coordinator {

using sqlite_detail::Quote;
using sqlite_detail::Serialize;

namespace {

std::string StagesToText(std::vector<int32_t> stages) {
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  return absl::StrJoin(stages, ",");
}

}  // namespace

// ---------------------------------------------------------------------------
// Jobs.

absl::Status SqliteStore::CreateJob(const zbpp::v1::Job& job) {
  return WriteJob(job, /*create=*/true);
}

absl::Status SqliteStore::UpdateJob(const zbpp::v1::Job& job) {
  return WriteJob(job, /*create=*/false);
}

absl::StatusOr<zbpp::v1::Job> SqliteStore::GetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  const std::string what = absl::StrCat("job ", Quote(job_id));
  std::optional<zbpp::v1::Job> job;
  absl::Status status = InTransaction(
      Access::kRead, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        Run run(statements_->get_job);
        run.Text(1, job_id);
        return ReadRows(run, what, [&](Run& row) {
          if (absl::Status s = ParseColumn(row, 0, what, &job.emplace()); !s.ok()) return s;
          // The job as it was given: its schedule file's text back in place.
          if (!row.ColumnIsNull(1)) {
            job->mutable_spec()->mutable_schedule()->set_file_text(row.ColumnText(1));
          }
          return absl::OkStatus();
        });
      });
  if (!status.ok()) return status;
  if (!job.has_value()) return absl::NotFoundError(what + " not found");
  return *std::move(job);
}

absl::Status SqliteStore::DeleteJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  return InTransaction(Access::kWrite, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (absl::Status s = CheckJobExists(job_id); !s.ok()) return s;
    const Statements& st = *statements_;
    for (const Statement* statement :
         {&st.delete_schedule_versions, &st.delete_cost_snapshots, &st.delete_step_summaries,
          &st.delete_validation_outcomes, &st.delete_checkpoints, &st.delete_resolve_records,
          &st.delete_job}) {
      Run run(*statement);
      run.Text(1, job_id);
      if (int rc = run.Step(); rc != SQLITE_DONE) {
        return Error(rc, absl::StrCat("deleting job ", Quote(job_id)));
      }
    }
    // Its schedule file, unless another job carries it too.
    Run files(st.delete_unused_schedule_files);
    if (int rc = files.Step(); rc != SQLITE_DONE) {
      return Error(rc, absl::StrCat("deleting the schedule file of job ", Quote(job_id)));
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------
// Per-job histories.

absl::Status SqliteStore::AddScheduleVersion(
    const zbpp::v1::ScheduleVersion& version) {
  if (version.job_id().empty()) {
    return absl::InvalidArgumentError("schedule_version.job_id: empty");
  }
  if (version.version() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule_version.version: ", version.version(), " is below 1"));
  }
  std::string blob;
  if (absl::Status s = Serialize(version, "schedule_version", &blob);
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  return WriteForJob(version.job_id(), statements_->insert_schedule_version,
                     absl::StrCat("schedule version ", version.version(),
                                  " of job ", Quote(version.job_id())),
                     [&](Run& run) {
                       run.Text(1, version.job_id())
                           .Int(2, version.version())
                           .Int(3, version.effective_step())
                           .Blob(4, blob);
                     });
}

absl::Status SqliteStore::PutCostSnapshot(const std::string& job_id,
                                          int64_t step,
                                          const zbpp::v1::CostModel& costs) {
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step: ", step, " is negative"));
  }
  std::string blob;
  if (absl::Status s = Serialize(costs, "costs", &blob); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return WriteForJob(job_id, statements_->put_cost_snapshot,
                     absl::StrCat("the cost snapshot of job ", Quote(job_id),
                                  " at step ", step),
                     [&](Run& run) {
                       run.Text(1, job_id).Int(2, step).Blob(3, blob);
                     });
}

absl::StatusOr<std::vector<std::pair<int64_t, zbpp::v1::CostModel>>>
SqliteStore::ListCostSnapshots(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  const std::string what = absl::StrCat("cost snapshots of job ", Quote(job_id));
  std::vector<std::pair<int64_t, zbpp::v1::CostModel>> snapshots;
  absl::Status status = ReadForJob(
      job_id, statements_->list_cost_snapshots, what, [&](Run& row) {
        auto& [step, costs] = snapshots.emplace_back();
        step = row.ColumnInt(0);
        return ParseColumn(row, 1, what, &costs);
      });
  if (!status.ok()) return status;
  return snapshots;
}

absl::Status SqliteStore::PutStepSummary(const std::string& job_id,
                                         const zbpp::v1::StepSummary& step) {
  if (step.step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step.step: ", step.step(), " is negative"));
  }
  std::string blob;
  if (absl::Status s = Serialize(step, "step", &blob); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return WriteForJob(
      job_id, statements_->put_step_summary,
      absl::StrCat("step ", step.step(), " of job ", Quote(job_id)),
      [&](Run& run) { run.Text(1, job_id).Int(2, step.step()).Blob(3, blob); });
}

absl::StatusOr<std::vector<zbpp::v1::StepSummary>>
SqliteStore::ListStepSummaries(const std::string& job_id, int64_t from_step,
                               int limit) {
  if (limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: ", limit, " is negative"));
  }
  absl::MutexLock lock(&mu_);
  const std::string what = absl::StrCat("step summaries of job ", Quote(job_id));
  std::vector<zbpp::v1::StepSummary> steps;
  absl::Status status = InTransaction(
      Access::kRead, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (absl::Status s = CheckJobExists(job_id); !s.ok()) return s;
        Run run(statements_->list_step_summaries);
        run.Text(1, job_id).Int(2, from_step).Int(3, limit);
        return ReadRows(run, what, [&](Run& row) {
          return ParseColumn(row, 0, what, &steps.emplace_back());
        });
      });
  if (!status.ok()) return status;
  return steps;
}

absl::Status SqliteStore::PutValidationOutcome(
    const std::string& job_id, const zbpp::v1::ValidationOutcome& outcome) {
  if (outcome.step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("outcome.step: ", outcome.step(), " is negative"));
  }
  std::string blob;
  if (absl::Status s = Serialize(outcome, "outcome", &blob); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  return WriteForJob(job_id, statements_->put_validation_outcome,
                     absl::StrCat("the validation outcome of step ",
                                  outcome.step(), " of job ", Quote(job_id)),
                     [&](Run& run) {
                       run.Text(1, job_id)
                           .Int(2, outcome.step())
                           .Int(3, outcome.decision())
                           .Blob(4, blob);
                     });
}

absl::StatusOr<std::vector<zbpp::v1::ValidationOutcome>>
SqliteStore::ListValidationOutcomes(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  const std::string what =
      absl::StrCat("validation outcomes of job ", Quote(job_id));
  std::vector<zbpp::v1::ValidationOutcome> outcomes;
  absl::Status status = ReadForJob(
      job_id, statements_->list_validation_outcomes, what, [&](Run& row) {
        return ParseColumn(row, 0, what, &outcomes.emplace_back());
      });
  if (!status.ok()) return status;
  return outcomes;
}

absl::Status SqliteStore::PutCheckpoint(const CheckpointRecord& checkpoint) {
  if (checkpoint.job_id.empty()) {
    return absl::InvalidArgumentError("checkpoint.job_id: empty");
  }
  if (checkpoint.step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint.step: ", checkpoint.step, " is negative"));
  }
  for (int32_t stage : checkpoint.stages_written) {
    if (stage < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint.stages_written: stage ", stage, " is negative"));
    }
  }
  if (checkpoint.data_parallel < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint.data_parallel: must be >= 1, got ", checkpoint.data_parallel));
  }
  const std::string stages = StagesToText(checkpoint.stages_written);
  absl::MutexLock lock(&mu_);
  return WriteForJob(checkpoint.job_id, statements_->put_checkpoint,
                     absl::StrCat("the checkpoint of job ",
                                  Quote(checkpoint.job_id), " at step ",
                                  checkpoint.step),
                     [&](Run& run) {
                       run.Text(1, checkpoint.job_id)
                           .Int(2, checkpoint.step)
                           .Text(3, checkpoint.directory)
                           .Text(4, stages)
                           .Int(5, checkpoint.complete ? 1 : 0)
                           .Int(6, checkpoint.data_parallel);
                     });
}

absl::StatusOr<std::vector<CheckpointRecord>> SqliteStore::ListCheckpointsAt(
    const std::string& directory, int64_t step) {
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("step: ", step, " is negative"));
  }
  absl::MutexLock lock(&mu_);
  std::vector<CheckpointRecord> records;
  absl::Status status = InTransaction(
      Access::kRead, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        Run run(statements_->list_checkpoints_at);
        run.Text(1, directory).Int(2, step);
        return ReadRows(run, "checkpoints", [&](Run& row) {
          absl::StatusOr<CheckpointRecord> record = ReadCheckpoint(row);
          if (!record.ok()) return record.status();
          records.push_back(*std::move(record));
          return absl::OkStatus();
        });
      });
  if (!status.ok()) return status;
  return records;
}

absl::StatusOr<CheckpointRecord> SqliteStore::ReadCheckpoint(const Run& row) const {
  CheckpointRecord checkpoint;
  checkpoint.job_id = row.ColumnText(0);
  checkpoint.step = row.ColumnInt(1);
  checkpoint.directory = row.ColumnText(2);
  for (absl::string_view part :
       absl::StrSplit(row.ColumnText(3), ',', absl::SkipEmpty())) {
    int32_t stage;
    if (!absl::SimpleAtoi(part, &stage)) {
      return absl::InternalError(absl::StrCat(
          "SQLite database ", options_.path, ": checkpoint of job ",
          Quote(checkpoint.job_id), " at step ", checkpoint.step,
          ": stages_written holds \"", part, "\""));
    }
    checkpoint.stages_written.push_back(stage);
  }
  checkpoint.complete = row.ColumnInt(4) != 0;
  checkpoint.data_parallel = static_cast<int32_t>(row.ColumnInt(5));
  return checkpoint;
}

absl::Status SqliteStore::AddResolveRecord(const ResolveRecord& record) {
  if (record.job_id.empty()) {
    return absl::InvalidArgumentError("record.job_id: empty");
  }
  absl::MutexLock lock(&mu_);
  return WriteForJob(record.job_id, statements_->insert_resolve_record,
                     absl::StrCat("a re-solve record of job ",
                                  Quote(record.job_id)),
                     [&](Run& run) {
                       run.Text(1, record.job_id)
                           .Int(2, record.step)
                           .Int(3, record.published ? 1 : 0)
                           .Int(4, record.version)
                           .Real(5, record.old_makespan_seconds)
                           .Real(6, record.new_makespan_seconds)
                           .Real(7, record.solve_seconds)
                           .Text(8, record.reason);
                     });
}

absl::StatusOr<std::vector<ResolveRecord>> SqliteStore::ListResolveRecords(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  std::vector<ResolveRecord> records;
  absl::Status status = ReadForJob(
      job_id, statements_->list_resolve_records,
      absl::StrCat("re-solve records of job ", Quote(job_id)), [&](Run& row) {
        ResolveRecord& record = records.emplace_back();
        record.job_id = job_id;
        record.step = row.ColumnInt(0);
        record.published = row.ColumnInt(1) != 0;
        record.version = row.ColumnInt(2);
        record.old_makespan_seconds = row.ColumnReal(3);
        record.new_makespan_seconds = row.ColumnReal(4);
        record.solve_seconds = row.ColumnReal(5);
        record.reason = row.ColumnText(6);
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return records;
}

// ---------------------------------------------------------------------------
// Recovery.

absl::StatusOr<StoredState> SqliteStore::LoadAll() {
  absl::MutexLock lock(&mu_);
  StoredState state;
  absl::Status status = InTransaction(
      Access::kRead, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        {
          Run run(statements_->load_jobs);
          if (absl::Status s = ReadRows(run, "jobs", [&](Run& row) {
                return ParseColumn(row, 0, "jobs", &state.jobs.emplace_back());
              });
              !s.ok()) {
            return s;
          }
        }
        for (const auto& table :
             {std::pair{&statements_->load_schedule_files, &state.schedule_files},
              std::pair{&statements_->load_schedule_file_of_jobs,
                        &state.schedule_file_of_job}}) {
          // Named, not bound: a lambda cannot capture a structured binding
          // before C++20 (the fuzzers build as C++17).
          std::map<std::string, std::string>* files = table.second;
          Run run(*table.first);
          if (absl::Status s = ReadRows(run, "schedule_files", [&](Run& row) {
                files->emplace(row.ColumnText(0), row.ColumnText(1));
                return absl::OkStatus();
              });
              !s.ok()) {
            return s;
          }
        }
        {
          Run run(statements_->load_schedule_versions);
          if (absl::Status s = ReadRows(run, "schedule_versions", [&](Run& row) {
                return ParseColumn(row, 0, "schedule_versions",
                                   &state.schedule_versions.emplace_back());
              });
              !s.ok()) {
            return s;
          }
        }
        Run run(statements_->load_checkpoints);
        return ReadRows(run, "checkpoints", [&](Run& row) {
          absl::StatusOr<CheckpointRecord> checkpoint = ReadCheckpoint(row);
          if (!checkpoint.ok()) return checkpoint.status();
          state.checkpoints.push_back(*std::move(checkpoint));
          return absl::OkStatus();
        });
      });
  if (!status.ok()) return status;
  return state;
}

}  // namespace zbpp::coordinator
