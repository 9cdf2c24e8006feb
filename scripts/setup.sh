#!/usr/bin/env bash
# Creates .venv (if missing) and installs cupellation with its development tools and
# the documentation site's (mkdocs),
# and cupellation-exporters (exporters/, OpenTelemetry export) beside it.
# Sourced by demo.sh and test.sh; safe to run again.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
if [ ! -x "$root/.venv/bin/python" ]; then
  "$python" -m venv "$root/.venv"
fi
# pip, minus the warnings some machines' pip configuration prints for every package
# (find-links folders that do not exist); its exit status is pip's.
pip_quietly() {
  "$root/.venv/bin/python" -m pip --quiet --disable-pip-version-check "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
pip_quietly install --upgrade pip
pip_quietly install -e "$root[dev,cli,docs]"
# After the core: the exporters depend on the cupellation installed just above.
pip_quietly install -e "$root/exporters[dev]"
