"""zbpp's dualpipe-v is PyTorch's ScheduleDualPipeV, action for action.

PyTorch 2.11's torch.distributed.pipelining (the wheel of
requirements/libtorch.txt) computes ScheduleDualPipeV's pipeline_order for
every rank; each OVERLAP_F_B action (DualPipe's overlapped "F&B" chunk) is
taken as its two sub-actions, F then B, as scheduler/dualpipe_v.h models it.
Every rank's order must equal the row `zbpp-sched simulate --schedule
dualpipe-v --format csv` writes for it. Run by CTest
(tests/scheduler/CMakeLists.txt):

    python dualpipe_v_pytorch_test.py ZBPP_SCHED
"""

import subprocess
import sys

import torch.distributed.pipelining.schedules as schedules

# The stand-in stage of the import test beside this file.
from pytorch_schedules_test import StandInStage


def pytorch_rows(p, m):
    """Per rank, PyTorch's actions as text, overlapped pairs split."""
    stages = [StandInStage(0, 2 * p, p), StandInStage(2 * p - 1, 2 * p, p)]
    schedule = schedules.ScheduleDualPipeV(
        stages, m, loss_fn=lambda output, target: output)
    rows = []
    for rank in range(p):
        row = []
        for action in schedule.pipeline_order[rank]:
            if action is None:
                continue
            if action.computation_type == schedules.OVERLAP_F_B:
                row.extend(str(sub) for sub in action.sub_actions)
            else:
                row.append(str(action))
        rows.append(row)
    return rows


def zbpp_rows(zbpp_sched, p, m):
    out = subprocess.run(
        [zbpp_sched, "simulate", "--schedule", "dualpipe-v", "--stages",
         str(p), "--microbatches", str(m), "--cost-f", "1", "--cost-b", "1",
         "--cost-w", "1", "--format", "csv"],
        capture_output=True, text=True, check=True).stdout
    return [line.split(",") for line in out.splitlines() if line]


def main():
    zbpp_sched = sys.argv[1]
    failures = 0
    # m = 2p (the least either accepts) and above, even and odd.
    for p, m in [(1, 2), (1, 5), (2, 4), (2, 7), (3, 6), (4, 8), (4, 11),
                 (5, 13), (8, 16), (8, 24)]:
        want = pytorch_rows(p, m)
        got = zbpp_rows(zbpp_sched, p, m)
        if got != want:
            failures += 1
            print(f"FAIL p={p} m={m}:\n  PyTorch {want}\n  zbpp    {got}",
                  file=sys.stderr)
        else:
            print(f"ok p={p} m={m}: {sum(len(r) for r in want)} actions")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
