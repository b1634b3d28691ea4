#include "worker/comm/latency_probe.h"

#include <chrono>
#include <memory>

#include <ATen/ops/zeros_like.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace zbpp::worker {
namespace {

/// One message to or from `peer` within what is left before `deadline`.
/// Both directions go through here so that a send and a receive fail alike.
absl::Status Exchange(Communicator& comm, bool send, const at::Tensor& tensor,
                      int peer, uint32_t tag, absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<PendingOp>> op =
      send ? comm.Send(tensor, peer, tag) : comm.Recv(tensor, peer, tag);
  if (!op.ok()) return op.status();
  return (*op)->Wait(deadline - absl::Now());
}

}  // namespace

absl::StatusOr<double> MeasureOneWayLatency(Communicator& comm, int peer,
                                            bool initiator, int rounds,
                                            absl::Duration timeout,
                                            const at::Tensor& message) {
  if (rounds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("latency probe to peer ", peer, ": rounds must be >= 1, got ",
                     rounds));
  }
  if (!message.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("latency probe to peer ", peer, ": the message is undefined"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  at::Tensor ping = at::zeros_like(message, at::MemoryFormat::Contiguous);
  at::Tensor pong = at::zeros_like(message, at::MemoryFormat::Contiguous);
  std::chrono::steady_clock::time_point start;
  // Round 0 is the warm-up: the first message on a connection may pay for
  // its set-up.
  for (int round = 0; round <= rounds; ++round) {
    if (round == 1) start = std::chrono::steady_clock::now();
    const int r = round % 1024;  // MakeTag's microbatch field.
    const uint32_t to_peer = MakeTag(0, MessageKind::kControl, peer, r);
    const uint32_t to_me = MakeTag(0, MessageKind::kControl, comm.rank(), r);
    absl::Status s =
        initiator ? Exchange(comm, true, ping, peer, to_peer, deadline)
                  : Exchange(comm, false, ping, peer, to_me, deadline);
    if (s.ok()) {
      s = initiator ? Exchange(comm, false, pong, peer, to_me, deadline)
                    : Exchange(comm, true, ping, peer, to_peer, deadline);
    }
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("latency probe round ", round,
                                                 ": ", s.message()));
    }
  }
  if (!initiator) return 0.0;
  const std::chrono::duration<double> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() / rounds / 2;
}

}  // namespace zbpp::worker
