// The zbpp-coordinator binary with --tls-cert/--tls-key [--tls-client-ca]
// (issue 3 §2 Security), end to end: a CA, a server certificate for
// 127.0.0.1/localhost and a client certificate are made at test time with
// the openssl CLI; the daemon runs on 127.0.0.1:0 and real gRPC clients
// call it with and without TLS and client certificates.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/subprocess.h"
#include "zbpp/v1/job.grpc.pb.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using ::zbpp::ctltest::BackgroundProcess;
using ::zbpp::ctltest::ProcessResult;
using ::zbpp::ctltest::RunningCoordinator;
using ::zbpp::ctltest::RunProcess;
using ::zbpp::ctltest::StartCoordinator;

constexpr char kOpenssl[] = "/usr/bin/openssl";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

// Runs openssl with `args`; the test fails with its stderr when it does.
void Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), kOpenssl);
  const ProcessResult result = RunProcess(args);
  ASSERT_EQ(result.exit_code, 0)
      << absl::StrJoin(args, " ") << "\n" << result.err;
}

// Files of one test PKI, all PEM, under one directory.
struct Pki {
  std::string dir;
  std::string ca_cert;
  std::string server_cert;
  std::string server_key;
  std::string client_cert;
  std::string client_key;
};

// Makes a leaf key and certificate `name`.{key,crt} signed by the CA, with
// the extensions in `extensions` (an openssl extfile's lines).
void IssueLeaf(const Pki& pki, const std::string& name,
               const std::string& extensions) {
  const std::string base = absl::StrCat(pki.dir, "/", name);
  WriteFile(base + ".ext", extensions);
  Openssl({"req", "-new", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", base + ".key",
           "-out", base + ".csr", "-subj", "/CN=zbpp-test-" + name});
  Openssl({"x509", "-req", "-in", base + ".csr", "-CA", pki.ca_cert, "-CAkey",
           pki.dir + "/ca.key", "-set_serial", name == "server" ? "2" : "3",
           "-days", "2", "-out", base + ".crt", "-extfile", base + ".ext"});
}

void MakePki(Pki* pki) {
  pki->dir = absl::StrCat(::testing::TempDir(), "/coordinator_tls_", getpid());
  ASSERT_TRUE(mkdir(pki->dir.c_str(), 0700) == 0 || errno == EEXIST)
      << pki->dir;
  pki->ca_cert = pki->dir + "/ca.crt";
  pki->server_cert = pki->dir + "/server.crt";
  pki->server_key = pki->dir + "/server.key";
  pki->client_cert = pki->dir + "/client.crt";
  pki->client_key = pki->dir + "/client.key";
  Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
           pki->dir + "/ca.key", "-out", pki->ca_cert, "-days", "2", "-subj",
           "/CN=zbpp-test-ca"});
  IssueLeaf(*pki, "server",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            "extendedKeyUsage=serverAuth\n");
  IssueLeaf(*pki, "client", "extendedKeyUsage=clientAuth\n");
}

class CoordinatorTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { MakePki(&pki_); }

  // Starts the daemon with `flags` added and reads its "listening" line
  // (bounded wait; no fixed sleeps).
  void StartDaemon(const std::vector<std::string>& flags) {
    std::vector<std::string> all = {"--db", ":memory:"};
    all.insert(all.end(), flags.begin(), flags.end());
    coordinator_.reset();
    absl::StatusOr<RunningCoordinator> started =
        StartCoordinator(ZBPP_COORDINATOR_BINARY, all);
    ASSERT_TRUE(started.ok()) << started.status();
    coordinator_ = std::move(started->process);
    address_ = started->grpc_address;
  }

  std::vector<std::string> ServerTlsFlags() const {
    return {"--tls-cert", pki_.server_cert, "--tls-key", pki_.server_key};
  }

  // Credentials trusting the test CA, with the client certificate or not.
  static std::shared_ptr<grpc::ChannelCredentials> Tls(bool client_cert) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(pki_.ca_cert);
    if (client_cert) {
      ssl.pem_private_key = ReadFile(pki_.client_key);
      ssl.pem_cert_chain = ReadFile(pki_.client_cert);
    }
    return grpc::SslCredentials(ssl);
  }

  // JobService/ListJobs on a new channel with `credentials`.
  grpc::Status ListJobs(
      const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    auto stub = zbpp::v1::JobService::NewStub(
        grpc::CreateChannel(address_, credentials));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    zbpp::v1::ListJobsRequest request;
    zbpp::v1::ListJobsResponse response;
    return stub->ListJobs(&context, request, &response);
  }

  // grpc.health.v1.Health/Check with an empty service name, by hand (the
  // request is an empty message); `serving` is set when the reply is
  // SERVING (field 1 = 1).
  grpc::Status HealthCheck(
      const std::shared_ptr<grpc::ChannelCredentials>& credentials,
      bool* serving) {
    grpc::GenericStub generic(grpc::CreateChannel(address_, credentials));
    grpc::Slice empty("", 0);
    grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    absl::Notification answered;
    grpc::Status status;
    generic.UnaryCall(&context, "/grpc.health.v1.Health/Check",
                      grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) {
                        status = s;
                        answered.Notify();
                      });
    answered.WaitForNotification();  // The deadline above bounds it.
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (status.ok() && response.Dump(&slices).ok()) {
      for (const auto& slice : slices) {
        bytes.append(reinterpret_cast<const char*>(slice.begin()),
                     slice.size());
      }
    }
    *serving = bytes == std::string("\x08\x01", 2);
    return status;
  }

  // Runs the daemon to completion (it must fail before serving).
  ProcessResult RunCoordinator(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {
        ZBPP_COORDINATOR_BINARY, "--listen", "127.0.0.1:0", "--metrics-listen",
        "127.0.0.1:0",           "--db",     ":memory:"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunProcess(argv, {}, absl::Seconds(30));
  }

  static Pki pki_;
  std::unique_ptr<BackgroundProcess> coordinator_;
  std::string address_;
};

