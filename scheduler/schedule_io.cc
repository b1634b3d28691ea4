#include "scheduler/schedule_io.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace zbpp::sched {
namespace {

using Json = nlohmann::ordered_json;

// Checks that `action`, found at `where`, fits the schedule's own header:
// virtual stage and microbatch in range and the virtual stage held by `stage`
// (a vocabulary pass runs on every stage). Both readers call it so that a
// parsed schedule is at least self-consistent.
absl::Status CheckFits(const Schedule& schedule, int stage,
                       const Action& action, const std::string& where) {
  const std::string text = ActionToString(action);
  if (action.virtual_stage.value() >= schedule.num_virtual_stages()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " (", text, "): virtual stage ", action.virtual_stage.value(),
                     " out of range [0, ", schedule.num_virtual_stages(), ")"));
  }
  if (action.microbatch >= schedule.microbatches) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " (", text, "): microbatch ", action.microbatch,
                     " out of range [0, ", schedule.microbatches, ")"));
  }
  const int owner = schedule.StageOf(action.virtual_stage).value();
  if (!IsVocabularyPass(action.kind) && owner != stage) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " (", text, "): virtual stage ", action.virtual_stage.value(),
                     " is held by stage ", owner, ", not ", stage));
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
  return absl::StrCat("row ", row + 1, " (stage ", row, ")");
}

// PyTorch's transfer actions (schedules.py: SEND_F, RECV_F, SEND_B, RECV_B),
// in that order.
enum class CommKind { kSendF, kRecvF, kSendB, kRecvB };

// One transfer cell of a PyTorch CSV.
struct CommCell {
  CommKind kind = CommKind::kSendF;
  std::string text;  // As written, for errors.
  int virtual_stage = 0;     // The virtual stage on this row's side.
  int microbatch = 0;
  int row = 0;
  int cell = 0;      // 1-based.
  size_t after = 0;  // Compute actions of the row before this cell.
};

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


// The compute actions of a CSV's rows and, in PyTorch's form, what else its
// cells held.
struct Rows {
  std::vector<std::vector<Action>> actions;
  // Per row, the 1-based cell of each action (empty cells are skipped).
  std::vector<std::vector<int>> cells;
  std::vector<CommCell> comms;
  bool has_comms = false;  // Any SEND, RECV, UNSHARD or RESHARD.
  int ignored = 0;         // UNSHARD and RESHARD.
  int overlapped = 0;      // OVERLAP_F_B.
  int max_virtual_stage = -1;
  int max_microbatch = -1;
};

// PyTorch's actions other than compute ones (schedules.py, _ComputationType
// and _action_regex): `{virtual stage}{NAME}{microbatch}` for the four transfers,
// `{virtual stage}{NAME}` for UNSHARD and RESHARD. Returns false when `text` is
// none of them (it is then read as a compute action), an error when it is
// one but malformed.
absl::StatusOr<bool> ParseOtherCell(std::string_view text, Rows* rows,
                                    int row, int cell) {
  size_t letter = 0;
  while (letter < text.size() &&
         std::isdigit(static_cast<unsigned char>(text[letter]))) {
    ++letter;
  }
  const std::string_view rest = text.substr(letter);
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(RowName(row), ", cell ", cell, ": bad action \"",
                     std::string(text), "\": ", std::string(why)));
  };
  for (std::string_view name : {"UNSHARD", "RESHARD"}) {
    if (rest != name) continue;
    int virtual_stage = 0;
    if (!ParseDecimalInt(text.substr(0, letter), &virtual_stage)) {
      return bad("must start with the virtual stage number");
    }
    rows->has_comms = true;
    ++rows->ignored;
    return true;
  }
  static constexpr std::pair<std::string_view, CommKind> kComms[] = {
      {"SEND_F", CommKind::kSendF},
      {"RECV_F", CommKind::kRecvF},
      {"SEND_B", CommKind::kSendB},
      {"RECV_B", CommKind::kRecvB}};
  for (const auto& [name, kind] : kComms) {
    if (rest.substr(0, name.size()) != name) continue;
    CommCell comm;
    comm.kind = kind;
    comm.text = std::string(text);
    comm.row = row;
    comm.cell = cell;
    comm.after = rows->actions[row].size();
    if (!ParseDecimalInt(text.substr(0, letter), &comm.virtual_stage)) {
      return bad("must start with the virtual stage number");
    }
    if (!ParseDecimalInt(rest.substr(name.size()), &comm.microbatch)) {
      return bad("must end with the microbatch");
    }
    rows->has_comms = true;
    rows->comms.push_back(std::move(comm));
    return true;
  }
  return false;
}

