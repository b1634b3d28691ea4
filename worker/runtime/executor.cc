#include "worker/runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "scheduler/comm_order.h"
#include "scheduler/simulator.h"
#include "worker/model/vocabulary_shard.h"
#include "worker/runtime/device.h"
#include "worker/runtime/passes.h"
#include "worker/runtime/step_messages.h"

namespace zbpp::worker {
namespace {

using sched::Action;
using sched::PassKind;
using SteadyClock = std::chrono::steady_clock;

// B or fused BW: a pass that needs the next stage's gradient.
bool IsBackward(const Action& a) { return a.kind == PassKind::kB || a.kind == PassKind::kBW; }

// Where the speculative prefix ends (sched::SpeculativePrefixLengths): the
// first B, BW or T, the first pass that computes a gradient.
bool EndsSpeculativePrefix(const Action& a) { return IsBackward(a) || a.kind == PassKind::kT; }

// One stage's execution of one step. Lives for the step only.
class StepRun {
 public:
  // `forward_only`: evaluation (no graph, losses not scaled), with `batches`
  // instead of the options' training data.
  // `check` (may be null) runs before the first B; see BeforeFirstBackward.
  // `orders`: the schedule's messages per pair of stages, in the order
  // every worker issues them; `prefix`: each stage's speculative prefix length
  // (read only with a `check`).
  StepRun(const ExecutorOptions& options, int64_t step, int generation,
          const sched::Schedule& schedule, const sched::PairOrders& orders,
          const std::vector<int>& prefix, bool forward_only, const BatchFn& batches,
          const BeforeFirstBackward* check)
      : o_(options), step_(step), schedule_(schedule),
        actions_(schedule.actions[options.stage]), forward_only_(forward_only),
        vocabulary_parallel_(sched::HoldsVocabularyPasses(schedule)),
        batches_(batches), check_(check), first_backward_(FirstBackward(actions_)),
        last_pass_(LastPass(actions_)),
        start_(SteadyClock::now()), timer_(options.device, start_, actions_.size()),
        messages_(options, step, generation, schedule, orders, prefix, check != nullptr, start_,
                  timeline_) {}

  absl::StatusOr<StepTimeline> Run() {
    timeline_.start = start_;
    timeline_.action_start_seconds.resize(actions_.size());
    timeline_.action_end_seconds.resize(actions_.size());
    for (size_t j = 0; j < actions_.size(); ++j) {
      if (j == first_backward_ && check_ != nullptr) {
        const double before = Seconds();
        absl::StatusOr<bool> replay = (*check_)();
        timeline_.validation_check_seconds += Seconds() - before;
        check_ = nullptr;
        if (!replay.ok()) return replay.status();
        if (*replay) return Discard(j);
      }
      // The W part of a merged pair follows its B part at once: the B
      // part's send went out just before, and nothing else can be issued
      // between the two.
      if (!MergedW(j)) {
        if (absl::Status st = messages_.Issue(check_ != nullptr); !st.ok()) return st;
      }
      if (absl::Status st = RunAction(j); !st.ok()) {
        return absl::Status(st.code(), absl::StrCat("step ", step_, ", action #", j, " ",
                                                    DescribeAction(actions_[j]), ": ",
                                                    std::string(st.message())));
      }
      if (actions_[j].kind != PassKind::kReduce) {  // A reduction is timed by the reducer.
        timer_.End(j);
        if (o_.pass_slowdown > 1) {
          std::this_thread::sleep_for(
              std::chrono::duration<double>((o_.pass_slowdown - 1) * timer_.Duration(j)));
          timer_.End(j);
        }
      }
      // The pass's output goes out once the pass (stretched like a slower
      // device's) ended. After the last pass that is no send wait of the
      // span's: the reductions' wait or the drain after the step.
      const double sent_before = timeline_.send_wait_seconds;
      if (absl::Status st = messages_.Issue(check_ != nullptr); !st.ok()) return st;
      if (j >= last_pass_) timeline_.send_wait_seconds = sent_before;
    }
    ResolvePasses();
    if (absl::Status st = AwaitReductions(); !st.ok()) return st;
    timeline_.step_seconds =
        actions_.empty() ? 0
                         : *std::max_element(timeline_.action_end_seconds.begin(),
                                             timeline_.action_end_seconds.end());
    // Every receive was consumed; drain the sends so their buffers can go.
    // After the last action: not part of the step's communication time.
    if (absl::Status st = messages_.WaitSends(); !st.ok()) return st;
    return std::move(timeline_);
  }

