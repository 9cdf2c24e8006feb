"""cupellation.testing.capture_spans: in-memory spans and metrics for tests, like the
SDK's InMemorySpanExporter, with reports rebuilt from them."""

from __future__ import annotations

from opentelemetry.sdk.trace import SpanLimits

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    Pipeline,
    RecencyScorer,
    TraceDetailLevel,
)
from cupellation.testing import capture_spans

BUDGET = ContextBudget(max_tokens=100, target_tokens=30)
ITEMS = [ContextItem(f"m{k}", 4 + k) for k in range(10)]
PIPELINE = Pipeline(scorer=RecencyScorer(), budget=BUDGET)


def test_capture_spans_gives_spans_reports_and_metrics() -> None:
    """The captured collector records whole runs: the rebuilt report equals the
    in-process one, metrics are readable by name, and clear() forgets the spans."""
    with capture_spans() as captured:
        diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
        PIPELINE.run(ITEMS, BUDGET, FanOutCollector(diagnostics, captured.collector))
        assert len(captured.spans) == 6
        assert captured.reports() == [diagnostics.build_report()]
        (run,) = captured.runs()
        assert run.is_complete
        assert captured.metrics()["cupel.runs"][0].value == 1
        captured.clear()
        assert len(captured.spans) == 0
        assert captured.collector.tier == "Full"
        assert captured.collector.content_capture.value == "full"


def test_capture_spans_takes_a_tier_and_span_limits() -> None:
    """A lower tier and the SDK's own limits can be asked for: with max_events=2 the
    rebuilt report says events were lost."""
    with capture_spans("StageAndExclusions", content_capture="hash",
                       span_limits=SpanLimits(max_events=2), layout="events") as captured:
        PIPELINE.run(ITEMS, BUDGET, captured.collector)
        (report,) = captured.reports()
    assert captured.collector.tier == "StageAndExclusions"
    assert any("lost" in problem for problem in report.incomplete)
    assert any("'hash'" in problem for problem in report.incomplete)
