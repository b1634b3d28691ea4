#include "worker/runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "scheduler/problem.h"
#include "scheduler/simulator.h"
#include "worker/model/split_linear.h"
#include "worker/runtime/device.h"

namespace zbpp::worker {
namespace {

using sched::Action;
using sched::PassKind;
using SteadyClock = std::chrono::steady_clock;

// A message this rank receives for one of its actions.
struct RecvPlan {
  int peer = -1;  // -1: the input is local (data or a chunk on this rank).
  uint32_t tag = 0;
};

// A receive posted ahead of its action.
struct PostedRecv {
  at::Tensor buffer;
  std::unique_ptr<PendingOp> op;
};

// What an F pass leaves for its B: the stage input (a leaf whose .grad B
// reads) and the output to differentiate (the scaled loss on the last
// stage).
struct ForwardState {
  at::Tensor input;
  at::Tensor output;
};

// B or fused BW: a pass that needs the next stage's gradient.
bool IsBackward(const Action& a) { return a.kind == PassKind::kB || a.kind == PassKind::kBW; }

// "1F0 (pass F, virtual stage 1, microbatch 0)": an error names the pass
// and the microbatch in words, not only in the schedule's compact form.
std::string DescribeAction(const Action& a) {
  if (a.kind == PassKind::kReduce) {
    return absl::StrCat(sched::ActionToString(a),
                        " (data-parallel gradient reduction, virtual stage ", a.stage, ")");
  }
  const char* pass = a.kind == PassKind::kF   ? "F"
                     : a.kind == PassKind::kB ? "B"
                     : a.kind == PassKind::kW ? "W"
                                              : "BW";
  return absl::StrCat(sched::ActionToString(a), " (pass ", pass, ", virtual stage ", a.stage,
                      ", microbatch ", a.microbatch, ")");
}

// One rank's execution of one step. Lives for the step only.
class StepRun {
 public:
  // `forward_only`: evaluation (no graph, losses not scaled), with `batches`
  // instead of the options' training data.
  // `check` (may be null) runs before the first B; see BeforeFirstBackward.
  StepRun(const ExecutorOptions& options, int64_t step, int generation,
          const sched::Schedule& schedule, bool forward_only, const BatchFn& batches,
          const BeforeFirstBackward* check)
      : o_(options), step_(step), generation_(generation), schedule_(schedule),
        actions_(schedule.actions[options.rank]), forward_only_(forward_only),
        batches_(batches), check_(check), first_backward_(FirstBackward(actions_)),
        start_(SteadyClock::now()), timer_(options.device, start_, actions_.size()) {}

  absl::StatusOr<StepTimeline> Run() {
    plans_.reserve(actions_.size());
    for (const Action& a : actions_) plans_.push_back(PlanRecv(a));
    timeline_.action_start_seconds.resize(actions_.size());
    timeline_.action_end_seconds.resize(actions_.size());
    for (size_t j = 0; j < actions_.size(); ++j) {
      if (j == first_backward_ && check_ != nullptr) {
        absl::StatusOr<bool> replay = (*check_)();
        check_ = nullptr;
        if (!replay.ok()) return replay.status();
        if (*replay) return Discard(j);
      }
      if (absl::Status st = PostRecvsThrough(j + o_.recv_lookahead_actions); !st.ok()) return st;
      if (absl::Status st = RunAction(j); !st.ok()) {
        return absl::Status(st.code(), absl::StrCat("step ", step_, ", action #", j, " ",
                                                    DescribeAction(actions_[j]), ": ",
                                                    std::string(st.message())));
      }
      if (actions_[j].kind == PassKind::kReduce) continue;  // Timed by the reducer.
      timer_.End(j);
      if (o_.pass_slowdown > 1) {
        std::this_thread::sleep_for(
            std::chrono::duration<double>((o_.pass_slowdown - 1) * timer_.Duration(j)));
        timer_.End(j);
      }
    }
    ResolvePasses();
    if (absl::Status st = AwaitReductions(); !st.ok()) return st;
    timeline_.step_seconds =
        actions_.empty() ? 0
                         : *std::max_element(timeline_.action_end_seconds.begin(),
                                             timeline_.action_end_seconds.end());
    // Every receive was consumed; drain the sends so their buffers can go.
    // After the last action: not part of the step's communication time.
    if (absl::Status st = WaitSends(); !st.ok()) return st;
    return std::move(timeline_);
  }

