#include "coordinator/core/store_queries.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core/data_parallel.h"

namespace zbpp::coordinator {

absl::Status CheckResumable(Store& store, const zbpp::v1::JobSpec& spec) {
  const zbpp::v1::CheckpointSpec& checkpoint = spec.checkpoint();
  if (!checkpoint.has_resume_step()) return absl::OkStatus();
  absl::StatusOr<std::vector<CheckpointRecord>> records =
      store.ListCheckpointsAt(checkpoint.directory(), checkpoint.resume_step());
  if (!records.ok()) return records.status();
  const int d = DataParallelOf(spec.pipeline());
  for (const CheckpointRecord& record : *records) {
    if (record.data_parallel == d) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline.data_parallel: ", d, " cannot resume the checkpoint of step ",
        record.step, " in ", record.directory, ": job ", record.job_id,
        " wrote it with data_parallel = ", record.data_parallel,
        " (another global batch per step); resume with that data_parallel"));
  }
  return absl::OkStatus();
}

absl::Status CheckListStepsRequest(const zbpp::v1::ListStepsRequest& request) {
  if (request.from_step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("from_step: must be >= 0, got ", request.from_step()));
  }
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be >= 0, got ", request.page_size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<zbpp::v1::ListStepsResponse> ListStoredSteps(
    Store& store, const zbpp::v1::ListStepsRequest& request) {
  const int limit = request.page_size() == 0 ? 1000 : std::min(request.page_size(), 10000);
  // One more than asked tells whether another page follows.
  absl::StatusOr<std::vector<zbpp::v1::StepSummary>> steps =
      store.ListStepSummaries(request.job_id(), request.from_step(), limit + 1);
  if (!steps.ok()) return steps.status();
  zbpp::v1::ListStepsResponse response;
  response.set_next_from_step(-1);
  for (size_t i = 0; i < steps->size(); ++i) {
    if (static_cast<int>(i) == limit) {
      response.set_next_from_step((*steps)[i].step());
      break;
    }
    *response.add_steps() = std::move((*steps)[i]);
  }
  return response;
}

}  // namespace zbpp::coordinator
