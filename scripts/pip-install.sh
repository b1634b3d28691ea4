#!/usr/bin/env bash
# Installs a pinned requirements file into the project's virtual environment
# (scripts/python-env.sh), skipping pip entirely when the same file was
# installed there before with the same options (the stamp keeps both).
#
#   scripts/pip-install.sh LABEL FILE [PIP_OPTION...]   # e.g. --no-deps
#
# FILE is relative to the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
label=$1 file=$2
shift 2
venv=$(bash scripts/python-env.sh)
stamp="$venv/zbpp-installed-$(basename "$file")"
wanted=$(cat "$file"; echo "# pip options: $*")
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  echo "$label: $file already installed in $venv"
  exit 0
fi
echo "$label: pip install -r $file $* into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" -r "$file"
printf '%s\n' "$wanted" > "$stamp"
