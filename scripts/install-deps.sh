#!/usr/bin/env bash
# Installs what zbpp needs to build and test, from Debian 12's packages only.
# Idempotent: packages already present are skipped, and apt is not touched
# when nothing is missing.
set -euo pipefail

packages=(
  # toolchain and build speed
  g++ cmake ninja-build ccache pkg-config
  # libraries
  libabsl-dev nlohmann-json3-dev
  # RPC: the public API (proto/) and its C++ code generators
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # coordinator: store, job specs in YAML, metrics
  libsqlite3-dev libyaml-cpp-dev prometheus-cpp-dev
  # tests and benchmarks; prometheus brings promtool (lint of /metrics)
  libgtest-dev libgmock-dev libbenchmark-dev prometheus
  # coordinator TLS tests make their certificates with the openssl CLI
  openssl
  # worker: LibTorch (CPU, c10d + Gloo), the headers c10d includes, a fast
  # single-threaded BLAS (one worker per core), the main job's corpus
  libtorch-dev libgloo-dev libopenblas0-serial bible-kjv
  clang libclang-rt-14-dev  # libFuzzer targets (scripts/fuzz.sh, tests/fuzz/)
)

bash "$(dirname "$0")/apt-install.sh" install-deps "${packages[@]}"

# --- Deploy tests (issue 6, tests/deploy/): Debian's chromium and
# chromium-driver, and npm packages into ~/.cache/zbpp/deploy-node.
# ZBPP_DEPLOY_TEST_DEPS=0 skips them (the Docker images do).
if [ "${ZBPP_DEPLOY_TEST_DEPS:-1}" != 0 ]; then
  bash "$(dirname "$0")/deploy-test-deps.sh"
fi