 private:
  static size_t FirstBackward(const std::vector<Action>& actions) {
    return std::find_if(actions.begin(), actions.end(), IsBackward) - actions.begin();
  }

  // Waits for the step's data-parallel reductions (issued in action order)
  // and records when each ran.
  absl::Status AwaitReductions() {
    if (o_.reducer == nullptr) return absl::OkStatus();
    absl::StatusOr<std::vector<GradientReducer::Timing>> timings = o_.reducer->WaitAll();
    if (!timings.ok()) {
      return absl::Status(timings.status().code(),
                          absl::StrCat("step ", step_, ", data-parallel gradient reduction: ",
                                       std::string(timings.status().message())));
    }
    size_t next = 0;
    for (size_t j = 0; j < actions_.size(); ++j) {
      if (actions_[j].kind != PassKind::kReduce) continue;
      const GradientReducer::Timing& t = (*timings)[next++];
      timeline_.action_start_seconds[j] = std::chrono::duration<double>(t.start - start_).count();
      timeline_.action_end_seconds[j] = std::chrono::duration<double>(t.end - start_).count();
    }
    return absl::OkStatus();
  }

  absl::Status WaitSends() {
    for (auto& [op, what] : sends_) {
      if (absl::Status st = op->Wait(o_.recv_timeout); !st.ok()) {
        return absl::Status(st.code(), absl::StrCat("step ", step_, ", sending ", what, ": ",
                                                    std::string(st.message())));
      }
    }
    sends_.clear();
    return absl::OkStatus();
  }

  // The step is given up before action `first_backward` (only forwards ran):
  // receive every activation the other ranks' speculative forwards (those
  // before their first B) address to this rank, so that no sender is left
  // waiting, and complete this rank's own sends. Receives were posted only
  // for actions before `first_backward`, all of which ran and consumed
  // them: what they received is skipped, nothing is left in posted_.
  absl::StatusOr<StepTimeline> Discard(size_t first_backward) {
    std::set<std::pair<int, uint32_t>> received;
    for (size_t j = 0; j < first_backward; ++j) {
      if (plans_[j].peer >= 0) received.insert({plans_[j].peer, plans_[j].tag});
    }
    for (int peer = 0; peer < schedule_.workers; ++peer) {
      if (peer == o_.rank) continue;
      for (const Action& a : schedule_.actions[peer]) {
        if (IsBackward(a)) break;
        if (a.kind != PassKind::kF || a.stage + 1 >= num_stages() ||
            WorkerOf(a.stage + 1) != o_.rank) {
          continue;
        }
        const uint32_t tag = Tag(MessageKind::kActivation, a.stage + 1, a.microbatch);
        if (received.count({peer, tag}) == 1) continue;
        at::Tensor buffer = ActivationBuffer();
        absl::StatusOr<std::unique_ptr<PendingOp>> op =
            o_.communicator->Recv(buffer, peer, tag);
        if (!op.ok()) return op.status();
        if (absl::Status st = (*op)->Wait(o_.recv_timeout); !st.ok()) {
          return absl::Status(st.code(),
                              absl::StrCat("step ", step_, ", draining the discarded ",
                                           sched::ActionToString(a), " of rank ", peer, ": ",
                                           std::string(st.message())));
        }
      }
    }
    if (absl::Status st = WaitSends(); !st.ok()) return st;
    ResolvePasses();
    timeline_.discarded = true;
    timeline_.discarded_forwards = static_cast<int>(first_backward);
    timeline_.action_start_seconds.resize(first_backward);
    timeline_.action_end_seconds.resize(first_backward);
    timeline_.step_seconds = Seconds();
    return std::move(timeline_);
  }

