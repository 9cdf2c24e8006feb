"""The pytest plugin: registered by entry point, light to load (it imports neither
cupellation nor the optional OpenTelemetry SDK until a fixture is used), and giving
each test its own collector and in-memory span providers without touching global
state."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

from opentelemetry import trace

from cupellation import ContextBudget, ContextItem, DiagnosticTraceCollector, Pipeline
from cupellation.scoring import PriorityScorer
from cupellation.testing import CapturedSpans, expect

ROOT = Path(__file__).resolve().parents[2]
ITEMS = [ContextItem("old", 40, priority=1), ContextItem("mid", 20, priority=2),
         ContextItem("new", 20, priority=3)]
BUDGET = ContextBudget(max_tokens=100, target_tokens=50)
PIPELINE = Pipeline(scorer=PriorityScorer(), budget=BUDGET)


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh pytest session in ``folder`` (entry-point plugins autoloaded)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS", "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=folder, env=env, capture_output=True, text=True,
                          check=False, stdin=subprocess.DEVNULL, timeout=120)


def test_the_plugin_is_registered_by_an_entry_point() -> None:
    """pyproject.toml declares the pytest11 entry point, and the installed metadata
    carries it, pointing at the plugin module."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["entry-points"]["pytest11"] == {
        "cupellation": "cupellation_pytest_plugin"}
    found = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert found["cupellation"] == "cupellation_pytest_plugin"


def test_loading_the_plugin_imports_nothing_of_cupellation_or_opentelemetry() -> None:
    """In a fresh interpreter, importing the plugin module loads no cupellation module
    and no OpenTelemetry module (the SDK least of all): every user's test session
    loads it, and pays nothing for it."""
    code = ("import sys, cupellation_pytest_plugin\n"
            "print(sorted(m for m in sys.modules if m.startswith(('cupellation', "
            "'opentelemetry'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, stdin=subprocess.DEVNULL, timeout=60).stdout
    assert out.strip() == "['cupellation_pytest_plugin']"


def test_the_collector_fixture_gives_a_fresh_collector(
        cupellation_collector: DiagnosticTraceCollector) -> None:
    """``cupellation_collector`` is an Item-level DiagnosticTraceCollector with no
    events yet; a run through it gives a report the vocabulary reads."""
    assert isinstance(cupellation_collector, DiagnosticTraceCollector)
    assert cupellation_collector.events == ()
    PIPELINE.run(ITEMS, BUDGET, cupellation_collector)
    (expect(cupellation_collector.build_report())
        .include_exactly_n_items_with_kind("Message", 2)
        .exclude_item_with_budget_details(lambda i: i.content == "old", 40, 10))


def test_the_spans_fixture_records_in_memory_and_sets_no_global_provider(
        cupellation_spans: CapturedSpans) -> None:
    """``cupellation_spans`` records a run as spans on its own providers: the report
    rebuilt from them reads as the run did, and the global tracer provider is not the
    fixture's (nothing global was set)."""
    assert cupellation_spans.spans == ()
    PIPELINE.run(ITEMS, BUDGET, cupellation_spans.collector)
    (report,) = cupellation_spans.reports()
    expect(report).exclude_item_with_reason("BudgetExceeded").have_kind_coverage_count(1)
    in_process = PIPELINE.dry_run(ITEMS, BUDGET)
    assert (report.included, report.excluded) == (in_process.included, in_process.excluded)
    assert trace.get_tracer_provider() is not cupellation_spans.tracer_provider


def test_a_fresh_session_gets_the_fixtures_per_test(tmp_path: Path) -> None:
    """In a pytest session of its own (a user's project: no conftest), the fixtures are
    there by the entry point alone, and each test gets new ones: the second test sees
    no event or span of the first."""
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer
        from cupellation.testing import expect

        ITEMS = [ContextItem("a", 5), ContextItem("b", 50)]
        BUDGET = ContextBudget(max_tokens=20, target_tokens=20)
        PIPELINE = Pipeline(scorer=RecencyScorer(), budget=BUDGET)

        def test_first(cupellation_collector, cupellation_spans):
            assert cupellation_collector.events == () and cupellation_spans.spans == ()
            PIPELINE.run(ITEMS, BUDGET, cupellation_collector)
            PIPELINE.run(ITEMS, BUDGET, cupellation_spans.collector)
            expect(cupellation_collector.build_report()).have_at_least_n_exclusions(1)
            assert len(cupellation_spans.reports()) == 1

        def test_second(cupellation_collector, cupellation_spans):
            assert cupellation_collector.events == () and cupellation_spans.spans == ()
    """), encoding="utf-8")
    result = _pytest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_without_the_sdk_the_spans_fixture_fails_with_one_clear_line(tmp_path: Path) -> None:
    """Where opentelemetry-sdk is not installed (simulated: the import is blocked), the
    plugin still loads, the collector fixture works, and a test asking for
    ``cupellation_spans`` errors with a line saying what to install."""
    (tmp_path / "conftest.py").write_text(
        "import sys\nsys.modules['opentelemetry.sdk'] = None\n", encoding="utf-8")
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        def test_collector(cupellation_collector):
            assert cupellation_collector.events == ()

        def test_spans(cupellation_spans):
            pass
    """), encoding="utf-8")
    result = _pytest(tmp_path, "-rE")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 passed, 1 error" in result.stdout
    assert ("the cupellation_spans fixture needs the OpenTelemetry SDK: "
            "pip install opentelemetry-sdk") in result.stdout
