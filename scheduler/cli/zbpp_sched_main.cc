// zbpp-sched: builds, simulates, draws and compares pipeline schedules from
// the command line. Thin shell over the scheduler library: parse flags
// (flags.h), build a Problem, call Generate and Simulate (run.h), print
// (report.h); this file holds the usage text, the three commands and where
// their output goes. Exit codes: 0 done, 1 failure (unwritable output,
// unimplemented or broken generator), 2 usage error or a problem the
// generator refuses; errors are one line on stderr naming the flag or the
// schedule.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "scheduler/cli/flags.h"
#include "scheduler/cli/report.h"
#include "scheduler/cli/run.h"
#include "scheduler/registry.h"

namespace zbpp::sched::cli {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] = R"(usage: zbpp-sched COMMAND [FLAGS]

Commands:
  simulate  build one schedule, simulate it, print its metrics or export it
  show      draw one schedule as a text grid, one line per stage
  compare   build and simulate every known schedule for one problem

Problem flags (costs are per pipeline stage; a stage that
holds v chunks pays 1/v of them per chunk):
  --schedule NAME               gpipe 1f1b 1f1b-interleaved zb-h1 zb-h2 zb-1p
                                zb-2p zb-auto zb-v v-half v-min dualpipe-v
                                (simulate, show)
  --import FILE                 simulate, show: a schedule from FILE, not
                                --schedule: PyTorch pipelining's CSV (one row
                                per stage; compute-only or with SEND/RECV,
                                which are checked; UNSHARD/RESHARD ignored;
                                OVERLAP_F_B read as F then B) or zbpp's JSON;
                                --stages/--microbatches/--chunks come from it
  --stages P                    pipeline stages, >= 1
  --microbatches M              microbatches per step, >= 1
  --cost-f TF --cost-b TB --cost-w TW
                                seconds of F, B (input gradient) and W (weight
                                gradient) per stage; required by simulate,
                                1 by default for show and compare
  --cost-bw TBW                 seconds of one fused backward (B and W in one
                                pass: BW, or a B with its W right after it)
                                per stage (default TB + TW)
  --cost-comm TC                seconds per point-to-point hop (default 0)
  --costs FILE                  costs from a JSON or YAML file instead of the
                                --cost-* flags: per pipeline stage or
                                per virtual stage, with M_B/M_W in bytes, comm
                                and memory limits (docs/schedules.md); its
                                stages give --stages
  --mem-limit K                 activation limit per stage in units of M_B
                                (default: the schedule's own)
  --weight-memory-fraction R    M_W / M_B in [0, 1] (default 0.5)
  --chunks V                    chunks per stage (default: the schedule's;
                                compare applies it where a schedule accepts it)

Data parallelism (d replicas of the pipeline; each virtual stage all-reduces
its weight gradients once per step, a REDUCE_GRAD action on the stage's
communication timeline; none of these flags = d = 1, no reductions):
  --reduce-seconds X            seconds of one stage's all-reduce (split over
                                its chunks), >= 0
  --data-parallel D             replicas, >= 1; with D > 1 the all-reduce is a
                                ring, 2(D-1)/D * BYTES / bandwidth:
  --gradient-bytes BYTES        a stage's weight gradients, in bytes
  --reduce-bandwidth GBPS       all-reduce bandwidth per link, in GB/s
  --reduce-placement WHERE      after-schedule, after-last-backward or solved
                                (default solved: W passes reordered so that
                                reductions overlap the remaining work)

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
    "stages", "microbatches", "cost-f", "cost-b", "cost-w", "cost-bw", "cost-comm",
    "mem-limit", "weight-memory-fraction", "chunks", "output",
    "reduce-seconds", "data-parallel", "gradient-bytes", "reduce-bandwidth",
    "reduce-placement", "costs"};

std::set<std::string> With(std::initializer_list<const char*> extra) {
  std::set<std::string> flags = kProblemFlags;
  flags.insert(extra.begin(), extra.end());
  return flags;
}

