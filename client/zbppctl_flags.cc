#include "client/zbppctl_flags.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/utf8.h"

namespace zbpp::ctl {
namespace {

constexpr char kUsage[] =
    R"(usage: zbppctl [--coordinator ADDR] [--token-file F] [--timeout SECONDS] COMMAND

Commands:
  submit FILE       submit the YAML job spec in FILE; prints the new job's id
  list              list jobs, newest first
  status JOB        show one job [--format table|json]
  watch JOB         follow a job until it ends (exit 0 SUCCEEDED, 3 FAILED,
                    4 CANCELLED)
  cancel JOB        cancel a job
  schedule JOB      show the schedule version that ran a job's last step (the
                    latest before any step), version N, or the version in
                    force at step S (the latest published from S or before)
                    [--format table|svg|chrome-trace|measured-trace]
                    [--schedule-version N | --step S]
                    (measured-trace: the last step as the workers ran it)
  report JOB        what a job achieved: losses, tokens/s, bubble rate
                    measured vs predicted per stage [--format table|json]
  costs JOB         the cost model of the job's current schedule version (the
                    measured one after a re-solve), of version N or of the
                    version in force at step S [--schedule-version N | --step S],
                    as a cost file for
                    zbpp-sched --costs (YAML, per virtual stage)
  workers           list registered workers
  export JOB        write the job's last checkpoint as a Hugging Face model
                    directory (model.safetensors, config.json, tokenizer.json)
                    --out DIR [--format safetensors] [--force]; runs
                    scripts/export ($ZBPP_EXPORT_SCRIPT). A non-empty DIR is
                    refused unless --force (which replaces those three files
                    and removes a tokenizer.json the new export lacks)

Flags:
  --coordinator ADDR   coordinator gRPC address (default $ZBPP_COORDINATOR,
                       else 127.0.0.1:50051)
  --token-file F       send the bearer token in F (authorization metadata)
  --timeout SECONDS    deadline of each call and of watch's connect (default 10)
  --tls-ca F           TLS: trust the coordinator certificate signed by the CA in F
  --tls-cert F --tls-key F
                       TLS client certificate and key (mutual TLS)

Exit codes: 0 done, 1 error (one line on stderr), 2 usage error.
)";

struct CommandInfo {
  Command command;
  bool takes_argument;
  std::vector<std::string> formats;  // First is the default; empty: none.
  bool takes_schedule_version = false;
};

const std::map<std::string, CommandInfo>& Commands() {
  static const auto* const commands = new std::map<std::string, CommandInfo>{
      {"submit", {Command::kSubmit, true, {}}},
      {"list", {Command::kList, false, {}}},
      {"status", {Command::kStatus, true, {"table", "json"}}},
      {"watch", {Command::kWatch, true, {}}},
      {"cancel", {Command::kCancel, true, {}}},
      {"schedule",
       {Command::kSchedule, true, {"table", "svg", "chrome-trace", "measured-trace"}, true}},
      {"report", {Command::kReport, true, {"table", "json"}}},
      {"costs", {Command::kCosts, true, {}, true}},
      {"workers", {Command::kWorkers, false, {}}},
      {"export", {Command::kExport, true, {"safetensors"}}},
  };
  return *commands;
}

absl::Status UsageError(const std::string& message) {
  return absl::InvalidArgumentError(
      absl::StrCat(message, " (zbppctl --help for usage)"));
}

// Splits flags from positional words; a flag's value is the next word
// unless written `--flag=value`.
struct SplitArgs {
  std::map<std::string, std::string> flags;
  std::vector<std::string> words;
  bool help = false;
};

absl::StatusOr<SplitArgs> Split(const std::vector<std::string>& args) {
  static const std::set<std::string> kKnown = {
      "coordinator", "token-file", "timeout", "format", "tls-ca", "tls-cert", "tls-key",
      "schedule-version", "step", "out", "force"};
  // Flags that take no value.
  static const std::set<std::string> kSwitches = {"force"};
  SplitArgs split;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      split.help = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      split.words.push_back(arg);
      continue;
    }
    std::string name = arg.substr(arg.rfind("--", 0) == 0 ? 2 : 1);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (!kKnown.count(name)) return UsageError("unknown flag " + arg);
    if (split.flags.count(name)) return UsageError("repeated flag --" + name);
    if (kSwitches.count(name)) {
      if (value) return UsageError("--" + name + " takes no value");
      value = "";
    } else if (!value) {
      if (i + 1 >= args.size())
        return UsageError("flag --" + name + " needs a value");
      value = args[++i];
    }
    split.flags[name] = *value;
  }
  return split;
}

}  // namespace

const char* CommandName(Command command) {
  for (const auto& [name, info] : Commands()) {
    if (info.command == command) return name.c_str();
  }
  return "help";
}

const char* UsageText() { return kUsage; }

