#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "coordinator/store/sqlite_rows.h"
#include "coordinator/store/sqlite_store.h"

// SqliteStore's schedule files: each text stored once per content in
// `schedule_files`, named by its SHA-256 from the jobs that carry it (a
// 3 MiB file submitted with every job of a sweep was a 3 MiB copy in every
// job record).

namespace zbpp::coordinator {

using sqlite_detail::Quote;
using sqlite_detail::Serialize;

absl::Status SqliteStore::WriteJob(const zbpp::v1::Job& job, bool create) {
  if (job.id().empty()) return absl::InvalidArgumentError("job.id: empty");
  const std::string& text = job.spec().schedule().file_text();
  std::string sha256;  // Of the file stored with this call; none without text.
  std::string blob;
  if (text.empty()) {
    if (absl::Status s = Serialize(job, "job", &blob); !s.ok()) return s;
  } else {
    sha256 = Sha256Hex(text);
    zbpp::v1::Job row = job;
    row.mutable_spec()->mutable_schedule()->clear_file_text();
    if (absl::Status s = Serialize(row, "job", &blob); !s.ok()) return s;
  }
  const std::string what = absl::StrCat("job ", Quote(job.id()));
  absl::MutexLock lock(&mu_);
  return InTransaction(Access::kWrite, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!create) {
      if (absl::Status s = CheckJobExists(job.id()); !s.ok()) return s;
    }
    if (!text.empty()) {
      Run file(statements_->insert_schedule_file);
      file.Text(1, sha256).Blob(2, text);
      if (int rc = file.Step(); rc != SQLITE_DONE) {
        return Error(rc, absl::StrCat("storing the schedule file of ", what));
      }
    }
    Run run(create ? statements_->insert_job : statements_->update_job);
    run.Text(1, job.id())
        .Int(2, job.state())
        .Int(3, job.create_time().seconds())
        .Int(4, job.create_time().nanos())
        .Blob(5, blob);
    // NULL: no file (insert), or the stored one kept (update).
    if (sha256.empty()) {
      run.Null(6);
    } else {
      run.Text(6, sha256);
    }
    if (int rc = run.Step(); rc != SQLITE_DONE) {
      return Error(rc, absl::StrCat("storing ", what));
    }
    return absl::OkStatus();
  });
}

absl::Status SqliteStore::MoveScheduleFilesOut() {
  Statement list, get, insert_file, update;
  for (const auto& [statement, sql] : std::initializer_list<std::pair<Statement*, const char*>>{
           {&list, "SELECT id, job FROM jobs"},
           {&get, "SELECT job FROM jobs WHERE id = ?1"},
           {&insert_file, sqlite_detail::kInsertScheduleFile},
           {&update, "UPDATE jobs SET job = ?2, schedule_file = ?3 WHERE id = ?1"}}) {
    if (absl::Status s = statement->Prepare(*this, sql); !s.ok()) return s;
  }
  // The jobs holding a text first, then one at a time: never every text in
  // memory at once, and no row updated under a running SELECT.
  std::vector<std::string> holding;
  {
    Run run(list);
    absl::Status s = ReadRows(run, "jobs", [&](Run& row) {
      zbpp::v1::Job job;
      if (absl::Status parsed = ParseColumn(row, 1, "jobs", &job); !parsed.ok()) return parsed;
      if (!job.spec().schedule().file_text().empty()) holding.push_back(row.ColumnText(0));
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
  }
  for (const std::string& id : holding) {
    const std::string what = absl::StrCat("job ", Quote(id));
    zbpp::v1::Job job;
    {
      Run run(get);
      run.Text(1, id);
      absl::Status s = ReadRows(run, what, [&](Run& row) {
        return ParseColumn(row, 0, what, &job);
      });
      if (!s.ok()) return s;
    }
    zbpp::v1::SchedulePolicy& policy = *job.mutable_spec()->mutable_schedule();
    const std::string text = std::move(*policy.mutable_file_text());
    policy.clear_file_text();
    const std::string sha256 = Sha256Hex(text);
    std::string blob;
    if (absl::Status s = Serialize(job, "job", &blob); !s.ok()) return s;
    Run file(insert_file);
    file.Text(1, sha256).Blob(2, text);
    if (int rc = file.Step(); rc != SQLITE_DONE) {
      return Error(rc, absl::StrCat("moving the schedule file of ", what));
    }
    Run run(update);
    run.Text(1, id).Blob(2, blob).Text(3, sha256);
    if (int rc = run.Step(); rc != SQLITE_DONE) {
      return Error(rc, absl::StrCat("moving the schedule file of ", what));
    }
  }
  return absl::OkStatus();
}

}  // namespace zbpp::coordinator
