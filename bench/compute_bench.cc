// Compute efficiency of one rank's passes (one process, one thread): F, B and
// W of each model chunk of a p-stage cut, per microbatch, against the
// physical ceiling of this core — plain at::mm / at::bmm calls of the very
// GEMM shapes those passes contain.
//
//   compute_bench [--architecture=gpt|llama] [--layers=4] [--hidden=256]
//       [--heads=4] [--kv-heads=heads] [--seq-len=128] [--microbatch-size=4]
//       [--vocab=256] [--ffn=4h] [--stages=2] [--reps=15] [--warmup=3]
//       [--precision=fp32|bf16|fp16] [--device=cpu|cuda:N] [--pipeline=P:M]
//       [--profile]
//
// --architecture picks the family (worker/model/model_chunk.h; llama with
// --kv-heads key/value heads, untied); a Llama-3-8B-shaped layer is
// --architecture=llama --hidden=4096 --heads=32 --kv-heads=8 --ffn=14336
// --seq-len=4096 --vocab=128256.
// --precision sets the model's compute type (worker/model/model_chunk.h) and the
// ceiling's GEMMs; --device runs everything there (on a GPU the times are
// wall-clock between device synchronisations, and the caching allocator's
// statistics give each chunk's M_B and M_W); --pipeline=P:M simulates 1F1B,
// ZB-H1, ZB-2p and ZB-V for P stages and M microbatches of this model with
// the measured per-layer T_F, T_B, T_W (comm 0); --profile adds, per chunk,
// the split B then W against the fused backward by operator (LibTorch's
// profiler: self CPU time, or kernel time on a GPU), to show where the
// split's cost goes.
//
// Passes run as worker/runtime/executor.cc runs them: F inside a
// WeightGradScope (the SplitLinear layers queue (x, dY) for W), the last
// chunk's loss scaled by 1/m, B = autograd backward from the received
// gradient (or the loss), W = WeightGradStore::RunW, each repetition from
// zeroed gradient buffers (kept, as between training steps); the fused
// backward (no scope: plain autograd) from the same state. Every row is the
// median over --reps repetitions after --warmup, on the CPU in this thread's
// CPU time (robust to other processes on a shared core).
//
// FLOPs (T = b·s tokens, h hidden, f ffn, V vocab, per transformer layer;
// L = the linears' Σ out·in: gpt 4h² + 2h·f (qkv 3h², proj h², fc h·f, fc2
// f·h), llama 2h² + 2h·h_kv + 3h·f (q, o h², k, v h·h_kv, gate, up, down
// h·f), h_kv = kv_heads·h/heads):
//   F: linears 2·T·L + attention 4·b·s²·h (QKᵀ and A·V, causal mask not
//      exploited)
//   B: linears' dX 2·T·L + attention backward 8·b·s²·h
//   W: linears' dW 2·T·L
//   last chunk: + LM head 2·T·h·V in each of F, B and W.
// Norms, GELU / SiLU, RoPE, softmax, embeddings and the loss are not counted
// (they are O(T·h) and O(b·a·s²) element-wise work), so they lower the
// achieved rate: that is the point of the comparison.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/CachingDeviceAllocator.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_clock.h"
#include "bench/op_profile.h"
#include "coordinator/core/model_costs.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "worker/model/gpt.h"
#include "worker/model/split_linear.h"
#include "worker/model/weight_grad_store.h"
#include "worker/runtime/device.h"

