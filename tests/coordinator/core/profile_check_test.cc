// MeasureProfile (coordinator/core/profile_check.h) on a hand-made V
// placement (stage 0 holds virtual stages 0 and 3, stage 1 holds 1 and 2):
// what a calibration profile measures, in virtual-stage order, with the
// hops its latencies sample; and every refusal, each naming its field.

#include "coordinator/core/profile_check.h"

#include <cmath>
#include <limits>
#include <string>

#include "coordinator/core/step_report_check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/schedule.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

/// p = 2 stages of two chunks in a V: virtual stages 0..3 on stages
/// 0, 1, 1, 0. Only the placement matters to MeasureProfile.
sched::Schedule VPlacement() {
  sched::Schedule schedule;
  schedule.name = "hand-v";
  schedule.stages = 2;
  schedule.chunks = 2;
  schedule.microbatches = 4;
  schedule.stage_of = {0, 1, 1, 0};
  schedule.actions.resize(2);
  return schedule;
}

/// Stage 0's profile as replica `replica`: virtual stage 3 listed first.
v1::ReportProfileRequest Profile(int replica = 0) {
  v1::ReportProfileRequest profile;
  profile.set_worker_id("worker-1");
  profile.set_stage(0);
  profile.set_replica(replica);
  profile.set_repetitions(3);
  for (int virtual_stage : {3, 0}) {
    v1::VirtualStageProfile* entry = profile.add_virtual_stages();
    entry->set_virtual_stage(virtual_stage);
    entry->set_f_seconds(0.010 + virtual_stage * 0.001);
    entry->set_b_seconds(0.020 + virtual_stage * 0.001);
    entry->set_w_seconds(0.005 + virtual_stage * 0.001);
    entry->set_m_b_bytes(1000 + virtual_stage);
    entry->set_m_w_bytes(400 + virtual_stage);
    entry->set_transient_bytes(700 + virtual_stage);
  }
  return profile;
}

TEST(MeasureProfileTest, MeasuresEachVirtualStageOfTheStageInOrder) {
  v1::ReportProfileRequest profile = Profile();
  v1::HopLatency* latency = profile.add_hop_latencies();
  latency->set_to_stage(1);
  latency->set_one_way_seconds(0.0003);
  absl::StatusOr<MeasuredProfile> measured =
      MeasureProfile(profile, VPlacement(), 0, 0, 1);
  ASSERT_TRUE(measured.ok()) << measured.status();
  ASSERT_EQ(measured->timings.size(), 2u);
  EXPECT_EQ(measured->timings[0].virtual_stage, 0);
  EXPECT_DOUBLE_EQ(measured->timings[0].f_seconds, 0.010);
  EXPECT_DOUBLE_EQ(measured->timings[0].b_seconds, 0.020);
  EXPECT_DOUBLE_EQ(measured->timings[0].w_seconds, 0.005);
  EXPECT_FALSE(measured->timings[0].reduce_seconds.has_value());
  EXPECT_EQ(measured->timings[1].virtual_stage, 3);
  EXPECT_DOUBLE_EQ(measured->timings[1].f_seconds, 0.013);
  ASSERT_EQ(measured->memory.size(), 2u);
  EXPECT_EQ(measured->memory[0].virtual_stage, 0);
  EXPECT_DOUBLE_EQ(measured->memory[0].m_b_bytes, 1000);
  EXPECT_DOUBLE_EQ(measured->memory[0].m_w_bytes, 400);
  EXPECT_EQ(measured->memory[1].virtual_stage, 3);
  EXPECT_DOUBLE_EQ(measured->memory[1].m_b_bytes, 1003);
  EXPECT_DOUBLE_EQ(measured->memory[1].transient_bytes, 703);
  // Stages 0 and 1 are linked by hop 0 (virtual stage 0 -> 1) and hop 2
  // (2 -> 3); hop 1 stays on stage 1. One latency samples both.
  ASSERT_EQ(measured->hops.size(), 2u);
  EXPECT_EQ(measured->hops[0].hop, 0);
  EXPECT_EQ(measured->hops[1].hop, 2);
  EXPECT_DOUBLE_EQ(measured->hops[0].seconds, 0.0003);
  EXPECT_DOUBLE_EQ(measured->hops[1].seconds, 0.0003);
}

// M_W may be 0 (a virtual stage whose W keeps nothing), M_B may not: a
// stage holds its forward's activation until its B, and an M_B of 0 would
// void a memory limit relative to it.
TEST(MeasureProfileTest, ZeroWeightMemoryIsAMeasurementZeroActivationMemoryIsRefused) {
  v1::ReportProfileRequest profile = Profile();
  for (v1::VirtualStageProfile& entry : *profile.mutable_virtual_stages()) {
    entry.set_m_w_bytes(0);
  }
  absl::StatusOr<MeasuredProfile> measured =
      MeasureProfile(profile, VPlacement(), 0, 0, 1);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_DOUBLE_EQ(measured->memory[0].m_w_bytes, 0);
  EXPECT_TRUE(measured->hops.empty());
  profile.mutable_virtual_stages(0)->set_m_b_bytes(0);
  EXPECT_THAT(std::string(MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message()),
              StartsWith("virtual_stages[0].m_b_bytes: must be a finite number of bytes > 0"));
}

