#ifndef ZBPP_TESTS_SCHEDULER_RANDOM_PROBLEM_H_
#define ZBPP_TESTS_SCHEDULER_RANDOM_PROBLEM_H_

#include <random>

#include "scheduler/problem.h"

namespace zbpp::sched::testing {

/// A problem with random heterogeneous per-virtual stage costs: T_F, T_B, T_W in
/// [0.3, 2) s and M_B in [0.5, 2) bytes per virtual stage, each divided by v for a
/// chunk; M_W a random share of M_B in [0.1, 0.9); one hop in [0, 0.3) s.
/// No memory limit. Deterministic for a seeded `rng`.
inline Problem RandomHeterogeneousProblem(int p, int v, int m,
                                          std::mt19937& rng) {
  std::uniform_real_distribution<double> seconds(0.3, 2.0), bytes(0.5, 2.0),
      w_share(0.1, 0.9), comm(0.0, 0.3);
  Problem problem = Problem::Uniform(p, v, m, VirtualStageCost{}, comm(rng));
  for (VirtualStageCost& c : problem.virtual_stages) {
    c.f_seconds = seconds(rng) / v;
    c.b_seconds = seconds(rng) / v;
    c.w_seconds = seconds(rng) / v;
    c.m_b_bytes = bytes(rng) / v;
    c.m_w_bytes = c.m_b_bytes * w_share(rng);
  }
  return problem;
}

}  // namespace zbpp::sched::testing

#endif  // ZBPP_TESTS_SCHEDULER_RANDOM_PROBLEM_H_
