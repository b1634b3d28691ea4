#include "scheduler/cli/flags.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/read_file.h"

namespace zbpp::sched::cli {
namespace {

absl::Status RequireFlags(const FlagMap& flags,
                          const std::vector<std::string>& required,
                          const std::string& command) {
  for (const std::string& name : required) {
    if (!flags.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "missing required flag --", name, " for ", command));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsUsageError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kOutOfRange:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<FlagMap> ParseFlags(const std::vector<std::string>& args,
                                   const std::set<std::string>& allowed,
                                   const std::vector<std::string>& required,
                                   const std::string& command) {
  FlagMap flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg, "\" for ", command));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (!allowed.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag --", name, " for ", command, "; see --help"));
    }
    if (!value) {
      // A value that starts with "--" is taken for the next flag, so that a
      // forgotten value is reported instead of swallowing that flag.
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    if (!flags.emplace(name, *value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " is given more than once"));
    }
  }
  if (absl::Status st = RequireFlags(flags, required, command); !st.ok()) {
    return st;
  }
  return flags;
}

absl::StatusOr<int> IntFlag(const FlagMap& flags, const std::string& name,
                            int fallback) {
  auto it = flags.find(name);
  if (it == flags.end()) return fallback;
  int value = 0;
  if (!absl::SimpleAtoi(it->second, &value) || value < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " must be an integer >= 1, got \"", it->second, "\""));
  }
  return value;
}

absl::StatusOr<double> NumberFlag(const FlagMap& flags, const std::string& name,
                                  double fallback, bool (*ok)(double),
                                  const char* range) {
  auto it = flags.find(name);
  if (it == flags.end()) return fallback;
  double value = 0;
  // SimpleAtod accepts "inf" and "nan"; no cost or limit is meant to be one.
  if (!absl::SimpleAtod(it->second, &value) || !std::isfinite(value) ||
      !ok(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " must be a number ", range, ", got \"", it->second,
        "\""));
  }
  return value;
}

absl::StatusOr<std::string> ChoiceFlag(const FlagMap& flags,
                                       const std::string& name,
                                       const std::vector<std::string>& choices) {
  auto it = flags.find(name);
  if (it == flags.end()) return choices.front();
  if (std::find(choices.begin(), choices.end(), it->second) == choices.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be one of ", absl::StrJoin(choices, ", "),
                     "; got \"", it->second, "\""));
  }
  return it->second;
}

absl::StatusOr<std::string> ReadFlagFile(const std::string& flag,
                                         const std::string& path) {
  absl::StatusOr<std::string> text =
      ReadFileToString(path, absl::StrCat("--", flag, " \"", path, "\""));
  if (!text.ok()) return absl::NotFoundError(text.status().message());
  return text;
}

}  // namespace zbpp::sched::cli
