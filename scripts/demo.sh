#!/usr/bin/env bash
# One command: set everything up, check conformance, and run the demo, which
# writes out/demo/report.json and out/demo/events.jsonl.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
vectors="${CUPEL_CONFORMANCE:-$root/../shared/conformance/required}"
if [ -d "$vectors" ]; then
  .venv/bin/cupellation conformance "$vectors"
else
  echo "conformance vectors not found at $vectors (set CUPEL_CONFORMANCE); skipping that step"
fi
.venv/bin/cupellation demo --out out/demo
