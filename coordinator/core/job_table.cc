#include "coordinator/core/job_table.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "api/time_proto.h"
#include "common/sha256.h"
#include "coordinator/core/checkpoint_directory.h"

namespace zbpp::coordinator {

Job* JobTable::Find(const std::string& job_id) const {
  auto it = seq_of_job_.find(job_id);
  if (it == seq_of_job_.end()) return nullptr;
  return jobs_.at(it->second).get();
}

zbpp::v1::Job JobTable::NewJob(const zbpp::v1::JobSpec& spec, absl::Time now) const {
  zbpp::v1::Job proto;
  proto.set_id(absl::StrCat("job-", next_seq_));
  *proto.mutable_spec() = spec;
  // Only a spec with checkpoints gets the field: the stored spec stays the
  // one planned (the layout PlanJob chose), but for the job's id in the
  // directory.
  if (spec.has_checkpoint()) {
    zbpp::v1::CheckpointSpec* checkpoint = proto.mutable_spec()->mutable_checkpoint();
    checkpoint->set_directory(ExpandJobId(checkpoint->directory(), proto.id()));
  }
  proto.set_state(zbpp::v1::JOB_STATE_PENDING);
  proto.set_last_checkpoint_step(-1);
  proto.set_last_snapshot_step(-1);
  if (spec.checkpoint().has_resume_step()) {
    // The first attempt restores it like a recovery would.
    proto.set_last_checkpoint_step(spec.checkpoint().resume_step());
    proto.set_steps_completed(spec.checkpoint().resume_step() + 1);
  }
  *proto.mutable_create_time() = ToTimestamp(now);
  return proto;
}

absl::Status JobTable::CheckCheckpointDirectoryFree(const zbpp::v1::JobSpec& spec) const {
  if (!UsesCheckpointDirectory(spec)) return absl::OkStatus();
  const std::string& directory = spec.checkpoint().directory();
  for (const auto& [seq, job] : jobs_) {
    const zbpp::v1::JobSpec& other = job->proto().spec();
    if (IsTerminal(job->state()) || !UsesCheckpointDirectory(other) ||
        !(WritesCheckpoints(spec) || WritesCheckpoints(other)) ||
        !SameCheckpointDirectory(directory, other.checkpoint().directory())) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint.directory: \"", directory, "\" is used by job ", job->id(), " (",
        JobStateName(job->state()), "), which has not finished and ",
        WritesCheckpoints(other) ? "writes its checkpoints there"
                                 : "resumes from a checkpoint there",
        "; give each job its own directory, e.g. one ending in ", kJobIdPlaceholder,
        " (replaced by the job's id)"));
  }
  return absl::OkStatus();
}

Job& JobTable::Add(zbpp::v1::Job proto) {
  zbpp::v1::SchedulePolicy& schedule = *proto.mutable_spec()->mutable_schedule();
  std::shared_ptr<const std::string> file;
  if (!schedule.file_text().empty()) {
    const std::string sha256 = Sha256Hex(schedule.file_text());
    file = schedule_files_.Intern(sha256, std::move(*schedule.mutable_file_text()));
    schedule.clear_file_text();
  }
  return Insert(next_seq_, std::move(proto), std::move(file));
}

absl::Status JobTable::Recover(Store& store) {
  absl::StatusOr<StoredState> state = store.LoadAll();
  if (!state.ok()) return state.status();
  for (zbpp::v1::Job& stored : state->jobs) {
    int64_t seq = 0;
    const std::string& id = stored.id();
    if (!(id.rfind("job-", 0) == 0 && absl::SimpleAtoi(id.substr(4), &seq) && seq > 0 &&
          !jobs_.count(seq))) {
      seq = next_seq_;
    }
    std::shared_ptr<const std::string> file;
    if (auto named = state->schedule_file_of_job.find(id);
        named != state->schedule_file_of_job.end()) {
      const std::string& sha256 = named->second;
      auto text = state->schedule_files.find(sha256);
      if (text == state->schedule_files.end()) {
        return absl::InternalError(absl::StrCat("job ", id, ": its schedule file (SHA-256 ",
                                                sha256, ") is not in the store"));
      }
      // Moved on the first job of the file; the others get the same text.
      file = schedule_files_.Intern(sha256, std::move(text->second));
    }
    Insert(seq, std::move(stored), std::move(file));
  }
  for (zbpp::v1::ScheduleVersion& version : state->schedule_versions) {
    Job* job = Find(version.job_id());
    if (job == nullptr) continue;
    if (absl::Status restored = job->RestoreVersion(std::move(version)); !restored.ok()) {
      return restored;
    }
  }
  return RestoreAll(store);
}

