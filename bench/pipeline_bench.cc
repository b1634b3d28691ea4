// Schedules side by side on real processes: one zbpp-coordinator and two
// zbpp-worker daemons (one LibTorch thread each) on this machine, the same
// GPT and m for every schedule, jobs submitted one after another to the same
// processes. Each schedule runs once per validation mode (rows "zb-2p /
// synchronous", "zb-2p / post"). Per row it reads every StepSummary from
// WatchJob, drops the warm-up steps and prints medians: step time, wall time
// per step, tokens/s, measured and predicted bubble per stage, and the
// executor's overhead.
//
//   pipeline_bench [--steps=12] [--warmup=3] [--rounds=1]
//       [--schedules=1f1b,zb-h1,zb-h2,zb-2p,zb-auto]
//       [--validation=synchronous,post] [--json=FILE]
//       [--min-worker-cores=0] [--retries=5]
//       [--layers=4] [--hidden=256] [--heads=4] [--seq-len=128]
//       [--microbatch-size=4] [--microbatches=8] [--db=:memory:]
//       [--cache-dir=/tmp/zbpp-pipeline-bench-cache]
//       [--coordinator=PATH] [--worker=PATH]
//
// --rounds=N runs the schedule list N times, interleaved, and pools the
// samples: slow drift of a shared machine's load then hits every schedule.
// A schedule's validation modes run back to back, in the listed order in
// even rounds and reversed in odd ones, so a post / sync ratio compares jobs
// a few seconds apart and neither mode always runs first.
//
// --min-worker-cores=C drops a job whose workers got less than C cores on
// average (CPU / wall below) and runs it again, after a 10 s pause, up to
// --retries times (then keeps the last try): on a shared 2-core machine a
// neighbour's build or test otherwise decides the comparison.
//
// --validation: JobSpec.validation of the jobs (paper §4).
//   synchronous  an all-reduce of the gradient state before every optimizer
//                step: a barrier, the pipeline drains between steps.
//   post         post-update validation: each rank steps optimistically and
//                the step is validated before the next step's first B, so
//                the next step's warm-up forwards overlap the previous
//                step's tail.
//   auto         the coordinator's ValidationPolicy (SYNCHRONOUS for the
//                first 10 clean steps, then POST): mixes both in a short run.
// The spec sets no max_grad_norm, so no step is ever clipped and a POST job
// never rolls back; each row prints the job's rollbacks_total and
// skipped_steps_total (GetJob after the end) and the validation outcomes of
// its measured steps, to show that it did not.
//
// What the columns are (see worker/daemon/attempt_runner.cc Fill and
// coordinator/core/job_steps.cc Job::CompleteStep):
//   step s       StepSummary.step_seconds: the max over ranks of a rank's
//                RunStep start to its last action's end (actions only).
//   wall s       complete_time[k] - complete_time[k-1]: the whole step as
//                the coordinator sees it, including the optimizer, its
//                all-reduce, ReportStep and the grant round trip. The
//                throughput measure: with POST a rank's step starts while
//                its peer still finishes the previous one, so step s (one
//                rank's own span) no longer adds up to the run's time.
//   gap ms       wall - max over stages of m * (F + B + W): per step, the
//                time the busiest rank did not compute (pipeline fill and
//                drain, optimizer, validation, ReportStep, waiting for the
//                grant). m * (F + B + W) is the busiest rank's floor (one
//                chunk per rank, as in every schedule listed above).
//   post / sync  wall of the synchronous row over wall of the post row of the
//                same schedule, as a speed-up (+x% means post is faster).
//   bubble       per stage 1 - busy / step_seconds (measured) against the
//                simulator's idle / makespan under the measured costs
//                (predicted); |Δ| is on the medians.
//   overhead     (idle - comm) / step_seconds, idle = step - Σ action
//                durations, comm = time blocked in receives plus the sends
//                drained after the last action: the time a rank neither
//                computed nor waited for a peer (data sampling, posting
//                receives, bookkeeping between actions).
//   CPU / wall   both workers' CPU seconds (/proc) over a job's wall time,
//                setup included: 2.00 would be two free cores never idle. On
//                a shared machine it shows whether the ranks really ran in
//                parallel; when they share one core, a rank's bubble is the
//                other's compute time and every schedule takes the same time.
// The job asks for 1000 steps and is cancelled once enough summaries are in,
// so no evaluation pass (every steps/10 steps) falls inside the window.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/job_state.h"
#include "api/time_proto.h"
#include "bench/process_cpu.h"
#include "common/read_file.h"
#include "testing/subprocess.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::bench {
namespace {

using v1::StepSummary;

struct Flags {
  int steps = 12;
  int warmup = 3;
  int rounds = 1;
  /// A job whose workers' CPU / wall is below this (in cores) ran on a busy
  /// machine: it is dropped and run again, up to `retries` times. 0: keep
  /// every job.
  double min_worker_cores = 0;
  int retries = 5;
  std::vector<std::string> schedules = {"1f1b", "zb-h1", "zb-h2", "zb-2p", "zb-auto"};
  std::vector<v1::ValidationMode> validations = {v1::VALIDATION_MODE_SYNCHRONOUS,
                                                 v1::VALIDATION_MODE_POST};
  std::string json;
  int layers = 4, hidden = 256, heads = 4, seq_len = 128;
  int microbatch_size = 4, microbatches = 8;
  std::string db = ":memory:";
  /// The workers' --cache-dir (the tokenized corpus, kept between runs).
  std::string cache_dir = "/tmp/zbpp-pipeline-bench-cache";
  std::string coordinator = ZBPP_COORDINATOR_BINARY;
  std::string worker = ZBPP_WORKER_BINARY;
};

/// "synchronous", "post", "auto" as in --validation.
std::string ModeName(v1::ValidationMode mode) {
  switch (mode) {
    case v1::VALIDATION_MODE_SYNCHRONOUS:
      return "synchronous";
    case v1::VALIDATION_MODE_POST:
      return "post";
    default:
      return "auto";
  }
}

bool ParseValidations(const std::string& list, std::vector<v1::ValidationMode>* out) {
  out->clear();
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    if (name == "synchronous" || name == "sync") {
      out->push_back(v1::VALIDATION_MODE_SYNCHRONOUS);
    } else if (name == "post") {
      out->push_back(v1::VALIDATION_MODE_POST);
    } else if (name == "auto") {
      out->push_back(v1::VALIDATION_MODE_AUTO);
    } else {
      return false;
    }
  }
  return !out->empty();
}

