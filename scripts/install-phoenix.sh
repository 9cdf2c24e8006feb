#!/usr/bin/env bash
# Installs Arize Phoenix (the OTLP backend the integration tests run against) into
# its own virtual environment, apart from .venv: Phoenix brings ~850 MB of
# dependencies whose pins must not leak into cupellation's environment.
#
#   PHOENIX_VENV      where the venv goes (default: .phoenix-venv at the repository root)
#   PHOENIX_VERSION   the arize-phoenix release (default: the one the tests were proven on)
#   PYTHON            the interpreter that creates the venv (default: python3)
#
# Safe to run again: it does nothing when that version is already installed (the
# steps are scripts/_venv.sh's, shared with the other installer).
# Prints the path of the `phoenix` executable on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/_venv.sh
source "$root/scripts/_venv.sh"
venv_install install-phoenix.sh arize-phoenix "${PHOENIX_VERSION:-20.26.1}" \
  "${PHOENIX_VENV:-$root/.phoenix-venv}" phoenix \
  "about 850 MB, under 2 minutes"
