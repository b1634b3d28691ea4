// zbpp-sched: builds, simulates, draws and compares pipeline schedules from
// the command line. Thin shell over the scheduler library: parse flags,
// build a Problem, call Generate and Simulate, print. Exit codes: 0 done,
// 1 failure (unwritable output, unimplemented or broken generator),
// 2 usage error or a problem the generator refuses; errors are one line on
// stderr naming the flag or the schedule.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"
#include "scheduler/export_svg.h"
#include "scheduler/export_trace.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/schedule.h"
#include "scheduler/schedule_io.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] = R"(usage: zbpp-sched COMMAND [FLAGS]

Commands:
  simulate  build one schedule, simulate it, print its metrics or export it
  show      draw one schedule as a text grid, one line per worker
  compare   build and simulate every known schedule for one problem

Problem flags (costs are per pipeline stage, i.e. per worker; a worker that
holds v chunks pays 1/v of them per chunk):
  --schedule NAME               gpipe 1f1b 1f1b-interleaved zb-h1 zb-h2 zb-1p
                                zb-2p zb-auto zb-v v-half v-min
                                (simulate, show)
  --stages P                    pipeline stages (workers), >= 1
  --microbatches M              microbatches per step, >= 1
  --cost-f TF --cost-b TB --cost-w TW
                                seconds of F, B (input gradient) and W (weight
                                gradient) per stage; required by simulate,
                                1 by default for show and compare
  --cost-comm TC                seconds per point-to-point hop (default 0)
  --mem-limit K                 activation limit per worker in units of M_B
                                (default: the schedule's own)
  --weight-memory-fraction R    M_W / M_B in [0, 1] (default 0.5)
  --chunks V                    chunks per worker (default: the schedule's;
                                compare applies it where a schedule accepts it)

Output flags:
  --format FMT                  simulate: table (default), json, csv,
                                chrome-trace, svg; compare: table, json, csv
  --width N                     show: columns of the time axis (default: the
                                shortest pass is one labelled cell)
  --output FILE                 write there instead of stdout
  --help                        print this help

Exit codes: 0 done; 1 failure (unwritable output, a generator that is not
available or broke); 2 bad flags or a problem the schedule cannot serve.
)";

// ---------------------------------------------------------------------------
// Flags

using FlagMap = std::map<std::string, std::string>;

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

// Splits `--name value` and `--name=value` pairs; refuses flags outside
// `allowed`, repeated flags and positional arguments.
absl::StatusOr<FlagMap> ParseFlags(const std::vector<std::string>& args,
                                   const std::set<std::string>& allowed,
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
  return flags;
}

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