 private:
  // Whether action j is the W of a merged pair that this executor runs as
  // one pass with its B (sched::MergesWithNext).
  bool MergedW(size_t j) const {
    return o_.merge_backward_passes && sched::MergedIntoPrevious(actions_, j);
  }

  static size_t FirstBackward(const std::vector<Action>& actions) {
    return std::find_if(actions.begin(), actions.end(), EndsSpeculativePrefix) - actions.begin();
  }
  // The index of the last action that is a pass, not a reduction.
  static size_t LastPass(const std::vector<Action>& actions) {
    size_t j = actions.size();
    while (j > 1 && actions[j - 1].kind == PassKind::kReduce) --j;
    return j == 0 ? 0 : j - 1;
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

  // The step is given up before action `first_backward` (only forwards ran):
  // the speculative messages are completed (StepMessages::CompleteSpeculative)
  // so that every pair's order stands where both stages expect it for the
  // replay.
  absl::StatusOr<StepTimeline> Discard(size_t first_backward) {
    if (absl::Status st = messages_.CompleteSpeculative(); !st.ok()) return st;
    ResolvePasses();
    timeline_.discarded = true;
    timeline_.discarded_forwards = static_cast<int>(first_backward);
    timeline_.action_start_seconds.resize(first_backward);
    timeline_.action_end_seconds.resize(first_backward);
    timeline_.step_seconds = Seconds();
    return std::move(timeline_);
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
    // Already there: an EmbeddingExchange's input, computed on the device.
    if (o_.device.is_cpu() || host.device() == o_.device) return host;
    return host.pin_memory().to(o_.device, /*non_blocking=*/true);
  }

  int num_virtual_stages() const { return schedule_.num_virtual_stages(); }
  int StageOf(int virtual_stage) const {
    return schedule_.StageOf(VirtualStage(virtual_stage)).value();
  }

  const LocalChunk* Chunk(int stage) const {
    auto it = o_.chunks.find(stage);
    return it == o_.chunks.end() ? nullptr : &it->second;
  }

  absl::Status RunAction(size_t j) {
    const Action& a = actions_[j];
    if (sched::IsVocabularyPass(a.kind)) {
      if (o_.synthetic.has_value()) return SyntheticPass(j, a);
      if (o_.vocabulary == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("stage ", o_.stage, " holds no vocabulary shard"));
      }
      return a.kind == PassKind::kS ? VocabularyForwardPass(j, a) : VocabularyBackwardPass(j, a);
    }
    const LocalChunk* chunk = Chunk(a.virtual_stage.value());
    if (chunk == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("virtual stage ", a.virtual_stage.value(), " is not held by stage ", o_.stage));
    }
    if (o_.synthetic.has_value() && a.kind != PassKind::kReduce) return SyntheticPass(j, a);
    if (chunk->model == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("virtual stage ", a.virtual_stage.value(), " has no model on stage ", o_.stage));
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
      case PassKind::kS:
      case PassKind::kT:
        break;  // Run above.
    }
    return absl::InternalError("unknown pass kind");
  }

  // The parameters of the gradient bucket a partial W or reduction `a`
  // covers (GradientBuckets, with the schedule's bucket count for the
  // stage); computed once per stage and step.
  absl::StatusOr<const std::vector<at::Tensor>*> Bucket(const Action& a) {
    auto it = buckets_.find(a.virtual_stage.value());
    if (it == buckets_.end()) {
      absl::StatusOr<std::vector<std::vector<at::Tensor>>> split = GradientBuckets(
          *Chunk(a.virtual_stage.value())->model, sched::BucketsPerVirtualStage(schedule_)[a.virtual_stage.value()]);
      if (!split.ok()) return absl::FailedPreconditionError(split.status().message());
      it = buckets_.emplace(a.virtual_stage.value(), *std::move(split)).first;
    }
    return &it->second[a.bucket];
  }

