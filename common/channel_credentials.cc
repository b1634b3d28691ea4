#include "common/channel_credentials.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace zbpp {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(flag, ": cannot read ", path, ": ", std::strerror(errno)));
  }
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsFiles& files) {
  if (files.ca.empty() && files.cert.empty() && files.key.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  if (files.ca.empty()) {
    return absl::InvalidArgumentError("--tls-cert/--tls-key need --tls-ca");
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadPem("--tls-ca", files.ca);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *ca;
  if (!files.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("--tls-cert", files.cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("--tls-key", files.key);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace zbpp
