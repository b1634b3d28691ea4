#include "scheduler/problem.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace zbpp::sched {
namespace {

absl::Status CheckNonNegative(double value, const std::string& field) {
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be a finite number >= 0, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Problem::Validate() const {
  if (stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("stages must be >= 1, got ", stages));
  }
  if (chunks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunks must be >= 1, got ", chunks));
  }
  if (microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("microbatches must be >= 1, got ", microbatches));
  }
  if (static_cast<int>(virtual_stages.size()) != num_virtual_stages()) {
    return absl::InvalidArgumentError(
        absl::StrCat("virtual stages must hold stages*chunks = ", num_virtual_stages(),
                     " entries, got ", virtual_stages.size()));
  }
  for (int s = 0; s < num_virtual_stages(); ++s) {
    const VirtualStageCost& c = virtual_stages[s];
    const std::string at = absl::StrCat("virtual_stages[", s, "].");
    for (auto [value, name] : {std::pair{c.f_seconds, "f_seconds"},
                               std::pair{c.b_seconds, "b_seconds"},
                               std::pair{c.w_seconds, "w_seconds"},
                               std::pair{c.bw_seconds, "bw_seconds"},
                               std::pair{c.m_b_bytes, "m_b_bytes"},
                               std::pair{c.m_w_bytes, "m_w_bytes"},
                               std::pair{c.reduce_seconds, "reduce_seconds"},
                               std::pair{c.transient_bytes, "transient_bytes"}}) {
      if (absl::Status st = CheckNonNegative(value, at + name); !st.ok()) {
        return st;
      }
    }
    if (c.m_w_bytes > c.m_b_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          at, "m_w_bytes (", c.m_w_bytes, ") must not exceed m_b_bytes (",
          c.m_b_bytes, ")"));
    }
  }
  if (absl::Status st = CheckNonNegative(comm_seconds, "comm_seconds");
      !st.ok()) {
    return st;
  }
  if (!memory_limit_bytes.empty()) {
    if (static_cast<int>(memory_limit_bytes.size()) != stages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "memory_limit_bytes must be empty or hold one entry per stage (",
          stages, "), got ", memory_limit_bytes.size()));
    }
    for (int w = 0; w < stages; ++w) {
      if (std::isnan(memory_limit_bytes[w]) || memory_limit_bytes[w] <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("memory_limit_bytes[", w, "] must be > 0, got ",
                         memory_limit_bytes[w]));
      }
    }
  }
  if (!vocabulary.empty() && static_cast<int>(vocabulary.size()) != stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary must be empty or hold one entry per stage (", stages, "), got ",
        vocabulary.size()));
  }
  for (size_t w = 0; w < vocabulary.size(); ++w) {
    const VocabularyCost& c = vocabulary[w];
    const std::string at = absl::StrCat("vocabulary[", w, "].");
    for (auto [value, name] :
         {std::pair{c.s_seconds, "s_seconds"}, std::pair{c.t_seconds, "t_seconds"}}) {
      if (!std::isfinite(value) || value <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, name, " must be > 0, got ", value));
      }
    }
    for (auto [value, name] : {std::pair{c.m_bytes, "m_bytes"},
                               std::pair{c.transient_bytes, "transient_bytes"}}) {
      if (absl::Status st = CheckNonNegative(value, at + name); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

Problem Problem::Uniform(int stages, int chunks, int microbatches,
                         const VirtualStageCost& cost, double comm_seconds,
                         double limit_bytes) {
  Problem problem;
  problem.stages = stages;
  problem.chunks = chunks;
  problem.microbatches = microbatches;
  problem.virtual_stages.assign(static_cast<size_t>(std::max(0, stages * chunks)),
                        cost);
  problem.comm_seconds = comm_seconds;
  if (!std::isinf(limit_bytes)) {
    problem.memory_limit_bytes.assign(static_cast<size_t>(std::max(0, stages)),
                                      limit_bytes);
  }
  return problem;
}

}  // namespace zbpp::sched