  // Synthetic compute (ExecutorOptions::synthetic): takes the pass's input
  // like the real pass, then waits until the pass's start plus its
  // cost-model duration, so the time spent making the output (zeros) and the
  // executor's bookkeeping inside the pass are part of that duration, not
  // added to it.
  absl::Status SyntheticPass(size_t j, const Action& a) {
    const bool last = a.virtual_stage.value() == num_virtual_stages() - 1;
    if ((a.kind == PassKind::kF && a.virtual_stage.value() > 0) || a.kind == PassKind::kS ||
        (IsBackward(a) && !last)) {
      absl::StatusOr<at::Tensor> in = messages_.TakeInput(j);
      if (!in.ok()) return in.status();
    } else if (a.kind == PassKind::kT || (IsBackward(a) && vocabulary_parallel_)) {
      absl::StatusOr<std::vector<at::Tensor>> in = messages_.TakeInputsFromEveryStage(j);
      if (!in.ok()) return in.status();
    }
    const bool merged_w = MergedW(j);
    timer_.Begin(j);
    const SteadyClock::time_point begin = SteadyClock::now();
    int buckets = 1;
    if (a.kind == PassKind::kW && a.bucket != sched::kAllBuckets) {
      if (synthetic_buckets_.empty()) synthetic_buckets_ = sched::BucketsPerVirtualStage(schedule_);
      buckets = synthetic_buckets_[a.virtual_stage.value()];
    }
    double seconds = SyntheticPassSeconds(*o_.synthetic, a, step_, buckets, o_.stage);
    if (merged_w) {
      // A merged pair waits T_BW in all: T_B in its B part, the rest here.
      const Action fused{PassKind::kBW, a.virtual_stage, a.microbatch};
      seconds = std::max(0.0, SyntheticPassSeconds(*o_.synthetic, fused, step_, buckets,
                                                   o_.stage) -
                                  SyntheticPassSeconds(*o_.synthetic, actions_[j - 1], step_,
                                                       buckets, o_.stage));
    }
    if (a.kind == PassKind::kF) {
      if (last && vocabulary_parallel_) {
        messages_.DeliverToEveryStage(j, ActivationZeros(), MessageKind::kActivation, a.microbatch);
      } else if (last) {
        AddLoss(at::scalar_tensor(o_.synthetic->loss, at::kDouble));
      } else {
        messages_.Deliver(j, ActivationZeros(), MessageKind::kActivation, a.virtual_stage.value() + 1, a.microbatch);
      }
    } else if (IsBackward(a) && a.virtual_stage.value() > 0) {
      messages_.Deliver(j, ActivationZeros(), MessageKind::kGradient, a.virtual_stage.value() - 1, a.microbatch);
    } else if (a.kind == PassKind::kS) {
      if (!synthetic_statistics_.defined()) {
        synthetic_statistics_ =
            at::zeros({3, o_.microbatch_size, o_.seq_len},
                      at::TensorOptions().dtype(at::kFloat).device(o_.device));
      }
      messages_.DeliverToEveryStage(j, synthetic_statistics_, MessageKind::kGradient, a.microbatch);
    } else if (a.kind == PassKind::kT) {
      if (StageOf(num_virtual_stages() - 1) == o_.stage) {
        AddLoss(at::scalar_tensor(o_.synthetic->loss, at::kDouble));
      }
      messages_.Deliver(j, ActivationZeros(), MessageKind::kGradient, num_virtual_stages() - 1, a.microbatch);
    }
    std::this_thread::sleep_until(
        begin + std::chrono::duration_cast<SteadyClock::duration>(
                    std::chrono::duration<double>(seconds)));
    return absl::OkStatus();
  }

  // One tensor of zeros serves every synthetic output of the step: nothing
  // writes a sent or handed-over tensor, and p stages on a few cores should
  // spend their CPU on the runtime, not on filling buffers.
  const at::Tensor& ActivationZeros() {
    if (!synthetic_zeros_.defined()) {
      synthetic_zeros_ = at::zeros({o_.microbatch_size, o_.seq_len, o_.hidden},
                                   at::TensorOptions().dtype(at::kFloat).device(o_.device));
    }
    return synthetic_zeros_;
  }

  absl::Status Forward(size_t j, const Action& a, const LocalChunk& chunk) {
    const bool first = a.virtual_stage.value() == 0;
    // The pass that ends in the loss; under vocabulary parallelism the T
    // passes compute it instead.
    const bool last = a.virtual_stage.value() == num_virtual_stages() - 1 && !vocabulary_parallel_;
    MicrobatchData data;
    if (first || last) {
      data = batches_(step_, a.microbatch);
      data.inputs = ToDevice(data.inputs);
      data.targets = ToDevice(data.targets);
    }
    at::Tensor input;
    if (first) {
      input = data.inputs;
    } else {
      absl::StatusOr<at::Tensor> in = messages_.TakeInput(j);
      if (!in.ok()) return in.status();
      input = in->detach().requires_grad_(true);
    }
    timer_.Begin(j);
    if (forward_only_) {
      at::NoGradGuard no_grad;
      at::Tensor out = chunk.model->Forward(input);
      if (last) {
        AddLoss(LanguageModelLoss(out, data.targets));
        return absl::OkStatus();
      }
      SendForward(j, a, out);
      return absl::OkStatus();
    }
    at::Tensor loss;
    ForwardState state = ForwardPass(*chunk.model, chunk.store, a.microbatch, std::move(input),
                                     data.targets, schedule_.microbatches, &loss);
    if (last) AddLoss(loss);
    if (!last) SendForward(j, a, state.output.detach());
    forward_.emplace(std::make_pair(a.virtual_stage.value(), a.microbatch), std::move(state));
    return absl::OkStatus();
  }

