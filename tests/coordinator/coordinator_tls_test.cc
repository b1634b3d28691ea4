// The zbpp-coordinator binary with --tls-cert/--tls-key [--tls-client-ca]
// (docs/control-plane.md, "The control plane"), end to end: a CA, a server certificate
// for 127.0.0.1/localhost and a client certificate (and a second CA with a
// client certificate of its own) are made at test time with the openssl
// CLI; the daemon runs on 127.0.0.1:0 and real gRPC clients call it with
// and without TLS and client certificates, reading the refusals it counts
// from its /metrics.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/subprocess.h"
#include "tests/coordinator/raw_call.h"
#include "tests/metrics/exposition.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::zbpp::ctltest::BackgroundProcess;
using ::zbpp::ctltest::ProcessResult;
using ::zbpp::ctltest::RunningCoordinator;
using ::zbpp::ctltest::RunProcess;
using ::zbpp::ctltest::StartCoordinator;

constexpr char kOpenssl[] = "/usr/bin/openssl";

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

// Makes a CA and its server and client leaves under a directory named after
// `name`.
void MakePki(const std::string& name, Pki* pki) {
  pki->dir = absl::StrCat(::testing::TempDir(), "/coordinator_tls_", getpid(),
                          "_", name);
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
  static void SetUpTestSuite() {
    MakePki("main", &pki_);
    MakePki("other", &other_pki_);
  }

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
    const std::string& metrics = started->metrics_address;
    metrics_port_ = std::stoi(metrics.substr(metrics.rfind(':') + 1));
  }

  std::vector<std::string> ServerTlsFlags() const {
    return {"--tls-cert", pki_.server_cert, "--tls-key", pki_.server_key};
  }

  // ServerTlsFlags() with --tls-client-ca: mutual TLS.
  std::vector<std::string> MutualTlsFlags() const {
    std::vector<std::string> flags = ServerTlsFlags();
    flags.insert(flags.end(), {"--tls-client-ca", pki_.ca_cert});
    return flags;
  }

  // Credentials trusting the test CA, presenting the client certificate of
  // `client` (pki_ or other_pki_) or none (null).
  static std::shared_ptr<grpc::ChannelCredentials> Tls(const Pki* client) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFileToString(pki_.ca_cert).value_or("");
    if (client != nullptr) {
      ssl.pem_private_key = ReadFileToString(client->client_key).value_or("");
      ssl.pem_cert_chain = ReadFileToString(client->client_cert).value_or("");
    }
    return grpc::SslCredentials(ssl);
  }

  // A client context with a 20 s deadline, and "authorization: Bearer
  // `token`" unless `token` is empty.
  static std::unique_ptr<grpc::ClientContext> Context(
      const std::string& token = "") {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
    return context;
  }

  // JobService/ListJobs on a new channel with `credentials`.
  grpc::Status ListJobs(
      const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    auto stub = zbpp::v1::JobService::NewStub(
        grpc::CreateChannel(address_, credentials));
    zbpp::v1::ListJobsResponse response;
    return stub->ListJobs(Context().get(), {}, &response);
  }

  // WorkerService/RegisterWorker of a CPU worker on a new channel with
  // `credentials`.
  grpc::Status RegisterWorker(
      const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    auto stub = zbpp::v1::WorkerService::NewStub(
        grpc::CreateChannel(address_, credentials));
    zbpp::v1::RegisterWorkerRequest request;
    request.mutable_worker()->set_address("127.0.0.1:9000");
    request.mutable_worker()->set_host("localhost");
    request.mutable_worker()->set_device_kind(zbpp::v1::DEVICE_KIND_CPU);
    request.mutable_worker()->set_memory_bytes(int64_t{1} << 30);
    zbpp::v1::RegisterWorkerResponse response;
    return stub->RegisterWorker(Context().get(), request, &response);
  }

  // zbpp_rpc_refusals_total{service=`service`,reason=`reason`} from the
  // daemon's /metrics; -1 when the series is missing.
  double Refusals(const std::string& service, const std::string& reason) {
    absl::StatusOr<metrics::testing::HttpReply> scraped =
        metrics::testing::HttpGet(metrics_port_, "/metrics");
    EXPECT_TRUE(scraped.ok()) << scraped.status();
    if (!scraped.ok()) return -1;
    return metrics::testing::FindSample(
               scraped->body, "zbpp_rpc_refusals_total",
               {{"service", service}, {"reason", reason}})
        .value_or(-1);
  }

  // grpc.health.v1.Health/Check of the server on a new channel with
  // `credentials`; `serving` is set when the reply is SERVING.
  grpc::Status HealthCheck(
      const std::shared_ptr<grpc::ChannelCredentials>& credentials,
      bool* serving) {
    std::string bytes;
    const grpc::Status status =
        testing::HealthCheck(grpc::CreateChannel(address_, credentials), &bytes);
    *serving = bytes == testing::kServing;
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
  static Pki other_pki_;  // Another CA, which the daemon does not trust.
  std::unique_ptr<BackgroundProcess> coordinator_;
  std::string address_;
  int metrics_port_ = 0;
};