// A finite number accepted by `ok`; `range` words the rule for the error.
absl::StatusOr<double> NumberFlag(const FlagMap& flags, const std::string& name,
                                  double fallback, bool (*ok)(double),
                                  const char* range) {
  auto it = flags.find(name);
  if (it == flags.end()) return fallback;
  double value = 0;
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

// ---------------------------------------------------------------------------
// Problem

struct ProblemFlags {
  int stages = 1;
  int microbatches = 1;
  double cost_f = 1, cost_b = 1, cost_w = 1, cost_comm = 0;  // seconds
  std::optional<double> mem_limit_m_b;
  double weight_memory_fraction = 0.5;
  std::optional<int> chunks;
};

absl::StatusOr<ProblemFlags> ParseProblemFlags(const FlagMap& flags) {
  ProblemFlags out;
  auto non_negative = [](double x) { return x >= 0; };
  auto positive = [](double x) { return x > 0; };
  auto fraction = [](double x) { return x >= 0 && x <= 1; };
  for (auto [name, field] : {std::pair{"stages", &out.stages},
                             std::pair{"microbatches", &out.microbatches}}) {
    absl::StatusOr<int> value = IntFlag(flags, name, 1);
    if (!value.ok()) return value.status();
    *field = *value;
  }
  for (auto [name, field] : {std::pair{"cost-f", &out.cost_f},
                             std::pair{"cost-b", &out.cost_b},
                             std::pair{"cost-w", &out.cost_w},
                             std::pair{"cost-comm", &out.cost_comm}}) {
    absl::StatusOr<double> value =
        NumberFlag(flags, name, *field, non_negative, ">= 0");
    if (!value.ok()) return value.status();
    *field = *value;
  }
  absl::StatusOr<double> fraction_value =
      NumberFlag(flags, "weight-memory-fraction", 0.5, fraction, "in [0, 1]");
  if (!fraction_value.ok()) return fraction_value.status();
  out.weight_memory_fraction = *fraction_value;
  if (flags.count("mem-limit")) {
    absl::StatusOr<double> limit =
        NumberFlag(flags, "mem-limit", 0, positive, "> 0");
    if (!limit.ok()) return limit.status();
    out.mem_limit_m_b = *limit;
  }
  if (flags.count("chunks")) {
    absl::StatusOr<int> chunks = IntFlag(flags, "chunks", 1);
    if (!chunks.ok()) return chunks.status();
    out.chunks = *chunks;
  }
  return out;
}

// Everything one schedule run produced.
struct Outcome {
  ScheduleTraits traits;
  Problem problem;
  Schedule schedule;
  SimulationResult sim;
  std::optional<double> mem_limit_m_b;  // the limit in force; none = no limit
  double solve_seconds = 0;             // wall time of Generate
};

// Builds the problem `traits` needs from per-stage flags, generates and
// simulates. `strict_chunks`: --chunks that a fixed-chunk schedule cannot
// use is an error (simulate, show) rather than ignored (compare).
absl::StatusOr<Outcome> RunSchedule(const ScheduleTraits& traits,
                                    const ProblemFlags& flags,
                                    bool strict_chunks) {
  int chunks = traits.default_chunks;
  if (flags.chunks && *flags.chunks != chunks) {
    if (!traits.chunks_fixed) {
      chunks = *flags.chunks;
    } else if (strict_chunks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--chunks: ", traits.name, " runs with exactly ",
          traits.default_chunks, " chunk(s) per worker, got ", *flags.chunks));
    }
  }
  // A stage's costs and M_B (one byte-unit) are split evenly over the chunks
  // that the worker holds, so that totals per worker match the flags.
  StageCost cost;
  cost.f_seconds = flags.cost_f / chunks;
  cost.b_seconds = flags.cost_b / chunks;
  cost.w_seconds = flags.cost_w / chunks;
  cost.m_b_bytes = 1.0 / chunks;
  cost.m_w_bytes = flags.weight_memory_fraction / chunks;
  Outcome out;
  out.traits = traits;
  out.problem = Problem::Uniform(flags.stages, chunks, flags.microbatches,
                                 cost, flags.cost_comm);
  if (flags.mem_limit_m_b) {
    out.problem.memory_limit_bytes =
        MbUnitBytes(out.problem, traits.placement);
    for (double& bytes : out.problem.memory_limit_bytes) {
      bytes *= *flags.mem_limit_m_b;
    }
    out.mem_limit_m_b = flags.mem_limit_m_b;
  } else {
    const double own = traits.default_limit_m_b(flags.stages, flags.microbatches);
    if (std::isfinite(own)) out.mem_limit_m_b = own;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Schedule> schedule = Generate(traits.name, out.problem);
  out.solve_seconds = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  if (!schedule.ok()) return schedule.status();
  out.schedule = *std::move(schedule);
  absl::StatusOr<SimulationResult> sim = Simulate(out.problem, out.schedule);
  if (!sim.ok()) {
    // A generated schedule that does not simulate is a generator bug, not a
    // user error: keep it out of exit code 2.
    return absl::InternalError(absl::StrCat(
        traits.name, " produced a schedule that does not simulate: ",
        sim.status().message()));
  }
  out.sim = *std::move(sim);
  return out;
}

// ---------------------------------------------------------------------------
// Formatting

