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
        zbpp/v1/job.proto zbpp/v1/worker.proto zbpp/v1/rendezvous.proto; } > "$out/$1"
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
validations { step: 0 mode: VALIDATION_MODE_POST global_grad_norm_sq: 4
             decision: VALIDATION_DECISION_COMMITTED clip_coefficient: 1 }'
seed report_w1_bad_timings 037 ReportStepRequest '
action_start_seconds: [0, 1, 2]
action_end_seconds: [1, 0.5, 3]'
seed report_unknown_worker 001 ReportStepRequest '
worker_id: "nobody" job_id: "nojob" attempt: 1 step: 0'

# 040-077: the worker service (041 a heartbeat as worker 0, 050 a listing).
seed register_worker 040 RegisterWorkerRequest '
worker { address: "10.0.0.9:7000" host: "node" device_kind: DEVICE_KIND_CPU
         memory_bytes: 1073741824 }'
seed heartbeat_w0 041 Heartbeat 'phase: WORKER_PHASE_RUNNING'
seed list_workers 050 ListWorkersRequest 'page_size: 1'

# 100-377: the rendezvous service as worker 0 in its attempt's scope.
seed rendezvous_set 102 SetRequest 'key: "rank_0" value: "10.0.0.0:9"'
seed rendezvous_get 142 GetRequest 'key: "rank_0"'
seed rendezvous_wait 202 WaitRequest 'keys: "rank_0" keys: "rank_1"'
seed rendezvous_add 242 AddRequest 'key: "counter" delta: 1'
seed rendezvous_compare_set 302 CompareSetRequest '
key: "rank_0" expected: "10.0.0.0:9" desired: "10.0.0.0:10"'
seed rendezvous_delete 342 DeleteRequest 'key: "rank_0"'