// Parses the rows of `csv`: compute actions only, or (`pytorch`) also
// PyTorch's OVERLAP_F_B, transfers, UNSHARD and RESHARD.
absl::StatusOr<Rows> ParseRows(std::string_view csv, bool pytorch) {
  // One trailing newline ends the last row; any other empty line is a
  // stage with no actions.
  if (!csv.empty() && csv.back() == '\n') csv.remove_suffix(1);
  if (Trim(csv).empty()) {
    return absl::InvalidArgumentError("CSV has no rows");
  }
  Rows rows;
  for (std::string_view line : Split(csv, '\n')) {
    const int row = static_cast<int>(rows.actions.size());
    rows.actions.emplace_back();
    rows.cells.emplace_back();
    int cell = 0;
    for (std::string_view text : Split(line, ',')) {
      ++cell;
      // PyTorch pipelining writes an idle slot as an empty cell.
      text = Trim(text);
      if (text.empty()) continue;
      std::vector<std::string_view> parts = {text};
      if (pytorch) {
        absl::StatusOr<bool> other = ParseOtherCell(text, &rows, row, cell);
        if (!other.ok()) return other.status();
        if (*other) continue;
        // `(0F7;7B3)OVERLAP_F_B` (_Action.__repr__ with sub_actions): the
        // sub-actions in order.
        constexpr std::string_view kOverlap = ")OVERLAP_F_B";
        if (text.front() == '(') {
          if (text.size() <= kOverlap.size() ||
              text.substr(text.size() - kOverlap.size()) != kOverlap) {
            return absl::InvalidArgumentError(absl::StrCat(
                RowName(row), ", cell ", cell, ": bad action \"",
                std::string(text), "\": a group must read (a;b)OVERLAP_F_B"));
          }
          parts = Split(
              text.substr(1, text.size() - 1 - kOverlap.size()), ';');
          ++rows.overlapped;
        }
      }
      for (std::string_view part : parts) {
        absl::StatusOr<Action> action = ParseAction(Trim(part));
        if (!action.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              RowName(row), ", cell ", cell, ": ", action.status().message()));
        }
        if (pytorch && IsVocabularyPass(action->kind)) {
          return absl::InvalidArgumentError(absl::StrCat(
              RowName(row), ", cell ", cell, " (", std::string(text),
              "): PyTorch pipelining has no vocabulary passes (S, T); zbpp's JSON or CSV "
              "carries them"));
        }
        if (parts.size() > 1 && action->kind == PassKind::kReduce) {
          return absl::InvalidArgumentError(absl::StrCat(
              RowName(row), ", cell ", cell, " (", std::string(text),
              "): OVERLAP_F_B holds compute actions only"));
        }
        rows.max_virtual_stage = std::max(rows.max_virtual_stage, action->virtual_stage.value());
        rows.max_microbatch = std::max(rows.max_microbatch, action->microbatch);
        rows.actions.back().push_back(*action);
        rows.cells.back().push_back(cell);
      }
    }
  }
  return rows;
}

