// zbpp-worker given bad input: each is one clear error line on stderr and
// an exit code (1: runtime, 2: usage), nothing on stdout, no cache written;
// a job whose text file is missing fails naming the path.

#include <algorithm>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/subprocess.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/e2e/cluster.h"
#include "zbpp/v1/job.grpc.pb.h"

namespace zbpp::worker::e2e {
namespace {

using ::zbpp::worker::testing::TestDirectory;

using ::testing::HasSubstr;
using ::testing::StartsWith;

/// The lines of `text` (no trailing empty one).
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

class WorkerBadInput : public ::testing::Test {
 protected:
  /// Runs zbpp-worker with `args` and a fresh --cache-dir appended, and the
  /// scratch directory as --data-root unless `args` name one.
  ctltest::ProcessResult RunWorker(std::vector<std::string> args,
                                   absl::Duration timeout = absl::Seconds(30)) {
    if (std::find(args.begin(), args.end(), "--data-root") == args.end()) {
      args.insert(args.end(), {"--data-root", scratch_.path()});
    }
    args.insert(args.begin(), ZBPP_WORKER_BINARY);
    args.insert(args.end(), {"--cache-dir", cache_dir_});
    return ctltest::RunProcess(args, {}, timeout);
  }

  /// The one error line: "zbpp-worker: ...", and nothing else written.
  void ExpectOneErrorLine(const ctltest::ProcessResult& result) {
    EXPECT_EQ(result.out, "");
    const std::vector<std::string> lines = Lines(result.err);
    ASSERT_EQ(lines.size(), 1u) << result.err;
    EXPECT_THAT(lines[0], StartsWith("zbpp-worker: "));
    EXPECT_FALSE(std::filesystem::exists(cache_dir_)) << "cache written";
  }

  TestDirectory scratch_;
  const std::string cache_dir_ = scratch_ / "cache";
};

// A gRPC server that does not speak WorkerService (here one in this
// process with only JobService's methods, all unimplemented). The message of an
// unreachable coordinator is SessionClientTest's
// (tests/worker/daemon/session_client_test.cc); it leaves through the same
// one line and exit code.
TEST_F(WorkerBadInput, ServerThatIsNoCoordinatorFailsRegistration) {
  v1::JobService::Service jobs_only;  // Every method UNIMPLEMENTED.
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&jobs_only);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const ctltest::ProcessResult result = RunWorker({"--coordinator", address});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  ExpectOneErrorLine(result);
  EXPECT_THAT(result.err,
              HasSubstr("registering with the coordinator at " + address));
  // The code says why: the server does not speak WorkerService.
  EXPECT_THAT(result.err, HasSubstr("UNIMPLEMENTED"));
  server->Shutdown();
}

struct UsageCase {
  std::string name;
  std::vector<std::string> args;
  std::string flag;  ///< What the error line must name.
};

void PrintTo(const UsageCase& c, std::ostream* os) { *os << c.name; }

class WorkerUsage : public WorkerBadInput,
                    public ::testing::WithParamInterface<UsageCase> {};

TEST_P(WorkerUsage, ExitsTwoNamingTheFlag) {
  const ctltest::ProcessResult result = RunWorker(GetParam().args);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.out, "");
  // One line: the error, then the usage in parentheses.
  const std::vector<std::string> lines = Lines(result.err);
  ASSERT_EQ(lines.size(), 1u) << result.err;
  EXPECT_THAT(lines[0], StartsWith("zbpp-worker: "));
  EXPECT_THAT(lines[0], HasSubstr(GetParam().flag));
  EXPECT_THAT(lines[0], HasSubstr("(usage: zbpp-worker "));
  EXPECT_FALSE(std::filesystem::exists(cache_dir_)) << "cache written";
}

