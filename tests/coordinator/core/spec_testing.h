#ifndef ZBPP_TESTS_COORDINATOR_CORE_SPEC_TESTING_H_
#define ZBPP_TESTS_COORDINATOR_CORE_SPEC_TESTING_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "coordinator/core/spec_refusal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

/// A spec `mutate` breaks, and how it is refused.
struct RefusedSpec {
  const char* name;
  std::function<void(zbpp::v1::JobSpec&)> mutate;
  /// The message must start with this: the field, ": ", the reason.
  std::string prefix;
};

/// Expects `status` to refuse a spec with a message starting with
/// `prefix` ("field: the reason's start") and to carry that field, and a
/// reason that completes the message, as data (SpecRefusalOf).
inline void ExpectRefusal(const absl::Status& status, const std::string& prefix) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), ::testing::StartsWith(prefix));
  const std::optional<SpecRefusal> refusal = SpecRefusalOf(status);
  ASSERT_TRUE(refusal.has_value()) << status;
  EXPECT_EQ(refusal->field, prefix.substr(0, prefix.find(": ")));
  EXPECT_EQ(status.message(), refusal->field + ": " + refusal->reason);
}

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTS_COORDINATOR_CORE_SPEC_TESTING_H_
