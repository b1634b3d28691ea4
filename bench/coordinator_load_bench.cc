// Load benchmark of the coordinator (bench/results/coordinator_load.md): 256 fake workers
// heartbeat and report steps at 10 Hz against one zbpp-coordinator; then the
// re-solve + publish path of the core for p = 32, m = 128, timed directly.
//
//   coordinator_load_bench [--seconds=20] [--jobs=8] [--stages=32]
//       [--microbatches=128] [--hz=10] [--probe-steps=32]
//       [--coordinator=PATH] [--db=FILE|:memory:]
//
// Phase 1 (load) runs the real daemon as a child process (--db on a temp
// file by default, as deployed; --db=:memory: to take SQLite's fsyncs out),
// so its CPU time is its own (/proc/PID/stat) and not mixed with the
// clients'. The fake workers (LoadWorker, coordinator_load_worker.h) live in
// this process: one channel each (a local subchannel pool, so one TCP
// connection per worker as with real worker processes), the callback API for
// the Session streams and ReportStep, and one driver thread that ticks every
// 1/(10·hz) s and serves a tenth of the workers per tick, so 256 workers cost
// a few threads on a 2-core machine instead of 512. Each job has rank 2 1.5x
// slower than the analytic model, so the coordinator re-solves (window 8
// steps, the default) and publishes a shorter schedule early in the run.
//
// Phase 2 (probe) builds a Coordinator in this process over SQLite
// :memory: with no gRPC, drives one p x m job with direct calls, re-solves
// every step (window 1) and moves the slow rank every 8 steps so that some
// re-solves publish. It times the ReportStep call that completes each step:
// step summary + re-solve (solver + simulator) + publish (version stored,
// queued on p Session outboxes) + cost snapshot and re-solve record.
//
// Heartbeats have no reply on the Session stream: their client-side latency
// here is Write -> OnWriteDone (handed to the transport), which shows flow
// control and client threads starving, not the coordinator's handling.

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/coordinator_load_worker.h"
#include "bench/latencies.h"
#include "bench/process_cpu.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/store/sqlite_store.h"
#include "testing/subprocess.h"
#include "testing/fake_pipeline.h"
#include "testing/fake_worker.h"
#include "zbpp/v1/job.grpc.pb.h"

namespace zbpp::coordinator {
namespace {

using bench::BuildReport;
using bench::Latencies;
using bench::LoadStats;
using bench::LoadWorker;
using bench::PrintLatencyHeader;
using bench::ProcessCpuSeconds;
using bench::SimulateVersion;
using bench::TimingCache;
using bench::VersionTimings;
using testing::TestSpec;
using testing::TrueCosts;

struct Flags {
  double seconds = 20;
  int jobs = 8;
  int stages = 32;
  int microbatches = 128;
  double hz = 10;
  int probe_steps = 32;
  std::string coordinator = ZBPP_COORDINATOR_BINARY;
  /// The daemon's --db; empty: a file in a new temp directory.
  std::string db;
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    bool ok = true;
    if (kv.first == "--seconds") {
      ok = absl::SimpleAtod(kv.second, &flags->seconds) && flags->seconds > 0;
    } else if (kv.first == "--jobs") {
      ok = absl::SimpleAtoi(kv.second, &flags->jobs) && flags->jobs > 0;
    } else if (kv.first == "--stages") {
      ok = absl::SimpleAtoi(kv.second, &flags->stages) && flags->stages > 2;
    } else if (kv.first == "--microbatches") {
      ok = absl::SimpleAtoi(kv.second, &flags->microbatches) &&
           flags->microbatches > 0;
    } else if (kv.first == "--hz") {
      ok = absl::SimpleAtod(kv.second, &flags->hz) && flags->hz > 0;
    } else if (kv.first == "--probe-steps") {
      ok = absl::SimpleAtoi(kv.second, &flags->probe_steps) &&
           flags->probe_steps > 0;
    } else if (kv.first == "--db") {
      flags->db = kv.second;
    } else if (kv.first == "--coordinator") {
      flags->coordinator = kv.second;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "coordinator_load_bench: bad flag %s\n", argv[i]);
      return false;
    }
  }
  return true;
}

// ------------------------------------------------------------ Phase 1: load

double SelfCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

