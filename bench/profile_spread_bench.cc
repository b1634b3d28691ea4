// How repeatable the calibration profile is (bench/results/calibration.md,
// "Host memory kept"): the layout parts of the demo's Llama (four blocks;
// four blocks with the final norm, the LM head and the loss) profiled again
// and again by StageTrainer::ProfileLayoutParts, as a worker profiles them
// before its first step, then a few 1F1B steps of the whole model for the
// pass times a step measures. Each mode runs in a child process of its own,
// the modes alternating: glibc's default allocation, and
// KeepFreedHostMemory (worker/runtime/device.h), which zbpp-worker calls.
//
//   profile_spread_bench [--runs=3] [--rounds=10] [--vocab=8192]
//
// Prints, per mode, the median, smallest and largest profiled T_F + T_B + T_W
// of a block and of the head (the middle part over its blocks, and the head
// part less the middle one, as the coordinator derives them:
// coordinator/core/planning.h, PartCostsOf), their ratio, and a
// step's time per microbatch against the whole model's profiled F + B + W.
// One thread, no daemons; about 30 s per run on the project's 2-core machine.

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/runtime/device.h"
#include "worker/runtime/stage_trainer.h"

namespace zbpp::worker {
namespace {

constexpr int kMicrobatches = 8;
constexpr int kMicrobatchSize = 4;
constexpr int kSeqLen = 128;
// Blocks per layout part: what the coordinator asks of the demo's 8 blocks
// on 2 stages (coordinator/core/planning.h, LayoutPartBlocks).
constexpr int kPartBlocks = 4;

struct Flags {
  int runs = 3;
  int rounds = 10;
  int vocab = 8192;
  bool child = false;
  bool keep = false;
};

bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::pair<std::string, std::string> kv = absl::StrSplit(arg, absl::MaxSplits('=', 1));
    int value = 0;
    if (kv.first == "--child") {
      flags.child = true;
    } else if (kv.first == "--keep" && absl::SimpleAtoi(kv.second, &value)) {
      flags.keep = value != 0;
    } else if (kv.first == "--runs" && absl::SimpleAtoi(kv.second, &value) && value >= 1) {
      flags.runs = value;
    } else if (kv.first == "--rounds" && absl::SimpleAtoi(kv.second, &value) && value >= 1) {
      flags.rounds = value;
    } else if (kv.first == "--vocab" && absl::SimpleAtoi(kv.second, &value) && value >= 2) {
      flags.vocab = value;
    } else {
      std::fprintf(stderr, "profile_spread_bench: bad flag \"%s\"\n", arg.c_str());
      return false;
    }
  }
  return true;
}

// The demo's Llama (scripts/demo --model llama): 8 blocks, h = 128, 4 heads,
// 2 key/value heads, SwiGLU 352, tied embeddings, on one stage.
v1::JobSpec DemoLlama(int vocab) {
  v1::JobSpec spec;
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("llama");
  model->set_layers(8);
  model->set_hidden(128);
  model->set_heads(4);
  model->set_kv_heads(2);
  model->set_ffn_hidden(352);
  model->set_vocab(vocab);
  model->set_seq_len(kSeqLen);
  model->set_tie_embeddings(true);
  spec.mutable_pipeline()->set_stages(1);
  spec.mutable_pipeline()->set_microbatches(kMicrobatches);
  spec.mutable_pipeline()->set_microbatch_size(kMicrobatchSize);
  spec.mutable_optimizer()->set_learning_rate(1e-3);
  spec.set_seed(11);
  return spec;
}

double Total(const StageProfile& p) { return p.f_seconds + p.b_seconds + p.w_seconds; }

