#!/usr/bin/env bash
# Installs Arize Phoenix (the OTLP backend the integration tests run against) into
# its own virtual environment, apart from .venv: Phoenix brings ~850 MB of
# dependencies whose pins must not leak into cupellation's environment.
#
#   PHOENIX_VENV      where the venv goes (default: .phoenix-venv at the repository root)
#   PHOENIX_VERSION   the arize-phoenix release (default: the one the tests were proven on)
#   PYTHON            the interpreter that creates the venv (default: python3)
#
# Safe to run again: it does nothing when that version is already installed.
# Prints the path of the `phoenix` executable on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${PHOENIX_VENV:-$root/.phoenix-venv}"
version="${PHOENIX_VERSION:-20.26.1}"
python="${PYTHON:-python3}"

installed_version() {
  "$venv/bin/python" - <<'PY' 2>/dev/null || true
from importlib.metadata import PackageNotFoundError, version
try:
    print(version("arize-phoenix"))
except PackageNotFoundError:
    pass
PY
}

# pip, minus the warnings this machine's pip configuration prints for every package
# (find-links folders that do not exist); its exit status is pip's.
pip_quietly() {
  "$venv/bin/python" -m pip --quiet --disable-pip-version-check "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

if [ -x "$venv/bin/phoenix" ] && [ "$(installed_version)" = "$version" ]; then
  echo "arize-phoenix $version already installed in $venv" >&2
else
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  echo "installing arize-phoenix $version into $venv (about 850 MB, under 2 minutes)" >&2
  pip_quietly install --upgrade pip
  pip_quietly install "arize-phoenix==$version"
  if [ "$(installed_version)" != "$version" ] || [ ! -x "$venv/bin/phoenix" ]; then
    echo "install-phoenix.sh: arize-phoenix $version did not install into $venv" >&2
    exit 1
  fi
fi
echo "$venv/bin/phoenix"