namespace zbpp::worker {
namespace {

struct Flags {
  ModelConfig model{/*architecture=*/"gpt", /*layers=*/4, /*hidden=*/256, /*heads=*/4,
                    /*vocab=*/256, /*seq_len=*/128, /*ffn_hidden=*/0};
  int microbatch_size = 4;
  int stages = 2;
  int reps = 15;
  int warmup = 3;
  std::string precision = "fp32";
  c10::Device device = c10::Device(c10::kCPU);
  int pipeline_stages = 0;  ///< --pipeline=P:M; 0: no simulation.
  int pipeline_microbatches = 0;
  bool profile = false;  ///< --profile: B+W against the fused backward by operator.
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.first == "--architecture") {
      flags->model.architecture = kv.second;
      continue;
    }
    if (kv.first == "--precision") {
      flags->precision = kv.second;
      v1::Precision precision;
      if (!v1::Precision_Parse("PRECISION_" + absl::AsciiStrToUpper(kv.second), &precision) ||
          precision == v1::PRECISION_UNSPECIFIED) {
        std::fprintf(stderr, "compute_bench: --precision must be fp32, bf16 or fp16\n");
        return false;
      }
      flags->model.compute_type = ComputeTypeOf(precision);
      continue;
    }
    if (kv.first == "--device") {
      absl::StatusOr<c10::Device> device = ParseDevice(kv.second);
      if (!device.ok()) {
        std::fprintf(stderr, "compute_bench: %s\n", std::string(device.status().message()).c_str());
        return false;
      }
      flags->device = *device;
      continue;
    }
    if (kv.first == "--profile" && kv.second.empty()) {
      flags->profile = true;
      continue;
    }
    if (kv.first == "--pipeline") {
      std::pair<std::string, std::string> pm = absl::StrSplit(kv.second, absl::MaxSplits(':', 1));
      if (!absl::SimpleAtoi(pm.first, &flags->pipeline_stages) ||
          !absl::SimpleAtoi(pm.second, &flags->pipeline_microbatches) ||
          flags->pipeline_stages < 1 || flags->pipeline_microbatches < 1) {
        std::fprintf(stderr, "compute_bench: --pipeline must be P:M, got %s\n", argv[i]);
        return false;
      }
      continue;
    }
    int* target = nullptr;
    if (kv.first == "--layers") target = &flags->model.layers;
    if (kv.first == "--hidden") target = &flags->model.hidden;
    if (kv.first == "--heads") target = &flags->model.heads;
    if (kv.first == "--kv-heads") target = &flags->model.kv_heads;
    if (kv.first == "--seq-len") target = &flags->model.seq_len;
    if (kv.first == "--vocab") target = &flags->model.vocab;
    if (kv.first == "--ffn") target = &flags->model.ffn_hidden;
    if (kv.first == "--microbatch-size") target = &flags->microbatch_size;
    if (kv.first == "--stages") target = &flags->stages;
    if (kv.first == "--reps") target = &flags->reps;
    if (kv.first == "--warmup") target = &flags->warmup;
    if (target == nullptr || !absl::SimpleAtoi(kv.second, target) ||
        *target < (target == &flags->warmup ? 0 : 1)) {
      std::fprintf(stderr, "compute_bench: bad flag %s\n", argv[i]);
      return false;
    }
  }
  if (flags->model.ffn_hidden == 0) flags->model.ffn_hidden = 4 * flags->model.hidden;
  // The worker's own checks, naming the field (model.kv_heads, ...).
  absl::StatusOr<ModelConfig> checked = ModelConfigFromSpec(ModelSpecOf(flags->model));
  if (!checked.ok()) {
    std::fprintf(stderr, "compute_bench: %s\n", std::string(checked.status().message()).c_str());
    return false;
  }
  checked->compute_type = flags->model.compute_type;
  flags->model = *checked;
  if (flags->model.layers % flags->stages != 0) {
    std::fprintf(stderr, "compute_bench: --stages must divide --layers\n");
    return false;
  }
  return true;
}

/// The device the bench runs on (--device); set once in main.
c10::Device g_device = c10::Device(c10::kCPU);

/// bench::DeviceSeconds on the bench's device.
double Now() { return bench::DeviceSeconds(g_device); }

/// Bytes the device's caching allocator holds now; nullopt on the CPU,
/// which has no such allocator.
std::optional<double> AllocatedBytes() {
  if (g_device.is_cpu()) return std::nullopt;
  const c10::CachingDeviceAllocator::DeviceStats stats =
      c10::getDeviceAllocator(g_device.type())->getDeviceStats(g_device.index());
  return static_cast<double>(
      stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
          .current);
}

/// Floating-point tensors of the bench: the compute type, on the device.
at::TensorOptions Floats(const Flags& flags) {
  return at::TensorOptions().dtype(flags.model.compute_type).device(flags.device);
}

