#!/usr/bin/env bash
# Installs MLflow (the second OTLP backend the integration tests run against) into
# its own virtual environment, apart from .venv: MLflow brings hundreds of MB of
# dependencies whose pins must not leak into cupellation's environment.
#
#   MLFLOW_VENV      where the venv goes (default: .mlflow-venv at the repository root)
#   MLFLOW_VERSION   the mlflow release (default: the one the tests were proven on)
#   PYTHON           the interpreter that creates the venv (default: python3)
#
# Safe to run again: it does nothing when that version is already installed (the
# steps are scripts/_venv.sh's, shared with the other installer).
# Prints the path of the `mlflow` executable on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/_venv.sh
source "$root/scripts/_venv.sh"
venv_install install-mlflow.sh mlflow "${MLFLOW_VERSION:-3.17.2}" \
  "${MLFLOW_VENV:-$root/.mlflow-venv}" mlflow \
  "3.18.0 cannot be installed: its skinny package is missing from the registry"
