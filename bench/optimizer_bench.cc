// The optimizer step of one rank (worker/runtime/adamw.h) over the
// parameters of a model chunk: Step (with and without a clipping
// coefficient), InvertStep (post-update validation's in-place rollback),
// ZeroGrad and LocalGradNormSquared, each the median of --reps calls after
// --warmup, with the memory traffic each implies.
//
//   optimizer_bench [--architecture=gpt|llama] [--layers=4] [--hidden=1024]
//       [--heads=16] [--vocab=256] [--seq-len=128] [--reps=20] [--warmup=3]
//       [--device=cpu|cuda:N]
//
// One chunk holds the whole model (embedding, blocks, head). On the CPU the
// times are this thread's CPU time with one intra-op thread, as the worker
// runs; on a GPU wall-clock time between device synchronisations.

#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_clock.h"
#include "worker/model/model_chunk.h"
#include "worker/runtime/adamw.h"
#include "worker/runtime/device.h"

namespace zbpp::worker {
namespace {

c10::Device g_device = c10::Device(c10::kCPU);

int Run(int argc, char** argv) {
  ModelConfig config{/*architecture=*/"gpt", /*layers=*/4, /*hidden=*/1024, /*heads=*/16,
                     /*vocab=*/256, /*seq_len=*/128, /*ffn_hidden=*/0};
  int reps = 20, warmup = 3;
  for (int i = 1; i < argc; ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.first == "--architecture") {
      config.architecture = kv.second;
      continue;
    }
    if (kv.first == "--device") {
      absl::StatusOr<c10::Device> device = ParseDevice(kv.second);
      if (!device.ok()) {
        std::fprintf(stderr, "optimizer_bench: %s\n",
                     std::string(device.status().message()).c_str());
        return 2;
      }
      g_device = *device;
      continue;
    }
    int* target = nullptr;
    if (kv.first == "--layers") target = &config.layers;
    if (kv.first == "--hidden") target = &config.hidden;
    if (kv.first == "--heads") target = &config.heads;
    if (kv.first == "--vocab") target = &config.vocab;
    if (kv.first == "--seq-len") target = &config.seq_len;
    if (kv.first == "--reps") target = &reps;
    if (kv.first == "--warmup") target = &warmup;
    if (target == nullptr || !absl::SimpleAtoi(kv.second, target) ||
        *target < (target == &warmup ? 0 : 1)) {
      std::fprintf(stderr, "optimizer_bench: bad flag %s\n", argv[i]);
      return 2;
    }
  }
  config.ffn_hidden = 4 * config.hidden;
  absl::StatusOr<ModelConfig> checked = ModelConfigFromSpec(ModelSpecOf(config));
  if (!checked.ok()) {
    std::fprintf(stderr, "optimizer_bench: %s\n", std::string(checked.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ModelChunk>> chunk =
      ModelChunk::Create(*checked, 0, 1, /*seed=*/1, g_device);
  if (!chunk.ok()) return 2;
  int64_t count = 0;
  for (const auto& [name, p] : (*chunk)->parameters()) {
    const_cast<at::Tensor&>(p).mutable_grad() = at::randn_like(p) * 1e-3;
    count += p.numel();
  }
  AdamWOptions options;
  options.learning_rate = 1e-4;
  AdamW adam((*chunk)->parameters(), options);
  int64_t step = 0;
  bool bad = false;
  // Bytes each call reads and writes, float32: Step reads p, g, m, v and
  // writes p, m, v; the inverse the same; ZeroGrad writes g; the norm reads g.
  const std::vector<std::pair<const char*, std::pair<double, std::function<void()>>>> rows = {
      {"Step", {28.0, [&] { adam.Step(step++, 1.0); }}},
      {"Step, clipped (grad_scale 0.5)", {36.0, [&] { adam.Step(step++, 0.5); }}},
      {"Step + InvertStep", {56.0, [&] {
         adam.Step(step, 1.0);
         adam.InvertStep(step, 1.0);
       }}},
      {"LocalGradNormSquared", {4.0, [&] { adam.LocalGradNormSquared(&bad); }}},
      {"ZeroGrad", {4.0, [&] { adam.ZeroGrad(); }}},
  };
  std::printf("optimizer_bench: %s, %d layers, hidden %d, vocab %d: %lld parameters in %zu "
              "tensors on %s (at::get_num_threads() = %d), median of %d after %d\n\n"
              "| call | ms | GB/s |\n|---|---:|---:|\n",
              checked->architecture.c_str(), checked->layers, checked->hidden, checked->vocab,
              static_cast<long long>(count), (*chunk)->parameters().size(),
              g_device.str().c_str(), at::get_num_threads(), reps, warmup);
  for (const auto& [name, row] : rows) {
    const double seconds = bench::TimeMedian(g_device, warmup, reps, row.second);
    std::printf("| %s | %.3f | %.1f |\n", name, 1e3 * seconds, 1e-9 * row.first * count / seconds);
  }
  return 0;
}

}  // namespace
}  // namespace zbpp::worker

int main(int argc, char** argv) {
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
  at::manual_seed(1);
  return zbpp::worker::Run(argc, argv);
}
