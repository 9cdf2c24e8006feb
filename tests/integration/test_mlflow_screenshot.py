"""The screenshot scripts (scripts/phoenix_screenshot.py, scripts/mlflow_screenshot.py):
cheap checks of what they share and of their command lines, and one slow run of the
MLflow script against a real MLflow in a real headless Chromium (the Phoenix one has
its own, test_phoenix_screenshot.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from cupellation import ContextItem
from cupellation.policy import Policy

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def _script(name: str) -> ModuleType:
    """scripts/NAME.py loaded as a module (its main not run)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["phoenix_screenshot", "mlflow_screenshot"])
def test_both_scripts_take_items_and_say_how_in_their_help(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each script loads, and its --help names --items N (the large-run pictures)."""
    with pytest.raises(SystemExit) as exited:
        _script(name).main(["--help"])
    assert exited.value.code == 0
    assert "--items N" in capsys.readouterr().out


def test_a_large_run_has_every_reason_the_demo_has() -> None:
    """The candidates --items N sends: N of them, the demo's 22 first as they are, and
    under the demo's policy the budget, duplicate and negative-token exclusions all
    occur many times (so a 5,000-item picture shows each reason in numbers)."""
    shared = _script("_screenshots")
    made = shared.candidates(600)
    assert len(made) == 600
    demo = shared.candidates(22)
    assert made[:22] == demo
    policy = Policy.from_json((ROOT / "src" / "cupellation" / "_data" / "demo_policy.json")
                              .read_text(encoding="utf-8"))
    report = policy.build_pipeline().dry_run([ContextItem.from_dict(m) for m in made])
    reasons = Counter(entry.reason.name for entry in report.excluded)
    assert reasons["BudgetExceeded"] > 100
    assert reasons["Deduplicated"] > 1
    assert reasons["NegativeTokens"] > 10


@pytest.mark.slow
@pytest.mark.mlflow
def test_the_mlflow_script_photographs_root_stage_and_trace_list(tmp_path: Path) -> None:
    """scripts/mlflow_screenshot.py starts its own MLflow, sends the demo, and writes
    the root span's view, the Slice span's view and the trace list as PNGs (real
    pictures: far larger than an empty page), leaving nothing running."""
    done = subprocess.run([sys.executable, str(SCRIPTS / "mlflow_screenshot.py"),
                           "--out-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "selectedEvaluationId=tr-" in done.stdout
    for name in ("mlflow-trace.png", "mlflow-stage.png", "mlflow-traces.png"):
        shot = (tmp_path / name).read_bytes()
        assert shot[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(shot) > 40_000, name
