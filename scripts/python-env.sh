#!/usr/bin/env bash
# Makes sure the project's Python virtual environment exists and prints its
# directory: ${ZBPP_HOME:-~/.cache/zbpp}/venv, outside the clone. It holds
# LibTorch (requirements/libtorch.txt), Hugging Face's libraries
# (requirements/huggingface.txt) and the deploy tests' tools
# (requirements/deploy-tests.txt); CMake reads the same directory
# (cmake/ZbppTorch.cmake). Idempotent.
#
#   venv=$(bash scripts/python-env.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${ZBPP_HOME:-$HOME/.cache/zbpp}/venv
if [ ! -x "$venv/bin/python" ]; then
  # Debian's interpreter needs python3-venv for ensurepip; a python3 of one's
  # own (pyenv, as on the build machines) has it already.
  if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    bash scripts/apt-install.sh python-env python3 python3-venv >&2
  fi
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2
fi
echo "$venv"
