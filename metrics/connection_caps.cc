#include "metrics/connection_caps.h"

#include <utility>

namespace zbpp::metrics {

ConnectionCaps::ConnectionCaps(int max_connections, int max_per_client)
    : max_connections_(max_connections), max_per_client_(max_per_client) {}

std::optional<uint64_t> ConnectionCaps::Open(uint64_t id, std::string client) {
  absl::MutexLock lock(&mu_);
  // The per-address cap first: a client past it pays with its own idle
  // connections, never another client's.
  const auto held = per_client_.find(client);
  const bool client_full = held != per_client_.end() && held->second >= max_per_client_;
  const bool all_full = static_cast<int>(counted_.size()) >= max_connections_;
  std::optional<uint64_t> close;
  if (client_full || all_full) {
    close = id;
    for (auto it = counted_.begin(); it != counted_.end(); ++it) {
      if (it->second.in_request || (client_full && it->second.client != client)) continue;
      close = it->first;
      Uncount(it);
      break;
    }
    if (*close == id) return close;
  }
  ++per_client_[client];
  counted_.emplace(id, Connection{std::move(client), false});
  return close;
}

void ConnectionCaps::BeginRequest(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (auto it = counted_.find(id); it != counted_.end()) it->second.in_request = true;
}

void ConnectionCaps::EndRequest(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (auto it = counted_.find(id); it != counted_.end()) it->second.in_request = false;
}

void ConnectionCaps::Close(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (auto it = counted_.find(id); it != counted_.end()) Uncount(it);
}

int ConnectionCaps::open() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(counted_.size());
}

void ConnectionCaps::Uncount(std::map<uint64_t, Connection>::iterator it) {
  auto client = per_client_.find(it->second.client);
  if (--client->second == 0) per_client_.erase(client);
  counted_.erase(it);
}

}  // namespace zbpp::metrics
