#include "scheduler/schedule_io.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace zbpp::sched {
namespace {

using Json = nlohmann::ordered_json;

// Checks that `action`, found at `where`, fits the schedule's own header:
// stage and microbatch in range and the stage held by `worker`. Both
// readers call it so that a parsed schedule is at least self-consistent.
absl::Status CheckFits(const Schedule& schedule, int worker,
                       const Action& action, const std::string& where) {
  const std::string text = ActionToString(action);
  if (action.stage >= schedule.num_stages()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " (", text, "): stage ", action.stage,
                     " out of range [0, ", schedule.num_stages(), ")"));
  }
  if (action.microbatch >= schedule.microbatches) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " (", text, "): microbatch ", action.microbatch,
                     " out of range [0, ", schedule.microbatches, ")"));
  }
  const int owner = schedule.worker_of_stage[action.stage];
  if (owner != worker) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " (", text, "): stage ", action.stage,
                     " is held by worker ", owner, ", not ", worker));
  }
  return absl::OkStatus();
}

// Debian's Abseil keeps its own string_view type, distinct from
// std::string_view, so splitting and trimming are done here on std's.
std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  for (size_t end; (end = text.find(separator, begin)) != text.npos;
       begin = end + 1) {
    parts.push_back(text.substr(begin, end - begin));
  }
  parts.push_back(text.substr(begin));
  return parts;
}

std::string_view Trim(std::string_view text) {
  const char* const kSpace = " \t\r\n";
  const size_t begin = text.find_first_not_of(kSpace);
  if (begin == text.npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
}

std::string RowName(size_t row) {
  return absl::StrCat("row ", row + 1, " (worker ", row, ")");
}

// A required integer field >= `min` of a JSON object.
absl::StatusOr<int> IntField(const Json& object, const char* field, int min) {
  auto it = object.find(field);
  if (it == object.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field \"", field, "\" is missing"));
  }
  if (!it->is_number_integer() || it->get<long long>() < min ||
      it->get<long long>() > 1'000'000'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field \"", field, "\" must be an integer >= ", min, ", got ",
        it->dump()));
  }
  return it->get<int>();
}

}  // namespace

std::string ScheduleToCsv(const Schedule& schedule) {
  std::string csv;
  for (const std::vector<Action>& row : schedule.actions) {
    absl::StrAppend(&csv,
                    absl::StrJoin(row, ",",
                                  [](std::string* out, const Action& a) {
                                    out->append(ActionToString(a));
                                  }),
                    "\n");
  }
  return csv;
}

absl::StatusOr<Schedule> ScheduleFromCsv(std::string_view csv,
                                         Placement placement) {
  // One trailing newline ends the last row; any other empty line is a
  // worker with no actions.
  if (!csv.empty() && csv.back() == '\n') csv.remove_suffix(1);
  if (Trim(csv).empty()) {
    return absl::InvalidArgumentError("CSV has no rows");
  }
  Schedule schedule;
  int max_stage = -1;
  int max_microbatch = -1;
  // Per row, the 1-based cell of each action (empty cells are skipped), for
  // errors found once v is known.
  std::vector<std::vector<int>> cells;
  for (std::string_view line : Split(csv, '\n')) {
    const size_t row = schedule.actions.size();
    std::vector<Action>& actions = schedule.actions.emplace_back();
    std::vector<int>& cell_of = cells.emplace_back();
    int cell = 0;
    for (std::string_view text : Split(line, ',')) {
      ++cell;
      // PyTorch pipelining writes an idle slot as an empty cell.
      text = Trim(text);
      if (text.empty()) continue;
      absl::StatusOr<Action> action = ParseAction(text);
      if (!action.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            RowName(row), ", cell ", cell, ": ", action.status().message()));
      }
      max_stage = std::max(max_stage, action->stage);
      max_microbatch = std::max(max_microbatch, action->microbatch);
      actions.push_back(*action);
      cell_of.push_back(cell);
    }
  }
  schedule.workers = static_cast<int>(schedule.actions.size());
  const int p = schedule.workers;
  if (max_stage < 0) return absl::InvalidArgumentError("CSV has no actions");
  // Every (stage, microbatch) pair needs at least one action, so one cell
  // naming a huge stage or microbatch ("0F399999992") is refused here
  // instead of sizing tables by it downstream (found by
  // tests/fuzz/schedule_io_fuzz). 64-bit: max_stage + 1 may not fit an int.
  size_t total_actions = 0;
  for (const std::vector<Action>& row : schedule.actions) {
    total_actions += row.size();
  }
  const int64_t pairs = (int64_t{max_stage} + 1) * (int64_t{max_microbatch} + 1);
  if (pairs > static_cast<int64_t>(total_actions)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CSV has ", total_actions, " actions, too few for its ",
        int64_t{max_stage} + 1, " virtual stages x ",
        int64_t{max_microbatch} + 1, " microbatches"));
  }
  if ((max_stage + 1) % p != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CSV names ", max_stage + 1, " virtual stages, not a multiple of its ",
        p, " rows (workers)"));
  }
  schedule.chunks = (max_stage + 1) / p;
  schedule.microbatches = max_microbatch + 1;
  schedule.worker_of_stage = PlaceStages(placement, p, schedule.chunks);
  if (schedule.worker_of_stage.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("V placement needs 2 chunks per worker; the CSV has ",
                     schedule.chunks));
  }
  for (int w = 0; w < p; ++w) {
    const std::vector<Action>& actions = schedule.actions[w];
    for (size_t i = 0; i < actions.size(); ++i) {
      if (absl::Status st = CheckFits(
              schedule, w, actions[i],
              absl::StrCat(RowName(w), ", cell ", cells[w][i]));
          !st.ok()) {
        return st;
      }
    }
  }
  return schedule;
}

