#include "coordinator/core/job_state.h"

#include <set>
#include <string>
#include <utility>

#include "api/job_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using S = zbpp::v1::JobState;

// The whole diagram of job_state.h, edge by edge.
const std::set<std::pair<S, S>>& LegalEdges() {
  static const auto* const kEdges = new std::set<std::pair<S, S>>{
      {v1::JOB_STATE_PENDING, v1::JOB_STATE_ASSIGNING},
      {v1::JOB_STATE_PENDING, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_PENDING, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_ASSIGNING, v1::JOB_STATE_RUNNING},
      {v1::JOB_STATE_ASSIGNING, v1::JOB_STATE_PENDING},
      {v1::JOB_STATE_ASSIGNING, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_ASSIGNING, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_RUNNING, v1::JOB_STATE_RECOVERING},
      {v1::JOB_STATE_RECOVERING, v1::JOB_STATE_RUNNING},
      {v1::JOB_STATE_RECOVERING, v1::JOB_STATE_DEGRADED},
      {v1::JOB_STATE_RECOVERING, v1::JOB_STATE_SUCCEEDED},
      {v1::JOB_STATE_RECOVERING, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_RECOVERING, v1::JOB_STATE_CANCELLED},
      {v1::JOB_STATE_DEGRADED, v1::JOB_STATE_RUNNING},
      {v1::JOB_STATE_DEGRADED, v1::JOB_STATE_RECOVERING},
      {v1::JOB_STATE_DEGRADED, v1::JOB_STATE_SUCCEEDED},
      {v1::JOB_STATE_DEGRADED, v1::JOB_STATE_FAILED},
      {v1::JOB_STATE_DEGRADED, v1::JOB_STATE_CANCELLED},
  };
  return *kEdges;
}

TEST(JobState, EveryPairIsLegalExactlyWhenTheDiagramHasTheEdge) {
  int legal = 0;
  for (S from : kAllJobStates) {
    for (S to : kAllJobStates) {
      const bool expected = LegalEdges().count({from, to}) > 0;
      SCOPED_TRACE(JobStateName(from) + " -> " + JobStateName(to));
      EXPECT_EQ(IsLegalTransition(from, to), expected);
      absl::Status status = Transition(from, to);
      if (expected) {
        EXPECT_TRUE(status.ok()) << status;
        ++legal;
      } else {
        EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(std::string(status.message()),
                    HasSubstr(JobStateName(from) + " -> " + JobStateName(to)));
      }
    }
  }
  EXPECT_EQ(legal, 21);
}

TEST(JobState, TerminalStatesAreFinal) {
  for (S from : {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED}) {
    EXPECT_TRUE(IsTerminal(from));
    for (S to : kAllJobStates) {
      absl::Status status = Transition(from, to);
      EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(std::string(status.message()), HasSubstr("is terminal"));
    }
  }
  for (S state : {v1::JOB_STATE_PENDING, v1::JOB_STATE_ASSIGNING, v1::JOB_STATE_RUNNING,
                  v1::JOB_STATE_DEGRADED, v1::JOB_STATE_RECOVERING}) {
    EXPECT_FALSE(IsTerminal(state));
    EXPECT_TRUE(Transition(state, v1::JOB_STATE_CANCELLED).ok());
  }
}

TEST(JobState, NamesAreDistinct) {
  std::set<std::string> names;
  for (S state : kAllJobStates) names.insert(JobStateName(state));
  EXPECT_EQ(names.size(), 8u);
  EXPECT_EQ(JobStateName(v1::JOB_STATE_RECOVERING), "RECOVERING");
}

TEST(JobState, UnspecifiedIsNoStateOfAJob) {
  for (S state : kAllJobStates) {
    EXPECT_FALSE(IsLegalTransition(v1::JOB_STATE_UNSPECIFIED, state));
    EXPECT_FALSE(IsLegalTransition(state, v1::JOB_STATE_UNSPECIFIED));
  }
}

}  // namespace
}  // namespace zbpp::coordinator
