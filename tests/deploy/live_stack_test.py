"""The deploy/ folder against a live stack: a real zbpp-coordinator, two
zbpp-worker processes training a tiny GPT for a few steps, Debian's
prometheus scraping the coordinator with deploy/prometheus/'s config and
recording rules, and Debian's headless Chromium on the schedule page.

    python live_stack_test.py REPO_ROOT BUILD_DIR OUT_DIR

Checks: the per-stage bubble series exist in Prometheus, lie in [0,1] and
equal what `zbppctl status` reported for the same step (within 0.01);
/metrics is promtool-clean with no job, while the job runs and after it;
every recording rule has a series for the job. Every panel query of every
dashboard in deploy/grafana returns data for the job; every annotation query
runs. The page at / and /jobs/ID loads in Chromium while the job runs, with
one chart row per worker in each picture; OUT_DIR/schedule-page.png is written.
"""

import atexit
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from deploytest import FIX, Tally, fail, need

yaml = need("yaml", "PyYAML")
import schedule_page  # noqa: E402
from live_stack import Daemon, Prometheus, free_port, http_get, promtool_metrics, tail  # noqa: E402

WORKERS = 2
DEADLINE_SECONDS = 150
TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
# 4 blocks, h=128, 40 steps of ~0.15 s.
JOB_SPEC = f"""name: live-stack
model: {{architecture: gpt, layers: 4, hidden: 128, heads: 4, vocab: 256, seq_len: 128}}
dataset: {{builtin: bible-kjv}}
pipeline: {{stages: {WORKERS}, microbatches: 8, microbatch_size: 4}}
schedule: {{name: zb-h1}}
optimizer: {{learning_rate: 2.0e-3, warmup_steps: 5}}
steps: 40
seed: 7
"""


