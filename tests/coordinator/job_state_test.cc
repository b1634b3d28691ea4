#include "coordinator/core/job_state.h"

#include <set>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using S = JobState;

// The whole diagram of job_state.h, edge by edge.
const std::set<std::pair<S, S>>& LegalEdges() {
  static const auto* const kEdges = new std::set<std::pair<S, S>>{
      {S::kPending, S::kAssigning},    {S::kPending, S::kCancelled},
      {S::kAssigning, S::kRunning},    {S::kAssigning, S::kPending},
      {S::kAssigning, S::kFailed},     {S::kAssigning, S::kCancelled},
      {S::kRunning, S::kSucceeded},    {S::kRunning, S::kFailed},
      {S::kRunning, S::kCancelled},    {S::kRunning, S::kRecovering},
      {S::kRecovering, S::kRunning},   {S::kRecovering, S::kFailed},
      {S::kRecovering, S::kCancelled},
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
  EXPECT_EQ(legal, 13);
}

TEST(JobState, TerminalStatesAreFinal) {
  for (S from : {S::kSucceeded, S::kFailed, S::kCancelled}) {
    EXPECT_TRUE(IsTerminal(from));
    for (S to : kAllJobStates) {
      absl::Status status = Transition(from, to);
      EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(std::string(status.message()), HasSubstr("is terminal"));
    }
  }
  for (S state : {S::kPending, S::kAssigning, S::kRunning, S::kRecovering}) {
    EXPECT_FALSE(IsTerminal(state));
    EXPECT_TRUE(Transition(state, S::kCancelled).ok());
  }
}

TEST(JobState, NamesAreDistinct) {
  std::set<std::string> names;
  for (S state : kAllJobStates) names.insert(JobStateName(state));
  EXPECT_EQ(names.size(), 7u);
  EXPECT_EQ(JobStateName(S::kRecovering), "RECOVERING");
}

}  // namespace
}  // namespace zbpp::coordinator
