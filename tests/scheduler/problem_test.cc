#include "scheduler/problem.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;

TEST(Problem, UniformIsValid) {
  Problem problem = Problem::Uniform(4, 2, 8, VirtualStageCost{}, 0.1, 3.0);
  EXPECT_TRUE(problem.Validate().ok());
  EXPECT_EQ(problem.num_virtual_stages(), 8);
  EXPECT_EQ(problem.virtual_stages.size(), 8u);
  EXPECT_DOUBLE_EQ(problem.limit_of(3), 3.0);
}

TEST(Problem, NoLimitIsInfinite) {
  Problem problem = Problem::Uniform(2, 1, 1, VirtualStageCost{}, 0);
  EXPECT_TRUE(problem.memory_limit_bytes.empty());
  EXPECT_TRUE(std::isinf(problem.limit_of(0)));
}

TEST(Problem, ErrorsNameTheField) {
  struct Case {
    void (*mutate)(Problem&);
    const char* field;
  };
  const Case cases[] = {
      {[](Problem& p) { p.stages = 0; }, "stages"},
      {[](Problem& p) { p.chunks = 0; }, "chunks"},
      {[](Problem& p) { p.microbatches = -1; }, "microbatches"},
      {[](Problem& p) { p.virtual_stages.pop_back(); }, "virtual stages must hold"},
      {[](Problem& p) { p.virtual_stages[3].f_seconds = -1; }, "virtual_stages[3].f_seconds"},
      {[](Problem& p) { p.virtual_stages[0].b_seconds = NAN; }, "virtual_stages[0].b_seconds"},
      {[](Problem& p) {
         p.virtual_stages[1].w_seconds = std::numeric_limits<double>::infinity();
       },
       "virtual_stages[1].w_seconds"},
      {[](Problem& p) { p.virtual_stages[2].m_w_bytes = 5; }, "virtual_stages[2].m_w_bytes"},
      {[](Problem& p) { p.virtual_stages[1].transient_bytes = -1; },
       "virtual_stages[1].transient_bytes"},
      {[](Problem& p) { p.virtual_stages[0].transient_bytes = NAN; },
       "virtual_stages[0].transient_bytes"},
      {[](Problem& p) { p.comm_seconds = -0.5; }, "comm_seconds"},
      {[](Problem& p) { p.memory_limit_bytes = {1, 2}; }, "memory_limit_bytes"},
      {[](Problem& p) { p.memory_limit_bytes[1] = 0; },
       "memory_limit_bytes[1]"},
  };
  for (const Case& c : cases) {
    Problem problem = Problem::Uniform(4, 1, 4, VirtualStageCost{}, 0, 4.0);
    c.mutate(problem);
    absl::Status status = problem.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
}

TEST(Problem, VocabularyErrorsNameTheField) {
  struct Case {
    void (*mutate)(Problem&);
    const char* message;
  };
  const Case cases[] = {
      {[](Problem& p) { p.vocabulary.pop_back(); }, "vocabulary must be empty or hold one"},
      {[](Problem& p) { p.vocabulary[2].t_seconds = 0; },
       "vocabulary[2].t_seconds must be > 0, got 0"},
      {[](Problem& p) { p.vocabulary[0].s_seconds = NAN; }, "vocabulary[0].s_seconds must be > 0"},
      {[](Problem& p) { p.vocabulary[3].s_seconds = std::numeric_limits<double>::infinity(); },
       "vocabulary[3].s_seconds must be > 0"},
      {[](Problem& p) { p.vocabulary[1].m_bytes = -1; }, "vocabulary[1].m_bytes"},
      {[](Problem& p) { p.vocabulary[1].transient_bytes = NAN; },
       "vocabulary[1].transient_bytes"},
  };
  Problem valid = Problem::Uniform(4, 1, 4, VirtualStageCost{}, 0);
  valid.vocabulary.assign(4, VocabularyCost{0.5, 0.5, 1, 2});
  EXPECT_TRUE(valid.Validate().ok()) << valid.Validate();
  for (const Case& c : cases) {
    Problem problem = valid;
    c.mutate(problem);
    absl::Status status = problem.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace zbpp::sched
