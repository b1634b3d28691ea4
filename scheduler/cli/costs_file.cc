#include "scheduler/cli/costs_file.h"

#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "scheduler/cli/flags.h"
#include "yaml-cpp/yaml.h"

namespace zbpp::sched::cli {
namespace {

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// The finite number >= 0 in `node`, at `field` (for errors).
absl::StatusOr<double> NonNegative(const YAML::Node& node,
                                   const std::string& field) {
  double value = 0;
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  if (!node.IsScalar() || !absl::SimpleAtod(text, &value) ||
      !std::isfinite(value) || value < 0) {
    return Invalid(field, absl::StrCat("must be a number >= 0, got ",
                                       node.IsScalar() ? text : "a non-number"));
  }
  return value;
}

// One entry of `stages` or `virtual_stages`.
absl::StatusOr<VirtualStageCost> ParseEntry(const YAML::Node& node,
                                     const std::string& field,
                                     bool* has_reduce) {
  if (!node.IsMap()) {
    return Invalid(field,
                   "must be a mapping of t_f, t_b, t_w, m_b, m_w (t_bw, reduce, transient optional)");
  }
  VirtualStageCost cost;
  const std::pair<const char*, double*> kFields[] = {
      {"t_f", &cost.f_seconds}, {"t_b", &cost.b_seconds},
      {"t_w", &cost.w_seconds}, {"m_b", &cost.m_b_bytes},
      {"m_w", &cost.m_w_bytes}, {"reduce", &cost.reduce_seconds},
      {"t_bw", &cost.bw_seconds}, {"transient", &cost.transient_bytes}};
  for (const auto& entry : node) {
    const std::string key = entry.first.as<std::string>("");
    bool known = false;
    for (const auto& [name, value] : kFields) known = known || key == name;
    if (!known) {
      return Invalid(field, absl::StrCat("unknown key \"", key,
                                         "\"; expected t_f, t_b, t_w, m_b, "
                                         "m_w, t_bw, reduce, transient"));
    }
  }
  for (const auto& [name, value] : kFields) {
    const std::string at = absl::StrCat(field, ".", name);
    const YAML::Node child = node[name];
    if (!child) {
      // Optional: no reduction (d = 1); T_BW not measured (T_B + T_W); no
      // working memory beyond M_B and M_W.
      if (std::string(name) == "reduce" || std::string(name) == "t_bw" ||
          std::string(name) == "transient") {
        *value = 0;
        continue;
      }
      return Invalid(at, "missing");
    }
    absl::StatusOr<double> parsed = NonNegative(child, at);
    if (!parsed.ok()) return parsed.status();
    *value = *parsed;
    if (std::string(name) == "reduce") *has_reduce = true;
  }
  if (cost.m_w_bytes > cost.m_b_bytes) {
    return Invalid(absl::StrCat(field, ".m_w"),
                   absl::StrCat("must not exceed m_b (", cost.m_b_bytes,
                                "), got ", cost.m_w_bytes));
  }
  return cost;
}

absl::StatusOr<CostFile> ParseRoot(const YAML::Node& root) {
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        "must be a mapping with stages or virtual_stages");
  }
  const std::set<std::string> known = {"stages", "virtual_stages", "comm",
                                       "memory_limit_bytes"};
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>("");
    if (!known.count(key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown key \"", key,
          "\"; expected stages or virtual_stages, comm, memory_limit_bytes"));
    }
  }
  CostFile out;
  const YAML::Node stages = root["stages"];
  const YAML::Node virtual_stages = root["virtual_stages"];
  if (stages && virtual_stages) {
    return absl::InvalidArgumentError(
        "give stages or virtual_stages, not both");
  }
  if (!stages && !virtual_stages) {
    return absl::InvalidArgumentError(
        "stages: missing (or virtual_stages: one entry per virtual stage)");
  }
  out.per_virtual_stage = static_cast<bool>(virtual_stages);
  const std::string list_name = out.per_virtual_stage ? "virtual_stages" : "stages";
  const YAML::Node list = out.per_virtual_stage ? virtual_stages : stages;
  if (!list.IsSequence() || list.size() == 0) {
    return Invalid(list_name, "must be a non-empty list of entries");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    absl::StatusOr<VirtualStageCost> cost = ParseEntry(
        list[i], absl::StrCat(list_name, "[", i, "]"), &out.has_reduce);
    if (!cost.ok()) return cost.status();
    out.entries.push_back(*cost);
  }
  if (const YAML::Node comm = root["comm"]) {
    absl::StatusOr<double> seconds = NonNegative(comm, "comm");
    if (!seconds.ok()) return seconds.status();
    out.comm_seconds = *seconds;
  }
  if (const YAML::Node limits = root["memory_limit_bytes"]) {
    if (!limits.IsSequence() || limits.size() == 0) {
      return Invalid("memory_limit_bytes",
                     "must be a non-empty list, one limit per stage");
    }
    for (size_t w = 0; w < limits.size(); ++w) {
      const std::string at = absl::StrCat("memory_limit_bytes[", w, "]");
      absl::StatusOr<double> bytes = NonNegative(limits[w], at);
      if (!bytes.ok()) return bytes.status();
      if (*bytes == 0) return Invalid(at, "must be > 0, got 0");
      out.memory_limit_bytes.push_back(*bytes);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<CostFile> ParseCostFile(std::string_view text) {
  // JSON is YAML: one reader for both.
  try {
    return ParseRoot(YAML::Load(std::string(text)));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("not JSON or YAML (line ", e.mark.line + 1, ", column ",
                     e.mark.column + 1, "): ", e.msg));
  }
}

absl::StatusOr<CostFile> ReadCostFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFlagFile("costs", path);
  if (!text.ok()) return text.status();
  absl::StatusOr<CostFile> costs = ParseCostFile(*text);
  if (!costs.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--costs \"", path, "\": ", costs.status().message()));
  }
  return costs;
}

