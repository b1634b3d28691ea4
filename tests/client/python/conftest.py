"""The real thing for the `zbpp` package's tests: zbpp-coordinator and CPU
zbpp-worker processes on 127.0.0.1 (port 0), started as tests/deploy's live
stack starts them (tests/deploy/live_stack.py Daemon), and zbppctl to
compare with. CMake passes the binaries (tests/client/CMakeLists.txt):

    ZBPP_COORDINATOR_BINARY, ZBPP_WORKER_BINARY, ZBPPCTL_BINARY, ZBPP_REPO
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(os.environ.get("ZBPP_REPO", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(REPO / "tests" / "deploy"))
from live_stack import Daemon  # noqa: E402

# Strong enough for the daemons (at least 128 bits: common/call_auth.h).
TOKEN = "7d3f9a1c5e8b2f4a6c0e9d1b3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a"
WORKERS = 2


def binary(name: str) -> str:
    path = os.environ.get(name)
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"${name} names no built binary ({path!r}); run the test through ctest")
    return path


class Stack:
    """A coordinator (SQLite file, bearer token) and its workers."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.token_file = scratch / "token"
        self.token_file.write_text(TOKEN + "\n")
        self.db = scratch / "coordinator.db"
        self.daemons: list[Daemon] = []
        self.coordinator = self._coordinator("127.0.0.1:0")
        self.address = self.coordinator.line(r"listening grpc=(\S+)").group(1)
        for rank in range(WORKERS):
            worker = self._start(f"worker-{rank}", [
                binary("ZBPP_WORKER_BINARY"), "--coordinator", self.address, "--threads", "1",
                "--token-file", self.token_file, "--cache-dir", scratch / "cache",
                "--data-root", scratch])
            worker.line(r"registered worker_id=")

    def _start(self, name: str, argv: list[Any]) -> Daemon:
        daemon = Daemon(name, [str(a) for a in argv], self.scratch / f"{name}.log")
        self.daemons.append(daemon)
        return daemon

    def _coordinator(self, listen: str) -> Daemon:
        return self._start("coordinator", [
            binary("ZBPP_COORDINATOR_BINARY"), "--listen", listen, "--metrics-listen",
            "127.0.0.1:0", "--db", self.db, "--token-file", self.token_file])

    def restart_coordinator(self) -> None:
        """SIGKILL, then a new coordinator on the same port and SQLite file."""
        self.coordinator.kill()
        self.coordinator = self._coordinator(self.address)
        self.coordinator.line(r"listening grpc=")

    def zbppctl(self, *args: str) -> str:
        run = subprocess.run([binary("ZBPPCTL_BINARY"), "--coordinator", self.address,
                              "--token-file", str(self.token_file), *args],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, f"zbppctl {' '.join(args)}: {run.stderr}"
        return run.stdout

    def close(self) -> None:
        for daemon in reversed(self.daemons):
            daemon.kill()


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    started = Stack(tmp_path_factory.mktemp("stack"))
    yield started
    started.close()


def main_job(steps: int, checkpoint: Path) -> dict[str, Any]:
    """deploy/examples/gpt-bible-cpu.yaml, the README's main job, cut to
    `steps` steps (warm-up, checkpoints to `checkpoint` every `steps` / 2)."""
    spec: dict[str, Any] = yaml.safe_load((REPO / "deploy/examples/gpt-bible-cpu.yaml").read_text())
    spec["steps"] = steps
    spec["optimizer"]["warmup_steps"] = 2
    spec["checkpoint"] = {"interval_steps": max(steps // 2, 1), "directory": str(checkpoint)}
    return spec


def zbppctl_json(stack: Stack, *args: str) -> Any:
    return json.loads(stack.zbppctl(*args))
