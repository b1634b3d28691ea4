#!/usr/bin/env bash
# The README's first command. Until the worker daemon exists (issue 4) it
# runs the schedule engine on the Zero Bubble paper's profiled settings:
# a comparison table of every schedule, and pictures of ZB-H1 against 1F1B.
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
