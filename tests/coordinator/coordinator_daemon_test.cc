// The zbpp-coordinator binary itself, as a child process: its listening
// line, health, the flags reaching the core, bounded server threads, one
// line and exit 2 for each bad flag, a deleted database reported, and exit
// 0 on SIGTERM. CoordinatorServer in process is coordinator_server_test.cc's.

#include <signal.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/subprocess.h"
#include "testing/fake_pipeline.h"
#include "tests/coordinator/grpc_fake_worker.h"
#include "tests/coordinator/raw_call.h"
#include "tests/metrics/exposition.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

#ifndef ZBPP_COORDINATOR_BINARY
#error "ZBPP_COORDINATOR_BINARY: the zbpp-coordinator to run (tests/coordinator/CMakeLists.txt)"
#endif

namespace zbpp::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TestSpec;

// A call context for the daemon, which runs without a token.
std::unique_ptr<grpc::ClientContext> Context() { return testing::CallContext("", ""); }

/// A zbpp-coordinator process on 127.0.0.1:0 with an in-memory store.
struct Daemon {
  pid_t pid = -1;
  /// Its first line on stdout ("" when none came within 30 s).
  std::string line;
  /// The gRPC address from that line ("" when none).
  std::string address;
};

/// Starts the daemon with `flags` after the required ones; stderr is the
/// test's.
Daemon StartDaemon(const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"zbpp-coordinator", "--listen",
                                    "127.0.0.1:0", "--metrics-listen",
                                    "127.0.0.1:0", "--db", ":memory:"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  Daemon daemon;
  int out[2];
  if (pipe(out) != 0) return daemon;
  daemon.pid = fork();
  if (daemon.pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execv(ZBPP_COORDINATOR_BINARY, argv.data());
    _exit(127);
  }
  close(out[1]);
  // One line, read with a bounded wait.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (daemon.pid > 0 && daemon.line.find('\n') == std::string::npos &&
         absl::Now() < give_up) {
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(out[0], &fds);
    timeval tv{1, 0};
    if (select(out[0] + 1, &fds, nullptr, nullptr, &tv) <= 0) continue;
    char buffer[256];
    ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    daemon.line.append(buffer, n);
  }
  close(out[0]);
  const size_t grpc_at = daemon.line.find("grpc=");
  if (grpc_at != std::string::npos) {
    daemon.address = daemon.line.substr(
        grpc_at + 5, daemon.line.find(' ', grpc_at) - grpc_at - 5);
  }
  return daemon;
}

