#include "scheduler/schedule.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace zbpp::sched {
namespace {

char PassLetter(PassKind kind) {
  switch (kind) {
    case PassKind::kF:
      return 'F';
    case PassKind::kB:
      return 'I';
    case PassKind::kW:
      return 'W';
    case PassKind::kBW:
      return 'B';
    case PassKind::kS:
      return 'S';
    case PassKind::kT:
      return 'T';
    case PassKind::kReduce:
      break;
  }
  return '?';
}

constexpr std::string_view kReduceText = "REDUCE_GRAD";

}  // namespace

std::string ActionToString(const Action& action) {
  const std::string bucket =
      action.bucket == kAllBuckets ? "" : absl::StrCat("@", action.bucket);
  if (action.kind == PassKind::kReduce) {
    return absl::StrCat(action.virtual_stage.value(), std::string(kReduceText), bucket);
  }
  return absl::StrCat(action.virtual_stage.value(), std::string(1, PassLetter(action.kind)),
                      action.microbatch, bucket);
}

absl::StatusOr<Action> ParseAction(std::string_view text) {
  const std::string quoted(text);
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad action \"", quoted, "\": ", std::string(why)));
  };
  size_t letter = 0;
  while (letter < text.size() &&
         std::isdigit(static_cast<unsigned char>(text[letter]))) {
    ++letter;
  }
  if (letter == 0) return bad("must start with the virtual stage number");
  Action action;
  // An optional bucket suffix, on W and REDUCE_GRAD only.
  if (const size_t at = text.find('@'); at != std::string_view::npos) {
    const std::string_view digits = text.substr(at + 1);
    if (!ParseDecimalInt(digits, &action.bucket)) {
      return bad("bucket after '@' is not a number");
    }
    text = text.substr(0, at);
    const bool reduce = text.substr(letter) == kReduceText;
    if (!reduce && (letter >= text.size() || text[letter] != 'W')) {
      return bad("only W and REDUCE_GRAD take a bucket");
    }
  }
  if (text.substr(letter) == kReduceText) {
    action.kind = PassKind::kReduce;
    int virtual_stage = 0;
    if (!ParseDecimalInt(text.substr(0, letter), &virtual_stage)) {
      return bad("virtual stage is not a number");
    }
    action.virtual_stage = VirtualStage(virtual_stage);
    return action;
  }
  if (letter + 1 >= text.size()) return bad("must end with the microbatch");
  constexpr PassKind kLettered[] = {PassKind::kF,  PassKind::kB, PassKind::kW,
                                     PassKind::kBW, PassKind::kS, PassKind::kT};
  const PassKind* kind = std::find_if(std::begin(kLettered), std::end(kLettered),
                                      [&](PassKind k) { return PassLetter(k) == text[letter]; });
  if (kind == std::end(kLettered)) return bad("pass must be one of F, I, W, B, S, T, REDUCE_GRAD");
  action.kind = *kind;
  int virtual_stage = 0;
  if (!ParseDecimalInt(text.substr(0, letter), &virtual_stage)) {
    return bad("virtual stage is not a number");
  }
  action.virtual_stage = VirtualStage(virtual_stage);
  if (!ParseDecimalInt(text.substr(letter + 1), &action.microbatch)) {
    return bad("microbatch is not a number");
  }
  return action;
}

bool ParseDecimalInt(std::string_view digits, int* out) {
  if (digits.empty() || !std::isdigit(static_cast<unsigned char>(digits[0]))) {
    return false;
  }
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

std::vector<int> PlaceVirtualStages(Placement placement, int stages, int chunks) {
  std::vector<int> stage_of;
  if (stages < 1 || chunks < 1) return stage_of;
  if (placement == Placement::kV) {
    if (chunks != 2) return stage_of;
    for (int s = 0; s < 2 * stages; ++s) {
      stage_of.push_back(s < stages ? s : 2 * stages - 1 - s);
    }
    return stage_of;
  }
  for (int s = 0; s < stages * chunks; ++s) {
    stage_of.push_back(s % stages);
  }
  return stage_of;
}

}  // namespace zbpp::sched
