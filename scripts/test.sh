#!/usr/bin/env bash
# One command: set everything up and run the whole test suite, lint and type
# checks included. Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
echo "== ruff"
.venv/bin/ruff check .
echo "== mypy --strict"
.venv/bin/mypy --strict
echo "== pytest"
.venv/bin/pytest "$@"
