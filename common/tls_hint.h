#ifndef ZBPP_COMMON_TLS_HINT_H_
#define ZBPP_COMMON_TLS_HINT_H_

#include <string>

#include "absl/time/time.h"

namespace zbpp {

/// The likely cause of a client's failure to reach the coordinator at
/// `address` when it is a TLS mismatch, as a clause to append to the
/// client's "cannot reach" error ("; ..."), or "" when nothing points at
/// TLS. gRPC's own words for these say little: a plaintext client against
/// a TLS coordinator gets "Socket closed", and a worker's wait for the
/// connection gets no message at all.
///
/// `tls`: whether the client dialed TLS (--tls-ca given). `grpc_error`: the
/// failed call's message ("" when there is none). A certificate that does
/// not verify, or a TLS client answered in plaintext, is named from the
/// message. Otherwise, unless the message already says the connection was
/// refused or the name did not resolve, one TCP connection is opened to
/// `address` ("HOST:PORT", "[V6]:PORT", or with gRPC's "dns:///", "ipv4:"
/// or "ipv6:" prefix; other forms are not probed), waiting at most
/// `probe_timeout`: a server that accepts TCP but not the client's gRPC
/// most likely speaks the other protocol (TLS against plaintext, or the
/// reverse), and the clause says which flag to add or drop.
///
/// Blocking (at most `probe_timeout`); thread-safe.
std::string TlsMismatchHint(const std::string& address, bool tls, const std::string& grpc_error,
                            absl::Duration probe_timeout = absl::Seconds(1));

}  // namespace zbpp

#endif  // ZBPP_COMMON_TLS_HINT_H_
