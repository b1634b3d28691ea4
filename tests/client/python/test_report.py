"""zbpp.report's rules on hand-built step summaries, where the live run
(test_e2e.py compares it with zbppctl) does not reach: data parallelism, a
resumed job with a hole in its stored history, losses that are not finite,
the window, the upper median, memory over its prediction, the bubble's
excess (client/zbppctl_report.h, zbppctl_breakdown.h, zbppctl_memory.h)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

from zbpp.report import build_report
from zbpp.types import Job, Transition
from zbpp.v1 import job_pb2, job_spec_pb2, schedule_pb2


def step(n: int, seconds: float, loss: float = 2.0) -> job_pb2.StepSummary:
    s = job_pb2.StepSummary(step=n, schedule_version=1 if n < 15 else 2, loss=loss,
                            step_seconds=seconds, tokens_per_second=7.0,
                            predicted_step_seconds=seconds / 2)
    s.complete_time.seconds = 1000 + 2 * n
    for stage in range(2):
        stats = s.stages.add(stage=stage, measured_bubble_rate=0.2 + 0.1 * stage,
                             predicted_bubble_rate=0.1, reduce_seconds=0.01 * (stage + 1),
                             exposed_reduce_seconds=0.001,
                             peak_activation_bytes=(3 << 20) if stage == 1 else 0,
                             predicted_peak_activation_bytes=2 << 20)
        stats.breakdown.compute_seconds = 0.5 * seconds
        stats.breakdown.input_wait_seconds = (0.4 + 0.1 * stage) * seconds
        stats.breakdown.overhead_seconds = 0.1 * seconds
        stats.breakdown.grant_seconds = 0.05
        stats.breakdown.gap_seconds = 0.05
    if n in (6, 19):
        s.eval_loss = 1.5 if n == 6 else 1.25
    return s


def test_report_rules() -> None:
    spec = job_spec_pb2.JobSpec(
        pipeline=job_spec_pb2.PipelineSpec(stages=2, microbatches=4, microbatch_size=2,
                                           data_parallel=2),
        model=job_spec_pb2.ModelSpec(seq_len=8), precision=job_spec_pb2.PRECISION_BF16)
    spec.checkpoint.resume_step = 4  # the job ran steps 5..24
    job = job_pb2.Job(id="j", spec=spec, state=job_pb2.JOB_STATE_SUCCEEDED,
                      steps_completed=25, validation_mode=job_spec_pb2.VALIDATION_MODE_POST)
    # Steps 5..24 but 7 (lost), step n taking n seconds; the last loss nan.
    steps = [step(n, float(n)) for n in range(5, 25) if n != 7]
    steps[-1].loss = math.nan
    versions = [schedule_pb2.ScheduleVersion(version=2, reason=2, effective_step=15)]
    r = build_report(job, steps, versions)

    assert (r.stages, r.replicas, r.workers) == (2, 2, 4)
    assert (r.missing_steps, r.history_complete) == (1, False)
    assert (r.loss_start, r.loss_end) == (2.0, None)  # nan is no number
    assert (r.eval_loss_start, r.eval_loss) == (1.5, 1.25)
    # 19 steps stored: the window skips the first 19 // 10 = 1.
    assert r.window_steps == 18
    assert r.step_seconds == 16.0  # sorted 6, 8..24 -> index 9
    # 2 * 4 * 2 * 8 tokens per step, 17 steps in 2 * (24 - 6) s.
    assert math.isclose(r.tokens_per_second, 128 * 17 / 36)
    assert all(map(math.isclose, r.bubble_rate_measured, [0.2, 0.3]))
    assert all(map(math.isclose, r.reduce_seconds, [0.01, 0.02]))
    assert (r.precision, r.validation_mode, r.validation_policy) == ("BF16", "POST", "AUTO")
    assert r.first_step_version is None  # version 1 was not read back
    assert r.last_step_version is not None and r.last_step_version.reason == "RESOLVE"
    assert r.last_version_step_seconds == 20.0  # steps 15..24: the upper median
    assert r.last_version_measured_prediction_seconds == 10.0  # half of each step
    memory = r.activation_memory
    assert memory is not None and memory.measured
    assert memory.stages[0].peak_bytes is None and memory.stages[1].peak_mib == 3.0
    assert memory.over_prediction is not None and memory.over_prediction.stage == 1
    assert math.isclose(memory.over_prediction.ratio, 1.5)
    b = r.breakdown
    assert b is not None and b.bubble_excess is not None
    # Stage 1's input waits: 0.5 of the step less the predicted 0.1 bubble.
    assert (b.bubble_excess.part, b.bubble_excess.stage) == ("input waits", 1)
    assert math.isclose(b.bubble_excess.share, 0.4)
    assert b.largest_gap_part is not None and b.largest_gap_part.part == "grant latency"


def test_state_changes_as_the_report_and_the_job_show_them() -> None:
    """Job.transitions: the report's entries as zbppctl's JSON has them (the
    time as text, whole seconds), the Job's with an aware datetime; `from`,
    a Python keyword, is `previous_state`."""
    job = job_pb2.Job(id="j", state=job_pb2.JOB_STATE_RUNNING, steps_completed=20)
    lost = job.transitions.add(to=job_pb2.JOB_STATE_RECOVERING, steps_completed=15,
                               message="worker w-3 lost")
    setattr(lost, "from", job_pb2.JOB_STATE_RUNNING)
    lost.time.seconds = 1000000000
    lost.time.nanos = 750000000
    healed = job.transitions.add(to=job_pb2.JOB_STATE_RUNNING, steps_completed=18)
    setattr(healed, "from", job_pb2.JOB_STATE_DEGRADED)

    r = build_report(job, [step(n, 1.0) for n in range(20)], [])
    assert [dataclasses.asdict(t) for t in r.transitions] == [
        {"previous_state": "RUNNING", "state": "RECOVERING", "time": "2001-09-09T01:46:40Z",
         "steps_completed": 15, "message": "worker w-3 lost"},
        {"previous_state": "DEGRADED", "state": "RUNNING", "time": None,
         "steps_completed": 18, "message": ""}]

    changes = Job.from_proto(job).transitions
    assert changes[0] == Transition(
        "RUNNING", "RECOVERING",
        dt.datetime(2001, 9, 9, 1, 46, 40, 750000, tzinfo=dt.timezone.utc), 15,
        "worker w-3 lost")
    assert changes[1].time is None and changes[1].previous_state == "DEGRADED"