absl::Status JobTable::RestoreAll(Store& store) {
  for (auto& [seq, job] : jobs_) {
    std::vector<zbpp::v1::ValidationOutcome> outcomes;
    if (!IsTerminal(job->state())) {
      absl::StatusOr<std::vector<zbpp::v1::ValidationOutcome>> listed =
          store.ListValidationOutcomes(job->id());
      if (!listed.ok()) return listed.status();
      outcomes = *std::move(listed);
    }
    // A changed state is stored as every transition's is: an effect.
    if (absl::Status restored = job->Restore(outcomes); !restored.ok()) return restored;
  }
  return absl::OkStatus();
}

Job& JobTable::Insert(int64_t seq, zbpp::v1::Job proto,
                      std::shared_ptr<const std::string> file) {
  next_seq_ = std::max(next_seq_, seq + 1);
  auto job = std::make_unique<Job>(seq, std::move(proto), context_, std::move(file));
  Job& added = *job;
  seq_of_job_[added.id()] = seq;
  jobs_[seq] = std::move(job);
  return added;
}

void JobTable::ForEach(const std::function<bool(Job&)>& visit) const {
  for (const auto& [seq, job] : jobs_) {
    if (!visit(*job)) return;
  }
}

absl::StatusOr<zbpp::v1::ListJobsResponse> JobTable::List(
    const zbpp::v1::ListJobsRequest& request) const {
  int64_t before = std::numeric_limits<int64_t>::max();
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &before) || before < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: malformed \"", request.page_token(), "\""));
  }
  int limit = request.page_size() <= 0 ? 100 : request.page_size();
  limit = std::min(limit, 1000);
  const std::set<int> states(request.states().begin(), request.states().end());
  zbpp::v1::ListJobsResponse response;
  int64_t last_seq = 0;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    const Job& job = *it->second;
    if (job.seq() >= before) continue;
    if (!states.empty() && !states.count(job.state())) continue;
    if (response.jobs_size() == limit) {
      // The token is the creation number of the last job returned.
      response.set_next_page_token(absl::StrCat(last_seq));
      break;
    }
    *response.add_jobs() = job.View(request.view() == zbpp::v1::JOB_VIEW_FULL);
    last_seq = job.seq();
  }
  return response;
}

std::map<std::string, int> JobTable::Counts() const {
  std::map<std::string, int> counts;
  for (zbpp::v1::JobState state : kAllJobStates) counts[JobStateName(state)] = 0;
  for (const auto& [seq, job] : jobs_) ++counts[JobStateName(job->state())];
  return counts;
}

int JobTable::ActiveCount() const {
  int active = 0;
  for (const auto& [seq, job] : jobs_) active += IsTerminal(job->state()) ? 0 : 1;
  return active;
}

std::vector<std::string> JobTable::EraseFinishedBeyond(int keep) {
  // Finished jobs that never ran a step go first, oldest first: a flood of
  // submit-and-cancel pairs then pushes out only its own kind, never a job
  // whose report and checksum someone trained for.
  std::vector<int64_t> never_ran, ran;  // Oldest first.
  for (const auto& [seq, job] : jobs_) {
    if (!IsTerminal(job->state())) continue;
    (job->proto().has_first_step() ? ran : never_ran).push_back(seq);
  }
  int64_t excess = static_cast<int64_t>(never_ran.size() + ran.size()) - std::max(keep, 1);
  std::vector<int64_t> order = std::move(never_ran);
  order.insert(order.end(), ran.begin(), ran.end());
  const int64_t newest = jobs_.empty() ? 0 : jobs_.rbegin()->first;
  std::vector<std::string> erased;
  for (int64_t seq : order) {
    if (excess <= 0) break;
    if (seq == newest) continue;  // Its number must survive a restart.
    auto it = jobs_.find(seq);
    erased.push_back(it->second->id());
    seq_of_job_.erase(it->second->id());
    jobs_.erase(it);
    --excess;
  }
  return erased;
}

}  // namespace zbpp::coordinator