  // An F's output to the next virtual stage, or from the last one (under
  // vocabulary parallelism: the final norm's output) to every stage's S.
  void SendForward(size_t j, const Action& a, const at::Tensor& out) {
    if (a.virtual_stage.value() == num_virtual_stages() - 1) {
      messages_.DeliverToEveryStage(j, out, MessageKind::kActivation, a.microbatch);
    } else {
      messages_.Deliver(j, out, MessageKind::kActivation, a.virtual_stage.value() + 1, a.microbatch);
    }
  }

  // S (docs/training.md, "Vocabulary parallelism"): this stage's shard of
  // the logits of the last virtual stage's output, whose statistics go to
  // every stage's T.
  absl::Status VocabularyForwardPass(size_t j, const Action& a) {
    absl::StatusOr<at::Tensor> hidden = messages_.TakeInput(j);
    if (!hidden.ok()) return hidden.status();
    const at::Tensor targets = ToDevice(batches_(step_, a.microbatch).targets);
    timer_.Begin(j);
    VocabularyForward state;
    const at::Tensor statistics = o_.vocabulary->Forward(*hidden, targets, &state);
    if (!forward_only_) vocabulary_forward_.emplace(a.microbatch, std::move(state));
    messages_.DeliverToEveryStage(j, statistics, MessageKind::kGradient, a.microbatch);
    return absl::OkStatus();
  }

  // T: the loss from every stage's statistics (recorded by the stage that
  // holds the last virtual stage), and in training the shard's weight
  // gradient and its part of the last virtual stage's output gradient.
  absl::Status VocabularyBackwardPass(size_t j, const Action& a) {
    absl::StatusOr<std::vector<at::Tensor>> statistics = messages_.TakeInputsFromEveryStage(j);
    if (!statistics.ok()) return statistics.status();
    const bool reports_loss = StageOf(num_virtual_stages() - 1) == o_.stage;
    if (forward_only_) {
      timer_.Begin(j);
      if (reports_loss) AddLoss(VocabularyShard::Loss(*statistics));
      return absl::OkStatus();
    }
    auto it = vocabulary_forward_.find(a.microbatch);
    if (it == vocabulary_forward_.end()) {
      return absl::FailedPreconditionError("T before its S on this stage");
    }
    const VocabularyForward state = std::move(it->second);
    vocabulary_forward_.erase(it);
    timer_.Begin(j);
    at::Tensor loss;
    at::Tensor grad = o_.vocabulary->Backward(
        state, *statistics, o_.loss_scale / schedule_.microbatches, reports_loss ? &loss : nullptr);
    if (reports_loss) AddLoss(loss);
    messages_.Deliver(j, std::move(grad), MessageKind::kGradient, num_virtual_stages() - 1, a.microbatch);
    return absl::OkStatus();
  }

  absl::Status Backward(size_t j, const Action& a, const LocalChunk& chunk) {
    auto it = forward_.find({a.virtual_stage.value(), a.microbatch});
    if (it == forward_.end()) {
      return absl::FailedPreconditionError("B before its F on this stage");
    }
    ForwardState state = std::move(it->second);
    forward_.erase(it);
    at::Tensor grad_output;
    if (a.virtual_stage.value() < num_virtual_stages() - 1) {
      absl::StatusOr<at::Tensor> g = messages_.TakeInput(j);
      if (!g.ok()) return g.status();
      grad_output = *std::move(g);
    } else if (vocabulary_parallel_) {
      // The shards' parts of the final norm's output gradient, summed in
      // stage order.
      absl::StatusOr<std::vector<at::Tensor>> parts = messages_.TakeInputsFromEveryStage(j);
      if (!parts.ok()) return parts.status();
      grad_output = (*parts)[0].clone();
      for (size_t r = 1; r < parts->size(); ++r) grad_output.add_((*parts)[r]);
    }
    timer_.Begin(j);
    at::Tensor input_grad = BackwardPass(state, std::move(grad_output), o_.loss_scale);
    if (a.virtual_stage.value() > 0) messages_.Deliver(j, std::move(input_grad), MessageKind::kGradient, a.virtual_stage.value() - 1, a.microbatch);
    return absl::OkStatus();
  }