absl::StatusOr<CtlOptions> ParseCommandLine(
    const std::vector<std::string>& args,
    const std::string& default_coordinator) {
  absl::StatusOr<SplitArgs> split = Split(args);
  if (!split.ok()) return split.status();
  CtlOptions options;
  if (!default_coordinator.empty()) options.coordinator = default_coordinator;
  std::vector<std::string>& words = split->words;
  if (split->help || (!words.empty() && words[0] == "help")) return options;
  if (words.empty()) return UsageError("missing command");

  const auto it = Commands().find(words[0]);
  if (it == Commands().end()) {
    return UsageError("unknown command \"" + words[0] + "\"");
  }
  const CommandInfo& info = it->second;
  options.command = info.command;
  const size_t expected_words = info.takes_argument ? 2 : 1;
  if (words.size() < expected_words) {
    return UsageError(
        absl::StrCat(words[0], " needs ",
                     info.command == Command::kSubmit ? "a FILE" : "a JOB"));
  }
  if (words.size() > expected_words) {
    return UsageError(absl::StrCat("unexpected argument \"",
                                   words[expected_words], "\" for ", words[0]));
  }
  if (info.takes_argument) {
    // JOB travels in a protobuf `string` field, which must be UTF-8.
    if (info.command != Command::kSubmit) {
      if (absl::Status utf8 = CheckUtf8("JOB", words[1]); !utf8.ok()) {
        return UsageError(std::string(utf8.message()));
      }
    }
    options.argument = words[1];
  }

  auto& flags = split->flags;
  if (auto f = flags.find("coordinator"); f != flags.end()) {
    if (f->second.empty()) return UsageError("--coordinator must not be empty");
    options.coordinator = f->second;
  }
  if (auto f = flags.find("token-file"); f != flags.end()) {
    if (f->second.empty()) return UsageError("--token-file must not be empty");
    options.token_file = f->second;
  }
  for (auto [flag, target] :
       {std::pair{"tls-ca", &options.tls.ca}, std::pair{"tls-cert", &options.tls.cert},
        std::pair{"tls-key", &options.tls.key}}) {
    if (auto f = flags.find(flag); f != flags.end()) {
      if (f->second.empty()) return UsageError(absl::StrCat("--", flag, " must not be empty"));
      *target = f->second;
    }
  }
  if (auto f = flags.find("timeout"); f != flags.end()) {
    double seconds = 0;
    if (!absl::SimpleAtod(f->second, &seconds) || !std::isfinite(seconds) ||
        seconds <= 0) {
      return UsageError("--timeout must be a number of seconds > 0, got \"" +
                        f->second + "\"");
    }
    options.timeout_seconds = seconds;
  }
  if (auto f = flags.find("format"); f != flags.end()) {
    bool known = false;
    for (const std::string& format : info.formats) known |= format == f->second;
    if (!known) {
      if (info.formats.empty())
        return UsageError(words[0] + " takes no --format");
      return UsageError(absl::StrCat(
          "--format for ", words[0], " must be one of ",
          absl::StrJoin(info.formats, ", "), ", got \"", f->second, "\""));
    }
    options.format = f->second;
  }
  if (auto f = flags.find("schedule-version"); f != flags.end()) {
    if (!info.takes_schedule_version) {
      return UsageError(words[0] + " takes no --schedule-version");
    }
    if (options.format == "measured-trace") {
      return UsageError(
          "--format measured-trace takes no --schedule-version: the last step is drawn "
          "with the version it ran");
    }
    int64_t version = 0;
    if (!absl::SimpleAtoi(f->second, &version) || version < 1) {
      return UsageError("--schedule-version must be a version number >= 1, got \"" +
                        f->second + "\"");
    }
    options.schedule_version = version;
  }
  if (auto f = flags.find("step"); f != flags.end()) {
    if (!info.takes_schedule_version) return UsageError(words[0] + " takes no --step");
    if (options.format == "measured-trace") {
      return UsageError(
          "--format measured-trace takes no --step: the last step is drawn with the version "
          "it ran");
    }
    if (options.schedule_version > 0) {
      return UsageError("--step and --schedule-version both pick a version: give one");
    }
    int64_t step = 0;
    if (!absl::SimpleAtoi(f->second, &step) || step < 0) {
      return UsageError("--step must be a step number >= 0, got \"" + f->second + "\"");
    }
    options.step = step;
  }
  if (info.command == Command::kExport) {
    if (!flags.count("format")) options.format = "safetensors";
    auto f = flags.find("out");
    if (f == flags.end() || f->second.empty()) return UsageError("export needs --out DIR");
    options.out_dir = f->second;
    options.force = flags.count("force") > 0;
  } else if (flags.count("out")) {
    return UsageError(words[0] + " takes no --out");
  } else if (flags.count("force")) {
    return UsageError(words[0] + " takes no --force");
  }
  return options;
}

}  // namespace zbpp::ctl
