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

/// What a TLS file given on the command line must hold.
enum class PemKind {
  kCertificate,  ///< One or more `-----BEGIN CERTIFICATE-----` blocks.
  kPrivateKey,   ///< An unencrypted private key (`-----BEGIN ... PRIVATE KEY-----`).
};

/// Reads the PEM file `path`, given as `flag` (e.g. "--tls-ca"), and checks
/// with OpenSSL that it holds `kind`; returns its contents. gRPC would
/// otherwise take any bytes and fail later without naming the file (a
/// channel's "empty address list", a server that does not listen).
///
/// Errors: NotFound "<flag>: cannot read <path>: <strerror>" when the file
/// cannot be opened; FailedPrecondition "<flag>: <path> holds no PEM
/// certificate" (or "... no unencrypted PEM private key") when its contents
/// are not one. Thread-safe.
absl::StatusOr<std::string> ReadPemFile(const std::string& flag,
                                        const std::string& path, PemKind kind);

/// A certificate chain and the private key of its first certificate, PEM.
struct PemKeyCertPair {
  std::string cert;
  std::string key;
};

/// Reads `cert_path` (flag `cert_flag`, PemKind::kCertificate) and
/// `key_path` (flag `key_flag`, PemKind::kPrivateKey) with ReadPemFile and
/// checks that the key belongs to the first certificate
/// (X509_check_private_key).
///
/// Errors: those of ReadPemFile; FailedPrecondition "<key_flag> <key_path>
/// is not the key of <cert_flag> <cert_path>" when they do not match.
/// Thread-safe.
absl::StatusOr<PemKeyCertPair> ReadKeyCertPair(const std::string& cert_flag,
                                               const std::string& cert_path,
                                               const std::string& key_flag,
                                               const std::string& key_path);

/// Channel credentials for `files`: insecure when all are empty, else TLS
/// trusting `ca` (and presenting `cert`/`key` when given). InvalidArgument
/// naming the flag when --tls-cert/--tls-key come without --tls-ca or
/// without each other; otherwise the errors of ReadPemFile and
/// ReadKeyCertPair, naming the flags and files. Reads the files;
/// thread-safe.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsFiles& files);

}  // namespace zbpp

#endif  // ZBPP_COMMON_CHANNEL_CREDENTIALS_H_
