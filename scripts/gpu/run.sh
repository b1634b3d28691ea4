#!/usr/bin/env bash
# Runs on a lent GPU machine (see the device tool), from the repository root,
# with build-gpu/ carried (scripts/gpu/bundle.sh made it here). In one call:
#  1. the worker's numerical tests on cuda:0 (and the communicator's, whose
#     Gloo transport stages device tensors through pinned host memory on a
#     stream of its own): the split backward in
#     fp32/bf16/fp16, the equivalence of every schedule with ranks as threads
#     on the one GPU, post-update validation and mixed precision, a
#     checkpoint moved between the CPU and the GPU, the activation-memory
#     meter on the caching allocator and the calibration profile's M_B/M_W
#     (worker_memory_tests). The test binaries link
#     LibTorch's CPU part only; its CUDA part, from the machine's PyTorch
#     2.11.0, is preloaded, and ZBPP_TEST_DEVICE=cuda:0 puts every model on
#     the GPU (a run where LibTorch sees no GPU fails instead of passing on
#     the CPU);
#  2. compute_bench per transformer layer of the Zero Bubble paper's four
#     model shapes in bf16 (T_F, T_B, T_W against bf16 GEMMs of the same
#     shapes, M_B and M_W from the caching allocator, and the simulated
#     bubble rates of 1F1B, ZB-H1, ZB-2p and ZB-V at the first (p, m) of each
#     model in the paper's Table 5), and of a Llama-3-8B-shaped layer (h 4096,
#     32 heads, 8 key/value heads, SwiGLU 14336, s 4096, vocabulary 128256;
#     step compute-llama3-8B); at 6.2B also --profile: the split B then W
#     against one fused backward kernel by kernel (where the split's cost
#     goes); step compare-block: the same layers against PyTorch's own
#     (bench/compare_block.py: compute_bench and bench/reference_block.py in
#     PyTorch eager and, at 6.2B, torch.compile, alternating, one table of
#     ratios and TFLOP/s); step optimizer: AdamW's fused step over a 6.2B
#     chunk's parameters (bench/optimizer_bench);
#  3. the main job (scripts/demo) with a coordinator and 2 workers sharing
#     cuda:0 in bf16; in fp16 under post-validation with a NaN injected at
#     step 40 (rolled back and skipped); then 4 workers as 2 replicas of a
#     2-stage pipeline (data parallel), the ranks talking through Gloo,
#     which stages the GPU tensors through host memory;
#  4. NCCL (step names nccl-*): NCCL refuses two ranks on one device unless
#     each process presents its own host identity (the test-only shared-GPU
#     setting: NCCL_HOSTID per process, sockets on loopback), so every rank
#     is a process: the NCCL communicator's tests at 2 and 4 ranks and the
#     pipeline equivalence of every schedule with ranks as processes over
#     NCCL (worker_process_tests); the main job over NCCL in bf16, whose
#     param_checksum must equal the Gloo run's (step main-job: point-to-point
#     copies are exact), in fp16 under post-validation with a NaN, and data
#     parallel (2 replicas x 2 stages: the all-reduce's summation order may
#     differ from Gloo's).
#  5. merged B+W passes (step names merge-*; `run.sh merge` runs them all,
#     about 6 minutes): worker_merged_backward_tests on cuda:0 (the
#     parameters of every registry schedule with merged pairs run as one
#     pass equal the unmerged run's bit for bit, p = 2 and 4, d = 2, bf16);
#     compute_bench per layer and per 2-layer chunk at 1.5B and 6.2B (the
#     table "The backward three ways": F + B + W, F + merged BW, F + fused
#     backward); merge_bench, the steps of a p = 2 job (two ranks as threads
#     on cuda:0, bf16, s 1024) under 1F1B, ZB-H1 and ZB-2p planned from the
#     ranks' profile (T_BW included), merged and apart; compare_block per
#     layer and per 2-layer chunk at 1.5B and 6.2B with torch.compile (the
#     zbpp chunk, split and merged, against eager and compiled PyTorch).
#  6. cpu-p8-speedup: no GPU, the machine's 16 CPU cores: 8 CPU workers
#     train the demo's GPT at h = 256 under 1F1B (synchronous validation),
#     ZB-2p and ZB-V (post-validation), two alternating rounds
#     (bench/speedup.py; a table of median tokens/s, the ratio to 1F1B,
#     step time and bubble rates; about 5 minutes).
#  7. balanced stages (step names balance-*, about 6 minutes): the demo's
#     Llama on 2 CPU workers under its default layout and under [4, 4], and
#     vocabulary parallelism on cuda:0 over Gloo and NCCL.
# Arguments, if any, name the steps to run (e.g. worker_comm_tests
# main-job), or a group of them by the part of their names before the first
# "-" (e.g. merge), for a short device budget; none: every step. A leading
# `--architecture gpt|llama` keeps only that family's compute steps (e.g.
# `--architecture llama compute-llama3-8B`).
# Results go to out-gpu/; where $OUT is set (the device tool fetches what
# is under it, a few files only), they are also packed, checkpoints and
# databases left out, into $OUT/gpu-results.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=out-gpu
rm -rf "$out"
mkdir -p "$out"
torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))') || {
  echo "run: no PyTorch on this machine" >&2; exit 1; }
