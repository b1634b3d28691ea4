// The schedule page (coordinator/service/schedule_page.h) over the core on
// a store file, with fake workers calling the core directly
// (coordinator_fixture.h), and the escaping of user text in its HTML.

#include "coordinator/service/schedule_page.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::TestSpec;
using testing::TrueCosts;

// The core on a store file and fake workers that call it directly
// (coordinator_fixture.h), for what the schedule page shows.
class SchedulePageTest : public testing::CoordinatorTest {};

// A job whose store holds a version published after its last step
// (as a coordinator before the fix wrote it when a re-solve came out once
// the last step was granted). After a restart, the version that ran the
// last step still names the measured step's actions and is the one drawn
// as planned; a note names the later one.
TEST_F(SchedulePageTest, LastStepIsDrawnWithTheVersionItRanAfterARestart) {
  const std::string path = NewDatabasePath();
  Start(path);
  zbpp::v1::JobSpec spec = testing::Uncalibrated(TestSpec(4, 8, "zb-1p", 6, 2));
  spec.mutable_schedule()->mutable_resolve()->set_window_steps(100);
  std::string job_id;
  std::vector<testing::FakeWorker> workers = AssignedPipeline(spec, &job_id);
  RunSteps(workers, TrueCosts(spec, 2, 1.5), 5);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  absl::StatusOr<zbpp::v1::Job> done = coordinator_->GetJob(job_id, zbpp::v1::JOB_VIEW_FULL);
  ASSERT_EQ(done->state(), zbpp::v1::JOB_STATE_SUCCEEDED) << done->state_message();
  ASSERT_EQ(done->schedule_version(), 1);
  zbpp::v1::ScheduleVersion later = done->schedule();
  later.set_version(2);
  later.set_effective_step(6);
  later.set_reason(zbpp::v1::SCHEDULE_CHANGE_REASON_RESOLVE);
  later.mutable_schedule()->set_name("never-ran");
  ASSERT_TRUE(store_->AddScheduleVersion(later).ok());
  zbpp::v1::Job record = *done;
  record.clear_schedule();
  record.set_schedule_version(2);
  ASSERT_TRUE(store_->UpdateJob(record).ok());

  Start(path);  // Same file, new process state.
  absl::StatusOr<zbpp::v1::Job> job = coordinator_->GetJob(job_id, zbpp::v1::JOB_VIEW_FULL);
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->schedule().version(), 2);
  ASSERT_EQ(job->last_step_timeline().schedule_version(), 1);
  absl::StatusOr<zbpp::v1::ScheduleVersion> ran = VersionThatRanLastStep(*coordinator_, *job);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->version(), 1);
  EXPECT_EQ(ran->schedule().name(), done->schedule().schedule().name());

  const metrics::HttpResponse measured =
      ServeSchedulePage(*coordinator_, "/jobs/" + job_id + "/measured.svg");
  EXPECT_EQ(measured.status, 200) << measured.body;
  EXPECT_THAT(measured.body, HasSubstr("step 5 (measured)"));
  EXPECT_THAT(measured.body, ::testing::Not(HasSubstr("never-ran")));
  const metrics::HttpResponse planned =
      ServeSchedulePage(*coordinator_, "/jobs/" + job_id + "/planned.svg");
  EXPECT_EQ(planned.status, 200) << planned.body;
  EXPECT_THAT(planned.body, ::testing::Not(HasSubstr("never-ran")));
  const metrics::HttpResponse page = ServeSchedulePage(*coordinator_, "/jobs/" + job_id);
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.body, HasSubstr("class=\"chart measured\""));
  EXPECT_THAT(page.body, ::testing::Not(HasSubstr("measured-missing")));
  EXPECT_THAT(page.body, HasSubstr("Planned (the simulator, schedule version 1)"));
  EXPECT_THAT(page.body, HasSubstr("The latest version is 2, from step 6."));
  std::remove(path.c_str());
}

// Text a user chose (a job's name, a cancel reason in its state message)
// reaches both pages escaped: no raw control byte (an ESC sequence would
// drive a terminal showing the page's source) and no markup.
TEST(SchedulePageHtml, ControlBytesAndMarkupOfUserTextAreEscaped) {
  zbpp::v1::Job job;
  job.set_id("job-1");
  job.set_state(zbpp::v1::JOB_STATE_CANCELLED);
  job.mutable_spec()->set_name("evil\x1b]0;title\x07<b>");
  job.set_state_message("cancelled: \x1b[2J<script>");
  for (const std::string& page : {JobsPageHtml({job}, {}), JobPageHtml(job, {})}) {
    EXPECT_EQ(page.find('\x1b'), std::string::npos);
    EXPECT_EQ(page.find('\x07'), std::string::npos);
    EXPECT_THAT(page, HasSubstr("evil\\x1b]0;title\\x07&lt;b&gt;"));
    EXPECT_THAT(page, HasSubstr("cancelled: \\x1b[2J&lt;script&gt;"));
  }
}

// The stage table shows each stage's measured and predicted peak
// activation memory of the last step in MiB; "-" where a worker did not
// measure it.
TEST(SchedulePageHtml, StageTableShowsMeasuredAndPredictedPeaks) {
  zbpp::v1::Job job;
  job.set_id("job-2");
  job.set_state(zbpp::v1::JOB_STATE_RUNNING);
  job.set_steps_completed(4);
  zbpp::v1::StepSummary* last = job.mutable_last_step();
  last->set_step(3);
  for (int stage = 0; stage < 2; ++stage) {
    zbpp::v1::StageStepStats* s = last->add_stages();
    s->set_stage(stage);
    s->set_peak_activation_bytes(stage == 0 ? 3.5 * 1024 * 1024 : 0);
    s->set_predicted_peak_activation_bytes((stage + 2) * 1024 * 1024);
  }
  const std::string page = JobPageHtml(job, {});
  EXPECT_THAT(page, HasSubstr("<th>peak MiB</th><th>predicted peak MiB</th>"));
  EXPECT_THAT(page, HasSubstr("<td class=\"num peak\">3.50</td>"
                              "<td class=\"num predicted-peak\">2.00</td>"));
  EXPECT_THAT(page, HasSubstr("<td class=\"num peak\">-</td>"
                              "<td class=\"num predicted-peak\">3.00</td>"));
}

// The job's layout is a card, its reason the card's title (escaped).
TEST(SchedulePageHtml, ShowsTheLayoutAndWhy) {
  zbpp::v1::Job job;
  job.set_id("job-3");
  job.set_state(zbpp::v1::JOB_STATE_PENDING);
  for (int blocks : {6, 2}) job.add_layout(blocks);
  job.set_layout_reason("auto: [6, 2] predicts a step 1.23x shorter than the even split [4, 4]");
  for (const std::string& page : {JobsPageHtml({job}, {}), JobPageHtml(job, {})}) {
    EXPECT_THAT(page, HasSubstr("<div class=\"card\" title=\"auto: [6, 2] predicts a step "
                                "1.23x shorter than the even split [4, 4]\"><b>[6, 2]</b>"
                                "<span>blocks per virtual stage</span></div>"));
  }
}

}  // namespace
}  // namespace zbpp::coordinator
