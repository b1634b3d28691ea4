#include "coordinator/core/job_table.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/job_state.h"

namespace zbpp::coordinator {

Job* JobTable::Find(const std::string& job_id) const {
  auto it = seq_of_job_.find(job_id);
  if (it == seq_of_job_.end()) return nullptr;
  return jobs_.at(it->second).get();
}

std::string JobTable::NextId() const { return absl::StrCat("job-", next_seq_); }

Job& JobTable::Add(zbpp::v1::Job proto) { return Insert(next_seq_, std::move(proto)); }

Job& JobTable::AddRecovered(zbpp::v1::Job stored) {
  int64_t seq = 0;
  const std::string& id = stored.id();
  if (!(id.rfind("job-", 0) == 0 && absl::SimpleAtoi(id.substr(4), &seq) && seq > 0 &&
        !jobs_.count(seq))) {
    seq = next_seq_;
  }
  return Insert(seq, std::move(stored));
}

Job& JobTable::Insert(int64_t seq, zbpp::v1::Job proto) {
  next_seq_ = std::max(next_seq_, seq + 1);
  auto job = std::make_unique<Job>(seq, std::move(proto), context_);
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

}  // namespace zbpp::coordinator
