#include "common/channel_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/read_file.h"

namespace zbpp {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* x509) const { X509_free(x509); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* pkey) const { EVP_PKEY_free(pkey); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Certificate = std::unique_ptr<X509, X509Free>;
using PrivateKey = std::unique_ptr<EVP_PKEY, PkeyFree>;

// Refuses every passphrase: without it OpenSSL would prompt on the
// terminal for an encrypted key, which a daemon cannot answer (and gRPC
// cannot use such a key either).
int NoPassphrase(char*, int, int, void*) { return -1; }

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The first certificate in `pem`, or null.
Certificate FirstCertificate(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  Certificate cert(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
  // A failed read leaves reasons on this thread's OpenSSL error queue, where
  // gRPC's own TLS code would later find them.
  ERR_clear_error();
  return cert;
}

PrivateKey FirstPrivateKey(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  PrivateKey key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  return key;
}

}  // namespace

absl::StatusOr<std::string> ReadPemFile(const std::string& flag,
                                        const std::string& path, PemKind kind) {
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  if (!contents.ok()) {
    return absl::NotFoundError(absl::StrCat(flag, ": ", contents.status().message()));
  }
  std::string pem = *std::move(contents);
  switch (kind) {
    case PemKind::kCertificate:
      if (FirstCertificate(pem) == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat(flag, ": ", path,
                         " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
      }
      break;
    case PemKind::kPrivateKey:
      if (FirstPrivateKey(pem) == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            flag, ": ", path,
            " holds no unencrypted PEM private key "
            "(-----BEGIN ... PRIVATE KEY-----)"));
      }
      break;
  }
  return pem;
}

absl::StatusOr<PemKeyCertPair> ReadKeyCertPair(const std::string& cert_flag,
                                               const std::string& cert_path,
                                               const std::string& key_flag,
                                               const std::string& key_path) {
  PemKeyCertPair pair;
  absl::StatusOr<std::string> cert =
      ReadPemFile(cert_flag, cert_path, PemKind::kCertificate);
  if (!cert.ok()) return cert.status();
  pair.cert = *std::move(cert);
  absl::StatusOr<std::string> key =
      ReadPemFile(key_flag, key_path, PemKind::kPrivateKey);
  if (!key.ok()) return key.status();
  pair.key = *std::move(key);
  const Certificate x509 = FirstCertificate(pair.cert);
  const PrivateKey pkey = FirstPrivateKey(pair.key);
  const bool match = X509_check_private_key(x509.get(), pkey.get()) == 1;
  ERR_clear_error();
  if (!match) {
    return absl::FailedPreconditionError(
        absl::StrCat(key_flag, " ", key_path, " is not the key of ", cert_flag,
                     " ", cert_path));
  }
  return pair;
}

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
  absl::StatusOr<std::string> ca =
      ReadPemFile("--tls-ca", files.ca, PemKind::kCertificate);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (!files.cert.empty()) {
    absl::StatusOr<PemKeyCertPair> pair =
        ReadKeyCertPair("--tls-cert", files.cert, "--tls-key", files.key);
    if (!pair.ok()) return pair.status();
    ssl.pem_cert_chain = std::move(pair->cert);
    ssl.pem_private_key = std::move(pair->key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace zbpp