// A schedule of `rows`' shape, without placement: p rows, v and m inferred.
absl::StatusOr<Schedule> ShapeFromRows(const Rows& rows) {
  Schedule schedule;
  schedule.actions = rows.actions;
  schedule.stages = static_cast<int>(rows.actions.size());
  const int p = schedule.stages;
  if (rows.max_virtual_stage < 0) {
    return absl::InvalidArgumentError("CSV has no actions");
  }
  // Every (virtual stage, microbatch) pair needs at least one action, so one cell
  // naming a huge virtual stage or microbatch ("0F399999992") is refused here
  // instead of sizing tables by it downstream (found by
  // tests/fuzz/schedule_io_fuzz). 64-bit: max_virtual_stage + 1 may not fit an int.
  size_t total_actions = 0;
  for (const std::vector<Action>& row : rows.actions) {
    total_actions += row.size();
  }
  const int64_t pairs =
      (int64_t{rows.max_virtual_stage} + 1) * (int64_t{rows.max_microbatch} + 1);
  if (pairs > static_cast<int64_t>(total_actions)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CSV has ", total_actions, " actions, too few for its ",
        int64_t{rows.max_virtual_stage} + 1, " virtual stages x ",
        int64_t{rows.max_microbatch} + 1, " microbatches"));
  }
  if ((rows.max_virtual_stage + 1) % p != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CSV names ", rows.max_virtual_stage + 1,
        " virtual stages, not a multiple of its ", p, " rows (stages)"));
  }
  schedule.chunks = (rows.max_virtual_stage + 1) / p;
  schedule.microbatches = rows.max_microbatch + 1;
  return schedule;
}

// CheckFits for every action of `rows` in `schedule`, naming row and cell.
absl::Status CheckRowsFit(const Schedule& schedule, const Rows& rows) {
  for (int w = 0; w < schedule.stages; ++w) {
    const std::vector<Action>& actions = schedule.actions[w];
    for (size_t i = 0; i < actions.size(); ++i) {
      if (absl::Status st = CheckFits(
              schedule, w, actions[i],
              absl::StrCat(RowName(w), ", cell ", rows.cells[w][i]));
          !st.ok()) {
        return st;
      }
    }
  }
  return absl::OkStatus();
}

// Whether `comm` carries the output of (SEND) or feeds (RECV) `action`:
// transfers of F go with F, those of B with I or B (zbpp's B or BW).
bool Carries(const CommCell& comm, const Action& action) {
  const bool forward =
      comm.kind == CommKind::kSendF || comm.kind == CommKind::kRecvF;
  const bool kind_matches =
      forward ? action.kind == PassKind::kF
              : action.kind == PassKind::kB || action.kind == PassKind::kBW;
  return kind_matches && action.virtual_stage.value() == comm.virtual_stage &&
         action.microbatch == comm.microbatch;
}

