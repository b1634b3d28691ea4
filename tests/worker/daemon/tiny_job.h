#ifndef ZBPP_TESTS_WORKER_DAEMON_TINY_JOB_H_
#define ZBPP_TESTS_WORKER_DAEMON_TINY_JOB_H_

#include <cstdint>

#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker::testing {

/// A job small enough to run in milliseconds per step on two CPU ranks: a
/// 2-layer GPT (hidden 16, 2 heads, 8 positions) on synthetic tokens, p = 2
/// stages of one chunk, 4 microbatches of 2 sequences, ZB-H1, `steps` steps.
inline v1::JobSpec TinyJob(int64_t steps) {
  v1::JobSpec spec;
  spec.set_name("tiny");
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(2);
  model->set_hidden(16);
  model->set_heads(2);
  model->set_vocab(256);  // Byte-level tokens (DatasetSpec).
  model->set_seq_len(8);
  spec.mutable_dataset()->mutable_synthetic();
  spec.mutable_pipeline()->set_stages(2);
  spec.mutable_pipeline()->set_microbatches(4);
  spec.mutable_pipeline()->set_microbatch_size(2);
  spec.mutable_schedule()->set_name("zb-h1");
  spec.mutable_optimizer()->set_learning_rate(1e-2);
  spec.set_steps(steps);
  spec.set_seed(5);
  return spec;
}

}  // namespace zbpp::worker::testing

#endif  // ZBPP_TESTS_WORKER_DAEMON_TINY_JOB_H_
