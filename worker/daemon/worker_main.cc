// zbpp-worker: the worker daemon, one per GPU (or per CPU core): flags,
// LibTorch threads, then WorkerServer (worker/daemon/worker_server.h: the
// worker's own gRPC server, registration and Session with the coordinator)
// and its training loop over assignments until SIGTERM.
//
//   zbpp-worker --coordinator HOST:PORT --data-root DIR... [--device cpu|cuda:N]
//               [--threads N] [--listen HOST:PORT] [--cache-dir DIR]
//               [--gloo-hostname H]
//               [--name NAME] [--memory-bytes N] [--comm-timeout SECONDS]
//               [--tls-ca F [--tls-cert F --tls-key F]] [--token-file F]
//               [--slow-stage S:FACTOR[@STEP]] [--inject-nan-step K]
//               [--synthetic-compute SCALE[:NOISE]]
//               [--nccl-shared-gpu-test-host-id ID]   (TEST-ONLY)
//               zbpp-worker --help
//
// The last two inject faults on purpose (demo, end-to-end tests): the
// worker holding stage S runs its passes FACTOR times slower from
// step STEP (default 0) on; the worker holding the last stage turns a
// gradient entry into NaN at step K.
//
// --synthetic-compute SCALE[:NOISE] is a benchmarking mode, not training
// (worker/runtime/synthetic_compute.h): every pass waits the time the job's
// cost model (the Assignment's schedule version's) gives it, times SCALE,
// with multiplicative noise NOISE in [0, 1), instead of computing; messages,
// the executor, validation and reports stay real, no gradient is produced
// (the optimizer moves nothing) and the loss is a constant.
//
// --data-root DIR (required, repeatable): the directories dataset files
// (text_file, tokens) may come from. A job spec names any path, so a worker
// that could open anything would hand a user every file its own user reads
// (a private key trains into weights that zbppctl export writes back out);
// confinement is therefore the default, and `--data-root /` is the explicit
// way to opt out.
//
// --token-file F: the coordinator's bearer token (its --token-file), sent on
// every call; without it a coordinator that has one refuses the worker.
//
// A CUDA worker registers its GPU's identity (GpuIdentity: the GPU's UUID)
// so that the coordinator can tell whether every worker of a job has a GPU of
// its own (JobSpec.transport; docs/training.md, "Transport").
// --nccl-shared-gpu-test-host-id ID is for tests only: it lets several
// workers share one GPU under NCCL by presenting each process to NCCL as a
// host of its own (ConfigureNcclForSharedGpuTests: NCCL_HOSTID=ID, sockets on
// loopback) and registers the worker with nccl_shared_gpu_test, without
// which the coordinator refuses NCCL on a shared GPU. Correct, never fast.

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/channel_credentials.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/tls_hint.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/daemon/attempt_runner.h"
#include "worker/daemon/worker_server.h"
#include "worker/runtime/device.h"