/// Sends SIGTERM unless `terminate` is false, then waits up to 20 s for the
/// process to exit: its exit code, or -1 (killed, or did not exit).
int WaitForExit(pid_t pid, bool terminate = true) {
  if (terminate) kill(pid, SIGTERM);
  int status = 0;
  pid_t done = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The daemon's own life: its listening line, health, a call, the worker
// flags reaching the core (what they do is CoordinatorServerTest's, in
// process), and exit 0 on SIGTERM.
TEST(DaemonTest, ServesHealthAndGetJobThenExitsOnSigterm) {
  const Daemon daemon =
      StartDaemon({"--max-workers", "1", "--lost-worker-retention-seconds", "30"});
  ASSERT_GT(daemon.pid, 0);
  const std::string& line = daemon.line;
  const std::string& address = daemon.address;
  ASSERT_THAT(line, HasSubstr("zbpp-coordinator listening grpc=127.0.0.1:"));
  EXPECT_THAT(line, HasSubstr(" metrics=127.0.0.1:"));

  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto jobs = zbpp::v1::JobService::NewStub(channel);
  zbpp::v1::GetJobRequest get;
  get.set_job_id("job-1");
  zbpp::v1::Job job;
  EXPECT_EQ(jobs->GetJob(Context().get(), get, &job).error_code(),
            grpc::StatusCode::NOT_FOUND);
  std::string health;
  const grpc::Status health_status = testing::HealthCheck(channel, &health);
  ASSERT_TRUE(health_status.ok()) << health_status.error_message();
  EXPECT_EQ(health, testing::kServing);

  auto workers = zbpp::v1::WorkerService::NewStub(channel);
  std::vector<grpc::Status> answers;
  for (int n = 1; n <= 2; ++n) {
    zbpp::v1::RegisterWorkerRequest request;
    zbpp::v1::WorkerDescription* d = request.mutable_worker();
    d->set_address(absl::StrCat("10.0.0.", n, ":7000"));
    d->set_host("node");
    d->set_device_kind(zbpp::v1::DEVICE_KIND_CPU);
    d->set_memory_bytes(1 << 30);
    zbpp::v1::RegisterWorkerResponse response;
    answers.push_back(workers->RegisterWorker(Context().get(), request, &response));
  }
  EXPECT_TRUE(answers[0].ok()) << answers[0].error_message();
  EXPECT_EQ(answers[1].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(answers[1].error_message(), HasSubstr("cap of 1"));
  workers.reset();
  jobs.reset();
  channel.reset();  // Closes the connection: SIGTERM need not wait for it.
  EXPECT_EQ(WaitForExit(daemon.pid), 0);
}

/// Threads of process `pid` (/proc/PID/status), or -1.
int ThreadsOf(pid_t pid) {
  std::FILE* f = std::fopen(absl::StrCat("/proc/", pid, "/status").c_str(), "r");
  if (f == nullptr) return -1;
  char line[256];
  int threads = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "Threads: %d", &threads) == 1) break;
  }
  std::fclose(f);
  return threads;
}