/// One GEMM of a pass: `count` calls of [m, k] x [k, n] (batched `batch`
/// times), laid out as the model code lays it out.
struct Gemm {
  const char* what;
  int64_t batch, m, k, n;
  bool a_transposed;  ///< A is the transposed view of a [k, m] tensor (W's dYᵀ).
  bool b_transposed;  ///< B is the transposed view of an [n, k] tensor (Wᵀ, Kᵀ).
  int count;
  double flops() const { return 2.0 * count * batch * m * k * n; }
};

/// The GEMMs of F, B and W of one chunk (index 0, 1, 2).
std::vector<Gemm> PassGemms(const ModelConfig& c, int64_t b, int blocks, bool last,
                            int pass) {
  const int64_t t = b * c.seq_len, h = c.hidden, f = c.ffn_hidden, s = c.seq_len;
  const int64_t ba = b * c.heads, d = h / c.heads, kv = int64_t{c.kv_heads} * d;
  // A block's linears as (out, in): gpt's fused qkv, proj, fc, fc2; llama's
  // q, k, v, o, gate, up, down.
  const std::vector<std::pair<int64_t, int64_t>> linears =
      c.architecture == "llama"
          ? std::vector<std::pair<int64_t, int64_t>>{{h, h}, {kv, h}, {kv, h}, {h, h},
                                                     {f, h}, {f, h}, {h, f}}
          : std::vector<std::pair<int64_t, int64_t>>{{3 * h, h}, {h, h}, {f, h}, {h, f}};
  std::vector<Gemm> out;
  auto add_linear = [&](int64_t o, int64_t i, int count) {
    if (pass == 0) out.push_back({"F x·Wᵀ", 1, t, i, o, false, true, count});
    if (pass == 1) out.push_back({"B dY·W", 1, t, o, i, false, false, count});
    if (pass == 2) out.push_back({"W dYᵀ·x", 1, o, t, i, true, false, count});
  };
  for (const auto& [o, i] : linears) add_linear(o, i, blocks);
  if (pass == 0) {
    out.push_back({"F Q·Kᵀ", ba, s, d, s, false, true, blocks});
    out.push_back({"F A·V", ba, s, s, d, false, false, blocks});
  } else if (pass == 1) {
    out.push_back({"B dS·K, dSᵀ·Q", ba, s, s, d, false, false, 2 * blocks});
    out.push_back({"B dY·Vᵀ", ba, s, d, s, false, true, blocks});
    out.push_back({"B Aᵀ·dY", ba, s, s, d, true, false, blocks});
  }
  if (last) add_linear(c.vocab, h, 1);
  return out;
}

/// Median seconds of one call of `g` (all its `count` calls).
double TimeGemm(const Gemm& g, const Flags& flags) {
  at::Tensor a = g.a_transposed ? at::randn({g.batch, g.k, g.m}, Floats(flags)).transpose(1, 2)
                                : at::randn({g.batch, g.m, g.k}, Floats(flags));
  at::Tensor bm = g.b_transposed ? at::randn({g.batch, g.n, g.k}, Floats(flags)).transpose(1, 2)
                                 : at::randn({g.batch, g.k, g.n}, Floats(flags));
  if (g.batch == 1) {
    a = a.select(0, 0);
    bm = bm.select(0, 0);
  }
  at::Tensor c;
  const double one = bench::TimeMedian(g_device, flags.warmup, flags.reps, [&] {
    c = g.batch == 1 ? at::mm(a, bm) : at::bmm(a, bm);
  });
  return one * g.count;
}

/// Measured passes of one chunk, seconds per microbatch.
struct PassTimes {
  double f = 0, b = 0, w = 0;
  double fused_bw = 0;  ///< Backward with no scope: plain autograd, B and W fused.
  /// B then W back to back, timed as one pass: the executor's merged pair
  /// (sched::MergesWithNext), what the profile's T_BW measures.
  double merged_bw = 0;
  /// Device bytes held from the end of F until B (M_B) and from B until W
  /// (M_W), per microbatch; nullopt on the CPU.
  std::optional<double> m_b_bytes, m_w_bytes;
};

