#ifndef ZBPP_BENCH_OP_PROFILE_H_
#define ZBPP_BENCH_OP_PROFILE_H_

#include <functional>
#include <map>
#include <string>

namespace zbpp::bench {

/// Where the time of `fn` goes, by operator. On the CPU: each operator's
/// self time in this thread's CPU time (its span less the spans of the
/// operators it called, so that nothing counts twice — `aten::linear` shows
/// only its own overhead, the GEMM under it as `aten::mm`), from LibTorch's
/// RecordFunction callbacks; CPU time, not wall time, so that other
/// processes on a shared core do not land in whichever operator was running.
/// The autograd engine runs a CPU graph's backward on the calling thread, so
/// B is included. With `cuda`: the device's kernels, copies and memsets by
/// name and their device time (LibTorch's Kineto profiler), which is what a
/// GPU pass costs. Seconds per name, summed over calls; on the CPU including
/// the callbacks' own cost (about a microsecond per operator), and the time
/// spent outside every operator as "(outside operators)".
/// Not thread-safe (one profile at a time per process).
std::map<std::string, double> ProfileOps(const std::function<void()>& fn, bool cuda);

}  // namespace zbpp::bench

#endif  // ZBPP_BENCH_OP_PROFILE_H_
