#!/usr/bin/env bash
# What the deploy tests (tests/deploy/) need beyond scripts/install-deps.sh:
# Debian's headless Chromium and its chromedriver (the schedule page test),
# prometheus (promtool and the live stack), kubectl (kustomize) where none is
# on the PATH, and the Python packages that check deploy/ offline
# (requirements/deploy-tests.txt: kubernetes-validate, prometheus-operator's
# CRD models, Grafana's SDK, selenium) in the project's virtual environment
# (scripts/python-env.sh), whose python tests/deploy/CMakeLists.txt runs.
# Idempotent: nothing is fetched when everything is there.
#
#   scripts/deploy-test-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# kubectl may come from outside Debian (it does on the build machine): a
# command on the PATH is enough.
packages=(chromium chromium-driver prometheus)
command -v kubectl >/dev/null || packages+=(kubectl)
bash scripts/apt-install.sh deploy-test-deps "${packages[@]}"

# --no-warn-conflicts: the same environment holds torch installed with
# --no-deps (requirements/libtorch.txt), whose absent dependencies pip would
# report as errors; the file pins its own packages' dependencies in full.
bash scripts/pip-install.sh deploy-test-deps requirements/deploy-tests.txt --no-warn-conflicts
