#!/usr/bin/env bash
# One command: set everything up, run the specification's required conformance
# vectors (vendored in tests/data; prints "58 passed, 0 failed"), then the demo, which
# writes its report, page and trace files in out/demo.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
.venv/bin/cupellation conformance tests/data/conformance/required
.venv/bin/cupellation demo --out out/demo
