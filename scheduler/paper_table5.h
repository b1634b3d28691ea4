#ifndef ZBPP_SCHEDULER_PAPER_TABLE5_H_
#define ZBPP_SCHEDULER_PAPER_TABLE5_H_

#include "scheduler/problem.h"

namespace zbpp::sched {

/// One row of the Zero Bubble paper's Table 5 (Qi et al., ICLR 2024, arXiv
/// 2401.10241): per-virtual stage pass times profiled on A100s for a GPT model, and
/// the bubble rates the paper reports for each schedule.
struct PaperSetting {
  const char* model;  ///< "1.5B", "6.2B", "14.6B", "28.3B".
  int hidden;         ///< h.
  int heads;          ///< a.
  int p;              ///< Pipeline stages.
  int m;              ///< Microbatches.
  double f_ms, b_ms, w_ms, comm_ms;  ///< T_F, T_B, T_W, T_comm per virtual stage.
  /// The paper's bubble rates.
  double one_f_one_b, zb_h1, zb_h2, zb_1p, zb_2p;
};

// clang-format off
/// The 12 profiled settings of Table 5.
inline constexpr PaperSetting kPaperTable5[] = {
    // model   h     a   p   m    T_F     T_B     T_W    T_comm  1F1B   H1     H2     1p     2p
    {"1.5B",  2304, 24,  8,  24, 18.522, 18.086,  9.337, 0.601, .2431, .1585, .1083, .1585, .0433},
    {"1.5B",  2304, 24,  8,  32, 18.513, 18.086,  9.331, 0.626, .1985, .1242, .0837, .1242, .0039},
    {"1.5B",  2304, 24,  8,  64, 18.546, 18.097,  9.321, 0.762, .1240, .0674, .0444, .0674, .0026},
    {"6.2B",  4096, 32,  8,  24, 29.718, 29.444, 19.927, 0.527, .2347, .1323, .0698, .1323, .0029},
    {"6.2B",  4096, 32,  8,  32, 29.802, 29.428, 19.530, 0.577, .1898, .1045, .0559, .1045, .0022},
    {"6.2B",  4096, 32,  8,  64, 29.935, 29.621, 19.388, 0.535, .1091, .0554, .0294, .0554, .0010},
    {"14.6B", 5120, 40, 16,  48, 11.347, 11.248,  8.132, 0.377, .2552, .1397, .0672, .1397, .0066},
    {"14.6B", 5120, 40, 16,  64, 11.307, 11.254,  8.101, 0.379, .2082, .1088, .0516, .1088, .0054},
    {"14.6B", 5120, 40, 16, 128, 11.325, 11.308,  8.109, 0.378, .1251, .0576, .0266, .0576, .0028},
    {"28.3B", 6144, 48, 32,  96, 10.419, 10.207,  7.715, 0.408, .2646, .1421, .0641, .1421, .0038},
    {"28.3B", 6144, 48, 32, 128, 10.408, 10.204,  7.703, 0.408, .2168, .1106, .0490, .1106, .0029},
    {"28.3B", 6144, 48, 32, 256, 10.402, 10.248,  7.698, 0.460, .1352, .0594, .0257, .0594, .0018},
};
// clang-format on

/// The problem of `row` with v chunks per stage: uniform virtual stages with the
/// profiled times (ms used as seconds: only ratios matter), each chunk
/// paying 1/v of the virtual stage; M_B = 1/v per chunk and M_W / M_B =
/// 32h / (34h + 5as) at sequence length s = 1024 (paper §2: M_B =
/// sb(34h + 5as), M_W = 32sbh). No memory limit.
inline Problem PaperProblem(const PaperSetting& row, int chunks = 1) {
  VirtualStageCost cost;
  cost.f_seconds = row.f_ms / chunks;
  cost.b_seconds = row.b_ms / chunks;
  cost.w_seconds = row.w_ms / chunks;
  cost.m_b_bytes = 1.0 / chunks;
  cost.m_w_bytes = cost.m_b_bytes * 32.0 * row.hidden /
                   (34.0 * row.hidden + 5.0 * row.heads * 1024);
  return Problem::Uniform(row.p, chunks, row.m, cost, row.comm_ms);
}

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_PAPER_TABLE5_H_
