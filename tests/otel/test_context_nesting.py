"""Collectors that attach OpenTelemetry contexts, side by side behind a FanOutCollector,
leave no span current after the run: the end of a stage or run reaches the children
last to first, as nested ``with`` blocks close (the CLI feeds two SpanCollectors at once
with --otlp and its trace file, and a span left current made every later run in the
process a child of it)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    GreedySlice,
    Pipeline,
    RecencyScorer,
)
from cupellation.cli import main
from cupellation.events import PipelineEvent, TraceDetailLevel
from cupellation.otel import SpanCollector, runs_from_spans

ITEMS = [ContextItem(content=f"item {n}", tokens=10 + n) for n in range(6)]
BUDGET = ContextBudget(max_tokens=40, target_tokens=40)
PIPELINE = Pipeline(scorer=RecencyScorer(), slicer=GreedySlice())


def _collector() -> tuple[SpanCollector, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return SpanCollector(tracer_provider=provider, tier="Full", content_capture="full"), exporter


class _Order:
    """Records which child got each event type, in order, into a shared list."""

    def __init__(self, name: str, log: list[tuple[str, str]]) -> None:
        self.name, self.log = name, log

    is_enabled = True
    detail_level = TraceDetailLevel.STAGE_ONLY

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        self.log.extend((event.type, self.name) for event in events)


def test_two_span_collectors_leave_no_span_current_and_each_rebuilds() -> None:
    """Two SpanCollectors behind one FanOutCollector: after the run no span is
    current, and each collector's spans rebuild the in-process report."""
    first, first_spans = _collector()
    second, second_spans = _collector()
    diagnostics = DiagnosticTraceCollector("Full")
    PIPELINE.run(ITEMS, BUDGET, FanOutCollector(first, second, diagnostics))
    assert not trace.get_current_span().get_span_context().is_valid
    for exporter in (first_spans, second_spans):
        (run,) = runs_from_spans(exporter.get_finished_spans())
        assert run.report == diagnostics.build_report()


def test_the_end_of_a_stage_or_run_reaches_the_children_last_to_first() -> None:
    """Starts go first to last, stage and run ends last to first."""
    log: list[tuple[str, str]] = []
    PIPELINE.run(ITEMS, BUDGET, FanOutCollector(_Order("a", log), _Order("b", log)))
    order = {kind: [name for k, name in log if k == kind] for kind, _ in log}
    assert order["run_started"] == ["a", "b"]
    assert order["stage_started"][:2] == ["a", "b"]
    assert order["stage_completed"][:2] == ["b", "a"]
    assert order["run_completed"] == ["b", "a"]


def test_demo_with_otlp_leaves_no_span_current(tmp_path: object,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``cupellation demo --otlp`` run in process (its OTLP collector and its trace
    file's collector side by side) leaves no span current, even when the export fails."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    assert main(["demo", "--out", str(tmp_path), "--quiet", "--otlp"]) == 0
    assert not trace.get_current_span().get_span_context().is_valid
