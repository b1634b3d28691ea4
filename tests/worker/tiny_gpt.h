#ifndef ZBPP_TESTS_WORKER_TINY_GPT_H_
#define ZBPP_TESTS_WORKER_TINY_GPT_H_

#include <c10/core/ScalarType.h>

#include "worker/model/gpt.h"

namespace zbpp::worker {

/// A GPT small enough for exact comparisons in the worker's unit tests: 2
/// blocks (8 linear layers, 9 with the LM head), hidden 32, 4 heads, a
/// vocabulary of 64, 16 positions.
inline GptConfig TinyGptConfig(at::ScalarType compute_type = at::kFloat) {
  GptConfig config;
  config.layers = 2;
  config.hidden = 32;
  config.heads = 4;
  config.vocab = 64;
  config.seq_len = 16;
  config.ffn_hidden = 128;
  config.compute_type = compute_type;
  return config;
}

}  // namespace zbpp::worker

#endif  // ZBPP_TESTS_WORKER_TINY_GPT_H_