Pki CoordinatorTlsTest::pki_;
Pki CoordinatorTlsTest::other_pki_;

TEST_F(CoordinatorTlsTest, TlsClientTrustingTheCaIsServed) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(ServerTlsFlags()));
  const grpc::Status listed = ListJobs(Tls(/*client=*/nullptr));
  EXPECT_TRUE(listed.ok()) << listed.error_code() << " "
                           << listed.error_message();
  bool serving = false;
  const grpc::Status health = HealthCheck(Tls(nullptr), &serving);
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

// With --tls-client-ca every call, on every service, needs a client
// certificate that the CA signed. A client without one connects and is
// refused per call (UNAUTHENTICATED, counted by service); one whose
// certificate another CA signed fails the handshake (UNAVAILABLE).
TEST_F(CoordinatorTlsTest, ClientCaRequiresAClientCertificate) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(MutualTlsFlags()));
  constexpr char kWorkers[] = "zbpp.v1.WorkerService";
  constexpr char kJobs[] = "zbpp.v1.JobService";
  constexpr char kMissing[] = "missing_client_certificate";
  EXPECT_EQ(Refusals(kWorkers, kMissing), 0);
  EXPECT_EQ(Refusals(kJobs, kMissing), 0);

  const grpc::Status refused = RegisterWorker(Tls(/*client=*/nullptr));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << refused.error_message();
  EXPECT_EQ(refused.error_message(), "client certificate required");
  EXPECT_EQ(Refusals(kWorkers, kMissing), 1);
  EXPECT_EQ(Refusals(kWorkers, "missing_token"), 0);
  EXPECT_EQ(Refusals(kJobs, kMissing), 0);

  const grpc::Status registered = RegisterWorker(Tls(&pki_));
  EXPECT_TRUE(registered.ok()) << registered.error_code() << " "
                               << registered.error_message();
  EXPECT_EQ(Refusals(kWorkers, kMissing), 1);

  const grpc::Status foreign = RegisterWorker(Tls(&other_pki_));
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::UNAVAILABLE)
      << foreign.error_message();
  EXPECT_EQ(Refusals(kWorkers, kMissing), 1);

  EXPECT_EQ(ListJobs(Tls(nullptr)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Refusals(kJobs, kMissing), 1);
  const grpc::Status with = ListJobs(Tls(&pki_));
  EXPECT_TRUE(with.ok()) << with.error_code() << " " << with.error_message();

  // Health and reflection are behind the same check, counted as "other".
  bool serving = true;
  EXPECT_EQ(HealthCheck(Tls(nullptr), &serving).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(serving);
  EXPECT_EQ(Refusals("other", kMissing), 1);
  const grpc::Status health = HealthCheck(Tls(&pki_), &serving);
  EXPECT_TRUE(health.ok()) << health.error_message();
  EXPECT_TRUE(serving);

  EXPECT_EQ(ListJobs(grpc::InsecureChannelCredentials()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Refusals(kWorkers, kMissing), 1);
  EXPECT_EQ(Refusals(kJobs, kMissing), 1);
}

// With TLS and a token, SubmitJob without the token is refused
// even with a client certificate, and without a certificate before the
// token is looked at; each refusal is counted once, under its reason.
TEST_F(CoordinatorTlsTest, SubmitJobNeedsTheTokenAndTheCertificate) {
  // A strong token: the coordinator refuses weak ones (common/call_auth.h).
  const std::string token = "tok-5f0c9e7a1b3d4c6e8f2a0b1c3d5e7f90";
  const std::string token_file = pki_.dir + "/token";
  WriteFile(token_file, token + "\n");
  std::vector<std::string> flags = MutualTlsFlags();
  flags.insert(flags.end(), {"--token-file", token_file});
  ASSERT_NO_FATAL_FAILURE(StartDaemon(flags));
  auto jobs = zbpp::v1::JobService::NewStub(
      grpc::CreateChannel(address_, Tls(&pki_)));
  zbpp::v1::Job job;
  const grpc::Status no_token = jobs->SubmitJob(Context().get(), {}, &job);
  EXPECT_EQ(no_token.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Refusals("zbpp.v1.JobService", "missing_token"), 1);
  EXPECT_EQ(jobs->SubmitJob(Context("nope").get(), {}, &job).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Refusals("zbpp.v1.JobService", "wrong_token"), 1);

  auto anonymous = zbpp::v1::JobService::NewStub(
      grpc::CreateChannel(address_, Tls(nullptr)));
  const grpc::Status no_cert =
      anonymous->SubmitJob(Context(token).get(), {}, &job);
  EXPECT_EQ(no_cert.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(no_cert.error_message(), "client certificate required");
  EXPECT_EQ(Refusals("zbpp.v1.JobService", "missing_client_certificate"), 1);
  EXPECT_EQ(Refusals("zbpp.v1.JobService", "missing_token"), 1);

  // Both: past authentication, the empty request is the caller's mistake.
  EXPECT_EQ(jobs->SubmitJob(Context(token).get(), {}, &job).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Refusals("zbpp.v1.JobService", "missing_token"), 1);
  EXPECT_EQ(Refusals("zbpp.v1.JobService", "wrong_token"), 1);
}

// The clients' side: zbppctl and zbpp-worker dial TLS with --tls-ca (and a
// client certificate with --tls-cert/--tls-key).
TEST_F(CoordinatorTlsTest, ZbppctlAndWorkerDialTls) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(MutualTlsFlags()));
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

  std::vector<std::string> worker = {ZBPP_WORKER_BINARY, "--coordinator", address_,
                                     "--data-root", pki_.dir};
  worker.insert(worker.end(), client_tls.begin(), client_tls.end());
  std::unique_ptr<BackgroundProcess> registered = BackgroundProcess::Start(worker);
  ASSERT_NE(registered, nullptr);
  std::optional<std::string> line = registered->ReadLine(absl::Seconds(30));
  ASSERT_TRUE(line.has_value());
  EXPECT_THAT(*line, HasSubstr("registered worker_id=worker-"));

  // Without its client certificate the coordinator refuses the worker.
  const ProcessResult refused = RunProcess(
      {ZBPP_WORKER_BINARY, "--coordinator", address_, "--data-root", pki_.dir, "--tls-ca",
       pki_.ca_cert},
      {}, absl::Seconds(30));
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr(address_));
  EXPECT_THAT(refused.err, HasSubstr("client certificate required"));

  const ProcessResult unreadable = RunProcess(
      {ZBPP_WORKER_BINARY, "--coordinator", address_, "--data-root", pki_.dir, "--tls-ca",
       pki_.dir + "/missing.crt"});
  EXPECT_EQ(unreadable.exit_code, 1);
  EXPECT_THAT(unreadable.err, HasSubstr("--tls-ca: cannot read"));
}

