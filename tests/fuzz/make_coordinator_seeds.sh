#!/usr/bin/env bash
# Writes the hand-made seeds of coordinator_request_fuzz into
# tests/fuzz/corpus/coordinator_request_fuzz/: one selector byte (see
# coordinator_request_fuzz.cc), then a protobuf encoded by protoc from the
# text below. Rerun after changing the protos; the outputs are committed.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/tests/fuzz/corpus/coordinator_request_fuzz"
mkdir -p "$out"

# seed NAME SELECTOR MESSAGE TEXT: SELECTOR as three octal digits.
seed() {
  { printf "\\$2"; printf '%s\n' "$4" |
      protoc -I"$root/proto" --encode="zbpp.v1.$3" \
        zbpp/v1/job.proto zbpp/v1/worker.proto; } > "$out/$1"
}

spec='spec {
  name: "seed"
  model { architecture: "gpt" layers: 8 hidden: 64 heads: 4 vocab: 256 seq_len: 32 }
  dataset { synthetic {} }
  pipeline { stages: 2 microbatches: 4 microbatch_size: 1 }
  schedule { name: "auto" memory_limit_m_b: 4 resolve { window_steps: 4 min_improvement: 0.01 } }
  optimizer { learning_rate: 0.001 }
  validation: VALIDATION_MODE_POST
  steps: 10
}'
seed submit_auto 000 SubmitJobRequest "$spec"
seed submit_zbv 000 SubmitJobRequest "${spec/\"auto\"/\"zb-v\"}"

# 033 = ReportStep with ids, step and timings filled in for worker 0;
# 037 the same for worker 1.
seed report_w0_filled 033 ReportStepRequest 'loss: 2.5'
seed report_w1_filled 037 ReportStepRequest 'loss: 2.5'
seed report_w0_hop_validation 033 ReportStepRequest '
hop_latencies { to_stage: 1 one_way_seconds: 0.0001 }
validation { step: 0 mode: VALIDATION_MODE_POST global_grad_norm_sq: 4
             decision: VALIDATION_DECISION_COMMITTED clip_coefficient: 1 }'
seed report_w1_bad_timings 037 ReportStepRequest '
action_start_seconds: [0, 1, 2]
action_end_seconds: [1, 0.5, 3]'
seed report_unknown_worker 001 ReportStepRequest '
worker_id: "nobody" job_id: "nojob" attempt: 1 step: 0'