// One child: prints "part <block s> <head s>" per round, then "whole <s>"
// (the whole model's profiled F + B + W of one microbatch, median of
// `rounds`) and "step <s>" (a 1F1B step's seconds per microbatch, median of
// `rounds`).
int Child(const Flags& flags) {
  if (flags.keep) KeepFreedHostMemory();
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
  const int vocab = flags.vocab;
  std::vector<std::unique_ptr<Communicator>> comms = CreateInProcessGroup(1);
  StageTrainerOptions o;
  o.spec = DemoLlama(vocab);
  o.virtual_stages = {0};
  o.communicator = comms[0].get();
  o.device = c10::Device(c10::kCPU);
  o.train_batches = [vocab](int64_t step, int microbatch) {
    at::Generator gen = at::detail::createCPUGenerator(1000 * step + microbatch + 1);
    at::Tensor tokens = at::randint(vocab, {kMicrobatchSize, kSeqLen + 1}, gen, at::kLong);
    return MicrobatchData{tokens.narrow(1, 0, kSeqLen).contiguous(),
                          tokens.narrow(1, 1, kSeqLen).contiguous()};
  };
  o.eval_batches = o.train_batches;
  absl::StatusOr<std::unique_ptr<StageTrainer>> trainer = StageTrainer::Create(o);
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(
      "1f1b", sched::Problem::Uniform(1, 1, kMicrobatches, sched::VirtualStageCost{}, 0.0));
  if (!trainer.ok() || !schedule.ok()) {
    std::fprintf(stderr, "profile_spread_bench: %s\n",
                 (!trainer.ok() ? trainer.status() : schedule.status()).ToString().c_str());
    return 1;
  }
  std::vector<double> whole, steps;
  for (int round = 0; round < flags.rounds; ++round) {
    absl::StatusOr<std::vector<StageProfile>> parts =
        (*trainer)->ProfileLayoutParts(1, kPartBlocks);
    absl::StatusOr<std::vector<StageProfile>> profile = (*trainer)->Profile(1);
    if (!parts.ok() || !profile.ok()) {
      std::fprintf(stderr, "profile_spread_bench: %s\n",
                   (!parts.ok() ? parts.status() : profile.status()).ToString().c_str());
      return 1;
    }
    const double blocks = Total((*parts)[1]);
    std::printf("part %.9f %.9f\n", blocks / kPartBlocks, Total((*parts)[2]) - blocks);
    whole.push_back(Total((*profile)[0]));
    const auto begin = std::chrono::steady_clock::now();
    absl::StatusOr<StepResult> step = (*trainer)->RunStep(round, *schedule);
    if (!step.ok()) {
      std::fprintf(stderr, "profile_spread_bench: %s\n", step.status().ToString().c_str());
      return 1;
    }
    steps.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() /
        kMicrobatches);
  }
  std::sort(whole.begin(), whole.end());
  std::sort(steps.begin(), steps.end());
  std::printf("whole %.9f\nstep %.9f\n", whole[whole.size() / 2], steps[steps.size() / 2]);
  return 0;
}

struct Samples {
  std::vector<double> block, head, ratio, whole, step;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string Spread(const std::vector<double>& v, double scale, const char* unit) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const double median = Median(v);
  return absl::StrFormat("%.2f%s (%.2f–%.2f, %+.0f %% / %+.0f %%)", median * scale, unit,
                         *lo * scale, *hi * scale, 100 * (*lo / median - 1),
                         100 * (*hi / median - 1));
}

int Parent(const char* self, const Flags& flags) {
  std::map<bool, Samples> samples;
  for (int run = 0; run < flags.runs; ++run) {
    for (bool keep : run % 2 == 0 ? std::vector<bool>{false, true} : std::vector<bool>{true, false}) {
      const std::string command =
          absl::StrCat(self, " --child --keep=", keep ? 1 : 0, " --rounds=", flags.rounds,
                       " --vocab=", flags.vocab);
      FILE* pipe = popen(command.c_str(), "r");
      if (pipe == nullptr) return 1;
      char line[256];
      Samples& s = samples[keep];
      while (std::fgets(line, sizeof line, pipe) != nullptr) {
        double a = 0, b = 0;
        if (std::sscanf(line, "part %lf %lf", &a, &b) == 2) {
          s.block.push_back(a);
          s.head.push_back(b);
          s.ratio.push_back(b / a);
        } else if (std::sscanf(line, "whole %lf", &a) == 1) {
          s.whole.push_back(a);
        } else if (std::sscanf(line, "step %lf", &a) == 1) {
          s.step.push_back(a);
        }
      }
      if (pclose(pipe) != 0) {
        std::fprintf(stderr, "profile_spread_bench: the child \"%s\" failed\n", command.c_str());
        return 1;
      }
    }
  }
  std::printf(
      "demo Llama, vocab %d, b = %d, s = %d: %d runs of %d rounds per mode, alternating\n\n"
      "| host memory | block T_F+T_B+T_W ms (median, range) | head ms | head / block | "
      "step per microbatch / whole-model profile (medians of runs) |\n"
      "| --- | --- | --- | --- | --- |\n",
      flags.vocab, kMicrobatchSize, kSeqLen, flags.runs, flags.rounds);
  for (bool keep : {false, true}) {
    const Samples& s = samples[keep];
    std::printf("| %s | %s | %s | %s | %.3f |\n",
                keep ? "kept (KeepFreedHostMemory)" : "glibc's default",
                Spread(s.block, 1e3, "").c_str(), Spread(s.head, 1e3, "").c_str(),
                Spread(s.ratio, 1, "").c_str(), Median(s.step) / Median(s.whole));
  }
  return 0;
}

}  // namespace
}  // namespace zbpp::worker

int main(int argc, char** argv) {
  zbpp::worker::Flags flags;
  if (!zbpp::worker::ParseFlags(argc, argv, flags)) return 2;
  return flags.child ? zbpp::worker::Child(flags) : zbpp::worker::Parent(argv[0], flags);
}
