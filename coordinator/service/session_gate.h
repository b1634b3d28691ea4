#ifndef ZBPP_COORDINATOR_SERVICE_SESSION_GATE_H_
#define ZBPP_COORDINATOR_SERVICE_SESSION_GATE_H_

#include <cstdint>
#include <functional>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace zbpp::coordinator {

/// The WorkerService.Session streams that have not yet sent their first
/// message (SessionOpen). Session is a synchronous stream: until that
/// message comes, nothing says who is calling (the worker's credential
/// rides it), yet the stream holds a server thread. Streams that never sent
/// it once held a thread each until gRPC's thread cap refused every unary
/// call, a running job's reports included. The gate bounds them apart from
/// the workers' open Sessions: at most `max_unopened` at once (more are
/// refused at once), each cancelled `open_timeout` after it began.
///
/// Thread-safe.
class SessionGate {
 public:
  struct Options {
    /// Source of time; not owned. Tests pass a FakeClock.
    Clock* clock = RealClock();
    /// How long a stream may wait for its first message; > 0.
    absl::Duration open_timeout = absl::Seconds(10);
    /// Streams waiting for their first message at once; >= 1.
    int max_unopened = 64;
  };

  /// InvalidArgument naming the option for a null clock, a timeout <= 0 or
  /// max_unopened < 1.
  static absl::StatusOr<std::unique_ptr<SessionGate>> Create(Options options);

  /// A new stream, before its first message: its ticket. `cancel` ends the
  /// stream's call (ServerContext::TryCancel); CancelExpired calls it under
  /// the gate's lock, so it must not call back into the gate, and it is
  /// never called after Opened(ticket) returned. ResourceExhausted naming
  /// the cap when max_unopened streams wait already (nothing kept).
  absl::StatusOr<uint64_t> Admit(std::function<void()> cancel) ABSL_LOCKS_EXCLUDED(mu_);

  /// The stream of `ticket` got its first message or ended: it no longer
  /// counts and is never cancelled by the gate. Unknown tickets are ignored.
  void Opened(uint64_t ticket) ABSL_LOCKS_EXCLUDED(mu_);

  /// Cancels every stream admitted open_timeout or longer ago that has not
  /// opened, and forgets it; returns how many. Call periodically (the
  /// daemon's ticker).
  int CancelExpired() ABSL_LOCKS_EXCLUDED(mu_);

  /// Streams waiting for their first message now.
  int unopened() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit SessionGate(Options options) : options_(options) {}

  struct Waiting {
    absl::Time admitted;
    std::function<void()> cancel;
  };

  const Options options_;
  mutable absl::Mutex mu_;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Waiting> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_SESSION_GATE_H_