namespace zbpp::worker {
namespace {

constexpr char kUsage[] =
    "usage: zbpp-worker --coordinator HOST:PORT --data-root DIR... [--device cpu|cuda:N] "
    "[--threads N] [--listen HOST:PORT] [--cache-dir DIR] [--gloo-hostname H] "
    "[--name NAME] "
    "[--memory-bytes N] [--comm-timeout SECONDS] [--tls-ca F [--tls-cert F --tls-key F]] "
    "[--token-file F] [--slow-stage S:FACTOR[@STEP]] [--inject-nan-step K] "
    "[--synthetic-compute SCALE[:NOISE]] [--nccl-shared-gpu-test-host-id ID]; zbpp-worker --help";

constexpr char kHelp[] =
    "zbpp-worker: the worker daemon, one per GPU or CPU core. It registers with the\n"
    "coordinator, keeps its Session open and runs the assignments it gets.\n"
    "\n"
    "  --coordinator HOST:PORT   the coordinator (required)\n"
    "  --device cpu|cuda:N       where the passes run (default cpu); a CUDA worker\n"
    "                            registers its GPU's UUID, so that the coordinator\n"
    "                            can choose NCCL (job spec transport: auto|gloo|nccl)\n"
    "  --threads N               LibTorch intra-op threads (default 1)\n"
    "  --listen HOST:PORT        this worker's own gRPC server (default 127.0.0.1:0)\n"
    "  --cache-dir DIR           token cache of corpora (default ~/.cache/zbpp)\n"
    "  --data-root DIR           required, repeatable: open dataset files (text_file,\n"
    "                            tokens) only under these directories; --data-root /\n"
    "                            lets job specs name any file this user can read\n"
    "  --gloo-hostname H         the address Gloo binds and advertises\n"
    "  --name NAME               a name for people (e.g. the pod and GPU)\n"
    "  --memory-bytes N          memory the coordinator plans with (default: the device's)\n"
    "  --comm-timeout SECONDS    longest wait for a peer, the rendezvous or a grant\n"
    "                            (default 120; also NCCL's operation timeout)\n"
    "  --tls-ca F [--tls-cert F --tls-key F]   TLS to the coordinator\n"
    "  --token-file F            the coordinator's bearer token\n"
    "  --slow-stage S:FACTOR[@STEP]   fault injection: stage S runs FACTOR times slower\n"
    "  --inject-nan-step K       fault injection: the last stage's gradient turns NaN at K\n"
    "  --synthetic-compute SCALE[:NOISE]\n"
    "                            BENCHMARKING, not training: passes wait the job's cost\n"
    "                            model times SCALE (noise NOISE in [0, 1)) instead of\n"
    "                            computing; no gradients, constant loss\n"
    "  --nccl-shared-gpu-test-host-id ID\n"
    "                            TEST-ONLY: lets several workers share one GPU under\n"
    "                            NCCL (NCCL_HOSTID=ID, sockets on loopback,\n"
    "                            NCCL_IB_DISABLE=1); give each worker its own ID. Correct\n"
    "                            and ordered, never fast. Needs --device cuda:N.\n"
    "  --help                    this text\n";

struct Flags {
  // Everything but the device and the channel credentials, which Main
  // makes from `device` and `tls`.
  WorkerServer::Options server;
  std::string device = "cpu";
  int threads = 1;
  ClientTlsFiles tls;  // To the coordinator; all empty: plaintext.
  // --nccl-shared-gpu-test-host-id (TEST-ONLY); empty: not given.
  std::string nccl_shared_gpu_test_host_id;
};

// --slow-stage S:FACTOR[@STEP].
absl::Status ParseSlowStage(const std::string& value, FaultInjection& faults) {
  const auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slow-stage must be S:FACTOR[@STEP] (", why, "), got \"", value, "\""));
  };
  const size_t colon = value.find(':');
  if (colon == std::string::npos) return bad("no ':'");
  const size_t at = value.find('@', colon);
  const std::string factor = value.substr(colon + 1, at == std::string::npos ? at : at - colon - 1);
  if (!absl::SimpleAtoi(value.substr(0, colon), &faults.slow_stage) || faults.slow_stage < 0) {
    return bad("S is a stage >= 0");
  }
  if (!absl::SimpleAtod(factor, &faults.slow_factor) || !(faults.slow_factor >= 1) ||
      faults.slow_factor > 1000) {
    return bad("FACTOR is a number in [1, 1000]");
  }
  if (at != std::string::npos &&
      (!absl::SimpleAtoi(value.substr(at + 1), &faults.slow_from_step) ||
       faults.slow_from_step < 0)) {
    return bad("STEP is a step >= 0");
  }
  return absl::OkStatus();
}

std::string DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/zbpp");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.cache/zbpp");
  }
  return "/tmp/zbpp-cache";
}

// --synthetic-compute SCALE[:NOISE].
absl::StatusOr<SyntheticComputeSource> ParseSyntheticCompute(const std::string& value) {
  SyntheticComputeSource source;
  const size_t colon = value.find(':');
  const bool ok =
      absl::SimpleAtod(value.substr(0, colon), &source.scale) && source.scale > 0 &&
      source.scale <= 1e6 &&
      (colon == std::string::npos ||
       (absl::SimpleAtod(value.substr(colon + 1), &source.noise) && source.noise >= 0 &&
        source.noise < 1));
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--synthetic-compute must be SCALE[:NOISE], SCALE > 0, NOISE in [0, 1), got \"", value,
        "\""));
  }
  return source;
}