// `required` and --stages, which a --costs file may give instead (its
// `stages`; ParseProblemFlags says when it does not).
std::vector<std::string> StagesUnlessCosts(const std::vector<std::string>& args,
                                           std::vector<std::string> required) {
  for (const std::string& arg : args) {
    if (arg == "--costs" || arg.rfind("--costs=", 0) == 0) return required;
  }
  required.push_back("stages");
  return required;
}

// The one schedule of simulate and show: --import FILE, or --schedule NAME
// with --stages (or a --costs file's stages) and --microbatches. What the
// imported file held besides compute actions goes to stderr.
absl::StatusOr<Outcome> RunOneSchedule(const FlagMap& flags,
                                       const std::string& command) {
  const bool import = flags.count("import") > 0;
  if (import && flags.count("schedule")) {
    return absl::InvalidArgumentError("give --schedule or --import, not both");
  }
  // An imported schedule brings its own shape, a --costs file its stages.
  for (const char* name : {"schedule", "stages", "microbatches"}) {
    if (!import && !flags.count(name) &&
        (std::string(name) != "stages" || !flags.count("costs"))) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing required flag --", name, " for ", command,
                       " (or --import FILE)"));
    }
  }
  std::string note;
  absl::StatusOr<Outcome> o =
      import ? RunImportedSchedule(flags, &note) : RunNamedSchedule(flags);
  if (o.ok() && !note.empty()) {
    std::fprintf(stderr, "zbpp-sched: --import %s: %s\n",
                 flags.at("import").c_str(), note.c_str());
  }
  return o;
}

absl::Status SimulateCommand(const std::vector<std::string>& args) {
  absl::StatusOr<FlagMap> flags = ParseFlags(
      args, With({"schedule", "import", "format"}), {}, "simulate");
  if (!flags.ok()) return flags.status();
  for (const char* name : {"cost-f", "cost-b", "cost-w"}) {
    if (!flags->count("costs") && !flags->count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "missing required flag --", name, " for simulate (or --costs FILE)"));
    }
  }
  absl::StatusOr<std::string> format =
      ChoiceFlag(*flags, "format", kOutcomeFormats);
  if (!format.ok()) return format.status();
  absl::StatusOr<Outcome> o = RunOneSchedule(*flags, "simulate");
  if (!o.ok()) return o.status();
  return WriteOutput(OutcomeReport(*o, *format), *flags);
}

absl::Status ShowCommand(const std::vector<std::string>& args) {
  absl::StatusOr<FlagMap> flags =
      ParseFlags(args, With({"schedule", "import", "width"}), {}, "show");
  if (!flags.ok()) return flags.status();
  std::optional<int> width;
  if (flags->count("width")) {
    absl::StatusOr<int> w = IntFlag(*flags, "width", 1);
    if (!w.ok()) return w.status();
    width = *w;
  }
  absl::StatusOr<Outcome> o = RunOneSchedule(*flags, "show");
  if (!o.ok()) return o.status();
  return WriteOutput(TextGrid(*o, width), *flags);
}

absl::Status CompareCommand(const std::vector<std::string>& args) {
  absl::StatusOr<FlagMap> flags = ParseFlags(
      args, With({"format"}), StagesUnlessCosts(args, {"microbatches"}),
      "compare");
  if (!flags.ok()) return flags.status();
  absl::StatusOr<std::string> format =
      ChoiceFlag(*flags, "format", kComparisonFormats);
  if (!format.ok()) return format.status();
  absl::StatusOr<ProblemFlags> problem = ParseProblemFlags(*flags);
  if (!problem.ok()) return problem.status();
  // One schedule that cannot serve the problem must not hide the rest: its
  // error becomes its row.
  std::vector<ComparisonEntry> entries;
  for (const ScheduleTraits& traits : AllSchedules()) {
    entries.push_back(
        {traits.name, ChunksFor(traits, *problem),
         RunSchedule(traits, *problem, /*strict_chunks=*/false)});
  }
  return WriteOutput(ComparisonReport(*problem, entries, *format), *flags);
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
}  // namespace zbpp::sched::cli

int main(int argc, char** argv) { return zbpp::sched::cli::Main(argc, argv); }
