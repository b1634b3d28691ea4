#!/usr/bin/env bash
# The README's first command. Until the worker daemon exists (issue 4) it
# runs the schedule engine on the Zero Bubble paper's profiled settings (a
# comparison table of every schedule, pictures of ZB-H1 against 1F1B), then
# starts a local coordinator and submits the main job with zbppctl; the job
# waits in PENDING for workers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
sched=${ZBPP_BUILD_DIR:-build}/scheduler/zbpp-sched
out=${ZBPP_OUT:-out}
mkdir -p "$out"

# 1.5B model, p=8, m=24: per-stage times in ms as profiled in the paper
# (Table 5).
costs=(--stages 8 --microbatches 24 --cost-f 18.522 --cost-b 18.086 --cost-w 9.337 --cost-comm 0.601)
echo "== every schedule, 1.5B model, p=8, m=24 (times in ms) =="
"$sched" compare "${costs[@]}"
echo
echo "== ZB-H1 vs 1F1B, p=4, m=8, T_F=T_B=T_W=1 =="
small=(--stages 4 --microbatches 8 --cost-f 1 --cost-b 1 --cost-w 1)
"$sched" show --schedule 1f1b "${small[@]}"
"$sched" show --schedule zb-h1 "${small[@]}"
for name in 1f1b zb-h1 zb-2p zb-v; do
  "$sched" simulate --schedule "$name" "${small[@]}" --format svg --output "$out/$name.svg"
  "$sched" simulate --schedule "$name" "${small[@]}" --format chrome-trace --output "$out/$name.trace.json"
done
echo
echo "pictures: $out/*.svg; Perfetto/chrome://tracing traces: $out/*.trace.json"

echo
echo "== a local coordinator and the main job (deploy/examples/gpt-bible-cpu.yaml) =="
build=${ZBPP_BUILD_DIR:-build}
rm -f "$out/coordinator.db"*
"$build/coordinator/zbpp-coordinator" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --db "$out/coordinator.db" >"$out/coordinator.out" 2>"$out/coordinator.log" &
coordinator_pid=$!
trap 'kill -TERM $coordinator_pid 2>/dev/null; wait $coordinator_pid 2>/dev/null' EXIT
for _ in $(seq 100); do
  grep -q listening "$out/coordinator.out" 2>/dev/null && break
  sleep 0.1
done
cat "$out/coordinator.out"
export ZBPP_COORDINATOR
ZBPP_COORDINATOR=$(sed -n 's/.*grpc=\([^ ]*\).*/\1/p' "$out/coordinator.out")
ctl="$build/client/zbppctl"
job=$("$ctl" submit deploy/examples/gpt-bible-cpu.yaml)
"$ctl" list
"$ctl" status "$job"
echo "(the job waits for workers: the worker daemon is the next piece of zbpp)"