int RunLoad(const Flags& flags) {
  char dir_template[] = "/tmp/zbpp-load-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string db =
      flags.db.empty() ? absl::StrCat(dir, "/coordinator.db") : flags.db;
  absl::StatusOr<ctltest::RunningCoordinator> daemon =
      ctltest::StartCoordinator(flags.coordinator, {"--db", db});
  if (!daemon.ok()) {
    std::fprintf(stderr, "%s\n", daemon.status().ToString().c_str());
    return 1;
  }
  const std::string address = daemon->grpc_address;
  const pid_t pid = daemon->process->pid();

  const int workers_total = flags.jobs * flags.stages;
  const zbpp::v1::JobSpec spec = TestSpec(flags.stages, flags.microbatches,
                                          "zb-1p", 1000000, /*window=*/8);
  TimingCache timings(TrueCosts(spec, 2, 1.5));
  LoadStats stats;

  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto jobs = zbpp::v1::JobService::NewStub(grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args));
  std::vector<std::string> job_ids;
  for (int j = 0; j < flags.jobs; ++j) {
    zbpp::v1::SubmitJobRequest submit;
    *submit.mutable_spec() = spec;
    submit.mutable_spec()->set_name(absl::StrCat("load-", j));
    zbpp::v1::Job job;
    grpc::ClientContext context;
    grpc::Status s = jobs->SubmitJob(&context, submit, &job);
    if (!s.ok()) {
      std::fprintf(stderr, "SubmitJob: %s\n", s.error_message().c_str());
      return 1;
    }
    job_ids.push_back(job.id());
  }

  std::vector<std::unique_ptr<LoadWorker>> workers;
  for (int i = 0; i < workers_total; ++i) {
    workers.push_back(std::make_unique<LoadWorker>(
        i,
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                  args),
        &stats, &timings));
  }
  const absl::Time setup_start = absl::Now();
  for (auto& w : workers) {
    if (absl::Status s = w->Register(); !s.ok()) {
      std::fprintf(stderr, "RegisterWorker: %s\n", s.ToString().c_str());
      return 1;
    }
  }

  // The driver: every tick serves workers with index % slots == tick %
  // slots, so each worker ticks at `hz`.
  constexpr int kSlots = 10;
  const absl::Duration tick = absl::Seconds(1.0 / (flags.hz * kSlots));
  absl::Notification stop;
  std::atomic<int64_t> late_ticks{0};
  std::thread driver([&] {
    absl::Time next = absl::Now();
    for (int64_t n = 0; !stop.HasBeenNotified(); ++n) {
      for (size_t i = n % kSlots; i < workers.size(); i += kSlots) {
        workers[i]->Tick();
      }
      next += tick;
      const absl::Time now = absl::Now();
      if (now > next) {
        ++late_ticks;
        next = now;
      } else {
        absl::SleepFor(next - now);
      }
    }
  });

  // Warm-up: every worker assigned and past its first step.
  const absl::Time warm_deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < warm_deadline &&
         !std::all_of(workers.begin(), workers.end(),
                      [](auto& w) { return w->running(); })) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const double setup_seconds = absl::ToDoubleSeconds(absl::Now() - setup_start);
  absl::SleepFor(absl::Seconds(1));

  const int64_t ok0 = stats.reports_ok, hb0 = stats.heartbeats;
  const double cpu0 = ProcessCpuSeconds(pid), self0 = SelfCpuSeconds();
  late_ticks = 0;
  const absl::Time t0 = absl::Now();
  stats.measuring = true;
  absl::SleepFor(absl::Seconds(flags.seconds));
  stats.measuring = false;
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu = ProcessCpuSeconds(pid) - cpu0;
  const double self = SelfCpuSeconds() - self0;
  const int64_t reports = stats.reports_ok - ok0;
  const int64_t heartbeats = stats.heartbeats - hb0;

  stop.Notify();
  driver.join();
  for (auto& w : workers) w->Stop();
  for (auto& w : workers) w->WaitDone();
  const absl::Time drain = absl::Now() + absl::Seconds(20);
  while (stats.reports_in_flight > 0 && absl::Now() < drain) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  daemon->process.reset();  // SIGTERM; waits for the exit

  std::printf(
      "== Load: %d workers (%d jobs x p=%d, m=%d, ZB-1p, rank 2 1.5x slow), "
      "heartbeat + step report at %.0f Hz each, %.1f s measured ==\n",
      workers_total, flags.jobs, flags.stages, flags.microbatches, flags.hz,
      wall);
  std::printf(
      "coordinator: %s, --db %s; setup (register -> all "
      "running) %.2f s\n",
      flags.coordinator.c_str(), db.c_str(), setup_seconds);
  PrintLatencyHeader();
  std::printf("%s\n", stats.report.Row("ReportStep RPC (client)").c_str());
  std::printf("%s\n", stats.heartbeat_write
                          .Row("Session heartbeat write (client, to transport)")
                          .c_str());
  std::printf("%s\n",
              stats.register_worker.Row("RegisterWorker RPC (setup, serial)")
                  .c_str());
  std::printf("%s\n",
              stats.version_delivery
                  .Row("new version: publish_time -> worker has it")
                  .c_str());
  std::printf(
      "step reports: %lld ok (%.0f/s, target %.0f/s), %lld failed; "
      "heartbeats %lld (%.0f/s), %lld skipped (write in flight); driver late "
      "ticks %lld\n",
      static_cast<long long>(reports), reports / wall, workers_total * flags.hz,
      static_cast<long long>(stats.reports_failed.load()),
      static_cast<long long>(heartbeats), heartbeats / wall,
      static_cast<long long>(stats.heartbeats_skipped.load()),
      static_cast<long long>(late_ticks.load()));
  {
    absl::MutexLock lock(&stats.mu);
    for (const auto& [what, n] : stats.failures) {
      std::printf("  failure x%lld: %s\n", static_cast<long long>(n),
                  what.c_str());
    }
  }
  std::printf(
      "CPU over the measured window: coordinator %.2f s (%.0f%% of one core), "
      "fake workers (this process) %.2f s (%.0f%%), of %ld cores\n",
      cpu, 100 * cpu / wall, self, 100 * self / wall,
      sysconf(_SC_NPROCESSORS_ONLN));

  // The coordinator's own re-solve log, from its database.
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      absl::FailedPreconditionError("--db=:memory: left no log to read");
  if (db != ":memory:") store = SqliteStore::Create({db});
  if (!store.ok()) {
    std::printf("re-solve log: %s\n", store.status().ToString().c_str());
  } else {
    Latencies solve_all, solve_published;
    int records = 0, published = 0;
    for (const std::string& id : job_ids) {
      auto list = (*store)->ListResolveRecords(id);
      if (!list.ok()) continue;
      for (const ResolveRecord& r : *list) {
        ++records;
        solve_all.Add(r.solve_seconds);
        if (r.published) {
          ++published;
          solve_published.Add(r.solve_seconds);
        }
      }
    }
    std::printf("re-solves logged by the coordinator (whole run): %d, %d "
                "published\n",
                records, published);
    PrintLatencyHeader();
    std::printf("%s\n",
                solve_all.Row("ResolveRecord.solve_seconds (all)").c_str());
    std::printf("%s\n", solve_published
                            .Row("ResolveRecord.solve_seconds (published)")
                            .c_str());
  }
  std::printf("\n");
  return 0;
}

