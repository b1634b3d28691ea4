#include "coordinator/core/model_costs.h"

namespace zbpp::coordinator {
namespace {

bool IsLlama(const zbpp::v1::ModelSpec& model) { return model.architecture() == "llama"; }

}  // namespace

BlockCosts BlockCostsOf(const zbpp::v1::ModelSpec& model, double microbatch_size) {
  // In doubles: 4h² and vocab·h overflow int32 for sizes the spec check
  // admits (h <= 65536, vocab <= 2^20).
  const double s = model.seq_len();
  const double b = microbatch_size;
  const double h = model.hidden();
  const double a = model.heads();
  const double f = model.has_ffn_hidden() ? model.ffn_hidden() : 4 * h;
  const double attention_flops = 4 * s * s * b * h;
  const double scores_bytes = 5 * a * s * s * b;
  BlockCosts costs;
  if (IsLlama(model)) {
    const double kv = (model.has_kv_heads() ? model.kv_heads() : a) * (h / a);
    costs.parameters = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h;
    costs.forward_flops = 2 * s * b * (2 * h * h + 2 * h * kv + 3 * h * f) + attention_flops;
    costs.m_b_bytes = s * b * (12 * h + 4 * kv + 8 * f) + scores_bytes;
    costs.m_w_bytes = s * b * (12 * h + 4 * kv + 6 * f);
  } else {
    costs.parameters = 4 * h * h + 2 * h * f + 9 * h + f;
    costs.forward_flops = 2 * s * b * (4 * h * h + 2 * h * f) + attention_flops;
    costs.m_b_bytes = s * b * 34 * h + scores_bytes;
    costs.m_w_bytes = 32 * s * b * h;
  }
  return costs;
}

double EndParameters(const zbpp::v1::ModelSpec& model, int stage, int num_virtual_stages,
                     bool vocab_parallel) {
  const double h = model.hidden();
  const double vocab = model.vocab();
  const bool llama = IsLlama(model);
  double count = 0;
  if (stage == 0) count += ((vocab_parallel ? 0 : vocab) + (llama ? 0 : model.seq_len())) * h;
  if (stage == num_virtual_stages - 1) {
    count += (llama ? 1 : 2) * h;
    // One stage holding both ends of a tied model has one matrix.
    if (!(model.tie_embeddings() && stage == 0) && !vocab_parallel) count += vocab * h;
  }
  return count;
}

double LogitsBytes(const zbpp::v1::JobSpec& spec) {
  const bool sixteen_bit = spec.precision() == zbpp::v1::PRECISION_BF16 ||
                           spec.precision() == zbpp::v1::PRECISION_FP16;
  const double elements = double(spec.pipeline().microbatch_size()) * spec.model().seq_len() *
                          spec.model().vocab();
  return elements * (sixteen_bit ? 16 : 12);
}

double HeadForwardFlops(const zbpp::v1::JobSpec& spec) {
  return 2.0 * spec.pipeline().microbatch_size() * spec.model().seq_len() *
         spec.model().hidden() * spec.model().vocab();
}

}  // namespace zbpp::coordinator
