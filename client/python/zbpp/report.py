"""What a job achieved, as `zbppctl report --format json` prints it: the same
fields, computed from the same RPCs (GetJob, ListSteps and the
GetScheduleVersion of the versions that ran the first and the last step)
by the same rules (client/zbppctl_report.h, zbppctl_breakdown.h,
zbppctl_memory.h, zbppctl_json.h). `dataclasses.asdict(report)` is that
JSON object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zbpp.types import Transition, enum_name, finite
from zbpp.v1 import job_pb2, job_spec_pb2, schedule_pb2

#: The step span's parts (StepBreakdown) and their names in words, in
#: job.proto's order (api/step_breakdown.h SpanParts); their sum is the span.
SPAN_PARTS = (
    ("compute_seconds", "compute"),
    ("input_wait_seconds", "input waits"),
    ("send_wait_seconds", "send waits"),
    ("validation_check_seconds", "validation check"),
    ("reduction_wait_seconds", "reduction waits"),
    ("overhead_seconds", "executor overhead"),
)
#: The gap's parts before a step (GapParts); their sum is gap_seconds.
GAP_PARTS = (
    ("drain_seconds", "send drain"),
    ("validation_seconds", "validation"),
    ("embedding_exchange_seconds", "embedding exchange"),
    ("optimizer_seconds", "optimizer"),
    ("evaluation_seconds", "evaluation"),
    ("checkpoint_seconds", "checkpoint"),
    ("report_seconds", "reporting"),
    ("grant_seconds", "grant latency"),
    ("other_seconds", "other"),
)
#: A stage over its predicted activation memory by more than this factor is
#: named (zbppctl_memory.h kMemoryOverPredictionRatio).
MEMORY_OVER_PREDICTION_RATIO = 1.1
_MIB = 1024.0 * 1024.0


@dataclass(frozen=True)
class StageBreakdown:
    """Where one stage's time went, mean seconds per step over the window."""

    stage: int
    compute_seconds: float
    input_wait_seconds: float
    send_wait_seconds: float
    validation_check_seconds: float
    reduction_wait_seconds: float
    overhead_seconds: float
    drain_seconds: float
    validation_seconds: float
    embedding_exchange_seconds: float
    optimizer_seconds: float
    evaluation_seconds: float
    checkpoint_seconds: float
    report_seconds: float
    grant_seconds: float
    other_seconds: float
    gap_seconds: float


@dataclass(frozen=True)
class BreakdownShare:
    """One part of the breakdown on one stage: its name in words ("input
    waits"), mean seconds per step, and its mean fraction of the step."""

    part: str
    stage: int
    seconds: float
    share: float


@dataclass(frozen=True)
class Breakdown:
    """The window's breakdown (zbppctl_breakdown.h ReportBreakdown)."""

    stages: list[StageBreakdown]
    #: The largest part of the measured bubble beyond the predicted one.
    bubble_excess: BreakdownShare | None
    #: Mean gap before a step over the stages, seconds, and its share of the
    #: wall clock per step.
    gap_seconds: float
    gap_share: float
    largest_gap_part: BreakdownShare | None


@dataclass(frozen=True)
class StageMemory:
    """One stage's peak activation memory over the window: measured (None
    where not measured) and predicted, bytes and MiB (2^20 bytes), and
    their ratio (None where either is missing)."""

    stage: int
    peak_bytes: float | None
    predicted_peak_bytes: float
    peak_mib: float | None
    predicted_peak_mib: float
    ratio: float | None


@dataclass(frozen=True)
class OverPrediction:
    """The stage most over its predicted activation memory (ratio > 1.1)."""

    stage: int
    ratio: float


@dataclass(frozen=True)
class ActivationMemory:
    """Peak activation memory per stage (zbppctl_memory.h)."""

    measured: bool
    stages: list[StageMemory]
    over_prediction: OverPrediction | None


@dataclass(frozen=True)
class VersionRan:
    """The schedule version that ran the first or the last step, with its own
    prediction: step time and makespan, seconds, and bubble rate."""

    step: int
    version: int
    #: "INITIAL", "CALIBRATION", "RESOLVE", "RECOVERY" or "VALIDATION_MODE".
    reason: str
    effective_step: int
    predicted_step_seconds: float | None
    predicted_makespan_seconds: float | None
    predicted_bubble_rate: float | None


@dataclass(frozen=True)
class StateChange:
    """One change of the job's state as the report's JSON has it (zbppctl_json.h
    ReportJson: `types.Transition`, its time as text to the whole second,
    RFC 3339 UTC: "2001-09-09T01:46:40Z"; None when unset)."""

    previous_state: str
    state: str
    time: str | None
    steps_completed: int
    message: str

    @classmethod
    def from_proto(cls, t: job_pb2.JobTransition) -> StateChange:
        change = Transition.from_proto(t)
        return cls(change.previous_state, change.state,
                   change.time.strftime("%Y-%m-%dT%H:%M:%SZ") if change.time else None,
                   change.steps_completed, change.message)