// A TLS mismatch is named as the likely cause, not only "cannot reach":
// zbppctl and zbpp-worker in plaintext against a TLS coordinator (gRPC says
// "Socket closed", or nothing), zbppctl trusting another CA, and zbppctl
// with --tls-ca against a plaintext coordinator.
TEST_F(CoordinatorTlsTest, MismatchesNameTlsAsTheLikelyCause) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(ServerTlsFlags()));
  const ProcessResult plaintext =
      RunProcess({ZBPPCTL_BINARY, "--coordinator", address_, "--timeout", "5", "list"});
  EXPECT_EQ(plaintext.exit_code, 1);
  EXPECT_THAT(plaintext.err, HasSubstr("cannot reach coordinator at " + address_));
  EXPECT_THAT(plaintext.err, HasSubstr("most likely serves TLS (pass --tls-ca"));

  const ProcessResult other_ca = RunProcess({ZBPPCTL_BINARY, "--coordinator", address_,
                                             "--timeout", "5", "--tls-ca", other_pki_.ca_cert,
                                             "list"});
  EXPECT_EQ(other_ca.exit_code, 1);
  EXPECT_THAT(other_ca.err, HasSubstr(address_));
  EXPECT_THAT(other_ca.err, ::testing::ContainsRegex("another CA|does not verify against"));

  const ProcessResult worker =
      RunProcess({ZBPP_WORKER_BINARY, "--coordinator", address_, "--data-root", pki_.dir}, {},
                 absl::Seconds(40));
  EXPECT_EQ(worker.exit_code, 1) << worker.err;
  EXPECT_THAT(worker.err, HasSubstr("cannot reach the coordinator at " + address_));
  EXPECT_THAT(worker.err, HasSubstr("most likely serves TLS (pass --tls-ca"));

  ASSERT_NO_FATAL_FAILURE(StartDaemon({}));
  const ProcessResult tls_to_plaintext = RunProcess({ZBPPCTL_BINARY, "--coordinator", address_,
                                                     "--timeout", "5", "--tls-ca", pki_.ca_cert,
                                                     "list"});
  EXPECT_EQ(tls_to_plaintext.exit_code, 1);
  EXPECT_THAT(tls_to_plaintext.err, HasSubstr("drop --tls-ca"));
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

