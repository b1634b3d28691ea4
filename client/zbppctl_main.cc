// zbppctl: the command-line client of the coordinator's JobService and
// WorkerService (docs/control-plane.md, "The control plane"). This file wires the pieces:
// parse the command line (zbppctl_flags.h), read the token, open the channel
// (zbppctl_client.h), run the command (zbppctl_commands.h). Exit codes are in
// zbppctl_commands.h; every error is one line on stderr.

#include <grpc/support/log.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/call_auth.h"
#include "common/channel_credentials.h"
#include "client/zbppctl_client.h"
#include "client/zbppctl_commands.h"
#include "client/zbppctl_flags.h"

namespace {

// gRPC's own log lines would break the "one line on stderr" contract; the
// status each call returns already says what went wrong.
void DropGrpcLog(gpr_log_func_args*) {}

}  // namespace

int main(int argc, char** argv) {
  using namespace zbpp::ctl;
  const char* env_coordinator = std::getenv("ZBPP_COORDINATOR");
  absl::StatusOr<CtlOptions> options =
      ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc),
                       env_coordinator == nullptr ? "" : env_coordinator);
  if (!options.ok()) {
    std::cerr << "zbppctl: " << options.status().message() << "\n";
    return kExitUsage;
  }
  if (options->command == Command::kHelp) {
    std::cout << UsageText();
    return kExitOk;
  }
  CoordinatorClient::Options client_options;
  client_options.address = options->coordinator;
  client_options.timeout = absl::Seconds(options->timeout_seconds);
  if (!options->token_file.empty()) {
    absl::StatusOr<std::string> token = zbpp::ReadTokenFile(options->token_file);
    if (!token.ok()) {
      std::cerr << "zbppctl: " << token.status().message() << "\n";
      return kExitError;
    }
    client_options.bearer_token = *token;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      zbpp::ClientCredentials(options->tls);
  if (!credentials.ok()) {
    std::cerr << "zbppctl: " << credentials.status().message() << "\n";
    return absl::IsInvalidArgument(credentials.status()) ? kExitUsage : kExitError;
  }
  client_options.credentials = *credentials;
  client_options.tls = !options->tls.ca.empty();
  gpr_set_log_function(DropGrpcLog);
  std::unique_ptr<CoordinatorClient> client =
      CoordinatorClient::Create(std::move(client_options));
  const CommandIo io{std::cout, std::cerr, isatty(STDOUT_FILENO) == 1,
                     absl::Now()};
  const int code = RunCommand(*options, *client, io);
  std::cout.flush();
  return code;
}