std::string ScheduleToJson(const Schedule& schedule) {
  Json actions = Json::array();
  for (const std::vector<Action>& row : schedule.actions) {
    Json texts = Json::array();
    for (const Action& a : row) texts.push_back(ActionToString(a));
    actions.push_back(std::move(texts));
  }
  Json json = {{"name", schedule.name},
               {"workers", schedule.workers},
               {"chunks", schedule.chunks},
               {"microbatches", schedule.microbatches},
               {"worker_of_stage", schedule.worker_of_stage},
               {"actions", std::move(actions)}};
  return json.dump();
}

absl::StatusOr<Schedule> ScheduleFromJson(std::string_view text) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::exception& e) {
    // Not only parse_error: a number too large for a double ("1e9999") is
    // out_of_range (found by tests/fuzz/schedule_io_fuzz).
    return absl::InvalidArgumentError(
        absl::StrCat("schedule JSON does not parse: ", e.what()));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError("schedule JSON must be an object");
  }
  Schedule schedule;
  if (auto it = json.find("name"); it != json.end()) {
    if (!it->is_string()) {
      return absl::InvalidArgumentError("field \"name\" must be a string");
    }
    schedule.name = it->get<std::string>();
  }
  for (auto [field, value] : {std::pair{"workers", &schedule.workers},
                              std::pair{"chunks", &schedule.chunks},
                              std::pair{"microbatches", &schedule.microbatches}}) {
    absl::StatusOr<int> parsed = IntField(json, field, 1);
    if (!parsed.ok()) return parsed.status();
    *value = *parsed;
  }
  // workers * chunks must fit an int (Schedule::num_stages).
  if (int64_t{schedule.workers} * schedule.chunks > 1'000'000'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "workers * chunks = ", int64_t{schedule.workers} * schedule.chunks,
        " is too large"));
  }

  auto owners = json.find("worker_of_stage");
  if (owners == json.end() || !owners->is_array() ||
      static_cast<int>(owners->size()) != schedule.num_stages()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field \"worker_of_stage\" must be an array of workers*chunks = ",
        schedule.num_stages(), " workers"));
  }
  for (size_t s = 0; s < owners->size(); ++s) {
    const Json& owner = (*owners)[s];
    if (!owner.is_number_integer() || owner.get<long long>() < 0 ||
        owner.get<long long>() >= schedule.workers) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker_of_stage[", s, "] must be a worker in [0, ",
                       schedule.workers, "), got ", owner.dump()));
    }
    schedule.worker_of_stage.push_back(owner.get<int>());
  }

  auto rows = json.find("actions");
  if (rows == json.end() || !rows->is_array() ||
      static_cast<int>(rows->size()) != schedule.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("field \"actions\" must be an array of one list per "
                     "worker (",
                     schedule.workers, ")"));
  }
  for (int w = 0; w < schedule.workers; ++w) {
    const Json& row = (*rows)[w];
    if (!row.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("actions[", w, "] must be an array of action strings"));
    }
    std::vector<Action>& actions = schedule.actions.emplace_back();
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string where = absl::StrCat("actions[", w, "][", i, "]");
      if (!row[i].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " must be a string, got ", row[i].dump()));
      }
      absl::StatusOr<Action> action = ParseAction(row[i].get<std::string>());
      if (!action.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", action.status().message()));
      }
      if (absl::Status st = CheckFits(schedule, w, *action, where); !st.ok()) {
        return st;
      }
      actions.push_back(*action);
    }
  }
  return schedule;
}

}  // namespace zbpp::sched
