"""What the client returns: jobs, their steps and the events of a watch, as
dataclasses in the API's vocabulary (proto/zbpp/v1/job.proto). Enums are
their value names without the enum's prefix ("RUNNING", "POST", "GLOO"),
timestamps timezone-aware `datetime`s in UTC, durations seconds, memory
bytes, rates ratios in [0, 1].
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from zbpp.v1 import job_pb2, job_spec_pb2, schedule_pb2

#: The states a job ends in (job.proto JobState).
TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


def enum_name(enum: Any, number: int, prefix: str) -> str:
    """An enum value's name without `prefix` ("JOB_STATE_RUNNING" -> "RUNNING")."""
    name: str = enum.Name(number)
    return name[len(prefix):] if name.startswith(prefix) else name


def time_of(stamp: Timestamp, present: bool = True) -> dt.datetime | None:
    """A protobuf Timestamp as an aware datetime (UTC); None when unset."""
    if not present:
        return None
    return dt.datetime.fromtimestamp(stamp.seconds, dt.timezone.utc) + dt.timedelta(
        microseconds=stamp.nanos // 1000)


def finite(value: float) -> float | None:
    """`value`, or None for nan and inf (as `zbppctl --format json` prints them)."""
    return value if math.isfinite(value) else None


def message_dict(message: Any) -> dict[str, Any]:
    """A message as a dict: proto field names, enums by name, int64 as int,
    fields left unset absent (protobuf's JSON mapping)."""
    out: dict[str, Any] = json_format.MessageToDict(
        message, preserving_proto_field_name=True)
    return out


@dataclass(frozen=True)
class StageStats:
    """One stage in one step (StageStepStats). With data parallelism
    every time is the mean over the stage's replicas."""

    stage: int
    worker_id: str
    #: Idle fraction of the stage, measured and as the simulator predicts it.
    measured_bubble_rate: float
    predicted_bubble_rate: float
    idle_seconds: float
    comm_seconds: float
    #: Mean F, B and W pass durations, seconds.
    f_seconds: float
    b_seconds: float
    w_seconds: float
    reduce_seconds: float
    exposed_reduce_seconds: float
    #: Peak activation memory, measured (0 when not) and predicted, bytes.
    peak_activation_bytes: float
    predicted_peak_activation_bytes: float
    #: Where the stage's time went (StepBreakdown's fields), seconds.
    breakdown: dict[str, float]

    @classmethod
    def from_proto(cls, s: job_pb2.StageStepStats) -> StageStats:
        return cls(s.stage, s.worker_id, s.measured_bubble_rate, s.predicted_bubble_rate,
                   s.idle_seconds, s.comm_seconds, s.f_seconds, s.b_seconds, s.w_seconds,
                   s.reduce_seconds, s.exposed_reduce_seconds, s.peak_activation_bytes,
                   s.predicted_peak_activation_bytes,
                   {f.name: getattr(s.breakdown, f.name)
                    for f in s.breakdown.DESCRIPTOR.fields})


@dataclass(frozen=True)
class Step:
    """One completed optimizer step (StepSummary)."""

    #: The step, 0-based.
    step: int
    schedule_version: int
    #: Training loss, nats per token (nan when not finite).
    loss: float
    #: Measured step time (the longest worker's), seconds.
    step_seconds: float
    tokens_per_second: float
    measured_bubble_rate: float
    predicted_bubble_rate: float
    #: Held-out loss after the step's update; None on steps without one.
    eval_loss: float | None
    complete_time: dt.datetime | None
    #: Per stage, by stage; empty in the BASIC view (list_jobs, watch).
    stages: list[StageStats]

    @classmethod
    def from_proto(cls, s: job_pb2.StepSummary) -> Step:
        return cls(s.step, s.schedule_version, s.loss, s.step_seconds, s.tokens_per_second,
                   s.measured_bubble_rate, s.predicted_bubble_rate,
                   s.eval_loss if s.HasField("eval_loss") else None,
                   time_of(s.complete_time, s.HasField("complete_time")),
                   [StageStats.from_proto(x) for x in s.stages])


@dataclass(frozen=True)
class Assignment:
    """Which worker runs one stage of one replica."""

    stage: int
    replica: int
    worker_id: str


@dataclass(frozen=True)
class Transition:
    """One change of a job's state (JobTransition): `previous_state` ->
    `state` ("RUNNING" -> "DEGRADED"; job.proto's `from` and `to`, a
    Python keyword among them)."""

    previous_state: str
    state: str
    time: dt.datetime | None
    #: Steps completed when it happened.
    steps_completed: int
    #: The job's state_message as the change set it ("" for none).
    message: str

    @classmethod
    def from_proto(cls, t: job_pb2.JobTransition) -> Transition:
        return cls(enum_name(job_pb2.JobState, getattr(t, "from"), "JOB_STATE_"),
                   enum_name(job_pb2.JobState, t.to, "JOB_STATE_"),
                   time_of(t.time, t.HasField("time")), t.steps_completed, t.message)


@dataclass(frozen=True)
class Job:
    """A job as the coordinator knows it (job.proto Job)."""

    id: str
    name: str
    #: "PENDING", "ASSIGNING", "RUNNING", "DEGRADED" (running on fewer
    #: replicas after a lost worker, docs/elastic.md), "RECOVERING",
    #: "SUCCEEDED", "FAILED" or "CANCELLED".
    state: str
    #: Why the job is in its state (FAILED, RECOVERING); may be empty.
    state_message: str
    #: Optimizer steps completed, of `steps` asked for.
    steps_completed: int
    steps: int
    #: Pipeline stages p, data-parallel replicas d, microbatches m per step.
    stages: int
    replicas: int
    microbatches: int
    #: The current schedule version's number; 0 before the first.
    schedule_version: int
    #: The schedule asked for ("zb-h1", "auto", ...).
    schedule: str
    #: The validation mode in force ("POST", "SYNCHRONOUS"); None before
    #: the first schedule version.
    validation_mode: str | None
    #: The transport of the current attempt ("GLOO", "NCCL"; "AUTO" before
    #: the first) and why.
    transport: str
    transport_reason: str
    #: The blocks of each virtual stage, how they were chosen
    #: ("auto: [6, 2] predicts ...", "given", ...) and by whom ("GIVEN",
    #: "EVEN", "ANALYTIC" at submission, "PROFILED" at calibration; "" for a
    #: job of an older coordinator).
    layout: list[int]
    layout_reason: str
    layout_source: str
    #: The layout drift report: the layout the measured costs now predict
    #: best ("measured: [5, 3] would predict ...") when it beats the running
    #: one by 5 %; empty otherwise.
    better_layout: list[int]
    better_layout_reason: str
    assignments: list[Assignment]
    first_step: Step | None
    last_step: Step | None
    rollbacks: int
    skipped_steps: int
    clipped_steps: int
    recoveries: int
    #: Recoveries that restarted from the last checkpoint (or step 0); the
    #: others resumed from the surviving workers' memory.
    restarts: int
    #: Replicas running steps: `replicas` when RUNNING, fewer while
    #: DEGRADED, 0 otherwise; and the steps completed while DEGRADED.
    replicas_active: int
    degraded_steps: int
    #: Step of the newest checkpoint; None when none.
    last_checkpoint_step: int | None
    #: The newest step every stage has a snapshot of
    #: (checkpoint.snapshot_interval_steps); None when none.
    last_snapshot_step: int | None
    #: Sum of every parameter after the last step; None before it.
    param_checksum: float | None
    create_time: dt.datetime | None
    start_time: dt.datetime | None
    end_time: dt.datetime | None
    #: The job's state changes, oldest first (the newest 100), e.g.
    #: RUNNING -> RECOVERING -> DEGRADED -> RUNNING for a lost worker and its
    #: replacement (docs/elastic.md).
    transitions: list[Transition]
    #: The spec as submitted, as a dict (proto field names, defaults absent).
    spec: dict[str, Any] = field(repr=False)
    #: The message itself, for what the fields above leave out.
    proto: job_pb2.Job = field(repr=False, compare=False)

    @property
    def workers(self) -> int:
        """The job's worker daemons: stages * replicas."""
        return self.stages * self.replicas

    @property
    def done(self) -> bool:
        """Whether the job is in a terminal state."""
        return self.state in TERMINAL_STATES

    @classmethod
    def from_proto(cls, j: job_pb2.Job) -> Job:
        p = j.spec.pipeline
        return cls(
            id=j.id, name=j.spec.name,
            state=enum_name(job_pb2.JobState, j.state, "JOB_STATE_"),
            state_message=j.state_message, steps_completed=j.steps_completed,
            steps=j.spec.steps, stages=p.stages, replicas=max(p.data_parallel, 1),
            microbatches=p.microbatches, schedule_version=j.schedule_version,
            schedule=j.spec.schedule.name,
            validation_mode=None if j.validation_mode == 0 else enum_name(
                job_spec_pb2.ValidationMode, j.validation_mode, "VALIDATION_MODE_"),
            transport=enum_name(job_spec_pb2.Transport, j.transport, "TRANSPORT_"),
            transport_reason=j.transport_reason,
            layout=list(j.layout),
            layout_reason=j.layout_reason,
            layout_source="" if j.layout_source == 0 else enum_name(
                job_pb2.LayoutSource, j.layout_source, "LAYOUT_SOURCE_"),
            better_layout=list(j.better_layout),
            better_layout_reason=j.better_layout_reason,
            assignments=[Assignment(a.stage, a.replica, a.worker_id) for a in j.assignments],
            first_step=Step.from_proto(j.first_step) if j.HasField("first_step") else None,
            last_step=Step.from_proto(j.last_step) if j.HasField("last_step") else None,
            rollbacks=j.rollbacks_total, skipped_steps=j.skipped_steps_total,
            clipped_steps=j.clipped_steps_total, recoveries=j.recoveries_total,
            restarts=j.restarts_total, replicas_active=j.replicas_active,
            degraded_steps=j.degraded_steps,
            last_checkpoint_step=j.last_checkpoint_step if j.last_checkpoint_step >= 0 else None,
            last_snapshot_step=(j.last_snapshot_step
                                if len(j.snapshot_steps) > 0 and j.last_snapshot_step >= 0
                                else None),
            param_checksum=j.param_checksum if j.HasField("param_checksum") else None,
            create_time=time_of(j.create_time, j.HasField("create_time")),
            start_time=time_of(j.start_time, j.HasField("start_time")),
            end_time=time_of(j.end_time, j.HasField("end_time")),
            transitions=[Transition.from_proto(t) for t in j.transitions],
            spec=message_dict(j.spec), proto=j)


@dataclass(frozen=True)
class ScheduleChange:
    """A schedule version as a watch announces it (ScheduleVersion, without
    the actions and the cost model: `Client.schedule` reads those)."""

    version: int
    #: The first step that runs it.
    effective_step: int
    #: "INITIAL", "CALIBRATION", "RESOLVE", "RECOVERY" or "VALIDATION_MODE".
    reason: str
    reason_detail: str
    #: The schedule's name ("zb-h1", "zb-auto", ...).
    name: str
    #: The simulator's prediction for it: step time and makespan, seconds,
    #: and bubble rate.
    predicted_step_seconds: float
    predicted_makespan_seconds: float
    predicted_bubble_rate: float
    publish_time: dt.datetime | None

    @classmethod
    def from_proto(cls, v: schedule_pb2.ScheduleVersion) -> ScheduleChange:
        return cls(v.version, v.effective_step,
                   enum_name(schedule_pb2.ScheduleChangeReason, v.reason,
                             "SCHEDULE_CHANGE_REASON_"),
                   v.reason_detail, v.schedule.name, v.predicted.step_seconds,
                   v.predicted.makespan_seconds, v.predicted.bubble_rate,
                   time_of(v.publish_time, v.HasField("publish_time")))


@dataclass(frozen=True)
class Validation:
    """What post-update validation decided for one step (paper §4;
    ValidationOutcome)."""

    step: int
    #: "COMMITTED", "CLIPPED" or "SKIPPED".
    decision: str
    #: "POST" or "SYNCHRONOUS".
    mode: str | None
    global_grad_norm: float
    found_inf_nan: bool
    clip_coefficient: float
    rolled_back_stages: list[int]
    rollback_seconds: float

    @classmethod
    def from_proto(cls, o: job_pb2.ValidationOutcome) -> Validation:
        return cls(o.step,
                   enum_name(job_pb2.ValidationDecision, o.decision, "VALIDATION_DECISION_"),
                   None if o.mode == 0 else enum_name(job_spec_pb2.ValidationMode, o.mode,
                                                      "VALIDATION_MODE_"),
                   o.global_grad_norm, o.found_inf_nan, o.clip_coefficient,
                   list(o.rolled_back_stages), o.rollback_seconds)


EventKind = Literal["snapshot", "state", "step", "schedule", "validation"]


@dataclass(frozen=True)
class Event:
    """One event of `Client.watch` (job.proto JobEvent). `kind` says which
    payload is set:

    * "snapshot": `job`, the job when the watch began (first event only);
    * "state": `state`, `previous_state`, `message` (the job's state_message);
    * "step": `step`, a completed step (BASIC: no per-stage stats);
    * "schedule": `schedule`, a newly published schedule version;
    * "validation": `validation`, a step's validation outcome.

    `sequence` is the coordinator's (increasing per job within one
    coordinator process); None for an event the client recovered itself
    after a dropped stream (a step from ListSteps, a version from
    GetScheduleVersion, a state change seen in the new snapshot), whose
    `time` is then when the step completed, the version was published or the
    snapshot was taken.
    """

    kind: EventKind
    job_id: str
    sequence: int | None
    time: dt.datetime | None
    job: Job | None = None
    state: str | None = None
    previous_state: str | None = None
    message: str | None = None
    step: Step | None = None
    schedule: ScheduleChange | None = None
    validation: Validation | None = None