// absl::StrCat prints a double with six significant digits, as "%.6g".
std::string Percent(double ratio) {
  return absl::StrCat(std::round(ratio * 10000) / 100, "%");
}

// "none" or the limit in M_B, followed by `unit`.
std::string LimitText(const std::optional<double>& limit,
                      const char* unit = "") {
  return limit ? absl::StrCat(*limit, unit) : "none";
}

Json LimitJson(const std::optional<double>& limit) {
  return limit ? Json(*limit) : Json(nullptr);
}

// Left-aligned columns separated by two spaces.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  return "\"" + absl::StrReplaceAll(text, {{"\"", "\"\""}}) + "\"";
}

Json OutcomeJson(const Outcome& o) {
  const SimulationResult& sim = o.sim;
  const StageCost& c = o.problem.stages.front();
  const int v = o.problem.chunks;
  return {{"schedule", o.traits.name},
          {"stages", o.problem.workers},
          {"microbatches", o.problem.microbatches},
          {"chunks", v},
          {"placement", o.traits.placement == Placement::kV ? "v" : "loop"},
          {"cost_f", c.f_seconds * v},
          {"cost_b", c.b_seconds * v},
          {"cost_w", c.w_seconds * v},
          {"cost_comm", o.problem.comm_seconds},
          {"weight_memory_fraction", c.m_b_bytes > 0 ? c.m_w_bytes / c.m_b_bytes : 0},
          {"mem_limit", LimitJson(o.mem_limit_m_b)},
          {"makespan", sim.makespan_seconds},
          {"step_seconds", sim.step_seconds},
          {"bubble_rate", sim.bubble_rate},
          {"peak_memory_m_b", sim.max_peak_memory_m_b},
          {"solve_seconds", o.solve_seconds},
          {"per_worker",
           {{"busy_seconds", sim.busy_seconds},
            {"idle_seconds", sim.idle_seconds},
            {"peak_memory_m_b", sim.peak_memory_m_b}}}};
}

std::string OutcomeTable(const Outcome& o) {
  const SimulationResult& sim = o.sim;
  const StageCost& c = o.problem.stages.front();
  const int v = o.problem.chunks;
  std::vector<std::vector<std::string>> head = {
      {"schedule", o.traits.name},
      {"stages (p)", std::to_string(o.problem.workers)},
      {"microbatches (m)", std::to_string(o.problem.microbatches)},
      {"chunks (v)", std::to_string(o.problem.chunks)},
      {"costs per stage",
       absl::StrCat("T_F=", absl::StrCat(c.f_seconds * v), " T_B=",
                    absl::StrCat(c.b_seconds * v), " T_W=", absl::StrCat(c.w_seconds * v),
                    " T_comm=",
                    absl::StrCat(o.problem.comm_seconds), " s")},
      {"memory limit", LimitText(o.mem_limit_m_b, " M_B")},
      {"makespan", absl::StrCat(sim.makespan_seconds, " s")},
      {"step", absl::StrCat(sim.step_seconds, " s")},
      {"bubble rate", absl::StrCat(sim.bubble_rate, " (",
                                   Percent(sim.bubble_rate), ")")},
      {"peak memory", absl::StrCat(sim.max_peak_memory_m_b, " M_B")},
      {"solve time", absl::StrCat(o.solve_seconds, " s")}};
  std::vector<std::vector<std::string>> workers = {
      {"worker", "busy_s", "idle_s", "idle", "peak_M_B"}};
  for (int w = 0; w < o.problem.workers; ++w) {
    const double idle_ratio = sim.makespan_seconds > 0
                                  ? sim.idle_seconds[w] / sim.makespan_seconds
                                  : 0;
    workers.push_back({std::to_string(w), absl::StrCat(sim.busy_seconds[w]),
                       absl::StrCat(sim.idle_seconds[w]), Percent(idle_ratio),
                       absl::StrCat(sim.peak_memory_m_b[w])});
  }
  return FormatTable(head) + "\n" + FormatTable(workers);
}

