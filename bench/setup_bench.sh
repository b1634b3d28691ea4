#!/usr/bin/env bash
# What moving to PyTorch 2.11.0's LibTorch costs a developer: process start
# of the binaries (median of --runs), and, on request, a fresh LibTorch
# install (download, time, disk) and a cold build without ccache. Prints a
# markdown table; run from the repository root after scripts/build.sh.
#
#   bash bench/setup_bench.sh [--runs N] [--install] [--cold-build]
#
# Start times: `scheduler_tests --gtest_list_tests` (no LibTorch, the
# floor), `worker_data_tests --gtest_list_tests` (LibTorch's CPU part, as
# every test binary links it) and `zbpp-worker --device bogus` (CPU and CUDA
# parts; exits at flag parsing, after the dynamic loader did its work).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=20 install=false cold_build=false
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --install) install=true; shift ;;
    --cold-build) cold_build=true; shift ;;
    *) echo "usage: bench/setup_bench.sh [--runs N] [--install] [--cold-build]" >&2; exit 2 ;;
  esac
done
build=${ZBPP_BUILD_DIR:-build}

# Median wall seconds of `runs` runs of the command (one untimed run first,
# so that the page cache holds the libraries).
median_start() {
  "$@" >/dev/null 2>&1 || true
  for _ in $(seq "$runs"); do
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || true
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
  done | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'
}

echo "| what | measured |"
echo "|---|---:|"
echo "| start, no LibTorch (scheduler_tests) | $(median_start "$build/tests/scheduler/scheduler_tests" --gtest_list_tests) s |"
echo "| start, LibTorch CPU part (worker_data_tests) | $(median_start "$build/tests/worker/data/worker_data_tests" --gtest_list_tests) s |"
echo "| start, LibTorch CPU + CUDA parts (zbpp-worker) | $(median_start "$build/worker/daemon/zbpp-worker" --coordinator 127.0.0.1:1 --data-root / --device bogus) s |"

if $install; then
  home=$(mktemp -d)
  start=$(date +%s)
  PIP_NO_CACHE_DIR=1 ZBPP_HOME="$home" bash scripts/pip-install.sh libtorch \
    requirements/libtorch.txt --no-deps >/dev/null
  echo "| fresh LibTorch install, --no-deps + 3 NVIDIA wheels, no pip cache | $(( $(date +%s) - start )) s, $(du -sh "$home/venv" | cut -f1) on disk |"
  rm -rf "$home"
fi

if $cold_build; then
  dir=$(mktemp -d)
  start=$(date +%s)
  CCACHE_DISABLE=1 ZBPP_BUILD_DIR="$dir" bash scripts/build.sh >/dev/null
  echo "| cold build of every target, no ccache, -j$(nproc) | $(( $(date +%s) - start )) s |"
  rm -rf "$dir"
fi
