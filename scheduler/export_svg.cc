#include "scheduler/export_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/text_table.h"

namespace zbpp::sched {
namespace {

// Layout in pixels.
constexpr double kLeft = 90;        // stage labels
constexpr double kRight = 20;
constexpr double kTop = 56;         // title and legend
constexpr double kRowHeight = 26;
constexpr double kRowGap = 4;
constexpr double kCommHeight = 12;  // a stage's communication row
constexpr double kCommGap = 2;      // between it and the compute row
constexpr double kBottom = 44;      // time axis
constexpr double kMinPassPx = 18;   // the shortest pass is at least this wide
constexpr double kMinPlotPx = 600;
constexpr double kMaxPlotPx = 2400;
// Text width: the advance of one character of the labels (digits,
// lower-case letters, punctuation) in font sizes, generously: about 0.55 em
// in Helvetica and DejaVu Sans, 0.70 in DejaVu Sans Bold.
constexpr double kGlyphEm = 0.72;
constexpr int kTitleFontPx = 15;
constexpr int kTextFontPx = 12;

struct PassStyle {
  const char* label;
  const char* fill;       // chunk 0
  const char* fill_dark;  // later chunks, as the ZB-V figures shade them
};

// The paper's palette: F blue, B green, W teal; fused BW olive so it never
// reads as a split pass; a reduction, communication rather than compute,
// grey; the vocabulary passes (Yeung et al., MLSys 2025) S orange and T
// purple. Same hues as the Chrome trace.
PassStyle StyleOf(PassKind kind) {
  switch (kind) {
    case PassKind::kF:
      return {"F", "#4387fd", "#2a5cb3"};
    case PassKind::kB:
      return {"B", "#7ec894", "#4f9466"};
    case PassKind::kW:
      return {"W", "#00b4b4", "#007a7a"};
    case PassKind::kBW:
      return {"BW", "#b5b35c", "#7d7b2e"};
    case PassKind::kReduce:
      return {"reduce", "#9e9e9e", "#6e6e6e"};
    case PassKind::kS:
      return {"S", "#f5a623", "#c47d0e"};
    case PassKind::kT:
      return {"T", "#9c6ade", "#6b3fa8"};
  }
  return {"?", "#999999", "#666666"};
}

// Fixed-point so that the output does not depend on float printing modes.
std::string Px(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f", value);
  return buffer;
}


// 1, 2 or 5 times a power of ten, near span/8: about eight ticks.
double TickStep(double span) {
  const double raw = span / 8;
  const double base = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0}) {
    if (base * factor >= raw) return base * factor;
  }
  return base * 10;
}

// Chunk of each virtual stage on its stage: how many virtual stages of the same
// stage come before it in model order.
std::vector<int> ChunkOfVirtualStage(const Schedule& schedule) {
  std::vector<int> chunk(schedule.stage_of.size(), 0);
  std::vector<int> seen(static_cast<size_t>(std::max(0, schedule.stages)), 0);
  for (size_t s = 0; s < chunk.size(); ++s) {
    const int w = schedule.stage_of[s];
    if (w >= 0 && w < schedule.stages) chunk[s] = seen[w]++;
  }
  return chunk;
}

}  // namespace