  uint32_t Tag(MessageKind kind, int stage, int microbatch) const {
    return MakeTag(step_, kind, stage, microbatch, generation_);
  }
  double Seconds() const {
    return std::chrono::duration<double>(SteadyClock::now() - start_).count();
  }

  // The passes' times and the losses, which stay on the device until now:
  // a GPU runs the step without a synchronisation per pass.
  void ResolvePasses() {
    timer_.Resolve(timeline_.action_start_seconds, timeline_.action_end_seconds);
    timeline_.loss_sum = loss_sum_.defined() ? loss_sum_.item<double>() : 0;
  }

  // Adds a microbatch's loss (a scalar) to the step's, in double precision
  // as a sum of the values on the host would be.
  void AddLoss(const at::Tensor& loss) {
    at::Tensor value = loss.detach().to(at::kDouble);
    loss_sum_ = loss_sum_.defined() ? loss_sum_ + value : value;
    ++timeline_.loss_count;
  }

  // A batch tensor on the device: through pinned host memory, copied
  // asynchronously on a GPU (the copy overlaps the work queued before it);
  // the tensor itself on the CPU.
  at::Tensor ToDevice(const at::Tensor& host) const {
    if (o_.device.is_cpu()) return host;
    return host.pin_memory().to(o_.device, /*non_blocking=*/true);
  }

  // A receive buffer for the tensors between virtual stages.
  at::Tensor ActivationBuffer() const {
    return at::empty({o_.microbatch_size, o_.seq_len, o_.hidden},
                     at::TensorOptions().dtype(at::kFloat).device(o_.device));
  }

  int num_stages() const { return schedule_.num_stages(); }
  int WorkerOf(int stage) const { return schedule_.worker_of_stage[stage]; }

  RecvPlan PlanRecv(const Action& a) const {
    RecvPlan plan;
    if (a.kind == PassKind::kF && a.stage > 0 && WorkerOf(a.stage - 1) != o_.rank) {
      plan.peer = WorkerOf(a.stage - 1);
      plan.tag = Tag(MessageKind::kActivation, a.stage, a.microbatch);
    } else if (IsBackward(a) &&
               a.stage < num_stages() - 1 && WorkerOf(a.stage + 1) != o_.rank) {
      plan.peer = WorkerOf(a.stage + 1);
      plan.tag = Tag(MessageKind::kGradient, a.stage, a.microbatch);
    }
    return plan;
  }

  absl::Status PostRecvsThrough(size_t last) {
    // Before the check, nothing past the first B: a discarded step must not
    // leave receives posted for messages that will never come.
    const size_t end = check_ != nullptr ? first_backward_ : actions_.size();
    for (; next_post_ < end && next_post_ <= last; ++next_post_) {
      const RecvPlan& plan = plans_[next_post_];
      if (plan.peer < 0) continue;
      PostedRecv posted;
      posted.buffer = ActivationBuffer();
      absl::StatusOr<std::unique_ptr<PendingOp>> op =
          o_.communicator->Recv(posted.buffer, plan.peer, plan.tag);
      if (!op.ok()) return op.status();
      posted.op = *std::move(op);
      posted_.emplace(next_post_, std::move(posted));
    }
    return absl::OkStatus();
  }

  absl::Status Timed(PendingOp& op) {
    const double before = Seconds();
    absl::Status st = op.Wait(o_.recv_timeout);
    timeline_.comm_seconds += Seconds() - before;
    return st;
  }

  // The tensor action j consumes from another stage: a posted receive or a
  // local hand-off.
  absl::StatusOr<at::Tensor> TakeInput(size_t j, MessageKind kind, int stage, int microbatch) {
    if (plans_[j].peer >= 0) {
      auto it = posted_.find(j);
      PostedRecv posted = std::move(it->second);
      posted_.erase(it);
      if (absl::Status st = Timed(*posted.op); !st.ok()) return st;
      return posted.buffer;
    }
    auto it = local_.find({kind, stage, microbatch});
    if (it == local_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no local ", kind == MessageKind::kActivation ? "activation" : "gradient",
                       " for virtual stage ", stage, " microbatch ", microbatch,
                       " (the producing pass has not run on this rank)"));
    }
    at::Tensor t = std::move(it->second);
    local_.erase(it);
    return t;
  }