// Every value of a repeatable flag, in order (ParseLongFlags keeps the
// last one only): `--name value` and `--name=value`.
std::vector<std::string> RepeatedFlag(int argc, char** argv, const std::string& name) {
  std::vector<std::string> values;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == name && i + 1 < argc) {
      values.push_back(argv[++i]);
    } else if (absl::StartsWith(arg, name + "=")) {
      values.push_back(arg.substr(name.size() + 1));
    }
  }
  return values;
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  absl::StatusOr<std::map<std::string, std::string>> values = ParseLongFlags(
      argc, argv,
      {"--coordinator", "--device", "--threads", "--listen", "--cache-dir", "--data-root",
       "--gloo-hostname",
       "--name", "--memory-bytes", "--comm-timeout", "--tls-ca", "--tls-cert", "--tls-key",
       "--token-file", "--slow-stage", "--inject-nan-step", "--synthetic-compute",
       "--nccl-shared-gpu-test-host-id"});
  if (!values.ok()) return values.status();
  Flags flags;
  auto get = [&](const std::string& name, std::string* out) {
    if (auto it = values->find(name); it != values->end()) *out = it->second;
  };
  get("--coordinator", &flags.server.coordinator);
  get("--device", &flags.device);
  get("--listen", &flags.server.listen);
  get("--cache-dir", &flags.server.cache_dir);
  get("--gloo-hostname", &flags.server.gloo_hostname);
  get("--name", &flags.server.name);
  get("--tls-ca", &flags.tls.ca);
  get("--tls-cert", &flags.tls.cert);
  get("--tls-key", &flags.tls.key);
  get("--token-file", &flags.server.token_file);
  if (auto it = values->find("--nccl-shared-gpu-test-host-id"); it != values->end()) {
    if (it->second.empty()) {
      return absl::InvalidArgumentError(
          "--nccl-shared-gpu-test-host-id must not be empty (one ID per worker)");
    }
    flags.nccl_shared_gpu_test_host_id = it->second;
  }
  if (flags.server.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator is required");
  }
  if (auto it = values->find("--threads"); it != values->end()) {
    if (!absl::SimpleAtoi(it->second, &flags.threads) || flags.threads < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--threads must be an integer >= 1, got \"", it->second, "\""));
    }
  }
  if (auto it = values->find("--memory-bytes"); it != values->end()) {
    if (!absl::SimpleAtoi(it->second, &flags.server.memory_bytes) ||
        flags.server.memory_bytes < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--memory-bytes must be an integer >= 1, got \"", it->second, "\""));
    }
  }
  if (auto it = values->find("--comm-timeout"); it != values->end()) {
    double seconds = 0;
    if (!absl::SimpleAtod(it->second, &seconds) || !(seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--comm-timeout must be seconds > 0, got \"", it->second, "\""));
    }
    flags.server.comm_timeout = absl::Seconds(seconds);
  }
  if (auto it = values->find("--slow-stage"); it != values->end()) {
    if (absl::Status st = ParseSlowStage(it->second, flags.server.faults); !st.ok()) return st;
  }
  if (auto it = values->find("--inject-nan-step"); it != values->end()) {
    if (!absl::SimpleAtoi(it->second, &flags.server.faults.nan_step) ||
        flags.server.faults.nan_step < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--inject-nan-step must be a step >= 0, got \"", it->second, "\""));
    }
  }
  if (auto it = values->find("--synthetic-compute"); it != values->end()) {
    absl::StatusOr<SyntheticComputeSource> source = ParseSyntheticCompute(it->second);
    if (!source.ok()) return source.status();
    flags.server.synthetic = *source;
  }
  if (flags.server.cache_dir.empty()) flags.server.cache_dir = DefaultCacheDir();
  const std::vector<std::string> data_roots = RepeatedFlag(argc, argv, "--data-root");
  if (data_roots.empty()) {
    return absl::InvalidArgumentError(
        "--data-root is required: the directories dataset files may come from "
        "(--data-root / for any file this user can read)");
  }
  absl::StatusOr<DataRoots> roots = ResolveDataRoots(data_roots, "--data-root");
  if (!roots.ok()) return roots.status();
  flags.server.data_roots = *std::move(roots);
  return flags;
}

// One line on stderr; returns `exit_code` (1: runtime, 2: usage).
int Fail(int exit_code, absl::string_view message) {
  LogLine(message);
  return exit_code;
}

