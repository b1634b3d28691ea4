"""Job specs from Python as zbppctl reads them: every example spec of
deploy/examples, converted by the package and by zbppctl and submitted to
the same coordinator (no workers), is stored as the same JobSpec; and the
reader's refusals name the field and where it is."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, Daemon, binary

import zbpp
from zbpp.v1 import job_spec_pb2

EXAMPLES = sorted((REPO / "deploy" / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A coordinator with an in-memory store and no workers: jobs wait."""
    scratch = tmp_path_factory.mktemp("bare")
    daemon = Daemon("bare-coordinator", [
        binary("ZBPP_COORDINATOR_BINARY"), "--listen", "127.0.0.1:0", "--metrics-listen",
        "127.0.0.1:0", "--db", ":memory:"], scratch / "coordinator.log")
    yield daemon.line(r"listening grpc=(\S+)").group(1)
    daemon.kill()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_spec_is_stored_as_zbppctl_stores_it(bare: str, example: Path) -> None:
    run = subprocess.run([binary("ZBPPCTL_BINARY"), "--coordinator", bare, "submit",
                          str(example)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    with zbpp.Client(bare) as c:
        theirs = as_submitted(c.get_job(run.stdout.strip()))
        # A path (schedule.file read beside it) as os.PathLike and as str.
        for spec in (example, os.fspath(example)):
            ours = c.get_job(c.submit(spec))
            assert as_submitted(ours) == theirs
        assert zbpp.job_spec(example) == theirs


def as_submitted(job: zbpp.Job) -> job_spec_pb2.JobSpec:
    """The job's stored spec as submitted: the coordinator puts the job's id
    in place of `{job_id}` in the checkpoint directory, and the layout it
    chose into pipeline.layout (layout_policy auto, when not the even
    split; the chunks too for a schedule "auto" chose)."""
    spec = job_spec_pb2.JobSpec()
    spec.CopyFrom(job.proto.spec)
    if spec.HasField("checkpoint"):
        spec.checkpoint.directory = spec.checkpoint.directory.replace(job.id, "{job_id}")
    if job.layout_source in ("ANALYTIC", "PROFILED") and spec.pipeline.layout:
        del spec.pipeline.layout[:]
        if spec.schedule.name == "auto":
            spec.pipeline.ClearField("chunks")
    return spec


def test_reader_refusals_name_the_field_and_where() -> None:
    cases = {
        "pipeline:\n  microbatches: many\n":
            ("pipeline.microbatches", 'expected an integer (int32), got "many" (line 2, column 17)'),
        "model:\n  vocab_size: 3\n": ("model.vocab_size", "unknown key (line 2, column 3)"),
        "validation: sometimes\n": ("validation", "expected one of synchronous, post, auto"),
        "dataset: {builtin: bible-kjv, synthetic: {}}\n":
            ("dataset.synthetic", "conflicts with dataset.builtin"),
        "steps: 1\nsteps: 2\n": ("steps", "given twice"),
        "seed: -1\n": ("seed", "non-negative integer (uint64)"),
        "a: 1\n---\nb: 2\n": ("yaml", "2 YAML documents"),
        "[1, 2]\n": ("yaml", "expected a mapping of job spec fields"),
        "name: [x\n": ("yaml", "not YAML"),
    }
    for text, (field, words) in cases.items():
        with pytest.raises(zbpp.SpecError) as refused:
            zbpp.job_spec(text)
        assert refused.value.field == field, (text, refused.value)
        assert words in str(refused.value), (text, refused.value)
    spec = zbpp.job_spec({"validation": "POST", "precision": "PRECISION_BF16",
                          "optimizer": {"learning_rate": "1e-3"}, "dataset": {"synthetic": None}})
    assert (spec.validation, spec.precision) == (2, 2)
    assert spec.optimizer.learning_rate == 1e-3 and spec.dataset.HasField("synthetic")
    with pytest.raises(zbpp.NotFound):
        zbpp.job_spec("no/such/spec.yaml")
