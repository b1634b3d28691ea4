"""PyTorch's own schedules through `zbpp-sched simulate --import`.

PyTorch 2.11's torch.distributed.pipelining (the wheel of
requirements/libtorch.txt) builds each schedule's pipeline_order and writes it
with `_dump_csv`, compute-only and with communication; every file must import,
validate and simulate, with exactly one F and one backward (I and W, or the
fused B) per (virtual stage, microbatch), and the SEND/RECV count that the
placement implies. Run by CTest (tests/scheduler/CMakeLists.txt):

    python pytorch_schedules_test.py ZBPP_SCHED OUT_DIR

The schedule classes need only the attributes of a pipeline stage that their
constructors read (num_stages, group_size, group_rank, ...), not a model or a
process group: a stand-in stage is enough to compute the order.
"""

import csv
import json
import os
import re
import subprocess
import sys

import torch.distributed.pipelining.schedules as schedules


class StandInStage:
    """What the schedule constructors read of a _PipelineStageBase."""

    def __init__(self, stage_index, num_stages, group_size):
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group_size = group_size
        self.group_rank = 0
        self.submod = None
        self.stage_index_to_group_rank = {}
        self.is_first = stage_index == 0
        self.is_last = stage_index == num_stages - 1


def multi_stage(cls, p, v, m):
    """A PipelineScheduleMulti subclass for p ranks, v stages each."""
    stages = [StandInStage(i * p, p * v, p) for i in range(v)]
    return cls(stages, m, loss_fn=lambda output, target: output)


# (class, ranks p, stages per rank v, microbatches m).
MULTI = [
    (schedules.ScheduleInterleaved1F1B, 4, 2, 8),
    (schedules.ScheduleInterleaved1F1B, 2, 3, 4),
    (schedules.ScheduleInterleavedZeroBubble, 4, 2, 8),
    (schedules.ScheduleInterleavedZeroBubble, 2, 2, 6),
    (schedules.ScheduleZBVZeroBubble, 4, 2, 8),
    (schedules.ScheduleZBVZeroBubble, 2, 2, 5),
    (schedules.ScheduleDualPipeV, 4, 2, 8),
    (schedules.ScheduleDualPipeV, 2, 2, 6),
    (schedules.ScheduleLoopedBFS, 4, 2, 8),
    (schedules.ScheduleLoopedBFS, 3, 2, 3),
]

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(zbpp_sched, path, fmt):
    return subprocess.run(
        [zbpp_sched, "simulate", "--import", path, "--cost-f", "1",
         "--cost-b", "2", "--cost-w", "1", "--cost-comm", "0.1",
         "--format", fmt],
        capture_output=True, text=True, check=False)


def transfers(owner, m):
    """SEND/RECV actions _add_send_recv writes: a SEND and a RECV per
    microbatch for each direction of each pair of neighbouring stages on
    different ranks."""
    crossings = sum(1 for s in range(len(owner) - 1) if owner[s] != owner[s + 1])
    return 4 * m * crossings


