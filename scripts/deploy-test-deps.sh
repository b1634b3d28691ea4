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

packages=(chromium chromium-driver nodejs npm kubectl)
missing=()
for pkg in "${packages[@]}"; do
  # kubectl and node may come from outside Debian (they do on the build
  # machine): a command on the PATH is enough.
  case "$pkg" in
    kubectl|nodejs|npm) command -v "${pkg/nodejs/node}" >/dev/null && continue ;;
  esac
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deploy-test-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "deploy-test-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

dir=${ZBPP_DEPLOY_NODE_DIR:-$HOME/.cache/zbpp/deploy-node}
mkdir -p "$dir"
if ! cmp -s tests/deploy/package.json "$dir/package.json" || [ ! -d "$dir/node_modules" ]; then
  cp tests/deploy/package.json "$dir/package.json"
  echo "deploy-test-deps: npm install into $dir"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error)
else
  echo "deploy-test-deps: npm packages present in $dir"
fi