# The CUDA runtime our binaries link (c10d's inline code calls it) comes
# with torch's NVIDIA wheels there.
cudart=$(find "$(dirname "$(dirname "$torch_lib")")/nvidia" -name 'libcudart.so.13' 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$PWD/build-gpu/lib:$torch_lib${cudart:+:$(dirname "$cudart")}"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__)'
} >"$out/machine.txt" 2>&1
architecture=all
if [ "${1:-}" = --architecture ]; then
  [[ "${2:-}" =~ ^(gpt|llama)$ ]] || { echo "run: --architecture must be gpt or llama" >&2; exit 2; }
  architecture=$2
  shift 2
fi
status=0
only=" $* "
# $1: a name for the result file; the rest: the command.
step() {
  local name=$1
  shift
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || [[ "$only" == *" ${name%%-*} "* ]] ||
    return 0
  if "$@" >"$out/$name.txt" 2>&1; then
    echo "$name: passed"
  else
    echo "$name: FAILED (exit $?), see $out/$name.txt"
    status=1
  fi
  tail -3 "$out/$name.txt"
}
on_gpu() { LD_PRELOAD="$torch_lib/libtorch_cuda.so" ZBPP_TEST_DEVICE=cuda:0 "$@"; }
for t in worker_model_tests worker_post_validation_tests worker_runtime_tests worker_comm_tests \
         worker_memory_tests; do
  step "$t" on_gpu build-gpu/bin/"$t"
done
step nccl-tests on_gpu build-gpu/bin/worker_process_tests --gtest_filter='*Nccl*'
# The main job on cuda:0 (ZBPP_OUT set per run).
demo=(env ZBPP_PREBUILT=1 ZBPP_BUILD_DIR=build-gpu bash scripts/demo --device cuda:0
      --text-file build-gpu/kjv.txt --json)
# model hidden heads p:m
for shape in "1.5B 2304 24 8:24" "6.2B 4096 32 8:24" "14.6B 5120 40 16:48" "28.3B 6144 48 32:96"; do
  [ "$architecture" != llama ] || break
  set -- $shape
  step "compute-$1" on_gpu build-gpu/bin/compute_bench --device=cuda:0 --precision=bf16 \
    --hidden="$2" --heads="$3" --seq-len=1024 --layers=4 --stages=2 --microbatch-size=1 \
    --vocab=50304 --reps=20 --warmup=5 --pipeline="$4" $([ "$1" = 6.2B ] && echo --profile)
done
if [ "$architecture" != gpt ]; then
  step compute-llama3-8B on_gpu build-gpu/bin/compute_bench --device=cuda:0 --precision=bf16 \
    --architecture=llama --hidden=4096 --heads=32 --kv-heads=8 --ffn=14336 --seq-len=4096 \
    --layers=4 --stages=2 --microbatch-size=1 --vocab=128256 --reps=20 --warmup=5 --pipeline=8:24
fi
# NAME:ARCH:HIDDEN:HEADS:KV_HEADS:FFN:SEQ_LEN, as the compute steps above.
compare_shapes=()
[ "$architecture" = llama ] || compare_shapes+=(--shape 1.5B:gpt:2304:24:24:9216:1024
  --shape 6.2B:gpt:4096:32:32:16384:1024 --shape 14.6B:gpt:5120:40:40:20480:1024
  --shape 28.3B:gpt:6144:48:48:24576:1024)
[ "$architecture" = gpt ] || compare_shapes+=(--shape llama3-8B:llama:4096:32:8:14336:4096)
step compare-block on_gpu python3 bench/compare_block.py --compute-bench build-gpu/bin/compute_bench \
  --device cuda:0 --precision bf16 --rounds 2 --reps 10 --warmup 3 --compile 6.2B "${compare_shapes[@]}"
step optimizer on_gpu build-gpu/bin/optimizer_bench --device=cuda:0 --hidden=4096 --heads=32 \
  --layers=4 --vocab=50304
# Bounded: a worker that cannot start would leave the job waiting for it.
step main-job timeout 240 env ZBPP_PREBUILT=1 ZBPP_BUILD_DIR=build-gpu ZBPP_OUT="$out/main-job" \
  bash scripts/demo --device cuda:0 --precision bf16 --text-file build-gpu/kjv.txt --json
step main-job-fp16 timeout 150 env ZBPP_PREBUILT=1 ZBPP_BUILD_DIR=build-gpu ZBPP_OUT="$out/main-job-fp16" \
  bash scripts/demo --device cuda:0 --precision fp16 --text-file build-gpu/kjv.txt --json \
  --validation post --steps 100 --inject-nan-step 40
