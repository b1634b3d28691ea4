// The coordinator's range checks of a worker's step report
// (coordinator/core/step_report_check.h) for its breakdown
// (ReportStepRequest.breakdown, job.proto StepBreakdown).

#include "coordinator/core/step_report_check.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

v1::ReportStepRequest ReportWithBreakdown() {
  v1::ReportStepRequest r;
  r.set_step_seconds(1.0);
  v1::StepBreakdown* b = r.mutable_breakdown();
  b->set_compute_seconds(0.6);
  b->set_input_wait_seconds(0.3);
  b->set_overhead_seconds(0.1);
  b->set_gap_seconds(0.2);
  b->set_validation_seconds(0.15);
  b->set_report_seconds(0.05);
  return r;
}

// A breakdown's parts are times within their whole; anything else is
// refused naming the field, before it reaches a summary.
TEST(CheckReportRanges, BreakdownPartsAreTimesWithinTheirWhole) {
  EXPECT_TRUE(CheckReportRanges(ReportWithBreakdown()).ok());
  struct Case {
    void (*edit)(v1::StepBreakdown&);
    const char* message;
  };
  const Case cases[] = {
      {[](v1::StepBreakdown& b) { b.set_input_wait_seconds(-0.1); },
       "breakdown.input_wait_seconds: must be a finite time >= 0"},
      {[](v1::StepBreakdown& b) { b.set_overhead_seconds(std::nan("")); },
       "breakdown.overhead_seconds: must be a finite time >= 0"},
      {[](v1::StepBreakdown& b) { b.set_compute_seconds(2); },
       "breakdown.compute_seconds: 2 is longer than step_seconds (1)"},
      {[](v1::StepBreakdown& b) { b.set_gap_seconds(1e9); },
       "breakdown.gap_seconds: must be at most 86400 s"},
      {[](v1::StepBreakdown& b) { b.set_grant_seconds(0.5); },
       "breakdown.grant_seconds: 0.5 is longer than breakdown.gap_seconds (0.2)"},
      {[](v1::StepBreakdown& b) { b.set_drain_seconds(-1); },
       "breakdown.drain_seconds: must be a finite time >= 0"},
  };
  for (const Case& c : cases) {
    v1::ReportStepRequest r = ReportWithBreakdown();
    c.edit(*r.mutable_breakdown());
    const absl::Status st = CheckReportRanges(r);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace zbpp::coordinator