// The transfers of `rows` against those the compute actions of `schedule`
// imply (see ScheduleFromPytorchCsv).
absl::Status CheckCommunication(const Schedule& schedule, const Rows& rows) {
  const int n = schedule.num_virtual_stages();
  const std::vector<int>& owner = schedule.stage_of;
  // The virtual stage on the other end of a transfer of `kind` at virtual stage `s`; -1 or
  // n when there is none.
  auto peer = [](CommKind kind, int s) {
    return kind == CommKind::kSendF || kind == CommKind::kRecvB ? s + 1 : s - 1;
  };
  auto is_send = [](CommKind kind) {
    return kind == CommKind::kSendF || kind == CommKind::kSendB;
  };
  std::map<std::tuple<CommKind, int, int>, const CommCell*> seen;
  for (const CommCell& comm : rows.comms) {
    const std::string where = absl::StrCat(RowName(comm.row), ", cell ",
                                           comm.cell, " (", comm.text, ")");
    if (comm.virtual_stage >= n || comm.microbatch >= schedule.microbatches) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": virtual stage or microbatch out of range (", n, " virtual stages, ",
          schedule.microbatches, " microbatches)"));
    }
    if (owner[comm.virtual_stage] != comm.row) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": virtual stage ", comm.virtual_stage, " is held by stage ",
                       owner[comm.virtual_stage], ", not ", comm.row));
    }
    const int other = peer(comm.kind, comm.virtual_stage);
    if (other < 0 || other >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": no matching dependency, virtual stage ", comm.virtual_stage, " is the ",
          other < 0 ? "first" : "last", " virtual stage"));
    }
    if (owner[other] == comm.row) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": no matching dependency, virtual stage ", other,
          " is on the same stage"));
    }
    auto [it, fresh] = seen.emplace(
        std::tuple{comm.kind, comm.virtual_stage, comm.microbatch}, &comm);
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": repeats ", RowName(it->second->row), ", cell ",
          it->second->cell));
    }
    const std::vector<Action>& actions = schedule.actions[comm.row];
    size_t at = 0;
    while (at < actions.size() && !Carries(comm, actions[at])) ++at;
    if (at == actions.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the row has no compute action it ",
          is_send(comm.kind) ? "sends the output of" : "feeds"));
    }
    // `after` counts the row's compute actions before the transfer.
    if (is_send(comm.kind) ? at >= comm.after : at < comm.after) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", is_send(comm.kind) ? "before " : "after ",
          ActionToString(actions[at]), " (cell ", rows.cells[comm.row][at],
          "), which it ", is_send(comm.kind) ? "sends the output of" : "feeds"));
    }
  }
  // Every dependency between stages needs its SEND and its RECV.
  for (int w = 0; w < schedule.stages; ++w) {
    const std::vector<Action>& actions = schedule.actions[w];
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (a.kind != PassKind::kF && a.kind != PassKind::kB &&
          a.kind != PassKind::kBW) {
        continue;
      }
      const bool forward = a.kind == PassKind::kF;
      const CommKind send = forward ? CommKind::kSendF : CommKind::kSendB;
      const CommKind recv = forward ? CommKind::kRecvF : CommKind::kRecvB;
      for (auto [kind, other] : {std::pair{send, peer(send, a.virtual_stage.value())},
                                 std::pair{recv, peer(recv, a.virtual_stage.value())}}) {
        if (other < 0 || other >= n || owner[other] == w) continue;
        if (seen.count({kind, a.virtual_stage.value(), a.microbatch})) continue;
        static constexpr const char* kNames[] = {"SEND_F", "RECV_F", "SEND_B",
                                                 "RECV_B"};
        return absl::InvalidArgumentError(absl::StrCat(
            RowName(w), ", cell ", rows.cells[w][i], " (", ActionToString(a),
            "): no ", a.virtual_stage.value(), kNames[static_cast<int>(kind)], a.microbatch,
            is_send(kind) ? " after it (virtual stage " : " before it (virtual stage ", other,
            " is on stage ", owner[other], ")"));
      }
    }
  }
  return absl::OkStatus();
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
  absl::StatusOr<Rows> rows = ParseRows(csv, /*pytorch=*/false);
  if (!rows.ok()) return rows.status();
  absl::StatusOr<Schedule> schedule = ShapeFromRows(*rows);
  if (!schedule.ok()) return schedule.status();
  schedule->stage_of =
      PlaceVirtualStages(placement, schedule->stages, schedule->chunks);
  if (schedule->stage_of.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("V placement needs 2 chunks per stage; the CSV has ",
                     schedule->chunks));
  }
  if (absl::Status st = CheckRowsFit(*schedule, *rows); !st.ok()) return st;
  return schedule;
}

absl::StatusOr<PytorchCsvImport> ScheduleFromPytorchCsv(std::string_view csv) {
  absl::StatusOr<Rows> rows = ParseRows(csv, /*pytorch=*/true);
  if (!rows.ok()) return rows.status();
  absl::StatusOr<Schedule> schedule = ShapeFromRows(*rows);
  if (!schedule.ok()) return schedule.status();
  // The row that holds a virtual stage's actions is its stage: each virtual stage in one
  // row, each row the same number of virtual stages.
  const int n = schedule->num_virtual_stages();
  std::vector<int> owner(n, -1);
  std::vector<int> held(schedule->stages, 0);
  for (int w = 0; w < schedule->stages; ++w) {
    const std::vector<Action>& actions = schedule->actions[w];
    for (size_t i = 0; i < actions.size(); ++i) {
      const int s = actions[i].virtual_stage.value();
      if (owner[s] == -1) {
        owner[s] = w;
        ++held[w];
      } else if (owner[s] != w) {
        return absl::InvalidArgumentError(absl::StrCat(
            RowName(w), ", cell ", rows->cells[w][i], " (",
            ActionToString(actions[i]), "): virtual stage ", s, " is also in ",
            RowName(owner[s]), "; a virtual stage runs on one stage"));
      }
    }
  }
  for (int s = 0; s < n; ++s) {
    if (owner[s] == -1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "virtual stage ", s, " is in no row, but the CSV names virtual stages up to ", n - 1));
    }
  }
  for (int w = 0; w < schedule->stages; ++w) {
    if (held[w] != schedule->chunks) {
      return absl::InvalidArgumentError(absl::StrCat(
          RowName(w), " holds ", held[w], " virtual stage(s), not ", schedule->chunks,
          " (", n, " virtual stages over ", schedule->stages,
          " rows); zbpp needs the same number on every stage"));
    }
  }
  schedule->stage_of = std::move(owner);
  if (absl::Status st = CheckRowsFit(*schedule, *rows); !st.ok()) return st;
  if (rows->has_comms) {
    if (absl::Status st = CheckCommunication(*schedule, *rows); !st.ok()) {
      return st;
    }
  }
  PytorchCsvImport out;
  out.schedule = *std::move(schedule);
  out.communication_actions = static_cast<int>(rows->comms.size());
  out.ignored_actions = rows->ignored;
  out.overlapped_actions = rows->overlapped;
  return out;
}

