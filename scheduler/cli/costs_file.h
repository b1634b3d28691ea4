// The cost file of `zbpp-sched --costs FILE`: measured or assumed pass times,
// memories and hop latency, per pipeline stage or per virtual stage.

#ifndef ZBPP_SCHEDULER_CLI_COSTS_FILE_H_
#define ZBPP_SCHEDULER_CLI_COSTS_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/problem.h"

namespace zbpp::sched::cli {

/// A parsed cost file. In JSON or YAML (the same keys):
///
///   stages:            # one entry per pipeline stage, or ...
///     - {t_f: 0.0185, t_b: 0.0181, t_w: 0.0093, m_b: 2.1e9, m_w: 1.0e9}
///   virtual_stages:    # ... one per virtual stage, in model order
///   comm: 0.0006       # seconds of one point-to-point hop (default 0)
///   memory_limit_bytes: [8.0e10, 8.0e10]   # per stage (default: none)
///
/// Per entry: t_f, t_b, t_w seconds of F, B (input gradient) and W (weight
/// gradient); m_b, m_w bytes (M_B held from F until B, M_W of it until W);
/// optional t_bw, seconds of one fused backward (B and W in one pass;
/// default 0: t_b + t_w), optional reduce, seconds of the stage's
/// data-parallel gradient all-reduce (default 0), and optional transient,
/// bytes of a pass's working memory (VirtualStageCost::transient_bytes,
/// default 0). `stages` are costs of a whole stage, which a
/// stage holding v chunks pays 1/v of per chunk, as the --cost-* flags;
/// `virtual_stages` are the coordinator's cost model as it is
/// (proto/zbpp/v1/schedule.proto, CostModel) and fit only a schedule with
/// that many virtual stages.
struct CostFile {
  /// True for `virtual_stages`, false for `stages`.
  bool per_virtual_stage = false;
  /// The entries, in seconds and bytes.
  std::vector<VirtualStageCost> entries;
  double comm_seconds = 0;  ///< `comm`.
  /// `memory_limit_bytes`; empty = none.
  std::vector<double> memory_limit_bytes;
  /// Whether any entry gave `reduce` (then the schedule gets reductions).
  bool has_reduce = false;
};

/// Parses a cost file's text (JSON or YAML). Errors: InvalidArgument naming
/// the field and the reason, e.g. `stages[3].t_b: must be a number >= 0,
/// got -1`, `stages[1]: unknown key "tf"`, `give stages or virtual_stages,
/// not both`. Thread-safe (pure).
absl::StatusOr<CostFile> ParseCostFile(std::string_view text);

/// Reads and parses the file at `path`. Errors: NotFound when it cannot be
/// read; ParseCostFile's, prefixed with the path.
absl::StatusOr<CostFile> ReadCostFile(const std::string& path);

/// The problem of `costs` for p stages, v chunks and m microbatches, the
/// virtual stages held as `stage_of` (size p*v) says: a `stages`
/// entry (size p) split evenly over the chunks of its stage, a
/// `virtual_stages` entry (size p*v) as it is. Errors: InvalidArgument when
/// the number of entries does not fit (naming both numbers).
absl::StatusOr<Problem> CostProblem(const CostFile& costs, int stages,
                                    int chunks, int microbatches,
                                    const std::vector<int>& stage_of);

/// `problem`'s costs as a cost file in YAML: `virtual_stages` (one entry per
/// virtual stage in model order, with `reduce` where it is not 0), `comm`
/// and, when the problem has limits, `memory_limit_bytes`; numbers with 17
/// significant digits, so that ParseCostFile and CostProblem (with the same
/// p, v and any placement) give `problem`'s costs back exactly. A first
/// comment line gives p, v and m (--stages for zbpp-sched). Pure.
std::string CostFileYaml(const Problem& problem);

}  // namespace zbpp::sched::cli

#endif  // ZBPP_SCHEDULER_CLI_COSTS_FILE_H_
