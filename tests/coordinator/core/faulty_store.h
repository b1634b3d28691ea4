#ifndef ZBPP_TESTS_COORDINATOR_FAULTY_STORE_H_
#define ZBPP_TESTS_COORDINATOR_FAULTY_STORE_H_

// A Store that forwards every call to another one and fails writes on
// demand, as a database whose file became unwritable would: the write does
// not reach the wrapped store and returns Unavailable. It also keeps what
// the wrapped store refused of the writes that reached it.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/store.h"

namespace zbpp::coordinator::testing {

/// Thread-safe (the StoreWriter's thread writes while the test configures).
class FaultyStore final : public Store {
 public:
  /// `inner` is not owned and must outlive this.
  explicit FaultyStore(Store* inner) : inner_(inner) {}

  /// The next `n` writes (Probe included) fail.
  void FailNextWrites(int64_t n) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    fail_next_ = n;
  }
  /// Every write fails while `fail` is true.
  void FailAllWrites(bool fail) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    fail_all_ = fail;
  }
  /// Writes failed so far.
  int64_t failed() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return failed_;
  }
  /// The errors of writes that reached the wrapped store and failed there
  /// (e.g. AlreadyExists for a record stored twice), as
  /// "<call>: <status>", in order.
  std::vector<std::string> store_errors() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return store_errors_;
  }
  /// Writes of kind `what` ("UpdateJob", ...) that reached the wrapped
  /// store so far.
  int64_t stored(const std::string& what) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = stored_.find(what);
    return it == stored_.end() ? 0 : it->second;
  }

  absl::Status CreateJob(const v1::Job& job) override {
    return Write("CreateJob", [&] { return inner_->CreateJob(job); });
  }
  absl::Status UpdateJob(const v1::Job& job) override {
    return Write("UpdateJob", [&] { return inner_->UpdateJob(job); });
  }
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id) override {
    return inner_->GetJob(job_id);
  }
  absl::Status AddScheduleVersion(const v1::ScheduleVersion& version) override {
    return Write("AddScheduleVersion",
                 [&] { return inner_->AddScheduleVersion(version); });
  }
  absl::Status PutCostSnapshot(const std::string& job_id, int64_t step,
                               const v1::CostModel& costs) override {
    return Write("PutCostSnapshot",
                 [&] { return inner_->PutCostSnapshot(job_id, step, costs); });
  }
  absl::Status PutStepSummary(const std::string& job_id,
                              const v1::StepSummary& step) override {
    return Write("PutStepSummary",
                 [&] { return inner_->PutStepSummary(job_id, step); });
  }
  absl::StatusOr<std::vector<v1::StepSummary>> ListStepSummaries(
      const std::string& job_id, int64_t from_step, int limit) override {
    return inner_->ListStepSummaries(job_id, from_step, limit);
  }
  absl::Status PutValidationOutcome(
      const std::string& job_id, const v1::ValidationOutcome& outcome) override {
    return Write("PutValidationOutcome",
                 [&] { return inner_->PutValidationOutcome(job_id, outcome); });
  }
  absl::StatusOr<std::vector<v1::ValidationOutcome>> ListValidationOutcomes(
      const std::string& job_id) override {
    return inner_->ListValidationOutcomes(job_id);
  }
  absl::Status PutCheckpoint(const CheckpointRecord& checkpoint) override {
    return Write("PutCheckpoint",
                 [&] { return inner_->PutCheckpoint(checkpoint); });
  }
  absl::StatusOr<std::vector<CheckpointRecord>> ListCheckpointsAt(
      const std::string& directory, int64_t step) override {
    return inner_->ListCheckpointsAt(directory, step);
  }
  absl::Status AddResolveRecord(const ResolveRecord& record) override {
    return Write("AddResolveRecord",
                 [&] { return inner_->AddResolveRecord(record); });
  }
  absl::StatusOr<std::vector<ResolveRecord>> ListResolveRecords(
      const std::string& job_id) override {
    return inner_->ListResolveRecords(job_id);
  }
  absl::StatusOr<std::vector<std::pair<int64_t, v1::CostModel>>>
  ListCostSnapshots(const std::string& job_id) override {
    return inner_->ListCostSnapshots(job_id);
  }
  absl::Status DeleteJob(const std::string& job_id) override {
    return Write("DeleteJob", [&] { return inner_->DeleteJob(job_id); });
  }
  absl::StatusOr<StoredState> LoadAll() override { return inner_->LoadAll(); }
  absl::Status Probe() override {
    return Write("Probe", [&] { return inner_->Probe(); });
  }

 private:
  template <typename Call>
  absl::Status Write(const char* what, Call call) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (fail_all_ || fail_next_ > 0) {
        if (fail_next_ > 0) --fail_next_;
        ++failed_;
        return absl::UnavailableError(absl::StrCat(
            "injected fault: ", what, " (disk I/O error, database unwritable)"));
      }
      ++stored_[what];
    }
    absl::Status status = call();
    if (!status.ok()) {
      absl::MutexLock lock(&mu_);
      store_errors_.push_back(absl::StrCat(what, ": ", status.ToString()));
    }
    return status;
  }

  Store* const inner_;
  mutable absl::Mutex mu_;
  int64_t fail_next_ ABSL_GUARDED_BY(mu_) = 0;
  bool fail_all_ ABSL_GUARDED_BY(mu_) = false;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> stored_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> store_errors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTS_COORDINATOR_FAULTY_STORE_H_
