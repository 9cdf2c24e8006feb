#!/usr/bin/env bash
# The README's test command, and CI's (.ci/run runs this and nothing else).
#
# 1. Installs every real component the tests use, skipping what is already there:
#    Chromium and chromium-driver (Debian packages, for the HTML report's browser tests)
#    and Arize Phoenix and MLflow, each in its own venv (the OTLP backends of the
#    integration tests).
# 2. Sets up .venv (scripts/setup.sh).
# 3. Runs ruff, mypy --strict, the documentation site's strict build (mkdocs: every
#    warning, a broken internal link or anchor included, fails it; no network) and the
#    whole test suite: the quick default run and the tests marked exhaustive. Extra
#    arguments go to pytest.
#
# A component it cannot install (not root, no apt, apt or pip failing) stops it with
# exit 1 and one line naming the component and the command to run. It never goes on
# without one: the tests that use it would fail, and no test is ever skipped.
#
#   PHOENIX_VENV   where Phoenix is (installed if missing; default .phoenix-venv here)
#   MLFLOW_VENV    where MLflow is (installed if missing; default .mlflow-venv here)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
logs="$root/out/install-logs"  # each installer's output; named when it fails

# Stops with the one line: component, why, and the command that installs it.
cannot_install() {
  echo "scripts/test.sh: cannot install $1 ($2); run: $3" >&2
  exit 1
}

# Debian packages, installed with apt-get when any is missing (needs root).
#   debian_packages NAME PACKAGE...
debian_packages() {
  local name="$1" log="$logs/$1.log"
  shift
  local command="apt-get update && apt-get install -y --no-install-recommends $*"
  if dpkg -s "$@" >/dev/null 2>&1; then
    return 0
  fi
  if ! command -v apt-get >/dev/null; then
    cannot_install "$name" "this machine has no apt-get" "$command (on Debian)"
  fi
  if [ "$(id -u)" -ne 0 ]; then
    cannot_install "$name" "not root" "sudo sh -c '$command'"
  fi
  echo "== installing $name: $command"
  mkdir -p "$logs"
  if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
         --no-install-recommends "$@"; } >"$log" 2>&1; then
    cannot_install "$name" "apt-get failed, its output is in $log" "$command"
  fi
}

# A component an installer script puts in place (it does nothing when it is there).
#   installer_script NAME SCRIPT
installer_script() {
  local name="$1" script="$2" log="$logs/$1.log"
  echo "== $name: bash $script"
  mkdir -p "$logs"
  if ! bash "$script" >"$log" 2>&1; then
    cannot_install "$name" "$script failed, its output is in $log" "bash $script"
  fi
}

# The components, one line each.
debian_packages chromium chromium chromium-driver
installer_script phoenix scripts/install-phoenix.sh
installer_script mlflow scripts/install-mlflow.sh

bash scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check .
echo "== mypy --strict"
.venv/bin/mypy --strict
echo "== mkdocs build --strict (the documentation site, into out/site)"
.venv/bin/mkdocs build --strict --quiet --site-dir out/site
echo "== pytest (every test: the default run and the ones marked exhaustive)"
# -n auto: one worker per core (pytest-xdist); --dist loadfile keeps each test file on
# one worker, so a module's fixture (a Phoenix or MLflow server, a chDB store, a CLI
# workspace) starts once.
.venv/bin/pytest -m "exhaustive or not exhaustive" -n auto --dist loadfile "$@"
