#ifndef ZBPP_WORKER_COMM_C10D_STATUS_H_
#define ZBPP_WORKER_COMM_C10D_STATUS_H_

// What the c10d backends (Gloo, NCCL) share: c10d's and Gloo's exceptions as
// absl::Status, timeouts in c10d's terms, waiting for a c10d work item, and
// the process-wide c10d settings zbpp needs.

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace zbpp::worker {

/// The exception in flight as a Status: "<context>: <what>". c10d's
/// TimeoutError is DeadlineExceeded; other c10d and Gloo timeouts are told
/// only in words ("Timed out waiting 200ms for recv", "Operation timed out!",
/// HashStore's "Wait timeout", the RendezvousStore's "DEADLINE_EXCEEDED"),
/// hence a text match, which leaves Gloo's "Application timeout caused pair
/// closure" (an earlier timeout broke the connection) Unavailable with the
/// other I/O errors; anything else is Internal. Call only inside a catch
/// block.
absl::Status CurrentExceptionToStatus(const std::string& context);

/// A Wait timeout in c10d's terms. c10d reads 0 ms (kNoTimeout) as "no
/// timeout", after which the group's own timeout applies, so finite
/// timeouts become >= 1 ms; absl::InfiniteDuration() is kNoTimeout.
std::chrono::milliseconds ToMilliseconds(absl::Duration timeout);

/// Waits for a c10d work item (Work::wait), naming `what` in every error:
/// Aborted when the work was aborted, the exception's Status otherwise.
absl::Status WaitForWork(c10d::Work& work, absl::Duration timeout, const std::string& what);

/// c10d reads TORCH_FR_BUFFER_SIZE when its flight recorder is first used,
/// i.e. by the first group's first operation; this sets it to 0 (off) unless
/// the user set it. zbpp never takes the recorder's post-mortem dumps, and
/// with several groups in one process (the thread-per-rank tests) torch
/// 2.11's recorder corrupts its own map and crashes. Call before the first
/// group is made; thread-safe, idempotent.
void DisableFlightRecorderUnlessSet();

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_C10D_STATUS_H_
