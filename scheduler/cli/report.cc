#include "scheduler/cli/report.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/text_table.h"
#include "nlohmann/json.hpp"
#include "scheduler/comm_order.h"
#include "scheduler/export_svg.h"
#include "scheduler/export_trace.h"
#include "scheduler/schedule_io.h"
#include "scheduler/simulator.h"

namespace zbpp::sched::cli {
namespace {

// Ordered, so that fields print in the order they are listed.
using Json = nlohmann::ordered_json;

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

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  return "\"" + absl::StrReplaceAll(text, {{"\"", "\"\""}}) + "\"";
}

// What a transport that matches messages by their order between two stages
// (NCCL) makes of the schedule, each pair's messages in the order derived
// from it (scheduler/comm_order.h).
struct InOrderTransport {
  // OK when it runs the schedule; otherwise the cycle it would deadlock on.
  absl::Status runs;
  // OK when post-update validation's speculative prefixes are closed and
  // lead each pair's order; otherwise the rule broken and where.
  absl::Status prefixes;
  // Actions per stage in its speculative prefix.
  std::vector<int> prefix_lengths;
};

InOrderTransport CheckInOrderTransport(const Schedule& schedule) {
  InOrderTransport checks;
  checks.prefix_lengths = SpeculativePrefixLengths(schedule);
  absl::StatusOr<PairOrders> orders = DerivePairOrders(schedule);
  if (!orders.ok()) {
    checks.runs = checks.prefixes = orders.status();
    return checks;
  }
  checks.runs = CheckPairOrders(schedule, *orders);
  checks.prefixes = CheckSpeculativePrefixes(schedule, *orders);
  return checks;
}

// null for OK, the message otherwise.
Json ErrorJson(const absl::Status& status) {
  return status.ok() ? Json(nullptr) : Json(std::string(status.message()));
}

// The Problem holds per-chunk costs; the report gives them per stage, as the
// flags did.
// The merged pairs (MergesWithNext) of each stage as `{B}+{W}` texts, their
// count, and the makespan were each pair run apart (T_BW = T_B + T_W: the
// same schedule without the merge's gain); `makespan` is with them.
Json MergedPairsJson(const Outcome& o) {
  Json per_stage = Json::array();
  for (const std::vector<Action>& actions : o.schedule.actions) {
    Json pairs = Json::array();
    for (size_t i = 0; i < actions.size(); ++i) {
      if (MergesWithNext(actions, i)) {
        pairs.push_back(absl::StrCat(ActionToString(actions[i]), "+",
                                     ActionToString(actions[i + 1])));
      }
    }
    per_stage.push_back(std::move(pairs));
  }
  Problem apart = o.problem;
  for (VirtualStageCost& c : apart.virtual_stages) c.bw_seconds = 0;
  absl::StatusOr<SimulationResult> unmerged = Simulate(apart, o.schedule);
  return {{"count", CountMergedPairs(o.schedule.actions)},
          {"per_stage", std::move(per_stage)},
          {"makespan_apart", unmerged.ok() ? Json(unmerged->makespan_seconds) : Json(nullptr)}};
}

Json OutcomeJson(const Outcome& o) {
  const InOrderTransport in_order = CheckInOrderTransport(o.schedule);
  const SimulationResult& sim = o.sim;
  const VirtualStageCost& c = o.problem.virtual_stages.front();
  const int v = o.problem.chunks;
  const bool uniform = o.costs_path.empty();
  return {{"schedule", o.traits.name},
          {"stages", o.problem.stages},
          {"microbatches", o.problem.microbatches},
          {"chunks", v},
          {"placement", o.traits.placement == Placement::kV ? "v" : "loop"},
          // Stage 0's costs stand for all of them only when the flags gave
          // them; a --costs file may make every stage different.
          {"costs_file", uniform ? Json(nullptr) : Json(o.costs_path)},
          {"cost_f", uniform ? Json(c.f_seconds * v) : Json(nullptr)},
          {"cost_b", uniform ? Json(c.b_seconds * v) : Json(nullptr)},
          {"cost_w", uniform ? Json(c.w_seconds * v) : Json(nullptr)},
          {"cost_bw", uniform ? Json(FusedBackwardSeconds(c) * v) : Json(nullptr)},
          {"cost_comm", o.problem.comm_seconds},
          {"weight_memory_fraction",
           !uniform ? Json(nullptr)
           : c.m_b_bytes > 0 ? Json(c.m_w_bytes / c.m_b_bytes) : Json(0)},
          {"mem_limit", LimitJson(o.mem_limit_m_b)},
          {"makespan", sim.makespan_seconds},
          {"merged_pairs", MergedPairsJson(o)},
          {"step_seconds", sim.step_seconds},
          {"bubble_rate", sim.bubble_rate},
          {"peak_memory_m_b", sim.max_peak_memory_m_b},
          {"reduce_seconds", o.reduce_placement ? Json(c.reduce_seconds * v) : Json(nullptr)},
          {"reduce_placement", o.reduce_placement
                                   ? Json(std::string(ReducePlacementName(*o.reduce_placement)))
                                   : Json(nullptr)},
          {"exposed_reduce_seconds", sim.exposed_reduce_seconds},
          {"solve_seconds", o.solve_seconds},
          {"in_order_transport",
           {{"runs", in_order.runs.ok()}, {"error", ErrorJson(in_order.runs)}}},
          // "closed": both rules of CheckSpeculativePrefixes hold.
          {"speculative_prefixes",
           {{"actions_per_stage", in_order.prefix_lengths},
            {"closed", in_order.prefixes.ok()},
            {"error", ErrorJson(in_order.prefixes)}}},
          {"per_stage",
           {{"busy_seconds", sim.busy_seconds},
            {"idle_seconds", sim.idle_seconds},
            {"peak_memory_m_b", sim.peak_memory_m_b},
            {"exposed_reduce_seconds", sim.exposed_reduce_seconds_per_stage}}}};
}

std::string OutcomeTable(const Outcome& o) {
  const SimulationResult& sim = o.sim;
  const VirtualStageCost& c = o.problem.virtual_stages.front();
  const int v = o.problem.chunks;
  std::vector<std::vector<std::string>> head = {
      {"schedule", o.traits.name},
      {"stages (p)", std::to_string(o.problem.stages)},
      {"microbatches (m)", std::to_string(o.problem.microbatches)},
      {"chunks (v)", std::to_string(o.problem.chunks)},
      o.costs_path.empty()
          ? std::vector<std::string>{"costs per stage",
                                     absl::StrCat("T_F=", absl::StrCat(c.f_seconds * v),
                                                  " T_B=", absl::StrCat(c.b_seconds * v),
                                                  " T_W=", absl::StrCat(c.w_seconds * v),
                                                  " T_BW=", absl::StrCat(FusedBackwardSeconds(c) * v),
                                                  " T_comm=",
                                                  absl::StrCat(o.problem.comm_seconds), " s")}
          : std::vector<std::string>{"costs", absl::StrCat("--costs ", o.costs_path,
                                                           ", T_comm=",
                                                           o.problem.comm_seconds, " s")},
      {"memory limit", LimitText(o.mem_limit_m_b, " M_B")},
      {"makespan", absl::StrCat(sim.makespan_seconds, " s")},
      {"step", absl::StrCat(sim.step_seconds, " s")},
      {"bubble rate", absl::StrCat(sim.bubble_rate, " (",
                                   Percent(sim.bubble_rate), ")")},
      {"peak memory", absl::StrCat(sim.max_peak_memory_m_b, " M_B")},
      {"solve time", absl::StrCat(o.solve_seconds, " s")}};
  const InOrderTransport in_order = CheckInOrderTransport(o.schedule);
  head.push_back({"NCCL order", in_order.runs.ok()
                                    ? "runs: each pair's messages in the order derived from the "
                                      "schedule"
                                    : std::string(in_order.runs.message())});
  head.push_back({"speculative prefixes",
                  in_order.prefixes.ok()
                      ? absl::StrCat("closed, leading each pair's order; actions per stage ",
                                     absl::StrJoin(in_order.prefix_lengths, " "))
                      : std::string(in_order.prefixes.message())});
  if (o.reduce_placement) {
    head.push_back({"reduction per stage",
                    absl::StrCat(c.reduce_seconds * v, " s, placed ",
                                 std::string(ReducePlacementName(*o.reduce_placement)))});
    head.push_back({"exposed reduction",
                    absl::StrCat(sim.exposed_reduce_seconds, " s (",
                                 Percent(sim.makespan_seconds > 0
                                             ? sim.exposed_reduce_seconds / sim.makespan_seconds
                                             : 0),
                                 " of the makespan)")});
  }
  std::vector<std::vector<std::string>> stages = {
      {"stage", "busy_s", "idle_s", "idle", "peak_M_B"}};
  if (o.reduce_placement) stages.front().push_back("exposed_reduce_s");
  for (int w = 0; w < o.problem.stages; ++w) {
    const double idle_ratio = sim.makespan_seconds > 0
                                  ? sim.idle_seconds[w] / sim.makespan_seconds
                                  : 0;
    stages.push_back({std::to_string(w), absl::StrCat(sim.busy_seconds[w]),
                       absl::StrCat(sim.idle_seconds[w]), Percent(idle_ratio),
                       absl::StrCat(sim.peak_memory_m_b[w])});
    if (o.reduce_placement) {
      stages.back().push_back(absl::StrCat(sim.exposed_reduce_seconds_per_stage[w]));
    }
  }
  return FormatTable(head) + "\n" + FormatTable(stages);
}

}  // namespace

