// The main of the worker tests that link LibTorch: one intra-op thread per
// rank, as the worker daemon runs (--threads defaults to 1: one worker per
// core). These tests run ranks as threads or as processes; with LibTorch's
// default, every rank opens an OpenMP team as wide as the machine and the
// teams spin against each other, which on a loaded machine cost the p = 8
// equivalence 4x its CPU time here and its 300 s budget on CI. Threads a
// test starts inherit the setting at their first parallel operation
// (ATen's lazy init_num_threads).

#include <ATen/Parallel.h>
#include <gmock/gmock.h>

int main(int argc, char** argv) {
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
  testing::InitGoogleMock(&argc, argv);
  return RUN_ALL_TESTS();
}
