#include "coordinator/core/job_watchers.h"

#include <algorithm>
#include <utility>

#include "api/time_proto.h"

namespace zbpp::coordinator {

void JobWatchers::Emit(const std::string& job_id, absl::Time now,
                       zbpp::v1::JobEvent event, bool droppable) {
  event.set_job_id(job_id);
  event.set_sequence(++sequence_);
  *event.mutable_time() = ToTimestamp(now);
  for (auto& outbox : outboxes_) outbox->Push(event, droppable);
}

std::shared_ptr<WatchOutbox> JobWatchers::Add(const std::string& job_id, absl::Time now,
                                              zbpp::v1::Job snapshot, size_t capacity,
                                              bool closed) {
  auto outbox = std::make_shared<WatchOutbox>(capacity);
  zbpp::v1::JobEvent event;
  event.set_job_id(job_id);
  event.set_sequence(++sequence_);
  *event.mutable_time() = ToTimestamp(now);
  *event.mutable_snapshot() = std::move(snapshot);
  outbox->Push(std::move(event));
  if (closed) {
    outbox->Close(absl::OkStatus());
  } else {
    outboxes_.push_back(outbox);
  }
  return outbox;
}

void JobWatchers::Remove(const std::shared_ptr<WatchOutbox>& outbox) {
  outboxes_.erase(std::remove(outboxes_.begin(), outboxes_.end(), outbox),
                  outboxes_.end());
}

void JobWatchers::CloseAll(const absl::Status& status) {
  for (auto& outbox : outboxes_) outbox->Close(status);
  outboxes_.clear();
}

}  // namespace zbpp::coordinator
