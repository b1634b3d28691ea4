"""`zbpp.Client`: the coordinator's JobService from Python, verb for verb
what `zbppctl` offers (README.md, "The control plane"), named as Kubeflow's
TrainerClient and Ray's JobSubmissionClient name theirs where one exists.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import grpc
from google.protobuf import json_format

from zbpp import types
from zbpp.connection import DEFAULT_TIMEOUT_SECONDS, Connection, DeadlineExceeded, Tls
from zbpp.errors import Error, JobFailed, NotFound, SpecError, Unavailable
from zbpp.report import Report, build_report
from zbpp.spec import SpecLike, job_spec
from zbpp.types import Event, Job, ScheduleChange, Step, Validation, enum_name, time_of
from zbpp.v1 import job_pb2, job_pb2_grpc, schedule_pb2

ScheduleFormat = Literal["json", "csv", "svg", "trace", "measured-trace"]
_T = TypeVar("_T")
# The stream codes after which a watch reconnects: the connection dropped or
# the coordinator went away (a restart), not a refusal.
_RESUMABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                        grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})
_PAGE_SIZE = 1000  # the most the coordinator returns per ListJobs page


def _state_number(state: str) -> job_pb2.JobState:
    """A JobState by name ("RUNNING" or "JOB_STATE_RUNNING"); ValueError if none."""
    name = state.upper()
    return cast(job_pb2.JobState, job_pb2.JobState.Value(
        name if name.startswith("JOB_STATE_") else "JOB_STATE_" + name))


class Client:
    """A client of one zbpp coordinator's JobService.

    `address` is host:port of its gRPC server (default $ZBPP_COORDINATOR,
    else 127.0.0.1:50051). `token` is the bearer token the coordinator
    requires when started with --token-file, sent on every call;
    `token_file` reads it from a file as `zbppctl --token-file` does. `tls`
    is a `Tls` (or the CA file's path: Tls(ca=...)), as zbppctl's --tls-ca,
    --tls-cert and --tls-key; None for plaintext. `timeout` is each call's
    deadline and a watch's connection wait, seconds.

    Every failure raises a `zbpp.Error` (never a grpc.RpcError); a
    coordinator that cannot be reached raises `Unavailable` with the same
    hint as zbppctl (a TLS mismatch named). Connecting is lazy: the first
    call connects. Thread-safe; use it as a context manager or `close()` it.
    """

    def __init__(self, address: str | None = None, token: str | None = None,
                 tls: Tls | str | os.PathLike[str] | None = None, *,
                 token_file: str | os.PathLike[str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        if tls is not None and not isinstance(tls, Tls):
            tls = Tls(ca=tls)
        self._conn = Connection(address, token, token_file, tls, timeout)
        self._jobs = job_pb2_grpc.JobServiceStub(self._conn.channel)

    @property
    def address(self) -> str:
        """The coordinator's address (host:port)."""
        return self._conn.address

    def close(self) -> None:
        """Closes the channel; the client is unusable afterwards."""
        self._conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: Callable[..., _T], request: Any, timeout: float | None = None) -> _T:
        try:
            return method(request, timeout=timeout or self._conn.timeout,
                          metadata=self._conn.metadata)
        except grpc.RpcError as e:
            raise self._conn.error(e) from None

    # Jobs ------------------------------------------------------------------

    def submit(self, spec: SpecLike) -> str:
        """Submits a job and returns its id.

        `spec`: a dict of JobSpec fields, a YAML text, a path to a YAML file
        (as `zbppctl submit FILE`; schedule.file is read relative to it), or
        a zbpp.v1.JobSpec. Raises SpecError naming the field (`.field`) for
        a spec the package's reader or the coordinator refuses, NotFound for
        a file that cannot be read, PermissionDenied without the
        coordinator's token, Error (code RESOURCE_EXHAUSTED) when the
        coordinator holds its most unfinished jobs.
        """
        request = job_pb2.SubmitJobRequest(spec=job_spec(spec))
        job: job_pb2.Job = self._call(self._jobs.SubmitJob, request)
        return str(job.id)

    def get_job(self, job_id: str) -> Job:
        """The job in full (GetJob, FULL view). Raises NotFound."""
        return Job.from_proto(self._get(job_id, job_pb2.JOB_VIEW_FULL))

    def _get(self, job_id: str, view: job_pb2.JobView) -> job_pb2.Job:
        job: job_pb2.Job = self._call(self._jobs.GetJob,
                                      job_pb2.GetJobRequest(job_id=job_id, view=view))
        return job

    def list_jobs(self, state: str | Iterable[str] | None = None) -> list[Job]:
        """Every job, newest first (ListJobs, BASIC view: no per-stage stats),
        only those in `state` ("RUNNING", or several) when given. Raises
        ValueError for an unknown state name."""
        names = [state] if isinstance(state, str) else list(state or [])
        try:
            states = [_state_number(s) for s in names]
        except ValueError:
            known = ", ".join(n[len("JOB_STATE_"):] for n in job_pb2.JobState.keys()[1:])
            raise ValueError(f"state: expected one of {known}; got {names}") from None
        request = job_pb2.ListJobsRequest(page_size=_PAGE_SIZE, states=states,
                                          view=job_pb2.JOB_VIEW_BASIC)
        jobs: list[Job] = []
        while True:
            page: job_pb2.ListJobsResponse = self._call(self._jobs.ListJobs, request)
            jobs.extend(Job.from_proto(j) for j in page.jobs)
            # A server handing back the token it was given would loop forever.
            if not page.next_page_token or page.next_page_token == request.page_token:
                return jobs
            request.page_token = page.next_page_token

    def cancel(self, job_id: str, reason: str | None = None) -> Job:
        """Cancels a job that has not ended and returns it (CANCELLED), with
        `reason` as its state_message (at most 1024 bytes). Raises NotFound,
        Error (code FAILED_PRECONDITION) for a job already ended,
        PermissionDenied without the coordinator's token."""
        request = job_pb2.CancelJobRequest(job_id=job_id,
                                           reason=reason if reason is not None
                                           else "cancelled with the zbpp Python client")
        return Job.from_proto(self._call(self._jobs.CancelJob, request))

    def steps(self, job_id: str, from_step: int = 0) -> list[Step]:
        """The job's completed steps from `from_step`, oldest first, each with
        its per-stage stats (ListSteps, every page): its training curve.
        Raises NotFound."""
        return [Step.from_proto(s) for s in self._list_steps(job_id, from_step)]

    def _list_steps(self, job_id: str, from_step: int = 0) -> list[job_pb2.StepSummary]:
        request = job_pb2.ListStepsRequest(job_id=job_id, from_step=from_step)
        steps: list[job_pb2.StepSummary] = []
        while True:
            page: job_pb2.ListStepsResponse = self._call(self._jobs.ListSteps, request)
            steps.extend(page.steps)
            # A server handing back the same page would loop forever.
            if page.next_from_step < 0 or page.next_from_step <= request.from_step:
                return steps
            request.from_step = page.next_from_step

    # Watching --------------------------------------------------------------

    def watch(self, job_id: str, *, reconnect_seconds: float = 60.0) -> Iterator[Event]:
        """The job's events as they happen (WatchJob): first a "snapshot",
        then "state", "step", "schedule" and "validation" events, until the
        job ends (the iterator stops after its final state event).

        A dropped stream (the network, a coordinator restart) is resumed:
        the client reconnects for up to `reconnect_seconds`, reads the steps
        completed and the schedule versions published meanwhile back from
        the coordinator (ListSteps, GetScheduleVersion) and a state change
        from the new snapshot, and goes on with the live stream, so no step
        and no version is given twice or lost. Not recoverable this way: a
        validation outcome decided while disconnected (the API keeps no
        history of them) and states the job passed through and left while
        disconnected. A slow reader may miss step events, as WatchJob says.

        Raises NotFound, Unavailable (no connection within the client's
        timeout, or none again within `reconnect_seconds`), Error for other
        refusals (RESOURCE_EXHAUSTED: too many streams).
        """
        return self._watch(job_id, reconnect_seconds, None)

    def _watch(self, job_id: str, reconnect_seconds: float,
               deadline: float | None) -> Iterator[Event]:
        tracker: _Tracker | None = None
        dropped_at: float | None = None
        while True:
            self._connect(dropped_at, reconnect_seconds, deadline)
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            stream = self._jobs.WatchJob(job_pb2.WatchJobRequest(job_id=job_id),
                                         timeout=remaining, metadata=self._conn.metadata)
            delivered = False
            try:
                for proto in stream:
                    delivered = True
                    dropped_at = None
                    if proto.HasField("snapshot") and tracker is not None:
                        yield from tracker.resume(self, proto)
                        if tracker.done:
                            return
                        continue
                    if tracker is None:
                        tracker = _Tracker(job_id)
                    event = tracker.take(proto)
                    if event is not None:
                        yield event
                    if tracker.done:
                        return
            except grpc.RpcError as e:
                code = e.code()
                if code == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
                    raise DeadlineExceeded(f"job {job_id}: still "
                                           f"{tracker.state if tracker else 'unseen'} at the "
                                           "deadline") from None
                if tracker is None or code not in _RESUMABLE:
                    raise self._conn.error(e, lost=delivered) from None
            finally:
                stream.cancel()
            if tracker is not None and tracker.done:
                return
            if dropped_at is None:
                dropped_at = time.monotonic()

    def _connect(self, dropped_at: float | None, reconnect_seconds: float,
                 deadline: float | None) -> None:
        """Waits for the channel: the client's timeout for a first stream, up
        to `reconnect_seconds` after a drop (retrying as gRPC backs off)."""
        if dropped_at is None:
            self._conn.wait_connected(self._conn.timeout)
            return
        while True:
            left = dropped_at + reconnect_seconds - time.monotonic()
            if deadline is not None and deadline - time.monotonic() <= 0:
                raise DeadlineExceeded(f"lost connection to coordinator at {self.address} "
                                       "until the deadline")
            if deadline is not None:
                left = min(left, deadline - time.monotonic())
            if left <= 0:
                raise Unavailable(f"lost connection to coordinator at {self.address}: not back "
                                  f"within {reconnect_seconds:g}s")
            try:
                self._conn.wait_connected(min(left, self._conn.timeout))
                return
            except Error:
                continue

    def wait_for_job(self, job_id: str, states: Collection[str] = ("SUCCEEDED",),
                     timeout: float | None = None) -> Job:
        """Follows the job (watch) until it is in one of `states` and returns
        it (get_job). Raises JobFailed (with the job and its state_message)
        when it ends in another state, DeadlineExceeded when `timeout`
        seconds pass first, and what `watch` raises."""
        wanted = {s.upper().removeprefix("JOB_STATE_") for s in states}
        for s in wanted:
            _state_number(s)  # ValueError for a state that does not exist
        deadline = None if timeout is None else time.monotonic() + timeout
        for event in self._watch(job_id, 60.0, deadline):
            state = event.job.state if event.job else event.state
            if state in wanted:
                return self.get_job(job_id)
            if state in types.TERMINAL_STATES:
                raise JobFailed(self.get_job(job_id))
        raise JobFailed(self.get_job(job_id))

    # Results ---------------------------------------------------------------

    def report(self, job_id: str) -> Report:
        """What the job achieved: `zbppctl report --format json`'s fields,
        typed (zbpp.report.Report), from GetJob, ListSteps and the schedule
        versions that ran the first and the last step. Raises NotFound, and
        Error (code FAILED_PRECONDITION) before the job's first step."""
        job = self._get(job_id, job_pb2.JOB_VIEW_BASIC)
        steps = self._list_steps(job_id)
        if not steps:
            raise Error(f"job {job_id} has no completed step yet (state "
                        f"{enum_name(job_pb2.JobState, job.state, 'JOB_STATE_')})",
                        "FAILED_PRECONDITION")
        versions: list[schedule_pb2.ScheduleVersion] = []
        for number in dict.fromkeys((steps[0].schedule_version, steps[-1].schedule_version)):
            if number < 1:
                continue
            try:
                versions.append(self._version(job_id, number))
            except NotFound:
                continue  # no longer held: left out of the report
        return build_report(job, steps, versions)

    def _version(self, job_id: str, number: int) -> schedule_pb2.ScheduleVersion:
        request = job_pb2.GetScheduleVersionRequest(job_id=job_id, version=number)
        version: schedule_pb2.ScheduleVersion = self._call(self._jobs.GetScheduleVersion,
                                                           request)
        return version

    def schedule_version(self, job_id: str, step: int | None = None,
                         version: int | None = None) -> schedule_pb2.ScheduleVersion:
        """A schedule version of the job, as `zbppctl schedule` picks it:
        number `version`; else the one in force at optimizer step `step`
        (0-based: the last published effective at it or before); else the
        one that ran the last completed step (the latest before any step).
        Raises NotFound, SpecError for a step past the job's last, Error
        (FAILED_PRECONDITION) before the first version."""
        if version is not None and step is not None:
            raise ValueError("step and version both pick a version: give one")
        if version is not None:
            return self._version(job_id, version)
        if step is not None:
            return self._version_in_force(job_id, step)
        job = self._get(job_id, job_pb2.JOB_VIEW_FULL)
        if not job.HasField("schedule") or job.schedule.version == 0:
            raise Error(f"job has no schedule yet (state "
                        f"{enum_name(job_pb2.JobState, job.state, 'JOB_STATE_')})",
                        "FAILED_PRECONDITION")
        ran = job.last_step_timeline.schedule_version
        if ran == 0 or ran == job.schedule.version:
            return job.schedule
        return self._version(job_id, ran)

    def _version_in_force(self, job_id: str, step: int) -> schedule_pb2.ScheduleVersion:
        job = self._get(job_id, job_pb2.JOB_VIEW_BASIC)
        if not 0 <= step < job.spec.steps:
            raise Error(f"step: job {job_id} runs steps 0 to {job.spec.steps - 1}, got {step}",
                        "INVALID_ARGUMENT")
        for number in range(job.schedule_version, 0, -1):
            try:
                candidate = self._version(job_id, number)
            except NotFound:
                continue  # numbers are never reused but need not all be held
            if candidate.effective_step <= step:
                return candidate
        raise NotFound(f"step: job {job_id} has no schedule version in force at step {step}")

    def schedule(self, job_id: str, step: int | None = None, format: ScheduleFormat = "json",
                 *, version: int | None = None) -> Any:
        """The schedule version that ran the job's last step (or that in force
        at `step`, or number `version`; see schedule_version), as `format`:

        * "json": a dict, the ScheduleVersion's fields (proto field names):
          per stage the actions in PyTorch pipelining's text form ("0F1",
          "1I3", "1W3"), the cost model, the prediction;
        * "csv": the actions as torchtitan loads them, one row per stage;
        * "svg", "trace" (Chrome trace JSON) and "measured-trace" (the last
          step as the workers ran it): drawn by zbppctl (the C++ simulator
          computes their timing), found as $ZBPPCTL or on the PATH; str.

        Raises what schedule_version raises, ValueError for another format,
        Error when zbppctl is missing or fails.
        """
        if format in ("svg", "trace", "measured-trace"):
            return self._zbppctl_schedule(job_id, step, version, format)
        chosen = self.schedule_version(job_id, step, version)
        if format == "json":
            return types.message_dict(chosen)
        if format == "csv":
            return "".join(",".join(row.actions) + "\n" for row in chosen.schedule.stage_actions)
        raise ValueError(f'format: expected "json", "csv", "svg", "trace" or '
                         f'"measured-trace", got "{format}"')

    def _zbppctl_schedule(self, job_id: str, step: int | None, version: int | None,
                          format: str) -> str:
        zbppctl = os.environ.get("ZBPPCTL") or shutil.which("zbppctl")
        if not zbppctl:
            raise Error(f'schedule format "{format}" is drawn by zbppctl (the simulator is '
                        "C++): put zbppctl on the PATH or set ZBPPCTL", "FAILED_PRECONDITION")
        args = [zbppctl, "--coordinator", self.address, "--timeout", f"{self._conn.timeout:g}"]
        tls = self._conn.tls
        if tls is not None:
            args += ["--tls-ca", os.fspath(tls.ca)]
            if tls.cert is not None and tls.key is not None:
                args += ["--tls-cert", os.fspath(tls.cert), "--tls-key", os.fspath(tls.key)]
        args += ["schedule", job_id, "--format",
                 "chrome-trace" if format == "trace" else format]
        if step is not None:
            args += ["--step", str(step)]
        if version is not None:
            args += ["--schedule-version", str(version)]
        # zbppctl reads the token from a file: a private temporary one
        # (mkstemp: mode 0600), removed after the call.
        with tempfile.NamedTemporaryFile("w", prefix="zbpp-token-") as token:
            if self._conn.token:
                token.write(self._conn.token)
                token.flush()
                args[1:1] = ["--token-file", token.name]
            run = subprocess.run(args, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            message = run.stderr.strip().removeprefix("zbppctl: ")
            raise NotFound(message) if "NOT_FOUND" in message else Error(message)
        return run.stdout

    def costs(self, job_id: str, step: int | None = None, *, version: int | None = None) -> str:
        """The cost model of the job's current schedule version (the measured
        one after a re-solve), of the one in force at `step` or of number
        `version`, as `zbppctl costs` prints it: a cost file for
        `zbpp-sched --costs` (YAML; per virtual stage t_f, t_b, t_w and, when
        measured, t_bw seconds, m_b, m_w and transient bytes). Raises what schedule_version raises, Error
        (FAILED_PRECONDITION) for a version without a cost model."""
        if step is None and version is None:
            job = self._get(job_id, job_pb2.JOB_VIEW_FULL)
            if not job.HasField("schedule") or job.schedule.version == 0:
                raise Error(f"job has no schedule yet (state "
                            f"{enum_name(job_pb2.JobState, job.state, 'JOB_STATE_')})",
                            "FAILED_PRECONDITION")
            chosen = job.schedule
        else:
            chosen = self.schedule_version(job_id, step, version)
        return cost_file(chosen)

    def export(self, job_id: str, out_dir: str | os.PathLike[str], *,
               exporter: str | os.PathLike[str] | None = None) -> str:
        """Writes the job's last checkpoint as a Hugging Face model directory
        (model.safetensors, config.json, tokenizer.json) in `out_dir`, as
        `zbppctl export` does: by running the repository's scripts/export
        (`exporter`, else $ZBPP_EXPORT_SCRIPT, else the one of the checkout
        the package was built from) on the job. Returns the exporter's
        summary line. Raises NotFound, Error (FAILED_PRECONDITION) for a job
        without a checkpoint or without an exporter, SpecError when the
        exporter refuses the job (exit 2), Error for its other failures."""
        job = self._get(job_id, job_pb2.JOB_VIEW_FULL)
        if job.last_checkpoint_step < 0:
            raise Error(f"job {job_id} has no checkpoint to export yet", "FAILED_PRECONDITION")
        script = os.fspath(exporter) if exporter is not None else (
            os.environ.get("ZBPP_EXPORT_SCRIPT") or _default_exporter())
        if not script or not os.access(script, os.X_OK):
            raise Error(f"cannot run the exporter {script or '(none)'} (set ZBPP_EXPORT_SCRIPT "
                        "to scripts/export)", "FAILED_PRECONDITION")
        document = json_format.MessageToDict(job, preserving_proto_field_name=True,
                                             always_print_fields_with_no_presence=True)
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="zbpp-export-") as f:
            json.dump(document, f)
            f.flush()
            run = subprocess.run([script, "--job", f.name, "--out", os.fspath(out_dir)],
                                 capture_output=True, text=True, check=False)
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        why = lines[-1] if lines else f"the exporter {script} exited {run.returncode}"
        if run.returncode == 2:
            raise SpecError(why)
        if run.returncode != 0:
            raise Error(why, "INTERNAL")
        return run.stdout.strip()


