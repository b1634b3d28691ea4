#!/usr/bin/env bash
# Builds what scripts/gpu/run.sh runs on a lent GPU machine and gathers it
# in build-gpu/ (ignored by git; the device tool carries it):
#   bin/        the worker's numerical and communicator test binaries,
#               compute_bench, optimizer_bench and merge_bench;
#   coordinator/, worker/daemon/, client/
#               the daemons and zbppctl, laid out as in build/ so that
#               scripts/demo runs them (ZBPP_BUILD_DIR=build-gpu);
#   lib/        the shared libraries they load that such a machine lacks
#               (Debian's gRPC, protobuf, Abseil, SQLite, ...);
#   kjv.txt     the main job's corpus (that machine has no bible-kjv).
# Binaries are stripped. LibTorch is not bundled: the GPU machine's own
# PyTorch 2.11.0 provides it, CUDA part included. Run here, after
# scripts/install-deps.sh.
#
#   bash scripts/gpu/bundle.sh        # then: device run, carry build-gpu,
#                                     #   command bash scripts/gpu/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
tests=(worker_model_tests worker_post_validation_tests worker_runtime_tests worker_comm_tests
       worker_memory_tests worker_process_tests worker_merged_backward_tests compute_bench
       optimizer_bench merge_bench)
daemons=(coordinator/zbpp-coordinator worker/daemon/zbpp-worker client/zbppctl)
bash scripts/build.sh >/dev/null
build=${ZBPP_BUILD_DIR:-build}
bundle=build-gpu
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for t in "${tests[@]}"; do
  path=$(find "$build/tests" "$build/bench" -type f -name "$t" | head -1)
  [ -n "$path" ] || { echo "bundle: $t not built" >&2; exit 1; }
  strip -o "$bundle/bin/$t" "$path"
done
for d in "${daemons[@]}"; do
  mkdir -p "$bundle/$(dirname "$d")"
  strip -o "$bundle/$d" "$build/$d"
done
bible "gen1:1-rev22:21" >"$bundle/kjv.txt"
# Every library the binaries load, except LibTorch's own (from the GPU
# machine's PyTorch, CUDA runtime included) and the C and C++ runtimes
# (newer there).
ldd "$bundle"/bin/* "${daemons[@]/#/$bundle/}" | awk '/=> \//{print $3}' | sort -u |
  grep -v -e '/site-packages/' -e '/usr/local/cuda' \
          -e '/libc\.so' -e '/libm\.so' -e '/libstdc++\.so' -e '/libgcc_s\.so' \
          -e '/ld-linux' -e '/libpthread\.so' -e '/libdl\.so' -e '/librt\.so' \
          -e '/libutil\.so' -e '/libcudart\.so' |
  while read -r lib; do strip -o "$bundle/lib/$(basename "$lib")" "$lib"; done
echo "bundle: $(du -sh "$bundle" | cut -f1) in $bundle ($(ls "$bundle/lib" | wc -l) libraries)"
