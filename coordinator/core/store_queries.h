#ifndef ZBPP_COORDINATOR_CORE_STORE_QUERIES_H_
#define ZBPP_COORDINATOR_CORE_STORE_QUERIES_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/store/store.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// OK unless `spec` resumes (checkpoint.resume_step) a checkpoint that
/// `store` records as written by a job with another
/// pipeline.data_parallel (another global batch per step): InvalidArgument
/// naming pipeline.data_parallel. Store errors. The caller flushes queued
/// writes first. Thread-safe as the store is.
absl::Status CheckResumable(Store& store, const zbpp::v1::JobSpec& spec);

/// InvalidArgument naming from_step or page_size when negative (job.proto
/// ListStepsRequest). Pure.
absl::Status CheckListStepsRequest(const zbpp::v1::ListStepsRequest& request);

/// One page of the job's step summaries in `store`, oldest first, from
/// request.from_step: page_size 0 means 1000, at most 10000;
/// next_from_step is the step after the page, -1 after the last. Store
/// errors. Thread-safe as the store is.
absl::StatusOr<zbpp::v1::ListStepsResponse> ListStoredSteps(
    Store& store, const zbpp::v1::ListStepsRequest& request);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_STORE_QUERIES_H_
