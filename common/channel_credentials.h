#ifndef ZBPP_COMMON_CHANNEL_CREDENTIALS_H_
#define ZBPP_COMMON_CHANNEL_CREDENTIALS_H_

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>

#include "absl/status/statusor.h"

namespace zbpp {

/// Where a client's TLS material lies (PEM files); all empty means
/// plaintext. The flags of zbpp-worker and zbppctl: --tls-ca, --tls-cert,
/// --tls-key.
struct ClientTlsFiles {
  /// CA certificates that sign the coordinator's certificate; required for
  /// TLS.
  std::string ca;
  /// Client certificate chain and its key, for a coordinator started with
  /// --tls-client-ca (mutual TLS); both or neither.
  std::string cert;
  std::string key;
};

/// Channel credentials for `files`: insecure when all are empty, else TLS
/// trusting `ca` (and presenting `cert`/`key` when given). InvalidArgument
/// naming the flag when --tls-cert/--tls-key come without --tls-ca or
/// without each other; NotFound naming the flag and file when one cannot be
/// read. Reads the files; thread-safe.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsFiles& files);

}  // namespace zbpp

#endif  // ZBPP_COMMON_CHANNEL_CREDENTIALS_H_
