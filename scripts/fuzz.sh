#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang in a build tree of
# their own and runs each for a bounded time (bench/results/fuzz.md).
#
#   scripts/fuzz.sh [--seconds N] [--build-dir DIR] [--target NAME]...
#
#   --seconds N     fuzzing time per target (default 10); 0 only replays
#   --build-dir DIR the fuzz build tree (default build-fuzz at the root)
#   --target NAME   only this target (repeatable); default all three
#
# Per target: every input in tests/fuzz/regressions/<target>/ and
# tests/fuzz/corpus/<target>/ runs once (each must run clean), then
# libFuzzer mutates from them for N seconds. New coverage goes to
# DIR/corpus/<target>/ (the committed seeds are never touched); a crash,
# sanitizer report, timeout or out-of-memory input is written to
# DIR/artifacts/<target>/ and fails the run: fix it and keep the input as a
# regression case (tests/fuzz/README.md).
#
# Without clang's libFuzzer runtime (Debian: clang, libclang-rt-14-dev) the
# targets are built with the default compiler over a replay main and only
# the regressions and seeds run. Exit status: 0 clean, 1 a finding or a
# build error.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=10
build="$root/build-fuzz"
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] ||
  targets=(job_spec_yaml_fuzz schedule_io_fuzz coordinator_request_fuzz)
jobs="${ZBPP_FUZZ_JOBS:-2}"

# libFuzzer present? A one-line target must link.
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' \
  > "$probe/probe.cc"
if command -v clang++ >/dev/null &&
   clang++ -fsanitize=fuzzer "$probe/probe.cc" -o "$probe/probe" 2>/dev/null; then
  mode=libfuzzer
  export CC=clang CXX=clang++
else
  mode=replay
  build="$build-replay"
  echo "fuzz.sh: clang's libFuzzer is missing (apt-get install clang" \
       "libclang-rt-14-dev); replaying regressions and seeds only" >&2
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  mkdir -p "$build"
  cmake -S "$root/tests/fuzz" -B "$build" "${generator[@]}" \
    -DZBPP_BUILD_FUZZERS=ON -DZBPP_BUILD_TESTS=OFF \
    -DZBPP_BUILD_BENCHMARKS=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; exit 1; }
fi
start=$(date +%s)
cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$build/build.log" 2>&1 ||
  { tail -50 "$build/build.log" >&2; exit 1; }
echo "fuzz.sh: built ${targets[*]} ($mode) in $(( $(date +%s) - start )) s"

status=0
for target in "${targets[@]}"; do
  seeds="$root/tests/fuzz/corpus/$target"
  regressions="$root/tests/fuzz/regressions/$target"
  inputs=()
  for dir in "$regressions" "$seeds"; do
    [ -d "$dir" ] && while IFS= read -r f; do inputs+=("$f"); done \
      < <(find "$dir" -type f ! -name '.*' | sort)
  done
  log="$build/$target.log"
  # Replay: each input once (libFuzzer runs named files and exits).
  if [ ${#inputs[@]} -gt 0 ] &&
     ! "$build/$target" -rss_limit_mb=2048 "${inputs[@]}" >"$log" 2>&1; then
    echo "fuzz.sh: $target FAILED on a regression or seed input:" >&2
    tail -40 "$log" >&2
    status=1
    continue
  fi
  echo "fuzz.sh: $target: ${#inputs[@]} regression and seed inputs ran clean"
  if [ "$mode" = libfuzzer ] && [ "$seconds" -gt 0 ]; then
    corpus="$build/corpus/$target"
    artifacts="$build/artifacts/$target"
    mkdir -p "$corpus" "$artifacts"
    dirs=("$corpus")
    for dir in "$seeds" "$regressions"; do [ -d "$dir" ] && dirs+=("$dir"); done
    # -timeout: an input may run the solver on the largest shape a spec
    # allows (seconds under ASan), so only a real hang trips it.
    # -malloc_limit_mb: one huge allocation is reported from the allocating
    # thread, with its input; the RSS limit's report comes from another
    # thread and can stall, hence also the outer timeout.
    if timeout -k 10 $(( seconds + 120 )) \
         "$build/$target" -max_total_time="$seconds" -timeout=60 \
         -rss_limit_mb=3072 -malloc_limit_mb=1024 -print_final_stats=1 \
         -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1; then
      echo "fuzz.sh: $target: $(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" |
        grep -Eo '[0-9]+$') runs in ${seconds} s, no findings" \
        "(corpus $(find "$corpus" -type f | wc -l) new inputs)"
    else
      echo "fuzz.sh: $target FOUND A PROBLEM; input under $artifacts/:" >&2
      grep -E 'ERROR|SUMMARY|Test unit written|runtime error' "$log" | head -20 >&2
      echo "fuzz.sh: full log: $log" >&2
      status=1
    fi
  fi
done
exit $status