@dataclass(frozen=True)
class Report:
    """What a job achieved (`zbppctl report --format json`, field for field).

    Averages are over the window: all steps but the first tenth (warm-up),
    at least one. Losses are nats per token (None when not finite or, for
    eval losses, never evaluated).
    """

    job_id: str
    state: str
    #: Steps completed.
    steps: int
    #: The spec's schedule name ("zb-h1").
    schedule: str
    stages: int
    replicas: int
    workers: int
    microbatches: int
    loss_start: float | None
    loss_end: float | None
    eval_loss_start: float | None
    eval_loss: float | None
    #: Trained tokens per wall-clock second over the window (step completion
    #: times: optimizer, validation and reporting included).
    tokens_per_second: float
    #: Median measured step time over the window, seconds.
    step_seconds: float
    window_steps: int
    #: Per stage, the mean measured and predicted bubble rate, in [0, 1].
    bubble_rate_measured: list[float]
    bubble_rate_predicted: list[float]
    #: Per stage (data parallelism), mean REDUCE_GRAD duration and its part
    #: after the last pass, seconds; 0 with one replica.
    reduce_seconds: list[float]
    exposed_reduce_seconds: list[float]
    #: None when the steps carry no breakdown.
    breakdown: Breakdown | None
    #: None when the steps carry no peak, measured or predicted.
    activation_memory: ActivationMemory | None
    recoveries: int
    #: Of them, restarts from the last checkpoint (or step 0); the steps
    #: completed on fewer replicas (DEGRADED) and the replicas running at
    #: the end (docs/elastic.md).
    restarts: int
    degraded_steps: int
    replicas_active: int
    #: The validation mode in force at the end ("POST", "SYNCHRONOUS"; None
    #: before the first schedule version) and the spec's policy ("AUTO" when
    #: unset).
    validation_mode: str | None
    validation_policy: str
    #: "FP32", "BF16" or "FP16".
    precision: str
    #: "GLOO" or "NCCL" ("AUTO" before any attempt), and why.
    transport: str
    transport_reason: str
    #: The blocks of each virtual stage, and how they were chosen.
    layout: list[int]
    layout_reason: str
    #: The layout drift report: the layout the measured costs predict best
    #: and why; empty while the running layout still is.
    better_layout: list[int]
    better_layout_reason: str
    rollbacks: int
    skipped_steps: int
    clipped_steps: int
    #: Distinct schedule versions the steps ran, and the last step's.
    schedule_versions: int
    last_step_schedule_version: int
    first_step_version: VersionRan | None
    last_step_version: VersionRan | None
    #: Median step time of the window's steps that ran the last step's
    #: version, seconds (to compare with its predicted_step_seconds).
    last_version_step_seconds: float
    #: Median predicted step of the same steps under the costs measured as
    #: they ran (StepSummary.predicted_step_seconds), seconds.
    last_version_measured_prediction_seconds: float
    #: Whether the coordinator's store holds every completed step's summary,
    #: and how many it lacks.
    history_complete: bool
    missing_steps: int
    #: Sum of every parameter after the last step; None before it.
    param_checksum: float | None
    #: The job's state changes, oldest first (Job.transitions: the newest 100).
    transitions: list[StateChange]


