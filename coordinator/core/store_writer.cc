#include "coordinator/core/store_writer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace zbpp::coordinator {
namespace {

// Store's errors about the record itself (store.h): retrying cannot change
// them.
bool RefusedForTheRecord(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsNotFound(status) ||
         absl::IsAlreadyExists(status);
}

}  // namespace

absl::StatusOr<std::unique_ptr<StoreWriter>> StoreWriter::Create(
    Options options) {
  if (options.store == nullptr) {
    return absl::InvalidArgumentError("StoreWriter::Options.store is null");
  }
  if (options.initial_backoff <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("StoreWriter::Options.initial_backoff: must be > 0, got ",
                     absl::FormatDuration(options.initial_backoff)));
  }
  if (options.max_backoff < options.initial_backoff) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StoreWriter::Options.max_backoff: must be >= initial_backoff (",
        absl::FormatDuration(options.initial_backoff), "), got ",
        absl::FormatDuration(options.max_backoff)));
  }
  if (options.drain_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("StoreWriter::Options.drain_timeout: must be >= 0, got ",
                     absl::FormatDuration(options.drain_timeout)));
  }
  std::unique_ptr<StoreWriter> writer(new StoreWriter(std::move(options)));
  writer->thread_ = std::thread([w = writer.get()] { w->Run(); });
  return writer;
}

StoreWriter::~StoreWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    stop_time_ = absl::Now();
  }
  thread_.join();
}

void StoreWriter::Enqueue(Write write, std::string context) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({std::move(write), std::move(context)});
  ++enqueued_;
}

absl::Status StoreWriter::Flush() {
  absl::MutexLock lock(&mu_);
  const int64_t target = enqueued_;
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return applied_ >= target || !last_error_.empty();
  };
  mu_.Await(absl::Condition(&done));
  if (applied_ >= target) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("the coordinator's store is failing (", enqueued_ - applied_,
                   " writes waiting, retried with back-off): ", last_error_));
}

StoreWriter::Health StoreWriter::GetHealth() const {
  absl::MutexLock lock(&mu_);
  Health health;
  health.healthy = last_error_.empty();
  health.pending = enqueued_ - applied_;
  health.failed_attempts = failed_attempts_;
  health.refused = refused_;
  health.last_error = last_error_;
  return health;
}

bool StoreWriter::Healthy() const {
  absl::MutexLock lock(&mu_);
  return last_error_.empty();
}

void StoreWriter::Run() {
  while (true) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // Stopping, and everything is applied.
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    // The store call runs without mu_: Enqueue never waits for SQLite.
    const bool stored = Apply(item);
    absl::MutexLock lock(&mu_);
    ++applied_;
    if (!stored) {
      // Shutting down with the store still failing: what is queued behind
      // the write cannot be stored before it (the prefix), so it goes too.
      const int64_t lost = 1 + static_cast<int64_t>(queue_.size());
      Logf("store still failing %s after shutdown began: %d queued writes NOT stored, "
           "from \"%s\" on (%s); the stored history ends before them",
           absl::FormatDuration(options_.drain_timeout), lost, item.context, last_error_);
      refused_ += lost;
      applied_ += lost - 1;
      queue_.clear();
    }
  }
}

bool StoreWriter::Apply(const Item& item) {
  absl::Duration backoff = options_.initial_backoff;
  int64_t failures = 0;
  const absl::Time first_attempt = absl::Now();
  while (true) {
    const absl::Status status = item.write(*options_.store);
    const bool stored = status.ok();
    if (stored || RefusedForTheRecord(status)) {
      if (!stored) {
        Logf("%s: %s (refused for the record; not retried)", item.context,
             status.ToString());
      }
      bool recovered = false;
      {
        absl::MutexLock lock(&mu_);
        if (!stored) ++refused_;
        recovered = !last_error_.empty();
        last_error_.clear();
      }
      if (recovered) {
        Logf("store recovered: %s succeeded after %d failed attempts over %s", item.context,
             failures, absl::FormatDuration(absl::Now() - first_attempt));
        if (options_.on_recovered) options_.on_recovered();
      }
      return true;
    }
    ++failures;
    absl::MutexLock lock(&mu_);
    ++failed_attempts_;
    const bool first = last_error_.empty();
    last_error_ = absl::StrCat(item.context, ": ", status.ToString());
    if (first) {
      Logf("store FAILING: %s; retrying with back-off up to %s, %d writes waiting in order "
           "behind it; running jobs get no new steps until it succeeds",
           last_error_, absl::FormatDuration(options_.max_backoff), enqueued_ - applied_ - 1);
    }
    const absl::Time now = absl::Now();
    absl::Time wake = now + backoff;
    backoff = std::min(backoff * 2, options_.max_backoff);
    if (stopping_) {
      const absl::Time give_up = stop_time_ + options_.drain_timeout;
      if (now >= give_up) return false;
      wake = std::min(wake, give_up);
    }
    // Woken early only by the destructor (which starts the drain timeout).
    const bool was_stopping = stopping_;
    auto stop_changed = [this, was_stopping]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                            mu_) { return stopping_ != was_stopping; };
    mu_.AwaitWithDeadline(absl::Condition(&stop_changed), wake);
  }
}

}  // namespace zbpp::coordinator
