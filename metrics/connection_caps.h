#ifndef ZBPP_METRICS_CONNECTION_CAPS_H_
#define ZBPP_METRICS_CONNECTION_CAPS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace zbpp::metrics {

/// The HTTP port's connection caps, in all and per client address, kept so
/// that connections doing nothing never lock anyone out: a new connection
/// past a cap is let in by closing the oldest *idle* connection that holds
/// the cap (of the same address for the per-address cap, of any address
/// for the total), idle meaning it is not inside a request (it has not sent
/// its request's header yet, or it is kept alive between requests). Only
/// when every connection holding the cap is inside a request is the new
/// one closed instead.
///
/// Refusing the newcomer, as a plain cap does, let one client holding
/// `max_per_client` idle connections (reopened as soon as the idle timeout
/// closes them) lock out every other client behind the same address (a
/// Prometheus on the same host, behind the same NAT); a scrape, which sends
/// its request as soon as it connects, is never the oldest idle connection.
///
/// Connections are named by the caller's `id`s, unique among open ones.
/// Thread-safe: one mutex; each call is O(open connections) at most.
class ConnectionCaps {
 public:
  /// `max_connections` >= 1 and 1 <= `max_per_client` <= max_connections
  /// (the caller checks them).
  ConnectionCaps(int max_connections, int max_per_client);

  /// Counts the new connection `id` from `client` (its address, any form
  /// that is equal for one host); ids must grow with arrival (the oldest
  /// connection is the one with the smallest id). Returns the id of a connection to close
  /// now, if one must be: the oldest idle one holding a full cap, or `id`
  /// itself when none of those is idle. A connection returned is no longer
  /// counted (it is closing); Close it when it is gone all the same.
  std::optional<uint64_t> Open(uint64_t id, std::string client) ABSL_LOCKS_EXCLUDED(mu_);

  /// `id` began a request: it is not idle until EndRequest.
  void BeginRequest(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  /// `id`'s request was answered (or abandoned): it is idle again.
  void EndRequest(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  /// `id` is closed; unknown ids are ignored.
  void Close(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  /// Connections counted now (open, and not returned by Open to close).
  int open() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Connection {
    std::string client;
    bool in_request = false;
  };

  // Stops counting `it` (it is closing).
  void Uncount(std::map<uint64_t, Connection>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_connections_;
  const int max_per_client_;
  mutable absl::Mutex mu_;
  // Counted connections by id, so in arrival order.
  std::map<uint64_t, Connection> counted_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> per_client_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zbpp::metrics

#endif  // ZBPP_METRICS_CONNECTION_CAPS_H_
