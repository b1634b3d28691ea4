#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything and
# runs the whole test suite with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
build_dir=${ZBPP_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "${ZBPP_JOBS:-$(nproc)}" --timeout 300
