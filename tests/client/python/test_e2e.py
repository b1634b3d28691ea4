"""The `zbpp` package against a real coordinator and real CPU workers: the
main job submitted from Python, watched to SUCCEEDED, its report equal to
`zbppctl report --format json` field by field; a watch that survives the
coordinator's restart; every error class from a real refusal."""

from __future__ import annotations

import dataclasses
import json
import math
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import TOKEN, Stack, binary, main_job, zbppctl_json

import zbpp


def client(stack: Stack, **kwargs: Any) -> zbpp.Client:
    return zbpp.Client(stack.address, **{"token": TOKEN, **kwargs})


def differences(ours: Any, theirs: Any, path: str = "report") -> list[str]:
    """Where two JSON values differ (floats within 1e-9 relative)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = [f"{path}.{k}: only in {'ours' if k in ours else 'zbppctl'}"
               for k in set(ours) ^ set(theirs)]
        for k in set(ours) & set(theirs):
            out += differences(ours[k], theirs[k], f"{path}.{k}")
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items, zbppctl {len(theirs)}"]
        return [d for i, (a, b) in enumerate(zip(ours, theirs))
                for d in differences(a, b, f"{path}[{i}]")]
    if isinstance(ours, float) or isinstance(theirs, float):
        if (isinstance(ours, (int, float)) and isinstance(theirs, (int, float))
                and not isinstance(ours, bool) and math.isclose(ours, theirs, rel_tol=1e-9,
                                                                abs_tol=1e-12)):
            return []
    elif ours == theirs and type(ours) is type(theirs):
        return []
    return [f"{path}: {ours!r}, zbppctl {theirs!r}"]


def test_main_job_submitted_watched_reported_as_zbppctl_does(
        stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = 10
    with client(stack) as c:
        job_id = c.submit(main_job(steps, tmp_path / "ckpt"))
        events = list(c.watch(job_id))
        kinds = [e.kind for e in events]
        assert kinds[0] == "snapshot" and events[0].job is not None
        assert events[0].job.id == job_id and events[0].sequence is not None
        assert [e.step.step for e in events if e.step] == list(range(steps))
        assert events[-1].kind == "state" and events[-1].state == "SUCCEEDED", events[-1]
        assert "schedule" in kinds
        assert all(e.time is not None and e.time.tzinfo is not None for e in events)
        sequences = [e.sequence for e in events]
        assert sequences == sorted(sequences)  # type: ignore[type-var]

        job = c.get_job(job_id)
        assert (job.state, job.steps_completed, job.steps) == ("SUCCEEDED", steps, steps)
        assert job.stages == 2 and job.workers == 2 and len(job.last_step.stages) == 2
        assert job.end_time is not None and job.start_time <= job.end_time
        assert job_id in [j.id for j in c.list_jobs(state="SUCCEEDED")]
        assert job_id not in [j.id for j in c.list_jobs(state=["RUNNING", "PENDING"])]

        report = c.report(job_id)
        theirs = zbppctl_json(stack, "report", job_id, "--format", "json")
        assert differences(dataclasses.asdict(report), theirs) == []
        assert report.steps == steps and report.state == "SUCCEEDED"
        assert report.breakdown is not None  # the comparison covered a measured breakdown

        assert c.costs(job_id) == stack.zbppctl("costs", job_id)
        assert c.costs(job_id, step=0) == stack.zbppctl("costs", job_id, "--step", "0")
        version = c.schedule(job_id)
        csv = c.schedule(job_id, format="csv")
        assert [row.split(",") for row in csv.splitlines()] == [
            row["actions"] for row in version["schedule"]["stage_actions"]]
        assert f"schedule v{version['version']} " in stack.zbppctl("schedule", job_id)
        monkeypatch.setenv("ZBPPCTL", binary("ZBPPCTL_BINARY"))
        assert c.schedule(job_id, format="svg") == stack.zbppctl(
            "schedule", job_id, "--format", "svg")
        trace = json.loads(c.schedule(job_id, step=0, format="trace"))
        assert trace["traceEvents"], trace

        summary = c.export(job_id, tmp_path / "hf")
        assert summary.startswith("export: step "), summary
        config = json.loads((tmp_path / "hf" / "config.json").read_text())
        assert config["architectures"] == ["GPT2LMHeadModel"]
        assert (tmp_path / "hf" / "model.safetensors").stat().st_size > 0


def test_watch_survives_a_coordinator_restart(stack: Stack, tmp_path: Path) -> None:
    steps = 16
    with client(stack, timeout=5) as c:
        job_id = c.submit(main_job(steps, tmp_path / "ckpt"))
        events, restarted = [], False
        for event in c.watch(job_id, reconnect_seconds=60):
            events.append(event)
            if not restarted and event.step is not None and event.step.step >= 3:
                stack.restart_coordinator()
                restarted = True
        assert restarted
        # Each step exactly once, in order, whatever the recovery redid.
        assert [e.step.step for e in events if e.step] == list(range(steps))
        versions = [e.schedule.version for e in events if e.schedule]
        assert versions == sorted(set(versions))
        assert events[-1].state == "SUCCEEDED"
        assert c.get_job(job_id).recoveries >= 1
        # Only the first stream's snapshot is given.
        assert [e.kind for e in events].count("snapshot") == 1


def test_each_error_class_from_a_real_refusal(stack: Stack, tmp_path: Path) -> None:
    with client(stack) as c:
        bad = main_job(4, tmp_path)
        bad["pipeline"]["microbatches"] = 0
        with pytest.raises(zbpp.SpecError) as refused:
            c.submit(bad)  # the coordinator's refusal
        assert refused.value.field == "pipeline.microbatches", refused.value
        with pytest.raises(zbpp.SpecError) as refused:
            c.submit({**bad, "model": {"vocab_size": 256}})  # the package's reader
        assert refused.value.field == "model.vocab_size"
        assert "known in model: architecture" in str(refused.value)

        with pytest.raises(zbpp.NotFound):
            c.get_job("no-such-job")
        with pytest.raises(zbpp.NotFound):
            c.report("no-such-job")

        # A job no worker can take (4 stages, 2 workers) waits; cancelled,
        # a wait for SUCCEEDED ends in JobFailed, a second cancel is refused.
        waiting = main_job(4, tmp_path)
        waiting["pipeline"]["stages"] = 4
        job_id = c.submit(waiting)
        outcome: list[BaseException] = []

        def wait() -> None:
            try:
                c.wait_for_job(job_id, timeout=60)
            except zbpp.Error as e:
                outcome.append(e)

        waiter = threading.Thread(target=wait)
        waiter.start()
        assert c.cancel(job_id, reason="test over").state == "CANCELLED"
        waiter.join(60)
        assert len(outcome) == 1 and isinstance(outcome[0], zbpp.JobFailed), outcome
        assert outcome[0].job.state == "CANCELLED" and "test over" in str(outcome[0])
        with pytest.raises(zbpp.Error) as again:
            c.cancel(job_id)
        assert again.value.code == "FAILED_PRECONDITION"
        stuck = c.submit(waiting)
        with pytest.raises(zbpp.DeadlineExceeded):
            c.wait_for_job(stuck, timeout=0.5)
        c.cancel(stuck)

    # The coordinator requires its token (zbpp-coordinator --token-file).
    with zbpp.Client(stack.address) as anonymous:
        with pytest.raises(zbpp.PermissionDenied) as denied:
            anonymous.submit(main_job(4, tmp_path))
        assert denied.value.code == "UNAUTHENTICATED" and "pass token=" in str(denied.value)
    with zbpp.Client(stack.address, token="not-the-token") as wrong_token:
        with pytest.raises(zbpp.PermissionDenied) as denied:
            wrong_token.get_job(job_id)
        assert "wrong bearer token" in str(denied.value)
    with zbpp.Client(stack.address, token_file=stack.token_file) as from_file:
        assert from_file.cancel(from_file.submit(waiting)).state == "CANCELLED"

    # Nothing listens: Unavailable naming the address.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    with zbpp.Client(closed, timeout=2) as nobody, pytest.raises(zbpp.Unavailable) as down:
        nobody.get_job("any")
    assert f"cannot reach coordinator at {closed}" in str(down.value)

    # A listener that is no gRPC server: the TLS hint of zbppctl.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        address = f"127.0.0.1:{listener.getsockname()[1]}"

        def refuse() -> None:
            listener.settimeout(5)
            try:
                while True:
                    listener.accept()[0].close()
            except OSError:
                pass

        threading.Thread(target=refuse, daemon=True).start()
        with zbpp.Client(address, timeout=2) as wrong, pytest.raises(zbpp.Unavailable) as tls:
            wrong.list_jobs()
    assert "serves TLS" in str(tls.value), tls.value