// The worker's server, registered with the coordinator: the flags' options
// with the device and the channel credentials to the coordinator.
// InvalidArgument names a bad --tls-* file (or a field the coordinator
// refused); other errors are WorkerServer::Create's.
absl::StatusOr<std::unique_ptr<WorkerServer>> StartServer(const Flags& flags,
                                                          const c10::Device& device) {
  WorkerServer::Options options = flags.server;
  options.device = device;
  options.nccl_factory = NcclCommunicatorFactory;
  options.nccl_shared_gpu_test = !flags.nccl_shared_gpu_test_host_id.empty();
  if (device.is_cuda()) {
    // Without it the worker still runs Gloo; auto never picks NCCL for it.
    absl::StatusOr<std::string> identity = GpuIdentity(device.index());
    if (identity.ok()) {
      options.device_identity = *std::move(identity);
    } else {
      Logf("%s: registering without a GPU identity (no NCCL)", identity.status().message());
    }
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ClientCredentials(flags.tls);
  if (!credentials.ok()) return credentials.status();
  options.credentials = *std::move(credentials);
  absl::StatusOr<std::unique_ptr<WorkerServer>> server = WorkerServer::Create(std::move(options));
  // "cannot reach the coordinator" alone hides the usual cause when
  // something does answer there: a TLS mismatch.
  if (absl::IsUnavailable(server.status()) &&
      absl::StartsWith(server.status().message(), "cannot reach the coordinator")) {
    return absl::UnavailableError(
        absl::StrCat(server.status().message(),
                     TlsMismatchHint(flags.server.coordinator, !flags.tls.ca.empty(),
                                     std::string(server.status().message()))));
  }
  return server;
}

// Leaves the process at the first SIGTERM or SIGINT (blocked in `signals`):
// shuts the worker's server down and exits 0 at once. The training thread
// may be inside a step, blocked on peers: it is not waited for.
// Checkpoints are written atomically, so nothing is torn.
void LeaveOnTerminationSignal(const sigset_t& signals, WorkerServer& worker) {
  std::thread([signals, &worker] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    Logf("signal %d, leaving", signal_number);
    worker.Shutdown();
    std::_Exit(0);
  }).detach();
}

}  // namespace

int Main(int argc, char** argv) {
  // Steady pass times for the calibration profile and the steps.
  KeepFreedHostMemory();
  for (int i = 1; i < argc; ++i) {
    if (absl::string_view(argv[i]) == "--help" || absl::string_view(argv[i]) == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    }
  }
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  absl::StatusOr<c10::Device> device =
      flags.ok() ? ParseDevice(flags->device) : absl::StatusOr<c10::Device>(flags.status());
  if (device.ok() && !flags->nccl_shared_gpu_test_host_id.empty() && !device->is_cuda()) {
    device = absl::InvalidArgumentError("--nccl-shared-gpu-test-host-id needs --device cuda:N");
  }
  if (absl::IsInvalidArgument(device.status())) {
    return Fail(2, absl::StrCat(device.status().message(), " (", kUsage, ")"));
  }
  // A well-formed --device that is not there (no GPU here): one line, 1.
  if (!device.ok()) return Fail(1, device.status().message());
  if (!flags->nccl_shared_gpu_test_host_id.empty()) {
    // Before any NCCL group exists: it sets NCCL's environment.
    if (absl::Status st = ConfigureNcclForSharedGpuTests(flags->nccl_shared_gpu_test_host_id);
        !st.ok()) {
      return Fail(2, st.message());
    }
    Logf("TEST-ONLY NCCL shared-GPU setting, host id \"%s\": correct, not fast",
         flags->nccl_shared_gpu_test_host_id);
  }
  const sigset_t signals = BlockTerminationSignals();
  // One worker per core: intra-op parallelism is a deliberate choice.
  at::set_num_threads(flags->threads);
  at::set_num_interop_threads(1);
  absl::StatusOr<std::unique_ptr<WorkerServer>> worker = StartServer(*flags, *device);
  if (!worker.ok()) {
    return Fail(absl::IsInvalidArgument(worker.status()) ? 2 : 1, worker.status().message());
  }
  std::printf("zbpp-worker registered worker_id=%s coordinator=%s address=%s\n",
              (*worker)->worker_id().c_str(), flags->server.coordinator.c_str(),
              (*worker)->address().c_str());
  std::fflush(stdout);
  LeaveOnTerminationSignal(signals, **worker);
  (*worker)->RunTrainingLoop();
  return 0;
}

}  // namespace zbpp::worker

int main(int argc, char** argv) { return zbpp::worker::Main(argc, argv); }