/// One chunk's passes on fixed inputs, as the executor runs them.
class ChunkRunner {
 public:
  ChunkRunner(const ModelChunk& chunk, const Flags& flags) : chunk_(chunk) {
    const ModelConfig& c = flags.model;
    const int64_t b = flags.microbatch_size, s = c.seq_len, h = c.hidden;
    const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong).device(flags.device);
    tokens_ = at::randint(c.vocab, {b, s}, longs);
    targets_ = at::randint(c.vocab, {b, s}, longs);
    // The residual stream between chunks is float32 in every precision.
    const at::TensorOptions residual = at::TensorOptions().device(flags.device);
    grad_ = at::randn({b, s, h}, residual) * 1e-3;
    hidden_ = at::randn({b, s, h}, residual);
  }

  /// Zeroes every `.grad` in place, keeping the buffers, as the trainer
  /// does between steps (AdamW::ZeroGrad): W and the fused backward then
  /// add into existing gradients, as every microbatch of a step does.
  void ZeroGrads() {
    for (const auto& [name, p] : chunk_.parameters()) {
      at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
      if (g.defined()) g.zero_();
    }
  }
  /// F with its state, as the executor's ForwardState: inside a
  /// WeightGradScope when `split`; the last chunk's loss scaled by 1/m.
  at::Tensor Forward(bool split) {
    // A fresh leaf each time, as the executor's received activation.
    at::Tensor input = chunk_.is_first() ? tokens_ : hidden_.detach().requires_grad_(true);
    std::optional<WeightGradScope> scope;
    if (split) scope.emplace(&store_, 0);
    at::Tensor out = chunk_.Forward(input);
    if (chunk_.is_last()) out = LanguageModelLoss(out, targets_) / double(kMicrobatches);
    return out;
  }
  /// B (after a split F) or the fused backward.
  void Backward(at::Tensor& out) {
    if (chunk_.is_last()) {
      out.backward();
    } else {
      out.backward(grad_);
    }
  }
  void W() {
    if (!store_.RunW(0).ok()) std::abort();
  }

 private:
  static constexpr int kMicrobatches = 8;  // Loss scale only, as the executor's 1/m.
  const ModelChunk& chunk_;
  at::Tensor tokens_, targets_, grad_, hidden_;
  WeightGradStore store_;
};

PassTimes TimeChunk(const ModelChunk& chunk, const Flags& flags) {
  ChunkRunner run(chunk, flags);
  std::vector<double> fs, bs, ws, fused, merged, m_b, m_w;
  for (int i = 0; i < flags.warmup + flags.reps; ++i) {
    run.ZeroGrads();
    const double f_start = Now();
    const std::optional<double> before = AllocatedBytes();
    at::Tensor out = run.Forward(/*split=*/true);
    const double f_end = Now();
    const std::optional<double> after_f = AllocatedBytes();
    run.Backward(out);
    const double b_end = Now();
    const std::optional<double> after_b = AllocatedBytes();
    run.W();
    const double w_end = Now();
    if (before.has_value() && i >= flags.warmup) {
      m_b.push_back(*after_f - *before);
      m_w.push_back(*after_b - *before);
    }
    // From the same state as the split passes (zero gradients), or the
    // fused backward would add onto the split's.
    run.ZeroGrads();
    at::Tensor plain = run.Forward(/*split=*/false);
    const double fused_start = Now();
    run.Backward(plain);
    const double fused_end = Now();
    // The merged pass: B then W with no clock read (no device
    // synchronisation) between them.
    run.ZeroGrads();
    at::Tensor again = run.Forward(/*split=*/true);
    const double merged_start = Now();
    run.Backward(again);
    run.W();
    const double merged_end = Now();
    if (i < flags.warmup) continue;
    merged.push_back(merged_end - merged_start);
    fs.push_back(f_end - f_start);
    bs.push_back(b_end - f_end);
    ws.push_back(w_end - b_end);
    fused.push_back(fused_end - fused_start);
  }
  PassTimes t;
  t.f = bench::Median(fs);
  t.b = bench::Median(bs);
  t.w = bench::Median(ws);
  t.fused_bw = bench::Median(fused);
  t.merged_bw = bench::Median(merged);
  if (!m_b.empty()) {
    t.m_b_bytes = bench::Median(m_b);
    t.m_w_bytes = bench::Median(m_w);
  }
  return t;
}

