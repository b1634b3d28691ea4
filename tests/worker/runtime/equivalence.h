#ifndef ZBPP_TESTS_WORKER_RUNTIME_EQUIVALENCE_H_
#define ZBPP_TESTS_WORKER_RUNTIME_EQUIVALENCE_H_

// The pipeline equivalence check, shared by its two settings: ranks as
// threads over the order-strict communicator (pipeline_equivalence_test.cc)
// and ranks as processes over Gloo or NCCL (process_equivalence_test.cc).
// After kEquivalenceSteps optimizer steps, the parameters of a pipelined run
// — d replicas of p stages, each replica on its share of the global batch —
// equal those of one process training the whole model on the whole global
// batch with plain autograd (at::linear's fused backward), within 1e-5
// relative. Every step is clipped and, where the schedule's speculative
// prefixes allow it (sched::CheckSpeculativePrefixes), validated post-update
// (paper §4): every step is then rolled back and redone, and its
// successor's speculative forwards discarded and replayed.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/schedule.h"
#include "worker/comm/communicator.h"
#include "worker/runtime/executor.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {

inline constexpr int kEquivalenceSteps = 3;
/// The largest relative error allowed against the reference.
inline constexpr double kEquivalenceTolerance = 1e-5;

/// A tiny model (h = 32, 4 heads, vocabulary 64, s = 16, at least 8 layers,
/// a multiple of stages·chunks) whose every step is clipped: a GPT, or with
/// architecture "llama" a Llama with 2 key/value heads, a SwiGLU of 48 and
/// tied embeddings (split over the first and last stage when p·v > 1).
v1::JobSpec TinySpec(int stages, int chunks, int microbatches,
                     const std::string& architecture = "gpt");

/// With tied embeddings split over two chunks: the names of the first
/// chunk's token embedding and of the last chunk's copy of it (the LM
/// head); nothing otherwise.
std::optional<std::pair<std::string, std::string>> TiedNames(const v1::JobSpec& spec);

/// The same random tokens on every rank for (step, microbatch): [2, 16].
MicrobatchData Batch(int64_t step, int microbatch);

/// The schedule `name` for p ranks and m = 2·max(p, 2) microbatches per
/// replica; with d > 1 its reductions placed by the solver (as the
/// coordinator does). `bw_fraction` in (0, 1]: every virtual stage's T_BW is
/// that fraction of T_B + T_W (below 1 the automatic solvers merge more
/// pairs: sched::MergeBackwards).
absl::StatusOr<sched::Schedule> ScheduleFor(const std::string& name, int p, int d,
                                            double bw_fraction = 1);

/// The reference parameters by name, after kEquivalenceSteps steps on the
/// global batch of d·m microbatches in one process, in spec.precision.
/// With tied embeddings split (TiedNames), the head's copy is listed too,
/// equal to the one embedding.
std::map<std::string, at::Tensor> Reference(const v1::JobSpec& spec, int d);

/// Trains worker `w` (rank w % p of replica w / p) of `schedule` for
/// kEquivalenceSteps steps over `pipeline` (its replica's p ranks) and
/// `replicas` (its rank's d replicas; null when d = 1), checking each step's
/// timeline; returns its parameters by name. The first error otherwise.
/// `merge_backward_passes`: StageTrainerOptions::merge_backward_passes.
absl::StatusOr<std::map<std::string, at::Tensor>> TrainWorker(const sched::Schedule& schedule,
                                                              const v1::JobSpec& spec, int w,
                                                              Communicator* pipeline,
                                                              Communicator* replicas,
                                                              bool merge_backward_passes = true);

/// The test name of a case: the schedule with '_' for '-', "bf16_" before
/// it in bfloat16, then "_p<p>" and, with d > 1, "_d<d>" (e.g.
/// "bf16_zb_h1_p2", "zb_2p_p2_d2"), which the ctest entries filter on.
std::string EquivalenceCaseName(const std::string& schedule, int p, int d,
                                v1::Precision precision);

/// Adds a gtest failure for every parameter of `params` further than
/// `tolerance` (relative to its largest entry) from the reference,
/// and for one the reference lacks, naming `label`; returns the worst error.
double ExpectNearReference(const std::map<std::string, at::Tensor>& params,
                           const std::map<std::string, at::Tensor>& reference,
                           const std::string& label,
                           double tolerance = kEquivalenceTolerance);

}  // namespace zbpp::worker

#endif  // ZBPP_TESTS_WORKER_RUNTIME_EQUIVALENCE_H_