def _median(values: Sequence[float]) -> float:
    """The element std::nth_element puts at n / 2 (the upper median)."""
    return sorted(values)[len(values) // 2]


def _version_ran(versions: Sequence[schedule_pb2.ScheduleVersion],
                 step: job_pb2.StepSummary) -> VersionRan | None:
    for v in versions:
        if v.version == step.schedule_version:
            return VersionRan(step.step, v.version,
                              enum_name(schedule_pb2.ScheduleChangeReason, v.reason,
                                        "SCHEDULE_CHANGE_REASON_"),
                              v.effective_step, finite(v.predicted.step_seconds),
                              finite(v.predicted.makespan_seconds),
                              finite(v.predicted.bubble_rate))
    return None


def _share(part: str, stage: int, seconds: float, share: float) -> BreakdownShare:
    return BreakdownShare(part, stage, seconds, share)


def _breakdown(window: Sequence[job_pb2.StepSummary], stages: int) -> Breakdown | None:
    span_fields = [f for f, _ in SPAN_PARTS]
    gap_fields = [f for f, _ in GAP_PARTS]
    every = [f.name for f in job_pb2.StepBreakdown.DESCRIPTOR.fields]
    sums = [dict.fromkeys(every, 0.0) for _ in range(stages)]
    span_share = [[0.0] * len(SPAN_PARTS) for _ in range(stages)]
    gap_share = [[0.0] * len(GAP_PARTS) for _ in range(stages)]
    predicted, measured, counts = [0.0] * stages, [0.0] * stages, [0] * stages
    for step in window:
        if not step.step_seconds > 0:
            continue
        for stage in step.stages:
            s = stage.stage
            if s < 0 or s >= stages or not stage.HasField("breakdown"):
                continue
            b = stage.breakdown
            for name in every:
                sums[s][name] += getattr(b, name)
            for i, name in enumerate(span_fields):
                span_share[s][i] += getattr(b, name) / step.step_seconds
            for i, name in enumerate(gap_fields):
                gap_share[s][i] += getattr(b, name) / step.step_seconds
            predicted[s] += stage.predicted_bubble_rate
            measured[s] += stage.measured_bubble_rate
            counts[s] += 1
    means = [dict.fromkeys(every, 0.0) for _ in range(stages)]
    excess: BreakdownShare | None = None
    largest_gap: BreakdownShare | None = None
    gap_sum = cycle_sum = 0.0
    measured_stages = 0
    for s in range(stages):
        if counts[s] == 0:
            continue
        measured_stages += 1
        n = counts[s]
        # AddBreakdown(sums, 1 / n, mean): a multiplication by 1 / n, as there.
        mean = means[s] = {name: 0.0 + (1 / n) * sums[s][name] for name in every}
        difference = (measured[s] - predicted[s]) / n
        for i, (name, label) in enumerate(SPAN_PARTS):
            cycle_sum += mean[name]
            # Compute is predicted as it is; a stage within its prediction
            # has no excess to explain.
            if name == "compute_seconds" or not difference > 0:
                continue
            share = span_share[s][i] / n - (predicted[s] / n if name == "input_wait_seconds"
                                            else 0)
            if share > 0 and (excess is None or share > excess.share):
                excess = _share(label, s, mean[name], share)
        cycle_sum += mean["gap_seconds"]
        gap_sum += mean["gap_seconds"]
        for i, (name, label) in enumerate(GAP_PARTS):
            seconds = mean[name]
            if seconds > 0 and (largest_gap is None or seconds > largest_gap.seconds):
                largest_gap = _share(label, s, seconds, gap_share[s][i] / n)
    if measured_stages == 0:
        return None
    return Breakdown(
        stages=[StageBreakdown(stage=s, **{name: means[s][name]
                                           for name in span_fields + gap_fields + ["gap_seconds"]})
                for s in range(stages)],
        bubble_excess=excess, gap_seconds=gap_sum / measured_stages,
        gap_share=gap_sum / cycle_sum if cycle_sum > 0 else 0, largest_gap_part=largest_gap)


def _activation_memory(window: Sequence[job_pb2.StepSummary],
                       stages: int) -> ActivationMemory | None:
    peak, predicted_peak = [0.0] * stages, [0.0] * stages
    any_predicted = False
    for step in window:
        for stage in step.stages:
            s = stage.stage
            if s < 0 or s >= stages:
                continue
            any_predicted = any_predicted or stage.predicted_peak_activation_bytes > 0
            # Until a stage's first measurement its prediction follows the
            # window; after it, the prediction of its largest measured step.
            if peak[s] == 0 or stage.peak_activation_bytes > peak[s]:
                peak[s] = stage.peak_activation_bytes
                predicted_peak[s] = stage.predicted_peak_activation_bytes
    measured = any(p > 0 for p in peak)
    if not measured and not any_predicted:
        return None
    ratios: list[float | None] = [
        peak[s] / predicted_peak[s] if peak[s] > 0 and predicted_peak[s] > 0 else None
        for s in range(stages)]
    over: OverPrediction | None = None
    for s, ratio in enumerate(ratios):
        if ratio is not None and ratio > MEMORY_OVER_PREDICTION_RATIO and (
                over is None or ratio > over.ratio):
            over = OverPrediction(s, ratio)
    return ActivationMemory(measured, [
        StageMemory(s, peak[s] if peak[s] > 0 else None, predicted_peak[s],
                    peak[s] / _MIB if peak[s] > 0 else None, predicted_peak[s] / _MIB,
                    _finite_or_none(ratios[s]))
        for s in range(stages)], over)


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None else finite(value)


def _seconds_between(a: job_pb2.StepSummary, b: job_pb2.StepSummary) -> float:
    """b's complete_time - a's, seconds."""
    return float((b.complete_time.seconds - a.complete_time.seconds)
                 + (b.complete_time.nanos - a.complete_time.nanos) * 1e-9)


def build_report(job: job_pb2.Job, steps: Sequence[job_pb2.StepSummary],
                 versions: Sequence[schedule_pb2.ScheduleVersion]) -> Report:
    """The report of `job` from its step summaries (ascending, at least one)
    and the schedule versions read back by number (any order; the ones the
    first and the last step ran fill first_step_version and
    last_step_version, which stay None when absent)."""
    spec, pipeline = job.spec, job.spec.pipeline
    stages = pipeline.stages
    replicas = pipeline.data_parallel if pipeline.data_parallel > 1 else 1
    first_step = (spec.checkpoint.resume_step + 1
                  if spec.checkpoint.HasField("resume_step") else 0)
    stored = {s.step for s in steps if first_step <= s.step < job.steps_completed}
    missing = max(job.steps_completed - first_step, 0) - len(stored)
    evals = [s.eval_loss for s in steps if s.HasField("eval_loss")]

    skip = min(len(steps) - 1, len(steps) // 10)
    window = list(steps[skip:])
    tokens_per_step = (float(replicas) * pipeline.microbatches * pipeline.microbatch_size
                       * spec.model.seq_len)
    wall = _seconds_between(window[0], window[-1])
    if len(window) >= 2 and wall > 0:
        tokens_per_second = tokens_per_step * float(len(window) - 1) / wall
    else:
        tokens_per_second = window[-1].tokens_per_second

    sums = [[0.0] * stages for _ in range(4)]
    counts = [0] * stages
    for s in window:
        for stage in s.stages:
            if stage.stage < 0 or stage.stage >= stages:
                continue
            values = (stage.measured_bubble_rate, stage.predicted_bubble_rate,
                      stage.reduce_seconds, stage.exposed_reduce_seconds)
            for i, value in enumerate(values):
                sums[i][stage.stage] += value
            counts[stage.stage] += 1
    means = [[total / counts[w] if counts[w] else 0.0 for w, total in enumerate(row)]
             for row in sums]

    last_version = steps[-1].schedule_version
    return Report(
        job_id=job.id,
        state=enum_name(job_pb2.JobState, job.state, "JOB_STATE_"),
        steps=job.steps_completed,
        schedule=spec.schedule.name,
        stages=stages, replicas=replicas, workers=stages * replicas,
        microbatches=pipeline.microbatches,
        loss_start=finite(steps[0].loss), loss_end=finite(steps[-1].loss),
        eval_loss_start=finite(evals[0]) if evals else None,
        eval_loss=finite(evals[-1]) if evals else None,
        tokens_per_second=tokens_per_second,
        step_seconds=_median([s.step_seconds for s in window]),
        window_steps=len(window),
        bubble_rate_measured=means[0], bubble_rate_predicted=means[1],
        reduce_seconds=means[2], exposed_reduce_seconds=means[3],
        breakdown=_breakdown(window, stages),
        activation_memory=_activation_memory(window, stages),
        recoveries=job.recoveries_total,
        restarts=job.restarts_total,
        degraded_steps=job.degraded_steps,
        replicas_active=job.replicas_active,
        validation_mode=None if job.validation_mode == 0 else enum_name(
            job_spec_pb2.ValidationMode, job.validation_mode, "VALIDATION_MODE_"),
        validation_policy="AUTO" if spec.validation == 0 else enum_name(
            job_spec_pb2.ValidationMode, spec.validation, "VALIDATION_MODE_"),
        precision="FP32" if spec.precision == 0 else enum_name(
            job_spec_pb2.Precision, spec.precision, "PRECISION_"),
        transport=enum_name(job_spec_pb2.Transport, job.transport, "TRANSPORT_"),
        transport_reason=job.transport_reason,
        layout=list(job.layout),
        layout_reason=job.layout_reason,
        better_layout=list(job.better_layout),
        better_layout_reason=job.better_layout_reason,
        rollbacks=job.rollbacks_total, skipped_steps=job.skipped_steps_total,
        clipped_steps=job.clipped_steps_total,
        schedule_versions=len({s.schedule_version for s in steps}),
        last_step_schedule_version=last_version,
        first_step_version=_version_ran(versions, steps[0]),
        last_step_version=_version_ran(versions, steps[-1]),
        last_version_step_seconds=_median(
            [s.step_seconds for s in window if s.schedule_version == last_version]),
        last_version_measured_prediction_seconds=_median(
            [s.predicted_step_seconds for s in window if s.schedule_version == last_version]),
        history_complete=missing == 0, missing_steps=missing,
        param_checksum=finite(job.param_checksum) if job.HasField("param_checksum") else None,
        transitions=[StateChange.from_proto(t) for t in job.transitions])

