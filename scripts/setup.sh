#!/usr/bin/env bash
# Creates .venv (if missing) and installs cupellation with its development tools,
# and cupellation-exporters (exporters/, OpenTelemetry export) beside it.
# Sourced by demo.sh and test.sh; safe to run again.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
if [ ! -x "$root/.venv/bin/python" ]; then
  "$python" -m venv "$root/.venv"
fi
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root[dev,cli]"
# After the core: the exporters depend on the cupellation installed just above.
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root/exporters[dev]"
