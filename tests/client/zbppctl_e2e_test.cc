// zbppctl against the real zbpp-coordinator (ZBPP_COORDINATOR_BINARY) on
// port 0 with an in-memory store: submit an example spec, see it in status
// and list, cancel it, watch it end, and have a bad spec refused naming the
// field.

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/subprocess.h"

namespace zbpp::ctltest {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

class ZbppctlEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon({}); }

  // Starts the daemon with `flags` added and reads its "listening" line.
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

  ProcessResult Zbppctl(std::vector<std::string> args) {
    args.insert(args.begin(), {ZBPPCTL_BINARY, "--coordinator", address_});
    return RunProcess(args);
  }

  nlohmann::json StatusJson(const std::string& id) {
    const ProcessResult result = Zbppctl({"status", id, "--format", "json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return nlohmann::json::parse(result.out, nullptr,
                                 /*allow_exceptions=*/false);
  }

  std::unique_ptr<BackgroundProcess> coordinator_;
  std::string address_;
};

TEST_F(ZbppctlEndToEnd, SubmitStatusListCancelWatch) {
  ProcessResult result =
      Zbppctl({"submit", ZBPP_EXAMPLES_DIR "/zb-2p-4-stages.yaml"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  ASSERT_THAT(result.out, MatchesRegex("[A-Za-z0-9_-]+\n"));
  const std::string id = result.out.substr(0, result.out.size() - 1);

  nlohmann::json json = StatusJson(id);
  EXPECT_EQ(json["id"], id);
  EXPECT_EQ(json["step"], 0);
  EXPECT_EQ(json["steps"], 500);
  EXPECT_THAT(json["state"].get<std::string>(),
              MatchesRegex("JOB_STATE_(PENDING|ASSIGNING)"));
  EXPECT_EQ(json["spec"]["pipeline"]["stages"], 4);
  EXPECT_TRUE(json.contains("stages"));
  EXPECT_TRUE(json.contains("schedule_version"));

  result = Zbppctl({"list"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr(id));

  result = Zbppctl({"cancel", id});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, id + " CANCELLED\n");
  EXPECT_EQ(StatusJson(id)["state"], "JOB_STATE_CANCELLED");

  // Watching a finished job: its snapshot, then the exit code of CANCELLED.
  result = Zbppctl({"watch", id});
  EXPECT_EQ(result.exit_code, 4) << result.err;
  EXPECT_THAT(result.out,
              StartsWith("snapshot job=" + id + " state=CANCELLED"));

  result = Zbppctl({"cancel", id});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("FAILED_PRECONDITION"));
}

TEST_F(ZbppctlEndToEnd, BadSpecIsRefusedNamingTheField) {
  std::string yaml =
      ReadFileToString(ZBPP_EXAMPLES_DIR "/zb-2p-4-stages.yaml").value_or("");
  yaml = std::regex_replace(yaml, std::regex("microbatches: 16"),
                            "microbatches: 0");
  const std::string path =
      ::testing::TempDir() + "bad_spec_" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << yaml;

  ProcessResult result = Zbppctl({"submit", path});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_THAT(result.err,
              StartsWith("zbppctl: submit " + path + ": INVALID_ARGUMENT: "));
  EXPECT_THAT(result.err, HasSubstr("pipeline.microbatches"));
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1);

  result = Zbppctl({"list"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.find('\n'), result.out.size() - 1) << "nothing stored";
}

TEST_F(ZbppctlEndToEnd, BearerTokenFromTheTokenFile) {
  const std::string token_path =
      ::testing::TempDir() + "token_" + std::to_string(getpid());
  std::ofstream(token_path) << "e2e-5f0c9e7a1b3d4c6e8f2a0b1c3d5e7f90\n";
  StartDaemon({"--token-file", token_path});
  const std::string spec = ZBPP_EXAMPLES_DIR "/zb-2p-4-stages.yaml";

  ProcessResult result = Zbppctl({"submit", spec});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("UNAUTHENTICATED"));
  result = Zbppctl({"--token-file", token_path, "submit", spec});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string id = result.out.substr(0, result.out.size() - 1);
  result = Zbppctl({"cancel", id});
  EXPECT_EQ(result.exit_code, 1);
  result = Zbppctl({"--token-file", token_path, "cancel", id});
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

TEST_F(ZbppctlEndToEnd, UnknownJobAndEmptyWorkers) {
  ProcessResult result = Zbppctl({"status", "no-such-job"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("NOT_FOUND"));
  result = Zbppctl({"workers"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, StartsWith("ID"));
}

}  // namespace
}  // namespace zbpp::ctltest
