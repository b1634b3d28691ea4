// Post-update validation end to end (Qi et al. 2024, §4): two zbpp-worker
// processes over Gloo, a NaN injected into the last stage's gradient at one
// step. With POST the stages that stepped optimistically roll back and the step
// is skipped; the run ends where the synchronous run with the same NaN ends.

#include <cmath>

#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/e2e/cluster.h"

namespace zbpp::worker::e2e {
namespace {

using ::zbpp::worker::testing::TestDirectory;

constexpr int64_t kNanStep = 4;

TEST(ValidationEndToEnd, NanStepIsRolledBackAndPostEndsWhereSynchronousEnds) {
  TestDirectory scratch;
  ClusterOptions options;
  options.directory = scratch.path();
  options.worker_flags = {"--inject-nan-step", std::to_string(kNanStep)};
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  v1::Job jobs[2];
  const v1::ValidationMode modes[2] = {v1::VALIDATION_MODE_SYNCHRONOUS,
                                       v1::VALIDATION_MODE_POST};
  for (int i = 0; i < 2; ++i) {
    v1::JobSpec spec = SmallBibleJob(12);
    spec.set_validation(modes[i]);
    spec.mutable_optimizer()->set_max_grad_norm(1.0);
    absl::StatusOr<JobOutcome> outcome = (*cluster)->Run(spec);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    jobs[i] = outcome->job;
    SCOPED_TRACE(v1::ValidationMode_Name(modes[i]));
    ASSERT_EQ(jobs[i].state(), v1::JOB_STATE_SUCCEEDED) << jobs[i].state_message();
    EXPECT_EQ(jobs[i].validation_mode(), modes[i]);
    EXPECT_EQ(jobs[i].skipped_steps_total(), 1);
    EXPECT_TRUE(std::isfinite(jobs[i].last_step().loss()));
    ASSERT_TRUE(jobs[i].has_param_checksum());
  }
  EXPECT_EQ(jobs[0].rollbacks_total(), 0) << "synchronous validation never rolls back";
  // Stage 0 stepped optimistically at the NaN step (its partial state was
  // clean) and undid it; clipped steps, if any, are rolled back too.
  EXPECT_GE(jobs[1].rollbacks_total(), 1);
  EXPECT_EQ(jobs[0].clipped_steps_total(), jobs[1].clipped_steps_total());
  const double sync = jobs[0].param_checksum();
  const double post = jobs[1].param_checksum();
  EXPECT_NEAR(post, sync, 1e-6 * std::max(1.0, std::abs(sync)))
      << "the POST run must end with the synchronous run's parameters";
  std::printf("param_checksum synchronous %.9g post %.9g; rollbacks %lld, clipped %lld\n",
              sync, post, static_cast<long long>(jobs[1].rollbacks_total()),
              static_cast<long long>(jobs[1].clipped_steps_total()));
}

}  // namespace
}  // namespace zbpp::worker::e2e
