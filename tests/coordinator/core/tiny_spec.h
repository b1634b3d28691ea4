#ifndef ZBPP_TESTS_COORDINATOR_CORE_TINY_SPEC_H_
#define ZBPP_TESTS_COORDINATOR_CORE_TINY_SPEC_H_

#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator::testing {

/// A small job every rule accepts: 8 GPT blocks (hidden 64, 4 heads,
/// vocab 256, seq_len 128) on 2 stages with 1F1B, 8 microbatches of 4.
inline zbpp::v1::JobSpec TinySpec() {
  zbpp::v1::JobSpec spec;
  spec.set_name("tiny-gpt");
  zbpp::v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(8);
  model->set_hidden(64);
  model->set_heads(4);
  model->set_vocab(256);
  model->set_seq_len(128);
  spec.mutable_dataset()->set_builtin("bible-kjv");
  zbpp::v1::PipelineSpec* pipeline = spec.mutable_pipeline();
  pipeline->set_stages(2);
  pipeline->set_microbatches(8);
  pipeline->set_microbatch_size(4);
  spec.mutable_schedule()->set_name("1f1b");
  spec.mutable_optimizer()->set_learning_rate(3e-4);
  spec.set_steps(100);
  return spec;
}

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTS_COORDINATOR_CORE_TINY_SPEC_H_
