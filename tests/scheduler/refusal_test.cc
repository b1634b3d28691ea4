#include "scheduler/refusal.h"

#include <optional>

#include "gtest/gtest.h"
#include "scheduler/baselines.h"
#include "scheduler/dualpipe_v.h"
#include "scheduler/registry.h"
#include "scheduler/zb_auto.h"
#include "scheduler/zb_handcrafted.h"
#include "scheduler/zb_v.h"

namespace zbpp::sched {
namespace {

Problem Shape(int stages, int chunks, int microbatches) {
  return Problem::Uniform(stages, chunks, microbatches, VirtualStageCost{}, 0);
}

std::optional<RefusedInput> RefusalOf(const absl::StatusOr<Schedule>& generated) {
  EXPECT_FALSE(generated.ok());
  return RefusedInputOf(generated.status());
}

TEST(Refusal, CarriesItsInputThroughTheStatus) {
  const absl::Status refused =
      Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kChunks, "needs chunks = 2");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "needs chunks = 2");
  EXPECT_EQ(RefusedInputOf(refused), RefusedInput::kChunks);
  const absl::Status copy = refused;
  EXPECT_EQ(RefusedInputOf(copy), RefusedInput::kChunks);
  EXPECT_EQ(RefusedInputOf(absl::OkStatus()), std::nullopt);
  EXPECT_EQ(RefusedInputOf(absl::InvalidArgumentError("microbatches")), std::nullopt)
      << "the message is never read";
}

TEST(Refusal, GeneratorsSayWhichChunksTheyRefuse) {
  EXPECT_EQ(RefusalOf(Generate("1f1b", Shape(2, 2, 4))), RefusedInput::kChunks);
  EXPECT_EQ(RefusalOf(Generate("zb-v", Shape(2, 1, 4))), RefusedInput::kChunks);
  EXPECT_EQ(RefusalOf(Generate("1f1b-interleaved", Shape(2, 1, 4))), RefusedInput::kChunks);
  EXPECT_EQ(RefusalOf(GenerateGPipe(Shape(2, 2, 4))), RefusedInput::kChunks);
  EXPECT_EQ(RefusalOf(GenerateZbH1(Shape(2, 2, 4))), RefusedInput::kChunks);
  EXPECT_EQ(RefusalOf(GenerateDualPipeV(Shape(2, 1, 4))), RefusedInput::kChunks);
  EXPECT_EQ(RefusalOf(GenerateVSchedule(Shape(2, 1, 4), VShape::kHalf)),
            RefusedInput::kChunks);
  AutoSolverOptions v;
  v.placement = Placement::kV;
  EXPECT_EQ(RefusalOf(SolveZeroBubble(Shape(2, 1, 4), v)), RefusedInput::kChunks);
}

TEST(Refusal, GeneratorsSayWhichMicrobatchesTheyRefuse) {
  EXPECT_EQ(RefusalOf(Generate("zb-h2", Shape(4, 1, 7))), RefusedInput::kMicrobatches);
  EXPECT_EQ(RefusalOf(Generate("dualpipe-v", Shape(4, 2, 7))), RefusedInput::kMicrobatches);
  EXPECT_EQ(RefusalOf(Generate("1f1b-interleaved", Shape(4, 2, 6))),
            RefusedInput::kMicrobatches);
}

TEST(Refusal, GeneratorsSayWhenTheMemoryLimitIsTooLow) {
  // 1F1B's shape needs p = 4 M_B on stage 0; the solver needs at least one.
  const absl::StatusOr<Schedule> fixed =
      Generate("1f1b", Problem::Uniform(4, 1, 8, VirtualStageCost{}, 0, 2.0));
  EXPECT_EQ(fixed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(RefusalOf(fixed), RefusedInput::kMemoryLimit);
  const absl::StatusOr<Schedule> solved =
      Generate("zb-1p", Problem::Uniform(4, 1, 8, VirtualStageCost{}, 0, 0.5));
  EXPECT_EQ(solved.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(RefusalOf(solved), RefusedInput::kMemoryLimit);
}

TEST(Refusal, OtherErrorsRefuseNoInputInParticular) {
  EXPECT_EQ(RefusalOf(Generate("zb-h3", Shape(2, 1, 4))), std::nullopt);
  EXPECT_EQ(RefusalOf(Generate("1f1b", Shape(0, 1, 4))), std::nullopt);
}

}  // namespace
}  // namespace zbpp::sched