/// --profile: where the split backward's time goes against the fused one's,
/// by operator (bench::ProfileOps: self time on the CPU, kernel time on a
/// GPU), per microbatch over min(--reps, 5) profiled repetitions after
/// --warmup; the operators whose times differ most first.
void ProfileChunk(const ModelChunk& chunk, const Flags& flags) {
  ChunkRunner run(chunk, flags);
  const bool cuda = flags.device.is_cuda();
  const int profiled = std::min(flags.reps, 5);  // A profiler session each: a few suffice.
  auto profile = [&](bool split) {
    std::map<std::string, double> total;
    for (int i = 0; i < flags.warmup + profiled; ++i) {
      run.ZeroGrads();
      at::Tensor out = run.Forward(split);
      if (!g_device.is_cpu()) SynchronizeDevice(g_device);
      auto backward = [&] {
        run.Backward(out);
        if (split) run.W();
        if (!g_device.is_cpu()) SynchronizeDevice(g_device);
      };
      if (i < flags.warmup) {
        backward();
        continue;
      }
      for (const auto& [name, seconds] : bench::ProfileOps(backward, cuda)) {
        total[name] += seconds / profiled;
      }
    }
    return total;
  };
  std::map<std::string, std::pair<double, double>> by_name;  // (B+W, fused) seconds.
  for (const auto& [name, seconds] : profile(true)) by_name[name].first = seconds;
  for (const auto& [name, seconds] : profile(false)) by_name[name].second = seconds;
  std::vector<std::pair<std::string, std::pair<double, double>>> rows(by_name.begin(),
                                                                      by_name.end());
  double split_sum = 0, fused_sum = 0;
  for (const auto& r : rows) {
    split_sum += r.second.first;
    fused_sum += r.second.second;
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return std::abs(a.second.first - a.second.second) > std::abs(b.second.first - b.second.second);
  });
  std::printf("\nChunk %d, B then W against the fused backward by %s, ms per microbatch "
              "(profiled, so slower than the table above):\n\n| operator | B+W | fused | "
              "difference |\n|---|---:|---:|---:|\n",
              chunk.virtual_stage(), cuda ? "kernel (device time)" : "operator (self thread CPU time)");
  for (size_t i = 0; i < rows.size() && i < 16; ++i) {
    const auto& [name, t] = rows[i];
    std::printf("| `%s` | %.3f | %.3f | %+.3f |\n", name.substr(0, 90).c_str(), 1e3 * t.first,
                1e3 * t.second, 1e3 * (t.first - t.second));
  }
  std::printf("| all %zu | %.3f | %.3f | %+.3f |\n", rows.size(), 1e3 * split_sum,
              1e3 * fused_sum, 1e3 * (split_sum - fused_sum));
}

/// Bubble rates of 1F1B, ZB-H1, ZB-2p and ZB-V for --pipeline=P:M of this
/// model, with chunk 0's measured costs per transformer layer on every
/// stage and no communication time (the paper's Table 5 setting without
/// T_comm).
void Simulate(const Flags& flags, const PassTimes& chunk0) {
  const ModelConfig& c = flags.model;
  const coordinator::BlockCosts block =
      coordinator::BlockCostsOf(ModelSpecOf(c), flags.microbatch_size);
  const int p = flags.pipeline_stages, m = flags.pipeline_microbatches;
  const int blocks_measured = c.layers / flags.stages;
  const double f = chunk0.f / blocks_measured, b = chunk0.b / blocks_measured,
               w = chunk0.w / blocks_measured;
  std::printf("\nSimulated, p = %d, m = %d, %d layers, per layer T_F %.3f ms, T_B %.3f ms, "
              "T_W %.3f ms (chunk 0 / %d), comm 0:\n\n| schedule | bubble rate | peak memory "
              "(M_B) |\n|---|---:|---:|\n",
              p, m, c.layers, 1e3 * f, 1e3 * b, 1e3 * w, blocks_measured);
  for (const char* name : {"1f1b", "zb-h1", "zb-2p", "zb-v"}) {
    const int chunks = sched::FindSchedule(name)->default_chunks;
    const double layers_per_stage = double(c.layers) / (p * chunks);
    sched::VirtualStageCost cost;
    cost.f_seconds = f * layers_per_stage;
    cost.b_seconds = b * layers_per_stage;
    cost.w_seconds = w * layers_per_stage;
    cost.m_b_bytes = block.m_b_bytes * layers_per_stage;
    cost.m_w_bytes = block.m_w_bytes * layers_per_stage;
    const sched::Problem problem = sched::Problem::Uniform(p, chunks, m, cost, 0.0);
    absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, problem);
    absl::StatusOr<sched::SimulationResult> result =
        schedule.ok() ? sched::Simulate(problem, *schedule)
                      : absl::StatusOr<sched::SimulationResult>(schedule.status());
    if (!result.ok()) {
      std::printf("| %s | %s | |\n", name, std::string(result.status().message()).c_str());
      continue;
    }
    std::printf("| %s | %.4f | %.1f |\n", name, result->bubble_rate, result->max_peak_memory_m_b);
  }
}

