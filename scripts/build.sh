#!/usr/bin/env bash
# Configures (Ninja, ccache) and builds zbpp into ${ZBPP_BUILD_DIR:-build}:
# every target, or only the targets named on the command line.
#
#   scripts/build.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${ZBPP_BUILD_DIR:-build}
jobs=${ZBPP_JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build_dir" -j "$jobs" "$@"