step main-job-dp timeout 200 env ZBPP_PREBUILT=1 ZBPP_BUILD_DIR=build-gpu ZBPP_OUT="$out/main-job-dp" \
  bash scripts/demo --device cuda:0 --precision bf16 --text-file build-gpu/kjv.txt --json \
  --workers 4 --data-parallel 2 --steps 60
step main-job-nccl timeout 240 env ZBPP_OUT="$out/main-job-nccl" "${demo[@]}" \
  --precision bf16 --transport nccl
step main-job-nccl-fp16 timeout 150 env ZBPP_OUT="$out/main-job-nccl-fp16" "${demo[@]}" \
  --precision fp16 --transport nccl --validation post --steps 100 --inject-nan-step 40
step main-job-nccl-dp timeout 200 env ZBPP_OUT="$out/main-job-nccl-dp" "${demo[@]}" \
  --precision bf16 --transport nccl --workers 4 --data-parallel 2 --steps 60
# Balanced stages (7. above): the command of bench/results/balance.md on
# this machine's CPU cores, where the two workers share no core: the demo's
# Llama with an 8192-token BPE under its defaults (ZB-H1, layout auto)
# against the even layout [4, 4]; then vocabulary parallelism on cuda:0
# under [4, 4], over Gloo and over NCCL (the same computation: the losses
# and param_checksum should agree). scripts/tokenize runs in this machine's
# Python, whose tokenizers it uses.
zbpp_home=/tmp/zbpp-home
mkdir -p "$zbpp_home/venv/bin"
printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >"$zbpp_home/venv/bin/python"
chmod +x "$zbpp_home/venv/bin/python"
# $1: the run's name; the rest: the demo's flags.
balance() {
  ZBPP_HOME=$zbpp_home ZBPP_PREBUILT=1 ZBPP_BUILD_DIR=build-gpu ZBPP_OUT="$out/$1" timeout 300 \
    bash scripts/demo --model llama --bpe 8192 --text-file build-gpu/kjv.txt --json "${@:2}"
}
step balance-auto balance balance-auto
step balance-even balance balance-even --layout 4,4
step balance-vp-gloo balance balance-vp-gloo --device cuda:0 --transport gloo --vocab-parallel \
  --schedule zb-2p --steps 60 --layout 4,4
step balance-vp-nccl balance balance-vp-nccl --device cuda:0 --transport nccl --vocab-parallel \
  --schedule zb-2p --steps 60 --layout 4,4
# Merged B+W passes (5. above).
step merge-tests on_gpu build-gpu/bin/worker_merged_backward_tests
# model hidden heads
for shape in "1.5B 2304 24" "6.2B 4096 32"; do
  set -- $shape
  # --layers=2: one layer per chunk; --layers=4: a 2-layer chunk.
  for cut in "layer 2" "chunk 4"; do
    set -- $shape $cut
    step "merge-compute-$1-$4" on_gpu build-gpu/bin/compute_bench --device=cuda:0 \
      --precision=bf16 --hidden="$2" --heads="$3" --seq-len=1024 --layers="$5" --stages=2 \
      --microbatch-size=1 --vocab=50304 --reps=20 --warmup=5
  done
  set -- $shape
  step "merge-steps-$1" on_gpu timeout 240 build-gpu/bin/merge_bench --device=cuda:0 \
    --precision=bf16 --hidden="$2" --heads="$3" --seq-len=1024 --layers=4 --stages=2 \
    --microbatch-size=1 --microbatches=8 --steps=6 --warmup=2 --rounds=2 \
    --schedules=1f1b,zb-h1,zb-2p
done
for layers in 1 2; do
  step "merge-compile-$layers" on_gpu python3 bench/compare_block.py \
    --compute-bench build-gpu/bin/compute_bench --device cuda:0 --precision bf16 --rounds 2 \
    --reps 10 --warmup 3 --layers "$layers" --compile all \
    --shape 1.5B:gpt:2304:24:24:9216:1024 --shape 6.2B:gpt:4096:32:32:16384:1024
done
step cpu-p8-speedup timeout 540 env ZBPP_BUILD_DIR=build-gpu python3 bench/speedup.py \
  --workers 8 --hidden 256 --microbatches 16 --steps 16 --rounds 2 --out "$out/cpu-p8-speedup.md" \
  --demo-arg=--text-file --demo-arg=build-gpu/kjv.txt 1f1b/synchronous zb-2p/post zb-v/post
# The checksums of the Gloo and NCCL runs, side by side.
grep -o '"param_checksum": *[-0-9.e]*' "$out"/main-job*.txt "$out"/balance-*.txt >"$out/checksums.txt" || true
cat "$out/checksums.txt"
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/gpu-results.tar.gz" --exclude=checkpoints --exclude='*.db*' "$out"
fi
exit $status
