#include "scheduler/export_trace.h"

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace zbpp::sched {
namespace {

using Json = nlohmann::ordered_json;

// One pid for the whole schedule; stages are its threads, so that the
// viewer stacks them as the paper's figures do.
constexpr int kPid = 0;

struct PassLook {
  const char* name;    // "F", "B", "W", "BW", "REDUCE", "S" or "T"
  const char* colour;  // a chrome://tracing reserved colour name
};

// chrome://tracing only accepts its reserved colour names
// (catapult's color_scheme.js). These are the closest to the paper's
// figures: F rgb(67,135,253) blue, B rgb(126,200,148) green,
// W rgb(0,180,180) teal, BW rgb(100,100,0) olive (green and teal mixed
// darker, so that a fused pass never reads as a split one); a reduction,
// which is communication rather than compute, grey; the vocabulary passes
// (Yeung et al., MLSys 2025) S rgb(238,142,0) orange and T rgb(180,0,180)
// purple, as in the SVG.
PassLook LookOf(PassKind kind) {
  switch (kind) {
    case PassKind::kF:
      return {"F", "rail_response"};
    case PassKind::kB:
      return {"B", "thread_state_running"};
    case PassKind::kW:
      return {"W", "background_memory_dump"};
    case PassKind::kBW:
      return {"BW", "olive"};
    case PassKind::kReduce:
      return {"REDUCE", "grey"};
    case PassKind::kS:
      return {"S", "rail_idle"};
    case PassKind::kT:
      return {"T", "detailed_memory_dump"};
  }
  return {"?", "generic_work"};
}

Json Metadata(const char* what, int tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", kPid}, {"tid", tid},
          {"args", {{"name", name}}}};
}

}  // namespace

std::string ToChromeTrace(const Schedule& schedule,
                          const SimulationResult& result) {
  const int rows = static_cast<int>(schedule.actions.size());
  // Reductions overlap the passes, so each stage with any gets a second
  // thread, its communication row (tid rows + w), sorted under its compute
  // row.
  std::vector<char> has_reduce(rows, 0);
  for (int w = 0; w < rows; ++w) {
    for (const Action& a : schedule.actions[w]) {
      if (a.kind == PassKind::kReduce) has_reduce[w] = 1;
    }
  }
  Json events = Json::array();
  events.push_back(Metadata("process_name", 0, "zbpp " + schedule.name));
  auto thread = [&](int tid, const std::string& name, int sort_index) {
    events.push_back(Metadata("thread_name", tid, name));
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"},
                      {"pid", kPid}, {"tid", tid},
                      {"args", {{"sort_index", sort_index}}}});
  };
  for (int w = 0; w < rows; ++w) {
    thread(w, "stage " + std::to_string(w), 2 * w);
    if (has_reduce[w]) {
      thread(rows + w, "stage " + std::to_string(w) + " comm", 2 * w + 1);
    }
  }
  for (int w = 0; w < rows; ++w) {
    const std::vector<Action>& actions = schedule.actions[w];
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      // Tolerate a result shorter than the schedule (not from Simulate):
      // an action without a timing is left out rather than invented.
      if (w >= static_cast<int>(result.timings.size()) ||
          i >= result.timings[w].size()) {
        continue;
      }
      // A merged pair is one BW unit: its B drawn as BW, its W not at all.
      if (MergedIntoPrevious(actions, i)) continue;
      const Action unit = TimelineUnit(actions, i);
      ActionTiming t = result.timings[w][i];
      if (MergesWithNext(actions, i) && i + 1 < result.timings[w].size()) {
        t.end_seconds = result.timings[w][i + 1].end_seconds;
      }
      const PassLook look = LookOf(unit.kind);
      events.push_back({{"name", ActionToString(unit)},
                        {"cat", look.name},
                        {"ph", "X"},
                        {"pid", kPid},
                        {"tid", a.kind == PassKind::kReduce ? rows + w : w},
                        {"ts", t.start_seconds * 1e6},
                        {"dur", (t.end_seconds - t.start_seconds) * 1e6},
                        {"cname", look.colour},
                        {"args",
                         {{"virtual_stage", a.virtual_stage.value()},
                          {"microbatch", a.microbatch},
                          {"pass", look.name}}}});
    }
  }
  Json trace = {{"traceEvents", std::move(events)},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"schedule", schedule.name},
                  {"stages", schedule.stages},
                  {"chunks", schedule.chunks},
                  {"microbatches", schedule.microbatches},
                  {"makespan_seconds", result.makespan_seconds},
                  {"bubble_rate", result.bubble_rate},
                  {"exposed_reduce_seconds",
                   result.exposed_reduce_seconds}}}};
  return trace.dump();
}

}  // namespace zbpp::sched