  // Hands `tensor` to virtual stage `to_stage`: locally or over the network.
  absl::Status Deliver(at::Tensor tensor, MessageKind kind, int to_stage, int microbatch) {
    const int peer = WorkerOf(to_stage);
    if (peer == o_.rank) {
      local_[{kind, to_stage, microbatch}] = std::move(tensor);
      return absl::OkStatus();
    }
    tensor = tensor.contiguous();
    absl::StatusOr<std::unique_ptr<PendingOp>> op =
        o_.communicator->Send(tensor, peer, Tag(kind, to_stage, microbatch));
    if (!op.ok()) return op.status();
    // The tensor must outlive the send: keep it with the op.
    sends_.emplace_back(*std::move(op), absl::StrCat(kind == MessageKind::kActivation
                                                         ? "activation"
                                                         : "gradient",
                                                     " to virtual stage ", to_stage,
                                                     " microbatch ", microbatch));
    send_buffers_.push_back(std::move(tensor));
    return absl::OkStatus();
  }

  const LocalChunk* Chunk(int stage) const {
    auto it = o_.chunks.find(stage);
    return it == o_.chunks.end() ? nullptr : &it->second;
  }

  absl::Status RunAction(size_t j) {
    const Action& a = actions_[j];
    const LocalChunk* chunk = Chunk(a.stage);
    if (chunk == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("virtual stage ", a.stage, " is not held by rank ", o_.rank));
    }
    switch (a.kind) {
      case PassKind::kF:
        return Forward(j, a, *chunk);
      case PassKind::kB:
        return Backward(j, a, *chunk);
      case PassKind::kW: {
        timer_.Begin(j);
        if (a.bucket == sched::kAllBuckets) return chunk->store->RunW(a.microbatch);
        absl::StatusOr<const std::vector<at::Tensor>*> bucket = Bucket(a);
        if (!bucket.ok()) return bucket.status();
        return chunk->store->RunW(a.microbatch, *bucket);
      }
      case PassKind::kBW: {
        if (absl::Status st = Backward(j, a, *chunk); !st.ok()) return st;
        return chunk->store->RunW(a.microbatch);
      }
      case PassKind::kReduce: {
        std::vector<at::Tensor> parameters;
        if (a.bucket == sched::kAllBuckets) {
          for (const NamedTensor& t : chunk->model->parameters()) parameters.push_back(t.second);
        } else {
          absl::StatusOr<const std::vector<at::Tensor>*> bucket = Bucket(a);
          if (!bucket.ok()) return bucket.status();
          parameters = **bucket;
        }
        o_.reducer->Issue(std::move(parameters));
        return absl::OkStatus();
      }
    }
    return absl::InternalError("unknown pass kind");
  }

  // The parameters of the gradient bucket a partial W or reduction `a`
  // covers (GradientBuckets, with the schedule's bucket count for the
  // stage); computed once per stage and step.
  absl::StatusOr<const std::vector<at::Tensor>*> Bucket(const Action& a) {
    auto it = buckets_.find(a.stage);
    if (it == buckets_.end()) {
      absl::StatusOr<std::vector<std::vector<at::Tensor>>> split = GradientBuckets(
          *Chunk(a.stage)->model, sched::BucketsPerStage(schedule_)[a.stage]);
      if (!split.ok()) return absl::FailedPreconditionError(split.status().message());
      it = buckets_.emplace(a.stage, *std::move(split)).first;
    }
    return &it->second[a.bucket];
  }

  absl::Status Forward(size_t j, const Action& a, const LocalChunk& chunk) {
    const bool first = a.stage == 0;
    const bool last = a.stage == num_stages() - 1;
    MicrobatchData data;
    if (first || last) {
      data = batches_(step_, a.microbatch);
      data.inputs = ToDevice(data.inputs);
      data.targets = ToDevice(data.targets);
    }
    ForwardState state;
    if (first) {
      state.input = data.inputs;
    } else {
      absl::StatusOr<at::Tensor> in = TakeInput(j, MessageKind::kActivation, a.stage,
                                                a.microbatch);
      if (!in.ok()) return in.status();
      state.input = in->detach().requires_grad_(true);
    }
    timer_.Begin(j);
    if (forward_only_) {
      at::NoGradGuard no_grad;
      at::Tensor out = chunk.model->Forward(state.input);
      if (last) {
        AddLoss(LanguageModelLoss(out, data.targets));
        return absl::OkStatus();
      }
      return Deliver(out, MessageKind::kActivation, a.stage + 1, a.microbatch);
    }
    {
      WeightGradScope scope(chunk.store, a.microbatch);
      at::Tensor out = chunk.model->Forward(state.input);
      if (last) {
        at::Tensor loss = LanguageModelLoss(out, data.targets);
        AddLoss(loss);
        state.output = loss / double(schedule_.microbatches);
      } else {
        state.output = out;
      }
    }
    if (!last) {
      if (absl::Status st = Deliver(state.output.detach(), MessageKind::kActivation,
                                    a.stage + 1, a.microbatch);
          !st.ok()) {
        return st;
      }
    }
    forward_.emplace(std::make_pair(a.stage, a.microbatch), std::move(state));
    return absl::OkStatus();
  }

  absl::Status Backward(size_t j, const Action& a, const LocalChunk& chunk) {
    auto it = forward_.find({a.stage, a.microbatch});
    if (it == forward_.end()) {
      return absl::FailedPreconditionError("B before its F on this rank");
    }
    ForwardState state = std::move(it->second);
    forward_.erase(it);
    at::Tensor grad_output;
    if (a.stage < num_stages() - 1) {
      absl::StatusOr<at::Tensor> g = TakeInput(j, MessageKind::kGradient, a.stage,
                                               a.microbatch);
      if (!g.ok()) return g.status();
      grad_output = *std::move(g);
    }
    if (a.stage == num_stages() - 1 && o_.loss_scale != 1) {
      grad_output = at::full({}, o_.loss_scale, state.output.options());
    }
    timer_.Begin(j);
    state.output.backward(grad_output);
    if (a.stage > 0) {
      return Deliver(state.input.grad(), MessageKind::kGradient, a.stage - 1, a.microbatch);
    }
    return absl::OkStatus();
  }

  const ExecutorOptions& o_;
  const int64_t step_;
  const int generation_;
  const sched::Schedule& schedule_;
  const std::vector<Action>& actions_;
  const bool forward_only_;
  const BatchFn& batches_;
  const BeforeFirstBackward* check_;  // Null once run (or when none).
  const size_t first_backward_;
  const SteadyClock::time_point start_;
  PassTimer timer_;
  at::Tensor loss_sum_;  // Double; undefined until the first loss.

  StepTimeline timeline_;
  std::vector<RecvPlan> plans_;
  size_t next_post_ = 0;
  std::map<size_t, PostedRecv> posted_;
  std::map<std::tuple<MessageKind, int, int>, at::Tensor> local_;
  std::map<std::pair<int, int>, ForwardState> forward_;
  std::vector<std::pair<std::unique_ptr<PendingOp>, std::string>> sends_;
  std::vector<at::Tensor> send_buffers_;
  std::map<int, std::vector<std::vector<at::Tensor>>> buckets_;  // By virtual stage.
};

}  // namespace