bool ParseFlags(int argc, char** argv, Flags* flags) {
  const std::map<std::string, int*> ints = {
      {"--steps", &flags->steps},
      {"--warmup", &flags->warmup},
      {"--rounds", &flags->rounds},
      {"--retries", &flags->retries},
      {"--layers", &flags->layers},
      {"--hidden", &flags->hidden},
      {"--heads", &flags->heads},
      {"--seq-len", &flags->seq_len},
      {"--microbatch-size", &flags->microbatch_size},
      {"--microbatches", &flags->microbatches}};
  const std::map<std::string, std::string*> strings = {
      {"--json", &flags->json},
      {"--db", &flags->db},
      {"--cache-dir", &flags->cache_dir},
      {"--coordinator", &flags->coordinator},
      {"--worker", &flags->worker}};
  for (int i = 1; i < argc; ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    bool ok = true;
    if (auto it = ints.find(kv.first); it != ints.end()) {
      ok = absl::SimpleAtoi(kv.second, it->second) && *it->second >= (kv.first == "--warmup" ? 0 : 1);
    } else if (auto it = strings.find(kv.first); it != strings.end()) {
      *it->second = kv.second;
    } else if (kv.first == "--schedules") {
      flags->schedules = absl::StrSplit(kv.second, ',', absl::SkipEmpty());
      ok = !flags->schedules.empty();
    } else if (kv.first == "--min-worker-cores") {
      ok = absl::SimpleAtod(kv.second, &flags->min_worker_cores) &&
           flags->min_worker_cores >= 0;
    } else if (kv.first == "--validation") {
      ok = ParseValidations(kv.second, &flags->validations);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "pipeline_bench: bad flag %s\n", argv[i]);
      return false;
    }
  }
  return true;
}

/// One row of the tables: a schedule under one validation mode.
struct Variant {
  std::string schedule;
  v1::ValidationMode validation = v1::VALIDATION_MODE_SYNCHRONOUS;
  std::string Label() const { return absl::StrCat(schedule, " / ", ModeName(validation)); }
};