// Text grid in the style of the paper's figures: each action is a cell
// starting with its pass and microbatch ("F3", "B3", "W3", "BW3"; lower case
// for odd chunks), as wide as its duration; '.' is idle.
std::string Grid(const Outcome& o, std::optional<int> width) {
  const Schedule& s = o.schedule;
  const SimulationResult& sim = o.sim;
  std::vector<int> chunk_of(s.worker_of_stage.size(), 0);
  std::vector<int> seen(s.workers, 0);
  for (size_t st = 0; st < chunk_of.size(); ++st) {
    chunk_of[st] = seen[s.worker_of_stage[st]]++;
  }
  auto label = [&](const Action& a) {
    std::string pass = a.kind == PassKind::kF   ? "F"
                       : a.kind == PassKind::kB ? "B"
                       : a.kind == PassKind::kW ? "W"
                                                : "BW";
    if (chunk_of[a.stage] % 2 == 1) {
      for (char& ch : pass) ch = static_cast<char>(ch - 'A' + 'a');
    }
    return pass + std::to_string(a.microbatch);
  };
  double t0 = 0, t1 = 0, shortest = 0;
  bool any = false;
  for (int w = 0; w < s.workers; ++w) {
    for (const ActionTiming& t : sim.timings[w]) {
      const double d = t.end_seconds - t.start_seconds;
      t0 = any ? std::min(t0, t.start_seconds) : t.start_seconds;
      t1 = std::max(t1, t.end_seconds);
      if (d > 0) shortest = shortest > 0 ? std::min(shortest, d) : d;
      any = true;
    }
  }
  // Columns per second: either the asked width over the step, or enough
  // that every label plus one space fits in its own duration.
  double per_second = 1;
  if (width && t1 > t0) {
    per_second = *width / (t1 - t0);
  } else if (shortest > 0) {
    double cells = 1;  // columns per `shortest` seconds
    for (int w = 0; w < s.workers; ++w) {
      for (size_t i = 0; i < s.actions[w].size(); ++i) {
        const ActionTiming& t = sim.timings[w][i];
        const double d = t.end_seconds - t.start_seconds;
        if (d <= 0) continue;
        const double need = (label(s.actions[w][i]).size() + 1) * shortest / d;
        cells = std::max(cells, std::ceil(need - 1e-9));
      }
    }
    per_second = cells / shortest;
  }
  auto column = [&](double t) {
    return static_cast<size_t>(std::llround((t - t0) * per_second));
  };
  const size_t total = column(t1);
  std::string out = absl::StrCat(
      o.traits.name, ": p=", s.workers, " v=", s.chunks, " m=", s.microbatches,
      ", makespan ", absl::StrCat(sim.makespan_seconds), " s, bubble rate ",
      Percent(sim.bubble_rate), ", peak memory ",
      absl::StrCat(sim.max_peak_memory_m_b), " M_B, memory limit ",
      LimitText(o.mem_limit_m_b, " M_B"), "\n");
  const std::string prefix_width = absl::StrCat("worker ", s.workers - 1);
  for (int w = 0; w < s.workers; ++w) {
    std::string line(total, '.');
    for (size_t i = 0; i < s.actions[w].size(); ++i) {
      const ActionTiming& t = sim.timings[w][i];
      const size_t begin = column(t.start_seconds);
      const size_t end = std::min(total, column(t.end_seconds));
      if (end <= begin) continue;
      std::string cell = label(s.actions[w][i]);
      cell.resize(end - begin, ' ');
      line.replace(begin, end - begin, cell);
    }
    std::string name = absl::StrCat("worker ", w);
    name.resize(prefix_width.size(), ' ');
    absl::StrAppend(&out, name, " |", line, "|\n");
  }
  absl::StrAppend(&out, "legend: F forward, B input gradient, W weight "
                        "gradient, BW fused backward; number = microbatch; "
                        "'.' idle",
                  s.chunks > 1 ? "; lower case = odd chunk" : "",
                  "; 1 column = ", absl::StrCat(per_second > 0 ? 1 / per_second : 0),
                  " s\n");
  return out;
}