// Contents are checked before anything is served (exit 1, as for a file
// that cannot be read), one line naming the flag and the file: gRPC would
// take any bytes and fail later without naming either.
TEST_F(CoordinatorTlsTest, FilesThatAreNotPemAreNamed) {
  const std::string garbage = pki_.dir + "/garbage.pem";
  WriteFile(garbage, "not a certificate\n");
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases =
      {{"--tls-cert: " + garbage + " holds no PEM certificate",
        {"--tls-cert", garbage, "--tls-key", pki_.server_key}},
       {"--tls-key: " + garbage + " holds no unencrypted PEM private key",
        {"--tls-cert", pki_.server_cert, "--tls-key", garbage}},
       {"--tls-client-ca: " + garbage + " holds no PEM certificate",
        {"--tls-cert", pki_.server_cert, "--tls-key", pki_.server_key,
         "--tls-client-ca", garbage}}};
  for (const auto& [message, flags] : cases) {
    SCOPED_TRACE(message);
    const ProcessResult result = RunCoordinator(flags);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
        << result.err;
    EXPECT_THAT(result.err, HasSubstr(message));
    EXPECT_EQ(result.out, "");
  }
}

TEST_F(CoordinatorTlsTest, KeyOfAnotherCertificateNamesBothFlags) {
  const ProcessResult result = RunCoordinator(
      {"--tls-cert", pki_.server_cert, "--tls-key", pki_.client_key});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
      << result.err;
  EXPECT_THAT(result.err,
              HasSubstr("--tls-key " + pki_.client_key + " is not the key of " +
                        "--tls-cert " + pki_.server_cert));
}

// zbppctl and zbpp-worker name a bad --tls-ca (gRPC alone reports "empty
// address list") and a key that does not match --tls-cert.
TEST_F(CoordinatorTlsTest, ClientsNameBadTlsFiles) {
  const std::string garbage = pki_.dir + "/client-garbage.pem";
  WriteFile(garbage, "-----BEGIN CERTIFICATE-----\nnot base64\n");
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases =
      {{"--tls-ca: " + garbage + " holds no PEM certificate",
        {"--tls-ca", garbage}},
       {"--tls-key " + pki_.server_key + " is not the key of --tls-cert " +
            pki_.client_cert,
        {"--tls-ca", pki_.ca_cert, "--tls-cert", pki_.client_cert,
         "--tls-key", pki_.server_key}}};
  for (const auto& [message, tls] : cases) {
    SCOPED_TRACE(message);
    std::vector<std::string> ctl = {ZBPPCTL_BINARY, "--coordinator",
                                    "127.0.0.1:1"};
    ctl.insert(ctl.end(), tls.begin(), tls.end());
    ctl.push_back("list");
    const ProcessResult listed = RunProcess(ctl);
    EXPECT_EQ(listed.exit_code, 1);
    EXPECT_THAT(listed.err, StartsWith("zbppctl: " + message));
    EXPECT_EQ(std::count(listed.err.begin(), listed.err.end(), '\n'), 1)
        << listed.err;

    std::vector<std::string> worker = {ZBPP_WORKER_BINARY, "--coordinator",
                                       "127.0.0.1:1", "--data-root", pki_.dir};
    worker.insert(worker.end(), tls.begin(), tls.end());
    const ProcessResult refused = RunProcess(worker, {}, absl::Seconds(30));
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_THAT(refused.err, HasSubstr(message));
  }
}

}  // namespace
}  // namespace zbpp::coordinator
