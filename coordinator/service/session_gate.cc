#include "coordinator/service/session_gate.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {

absl::StatusOr<std::unique_ptr<SessionGate>> SessionGate::Create(Options options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("SessionGate::Options.clock is null");
  }
  if (options.open_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SessionGate::Options.open_timeout: must be > 0, got ",
                     absl::FormatDuration(options.open_timeout)));
  }
  if (options.max_unopened < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SessionGate::Options.max_unopened: must be >= 1, got ", options.max_unopened));
  }
  return std::unique_ptr<SessionGate>(new SessionGate(options));
}

absl::StatusOr<uint64_t> SessionGate::Admit(std::function<void()> cancel) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(waiting_.size()) >= options_.max_unopened) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "Session: ", waiting_.size(),
        " streams wait for their first message (SessionOpen), the cap; a stream must send "
        "it within ", absl::FormatDuration(options_.open_timeout)));
  }
  const uint64_t ticket = next_ticket_++;
  waiting_.emplace(ticket, Waiting{options_.clock->Now(), std::move(cancel)});
  return ticket;
}

void SessionGate::Opened(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  waiting_.erase(ticket);
}

int SessionGate::CancelExpired() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock->Now();
  int cancelled = 0;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (now - it->second.admitted < options_.open_timeout) {
      ++it;
      continue;
    }
    it->second.cancel();
    it = waiting_.erase(it);
    ++cancelled;
  }
  return cancelled;
}

int SessionGate::unopened() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiting_.size());
}

}  // namespace zbpp::coordinator
