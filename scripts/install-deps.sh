#!/usr/bin/env bash
# Installs what zbpp needs to build and test: Debian 12's packages, and
# LibTorch from PyTorch 2.11.0's wheel (requirements/libtorch.txt) into the
# project's virtual environment outside the clone (scripts/python-env.sh).
# Idempotent: packages already present are skipped, apt is not touched when
# nothing is missing, and pip not when the same requirements are installed.
set -euo pipefail

packages=(
  # toolchain and build speed
  g++ cmake ninja-build ccache pkg-config
  # libraries
  libabsl-dev nlohmann-json3-dev
  # RPC: the public API (proto/) and its C++ code generators
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # coordinator: store, job specs in YAML, metrics and the HTTP server that
  # exposes them (libmicrohttpd: event-driven, so a slow client holds no thread)
  libsqlite3-dev libyaml-cpp-dev prometheus-cpp-dev libmicrohttpd-dev
  # tests and benchmarks; prometheus brings promtool (lint of /metrics)
  libgtest-dev libgmock-dev libbenchmark-dev prometheus
  # coordinator TLS tests make their certificates with the openssl CLI
  openssl
  # worker: the gloo headers that c10d's ProcessGroupGloo.hpp includes (the
  # wheel lacks them; worker/comm/CMakeLists.txt says why Debian's fit), the
  # main job's corpus; python3 for the virtual environment
  libgloo-dev bible-kjv python3
  clang libclang-rt-14-dev  # libFuzzer targets (scripts/fuzz.sh, tests/fuzz/)
)

bash "$(dirname "$0")/apt-install.sh" install-deps "${packages[@]}"

# LibTorch. Where /usr/local/cuda holds CUDA 13.0 (the build machines), it
# has every NVIDIA library torch pins but the three in the file: --no-deps
# (~0.76 GB). Elsewhere (the Docker images) torch's full dependency set
# (~2.7 GB) brings them all as wheels.
torch_options=()
if [ -e /usr/local/cuda/lib64/libcudart.so.13 ]; then torch_options=(--no-deps); fi
bash "$(dirname "$0")/pip-install.sh" libtorch requirements/libtorch.txt ${torch_options[@]+"${torch_options[@]}"}

# Hugging Face's tokenizers, safetensors and transformers (scripts/tokenize,
# scripts/export and their tests). --no-warn-conflicts: torch was installed
# with --no-deps, as above; the file pins its own dependencies in full.
# ZBPP_HF_DEPS=0 skips them (the Docker images, which run the daemons only).
if [ "${ZBPP_HF_DEPS:-1}" != 0 ]; then
  bash "$(dirname "$0")/pip-install.sh" huggingface requirements/huggingface.txt --no-warn-conflicts
fi

# The zbpp Python package (client/python/) and what builds and checks it
# (requirements/python-client.txt: grpcio-tools, mypy, pytest, Kubeflow's
# SDK), then the package itself, built from this checkout's proto/ (again
# whenever client/python/ or proto/ changed). ZBPP_PYTHON_CLIENT=0 skips them.
if [ "${ZBPP_PYTHON_CLIENT:-1}" != 0 ]; then
  bash "$(dirname "$0")/pip-install.sh" python-client requirements/python-client.txt --no-warn-conflicts
  bash "$(dirname "$0")/python-client-install.sh"
fi

# Deploy tests (tests/deploy/): what scripts/deploy-test-deps.sh names.
# ZBPP_DEPLOY_TEST_DEPS=0 skips them (the Docker images do).
if [ "${ZBPP_DEPLOY_TEST_DEPS:-1}" != 0 ]; then
  bash "$(dirname "$0")/deploy-test-deps.sh"
fi