TEST(MeasureProfileTest, RefusesAProfileOfAnotherStageOrReplica) {
  absl::StatusOr<MeasuredProfile> measured =
      MeasureProfile(Profile(), VPlacement(), 1, 0, 1);
  EXPECT_EQ(measured.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(measured.status().message(),
            "stage: worker worker-1 runs stage 1, not 0");
  measured = MeasureProfile(Profile(2), VPlacement(), 0, 0, 2);
  EXPECT_EQ(measured.status().message(),
            "replica: 2 is not in [0, 2) (pipeline.data_parallel = 2)");
  measured = MeasureProfile(Profile(-1), VPlacement(), 0, 0, 2);
  EXPECT_THAT(std::string(measured.status().message()),
              StartsWith("replica: -1 is not in [0, 2)"));
  measured = MeasureProfile(Profile(1), VPlacement(), 0, 0, 2);
  EXPECT_EQ(measured.status().message(),
            "replica: worker worker-1 runs replica 0, not 1");
  // Replica 1 of 2 is accepted from the worker that runs it.
  EXPECT_TRUE(MeasureProfile(Profile(1), VPlacement(), 0, 1, 2).ok());
}

TEST(MeasureProfileTest, RefusesRepetitionsBelowOne) {
  v1::ReportProfileRequest profile = Profile();
  profile.set_repetitions(0);
  EXPECT_EQ(MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message(),
            "repetitions: must be >= 1, got 0");
}

TEST(MeasureProfileTest, RefusesVirtualStagesNotTheStagesOwnRepeatedOrMissing) {
  v1::ReportProfileRequest profile = Profile();
  profile.mutable_virtual_stages(1)->set_virtual_stage(1);  // Stage 1's.
  EXPECT_EQ(
      MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message(),
      "virtual_stages[1].virtual_stage: 1 is not a virtual stage of stage 0");
  profile = Profile();
  profile.mutable_virtual_stages(1)->set_virtual_stage(3);
  EXPECT_EQ(MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message(),
            "virtual_stages[1].virtual_stage: 3 repeats virtual_stages[0]");
  profile = Profile();
  profile.mutable_virtual_stages()->RemoveLast();  // Virtual stage 0's entry.
  EXPECT_EQ(MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message(),
            "virtual_stages: virtual stage 0 of stage 0 is missing");
}

TEST(MeasureProfileTest,
     RefusesPassTimesThatAreNotFinitePositiveAndAtMostADay) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double bad : {0.0, -0.01, nan, std::numeric_limits<double>::infinity(),
                     kMaxReportedSeconds * 2}) {
    for (const char* field : {"f_seconds", "b_seconds", "w_seconds"}) {
      v1::ReportProfileRequest profile = Profile();
      v1::VirtualStageProfile* entry = profile.mutable_virtual_stages(1);
      if (std::string(field) == "f_seconds") entry->set_f_seconds(bad);
      if (std::string(field) == "b_seconds") entry->set_b_seconds(bad);
      if (std::string(field) == "w_seconds") entry->set_w_seconds(bad);
      const absl::Status status =
          MeasureProfile(profile, VPlacement(), 0, 0, 1).status();
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
          << field << " " << bad;
      EXPECT_THAT(std::string(status.message()),
                  StartsWith(std::string("virtual_stages[1].") + field +
                             ": must be a finite"))
          << bad;
    }
  }
  // Passes whose step (microbatches x F+B+W over the stage's virtual
  // stages) fits in a day are allowed; one a day long alone is not.
  v1::ReportProfileRequest profile = Profile();
  profile.mutable_virtual_stages(0)->set_f_seconds(kMaxReportedSeconds / 8);
  EXPECT_TRUE(MeasureProfile(profile, VPlacement(), 0, 0, 1).ok());
  profile.mutable_virtual_stages(0)->set_f_seconds(kMaxReportedSeconds);
  EXPECT_THAT(std::string(MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message()),
              HasSubstr("more than the longest step a report may hold"));
}