std::string ScheduleToJson(const Schedule& schedule) {
  Json actions = Json::array();
  for (const std::vector<Action>& row : schedule.actions) {
    Json texts = Json::array();
    for (const Action& a : row) texts.push_back(ActionToString(a));
    actions.push_back(std::move(texts));
  }
  Json json = {{"name", schedule.name},
               {"stages", schedule.stages},
               {"chunks", schedule.chunks},
               {"microbatches", schedule.microbatches},
               {"stage_of", schedule.stage_of},
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
  for (auto [field, value] : {std::pair{"stages", &schedule.stages},
                              std::pair{"chunks", &schedule.chunks},
                              std::pair{"microbatches", &schedule.microbatches}}) {
    absl::StatusOr<int> parsed = IntField(json, field, 1);
    if (!parsed.ok()) return parsed.status();
    *value = *parsed;
  }
  // stages * chunks must fit an int (Schedule::num_virtual_stages).
  if (int64_t{schedule.stages} * schedule.chunks > 1'000'000'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stages * chunks = ", int64_t{schedule.stages} * schedule.chunks,
        " is too large"));
  }

  auto owners = json.find("stage_of");
  if (owners == json.end() || !owners->is_array() ||
      static_cast<int>(owners->size()) != schedule.num_virtual_stages()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field \"stage_of\" must be an array of stages*chunks = ",
        schedule.num_virtual_stages(), " stages"));
  }
  for (size_t s = 0; s < owners->size(); ++s) {
    const Json& owner = (*owners)[s];
    if (!owner.is_number_integer() || owner.get<long long>() < 0 ||
        owner.get<long long>() >= schedule.stages) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage_of[", s, "] must be a stage in [0, ",
                       schedule.stages, "), got ", owner.dump()));
    }
    schedule.stage_of.push_back(owner.get<int>());
  }

  auto rows = json.find("actions");
  if (rows == json.end() || !rows->is_array() ||
      static_cast<int>(rows->size()) != schedule.stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("field \"actions\" must be an array of one list per "
                     "stage (",
                     schedule.stages, ")"));
  }
  for (int w = 0; w < schedule.stages; ++w) {
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

absl::StatusOr<PytorchCsvImport> ImportSchedule(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  PytorchCsvImport imported;
  if (first != std::string_view::npos && text[first] == '{') {
    absl::StatusOr<Schedule> json = ScheduleFromJson(text);
    if (!json.ok()) return json.status();
    imported.schedule = *std::move(json);
  } else {
    absl::StatusOr<PytorchCsvImport> csv = ScheduleFromPytorchCsv(text);
    if (!csv.ok()) return csv.status();
    imported = *std::move(csv);
  }
  if (imported.schedule.name.empty()) imported.schedule.name = "imported";
  return imported;
}

absl::StatusOr<Placement> PlacementOf(const Schedule& schedule) {
  for (Placement placement : {Placement::kLoop, Placement::kV}) {
    if (placement == Placement::kV && schedule.chunks != 2) continue;
    if (schedule.stage_of ==
        PlaceVirtualStages(placement, schedule.stages, schedule.chunks)) {
      return placement;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "its ", schedule.num_virtual_stages(), " virtual stages are placed neither as a "
      "loop (virtual stage s on stage s mod p) nor as a V (two chunks, the second "
      "in reverse)"));
}

}  // namespace zbpp::sched