absl::Status CheckSpeculativeForwards(const sched::Schedule& schedule) {
  // The forwards before each rank's first B: {virtual stage, microbatch}.
  std::set<std::pair<int, int>> speculative;
  for (const std::vector<Action>& actions : schedule.actions) {
    for (const Action& a : actions) {
      if (IsBackward(a)) break;
      if (a.kind == PassKind::kF) speculative.insert({a.stage, a.microbatch});
    }
  }
  for (size_t rank = 0; rank < schedule.actions.size(); ++rank) {
    for (const Action& a : schedule.actions[rank]) {
      if (IsBackward(a)) break;
      if (a.kind == PassKind::kF && a.stage > 0 &&
          speculative.count({a.stage - 1, a.microbatch}) == 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "rank ", rank, " runs ", sched::ActionToString(a),
            " before its first B, but its input comes from a forward that follows a B"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status PipelineExecutor::Validate(const sched::Schedule& schedule) const {
  const int p = options_.communicator->size();
  if (schedule.workers != p) {
    return absl::InvalidArgumentError(absl::StrCat("schedule has ", schedule.workers,
                                                   " workers, the job has ", p, " ranks"));
  }
  sched::Problem problem = sched::Problem::Uniform(schedule.workers, schedule.chunks,
                                                   schedule.microbatches, sched::StageCost{},
                                                   0.0);
  // Simulate checks the form (CheckSchedule) and finds deadlocks.
  if (absl::StatusOr<sched::SimulationResult> sim = sched::Simulate(problem, schedule);
      !sim.ok()) {
    return absl::Status(sim.status().code(),
                        absl::StrCat("schedule refused: ", std::string(sim.status().message())));
  }
  int reductions = 0;
  for (const Action& a : schedule.actions[options_.rank]) {
    // The simulation above checked that a set of partial ones is complete.
    reductions += sched::IsStageReduction(a);
  }
  if (reductions > 0 && options_.reducer == nullptr) {
    return absl::FailedPreconditionError(
        "schedule reduces gradients over data-parallel replicas (REDUCE_GRAD), but the job has "
        "one replica");
  }
  if (options_.reducer != nullptr && reductions != static_cast<int>(options_.chunks.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("the job has ", options_.reducer->replicas(), " data-parallel replicas: rank ",
                     options_.rank,
                     " needs one REDUCE_GRAD (whole, or one per bucket) per virtual stage it "
                     "holds (",
                     options_.chunks.size(), "), the schedule has ", reductions));
  }
  const std::vector<int> buckets = sched::BucketsPerStage(schedule);
  for (const auto& [stage, chunk] : options_.chunks) {
    if (buckets[stage] == 1) continue;
    if (absl::StatusOr<std::vector<std::vector<at::Tensor>>> split =
            GradientBuckets(*chunk.model, buckets[stage]);
        !split.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("schedule refused: ", std::string(split.status().message())));
    }
  }
  for (int s = 0; s < schedule.num_stages(); ++s) {
    const bool mine = schedule.worker_of_stage[s] == options_.rank;
    if (mine != (options_.chunks.count(s) == 1)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "schedule places virtual stage ", s, mine ? " on" : " off", " rank ", options_.rank,
          ", but this rank ", mine ? "does not hold" : "holds", " that chunk"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StepTimeline> PipelineExecutor::RunStep(int64_t step,
                                                       const sched::Schedule& schedule,
                                                       int generation,
                                                       const BeforeFirstBackward& check) {
  StepRun run(options_, step, generation, schedule, /*forward_only=*/false, options_.batches,
              check ? &check : nullptr);
  absl::StatusOr<StepTimeline> timeline = run.Run();
  if (!timeline.ok()) {
    for (auto& [stage, chunk] : options_.chunks) chunk.store->Clear();
  }
  return timeline;
}

absl::StatusOr<StepTimeline> PipelineExecutor::RunForwardOnly(int64_t tag_step,
                                                              const sched::Schedule& schedule,
                                                              int microbatches,
                                                              const BatchFn& batches) {
  sched::Schedule forward = schedule;
  forward.microbatches = microbatches;
  for (std::vector<Action>& actions : forward.actions) actions.clear();
  for (int mb = 0; mb < microbatches; ++mb) {
    for (int s = 0; s < forward.num_stages(); ++s) {
      forward.actions[forward.worker_of_stage[s]].push_back({PassKind::kF, s, mb});
    }
  }
  StepRun run(options_, tag_step, /*generation=*/0, forward, /*forward_only=*/true, batches,
              /*check=*/nullptr);
  return run.Run();
}

}  // namespace zbpp::worker