def _default_exporter() -> str | None:
    """scripts/export of the checkout the package was built from, if any."""
    try:
        from zbpp import _build
    except ImportError:
        return None
    path = Path(_build.REPOSITORY) / "scripts" / "export"
    return str(path) if path.is_file() else None


def cost_file(version: schedule_pb2.ScheduleVersion) -> str:
    """`version`'s cost model as `zbppctl costs` writes it
    (scheduler/cli/costs_file.h CostFileYaml, after a header naming the job
    and version). Raises Error (FAILED_PRECONDITION) without a cost model,
    SpecError when its size does not fit the schedule."""
    model, s = version.cost_model, version.schedule
    if not model.virtual_stages:
        raise Error(f"schedule version {version.version} carries no cost model",
                    "FAILED_PRECONDITION")
    if len(model.virtual_stages) != s.stages * s.chunks:
        raise Error(f"cost model has {len(model.virtual_stages)} stages; the schedule has "
                    f"{s.stages * s.chunks}", "INVALID_ARGUMENT")
    if model.memory_limit_bytes and len(model.memory_limit_bytes) != s.stages:
        raise Error(f"cost model has {len(model.memory_limit_bytes)} memory limits; the "
                    f"schedule has {s.stages} workers", "INVALID_ARGUMENT")

    def number(x: float) -> str:
        return format(x, ".17g")

    text = (f"# job {version.job_id}, schedule version {version.version} ({s.name}) from step "
            f"{version.effective_step}\n# zbpp cost model: p={s.stages} v={s.chunks} "
            f"m={s.microbatches} (zbpp-sched --stages {s.stages} --costs FILE)\n"
            "virtual_stages:\n")
    for c in model.virtual_stages:
        text += (f"  - {{t_f: {number(c.f_seconds)}, t_b: {number(c.b_seconds)}, "
                 f"t_w: {number(c.w_seconds)}, m_b: {number(c.m_b_bytes)}, "
                 f"m_w: {number(c.m_w_bytes)}")
        if c.bw_seconds != 0:
            text += f", t_bw: {number(c.bw_seconds)}"
        if c.reduce_seconds != 0:
            text += f", reduce: {number(c.reduce_seconds)}"
        if c.transient_bytes != 0:
            text += f", transient: {number(c.transient_bytes)}"
        text += "}\n"
    text += f"comm: {number(model.comm_seconds)}\n"
    if model.memory_limit_bytes:
        text += f"memory_limit_bytes: [{', '.join(number(b) for b in model.memory_limit_bytes)}]\n"
    return text


