#include "scheduler/problem.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;

TEST(Problem, UniformIsValid) {
  Problem problem = Problem::Uniform(4, 2, 8, StageCost{}, 0.1, 3.0);
  EXPECT_TRUE(problem.Validate().ok());
  EXPECT_EQ(problem.num_stages(), 8);
  EXPECT_EQ(problem.stages.size(), 8u);
  EXPECT_DOUBLE_EQ(problem.limit_of(3), 3.0);
}

TEST(Problem, NoLimitIsInfinite) {
  Problem problem = Problem::Uniform(2, 1, 1, StageCost{}, 0);
  EXPECT_TRUE(problem.memory_limit_bytes.empty());
  EXPECT_TRUE(std::isinf(problem.limit_of(0)));
}

TEST(Problem, ErrorsNameTheField) {
  struct Case {
    void (*mutate)(Problem&);
    const char* field;
  };
  const Case cases[] = {
      {[](Problem& p) { p.workers = 0; }, "workers"},
      {[](Problem& p) { p.chunks = 0; }, "chunks"},
      {[](Problem& p) { p.microbatches = -1; }, "microbatches"},
      {[](Problem& p) { p.stages.pop_back(); }, "stages must hold"},
      {[](Problem& p) { p.stages[3].f_seconds = -1; }, "stages[3].f_seconds"},
      {[](Problem& p) { p.stages[0].b_seconds = NAN; }, "stages[0].b_seconds"},
      {[](Problem& p) {
         p.stages[1].w_seconds = std::numeric_limits<double>::infinity();
       },
       "stages[1].w_seconds"},
      {[](Problem& p) { p.stages[2].m_w_bytes = 5; }, "stages[2].m_w_bytes"},
      {[](Problem& p) { p.comm_seconds = -0.5; }, "comm_seconds"},
      {[](Problem& p) { p.memory_limit_bytes = {1, 2}; }, "memory_limit_bytes"},
      {[](Problem& p) { p.memory_limit_bytes[1] = 0; },
       "memory_limit_bytes[1]"},
  };
  for (const Case& c : cases) {
    Problem problem = Problem::Uniform(4, 1, 4, StageCost{}, 0, 4.0);
    c.mutate(problem);
    absl::Status status = problem.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace zbpp::sched
