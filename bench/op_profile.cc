#include "bench/op_profile.h"

#include <memory>
#include <set>
#include <vector>

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "bench/bench_clock.h"

namespace zbpp::bench {
namespace {

double ThreadSeconds() { return DeviceSeconds(c10::Device(c10::kCPU)); }

// The CPU profile in progress on this thread: self times by name, and per
// open operator the time its callees took.
thread_local std::map<std::string, double>* cpu_profile = nullptr;
thread_local std::vector<double> callee_seconds;

struct OpStart : at::ObserverContext {
  double start = 0;
};

std::unique_ptr<at::ObserverContext> OnEnter(const at::RecordFunction& /*fn*/) {
  auto ctx = std::make_unique<OpStart>();
  callee_seconds.push_back(0);
  ctx->start = ThreadSeconds();
  return ctx;
}

void OnExit(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  const double span = ThreadSeconds() - static_cast<OpStart*>(ctx)->start;
  const double callees = callee_seconds.back();
  callee_seconds.pop_back();
  if (!callee_seconds.empty()) callee_seconds.back() += span;
  if (cpu_profile != nullptr) (*cpu_profile)[fn.name()] += span - callees;
}

std::map<std::string, double> ProfileCpu(const std::function<void()>& fn) {
  std::map<std::string, double> out;
  cpu_profile = &out;
  callee_seconds.clear();
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&OnEnter, &OnExit)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  const double start = ThreadSeconds();
  fn();
  const double total = ThreadSeconds() - start;
  at::removeCallback(handle);
  cpu_profile = nullptr;
  // The rest: the autograd engine between its nodes, tensors freed outside
  // any operator (a large buffer's pages go back to the kernel), our code.
  double inside = 0;
  for (const auto& [name, seconds] : out) inside += seconds;
  out["(outside operators)"] = total - inside;
  return out;
}

std::map<std::string, double> ProfileDevice(const std::function<void()>& fn) {
  namespace profiler = torch::autograd::profiler;
  namespace impl = torch::profiler::impl;
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
  const std::set<impl::ActivityType> activities{impl::ActivityType::CPU,
                                                impl::ActivityType::CUDA};
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  fn();
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  std::map<std::string, double> out;
  for (const profiler::KinetoEvent& e : result->events()) {
    if (e.deviceType() == c10::DeviceType::CUDA) out[e.name()] += 1e-9 * double(e.durationNs());
  }
  return out;
}

}  // namespace

std::map<std::string, double> ProfileOps(const std::function<void()>& fn, bool cuda) {
  return cuda ? ProfileDevice(fn) : ProfileCpu(fn);
}

}  // namespace zbpp::bench
