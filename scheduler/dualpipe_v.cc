#include "scheduler/dualpipe_v.h"

#include <deque>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/refusal.h"

namespace zbpp::sched {
namespace {

// One stage's order, appended pass by pass: each chunk's passes of one
// kind take the microbatches in order, and every input-gradient pass leaves
// a W owed, run (oldest first) where the order calls for one.
class StageOrder {
 public:
  // V placement: stage s holds virtual stages s and 2p-1-s.
  StageOrder(int p, Stage s)
      : virtual_stage_{VirtualStage(s.value()), VirtualStage(2 * p - 1 - s.value())} {}

  void F(int chunk) { Add(PassKind::kF, chunk, next_f_[chunk]++); }
  // A backward of `chunk`: fused (BW), or split (B now, its W owed).
  void Backward(int chunk, bool split) {
    const int mb = next_b_[chunk]++;
    Add(split ? PassKind::kB : PassKind::kBW, chunk, mb);
    if (split) owed_w_.push_back({PassKind::kW, virtual_stage_[chunk], mb});
  }
  void W() {
    if (owed_w_.empty()) return;
    actions_.push_back(owed_w_.front());
    owed_w_.pop_front();
  }
  std::vector<Action> Take() { return std::move(actions_); }

 private:
  void Add(PassKind kind, int chunk, int mb) {
    actions_.push_back({kind, virtual_stage_[chunk], mb});
  }

  const VirtualStage virtual_stage_[2];
  int next_f_[2] = {0, 0};
  int next_b_[2] = {0, 0};
  std::deque<Action> owed_w_;
  std::vector<Action> actions_;
};

// Stage s's order, phase by phase as the header lists them.
std::vector<Action> DualPipeVOrder(int p, int m, Stage s) {
  StageOrder order(p, s);
  const int down = p - 1 - s.value();  // Stages after s on the way down.
  const int up = s.value() + 1;        // Stages up to s, itself included.
  for (int i = 0; i < 2 * down; ++i) order.F(0);
  for (int i = 0; i < up; ++i) {
    order.F(0);
    order.F(1);
  }
  for (int i = 0; i < down; ++i) {
    order.Backward(1, /*split=*/true);
    order.W();
    order.F(1);
  }
  for (int i = 0; i < m - 2 * p + up; ++i) {
    order.F(0);
    order.Backward(1, /*split=*/false);
    order.F(1);
    order.Backward(0, /*split=*/false);
  }
  for (int i = 0; i < down; ++i) {
    order.Backward(1, /*split=*/false);
    order.F(1);
    order.Backward(0, /*split=*/false);
  }
  // Phase 6: 2(r+1) backwards alternating chunk 1, chunk 0; the second half
  // of them split, so that their W's fill the cool-down.
  for (int i = 0; i < 2 * up; ++i) order.Backward(1 - i % 2, i >= up);
  for (int i = 0; i < down; ++i) {
    order.W();
    order.Backward(0, /*split=*/true);
  }
  for (int i = 0; i < up; ++i) order.W();
  return order.Take();
}

}  // namespace

absl::StatusOr<Schedule> GenerateDualPipeV(const Problem& problem) {
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  const int p = problem.stages;
  const int m = problem.microbatches;
  if (problem.chunks != 2) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kChunks,
                  absl::StrCat("dualpipe-v needs chunks = 2, got ", problem.chunks));
  }
  if (m < 2 * p) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kMicrobatches,
                  absl::StrCat("dualpipe-v needs microbatches >= 2 * stages (", 2 * p,
                               "), got ", m));
  }
  Schedule schedule;
  schedule.name = "dualpipe-v";
  schedule.stages = p;
  schedule.chunks = 2;
  schedule.microbatches = m;
  schedule.stage_of = PlaceVirtualStages(Placement::kV, p, 2);
  for (const Stage s : IndicesOf<Stage>(p)) schedule.actions.push_back(DualPipeVOrder(p, m, s));
  return schedule;
}

}  // namespace zbpp::sched