TEST(MeasureProfileTest, RefusesMemoryThatIsNegativeNotFiniteOrWAboveB) {
  v1::ReportProfileRequest profile = Profile();
  profile.mutable_virtual_stages(0)->set_m_b_bytes(-1);
  EXPECT_THAT(
      std::string(
          MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message()),
      StartsWith("virtual_stages[0].m_b_bytes: must be a finite number of "
                 "bytes > 0"));
  profile = Profile();
  profile.mutable_virtual_stages(0)->set_m_w_bytes(
      std::numeric_limits<double>::infinity());
  EXPECT_THAT(
      std::string(
          MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message()),
      StartsWith(
          "virtual_stages[0].m_w_bytes: must be a finite number of bytes"));
  profile = Profile();
  profile.mutable_virtual_stages(0)->set_m_w_bytes(2000);
  EXPECT_EQ(MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message(),
            "virtual_stages[0].m_w_bytes: 2000 is above m_b_bytes 1003");
  // Working memory may be 0 (a worker that predates it), never negative or
  // not finite; it may exceed M_B (the LM head's logits).
  for (double transient : {-1.0, std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity()}) {
    profile = Profile();
    profile.mutable_virtual_stages(1)->set_transient_bytes(transient);
    EXPECT_THAT(
        std::string(MeasureProfile(profile, VPlacement(), 0, 0, 1).status().message()),
        StartsWith("virtual_stages[1].transient_bytes: must be a finite number of bytes >= 0"))
        << transient;
  }
  profile = Profile();
  profile.mutable_virtual_stages(1)->set_transient_bytes(0);
  profile.mutable_virtual_stages(0)->set_transient_bytes(5000);
  EXPECT_TRUE(MeasureProfile(profile, VPlacement(), 0, 0, 1).ok());
}

// The layout parts (ReportProfileRequest.layout_parts): none, or the
// three one-block virtual stages in order, each checked as a virtual
// stage's entry is.
TEST(MeasureProfileTest, MeasuresLayoutPartsAndRefusesThemIncompleteOrOutOfOrder) {
  v1::ReportProfileRequest profile = Profile();
  absl::StatusOr<MeasuredProfile> none = MeasureProfile(profile, VPlacement(), 0, 0, 1);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->layout_parts.empty());
  for (int k = 0; k < kLayoutParts; ++k) {
    v1::VirtualStageProfile* part = profile.add_layout_parts();
    *part = profile.virtual_stages(1);
    part->set_virtual_stage(k);
    part->set_f_seconds(0.5 + k);
    part->set_bw_seconds(0.9 + k);
  }
  absl::StatusOr<MeasuredProfile> parts = MeasureProfile(profile, VPlacement(), 0, 0, 1);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->layout_parts.size(), 3u);
  EXPECT_DOUBLE_EQ(parts->layout_parts[2].f_seconds, 2.5);
  EXPECT_DOUBLE_EQ(parts->layout_parts[2].b_seconds, 0.020);
  EXPECT_DOUBLE_EQ(parts->layout_parts[2].bw_seconds, 2.9);
  EXPECT_DOUBLE_EQ(parts->layout_parts[2].m_b_bytes, 1000);
  EXPECT_DOUBLE_EQ(parts->layout_parts[2].m_w_bytes, 400);
  EXPECT_DOUBLE_EQ(parts->layout_parts[2].transient_bytes, 700);

  v1::ReportProfileRequest two = profile;
  two.mutable_layout_parts()->RemoveLast();
  EXPECT_EQ(MeasureProfile(two, VPlacement(), 0, 0, 1).status().message(),
            "layout_parts: 3 entries or none, got 2");
  v1::ReportProfileRequest swapped = profile;
  swapped.mutable_layout_parts(1)->set_virtual_stage(2);
  EXPECT_EQ(MeasureProfile(swapped, VPlacement(), 0, 0, 1).status().message(),
            "layout_parts[1].virtual_stage: must be 1, got 2");
  v1::ReportProfileRequest slow = profile;
  slow.mutable_layout_parts(2)->set_w_seconds(-1);
  EXPECT_THAT(std::string(MeasureProfile(slow, VPlacement(), 0, 0, 1).status().message()),
              StartsWith("layout_parts[2].w_seconds: must be a finite time"));
  v1::ReportProfileRequest small = profile;
  small.mutable_layout_parts(1)->set_m_b_bytes(500);
  EXPECT_THAT(std::string(CheckProfileMemory(small, 600, 1 << 20).message()),
              StartsWith("layout_parts[1].m_b_bytes: 500 is less than"));
  v1::ReportProfileRequest large = profile;
  large.mutable_layout_parts(2)->set_m_b_bytes(5000);
  EXPECT_THAT(std::string(CheckProfileMemory(large, 600, 1003).message()),
              StartsWith("layout_parts[2].m_b_bytes: 5000 is more than"));
}

TEST(MeasureProfileTest, RefusesALatencyToAStageNoHopLinks) {
  v1::ReportProfileRequest profile = Profile();
  v1::HopLatency* latency = profile.add_hop_latencies();
  latency->set_to_stage(0);  // Itself: no hop links stage 0 to stage 0.
  latency->set_one_way_seconds(0.001);
  const absl::Status status =
      MeasureProfile(profile, VPlacement(), 0, 0, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("hop_latencies[0].to_stage"));
}

}  // namespace
}  // namespace zbpp::coordinator
