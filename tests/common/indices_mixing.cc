// Snippets for the test `indices_mixing_does_not_compile`
// (tests/common/compile_fail.cmake): CASE_legal uses every index the way the
// code does and must compile; each other case mixes two kinds of index, or an
// index and an int, in one line and must not. Were the indices plain ints,
// every case would compile and the test would fail.

#include "common/indices.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp {

int Snippet() {
  sched::Schedule schedule;
  schedule.stages = 2;
  schedule.chunks = 1;
  schedule.stage_of = {0, 1};
  sched::Problem problem;
  IndexedVector<Stage, double> per_stage(2, 0.0);
  const Stage s(1);
  const VirtualStage v(1);
  const Replica r(0);
#if defined(CASE_legal)
  sched::Action action{sched::PassKind::kF, VirtualStage(0), 0};
  action.virtual_stage = v;
  per_stage[schedule.StageOf(v)] += problem.limit_of(s);
  const WorkerIndex k = WorkerOf(s, r, schedule.stages);
  return StageOfWorker(k, 2).value() + ReplicaOfWorker(k, 2).value() + (s == Stage(1));
#elif defined(CASE_virtual_stage_from_stage)
  const VirtualStage mixed = s;
  return mixed.value();
#elif defined(CASE_stage_from_int)
  const Stage mixed = 1;
  return mixed.value();
#elif defined(CASE_int_from_stage)
  const int mixed = s;
  return mixed;
#elif defined(CASE_stage_equals_virtual_stage)
  return s == v;
#elif defined(CASE_stage_plus_int)
  return (s + 1).value();
#elif defined(CASE_per_stage_vector_by_virtual_stage)
  return static_cast<int>(per_stage[v]);
#elif defined(CASE_per_stage_vector_by_int)
  return static_cast<int>(per_stage[1]);
#elif defined(CASE_stage_of_a_stage)
  return schedule.StageOf(s).value();
#elif defined(CASE_stage_of_as_virtual_stage)
  const VirtualStage mixed = schedule.StageOf(v);
  return mixed.value();
#elif defined(CASE_action_virtual_stage_from_stage)
  sched::Action action;
  action.virtual_stage = s;
  return action.microbatch;
#elif defined(CASE_action_virtual_stage_from_int)
  sched::Action action{sched::PassKind::kF, 1, 0};
  return action.microbatch;
#elif defined(CASE_limit_of_a_virtual_stage)
  return static_cast<int>(problem.limit_of(v));
#elif defined(CASE_worker_of_replica_and_stage_swapped)
  return WorkerOf(r, s, schedule.stages).value();
#elif defined(CASE_stage_of_worker_from_stage)
  return StageOfWorker(s, schedule.stages).value();
#else
#error "no CASE_ defined"
#endif
}

}  // namespace zbpp
