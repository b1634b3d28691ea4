// What zbpp-sched prints: an Outcome as a table, JSON, CSV, Chrome trace or
// SVG; the text grid of `show`; the comparison table of `compare`.

#ifndef ZBPP_SCHEDULER_CLI_REPORT_H_
#define ZBPP_SCHEDULER_CLI_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/cli/run.h"

namespace zbpp::sched::cli {

/// Formats of OutcomeReport, the default first.
inline const std::vector<std::string> kOutcomeFormats = {
    "table", "json", "csv", "chrome-trace", "svg"};

/// Formats of ComparisonReport, the default first.
inline const std::vector<std::string> kComparisonFormats = {"table", "json",
                                                            "csv"};

/// `o` in `format` (one of kOutcomeFormats; anything else reads as "table"):
/// table = the problem and metrics, then one row per stage (busy and idle
/// seconds, idle share, peak memory in M_B, and with reductions the
/// stage's exposed reduction in seconds); json = the same as an object
/// (costs in seconds per stage, memory in M_B); csv = the generated schedule
/// (ScheduleToCsv); chrome-trace = ToChromeTrace; svg = ToSvg. Ends with a
/// newline except where the exporter's own text does not.
std::string OutcomeReport(const Outcome& o, const std::string& format);

/// `o` as a text grid in the style of the paper's figures: a header line,
/// one line per stage where each action is a cell as wide as its duration
/// labelled with its pass and microbatch ("F3", "B3", "W3", "BW3"; lower case
/// for odd chunks) and '.' is idle, with reductions a "comm" line under each
/// stage where the reduction of virtual stage s is "R<s>", and a legend giving
/// seconds per column.
/// `width`: columns of the time axis; none = the shortest pass gets one
/// labelled cell.
std::string TextGrid(const Outcome& o, std::optional<int> width);

/// One schedule's line in `compare`: what it produced, or why it could not.
struct ComparisonEntry {
  std::string schedule;             ///< Schedule name, e.g. "zb-h1".
  int chunks = 1;                   ///< Chunks per stage it ran (or would run) with.
  absl::StatusOr<Outcome> outcome;  ///< The run, or its error.
};

/// `entries` for the problem `problem` in `format` (one of
/// kComparisonFormats; anything else reads as "table"): one row per entry
/// with makespan (seconds), bubble rate, exposed reduction (seconds,
/// SimulationResult::exposed_reduce_seconds), peak memory and limit (M_B), solve
/// time (seconds) and "ok" or "n/a: " and the error on one line; json wraps
/// the rows in an object that also holds the problem flags.
std::string ComparisonReport(const ProblemFlags& problem,
                             const std::vector<ComparisonEntry>& entries,
                             const std::string& format);

}  // namespace zbpp::sched::cli

#endif  // ZBPP_SCHEDULER_CLI_REPORT_H_