// ---------------------------------------------------------------------------
// Commands

absl::Status WriteOutput(const std::string& text, const FlagMap& flags) {
  auto it = flags.find("output");
  if (it == flags.end()) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0) {
      return absl::UnavailableError("cannot write to stdout");
    }
    return absl::OkStatus();
  }
  std::ofstream file(it->second, std::ios::binary | std::ios::trunc);
  if (!file) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot write --output \"", it->second, "\": ", std::strerror(errno)));
  }
  file << text;
  file.close();
  if (!file) {
    return absl::UnavailableError(
        absl::StrCat("cannot write --output \"", it->second, "\""));
  }
  return absl::OkStatus();
}

const std::set<std::string> kProblemFlags = {
    "stages", "microbatches", "cost-f", "cost-b", "cost-w", "cost-comm",
    "mem-limit", "weight-memory-fraction", "chunks", "output"};

std::set<std::string> With(std::initializer_list<const char*> extra) {
  std::set<std::string> flags = kProblemFlags;
  flags.insert(extra.begin(), extra.end());
  return flags;
}

// Parses simulate's and show's flags and runs the one schedule.
absl::StatusOr<Outcome> RunNamed(const FlagMap& flags) {
  absl::StatusOr<ProblemFlags> problem = ParseProblemFlags(flags);
  if (!problem.ok()) return problem.status();
  absl::StatusOr<ScheduleTraits> traits =
      FindSchedule(flags.at("schedule"));
  if (!traits.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--schedule: ", traits.status().message()));
  }
  return RunSchedule(*traits, *problem, /*strict_chunks=*/true);
}

absl::Status SimulateCommand(const std::vector<std::string>& args) {
  absl::StatusOr<FlagMap> flags =
      ParseFlags(args, With({"schedule", "format"}), "simulate");
  if (!flags.ok()) return flags.status();
  if (absl::Status st = RequireFlags(
          *flags, {"schedule", "stages", "microbatches", "cost-f", "cost-b",
                   "cost-w"},
          "simulate");
      !st.ok()) {
    return st;
  }
  absl::StatusOr<std::string> format = ChoiceFlag(
      *flags, "format", {"table", "json", "csv", "chrome-trace", "svg"});
  if (!format.ok()) return format.status();
  absl::StatusOr<Outcome> o = RunNamed(*flags);
  if (!o.ok()) return o.status();
  std::string text;
  if (*format == "json") {
    text = OutcomeJson(*o).dump(2) + "\n";
  } else if (*format == "csv") {
    text = ScheduleToCsv(o->schedule);
  } else if (*format == "chrome-trace") {
    text = ToChromeTrace(o->schedule, o->sim) + "\n";
  } else if (*format == "svg") {
    text = ToSvg(o->schedule, o->sim);
  } else {
    text = OutcomeTable(*o);
  }
  return WriteOutput(text, *flags);
}

absl::Status ShowCommand(const std::vector<std::string>& args) {
  absl::StatusOr<FlagMap> flags =
      ParseFlags(args, With({"schedule", "width"}), "show");
  if (!flags.ok()) return flags.status();
  if (absl::Status st =
          RequireFlags(*flags, {"schedule", "stages", "microbatches"}, "show");
      !st.ok()) {
    return st;
  }
  std::optional<int> width;
  if (flags->count("width")) {
    absl::StatusOr<int> w = IntFlag(*flags, "width", 1);
    if (!w.ok()) return w.status();
    width = *w;
  }
  absl::StatusOr<Outcome> o = RunNamed(*flags);
  if (!o.ok()) return o.status();
  return WriteOutput(Grid(*o, width), *flags);
}