std::string OutcomeReport(const Outcome& o, const std::string& format) {
  if (format == "json") return OutcomeJson(o).dump(2) + "\n";
  if (format == "csv") return ScheduleToCsv(o.schedule);
  if (format == "chrome-trace") return ToChromeTrace(o.schedule, o.sim) + "\n";
  if (format == "svg") return ToSvg(o.schedule, o.sim);
  return OutcomeTable(o);
}

std::string TextGrid(const Outcome& o, std::optional<int> width) {
  const Schedule& s = o.schedule;
  const SimulationResult& sim = o.sim;
  std::vector<int> chunk_of(s.stage_of.size(), 0);
  std::vector<int> seen(s.stages, 0);
  for (size_t st = 0; st < chunk_of.size(); ++st) {
    chunk_of[st] = seen[s.stage_of[st]]++;
  }
  // A reduction is labelled with its stage: it covers every microbatch.
  auto label = [&](const Action& a) {
    if (a.kind == PassKind::kReduce) return absl::StrCat("R", a.virtual_stage.value());
    std::string pass = a.kind == PassKind::kF   ? "F"
                       : a.kind == PassKind::kB ? "B"
                       : a.kind == PassKind::kW ? "W"
                       : a.kind == PassKind::kS ? "S"
                       : a.kind == PassKind::kT ? "T"
                                                : "BW";
    // A vocabulary pass is every stage's own, whichever chunk holds L.
    if (!IsVocabularyPass(a.kind) && chunk_of[a.virtual_stage.value()] % 2 == 1) {
      for (char& ch : pass) ch = static_cast<char>(ch - 'A' + 'a');
    }
    return pass + std::to_string(a.microbatch);
  };
  double t0 = 0, t1 = 0, shortest = 0;
  bool any = false;
  for (int w = 0; w < s.stages; ++w) {
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
    for (int w = 0; w < s.stages; ++w) {
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
      o.traits.name, ": p=", s.stages, " v=", s.chunks, " m=", s.microbatches,
      ", makespan ", absl::StrCat(sim.makespan_seconds), " s, bubble rate ",
      Percent(sim.bubble_rate), ", peak memory ",
      absl::StrCat(sim.max_peak_memory_m_b), " M_B, memory limit ",
      LimitText(o.mem_limit_m_b, " M_B"), "\n");
  const std::string prefix_width = absl::StrCat("stage ", s.stages - 1);
  // Reductions overlap the passes: each stage's go on a line of their own.
  const bool comm = o.reduce_placement.has_value();
  for (int w = 0; w < s.stages; ++w) {
    std::string line(total, '.'), comm_line(total, ' ');
    for (size_t i = 0; i < s.actions[w].size(); ++i) {
      const ActionTiming& t = sim.timings[w][i];
      const size_t begin = column(t.start_seconds);
      const size_t end = std::min(total, column(t.end_seconds));
      if (end <= begin) continue;
      std::string cell = label(s.actions[w][i]);
      cell.resize(end - begin, ' ');
      (s.actions[w][i].kind == PassKind::kReduce ? comm_line : line)
          .replace(begin, end - begin, cell);
    }
    std::string name = absl::StrCat("stage ", w);
    name.resize(prefix_width.size(), ' ');
    absl::StrAppend(&out, name, " |", line, "|\n");
    if (comm) {
      std::string comm_name = "  comm";
      comm_name.resize(prefix_width.size(), ' ');
      absl::StrAppend(&out, comm_name, " |", comm_line, "|\n");
    }
  }
  absl::StrAppend(&out, "legend: F forward, B input gradient, W weight "
                        "gradient, BW fused backward; number = microbatch; "
                        "'.' idle",
                  s.chunks > 1 ? "; lower case = odd chunk" : "",
                  comm ? "; comm: R<v> = virtual stage v's gradient all-reduce" : "",
                  "; 1 column = ", absl::StrCat(per_second > 0 ? 1 / per_second : 0),
                  " s\n");
  return out;
}

std::string ComparisonReport(const ProblemFlags& problem,
                             const std::vector<ComparisonEntry>& entries,
                             const std::string& format) {
  std::vector<std::vector<std::string>> rows = {
      {"schedule", "chunks", "makespan_s", "bubble_rate", "exposed_reduce_s",
       "peak_M_B", "mem_limit_M_B", "solve_s", "status"}};
  Json list = Json::array();
  for (const ComparisonEntry& entry : entries) {
    if (!entry.outcome.ok()) {
      // One line per schedule, whatever the error says.
      const std::string reason = absl::StrReplaceAll(
          std::string(entry.outcome.status().message()), {{"\n", " "}});
      rows.push_back({entry.schedule, std::to_string(entry.chunks), "-", "-",
                      "-", "-", "-", "-", "n/a: " + reason});
      list.push_back({{"schedule", entry.schedule},
                      {"chunks", entry.chunks},
                      {"error", reason}});
      continue;
    }
    const Outcome& o = *entry.outcome;
    rows.push_back({o.traits.name, std::to_string(o.problem.chunks),
                    absl::StrCat(o.sim.makespan_seconds), absl::StrCat(o.sim.bubble_rate),
                    absl::StrCat(o.sim.exposed_reduce_seconds),
                    absl::StrCat(o.sim.max_peak_memory_m_b),
                    LimitText(o.mem_limit_m_b), absl::StrCat(o.solve_seconds), "ok"});
    Json row = OutcomeJson(o);
    row.erase("per_stage");
    list.push_back(std::move(row));
  }
  if (format == "json") {
    Json out = {{"stages", problem.stages},
                {"microbatches", problem.microbatches},
                {"costs_file", problem.costs ? Json(problem.costs_path) : Json(nullptr)},
                {"cost_f", problem.cost_f},
                {"cost_b", problem.cost_b},
                {"cost_w", problem.cost_w},
                {"cost_comm", problem.cost_comm},
                {"weight_memory_fraction", problem.weight_memory_fraction},
                {"reduce_seconds", problem.reduce_seconds ? Json(*problem.reduce_seconds)
                                                          : Json(nullptr)},
                {"schedules", std::move(list)}};
    return out.dump(2) + "\n";
  }
  if (format == "csv") {
    std::string text;
    for (const auto& row : rows) {
      std::vector<std::string> fields;
      for (const std::string& f : row) fields.push_back(CsvField(f));
      absl::StrAppend(&text, absl::StrJoin(fields, ","), "\n");
    }
    return text;
  }
  return FormatTable(rows);
}

}  // namespace zbpp::sched::cli
