#!/usr/bin/env bash
# Installs the `zbpp` Python package (client/python/) into the project's
# virtual environment (scripts/python-env.sh), its gRPC stubs generated from
# this checkout's proto/ by grpcio-tools (requirements/python-client.txt) as
# it is built. Skipped when neither client/python/ nor proto/ changed since
# the last install (the stamp holds their files' digests).
#
#   scripts/python-client-install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(bash scripts/python-env.sh)
stamp="$venv/zbpp-installed-python-client"
wanted=$(find client/python/pyproject.toml client/python/setup.py client/python/zbpp proto \
           -type f -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  echo "python-client: client/python already installed in $venv"
  exit 0
fi
echo "python-client: pip install ./client/python into $venv"
# --no-build-isolation: the build uses the environment's setuptools and
# grpcio-tools (pinned in requirements/python-client.txt), offline.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
  --no-build-isolation --force-reinstall ./client/python
printf '%s\n' "$wanted" > "$stamp"
