"""The core (``cupellation``, ``cupellation.otel``, ``cupellation.logs``, the CLI's
``export`` module) needs only ``opentelemetry-api``: it imports and runs a traced
pipeline in an interpreter where the OpenTelemetry SDK and exporters cannot be
imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

#: Run in a fresh interpreter: a meta path finder refuses the SDK, the exporters (and
#: cupellation_exporters, which needs them) before anything is imported.
_SCRIPT = textwrap.dedent('''
    import importlib.abc
    import sys

    BLOCKED = ("opentelemetry.sdk", "opentelemetry.exporter", "cupellation_exporters")

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"blocked for this test: {name}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    for blocked in BLOCKED:  # the blocker works: each is refused
        try:
            __import__(blocked)
        except ImportError:
            pass
        else:
            raise SystemExit(f"{blocked} was importable")

    import cupellation
    import cupellation.cli
    import cupellation.cli._export
    import cupellation.logs
    import cupellation.otel
    from opentelemetry import trace
    from cupellation import (ContextBudget, ContextItem, DiagnosticTraceCollector,
                             FanOutCollector, GreedySlice, Pipeline, RecencyScorer)
    from cupellation.otel import SpanCollector

    items = [ContextItem(f"item {k}", 10 + k) for k in range(20)]
    budget = ContextBudget(max_tokens=200, target_tokens=120)
    pipeline = Pipeline(RecencyScorer(), GreedySlice())
    spans = SpanCollector(tracer_provider=trace.NoOpTracerProvider(), tier="Full")
    assert not spans.is_enabled
    diagnostics = DiagnosticTraceCollector("Full")
    traced = pipeline.run(items, budget, FanOutCollector(diagnostics, spans))
    assert traced and traced == pipeline.run(items, budget)
    assert diagnostics.build_report().is_complete
    # The CLI's export subcommand parses and says, without crashing, what it lacks.
    import argparse, io, contextlib
    parser = argparse.ArgumentParser()
    cupellation.cli._export.add_export_parser(parser.add_subparsers())
    args = parser.parse_args(["export", sys.argv[1], "--to", "file", "--out", "-"])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cupellation.cli._export.run_export(args)
    assert status == 2, status
    assert "cupellation-exporters" in err.getvalue(), err.getvalue()
    leaked = sorted(m for m in sys.modules
                    if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter")))
    assert not leaked, leaked
    print("ok", len(traced))
''')


def test_core_imports_and_traces_with_the_sdk_blocked(tmp_path: Path) -> None:
    """With opentelemetry.sdk, opentelemetry.exporter and cupellation_exporters made
    unimportable, the core and cupellation.cli._export import, a pipeline runs with a
    SpanCollector on the API's no-op provider (disabled; the same window as untraced;
    a complete report beside it), ``cupellation export`` reports the missing
    distribution with exit status 2, and no SDK module was loaded."""
    log = f"{tmp_path}/audit.jsonl"
    with open(log, "w", encoding="utf-8") as empty:
        empty.write("\n")
    result = subprocess.run([sys.executable, "-c", _SCRIPT, log], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok "), result.stdout