def check_import(zbpp_sched, path, name, p, v, m, owner):
    result = run(zbpp_sched, path, "csv")
    check(result.returncode == 0, f"{name}: exit {result.returncode}: {result.stderr}")
    if result.returncode != 0:
        return
    cells = [c for row in csv.reader(result.stdout.splitlines()) for c in row if c]
    kinds = {k: 0 for k in "FIWB"}
    for cell in cells:
        match = re.fullmatch(r"\d+([FIWB])\d+", cell)
        if match:
            kinds[match.group(1)] += 1
    n = p * v * m
    check(kinds["F"] == n, f"{name}: {kinds['F']} F, want {n}")
    check(kinds["I"] + kinds["B"] == n, f"{name}: {kinds['I']} I + {kinds['B']} B, want {n}")
    check(kinds["W"] + kinds["B"] == n, f"{name}: {kinds['W']} W + {kinds['B']} B, want {n}")
    if path.endswith(".comms.csv"):
        want = transfers(owner, m)
        check(f": {want} SEND/RECV action(s) checked" in result.stderr,
              f"{name}: want {want} SEND/RECV checked, stderr: {result.stderr}")
    report = run(zbpp_sched, path, "json")
    check(report.returncode == 0, f"{name}: json exit {report.returncode}")
    if report.returncode == 0:
        got = json.loads(report.stdout)
        check((got["stages"], got["chunks"], got["microbatches"]) == (p, v, m),
              f"{name}: shape {got['stages']}, {got['chunks']}, {got['microbatches']}")
        want_placement = "v" if owner == [min(s, 2 * p - 1 - s) for s in range(2 * p)] else "loop"
        check(got["placement"] == want_placement, f"{name}: placement {got['placement']}")
        # The costs are per worker (split over its v chunks): each worker
        # runs m*(T_F + T_B + T_W) = 4*m seconds of passes.
        check(got["makespan"] >= 4 * m, f"{name}: makespan {got['makespan']}")
        # PyTorch runs these over NCCL: zbpp's order of each pair's
        # messages, derived from the schedule alone, must run them too.
        check(got["in_order_transport"]["runs"],
              f"{name}: in-order transport: {got['in_order_transport']['error']}")
        # Whether post-update validation can speculate under that transport
        # depends on the schedule: reported either way, with the broken rule.
        prefixes = got["speculative_prefixes"]
        check(len(prefixes["actions_per_stage"]) == p,
              f"{name}: {len(prefixes['actions_per_stage'])} speculative prefixes, want {p}")
        check(prefixes["closed"] == (prefixes["error"] is None)
              and (prefixes["closed"] or "prefix" in prefixes["error"]),
              f"{name}: speculative prefixes {prefixes}")


def main():
    zbpp_sched, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    for cls, p, v, m in MULTI:
        schedule = multi_stage(cls, p, v, m)
        owner = [schedule.stage_index_to_group_rank[s] for s in range(p * v)]
        for fmt, suffix in (("compute_only", "compute"), ("compute_comms", "comms")):
            name = f"{cls.__name__}-p{p}-v{v}-m{m}.{suffix}"
            path = os.path.join(out_dir, name + ".csv")
            schedule._dump_csv(path, format=fmt)
            check_import(zbpp_sched, path, name, p, v, m, owner)
        # One SEND taken out of the file with communication must be refused
        # (exit 2), naming the action that lost it.
        with open(path) as f:
            text = f.read()
        send = re.search(r"(\d+)SEND_F(\d+),", text)
        broken = os.path.join(out_dir, name + ".missing-send.csv")
        with open(broken, "w") as f:
            f.write(text.replace(send.group(0), "", 1))
        result = run(zbpp_sched, broken, "table")
        check(result.returncode == 2 and
              f"no {send.group(1)}SEND_F{send.group(2)} after it" in result.stderr,
              f"{name} without {send.group(0)}: exit {result.returncode}: {result.stderr}")

    # GPipe is a single-stage schedule: its order comes from
    # _get_pipeline_order, written as _dump_csv writes rows.
    p, m = 4, 8
    for cls in (schedules.ScheduleGPipe,):
        order = cls(StandInStage(0, p, p), m, loss_fn=lambda o, t: o)._get_pipeline_order()
        name = f"{cls.__name__}-p{p}-m{m}"
        path = os.path.join(out_dir, name + ".csv")
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows(order[rank] for rank in sorted(order))
        check_import(zbpp_sched, path, name, p, 1, m, list(range(p)))

    # PyTorch 2.11's Schedule1F1B._get_pipeline_order numbers the last
    # rank's forwards from 1 (its warm-up is empty, so the first steady-state
    # forward is forward_mb + 1 = 1): that rank runs F1..F8 and never F0.
    # The order is refused, naming the microbatch that is not whole.
    one_f_one_b = schedules.Schedule1F1B(StandInStage(0, p, p), m, loss_fn=lambda o, t: o)
    order = one_f_one_b._get_pipeline_order()
    path = os.path.join(out_dir, f"Schedule1F1B-p{p}-m{m}.csv")
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(order[rank] for rank in sorted(order))
    result = run(zbpp_sched, path, "table")
    check(result.returncode == 2 and f"microbatch {m}" in result.stderr,
          f"Schedule1F1B order: exit {result.returncode}: {result.stderr}")

    if failures:
        print(f"{len(failures)} failure(s)", file=sys.stderr)
        return 1
    print(f"ok: {len(MULTI) * 2 + 1} PyTorch schedules imported, 1 refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