Pki CoordinatorTlsTest::pki_;

TEST_F(CoordinatorTlsTest, TlsClientTrustingTheCaIsServed) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(ServerTlsFlags()));
  const grpc::Status listed = ListJobs(Tls(/*client_cert=*/false));
  EXPECT_TRUE(listed.ok()) << listed.error_code() << " "
                           << listed.error_message();
  bool serving = false;
  const grpc::Status health = HealthCheck(Tls(false), &serving);
  EXPECT_TRUE(health.ok()) << health.error_message();
  EXPECT_TRUE(serving);
}

TEST_F(CoordinatorTlsTest, PlaintextClientIsRefused) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(ServerTlsFlags()));
  const grpc::Status listed = ListJobs(grpc::InsecureChannelCredentials());
  EXPECT_EQ(listed.error_code(), grpc::StatusCode::UNAVAILABLE)
      << listed.error_message();
  bool serving = true;
  EXPECT_EQ(HealthCheck(grpc::InsecureChannelCredentials(), &serving)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(serving);
}

TEST_F(CoordinatorTlsTest, ClientCaRequiresAClientCertificate) {
  std::vector<std::string> flags = ServerTlsFlags();
  flags.insert(flags.end(), {"--tls-client-ca", pki_.ca_cert});
  ASSERT_NO_FATAL_FAILURE(StartDaemon(flags));

  const grpc::Status without = ListJobs(Tls(/*client_cert=*/false));
  EXPECT_EQ(without.error_code(), grpc::StatusCode::UNAVAILABLE)
      << without.error_message();
  bool serving = true;
  EXPECT_FALSE(HealthCheck(Tls(false), &serving).ok());
  EXPECT_FALSE(serving);

  const grpc::Status with = ListJobs(Tls(/*client_cert=*/true));
  EXPECT_TRUE(with.ok()) << with.error_code() << " " << with.error_message();
  const grpc::Status health = HealthCheck(Tls(true), &serving);
  EXPECT_TRUE(health.ok()) << health.error_message();
  EXPECT_TRUE(serving);

  EXPECT_EQ(ListJobs(grpc::InsecureChannelCredentials()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

// The clients' side: zbppctl and zbpp-worker dial TLS with --tls-ca (and a
// client certificate with --tls-cert/--tls-key).
TEST_F(CoordinatorTlsTest, ZbppctlAndWorkerDialTls) {
  std::vector<std::string> flags = ServerTlsFlags();
  flags.insert(flags.end(), {"--tls-client-ca", pki_.ca_cert});
  ASSERT_NO_FATAL_FAILURE(StartDaemon(flags));
  const std::vector<std::string> client_tls = {"--tls-ca", pki_.ca_cert, "--tls-cert",
                                               pki_.client_cert, "--tls-key", pki_.client_key};

  std::vector<std::string> ctl = {ZBPPCTL_BINARY, "--coordinator", address_, "--timeout", "5"};
  ctl.insert(ctl.end(), client_tls.begin(), client_tls.end());
  ctl.push_back("list");
  const ProcessResult listed = RunProcess(ctl);
  EXPECT_EQ(listed.exit_code, 0) << listed.err;

  const ProcessResult plaintext = RunProcess(
      {ZBPPCTL_BINARY, "--coordinator", address_, "--timeout", "5", "list"});
  EXPECT_EQ(plaintext.exit_code, 1);
  EXPECT_THAT(plaintext.err, HasSubstr(address_));

  const ProcessResult half = RunProcess(
      {ZBPPCTL_BINARY, "--coordinator", address_, "--tls-cert", pki_.client_cert, "list"});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("--tls-ca"));

  std::vector<std::string> worker = {ZBPP_WORKER_BINARY, "--coordinator", address_};
  worker.insert(worker.end(), client_tls.begin(), client_tls.end());
  std::unique_ptr<BackgroundProcess> registered = BackgroundProcess::Start(worker);
  ASSERT_NE(registered, nullptr);
  std::optional<std::string> line = registered->ReadLine(absl::Seconds(30));
  ASSERT_TRUE(line.has_value());
  EXPECT_THAT(*line, HasSubstr("registered worker_id=worker-"));

  // Without its client certificate the coordinator refuses the worker.
  const ProcessResult refused = RunProcess(
      {ZBPP_WORKER_BINARY, "--coordinator", address_, "--tls-ca", pki_.ca_cert},
      {}, absl::Seconds(30));
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr(address_));

  const ProcessResult unreadable = RunProcess(
      {ZBPP_WORKER_BINARY, "--coordinator", address_, "--tls-ca", pki_.dir + "/missing.crt"});
  EXPECT_EQ(unreadable.exit_code, 1);
  EXPECT_THAT(unreadable.err, HasSubstr("--tls-ca: cannot read"));
}

// Usage errors exit 2 with one line on stderr naming the flags.
TEST_F(CoordinatorTlsTest, KeyWithoutCertIsAUsageError) {
  const ProcessResult result = RunCoordinator({"--tls-key", pki_.server_key});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
      << result.err;
  EXPECT_THAT(result.err, HasSubstr("--tls-cert and --tls-key go together"));
  EXPECT_EQ(result.out, "");
}

TEST_F(CoordinatorTlsTest, CertWithoutKeyIsAUsageError) {
  const ProcessResult result =
      RunCoordinator({"--tls-cert", pki_.server_cert});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
      << result.err;
  EXPECT_THAT(result.err, HasSubstr("--tls-cert and --tls-key go together"));
}

TEST_F(CoordinatorTlsTest, ClientCaWithoutServerCertIsAUsageError) {
  const ProcessResult result =
      RunCoordinator({"--tls-client-ca", pki_.ca_cert});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
      << result.err;
  EXPECT_THAT(result.err, HasSubstr("--tls-client-ca needs --tls-cert"));
}

// Files that cannot be read are runtime errors (exit 1, as for --db and
// --token-file), reported in one line naming the flag and the file, before
// anything is served.
TEST_F(CoordinatorTlsTest, UnreadableFilesAreNamed) {
  const std::string missing = pki_.dir + "/no-such.pem";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases =
      {{"--tls-cert",
        {"--tls-cert", missing, "--tls-key", pki_.server_key}},
       {"--tls-key", {"--tls-cert", pki_.server_cert, "--tls-key", missing}},
       {"--tls-client-ca",
        {"--tls-cert", pki_.server_cert, "--tls-key", pki_.server_key,
         "--tls-client-ca", missing}}};
  for (const auto& [flag, flags] : cases) {
    SCOPED_TRACE(flag);
    const ProcessResult result = RunCoordinator(flags);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
        << result.err;
    EXPECT_THAT(result.err, HasSubstr(flag + ":"));
    EXPECT_THAT(result.err, HasSubstr(missing));
    EXPECT_EQ(result.out, "");
  }
}

// gRPC reads the PEM only when the server starts: a file that is not a
// certificate is reported as a failed listen that names the TLS files.
TEST_F(CoordinatorTlsTest, CertificateThatIsNotPemIsNamed) {
  const std::string garbage = pki_.dir + "/garbage.pem";
  WriteFile(garbage, "not a certificate\n");
  const ProcessResult result =
      RunCoordinator({"--tls-cert", garbage, "--tls-key", pki_.server_key});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("--tls-cert " + garbage));
  EXPECT_EQ(result.out, "");
}

}  // namespace
}  // namespace zbpp::coordinator
