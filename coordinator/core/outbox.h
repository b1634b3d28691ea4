#ifndef ZBPP_COORDINATOR_CORE_OUTBOX_H_
#define ZBPP_COORDINATOR_CORE_OUTBOX_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// A bounded queue of messages handed from the core to one consumer thread
/// (a Session stream's writer, a WatchJob stream). The core pushes; the
/// consumer pops with a deadline. Thread-safe.
template <typename Message>
class Outbox {
 public:
  /// `capacity`: messages held before `droppable` ones are dropped
  /// (0: unbounded).
  explicit Outbox(size_t capacity = 0) : capacity_(capacity) {}

  /// Appends `message` unless the outbox is closed, or full and the message
  /// `droppable`. Returns false when it was not queued.
  bool Push(Message message, bool droppable = false) ABSL_LOCKS_EXCLUDED(mu_) {
    std::function<void()> listener;
    {
      absl::MutexLock lock(&mu_);
      if (!status_.ok() || finished_) return false;
      if (droppable && capacity_ > 0 && queue_.size() >= capacity_) return false;
      queue_.push_back(std::move(message));
      listener = listener_;
    }
    if (listener) listener();
    return true;
  }

  /// Ends the stream with `status` (OK: a normal end, after what is
  /// queued; an error: at once). The first call wins.
  void Close(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    std::function<void()> listener;
    {
      absl::MutexLock lock(&mu_);
      if (!status_.ok() || finished_) return;
      if (status.ok()) {
        finished_ = true;
      } else {
        status_ = std::move(status);
      }
      listener = listener_;
    }
    if (listener) listener();
  }

  /// For a consumer that does not block in Pop (a stream on gRPC's callback
  /// API): `listener` is called after each message queued and after the
  /// first Close, outside the outbox's lock but on the producer's thread,
  /// which may hold the coordinator's mutex, so it must only hand the news
  /// on (never block, never call the core). Pop(absl::InfinitePast(), ...)
  /// then takes what is there without waiting.
  void SetListener(std::function<void()> listener) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    listener_ = std::move(listener);
  }

  /// Waits until a message is queued, the outbox is closed or `deadline`
  /// (real time) passes; moves every queued message to `out`. Returns OK
  /// (with 0 or more messages), OutOfRange once closed with OK and drained,
  /// or the error it was closed with.
  absl::Status Pop(absl::Time deadline, std::vector<Message>* out)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || finished_ || !status_.ok();
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
    if (!status_.ok()) return status_;
    while (!queue_.empty()) {
      out->push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    if (out->empty() && finished_) {
      return absl::OutOfRangeError("stream ended");
    }
    return absl::OkStatus();
  }

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> listener_ ABSL_GUARDED_BY(mu_);
};

/// One message of a Session stream. Immutable and shared: a schedule
/// version published to a job's p workers is one message held by p
/// outboxes (publishing copies pointers, not the ~p·m·3-action version).
/// Its `sequence` is left 0: the stream's writer numbers the messages from
/// 1 in the order it pops them, which is the order they were pushed.
using SessionMessage = std::shared_ptr<const zbpp::v1::SessionResponse>;

/// The messages of one worker's Session stream, in the order the
/// coordinator decided them. Closed with Aborted when a newer Session
/// replaces it and with NotFound when the worker is lost.
using SessionOutbox = Outbox<SessionMessage>;

/// The events of one WatchJob stream: a snapshot first, then live events;
/// closed OK after the terminal state change. Step events are dropped when
/// the reader lags by `watch_queue_capacity` events.
using WatchOutbox = Outbox<zbpp::v1::JobEvent>;

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_OUTBOX_H_
