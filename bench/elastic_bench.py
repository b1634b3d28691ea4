"""What a lost worker costs a data x pipeline job (docs/elastic.md).

Starts a coordinator and 2 x p CPU workers, runs the demo's GPT job (p =
--stages stages, 2 by default, x 2 replicas) once without a fault, then
again with stage p/2's worker of replica 1 lost after --fault-after steps:
SIGKILLed (a broken connection) or SIGSTOPped (a silent peer, killed at the
end). After --degraded-steps steps on one replica a
replacement worker starts; the job heals. Prints a markdown table: the time
from the fault to the coordinator's reaction (RECOVERING seen) and to the job
DEGRADED, to the first step completed without the lost worker, tokens/s
healthy / degraded / healed (medians of the steps' own rates), the time from
the replacement's registration to the first step at two replicas, steps run
again (0 unless the job restarted from a checkpoint) and the final parameter
checksum's relative difference from the fault-free run.

Run from the repository root after scripts/build.sh and
scripts/python-client-install.sh, with the client's virtual environment:

    $(bash scripts/python-env.sh)/bin/python bench/elastic_bench.py \
        [--fault kill|stop] [--steps 60] [--fault-after 15] [--degraded-steps 15] \
        [--stages P] [--synthetic SCALE[:NOISE]]
    $(bash scripts/python-env.sh)/bin/python bench/elastic_bench.py --replicas 1 \
        [--steps 60] [--fault-after 15] [--checkpoint-interval 20] [--snapshot-interval 1]

With --replicas 1 (docs/elastic.md, "Snapshots") it runs 2 stages x 1 replica
instead: fault-free without and with snapshots every --snapshot-interval
steps, then a SIGKILLed stage-1 worker with and without snapshots, and prints
the snapshots' cost in tokens/s, where each restart resumed from and the
steps it ran again.

--synthetic runs the workers in synthetic compute (zbpp-worker
--synthetic-compute: each pass waits its cost-model time x SCALE instead of
computing), so that 2p workers fit on a few cores and tokens/s show what the
lost replica costs; the parameters then do not move (no checksum).

Times are wall-clock on this machine, polled every 20 ms (the resolution of
the state times).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zbpp

POLL_SECONDS = 0.02


def spec(steps: int, checkpoints: Path, stages: int = 2) -> dict:
    """The demo's GPT (4 layers a stage, h = 128, s = 128) on `stages` stages
    x 2 replicas of m = 8 (2 stages) or 2p microbatches."""
    return {
        "name": "elastic-bench",
        "model": {"architecture": "gpt", "layers": 4 * stages, "hidden": 128, "heads": 4,
                  "vocab": 256, "seq_len": 128},
        "dataset": {"builtin": "bible-kjv"},
        "pipeline": {"stages": stages, "data_parallel": 2,
                     "microbatches": max(8, 2 * stages), "microbatch_size": 4},
        "schedule": {"name": "zb-h1"},
        "optimizer": {"learning_rate": 2.0e-3, "warmup_steps": 20, "weight_decay": 0.1,
                      "max_grad_norm": 1.0},
        "steps": steps,
        "checkpoint": {"interval_steps": steps, "directory": str(checkpoints)},
        "seed": 1234,
    }


class Cluster:
    """A coordinator and workers under `out`, stopped at exit."""

    def __init__(self, build: Path, out: Path, worker_flags: list[str] | None = None) -> None:
        self.build, self.out = build, out
        self.worker_flags = worker_flags or []
        self.processes: list[subprocess.Popen] = []
        log = open(out / "coordinator.log", "w")
        stdout = out / "coordinator.out"
        self.coordinator = subprocess.Popen(
            [str(build / "coordinator/zbpp-coordinator"), "--listen", "127.0.0.1:0",
             "--metrics-listen", "127.0.0.1:0", "--db", ":memory:"],
            stdout=open(stdout, "w"), stderr=log)
        self.processes.append(self.coordinator)
        self.address = self._await(stdout, r"grpc=(\S+)")
        self.workers: dict[str, subprocess.Popen] = {}

    def _await(self, path: Path, pattern: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, path.read_text() if path.exists() else "")
            if found:
                return found.group(1)
            time.sleep(POLL_SECONDS)
        raise RuntimeError(f"{path}: no line matching {pattern!r} in {timeout} s")

    def start_worker(self, name: str) -> subprocess.Popen:
        stdout = self.out / f"{name}.out"
        process = subprocess.Popen(
            [str(self.build / "worker/daemon/zbpp-worker"), "--coordinator", self.address,
             "--threads", "1", "--cache-dir", str(self.out / "cache"), "--name", name,
             "--data-root", str(self.out), "--comm-timeout", "20", *self.worker_flags],
            stdout=open(stdout, "w"), stderr=open(self.out / f"{name}.log", "w"))
        self.processes.append(process)
        return process

    def registered(self, name: str) -> tuple[str, float]:
        """The worker id of `name` once it registered, and when (monotonic)."""
        worker_id = self._await(self.out / f"{name}.out", r"worker_id=(\S+)")
        return worker_id, time.monotonic()

    def stop(self) -> None:
        for p in self.processes:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
            p.wait()


def wait(client: zbpp.Client, job_id: str, until) -> zbpp.Job:
    while True:
        job = client.get_job(job_id)
        if until(job) or job.done:
            return job
        time.sleep(POLL_SECONDS)


def median_rate(steps: list[zbpp.Step]) -> float:
    return statistics.median(s.tokens_per_second for s in steps) if steps else float("nan")


def wall_rate(steps: list[zbpp.Step]) -> float:
    """Tokens/s over the wall clock from the first step's completion to the
    last's: what the time between steps costs too (a snapshot's copy, a
    write competing for the cores), which a median of the steps' own rates
    misses when only every k-th step pays it."""
    tokens = statistics.median(s.tokens_per_second * s.step_seconds for s in steps)
    elapsed = (steps[-1].complete_time - steps[0].complete_time).total_seconds()
    return tokens * (len(steps) - 1) / elapsed


def run(args: argparse.Namespace) -> None:
    out = Path(tempfile.mkdtemp(prefix="elastic-bench-", dir=args.scratch))
    synthetic = ["--synthetic-compute", args.synthetic] if args.synthetic else []
    cluster = Cluster(Path(args.build), out, synthetic)
    p = args.stages
    victim_stage = p // 2  # The middle one; stage 1 of 2.
    try:
        names = [f"elastic-{i}" for i in range(2 * p)]
        processes = {name: cluster.start_worker(name) for name in names}
        ids = {cluster.registered(name)[0]: name for name in names}
        client = zbpp.Client(cluster.address)

        reference_id = client.submit(spec(args.steps, out / "reference", p))
        reference = client.wait_for_job(reference_id, timeout=1800)
        healthy = median_rate(client.steps(reference_id)[2:])

        job_id = client.submit(spec(args.steps, out / "interrupted", p))
        running = wait(client, job_id, lambda j: j.steps_completed > args.fault_after)
        victim = next(a.worker_id for a in running.assignments
                      if a.stage == victim_stage and a.replica == 1)
        at_fault = running.steps_completed
        fault = time.monotonic()
        fault_wall = dt.datetime.now(dt.timezone.utc)
        victim_process = processes[ids[victim]]
        victim_process.send_signal(signal.SIGKILL if args.fault == "kill" else signal.SIGSTOP)

        reacted = wait(client, job_id, lambda j: j.state != "RUNNING")
        t_reacted = time.monotonic() - fault
        degraded = wait(client, job_id, lambda j: j.state == "DEGRADED")
        t_degraded = time.monotonic() - fault
        if degraded.state != "DEGRADED":
            raise RuntimeError(f"the job did not degrade: {degraded.state} "
                               f"{degraded.state_message}")
        wait(client, job_id, lambda j: j.degraded_steps >= args.degraded_steps)
        cluster.start_worker("elastic-replacement")
        _, registered = cluster.registered("elastic-replacement")
        registered_wall = dt.datetime.now(dt.timezone.utc)
        healed = wait(client, job_id, lambda j: j.state == "RUNNING" and j.replicas_active == 2)
        healed_wall = dt.datetime.now(dt.timezone.utc)
        final = client.wait_for_job(job_id, timeout=1800)
        if args.fault == "stop":
            victim_process.send_signal(signal.SIGCONT)
            victim_process.kill()

        steps = client.steps(job_id)
        after_fault = [s for s in steps if s.step >= at_fault and s.complete_time > fault_wall]
        first_without = min(s.complete_time for s in after_fault)
        degraded_steps = [s for s in after_fault if s.complete_time <= registered_wall]
        healed_steps = [s for s in steps if s.complete_time > healed_wall]
        first_healed = min((s.complete_time for s in healed_steps), default=None)
        relative = (f"{abs(final.param_checksum - reference.param_checksum) / abs(reference.param_checksum):.2e}"
                    if not synthetic else "n/a (synthetic compute trains nothing)")
        m = spec(1, out, p)["pipeline"]["microbatches"]

        print(f"| fault | {args.fault} (stage {victim_stage}, replica 1) after step "
              f"{at_fault - 1}; {p} stages x 2 replicas"
              + (f", synthetic compute x{args.synthetic}" if synthetic else "") + " |")
        print("| --- | --- |")
        print(f"| coordinator reacts (RECOVERING seen) | {t_reacted:.2f} s after the fault |")
        print(f"| DEGRADED (1 replica, m' = {2 * m}) | {t_degraded:.2f} s after the fault; "
              f"{t_degraded - t_reacted:.2f} s after the reaction |")
        print(f"| first step completed without the lost worker | "
              f"{(first_without - fault_wall).total_seconds():.2f} s after the fault |")
        print(f"| tokens/s healthy (fault-free run) / degraded / healed | {healthy:.0f} / "
              f"{median_rate(degraded_steps):.0f} / {median_rate(healed_steps):.0f} |")
        print(f"| registration of the replacement to the first step at 2 replicas | "
              + (f"{(first_healed - registered_wall).total_seconds():.2f} s |"
                 if first_healed else "no step after the heal |"))
        print(f"| recoveries / restarts / degraded steps | {final.recoveries} / "
              f"{final.restarts} / {final.degraded_steps} |")
        print(f"| final state; checksum relative difference | {final.state}; {relative} |")
        print(f"| healed as reported | {healed.state}, {healed.replicas_active} replicas, "
              f"registered {registered - fault:.2f} s after the fault |")
    finally:
        cluster.stop()


def run_one_replica(args: argparse.Namespace) -> None:
    """One replica (d = 1): a lost worker restarts the job. Side by side in
    one cluster: fault-free without and with snapshots every step (their
    cost), then the same fault with and without snapshots (steps run
    again), checkpoints every --checkpoint-interval steps throughout."""
    out = Path(tempfile.mkdtemp(prefix="snapshot-bench-", dir=args.scratch))
    cluster = Cluster(Path(args.build), out)

    def one_replica(name: str, snapshots: bool) -> dict:
        s = spec(args.steps, out / name)
        s["pipeline"]["data_parallel"] = 1
        s["checkpoint"]["interval_steps"] = args.checkpoint_interval
        if snapshots:
            s["checkpoint"]["snapshot_interval_steps"] = args.snapshot_interval
        return s

    try:
        processes = {f"one-{i}": cluster.start_worker(f"one-{i}") for i in range(2)}
        ids = {cluster.registered(name)[0]: name for name in processes}
        client = zbpp.Client(cluster.address)
        rates, checksums, rows = {}, {}, []
        for snapshots in (False, True):
            job_id = client.submit(one_replica(f"clean-{snapshots}", snapshots))
            job = client.wait_for_job(job_id, timeout=1800)
            rates[snapshots] = wall_rate(client.steps(job_id)[2:])
            checksums[snapshots] = job.param_checksum
        for snapshots in (True, False):
            job_id = client.submit(one_replica(f"fault-{snapshots}", snapshots))
            running = wait(client, job_id, lambda j: j.steps_completed > args.fault_after)
            victim = next(a.worker_id for a in running.assignments if a.stage == 1)
            fault_wall = dt.datetime.now(dt.timezone.utc)
            fault = time.monotonic()
            processes[ids[victim]].send_signal(signal.SIGKILL)
            decided = wait(client, job_id, lambda j: "restarting from" in j.state_message)
            t_decided = time.monotonic() - fault
            name = f"replacement-{snapshots}"
            processes[name] = cluster.start_worker(name)
            ids[cluster.registered(name)[0]] = name
            final = client.wait_for_job(job_id, timeout=1800)
            point = re.search(r"restarting from (the (\w+) of step (\d+)|step 0)",
                              decided.state_message)
            restored = int(point.group(3)) if point.group(3) else -1
            first_after = min(s.complete_time for s in client.steps(job_id)
                              if s.complete_time > fault_wall and s.step > restored)
            relative = abs(final.param_checksum - checksums[False]) / abs(checksums[False])
            rows.append((snapshots, point.group(1), decided.steps_completed - (restored + 1),
                         t_decided, (first_after - fault_wall).total_seconds(), final.state,
                         relative))
        print(f"| 2 stages x 1 replica, checkpoints every {args.checkpoint_interval} steps | "
              f"no snapshots | snapshots every {args.snapshot_interval} steps |")
        print("| --- | --- | --- |")
        print(f"| tokens/s, fault-free (wall clock, steps 2..) | {rates[False]:.0f} | "
              f"{rates[True]:.0f} ({rates[True] / rates[False]:.3f}x) |")
        by = {r[0]: r for r in rows}
        print(f"| SIGKILL of stage 1 after step {args.fault_after}: restart from | "
              f"{by[False][1]} | {by[True][1]} |")
        print(f"| steps run again | {by[False][2]} | {by[True][2]} |")
        print(f"| restart decided after the kill | {by[False][3]:.2f} s | {by[True][3]:.2f} s |")
        print(f"| first new step completed after the kill (replacement started at once) | "
              f"{by[False][4]:.2f} s | {by[True][4]:.2f} s |")
        print(f"| final state; checksum relative to the fault-free run | {by[False][5]}; "
              f"{by[False][6]:.1e} | {by[True][5]}; {by[True][6]:.1e} |")
    finally:
        cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fault", choices=["kill", "stop"], default="kill")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--fault-after", type=int, default=15)
    parser.add_argument("--degraded-steps", type=int, default=15)
    parser.add_argument("--build", default=os.environ.get("ZBPP_BUILD_DIR", "build"))
    parser.add_argument("--scratch", default=None, help="parent of the run's directory")
    parser.add_argument("--stages", type=int, default=2,
                        help="pipeline stages of the 2-replica job (2 x stages workers)")
    parser.add_argument("--synthetic", default=None, metavar="SCALE[:NOISE]",
                        help="workers in synthetic compute (zbpp-worker --synthetic-compute)")
    parser.add_argument("--replicas", type=int, choices=[1, 2], default=2,
                        help="1: the restart of a one-replica job, with and without snapshots")
    parser.add_argument("--checkpoint-interval", type=int, default=20,
                        help="with --replicas 1: steps between checkpoints")
    parser.add_argument("--snapshot-interval", type=int, default=1,
                        help="with --replicas 1: steps between snapshots")
    args = parser.parse_args()
    if args.replicas == 1:
        run_one_replica(args)
    else:
        run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