  const ExecutorOptions& o_;
  const int64_t step_;
  const sched::Schedule& schedule_;
  const std::vector<Action>& actions_;
  const bool forward_only_;
  // The schedule holds S and T passes (sched::HoldsVocabularyPasses).
  const bool vocabulary_parallel_;
  const BatchFn& batches_;
  const BeforeFirstBackward* check_;  // Null once run (or when none).
  const size_t first_backward_;
  const size_t last_pass_;
  const SteadyClock::time_point start_;
  PassTimer timer_;
  at::Tensor loss_sum_;  // Double; undefined until the first loss.

  StepTimeline timeline_;
  StepMessages messages_;
  std::map<std::pair<int, int>, ForwardState> forward_;
  std::map<int, VocabularyForward> vocabulary_forward_;  // By microbatch: S's for its T.
  std::map<int, std::vector<std::vector<at::Tensor>>> buckets_;  // By virtual stage.
  std::vector<int> synthetic_buckets_;  // BucketsPerVirtualStage, once a partial W needs it.
  at::Tensor synthetic_zeros_;          // ActivationZeros, once made.
  at::Tensor synthetic_statistics_;     // An S's zeros, once made.
};

}  // namespace

absl::StatusOr<StepTimeline> PipelineExecutor::RunStep(int64_t step,
                                                       const sched::Schedule& schedule,
                                                       int generation,
                                                       const BeforeFirstBackward& check) {
  absl::StatusOr<const SchedulePlan*> plan = PlanFor(schedule);
  if (!plan.ok()) return plan.status();
  StepRun run(options_, step, generation, schedule, (*plan)->orders, (*plan)->prefix,
              /*forward_only=*/false, options_.batches, check ? &check : nullptr);
  absl::StatusOr<StepTimeline> timeline = run.Run();
  if (!timeline.ok()) {
    for (auto& [stage, chunk] : options_.chunks) {
      if (chunk.store != nullptr) chunk.store->Clear();
    }
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
  const bool vocabulary_parallel = sched::HoldsVocabularyPasses(schedule);
  const VirtualStage last(forward.num_virtual_stages() - 1);
  for (int mb = 0; mb < microbatches; ++mb) {
    for (int s = 0; s < forward.num_virtual_stages(); ++s) {
      const VirtualStage vs(s);
      forward.ActionsOf(forward.StageOf(vs)).push_back({PassKind::kF, vs, mb});
    }
    if (!vocabulary_parallel) continue;
    // The loss from every stage's shard (VocabularyShard::Loss in T).
    for (Stage r : forward.AllStages()) {
      forward.ActionsOf(r).push_back({PassKind::kS, last, mb});
      forward.ActionsOf(r).push_back({PassKind::kT, last, mb});
    }
  }
  StepRun run(options_, tag_step, /*generation=*/0, forward, sched::ForwardOnlyPairOrders(forward),
              /*prefix=*/{}, /*forward_only=*/true, batches, /*check=*/nullptr);
  return run.Run();
}

absl::StatusOr<const PipelineExecutor::SchedulePlan*> PipelineExecutor::PlanFor(
    const sched::Schedule& schedule) {
  if (plan_ != nullptr && plan_->schedule == schedule) return plan_.get();
  absl::StatusOr<sched::PairOrders> orders = sched::DerivePairOrders(schedule);
  if (!orders.ok()) return orders.status();
  auto plan = std::make_unique<SchedulePlan>();
  plan->schedule = schedule;
  plan->orders = *std::move(orders);
  plan->prefix = sched::SpeculativePrefixLengths(schedule);
  plan->speculation_allowed = sched::CheckSpeculativePrefixes(schedule, plan->orders).ok();
  plan_ = std::move(plan);
  return plan_.get();
}

bool PipelineExecutor::SpeculationAllowed(const sched::Schedule& schedule) {
  absl::StatusOr<const SchedulePlan*> plan = PlanFor(schedule);
  return plan.ok() && (*plan)->speculation_allowed;
}

}  // namespace zbpp::worker
