#!/usr/bin/env python3
"""Wall-clock speed-up of schedules over each other, on real training.

Runs scripts/demo (a local coordinator and K CPU workers training the demo's
GPT) once per configuration per round, the configurations alternating within
a round (reversed every other round, so that neither the first nor the last
slot of a round favours one), and prints a markdown table of medians over the
rounds: trained tokens per second (wall clock over the report's window of
steps, `zbppctl report`), the median step time, the measured and predicted
bubble rate (means over the stages) and each configuration's tokens/s
relative to the first one's. The machine is shared and noisy: only ratios
measured side by side, in one run, mean anything (docs/results.md, "Measured
results").

    python3 bench/speedup.py [--rounds R] [--workers K] [--steps N]
        [--hidden H] [--microbatches M] [--out FILE] [--demo-arg ARG ...]
        CONFIG [CONFIG ...]

CONFIG is SCHEDULE or SCHEDULE/VALIDATION (validation: synchronous, post or
auto; default auto), e.g. `1f1b/synchronous zb-2p/post zb-v/post`. Each run
is `scripts/demo --json` with ZBPP_PREBUILT=1 (build first:
`bash scripts/build.sh zbpp-coordinator zbpp-worker zbppctl`); its output
directory is under the --out file's directory. Exit 1 when a run fails (its
log is named), 2 for bad arguments.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
VALIDATIONS = ("synchronous", "post", "auto")


def parse_config(text):
    schedule, _, validation = text.partition("/")
    validation = validation or "auto"
    if not schedule or validation not in VALIDATIONS:
        raise argparse.ArgumentTypeError(
            f"CONFIG must be SCHEDULE[/synchronous|post|auto], got {text!r}")
    return schedule, validation


def positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def run_demo(args, schedule, validation, run_dir):
    """One scripts/demo run; returns its report (zbppctl report --format json)."""
    command = ["bash", str(ROOT / "scripts" / "demo"), "--json",
               "--workers", str(args.workers), "--steps", str(args.steps),
               "--hidden", str(args.hidden), "--microbatches", str(args.microbatches),
               "--schedule", schedule, "--validation", validation, *args.demo_arg]
    env = dict(os.environ, ZBPP_PREBUILT="1", ZBPP_OUT=str(run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "demo.log"
    with open(log, "w") as err:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=err, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        sys.exit(f"speedup: {schedule}/{validation} failed (exit {done.returncode}); see {log}")
    return json.loads(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="+", type=parse_config, metavar="CONFIG")
    parser.add_argument("--rounds", type=positive, default=3)
    parser.add_argument("--workers", type=positive, default=2)
    parser.add_argument("--steps", type=positive, default=60)
    parser.add_argument("--hidden", type=positive, default=128)
    parser.add_argument("--microbatches", type=positive, default=8)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "out" / "speedup.md")
    parser.add_argument("--demo-arg", action="append", default=[],
                        help="one more scripts/demo argument (repeat per word)")
    args = parser.parse_args()

    runs = {config: [] for config in args.configs}
    for round_index in range(args.rounds):
        order = args.configs if round_index % 2 == 0 else list(reversed(args.configs))
        for schedule, validation in order:
            run_dir = args.out.parent / "speedup-runs" / f"{schedule}-{validation}-{round_index}"
            report = run_demo(args, schedule, validation, run_dir)
            runs[(schedule, validation)].append(report)
            print(f"round {round_index + 1}/{args.rounds} {schedule}/{validation}: "
                  f"{report['tokens_per_second']:.0f} tokens/s", file=sys.stderr)

    def median(config, key):
        return statistics.median(r[key] for r in runs[config])

    def mean_bubble(config, key):
        return statistics.median(statistics.fmean(r[key]) for r in runs[config])

    base = median(args.configs[0], "tokens_per_second")
    lines = [
        f"{args.workers} workers, h = {args.hidden}, m = {args.microbatches}, {args.steps} steps, "
        f"{args.rounds} alternating rounds; medians over the rounds",
        "",
        "| schedule | validation | tokens/s per round | tokens/s | × first | step s "
        "| bubble measured | bubble predicted |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for config in args.configs:
        tokens = median(config, "tokens_per_second")
        per_round = ", ".join(f"{r['tokens_per_second']:.0f}" for r in runs[config])
        lines.append(
            f"| {config[0]} | {config[1]} | {per_round} | {tokens:.0f} | {tokens / base:.3f} "
            f"| {median(config, 'step_seconds'):.4f} "
            f"| {mean_bubble(config, 'bubble_rate_measured'):.3f} "
            f"| {mean_bubble(config, 'bubble_rate_predicted'):.3f} |")
    table = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    print(table, end="")


if __name__ == "__main__":
    main()