/// The job every variant runs: only schedule.name and validation differ. No
/// max_grad_norm: no step is clipped, so POST never rolls back.
v1::JobSpec Spec(const Flags& flags, const Variant& variant) {
  const std::string& schedule = variant.schedule;
  v1::JobSpec spec;
  spec.set_name(absl::StrCat("pipeline-bench-", schedule, "-", ModeName(variant.validation)));
  v1::ModelSpec* m = spec.mutable_model();
  m->set_architecture("gpt");
  m->set_layers(flags.layers);
  m->set_hidden(flags.hidden);
  m->set_heads(flags.heads);
  m->set_vocab(256);
  m->set_seq_len(flags.seq_len);
  spec.mutable_dataset()->set_builtin("bible-kjv");
  v1::PipelineSpec* p = spec.mutable_pipeline();
  p->set_stages(2);
  p->set_microbatches(flags.microbatches);
  p->set_microbatch_size(flags.microbatch_size);
  spec.mutable_schedule()->set_name(schedule);
  spec.mutable_schedule()->mutable_resolve()->set_disabled(true);
  spec.mutable_optimizer()->set_learning_rate(1e-3);
  spec.set_validation(variant.validation);
  spec.set_steps(1000);
  spec.set_seed(1234);
  return spec;
}

/// What one job produced.
struct JobRun {
  std::map<int64_t, StepSummary> steps;
  /// ValidationOutcome events by step (POST: each arrives with the next
  /// step's report, so the last step's is usually missing).
  std::map<int64_t, v1::ValidationOutcome> validations;
  /// The validation mode of every schedule version published.
  std::vector<v1::ValidationMode> version_modes;
  /// GetJob after the job ended: rollbacks_total, skipped_steps_total.
  v1::Job final_job;
};

/// Submits `spec`, watches it until `wanted` step summaries arrived, then
/// cancels it and waits for the end.
absl::StatusOr<JobRun> RunJob(v1::JobService::Stub& stub, const v1::JobSpec& spec, int wanted) {
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = spec;
  v1::Job job;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Status st = stub.SubmitJob(&context, submit, &job);
    if (!st.ok()) return absl::UnavailableError(absl::StrCat("SubmitJob: ", st.error_message()));
  }
  JobRun run;
  std::map<int64_t, StepSummary>& steps = run.steps;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(3));
  v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub.WatchJob(&context, watch);
  v1::JobEvent event;
  bool cancelled = false;
  std::string ended;
  while (reader->Read(&event)) {
    if (event.has_step()) steps[event.step().step()] = event.step();
    if (event.has_validation()) run.validations[event.validation().step()] = event.validation();
    if (event.has_schedule_change()) {
      run.version_modes.push_back(event.schedule_change().validation());
    }
    if (event.has_state_change()) {
      const v1::JobState s = event.state_change().new_state();
      if (IsTerminal(s)) {
        ended = absl::StrCat(v1::JobState_Name(s), " ", event.state_change().message());
      }
    }
    if (!cancelled && static_cast<int>(steps.size()) >= wanted) {
      cancelled = true;
      v1::CancelJobRequest cancel;
      cancel.set_job_id(job.id());
      cancel.set_reason("pipeline_bench: enough steps");
      v1::Job out;
      grpc::ClientContext cancel_context;
      cancel_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      stub.CancelJob(&cancel_context, cancel, &out);
    }
  }
  reader->Finish();
  if (static_cast<int>(steps.size()) < wanted) {
    return absl::InternalError(absl::StrCat(spec.schedule().name(), ": ", steps.size(), " of ",
                                            wanted, " steps, job ended ", ended));
  }
  v1::GetJobRequest get;
  get.set_job_id(job.id());
  get.set_view(v1::JOB_VIEW_BASIC);
  grpc::ClientContext get_context;
  get_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (grpc::Status st = stub.GetJob(&get_context, get, &run.final_job); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("GetJob: ", st.error_message()));
  }
  return run;
}