INSTANTIATE_TEST_SUITE_P(
    Flags, WorkerUsage,
    ::testing::Values(
        UsageCase{"UnknownFlag",
                  {"--coordinator", "127.0.0.1:1", "--bogus", "1"},
                  "--bogus"},
        UsageCase{"MissingCoordinator", {}, "--coordinator"},
        UsageCase{"MisspelledDevice",
                  {"--coordinator", "127.0.0.1:1", "--device", "gpu0"},
                  "--device"},
        // Confinement is the default: a data root is required, absolute.
        UsageCase{"RelativeDataRoot",
                  {"--coordinator", "127.0.0.1:1", "--data-root", "data"},
                  "--data-root: must be an absolute path, got \"data\""},
        UsageCase{"ZeroThreads",
                  {"--coordinator", "127.0.0.1:1", "--threads", "0"},
                  "--threads"},
        // The TEST-ONLY shared-GPU setting: one ID per worker, on a GPU.
        UsageCase{"EmptyNcclTestHostId",
                  {"--coordinator", "127.0.0.1:1", "--nccl-shared-gpu-test-host-id="},
                  "--nccl-shared-gpu-test-host-id must not be empty"},
        UsageCase{"NcclTestHostIdOnTheCpu",
                  {"--coordinator", "127.0.0.1:1", "--nccl-shared-gpu-test-host-id", "w-0"},
                  "--nccl-shared-gpu-test-host-id needs --device cuda:N"},
        // The benchmarking mode: a positive scale, noise in [0, 1).
        UsageCase{"SyntheticComputeZeroScale",
                  {"--coordinator", "127.0.0.1:1", "--synthetic-compute", "0"},
                  "--synthetic-compute must be SCALE[:NOISE]"},
        UsageCase{"SyntheticComputeNoiseOfOne",
                  {"--coordinator", "127.0.0.1:1", "--synthetic-compute", "2:1"},
                  "got \"2:1\""},
        UsageCase{"SyntheticComputeNotANumber",
                  {"--coordinator", "127.0.0.1:1", "--synthetic-compute", "fast"},
                  "got \"fast\""}),
    [](const ::testing::TestParamInfo<UsageCase>& info) {
      return info.param.name;
    });

// Without --data-root the worker does not start: a job spec could otherwise
// name any file its user can read (a private key, /etc/shadow) and get it
// back through the trained weights. One line that says how to opt out.
TEST_F(WorkerBadInput, NoDataRootExitsTwoSayingHowToOptOut) {
  const ctltest::ProcessResult result = ctltest::RunProcess(
      {ZBPP_WORKER_BINARY, "--coordinator", "127.0.0.1:1", "--cache-dir", cache_dir_}, {},
      absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.out, "");
  const std::vector<std::string> lines = Lines(result.err);
  ASSERT_EQ(lines.size(), 1u) << result.err;
  EXPECT_THAT(lines[0], StartsWith("zbpp-worker: --data-root is required"));
  EXPECT_THAT(lines[0], HasSubstr("--data-root / for any file"));
  EXPECT_FALSE(std::filesystem::exists(cache_dir_)) << "cache written";
}

// --help: every flag, the test-only one marked as such, on stdout; exit 0
// without contacting anything.
TEST_F(WorkerBadInput, HelpListsEveryFlagAndMarksTheTestOnlyOne) {
  const ctltest::ProcessResult result = RunWorker({"--help"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  for (const char* flag : {"--coordinator", "--data-root", "--device", "--threads", "--listen",
                           "--cache-dir",
                           "--gloo-hostname", "--name", "--memory-bytes", "--comm-timeout",
                           "--tls-ca", "--token-file", "--slow-stage", "--inject-nan-step",
                           "--synthetic-compute"}) {
    EXPECT_THAT(result.out, HasSubstr(flag));
  }
  EXPECT_THAT(result.out, HasSubstr("--nccl-shared-gpu-test-host-id ID\n"
                                    "                            TEST-ONLY: "));
  EXPECT_FALSE(std::filesystem::exists(cache_dir_)) << "cache written";
}

// A GPU asked for where there is none: one line and exit 1 at start, before
// the worker registers anywhere.
TEST_F(WorkerBadInput, CudaDeviceWithoutAGpuExitsOneInOneLine) {
  if (std::filesystem::exists("/dev/nvidiactl")) GTEST_SKIP() << "this machine has an NVIDIA GPU";
  const ctltest::ProcessResult result =
      RunWorker({"--coordinator", "127.0.0.1:1", "--device", "cuda:0"});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(result.out, "");
  const std::vector<std::string> lines = Lines(result.err);
  ASSERT_EQ(lines.size(), 1u) << result.err;
  EXPECT_THAT(lines[0], StartsWith("zbpp-worker: --device cuda:0: no CUDA device here"));
}

TEST(WorkerJobInput, MissingTextFileFailsTheJobNamingThePath) {
  TestDirectory scratch;
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Start(scratch.path(), 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  v1::JobSpec spec = SmallBibleJob(5);
  const std::string missing = scratch / "no-such-corpus.txt";
  spec.mutable_dataset()->set_text_file(missing);

  absl::StatusOr<JobOutcome> outcome = (*cluster)->Run(spec);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(outcome->job.state_message(), HasSubstr(missing));
  EXPECT_FALSE(outcome->job.has_first_step()) << "no step may run";
  EXPECT_FALSE(std::filesystem::exists(missing));
}

}  // namespace
}  // namespace zbpp::worker::e2e