absl::Status CompareCommand(const std::vector<std::string>& args) {
  absl::StatusOr<FlagMap> flags = ParseFlags(args, With({"format"}), "compare");
  if (!flags.ok()) return flags.status();
  if (absl::Status st =
          RequireFlags(*flags, {"stages", "microbatches"}, "compare");
      !st.ok()) {
    return st;
  }
  absl::StatusOr<std::string> format =
      ChoiceFlag(*flags, "format", {"table", "json", "csv"});
  if (!format.ok()) return format.status();
  absl::StatusOr<ProblemFlags> problem = ParseProblemFlags(*flags);
  if (!problem.ok()) return problem.status();

  std::vector<std::vector<std::string>> rows = {
      {"schedule", "chunks", "makespan_s", "bubble_rate", "peak_M_B",
       "mem_limit_M_B", "solve_s", "status"}};
  Json list = Json::array();
  for (const ScheduleTraits& traits : AllSchedules()) {
    absl::StatusOr<Outcome> o =
        RunSchedule(traits, *problem, /*strict_chunks=*/false);
    if (!o.ok()) {
      // One schedule that cannot serve the problem must not hide the rest.
      const std::string reason = absl::StrReplaceAll(
          std::string(o.status().message()), {{"\n", " "}});
      const int chunks = problem->chunks && !traits.chunks_fixed
                             ? *problem->chunks
                             : traits.default_chunks;
      rows.push_back({traits.name, std::to_string(chunks), "-", "-", "-", "-",
                      "-", "n/a: " + reason});
      list.push_back(
          {{"schedule", traits.name}, {"chunks", chunks}, {"error", reason}});
      continue;
    }
    rows.push_back({traits.name, std::to_string(o->problem.chunks),
                    absl::StrCat(o->sim.makespan_seconds), absl::StrCat(o->sim.bubble_rate),
                    absl::StrCat(o->sim.max_peak_memory_m_b),
                    LimitText(o->mem_limit_m_b), absl::StrCat(o->solve_seconds), "ok"});
    Json row = OutcomeJson(*o);
    row.erase("per_worker");
    list.push_back(std::move(row));
  }
  std::string text;
  if (*format == "json") {
    Json out = {{"stages", problem->stages},
                {"microbatches", problem->microbatches},
                {"cost_f", problem->cost_f},
                {"cost_b", problem->cost_b},
                {"cost_w", problem->cost_w},
                {"cost_comm", problem->cost_comm},
                {"weight_memory_fraction", problem->weight_memory_fraction},
                {"schedules", std::move(list)}};
    text = out.dump(2) + "\n";
  } else if (*format == "csv") {
    for (const auto& row : rows) {
      std::vector<std::string> fields;
      for (const std::string& f : row) fields.push_back(CsvField(f));
      absl::StrAppend(&text, absl::StrJoin(fields, ","), "\n");
    }
  } else {
    text = FormatTable(rows);
  }
  return WriteOutput(text, *flags);
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  if (args.empty()) {
    std::fputs("zbpp-sched: missing command (simulate, show or compare); "
               "see --help\n",
               stderr);
    return kExitUsage;
  }
  const std::string command = args.front();
  args.erase(args.begin());
  absl::Status status;
  if (command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  } else if (command == "simulate") {
    status = SimulateCommand(args);
  } else if (command == "show") {
    status = ShowCommand(args);
  } else if (command == "compare") {
    status = CompareCommand(args);
  } else {
    status = absl::InvalidArgumentError(
        absl::StrCat("unknown command \"", command,
                     "\"; expected simulate, show or compare"));
  }
  if (status.ok()) return 0;
  const std::string message =
      absl::StrReplaceAll(std::string(status.message()), {{"\n", " "}});
  std::fprintf(stderr, "zbpp-sched: %s\n", message.c_str());
  return IsUsageError(status) ? kExitUsage : kExitFailure;
}

}  // namespace
}  // namespace zbpp::sched

int main(int argc, char** argv) { return zbpp::sched::Main(argc, argv); }