/// Waits until every registered worker heartbeats IDLE. A job submitted
/// while the workers still wind down the cancelled one stalls: the worker
/// queues the new assignment but drops its StepGrant (control_state.cc
/// Apply), and the coordinator never repeats it.
absl::Status WaitIdle(v1::WorkerService::Stub& stub, int workers) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    v1::ListWorkersRequest request;
    v1::ListWorkersResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (stub.ListWorkers(&context, request, &response).ok()) {
      int idle = 0;
      for (const v1::Worker& w : response.workers()) {
        idle += w.phase() == v1::WORKER_PHASE_IDLE && w.job_id().empty();
      }
      if (idle >= workers) return absl::OkStatus();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return absl::DeadlineExceededError("workers not idle after 60 s");
}

double Median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Per-stage medians over the measured steps of one schedule.
struct StageRow {
  double f = 0, b = 0, w = 0, measured = 0, predicted = 0, idle = 0, comm = 0, overhead = 0;
  double worst_step_diff = 0;  ///< Max over steps of |measured - predicted|.
};

/// Samples of one variant, pooled over rounds.
struct Samples {
  std::vector<double> step, wall, gap, measured, predicted;
  /// Per job: both workers' CPU seconds over the job's wall seconds (2 when
  /// each had a free core and never idled; ~1 when they shared one core).
  std::vector<double> worker_cores;
  std::map<int, std::map<std::string, std::vector<double>>> by_stage;
  std::vector<StepSummary> raw;
  /// Summed over jobs: Job.rollbacks_total, skipped_steps_total,
  /// clipped_steps_total.
  int64_t rollbacks = 0, skipped = 0, clipped = 0;
  /// Validation outcomes of measured steps: all of them, those committed
  /// (neither clipped nor skipped) and those in the requested mode.
  int validated = 0, committed = 0, in_mode = 0;
  /// Schedule versions whose validation mode is not the requested one (AUTO
  /// excepted).
  int versions_in_other_mode = 0;
  /// Jobs run on a busy machine and run again (--min-worker-cores).
  int dropped_jobs = 0;

  /// Adds the steps >= warmup; a wall sample needs the previous step too.
  void Add(const JobRun& run, int warmup, int microbatches, v1::ValidationMode mode) {
    const std::map<int64_t, StepSummary>& steps = run.steps;
    rollbacks += run.final_job.rollbacks_total();
    skipped += run.final_job.skipped_steps_total();
    clipped += run.final_job.clipped_steps_total();
    for (v1::ValidationMode m : run.version_modes) {
      versions_in_other_mode += mode != v1::VALIDATION_MODE_AUTO && m != mode;
    }
    for (const auto& [k, v] : run.validations) {
      if (k < warmup) continue;
      ++validated;
      committed += v.decision() == v1::VALIDATION_DECISION_COMMITTED;
      in_mode += v.mode() == mode;
    }
    for (const auto& [k, s] : steps) {
      if (k < warmup) continue;
      raw.push_back(s);
      step.push_back(s.step_seconds());
      measured.push_back(s.measured_bubble_rate());
      predicted.push_back(s.predicted_bubble_rate());
      double busiest = 0;  // Max over stages of m * (F + B + W).
      for (const v1::StageStepStats& st : s.stages()) {
        busiest = std::max(busiest,
                           microbatches * (st.f_seconds() + st.b_seconds() + st.w_seconds()));
      }
      if (auto prev = steps.find(k - 1); prev != steps.end()) {
        const double w = absl::ToDoubleSeconds(FromTimestamp(s.complete_time()) -
                                               FromTimestamp(prev->second.complete_time()));
        wall.push_back(w);
        gap.push_back(w - busiest);
      }
      for (const v1::StageStepStats& st : s.stages()) {
        auto& m = by_stage[st.stage()];
        m["f"].push_back(st.f_seconds());
        m["b"].push_back(st.b_seconds());
        m["w"].push_back(st.w_seconds());
        m["measured"].push_back(st.measured_bubble_rate());
        m["predicted"].push_back(st.predicted_bubble_rate());
        m["diff"].push_back(std::abs(st.measured_bubble_rate() - st.predicted_bubble_rate()));
        m["idle"].push_back(st.idle_seconds());
        m["comm"].push_back(st.comm_seconds());
        m["overhead"].push_back((st.idle_seconds() - st.comm_seconds()) / s.step_seconds());
      }
    }
  }

