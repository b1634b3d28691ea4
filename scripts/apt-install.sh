#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are missing,
# with `apt-get install -y --no-install-recommends`; apt is not touched when
# every one is present. Needs root or sudo only when something is missing.
#
#   scripts/apt-install.sh LABEL PKG...    # LABEL prefixes the messages
set -euo pipefail
label=$1
shift
missing=()
for pkg in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "$label: all $# packages present"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "$label: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "$label: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
