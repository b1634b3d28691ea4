// Merged B+W passes against the same schedules run with every B and W
// apart: p pipeline ranks as threads of one process (one intra-op thread
// each) over the in-process communicator, a GPT, the schedules planned from
// the ranks' own calibration profile (T_F, T_B, T_W and T_BW per virtual
// stage, as the coordinator plans a calibrated version), each run with
// ExecutorOptions::merge_backward_passes on and off. A merged pair
// (sched::MergesWithNext: a B with its whole W right after it) runs as one
// pass: the B part, the send of its input gradient, the W part.
//
//   merge_bench [--stages=2] [--microbatches=8] [--steps=8] [--warmup=2]
//       [--rounds=3] [--schedules=1f1b,zb-h1,zb-2p] [--layers=4]
//       [--hidden=256] [--heads=4] [--seq-len=128] [--microbatch-size=4]
//       [--precision=fp32|bf16|fp16] [--device=cpu|cuda:N]
//
// Per schedule and mode: the median over --rounds runs of --steps steps
// (after --warmup) of the step time, the largest StepTimeline::step_seconds
// over the ranks (on a GPU, device time from CUDA events). Each round runs
// the two modes back to back from fresh trainers, in alternating order, so
// that the slow drift of a shared machine's load hits both. Also printed:
// the profile's T_B + T_W and T_BW of virtual stage 0, the merged pairs of
// each schedule, and the makespans the simulator predicts with and without
// the merges' T_BW. Synchronous validation, no data parallelism.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_clock.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/model/model_chunk.h"
#include "worker/runtime/device.h"
#include "worker/runtime/stage_trainer.h"

namespace zbpp::worker {
namespace {

struct Flags {
  int stages = 2, microbatches = 8, steps = 8, warmup = 2, rounds = 3;
  int layers = 4, hidden = 256, heads = 4, seq_len = 128, microbatch_size = 4;
  std::vector<std::string> schedules = {"1f1b", "zb-h1", "zb-2p"};
  std::string precision = "fp32";
  c10::Device device = c10::Device(c10::kCPU);
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  const std::map<std::string, int*> ints = {
      {"--stages", &f->stages},   {"--microbatches", &f->microbatches},
      {"--steps", &f->steps},     {"--warmup", &f->warmup},
      {"--rounds", &f->rounds},   {"--layers", &f->layers},
      {"--hidden", &f->hidden},   {"--heads", &f->heads},
      {"--seq-len", &f->seq_len}, {"--microbatch-size", &f->microbatch_size}};
  for (int i = 1; i < argc; ++i) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    bool ok = true;
    if (auto it = ints.find(kv.first); it != ints.end()) {
      ok = absl::SimpleAtoi(kv.second, it->second) &&
           *it->second >= (kv.first == "--warmup" ? 0 : 1);
    } else if (kv.first == "--schedules") {
      f->schedules = absl::StrSplit(kv.second, ',');
    } else if (kv.first == "--precision") {
      f->precision = kv.second;
      ok = kv.second == "fp32" || kv.second == "bf16" || kv.second == "fp16";
    } else if (kv.first == "--device") {
      absl::StatusOr<c10::Device> device = ParseDevice(kv.second);
      ok = device.ok();
      if (ok) f->device = *device;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "merge_bench: bad flag %s\n", argv[i]);
      return false;
    }
  }
  return true;
}

v1::JobSpec SpecOf(const Flags& f) {
  v1::JobSpec spec;
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(f.layers);
  model->set_hidden(f.hidden);
  model->set_heads(f.heads);
  model->set_vocab(256);
  model->set_seq_len(f.seq_len);
  spec.mutable_pipeline()->set_stages(f.stages);
  spec.mutable_pipeline()->set_chunks(1);
  spec.mutable_pipeline()->set_microbatches(f.microbatches);
  spec.mutable_pipeline()->set_microbatch_size(f.microbatch_size);
  spec.mutable_optimizer()->set_learning_rate(1e-4);
  spec.set_precision(f.precision == "bf16"   ? v1::PRECISION_BF16
                     : f.precision == "fp16" ? v1::PRECISION_FP16
                                             : v1::PRECISION_FP32);
  spec.set_seed(7);
  return spec;
}

MicrobatchData Batch(const Flags& f, int64_t step, int microbatch) {
  at::Generator gen = at::detail::createCPUGenerator(1000 * step + microbatch);
  at::Tensor tokens = at::randint(256, {f.microbatch_size, f.seq_len + 1}, gen, at::kLong);
  return {tokens.narrow(1, 0, f.seq_len).contiguous(), tokens.narrow(1, 1, f.seq_len).contiguous()};
}

// p trainers over one fresh in-process group; `merge`: merged pairs as one
// pass.
std::vector<std::unique_ptr<StageTrainer>> Trainers(const Flags& f, bool merge,
                                                   std::vector<std::unique_ptr<Communicator>>& group) {
  group = CreateInProcessGroup(f.stages);
  std::vector<std::unique_ptr<StageTrainer>> trainers;
  for (int r = 0; r < f.stages; ++r) {
    StageTrainerOptions o;
    o.spec = SpecOf(f);
    o.stage = r;
    o.virtual_stages = {r};
    o.communicator = group[r].get();
    o.device = f.device;
    o.train_batches = [&f](int64_t step, int mb) { return Batch(f, step, mb); };
    o.eval_batches = o.train_batches;
    o.merge_backward_passes = merge;
    absl::StatusOr<std::unique_ptr<StageTrainer>> t = StageTrainer::Create(o);
    if (!t.ok()) {
      std::fprintf(stderr, "merge_bench: %s\n", std::string(t.status().message()).c_str());
      std::exit(1);
    }
    trainers.push_back(*std::move(t));
  }
  return trainers;
}