  StageRow Row(int stage) const {
    const auto& m = by_stage.at(stage);
    StageRow r;
    r.f = Median(m.at("f"));
    r.b = Median(m.at("b"));
    r.w = Median(m.at("w"));
    r.measured = Median(m.at("measured"));
    r.predicted = Median(m.at("predicted"));
    r.idle = Median(m.at("idle"));
    r.comm = Median(m.at("comm"));
    r.overhead = Median(m.at("overhead"));
    r.worst_step_diff = *std::max_element(m.at("diff").begin(), m.at("diff").end());
    return r;
  }
};

const char* Verdict(bool ok) { return ok ? "meets" : "**misses**"; }

/// "+x.x%": how much faster `wall` is than `base` (base / wall - 1); "-"
/// without a base.
std::string SpeedUp(double base, double wall) {
  if (!(base > 0) || !(wall > 0)) return "-";
  return absl::StrFormat("%+.1f%%", 100 * (base / wall - 1));
}

void Print(const Flags& flags, const std::vector<Variant>& order,
           const std::map<std::string, Samples>& all) {
  const double tokens =
      double(flags.microbatches) * flags.microbatch_size * flags.seq_len;
  std::printf(
      "\nmodel: layers %d, hidden %d, heads %d, seq_len %d, vocab 256; p=2, m=%d, b=%d "
      "(%.0f tokens/step); %d measured steps x %d round(s) after %d warm-up; no clipping\n\n",
      flags.layers, flags.hidden, flags.heads, flags.seq_len, flags.microbatches,
      flags.microbatch_size, tokens, flags.steps, flags.rounds, flags.warmup);
  // The baseline: 1F1B with the synchronous validation every run so far used.
  const std::string base_label = Variant{"1f1b", v1::VALIDATION_MODE_SYNCHRONOUS}.Label();
  const Samples* base = all.count(base_label) ? &all.at(base_label) : nullptr;
  const double base_step = base ? Median(base->step) : 0;
  const double base_wall = base ? Median(base->wall) : 0;
  // Wall of the same schedule's synchronous row, for post / sync.
  auto sync_wall = [&](const Variant& v) {
    const std::string label = Variant{v.schedule, v1::VALIDATION_MODE_SYNCHRONOUS}.Label();
    return all.count(label) ? Median(all.at(label).wall) : 0.0;
  };
  std::printf(
      "| schedule / validation | step s | wall s | gap ms | tokens/s (step) | tokens/s (wall) | "
      "vs 1F1B sync (step) | vs 1F1B sync (wall) | post / sync (wall) | bubble measured | "
      "bubble predicted | workers' CPU / wall |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Variant& v : order) {
    const Samples& s = all.at(v.Label());
    const double step = Median(s.step), wall = Median(s.wall);
    const bool post = v.validation == v1::VALIDATION_MODE_POST;
    std::printf("| %s | %.3f | %.3f | %.1f | %.0f | %.0f | %s | %s | %s | %.3f | %.3f | %.2f |\n",
                v.Label().c_str(), step, wall, 1e3 * Median(s.gap), tokens / step, tokens / wall,
                SpeedUp(base_step, step).c_str(), SpeedUp(base_wall, wall).c_str(),
                post ? SpeedUp(sync_wall(v), wall).c_str() : "-", Median(s.measured),
                Median(s.predicted), Median(s.worker_cores));
  }
  std::printf(
      "\n| schedule / validation | versions in another mode | measured steps validated | "
      "committed | in the requested mode | rollbacks_total | skipped_steps_total | "
      "clipped_steps_total | jobs run again (busy machine) |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool clean = true;
  for (const Variant& v : order) {
    const Samples& s = all.at(v.Label());
    clean = clean && s.rollbacks == 0 && s.skipped == 0 && s.clipped == 0 &&
            s.committed == s.validated && s.versions_in_other_mode == 0 &&
            (v.validation == v1::VALIDATION_MODE_AUTO || s.in_mode == s.validated);
    std::printf("| %s | %d | %d | %d | %d | %lld | %lld | %lld | %d |\n", v.Label().c_str(),
                s.versions_in_other_mode, s.validated, s.committed, s.in_mode,
                static_cast<long long>(s.rollbacks), static_cast<long long>(s.skipped),
                static_cast<long long>(s.clipped), s.dropped_jobs);
  }
  std::printf(
      "\n| schedule / validation | stage | F ms | B ms | W ms | bubble measured | bubble predicted "
      "| |Δ| (medians) | max |Δ| (any step) | idle ms | comm ms | overhead (idle-comm)/step |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<std::string> verdicts;
  double worst_overhead = 0;
  for (const Variant& v : order) {
    const Samples& s = all.at(v.Label());
    double worst = 0;
    for (const auto& [stage, unused] : s.by_stage) {
      const StageRow r = s.Row(stage);
      worst = std::max(worst, std::abs(r.measured - r.predicted));
      worst_overhead = std::max(worst_overhead, r.overhead);
      std::printf("| %s | %d | %.1f | %.1f | %.1f | %.3f | %.3f | %.3f | %.3f | %.1f | %.1f | "
                  "%.2f%% |\n",
                  v.Label().c_str(), stage, 1e3 * r.f, 1e3 * r.b, 1e3 * r.w, r.measured,
                  r.predicted, std::abs(r.measured - r.predicted), r.worst_step_diff,
                  1e3 * r.idle, 1e3 * r.comm, 100 * r.overhead);
    }
    verdicts.push_back(
        absl::StrFormat("%s max |Δ| %.3f %s", v.Label(), worst, Verdict(worst <= 0.03)));
  }
  std::printf("\ntargets:\n");
  std::printf("- measured bubble within 0.03 of predicted (per stage, medians): %s\n",
              absl::StrJoin(verdicts, "; ").c_str());
  for (v1::ValidationMode mode : flags.validations) {
    const std::string label = Variant{"zb-2p", mode}.Label();
    if (!all.count(label) || base_wall <= 0) continue;
    const double by_step = base_step / Median(all.at(label).step) - 1;
    const double by_wall = base_wall / Median(all.at(label).wall) - 1;
    std::printf("- %s >= 8%% faster than 1f1b / synchronous (theoretical 1F1B bubble 1/9 = "
                "11.1%%): %+.1f%% by step_seconds (%s), %+.1f%% by wall (%s)\n",
                label.c_str(), 100 * by_step, Verdict(by_step >= 0.08), 100 * by_wall,
                Verdict(by_wall >= 0.08));
  }
  std::vector<std::string> gains;
  for (const Variant& v : order) {
    if (v.validation != v1::VALIDATION_MODE_POST || sync_wall(v) <= 0) continue;
    const double wall = Median(all.at(v.Label()).wall);
    gains.push_back(absl::StrCat(v.schedule, " ", SpeedUp(sync_wall(v), wall)));
  }
  if (!gains.empty()) {
    std::printf("- post-update validation vs synchronous, by wall (paper §4: ~8%%): %s\n",
                absl::StrJoin(gains, "; ").c_str());
  }
  std::printf("- no clipping, so no rollback, skip or clip in any job: %s\n",
              clean ? "none (meets)" : "**some** (see the validation table)");
  std::printf("- executor overhead < 2%% of the step: worst stage median %.2f%% (%s)\n",
              100 * worst_overhead, Verdict(worst_overhead < 0.02));
}

/// Writes every measured StepSummary, by variant label, as JSON.
void WriteJson(const std::string& path, const std::vector<Variant>& order,
               const std::map<std::string, Samples>& all) {
  std::ofstream out(path);
  out << "{\n";
  for (size_t i = 0; i < order.size(); ++i) {
    out << "  \"" << order[i].Label() << "\": [";
    const std::vector<StepSummary>& raw = all.at(order[i].Label()).raw;
    for (size_t k = 0; k < raw.size(); ++k) {
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(raw[k], &json);
      out << (k ? ",\n    " : "\n    ") << json;
    }
    out << "\n  ]" << (i + 1 < order.size() ? "," : "") << "\n";
  }
  out << "}\n";
}

int Run(const Flags& flags) {
  absl::StatusOr<ctltest::RunningCoordinator> coordinator =
      ctltest::StartCoordinator(flags.coordinator, {"--db", flags.db});
  if (!coordinator.ok()) {
    std::fprintf(stderr, "%s\n", coordinator.status().ToString().c_str());
    return 1;
  }
  // The workers' --data-root (required; the builtin corpus is not
  // confined by it): their cache directory, which must exist.
  const std::string data_root = std::filesystem::absolute(flags.cache_dir);
  std::filesystem::create_directories(data_root);
  std::vector<std::unique_ptr<ctltest::BackgroundProcess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(ctltest::BackgroundProcess::Start(
        {flags.worker, "--coordinator", coordinator->grpc_address, "--cache-dir",
         flags.cache_dir, "--data-root", data_root, "--threads", "1", "--name",
         absl::StrCat("bench-", i)}));
    std::optional<std::string> line =
        workers.back() ? workers.back()->ReadLine(absl::Seconds(60)) : std::nullopt;
    if (!line.has_value() || line->find("registered") == std::string::npos) {
      std::fprintf(stderr, "pipeline_bench: worker %d did not register\n", i);
      return 1;
    }
  }
  std::printf("coordinator %s (--db %s), 2 workers (--threads 1), %ld online cores\n",
              coordinator->grpc_address.c_str(), flags.db.c_str(),
              sysconf(_SC_NPROCESSORS_ONLN));
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(coordinator->grpc_address, grpc::InsecureChannelCredentials());
  auto stub = v1::JobService::NewStub(channel);
  auto worker_stub = v1::WorkerService::NewStub(channel);
  std::map<std::string, Samples> all;
  std::vector<Variant> order;
  for (const std::string& name : flags.schedules) {
    for (v1::ValidationMode mode : flags.validations) order.push_back({name, mode});
  }
  const int modes = static_cast<int>(flags.validations.size());
  for (int round = 0; round < flags.rounds; ++round) {
    for (size_t i = 0; i < order.size(); ++i) {
      // Odd rounds run each schedule's modes in reverse order.
      const size_t first = i - i % modes;
      const Variant& variant = round % 2 ? order[first + modes - 1 - i % modes] : order[i];
      for (int attempt = 0;; ++attempt) {
        if (absl::Status st = WaitIdle(*worker_stub, 2); !st.ok()) {
          std::fprintf(stderr, "pipeline_bench: %s\n", st.ToString().c_str());
          return 1;
        }
        const auto start = std::chrono::steady_clock::now();
        double cpu = 0;
        for (const auto& w : workers) cpu -= ProcessCpuSeconds(w->pid());
        // One step more than measured: with POST a step's validation outcome
        // comes with the next step's reports.
        absl::StatusOr<JobRun> run =
            RunJob(*stub, Spec(flags, variant), flags.warmup + flags.steps + 1);
        if (!run.ok()) {
          std::fprintf(stderr, "pipeline_bench: %s\n", run.status().ToString().c_str());
          return 1;
        }
        for (const auto& w : workers) cpu += ProcessCpuSeconds(w->pid());
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (cpu / seconds < flags.min_worker_cores && attempt < flags.retries) {
          std::fprintf(stderr, "round %d %s: workers' CPU / wall %.2f < %.2f, again\n", round,
                       variant.Label().c_str(), cpu / seconds, flags.min_worker_cores);
          ++all[variant.Label()].dropped_jobs;
          std::this_thread::sleep_for(std::chrono::seconds(10));
          continue;
        }
        // Only the first warm-up + measured steps count.
        run->steps.erase(run->steps.lower_bound(flags.warmup + flags.steps), run->steps.end());
        run->validations.erase(run->validations.lower_bound(flags.warmup + flags.steps),
                               run->validations.end());
        Samples& samples = all[variant.Label()];
        samples.Add(*run, flags.warmup, flags.microbatches, variant.validation);
        samples.worker_cores.push_back(cpu / seconds);
        std::fprintf(stderr,
                     "round %d %s: %zu steps in %.1f s, workers' CPU %.1f s; rollbacks %lld, "
                     "skipped %lld\n",
                     round, variant.Label().c_str(), run->steps.size(), seconds, cpu,
                     static_cast<long long>(run->final_job.rollbacks_total()),
                     static_cast<long long>(run->final_job.skipped_steps_total()));
        break;
      }
    }
  }
  Print(flags, order, all);
  if (!flags.json.empty()) WriteJson(flags.json, order, all);
  return 0;
}

}  // namespace
}  // namespace zbpp::bench

int main(int argc, char** argv) {
  zbpp::bench::Flags flags;
  if (!zbpp::bench::ParseFlags(argc, argv, &flags)) return 2;
  return zbpp::bench::Run(flags);
}