class _Tracker:
    """A watch's memory across reconnections: what was given last, so that a
    resumed stream neither repeats nor loses steps and versions."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.state: str | None = None
        self.last_step = -1     # the last step given (0-based)
        self.last_version = 0   # the last schedule version given
        self.last_validation = -1
        self.resumed = False

    @property
    def done(self) -> bool:
        return self.state in types.TERMINAL_STATES

    def take(self, proto: job_pb2.JobEvent) -> Event | None:
        """The event for `proto`, or None for one already given."""
        kind = proto.WhichOneof("event")
        sequence, at = proto.sequence, time_of(proto.time, proto.HasField("time"))
        if kind == "snapshot":
            job = Job.from_proto(proto.snapshot)
            self.state = job.state
            self.last_step = job.steps_completed - 1
            self.last_version = job.schedule_version
            return Event("snapshot", self.job_id, sequence, at, job=job)
        if kind == "state_change":
            c = proto.state_change
            self.state = enum_name(job_pb2.JobState, c.new_state, "JOB_STATE_")
            return Event("state", self.job_id, sequence, at, state=self.state,
                         previous_state=enum_name(job_pb2.JobState, c.old_state, "JOB_STATE_"),
                         message=c.message)
        if kind == "step" and self._fresh("last_step", proto.step.step):
            return Event("step", self.job_id, sequence, at, step=Step.from_proto(proto.step))
        if kind == "schedule_change" and self._fresh("last_version",
                                                     proto.schedule_change.version):
            return Event("schedule", self.job_id, sequence, at,
                         schedule=ScheduleChange.from_proto(proto.schedule_change))
        if kind == "validation" and self._fresh("last_validation", proto.validation.step):
            return Event("validation", self.job_id, sequence, at,
                         validation=Validation.from_proto(proto.validation))
        return None

    def _fresh(self, mark: str, value: int) -> bool:
        """Whether `value` (a step or version number) is new: past the mark
        named `mark` once the stream was resumed, always before; moves the
        mark."""
        last: int = getattr(self, mark)
        if self.resumed and value <= last:
            return False
        setattr(self, mark, max(last, value))
        return True

    def resume(self, client: Client, proto: job_pb2.JobEvent) -> Iterator[Event]:
        """The events missed while disconnected, from a new stream's snapshot
        and the coordinator's history; later live events are filtered."""
        self.resumed = True
        snapshot = proto.snapshot
        at = time_of(proto.time, proto.HasField("time"))
        for number in range(self.last_version + 1, snapshot.schedule_version + 1):
            try:
                version = client._version(self.job_id, number)
            except NotFound:
                continue
            self.last_version = number
            yield Event("schedule", self.job_id, None, time_of(
                version.publish_time, version.HasField("publish_time")),
                schedule=ScheduleChange.from_proto(version))
        for summary in client._list_steps(self.job_id, self.last_step + 1):
            if summary.step <= self.last_step:
                continue
            self.last_step = summary.step
            yield Event("step", self.job_id, None, time_of(
                summary.complete_time, summary.HasField("complete_time")),
                step=Step.from_proto(summary))
        state = enum_name(job_pb2.JobState, snapshot.state, "JOB_STATE_")
        if state != self.state:
            previous, self.state = self.state, state
            yield Event("state", self.job_id, None, at, state=state, previous_state=previous,
                        message=snapshot.state_message)