// Runs `fn(rank)` on one thread per rank and waits.
template <typename Fn>
void PerRank(int p, Fn fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&fn, r] {
      at::set_num_threads(1);
      fn(r);
    });
  }
  for (std::thread& t : threads) t.join();
}

// The measured cost model: every rank's profile of its virtual stage.
sched::Problem ProfiledProblem(const Flags& f) {
  std::vector<std::unique_ptr<Communicator>> group;
  auto trainers = Trainers(f, true, group);
  sched::Problem problem;
  problem.stages = f.stages;
  problem.microbatches = f.microbatches;
  problem.virtual_stages.resize(f.stages);
  PerRank(f.stages, [&](int r) {
    absl::StatusOr<std::vector<StageProfile>> profile = trainers[r]->Profile(5);
    if (!profile.ok()) {
      std::fprintf(stderr, "merge_bench: %s\n", std::string(profile.status().message()).c_str());
      std::exit(1);
    }
    const StageProfile& s = profile->front();
    sched::VirtualStageCost& c = problem.virtual_stages[r];
    c.f_seconds = s.f_seconds;
    c.b_seconds = s.b_seconds;
    c.w_seconds = s.w_seconds;
    c.bw_seconds = s.bw_seconds;
    c.m_b_bytes = std::max<double>(1, s.m_b_bytes);
    c.m_w_bytes = std::min<double>(c.m_b_bytes, s.m_w_bytes);
  });
  return problem;
}

// Step times (the slowest rank's span) of --steps steps after --warmup.
std::vector<double> StepTimes(const Flags& f, const sched::Schedule& schedule, bool merge) {
  std::vector<std::unique_ptr<Communicator>> group;
  auto trainers = Trainers(f, merge, group);
  std::vector<std::vector<double>> per_rank(f.stages);
  PerRank(f.stages, [&](int r) {
    for (int step = 0; step < f.warmup + f.steps; ++step) {
      absl::StatusOr<StepResult> result = trainers[r]->RunStep(step, schedule);
      if (!result.ok()) {
        std::fprintf(stderr, "merge_bench: rank %d: %s\n", r,
                     std::string(result.status().message()).c_str());
        std::exit(1);
      }
      if (step >= f.warmup) per_rank[r].push_back(result->timeline.step_seconds);
    }
  });
  std::vector<double> steps(f.steps, 0);
  for (const auto& ranks : per_rank) {
    for (int i = 0; i < f.steps; ++i) steps[i] = std::max(steps[i], ranks[i]);
  }
  return steps;
}

int Run(const Flags& f) {
  std::printf("merge_bench: p = %d, m = %d, gpt layers %d hidden %d heads %d seq_len %d "
              "microbatch_size %d, %s on %s; %d rounds of %d steps (after %d)\n",
              f.stages, f.microbatches, f.layers, f.hidden, f.heads, f.seq_len,
              f.microbatch_size, f.precision.c_str(), f.device.str().c_str(), f.rounds, f.steps,
              f.warmup);
  const sched::Problem problem = ProfiledProblem(f);
  sched::Problem apart = problem;
  for (sched::VirtualStageCost& c : apart.virtual_stages) c.bw_seconds = 0;
  const sched::VirtualStageCost& c0 = problem.virtual_stages[0];
  std::printf("profile, virtual stage 0: T_F %.3f ms, T_B + T_W %.3f ms, T_BW %.3f ms (%+.1f%%)\n\n",
              1e3 * c0.f_seconds, 1e3 * (c0.b_seconds + c0.w_seconds), 1e3 * c0.bw_seconds,
              100 * (c0.bw_seconds / (c0.b_seconds + c0.w_seconds) - 1));
  std::printf("| schedule | merged pairs | simulated ms, merged / apart | step ms, merged | "
              "step ms, apart | merged / apart |\n|---|---:|---:|---:|---:|---:|\n");
  for (const std::string& name : f.schedules) {
    absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, problem);
    if (!schedule.ok()) {
      std::printf("| %s | %s | | | | |\n", name.c_str(),
                  std::string(schedule.status().message()).c_str());
      continue;
    }
    absl::StatusOr<sched::SimulationResult> merged_sim = sched::Simulate(problem, *schedule);
    absl::StatusOr<sched::SimulationResult> apart_sim = sched::Simulate(apart, *schedule);
    std::vector<double> merged, unmerged;
    for (int round = 0; round < f.rounds; ++round) {
      for (bool merge : round % 2 == 0 ? std::vector<bool>{true, false}
                                       : std::vector<bool>{false, true}) {
        std::vector<double> times = StepTimes(f, *schedule, merge);
        (merge ? merged : unmerged).insert((merge ? merged : unmerged).end(), times.begin(),
                                           times.end());
      }
    }
    const double a = bench::Median(merged), b = bench::Median(unmerged);
    std::printf("| %s | %d | %.2f / %.2f | %.2f | %.2f | %.3f |\n", name.c_str(),
                sched::CountMergedPairs(schedule->actions),
                merged_sim.ok() ? 1e3 * merged_sim->makespan_seconds : 0,
                apart_sim.ok() ? 1e3 * apart_sim->makespan_seconds : 0, 1e3 * a, 1e3 * b, a / b);
  }
  return 0;
}

}  // namespace
}  // namespace zbpp::worker

int main(int argc, char** argv) {
  zbpp::worker::Flags flags;
  if (!zbpp::worker::ParseFlags(argc, argv, &flags)) return 2;
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
  return zbpp::worker::Run(flags);
}