void Report(const Flags& flags) {
  const ModelConfig& c = flags.model;
  const int blocks = c.layers / flags.stages;
  std::printf(
      "model: %s, layers %d (%d per chunk), hidden %d, heads %d (%d key/value), ffn %d, "
      "vocab %d, seq_len %d, microbatch_size %d; %s on %s (at::get_num_threads() = %d)\n\n",
      c.architecture.c_str(), c.layers, blocks, c.hidden, c.heads, c.kv_heads, c.ffn_hidden,
      c.vocab, c.seq_len, flags.microbatch_size, flags.precision.c_str(),
      flags.device.str().c_str(), at::get_num_threads());
  const coordinator::BlockCosts block =
      coordinator::BlockCostsOf(ModelSpecOf(c), flags.microbatch_size);
  std::printf(
      "| chunk | pass | ms / microbatch | GFLOP | GFLOP/s | GEMM-only ms | GEMM GFLOP/s "
      "(ceiling) | achieved / ceiling |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
  const int last_stage = flags.stages - 1;
  std::vector<std::string> notes, gemm_rows, memory_rows, merge_rows;
  std::vector<std::unique_ptr<ModelChunk>> profiles;  // --profile: chunks to profile.
  PassTimes first_chunk;
  for (int stage : {0, last_stage}) {
    absl::StatusOr<std::unique_ptr<ModelChunk>> chunk =
        ModelChunk::Create(c, stage, flags.stages, /*seed=*/1234, flags.device);
    if (!chunk.ok()) std::abort();
    const PassTimes t = TimeChunk(**chunk, flags);
    if (stage == 0) first_chunk = t;
    // Per transformer layer, analytic (16-bit activations; gpt: the Zero
    // Bubble paper's §2 M_B = s·b·(34h + 5as), M_W = 32·s·b·h bytes; llama:
    // coordinator/core/model_costs.h).
    const double analytic_m_b = block.m_b_bytes * blocks;
    const double analytic_m_w = block.m_w_bytes * blocks;
    if (t.m_b_bytes.has_value()) {
      memory_rows.push_back(absl::StrFormat("| %d | %.1f | %.1f | %.1f | %.1f |", stage,
                                            *t.m_b_bytes / 1e6, analytic_m_b / 1e6,
                                            *t.m_w_bytes / 1e6, analytic_m_w / 1e6));
    }
    const double measured[3] = {t.f, t.b, t.w};
    const char* names[3] = {"F", "B", "W"};
    double total_flops = 0, total_gemm = 0;
    for (int pass = 0; pass < 3; ++pass) {
      double flops = 0, gemm = 0;
      for (const Gemm& g : PassGemms(c, flags.microbatch_size, blocks, (*chunk)->is_last(), pass)) {
        const double seconds = TimeGemm(g, flags);
        flops += g.flops();
        gemm += seconds;
        if (stage == last_stage) {
          gemm_rows.push_back(absl::StrFormat(
              "| %s | %d x [%d, %d] x [%d, %d] | %d | %.3f | %.1f |", g.what, g.batch, g.m, g.k,
              g.k, g.n, g.count, 1e3 * seconds / g.count, 1e-9 * g.flops() / seconds));
        }
      }
      total_flops += flops;
      total_gemm += gemm;
      std::printf("| %d | %s | %.2f | %.3f | %.1f | %.2f | %.1f | %.0f%% |\n", stage,
                  names[pass], 1e3 * measured[pass], 1e-9 * flops, 1e-9 * flops / measured[pass],
                  1e3 * gemm, 1e-9 * flops / gemm, 100 * gemm / measured[pass]);
    }
    const double sum = t.f + t.b + t.w;
    std::printf("| %d | **F+B+W** | %.2f | %.3f | %.1f | %.2f | %.1f | **%.0f%%** |\n", stage,
                1e3 * sum, 1e-9 * total_flops, 1e-9 * total_flops / sum, 1e3 * total_gemm,
                1e-9 * total_flops / total_gemm, 100 * total_gemm / sum);
    char line[512];
    std::snprintf(line, sizeof line, "| %d | %.2f | %.0f%% | %.2f | %.2f (%+.1f%%) |", stage,
                  1e3 * (t.b + t.w), 100 * t.w / (t.b + t.w), 1e3 * t.fused_bw,
                  1e3 * (t.b + t.w - t.fused_bw), 100 * (t.b + t.w - t.fused_bw) / t.fused_bw);
    notes.emplace_back(line);
    for (const auto& [what, seconds] :
         {std::pair{"F + B + W", t.f + t.b + t.w}, std::pair{"F + merged BW", t.f + t.merged_bw},
          std::pair{"F + fused backward", t.f + t.fused_bw}}) {
      merge_rows.push_back(absl::StrFormat("| %d | %s | %.3f | %+.1f%% |", stage, what,
                                           1e3 * seconds,
                                           100 * (seconds / (t.f + t.fused_bw) - 1)));
    }
    if (flags.profile) profiles.push_back(std::move(*chunk));
  }
  std::printf(
      "\n| chunk | B+W ms | W share of B+W | fused BW ms (no scope) | split cost ms |\n"
      "|---|---:|---:|---:|---:|\n");
  for (const std::string& line : notes) std::printf("%s\n", line.c_str());
  std::printf("\nThe backward three ways (merged BW: B then W back to back as one pass, as the "
              "executor runs a merged pair):\n\n| chunk | passes | ms / microbatch | against "
              "F + fused backward |\n|---|---|---:|---:|\n");
  for (const std::string& line : merge_rows) std::printf("%s\n", line.c_str());
  for (const auto& chunk : profiles) ProfileChunk(*chunk, flags);
  std::printf("\nGEMMs of chunk %d (the ceiling's parts):\n\n| GEMM | batch x [m, k] x [k, n] | "
              "calls | ms / call | GFLOP/s |\n|---|---|---:|---:|---:|\n",
              last_stage);
  for (const std::string& line : gemm_rows) std::printf("%s\n", line.c_str());
  if (!memory_rows.empty()) {
    std::printf("\nActivation memory per microbatch, from the caching allocator (held after F; "
                "after B, with B's parameter gradients) against the analytic ones:\n\n"
                "| chunk | M_B MB | analytic M_B MB | M_W MB | analytic M_W MB |\n"
                "|---|---:|---:|---:|---:|\n");
    for (const std::string& line : memory_rows) std::printf("%s\n", line.c_str());
  }
  if (flags.pipeline_stages > 0) Simulate(flags, first_chunk);
  std::printf("\ntarget: F+B+W at >= 60%% of the GEMM ceiling; W ~ half of B+W\n");
}

}  // namespace
}  // namespace zbpp::worker

int main(int argc, char** argv) {
  zbpp::worker::Flags flags;
  if (!zbpp::worker::ParseFlags(argc, argv, &flags)) return 2;
  zbpp::worker::g_device = flags.device;
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
  at::manual_seed(1);
  std::printf("compute_bench: %ld online cores, reps %d (median), warmup %d\n", sysconf(_SC_NPROCESSORS_ONLN), flags.reps, flags.warmup);
  zbpp::worker::Report(flags);
  return 0;
}
