#!/usr/bin/env bash
# Installs MLflow (the second OTLP backend the integration tests run against) into
# its own virtual environment, apart from .venv: MLflow brings hundreds of MB of
# dependencies whose pins must not leak into cupellation's environment.
#
#   MLFLOW_VENV      where the venv goes (default: .mlflow-venv at the repository root)
#   MLFLOW_VERSION   the mlflow release (default: the one the tests were proven on)
#   PYTHON           the interpreter that creates the venv (default: python3)
#
# Safe to run again: it does nothing when that version is already installed.
# Prints the path of the `mlflow` executable on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MLFLOW_VENV:-$root/.mlflow-venv}"
version="${MLFLOW_VERSION:-3.17.2}"
python="${PYTHON:-python3}"

installed_version() {
  "$venv/bin/python" - <<'PY' 2>/dev/null || true
from importlib.metadata import PackageNotFoundError, version
try:
    print(version("mlflow"))
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

if [ -x "$venv/bin/mlflow" ] && [ "$(installed_version)" = "$version" ]; then
  echo "mlflow $version already installed in $venv" >&2
else
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  echo "installing mlflow $version into $venv (3.18.0 cannot be installed: its skinny package is missing from the registry)" >&2
  pip_quietly install --upgrade pip
  pip_quietly install "mlflow==$version"
  if [ "$(installed_version)" != "$version" ] || [ ! -x "$venv/bin/mlflow" ]; then
    echo "install-mlflow.sh: mlflow $version did not install into $venv" >&2
    exit 1
  fi
fi
echo "$venv/bin/mlflow"
