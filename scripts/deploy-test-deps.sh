#!/usr/bin/env bash
# What the deploy tests (tests/deploy/) need beyond scripts/install-deps.sh:
# Debian's headless Chromium (the schedule page test) and the npm packages
# that check deploy/ offline (@grafana/schema + typescript for the dashboard
# JSON, kubernetes-models for the rendered manifests), installed from
# tests/deploy/package.json into a cache directory outside the tree.
# Idempotent: nothing is fetched when everything is there.
#
#   scripts/deploy-test-deps.sh        # prints the node_modules directory last
#
# ZBPP_DEPLOY_NODE_DIR (default ~/.cache/zbpp/deploy-node) is where the npm
# packages go; tests/deploy/CMakeLists.txt reads the same variable.
set -euo pipefail
cd "$(dirname "$0")/.."

# kubectl and node may come from outside Debian (they do on the build
# machine): a command on the PATH is enough for those.
packages=(chromium chromium-driver)
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
command -v kubectl >/dev/null || packages+=(kubectl)
bash scripts/apt-install.sh deploy-test-deps "${packages[@]}"

dir=${ZBPP_DEPLOY_NODE_DIR:-$HOME/.cache/zbpp/deploy-node}
mkdir -p "$dir"
if ! cmp -s tests/deploy/package.json "$dir/package.json" || [ ! -d "$dir/node_modules" ]; then
  cp tests/deploy/package.json "$dir/package.json"
  echo "deploy-test-deps: npm install into $dir"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error)
else
  echo "deploy-test-deps: npm packages present in $dir"
fi
