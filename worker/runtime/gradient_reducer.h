#ifndef ZBPP_WORKER_RUNTIME_GRADIENT_REDUCER_H_
#define ZBPP_WORKER_RUNTIME_GRADIENT_REDUCER_H_

#include <chrono>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"

namespace zbpp::worker {

/// The data-parallel gradient reduction of one stage (the schedule's
/// REDUCE_GRAD actions, scheduler/schedule.h PassKind::kReduce): averages a
/// virtual stage's weight gradients over the d replicas that hold the same
/// stage, on a communication thread of its own, so that the reduction
/// overlaps the passes that follow it in the schedule — the communication
/// timeline the simulator models (scheduler/simulator.h): one reduction at a
/// time, in issue order, waited for only before the optimizer step.
///
/// Issue copies the gradients into one flat float32 buffer at once (later W
/// passes of other chunks may run meanwhile; those of the reduced chunk are
/// over) and starts its all-reduce (Communicator::StartAllReduceSum) on the
/// caller's thread, so that every replica launches its collectives in the
/// schedule's order (docs/transport.md); the thread waits for them in order
/// and records when each ended; WaitAll divides by d and writes the averages
/// back into each parameter's `.grad`. Every replica issues the same
/// reductions in the same order (the schedule is the same), which is what
/// the collective needs.
///
/// Thread-compatible: one thread (the stage's executor) calls Issue and
/// WaitAll; the destructor waits for a reduction in progress (at most the
/// communicator's timeout; Abort the communicator to end it sooner).
class GradientReducer {
 public:
  using Clock = std::chrono::steady_clock;

  /// When one reduction ran on the communication thread.
  struct Timing {
    Clock::time_point start;  ///< The all-reduce began.
    Clock::time_point end;    ///< It completed.
  };

  /// `data_parallel`: the d replicas holding the same virtual stages, used by
  /// this reducer only (not owned; outlives it); `timeout`: the longest wait
  /// for the other replicas to join one all-reduce.
  GradientReducer(Communicator* data_parallel, absl::Duration timeout);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Ends WaitAll's waits at once (Aborted), now and from now on: a
  /// collective on a silent replica cannot be aborted and runs to the
  /// communicator's timeout on the communication thread, which the
  /// destructor still waits for. Thread-safe; quick (an abort hook may call
  /// it).
  void Abort();

  /// d, the number of replicas.
  int replicas() const { return data_parallel_->size(); }

  /// Starts averaging the gradients of `parameters` (leaves; a parameter
  /// without a gradient counts as zeros). The `.grad` tensors must not
  /// change until WaitAll returned.
  void Issue(std::vector<at::Tensor> parameters);

  /// Waits for every reduction issued since the last call, in issue order,
  /// and writes the averaged gradients back. Returns their timings in issue
  /// order, or the first error (DeadlineExceeded when a replica did not
  /// join, Aborted after Abort; the gradients are then unspecified).
  absl::StatusOr<std::vector<Timing>> WaitAll();

 private:
  struct Reduction {
    std::vector<at::Tensor> parameters;
    at::Tensor flat;
    std::unique_ptr<PendingOp> op;  // The started all-reduce.
    absl::Status status;
    Timing timing;
    bool done = false;
  };

  void Loop();

  Communicator* const data_parallel_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::deque<std::shared_ptr<Reduction>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  // When the last waited reduction ended (the thread's).
  Clock::time_point last_end_ ABSL_GUARDED_BY(mu_);
  // Issued since the last WaitAll, in order (executor thread only).
  std::vector<std::shared_ptr<Reduction>> issued_;
  std::thread thread_;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_GRADIENT_REDUCER_H_