// Session streams opened and left silent (before any SessionOpen) each
// hold a server thread; --max-threads bounds them, the rest are refused, and
// the threads come back when the streams close.
TEST(DaemonTest, SilentSessionStreamsAreBoundedByMaxThreads) {
  constexpr int kMaxThreads = 16;
  constexpr int kStreams = 60;
  const Daemon daemon =
      StartDaemon({"--max-threads", absl::StrCat(kMaxThreads)});
  ASSERT_FALSE(daemon.address.empty()) << daemon.line;
  const int idle_threads = ThreadsOf(daemon.pid);
  ASSERT_GT(idle_threads, 0);
  auto channel =
      grpc::CreateChannel(daemon.address, grpc::InsecureChannelCredentials());
  auto workers = zbpp::v1::WorkerService::NewStub(channel);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<
      zbpp::v1::SessionRequest, zbpp::v1::SessionResponse>>>
      streams;
  for (int i = 0; i < kStreams; ++i) {
    contexts.push_back(Context());
    streams.push_back(workers->Session(contexts.back().get()));
  }
  absl::SleepFor(absl::Milliseconds(500));
  const int held_threads = ThreadsOf(daemon.pid);
  EXPECT_LE(held_threads - idle_threads, kMaxThreads) << "idle " << idle_threads;
  for (auto& context : contexts) context->TryCancel();
  for (auto& stream : streams) (void)stream->Finish();
  // Served again once the streams are gone.
  zbpp::v1::GetJobRequest get;
  get.set_job_id("job-1");
  zbpp::v1::Job job;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  for (int attempt = 0; attempt < 50 && code != grpc::StatusCode::NOT_FOUND;
       ++attempt) {
    code = zbpp::v1::JobService::NewStub(channel)
               ->GetJob(Context().get(), get, &job)
               .error_code();
    if (code != grpc::StatusCode::NOT_FOUND) {
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);
  streams.clear();
  contexts.clear();
  workers.reset();
  channel.reset();  // Closes the connection: SIGTERM need not wait for it.
  EXPECT_EQ(WaitForExit(daemon.pid), 0);
}

// Each bad value exits 2 with one line on stderr naming the flag and the
// value the user typed.
TEST(DaemonTest, BadWorkerBoundFlagsExitTwo) {
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{
           {"--max-workers", "0"},
           {"--max-workers", "many"},
           {"--lost-worker-retention-seconds", "-1"},
           {"--lost-worker-retention-seconds", "inf"},
           {"--store-drain-seconds", "-1"},
           {"--store-drain-seconds", "soon"},
           {"--max-watch-streams", "0"},
           {"--max-watch-streams-per-client", "x"},
           {"--max-active-jobs", "-3"},
           {"--retain-finished-jobs", "0"}}) {
    const ctltest::ProcessResult result = ctltest::RunProcess(
        {ZBPP_COORDINATOR_BINARY, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
         "--db", ":memory:", flags[0], flags[1]});
    EXPECT_EQ(result.exit_code, 2) << flags[0] << " " << flags[1];
    EXPECT_EQ(result.out, "") << flags[0] << " " << flags[1];
    EXPECT_THAT(result.err, AllOf(HasSubstr(flags[0]), HasSubstr("\"" + flags[1] + "\"")))
        << flags[0] << " " << flags[1];
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
}

// The database file deleted under a running daemon: the store probe finds
// it, health goes NOT_SERVING, zbpp_store_healthy drops to 0, a submit is
// refused with the reason, and SIGTERM still ends the process once the
// drain timeout (--store-drain-seconds 0.5; 10 s by default) gives the
// failing writes up.
TEST(DaemonTest, DeletedDatabaseIsReportedAndRefusesSubmits) {
  char dir_template[] = "/tmp/zbpp_deleted_db_testXXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string path = absl::StrCat(dir_template, "/state.db");
  const Daemon daemon = StartDaemon({"--db", path, "--store-drain-seconds", "0.5"});
  ASSERT_FALSE(daemon.address.empty()) << daemon.line;
  const size_t metrics_at = daemon.line.find("metrics=127.0.0.1:");
  ASSERT_NE(metrics_at, std::string::npos) << daemon.line;
  const int metrics_port = std::stoi(daemon.line.substr(metrics_at + 18));
  auto channel =
      grpc::CreateChannel(daemon.address, grpc::InsecureChannelCredentials());
  std::string health;
  ASSERT_TRUE(testing::HealthCheck(channel, &health).ok());
  ASSERT_EQ(health, testing::kServing);

  ASSERT_EQ(unlink(path.c_str()), 0);
  // The probe runs every half heartbeat interval (1 s); wait up to 30 s.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (health != testing::kNotServing && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
    ASSERT_TRUE(testing::HealthCheck(channel, &health).ok());
  }
  EXPECT_EQ(health, testing::kNotServing);
  // The process's own name (the Kubernetes probes') stays SERVING.
  ASSERT_TRUE(testing::HealthCheck(channel, &health, "zbpp.coordinator.process").ok());
  EXPECT_EQ(health, testing::kServing);
  absl::StatusOr<metrics::testing::HttpReply> scraped =
      metrics::testing::HttpGet(metrics_port, "/metrics");
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_EQ(
      metrics::testing::FindSample(scraped->body, "zbpp_store_healthy", {}).value_or(-1), 0.0);
  EXPECT_GE(metrics::testing::FindSample(scraped->body, "zbpp_store_failed_writes_total", {})
                .value_or(0),
            1.0);

  auto jobs = zbpp::v1::JobService::NewStub(channel);
  zbpp::v1::SubmitJobRequest submit;
  *submit.mutable_spec() = TestSpec(2);
  zbpp::v1::Job job;
  const grpc::Status refused = jobs->SubmitJob(Context().get(), submit, &job);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(refused.error_message(), HasSubstr("storing job job-1: "));
  EXPECT_THAT(refused.error_message(), HasSubstr(path + " was deleted"));
  jobs.reset();
  channel.reset();  // Closes the connection: SIGTERM need not wait for it.
  const absl::Time terminated = absl::Now();
  EXPECT_EQ(WaitForExit(daemon.pid), 0);
  EXPECT_LT(absl::Now() - terminated, absl::Seconds(8))
      << "the failing writes were retried for the default 10 s, not 0.5 s";
}

}  // namespace
}  // namespace zbpp::coordinator