// ----------------------------------------------------------- Phase 2: probe

int RunProbe(const Flags& flags) {
  auto store = SqliteStore::Create({":memory:"});
  if (!store.ok()) return 1;
  Coordinator::Options options;
  options.store = store->get();
  options.heartbeat_timeout_seconds = 3600;
  auto core = Coordinator::Create(options);
  if (!core.ok() || !(*core)->Recover().ok()) return 1;

  const zbpp::v1::JobSpec spec = TestSpec(
      flags.stages, flags.microbatches, "zb-1p", 1000000, /*window=*/1);
  auto job = (*core)->SubmitJob(spec);
  if (!job.ok()) {
    std::fprintf(stderr, "SubmitJob: %s\n", job.status().ToString().c_str());
    return 1;
  }
  // Ranks driven by direct calls to the core (no gRPC).
  std::vector<testing::FakeWorker> ranks(flags.stages);
  for (int i = 0; i < flags.stages; ++i) {
    zbpp::v1::WorkerDescription d;
    d.set_address(absl::StrCat("10.0.0.", i, ":7000"));
    d.set_host("node");
    d.set_device_kind(zbpp::v1::DEVICE_KIND_CUDA);
    d.set_memory_bytes(uint64_t{80} << 30);
    ranks[i].id = (*core)->RegisterWorker(d)->worker_id();
    ranks[i].outbox = *(*core)->OpenSession(ranks[i].id, d.address());
  }
  for (auto& r : ranks) {
    r.Drain();
    zbpp::v1::Heartbeat hb;
    hb.set_phase(zbpp::v1::WORKER_PHASE_PREPARING);
    hb.set_job_id(r.assignment->job_id());
    hb.set_attempt(r.assignment->attempt());
    if (!(*core)->Heartbeat(r.id, hb).ok()) return 1;
  }
  // Calibration: every rank's profile (the assignment's costs), then grants.
  for (auto& r : ranks) {
    if (std::optional<zbpp::v1::ReportProfileRequest> profile = r.TakeProfile()) {
      if (absl::Status s = (*core)->ReportProfile(*profile); !s.ok()) {
        std::fprintf(stderr, "probe ReportProfile: %s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  // Ranks sorted by pipeline rank, so the last reporter of each step is
  // the same (the one whose ReportStep completes the step).
  std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) {
    return a.assignment->stage() < b.assignment->stage();
  });

  std::map<int64_t, double> completing_seconds;  // step -> seconds
  Latencies other;  // a ReportStep that does not complete its step
  std::map<std::pair<int64_t, int>, std::shared_ptr<const VersionTimings>>
      cache;
  for (int64_t step = 0; step < flags.probe_steps; ++step) {
    // The straggler moves every 8 steps, so the measured costs change and
    // some re-solves find a shorter schedule.
    const int slow = static_cast<int>((2 + 5 * (step / 8)) % flags.stages);
    for (auto& r : ranks) r.Drain();
    const zbpp::v1::ScheduleVersion version = ranks[0].VersionFor(step);
    auto& t = cache[{version.version(), slow}];
    if (t == nullptr) t = SimulateVersion(version, TrueCosts(spec, slow, 1.5));
    for (auto& r : ranks) {
      if (r.granted < step) {
        std::fprintf(stderr, "probe: step %lld not granted\n",
                     static_cast<long long>(step));
        return 1;
      }
      zbpp::v1::ReportStepRequest report =
          BuildReport(r.id, *r.assignment, step, version.version(), *t);
      const absl::Time start = absl::Now();
      absl::Status s = (*core)->ReportStep(report);
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      if (!s.ok()) {
        std::fprintf(stderr, "probe ReportStep: %s\n", s.ToString().c_str());
        return 1;
      }
      if (&r == &ranks.back()) {
        completing_seconds[step] = seconds;
      } else {
        other.Add(seconds);
      }
    }
  }

  Latencies published, not_published, solver;
  int n_published = 0;
  auto records = (*store)->ListResolveRecords(job->id());
  if (!records.ok()) return 1;
  for (const ResolveRecord& r : *records) {
    auto it = completing_seconds.find(r.step);
    if (it == completing_seconds.end()) continue;
    solver.Add(r.solve_seconds);
    if (r.published) {
      ++n_published;
      published.Add(it->second);
    } else {
      not_published.Add(it->second);
    }
  }
  std::printf(
      "== Re-solve + publish in the core: p=%d, m=%d, ZB-1p, window 1, %d "
      "steps, SQLite :memory:, no load ==\n",
      flags.stages, flags.microbatches, flags.probe_steps);
  std::printf("re-solves: %zu, published: %d\n", records->size(), n_published);
  PrintLatencyHeader();
  std::printf("%s\n",
              published.Row("step-completing ReportStep, published").c_str());
  std::printf(
      "%s\n",
      not_published.Row("step-completing ReportStep, not published").c_str());
  std::printf("%s\n", solver.Row("  of which solver (solve_seconds)").c_str());
  std::printf("%s\n", other.Row("any other ReportStep").c_str());
  return 0;
}

}  // namespace
}  // namespace zbpp::coordinator

int main(int argc, char** argv) {
  zbpp::coordinator::Flags flags;
  if (!zbpp::coordinator::ParseFlags(argc, argv, &flags)) return 2;
  std::printf("machine: %ld online cores\n\n", sysconf(_SC_NPROCESSORS_ONLN));
  if (int rc = zbpp::coordinator::RunLoad(flags); rc != 0) return rc;
  return zbpp::coordinator::RunProbe(flags);
}