std::string EscapeMarkup(std::string_view text) {
  std::string out;
  for (const char c : PrintableText(text)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string ToSvg(const Schedule& schedule, const SimulationResult& result) {
  const int rows = static_cast<int>(
      std::min(schedule.actions.size(), result.timings.size()));
  // In PassKind order: `used` is indexed by the kind.
  constexpr PassKind kKinds[] = {PassKind::kF,      PassKind::kB, PassKind::kW, PassKind::kBW,
                                 PassKind::kReduce, PassKind::kS, PassKind::kT};
  double t0 = 0, t1 = 0, shortest = 0;
  bool any = false;
  bool used[std::size(kKinds)] = {};
  for (int w = 0; w < rows; ++w) {
    const size_t n = std::min(schedule.actions[w].size(), result.timings[w].size());
    for (size_t i = 0; i < n; ++i) {
      const ActionTiming& t = result.timings[w][i];
      const double d = t.end_seconds - t.start_seconds;
      t0 = any ? std::min(t0, t.start_seconds) : t.start_seconds;
      t1 = any ? std::max(t1, t.end_seconds) : t.end_seconds;
      if (d > 0) shortest = shortest > 0 ? std::min(shortest, d) : d;
      if (MergedIntoPrevious(schedule.actions[w], i)) continue;  // Drawn with its B.
      used[static_cast<int>(TimelineUnit(schedule.actions[w], i).kind)] = true;
      any = true;
    }
  }
  const double span = t1 > t0 ? t1 - t0 : 1.0;
  const double plot = std::clamp(
      shortest > 0 ? span / shortest * kMinPassPx : kMinPlotPx, kMinPlotPx,
      kMaxPlotPx);
  const double scale = plot / span;  // px per second
  // With reductions, every stage's row gets a communication row under it.
  const bool comm_rows = used[static_cast<int>(PassKind::kReduce)];
  const std::string title = EscapeMarkup(absl::StrCat(
      schedule.name, ": p=", schedule.stages, " v=", schedule.chunks, " m=",
      schedule.microbatches, ", makespan ", result.makespan_seconds,
      " s, bubble rate ", std::round(result.bubble_rate * 10000) / 100, "%",
      comm_rows
          ? absl::StrCat(", exposed reduction ", result.exposed_reduce_seconds, " s")
          : ""));
  // The legend: one swatch of 54 px per pass kind present, then a note.
  const char* const chunk_note = "darker: chunk 1 and later";
  double legend = schedule.chunks > 1 ? std::string_view(chunk_note).size() * kGlyphEm *
                                            kTextFontPx
                                      : 0;
  for (PassKind kind : kKinds) legend += used[static_cast<int>(kind)] ? 54 : 0;
  // At least as wide as the plot, the title and the legend: a viewer cuts
  // off what lies beyond the drawing's width. The title's character
  // references count one character each.
  size_t title_chars = 0;
  for (size_t i = 0; i < title.size(); ++i) {
    if (title[i] == '&') i = std::min(title.find(';', i), title.size() - 1);
    title_chars += (static_cast<unsigned char>(title[i]) & 0xc0) != 0x80;  // UTF-8 starts
  }
  const double width =
      kLeft + std::max({plot, title_chars * kGlyphEm * kTitleFontPx, legend}) + kRight;
  const double row_pitch =
      kRowHeight + kRowGap + (comm_rows ? kCommGap + kCommHeight : 0);
  const double rows_bottom = kTop + rows * row_pitch;
  const double height = rows_bottom + kBottom;

  std::string svg = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", Px(width),
      "\" height=\"", Px(height), "\" viewBox=\"0 0 ", Px(width), " ",
      Px(height), "\" font-family=\"sans-serif\" font-size=\"", kTextFontPx, "\">\n",
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"", Px(width),
      "\" height=\"", Px(height), "\" fill=\"white\"/>\n");

  absl::StrAppend(
      &svg, "<text class=\"title\" x=\"", Px(kLeft),
      "\" y=\"20\" font-size=\"", kTitleFontPx, "\" font-weight=\"bold\">", title,
      "</text>\n");

  // Legend: one swatch per pass kind present.
  double x = kLeft;
  for (PassKind kind : kKinds) {
    if (!used[static_cast<int>(kind)]) continue;
    const PassStyle style = StyleOf(kind);
    absl::StrAppend(&svg, "<rect class=\"legend\" x=\"", Px(x),
                    "\" y=\"30\" width=\"14\" height=\"14\" fill=\"",
                    style.fill, "\"/><text x=\"", Px(x + 18),
                    "\" y=\"41\">", style.label, "</text>\n");
    x += 54;
  }
  if (schedule.chunks > 1) {
    absl::StrAppend(&svg, "<text x=\"", Px(x), "\" y=\"41\">", chunk_note, "</text>\n");
  }

  const std::vector<int> chunk_of = ChunkOfVirtualStage(schedule);
  for (int w = 0; w < rows; ++w) {
    const double y = kTop + w * row_pitch;
    const double comm_y = y + kRowHeight + kCommGap;
    absl::StrAppend(&svg, "<text class=\"stage\" x=\"", Px(kLeft - 8),
                    "\" y=\"", Px(y + kRowHeight / 2 + 4),
                    "\" text-anchor=\"end\">stage ", w, "</text>\n");
    absl::StrAppend(&svg, "<rect class=\"row\" x=\"", Px(kLeft), "\" y=\"",
                    Px(y), "\" width=\"", Px(plot), "\" height=\"",
                    Px(kRowHeight), "\" fill=\"none\" stroke=\"#dddddd\"/>\n");
    if (comm_rows) {
      absl::StrAppend(&svg, "<rect class=\"comm-row\" x=\"", Px(kLeft),
                      "\" y=\"", Px(comm_y), "\" width=\"", Px(plot),
                      "\" height=\"", Px(kCommHeight),
                      "\" fill=\"none\" stroke=\"#eeeeee\"/>\n");
    }
    const size_t n = std::min(schedule.actions[w].size(), result.timings[w].size());
    for (size_t i = 0; i < n; ++i) {
      // A merged pair is one BW unit: its B drawn as BW, its W not at all.
      if (MergedIntoPrevious(schedule.actions[w], i)) continue;
      const Action a = TimelineUnit(schedule.actions[w], i);
      ActionTiming t = result.timings[w][i];
      if (MergesWithNext(schedule.actions[w], i) && i + 1 < n) {
        t.end_seconds = result.timings[w][i + 1].end_seconds;
      }
      const PassStyle style = StyleOf(a.kind);
      // A vocabulary pass is every stage's own, whichever chunk holds L.
      const bool later_chunk =
          !IsVocabularyPass(a.kind) && a.virtual_stage.value() >= 0 &&
          a.virtual_stage.value() < static_cast<int>(chunk_of.size()) &&
          chunk_of[a.virtual_stage.value()] > 0;
      const double left = kLeft + (t.start_seconds - t0) * scale;
      const double box = (t.end_seconds - t.start_seconds) * scale;
      const bool reduce = a.kind == PassKind::kReduce;
      absl::StrAppend(
          &svg, "<rect class=\"action ", style.label, "\" x=\"", Px(left),
          "\" y=\"", Px(reduce ? comm_y : y), "\" width=\"", Px(box),
          "\" height=\"", Px(reduce ? kCommHeight : kRowHeight), "\" fill=\"",
          later_chunk ? style.fill_dark : style.fill,
          "\" stroke=\"white\" stroke-width=\"0.5\"><title>",
          ActionToString(a), ": ", style.label, " of virtual stage ", a.virtual_stage.value(),
          reduce ? "" : absl::StrCat(", microbatch ", a.microbatch), ", ",
          t.start_seconds, " to ", t.end_seconds, " s</title></rect>\n");
      // Reductions are labelled by their title only: the row is too low.
      const std::string label = std::to_string(a.microbatch);
      if (!reduce && box >= 6.0 + 7.0 * label.size()) {
        absl::StrAppend(&svg, "<text x=\"", Px(left + box / 2), "\" y=\"",
                        Px(y + kRowHeight / 2 + 4),
                        "\" text-anchor=\"middle\" fill=\"white\">", label,
                        "</text>\n");
      }
    }
  }

  // Time axis with 1-2-5 ticks.
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Px(kLeft), "\" y1=\"",
                  Px(rows_bottom), "\" x2=\"", Px(kLeft + plot), "\" y2=\"",
                  Px(rows_bottom), "\" stroke=\"black\"/>\n");
  const double step = TickStep(span);
  const int ticks = static_cast<int>(std::floor(span / step + 1e-9));
  for (int k = 0; k <= ticks; ++k) {
    const double tx = kLeft + k * step * scale;
    absl::StrAppend(&svg, "<line x1=\"", Px(tx), "\" y1=\"", Px(rows_bottom),
                    "\" x2=\"", Px(tx), "\" y2=\"", Px(rows_bottom + 5),
                    "\" stroke=\"black\"/><text x=\"", Px(tx), "\" y=\"",
                    Px(rows_bottom + 18), "\" text-anchor=\"middle\">",
                    t0 + k * step, "</text>\n");
  }
  absl::StrAppend(&svg, "<text x=\"", Px(kLeft + plot), "\" y=\"",
                  Px(rows_bottom + 36),
                  "\" text-anchor=\"end\">time (s)</text>\n</svg>\n");
  return svg;
}

}  // namespace zbpp::sched