class Stack:
    """The processes of one run, their scratch directory and the problems found."""

    def __init__(self, root, build, out):
        self.root, self.build, self.out = root, build, out
        self.bin = {
            "coordinator": build / "coordinator" / "zbpp-coordinator",
            "worker": build / "worker" / "daemon" / "zbpp-worker",
            "ctl": build / "client" / "zbppctl",
        }
        for path in self.bin.values():
            if not path.is_file():
                fail(f"{path} is not built; run scripts/build.sh")
        for tool in ("prometheus", "promtool"):
            if not shutil.which(tool):
                fail(f"{tool} not found; {FIX}")
        self.scratch = Path(tempfile.mkdtemp(prefix="zbpp-live-stack-"))
        self.daemons, self.driver, self.tally, self.passed = [], None, Tally(), False
        self.grpc = self.metrics = self.job = None
        atexit.register(self.close)

    def daemon(self, name, argv):
        started = Daemon(name, [str(a) for a in argv], self.scratch / f"{name}.log")
        self.daemons.append(started)
        return started

    def ctl(self, *args):
        """zbppctl's stdout; fails on an error."""
        run = subprocess.run(
            [self.bin["ctl"], "--coordinator", self.grpc, *args],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if run.returncode != 0:
            fail(f"zbppctl {' '.join(args)}: exit {run.returncode}: {run.stderr.strip()}")
        return run.stdout

    def lint_metrics(self, state):
        clean, said = promtool_metrics(http_get(f"http://{self.metrics}/metrics")[1])
        if clean:
            self.tally.ok(f"/metrics is promtool-clean ({state})")
        else:
            self.tally.problem(f"promtool check metrics ({state}): {said}")

    def close(self):
        if self.driver:
            self.driver.quit()
        for started in reversed(self.daemons):
            started.kill()
        if self.passed:
            shutil.rmtree(self.scratch, ignore_errors=True)
        else:
            print(f"logs kept in {self.scratch}", file=sys.stderr)


def start_prometheus(stack):
    """Prometheus with deploy/prometheus's config and rules, scraping every 0.5 s."""
    folder = stack.scratch / "prometheus"
    folder.mkdir()
    config = yaml.safe_load((stack.root / "deploy/prometheus/prometheus.yml").read_text())
    config["global"]["scrape_interval"] = config["global"]["evaluation_interval"] = "500ms"
    config["scrape_configs"][0]["static_configs"] = [{"targets": [stack.metrics]}]
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    shutil.copy(stack.root / "deploy/prometheus/rules.yml", folder / "rules.yml")
    address = f"127.0.0.1:{free_port()}"
    url = f"http://{address}"
    argv = ["prometheus", f"--config.file={folder / 'prometheus.yml'}"]
    argv += [f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address={address}"]
    prometheus = stack.daemon("prometheus", argv)
    for _ in range(200):
        if prometheus.process.poll() is not None:
            fail(f"prometheus exited: {tail(prometheus.log)}")
        try:
            if http_get(f"{url}/-/ready", timeout=2)[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    else:
        fail(f"prometheus did not become ready: {tail(prometheus.log)}")
    stack.tally.ok(f"prometheus ready on {url}, scraping {stack.metrics}")
    return Prometheus(url)


def run_job(stack):
    """Submits the job and follows it to its end: {step: measured bubble by stage}.

    While it runs: /metrics is linted once two steps are seen, the page
    checked once three are.
    """
    spec = stack.scratch / "job.yaml"
    spec.write_text(JOB_SPEC)
    stack.job = stack.ctl("submit", str(spec)).strip()
    stack.tally.ok(f"submitted {stack.job}")
    by_step, state, linted, page_checked = {}, "", False, False
    deadline = time.monotonic() + 100
    while time.monotonic() < deadline:
        status = json.loads(stack.ctl("status", stack.job, "--format", "json"))
        state, stages = status.get("state"), status.get("stages") or []
        if status.get("last_step") and stages and stages[0].get("measured_bubble_rate") is not None:
            by_step[int(status["last_step"]["step"])] = [
                s.get("measured_bubble_rate") for s in stages
            ]
        if state == "JOB_STATE_RUNNING" and len(by_step) >= 2 and not linted:
            linted = True
            stack.lint_metrics("job running")
        if state == "JOB_STATE_RUNNING" and len(by_step) >= 3 and not page_checked:
            page_checked = True
            check_page(stack)
        if state in TERMINAL:
            break
        time.sleep(0.1)
    if state != "JOB_STATE_SUCCEEDED":
        fail(
            f"job ended {state}: {stack.ctl('status', stack.job)} worker log: "
            f"{tail(stack.scratch / 'worker-0.log')}"
        )
    stack.tally.expect(
        page_checked, "the job finished before the page could be checked while it ran"
    )
    stack.tally.ok(f"{stack.job} SUCCEEDED; zbppctl status saw {len(by_step)} steps")
    return by_step


def check_bubbles(stack, prometheus, by_step):
    """Per-stage series for every stage, in [0,1], equal to zbppctl status."""
    tally, selector = stack.tally, f'{{job_id="{stack.job}"}}'
    measured = prometheus.range(f"zbpp_stage_measured_bubble_ratio{selector}")
    stages = sorted(s["metric"].get("stage") for s in measured)
    tally.expect(
        stages == [str(i) for i in range(WORKERS)],
        f"per-stage measured bubble series: stages {stages}, expected 0..{WORKERS - 1}",
    )
    for name in ("zbpp_stage_predicted_bubble_ratio", "zbpp_stage_measured_bubble_ratio"):
        for series in prometheus.range(f"{name}{selector}"):
            bad = [v for _, v in series["values"] if not 0 <= float(v) <= 1]
            tally.expect(
                not bad,
                f"{name} stage {series['metric'].get('stage')}: values outside [0,1]: {bad[:3]}",
            )
    last_step = prometheus.range(f"zbpp_job_last_step{selector}")
    step_at = {t: int(float(v)) for t, v in (last_step[0]["values"] if last_step else [])}
    compared, disagreed = 0, []
    for series in measured:
        stage, seen = int(series["metric"]["stage"]), set()
        for t, value in series["values"]:
            step = step_at.get(t)
            if step is None or step in seen or step not in by_step:
                continue
            seen.add(step)
            compared += 1
            want = by_step[step][stage] if stage < len(by_step[step]) else None
            if want is None or abs(float(value) - want) > 0.01:
                disagreed.append(f"step {step} stage {stage}: prometheus {value}, zbppctl {want}")
    # A scrape may fall between the gauges of one step being set: allow one
    # disagreement in ten, never a majority.
    if compared < 4:
        tally.problem(
            f"only {compared} (step, stage) pairs seen by both Prometheus and zbppctl status"
        )
    elif len(disagreed) > compared / 10:
        tally.problem(f"bubble ratios disagree with zbppctl status: {'; '.join(disagreed)}")
    else:
        agreed = compared - len(disagreed)
        tally.ok(
            f"per-stage bubble series in [0,1]; {agreed}/{compared} (step, stage) pairs equal "
            "zbppctl status within 0.01"
        )


def check_rules(stack, prometheus):
    """Every recording rule has a series for the job; promtool check rules passes."""
    rules_file = stack.root / "deploy/prometheus/rules.yml"
    for group in yaml.safe_load(rules_file.read_text())["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                stack.tally.expect(
                    prometheus.range(f'{rule["record"]}{{job_id="{stack.job}"}}'),
                    f"recording rule {rule['record']} has no series for {stack.job}",
                )
    run = subprocess.run(
        ["promtool", "check", "rules", str(rules_file)], capture_output=True, text=True
    )
    if run.returncode == 0:
        stack.tally.ok("recording rules produce series; promtool check rules passes")
    else:
        stack.tally.problem(f"promtool check rules: {run.stdout}{run.stderr}")


def check_dashboards(stack, prometheus):
    """Every panel query returns data for the job; every annotation query runs."""

    def subst(expr):
        return expr.replace("$job_id", stack.job).replace("$__rate_interval", "2s")

    for path in sorted((stack.root / "deploy/grafana/dashboards").glob("*.json")):
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                where = f'{path.name} "{panel["title"]}" {target["refId"]}'
                try:
                    stack.tally.expect(
                        prometheus.range(subst(target["expr"])),
                        f"{where}: no data for {stack.job}: {target['expr']}",
                    )
                except RuntimeError as e:
                    stack.tally.problem(f"{where}: {e}")
        for annotation in dashboard["annotations"]["list"]:
            if (annotation.get("target") or {}).get("expr"):
                try:
                    prometheus.range(subst(annotation["target"]["expr"]))
                except RuntimeError as e:
                    stack.tally.problem(f'{path.name} annotation "{annotation["name"]}": {e}')
        stack.tally.ok(f"{path.name}: {len(dashboard['panels'])} panels queried")


def check_page(stack):
    """/ and /jobs/ID: the job named, one row per worker in both charts, refreshing; a screenshot.

    The browser quits at the end: left on the page, it would hold some of the
    coordinator's few HTTP threads with the connections it keeps open.
    """
    base = f"http://{stack.metrics}"
    for path in ("/", f"/jobs/{stack.job}"):
        facts = schedule_page.facts(stack.driver, base + path, stack.job)
        rows = [facts["measured"], facts["planned"]]
        stack.tally.expect(facts["names"], f"page {path}: does not name {stack.job}")
        if rows == [WORKERS, WORKERS]:
            stack.tally.ok(f"page {path} in chromium: {WORKERS} worker rows measured and planned")
        else:
            stack.tally.problem(
                f"page {path}: chart rows measured/planned {rows}, expected {WORKERS} each"
            )
        stack.tally.expect(facts["refreshes"], f"page {path}: does not refresh while the job runs")
    stack.out.mkdir(parents=True, exist_ok=True)
    png = stack.out / "schedule-page.png"
    size = schedule_page.screenshot(stack.driver, f"{base}/jobs/{stack.job}", png)
    if size >= 10000:
        stack.tally.ok(f"screenshot written: {png}")
    else:
        stack.tally.problem(f"screenshot {png}: {size} bytes, suspiciously small or missing")
    stack.driver.quit()
    stack.driver = None


def start_coordinator(stack):
    """The coordinator on free loopback ports, its SQLite state in memory."""
    argv = [stack.bin["coordinator"], *"--listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0".split()]
    coordinator = stack.daemon("coordinator", argv + ["--db", ":memory:"])
    stack.grpc, stack.metrics = coordinator.line(r"listening grpc=(\S+) metrics=(\S+)").groups()


def start_workers(stack):
    """WORKERS CPU workers of one intra-op thread each, registered."""
    cache = stack.build / "tests" / "deploy" / "worker-cache"
    cache.mkdir(parents=True, exist_ok=True)
    for rank in range(WORKERS):
        argv = [stack.bin["worker"], "--coordinator", stack.grpc, "--threads", "1"]
        argv += ["--cache-dir", cache, "--data-root", cache.resolve(), "--name", f"live-{rank}"]
        stack.daemon(f"worker-{rank}", argv).line(r"registered worker_id=")


def on_deadline(*_):
    fail(f"took more than {DEADLINE_SECONDS} s")


def main():
    if len(sys.argv) != 4:
        fail("usage: live_stack_test.py REPO_ROOT BUILD_DIR OUT_DIR")
    signal.signal(signal.SIGALRM, on_deadline)
    signal.alarm(DEADLINE_SECONDS)
    stack = Stack(*(Path(a).resolve() for a in sys.argv[1:]))
    start_coordinator(stack)
    stack.lint_metrics("no job")
    prometheus = start_prometheus(stack)
    # Started before the job, so that the page is checked early in its run.
    stack.driver = schedule_page.browser(stack.scratch / "chromium", stack.scratch / "driver.log")
    start_workers(stack)
    prometheus.start = time.time() - 1
    by_step = run_job(stack)
    stack.lint_metrics("job finished")
    time.sleep(1.2)  # one more scrape and rule evaluation
    prometheus.end = time.time()

    check_bubbles(stack, prometheus, by_step)
    check_rules(stack, prometheus)
    check_dashboards(stack, prometheus)
    signal.alarm(0)
    stack.tally.finish("live stack: prometheus, grafana queries and the schedule page ok")
    stack.passed = True


if __name__ == "__main__":
    main()
