#include "scheduler/export_trace.h"

#include <string>

#include "nlohmann/json.hpp"

namespace zbpp::sched {
namespace {

using Json = nlohmann::ordered_json;

// One pid for the whole schedule; workers are its threads, so that the
// viewer stacks them as the paper's figures do.
constexpr int kPid = 0;

struct PassLook {
  const char* name;    // "F", "B", "W" or "BW"
  const char* colour;  // a chrome://tracing reserved colour name
};

// chrome://tracing only accepts its reserved colour names
// (catapult's color_scheme.js). These are the closest to the paper's
// figures: F rgb(67,135,253) blue, B rgb(126,200,148) green,
// W rgb(0,180,180) teal, BW rgb(100,100,0) olive (green and teal mixed
// darker, so that a fused pass never reads as a split one).
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
  Json events = Json::array();
  events.push_back(Metadata("process_name", 0, "zbpp " + schedule.name));
  for (int w = 0; w < static_cast<int>(schedule.actions.size()); ++w) {
    events.push_back(Metadata("thread_name", w, "worker " + std::to_string(w)));
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"},
                      {"pid", kPid}, {"tid", w},
                      {"args", {{"sort_index", w}}}});
  }
  for (int w = 0; w < static_cast<int>(schedule.actions.size()); ++w) {
    const std::vector<Action>& actions = schedule.actions[w];
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      // Tolerate a result shorter than the schedule (not from Simulate):
      // an action without a timing is left out rather than invented.
      if (w >= static_cast<int>(result.timings.size()) ||
          i >= result.timings[w].size()) {
        continue;
      }
      const ActionTiming& t = result.timings[w][i];
      const PassLook look = LookOf(a.kind);
      events.push_back({{"name", ActionToString(a)},
                        {"cat", look.name},
                        {"ph", "X"},
                        {"pid", kPid},
                        {"tid", w},
                        {"ts", t.start_seconds * 1e6},
                        {"dur", (t.end_seconds - t.start_seconds) * 1e6},
                        {"cname", look.colour},
                        {"args",
                         {{"stage", a.stage},
                          {"microbatch", a.microbatch},
                          {"pass", look.name}}}});
    }
  }
  Json trace = {{"traceEvents", std::move(events)},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"schedule", schedule.name},
                  {"workers", schedule.workers},
                  {"chunks", schedule.chunks},
                  {"microbatches", schedule.microbatches},
                  {"makespan_seconds", result.makespan_seconds},
                  {"bubble_rate", result.bubble_rate}}}};
  return trace.dump();
}

}  // namespace zbpp::sched