absl::StatusOr<Problem> CostProblem(const CostFile& costs, int stages,
                                    int chunks, int microbatches,
                                    const std::vector<int>& stage_of) {
  const int n = stages * chunks;
  const int want = costs.per_virtual_stage ? n : stages;
  if (static_cast<int>(costs.entries.size()) != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--costs: ", costs.per_virtual_stage ? "virtual_stages" : "stages",
        " has ", costs.entries.size(), " entries, the schedule needs ", want,
        " (p=", stages, ", v=", chunks, ")"));
  }
  if (!costs.memory_limit_bytes.empty() &&
      static_cast<int>(costs.memory_limit_bytes.size()) != stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--costs: memory_limit_bytes has ", costs.memory_limit_bytes.size(),
        " entries, the schedule has ", stages, " stages"));
  }
  Problem problem;
  problem.stages = stages;
  problem.chunks = chunks;
  problem.microbatches = microbatches;
  problem.comm_seconds = costs.comm_seconds;
  problem.memory_limit_bytes = costs.memory_limit_bytes;
  for (int s = 0; s < n; ++s) {
    if (costs.per_virtual_stage) {
      problem.virtual_stages.push_back(costs.entries[s]);
      continue;
    }
    // A stage's costs split evenly over the chunks it holds.
    VirtualStageCost cost = costs.entries[stage_of[s]];
    for (double* value : {&cost.f_seconds, &cost.b_seconds, &cost.w_seconds,
                          &cost.bw_seconds, &cost.m_b_bytes, &cost.m_w_bytes,
                          &cost.reduce_seconds, &cost.transient_bytes}) {
      *value /= chunks;
    }
    problem.virtual_stages.push_back(cost);
  }
  return problem;
}

std::string CostFileYaml(const Problem& problem) {
  auto number = [](double x) { return absl::StrFormat("%.17g", x); };
  std::string text = absl::StrCat(
      "# zbpp cost model: p=", problem.stages, " v=", problem.chunks, " m=",
      problem.microbatches, " (zbpp-sched --stages ", problem.stages,
      " --costs FILE)\nvirtual_stages:\n");
  for (const VirtualStageCost& c : problem.virtual_stages) {
    absl::StrAppend(&text, "  - {t_f: ", number(c.f_seconds),
                    ", t_b: ", number(c.b_seconds),
                    ", t_w: ", number(c.w_seconds),
                    ", m_b: ", number(c.m_b_bytes),
                    ", m_w: ", number(c.m_w_bytes));
    if (c.bw_seconds != 0) absl::StrAppend(&text, ", t_bw: ", number(c.bw_seconds));
    if (c.reduce_seconds != 0) {
      absl::StrAppend(&text, ", reduce: ", number(c.reduce_seconds));
    }
    if (c.transient_bytes != 0) {
      absl::StrAppend(&text, ", transient: ", number(c.transient_bytes));
    }
    absl::StrAppend(&text, "}\n");
  }
  absl::StrAppend(&text, "comm: ", number(problem.comm_seconds), "\n");
  if (!problem.memory_limit_bytes.empty()) {
    absl::StrAppend(&text, "memory_limit_bytes: [",
                    absl::StrJoin(problem.memory_limit_bytes, ", ",
                                  [&](std::string* out, double bytes) {
                                    out->append(number(bytes));
                                  }),
                    "]\n");
  }
  return text;
}

}  // namespace zbpp::sched::cli
