// What a block costs among other blocks (bench/results/calibration.md, "A
// block among blocks"): the demo's Llama (h = 128, 4 heads, 2 key/value
// heads, SwiGLU 352, vocabulary 8192, b = 4, s = 128) cut into chunks of k
// blocks and profiled by ProfileVirtualStage as a worker profiles its
// virtual stages, one thread, host memory kept as zbpp-worker keeps it.
// Why the calibration's layout parts hold several blocks
// (coordinator/core/planning.h, LayoutPartBlocks).
//
//   part_blocks_bench [--rounds=5]
//
// Prints, per k, the median over rounds of T_F + T_B + T_W per block of a
// middle chunk of k blocks, and of the head (a last chunk of k blocks with
// the final norm, the LM head and the loss, less the middle chunk of k).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "worker/model/model_chunk.h"
#include "worker/model/weight_grad_store.h"
#include "worker/runtime/device.h"
#include "worker/runtime/memory_meter.h"
#include "worker/runtime/stage_profile.h"

namespace zbpp::worker {
namespace {

// T_F + T_B + T_W of virtual stage `v` of the demo's Llama laid out as
// `layout` (3 repetitions after a warm-up, medians).
double Profiled(const std::vector<int>& layout, int v) {
  v1::ModelSpec spec;
  spec.set_architecture("llama");
  spec.set_hidden(128);
  spec.set_heads(4);
  spec.set_kv_heads(2);
  spec.set_ffn_hidden(352);
  spec.set_vocab(8192);
  spec.set_seq_len(128);
  spec.set_tie_embeddings(true);
  int layers = 0;
  for (int blocks : layout) layers += blocks;
  spec.set_layers(layers);
  ModelConfig config = *ModelConfigFromSpec(spec);
  config.layout = layout;
  std::unique_ptr<ModelChunk> chunk =
      *ModelChunk::Create(config, v, static_cast<int>(layout.size()), /*seed=*/11);
  {
    at::NoGradGuard no_grad;  // As StageTrainer: W adds into existing buffers.
    for (const NamedTensor& t : chunk->parameters()) {
      at::Tensor param = t.second;
      param.mutable_grad() = at::zeros_like(param);
    }
  }
  WeightGradStore store;
  DeviceMemoryMeter meter(c10::Device(c10::kCPU));
  StageProfileOptions o;
  o.chunk = chunk.get();
  o.store = &store;
  o.virtual_stage = v;
  o.microbatch_size = 4;
  o.seq_len = 128;
  o.hidden = 128;
  o.vocab = 8192;
  o.microbatches = 8;
  o.repetitions = 3;
  o.memory = &meter;
  const StageProfile p = *ProfileVirtualStage(o);
  return p.f_seconds + p.b_seconds + p.w_seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace zbpp::worker

int main(int argc, char** argv) {
  using zbpp::worker::Median;
  using zbpp::worker::Profiled;
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.first != "--rounds" || !absl::SimpleAtoi(kv.second, &rounds) || rounds < 1) {
      std::fprintf(stderr, "part_blocks_bench: bad flag \"%s\"\n", argv[i]);
      return 2;
    }
  }
  zbpp::worker::KeepFreedHostMemory();
  at::set_num_threads(1);
  const std::vector<int> ks = {1, 2, 3, 4, 6};
  std::vector<std::vector<double>> block(ks.size()), head(ks.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < ks.size(); ++i) {
      const int k = ks[i];
      const double middle = Profiled({1, k, 1}, 1);
      block[i].push_back(middle / k);
      head[i].push_back(Profiled({1, 1, k}, 2) - Profiled({1, k, 1}, 1));
    }
  }
  std::printf("demo Llama, vocab 8192, b = 4, s = 128, one thread: medians of %d rounds\n\n",
              rounds);
  std::printf("| blocks per chunk | block T_F+T_B+T_W ms | against one block alone | head ms | "
              "head / block |\n| ---: | ---: | ---: | ---: | ---: |\n");
  const double alone = Median(block[0]);
  for (size_t i = 0; i < ks.size(); ++i) {
    const double b = Median(block[i]);
    const double h = Median(head[i]);
    std::printf("| %d | %.2f | %.3f | %.2f | %.2f |\n", ks[i], b * 1e3, b / alone, h * 1e3,
                h / b);
  }
  return 0;
}
