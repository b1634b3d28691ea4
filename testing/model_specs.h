#ifndef ZBPP_TESTING_MODEL_SPECS_H_
#define ZBPP_TESTING_MODEL_SPECS_H_

// Shared by the tests and the benchmarks: published models' shapes as the
// job spec's ModelSpec (proto/zbpp/v1/job_spec.proto), header-only.

#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator::testing {

/// Llama 3 8B's shape (Meta's config.json): 32 layers, h 4096, 32 heads,
/// 8 key/value heads, SwiGLU 14336, vocabulary 128256, RoPE θ 500000,
/// untied, s = 8192 (its context length).
inline zbpp::v1::ModelSpec Llama3_8B() {
  zbpp::v1::ModelSpec model;
  model.set_architecture("llama");
  model.set_layers(32);
  model.set_hidden(4096);
  model.set_heads(32);
  model.set_kv_heads(8);
  model.set_ffn_hidden(14336);
  model.set_vocab(128256);
  model.set_seq_len(8192);
  model.set_rope_theta(500000);
  return model;
}

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTING_MODEL_SPECS_H_
