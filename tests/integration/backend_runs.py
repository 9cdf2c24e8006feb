"""Workloads the live backend tests share (Phoenix and MLflow): an agent loop and a
5,000-candidate run, sent through a SpanCollector with the layout asked for, each
returning the in-process reports by run id."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.trace import TracerProvider

from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    GreedySlice,
    KindScorer,
    Pipeline,
    RecencyScorer,
    SelectionReport,
    UShapedPlacer,
)
from cupellation.otel import SpanCollector

#: The span layouts SpanCollector writes (add "columns" here once it takes ``layout=``).
LAYOUTS = ["columns", "events"]
_TAKES_LAYOUT = "layout" in inspect.signature(SpanCollector).parameters


def span_collector(provider: TracerProvider, tier: str, layout: str) -> SpanCollector:
    """A SpanCollector at ``tier`` with full content capture, in ``layout``."""
    options: dict[str, Any] = {"layout": layout} if _TAKES_LAYOUT else {}
    return SpanCollector(tracer_provider=provider, tier=tier, content_capture="full",
                         **options)


AGENT_TURNS = [
    ("user", "My invoice for October is wrong."),
    ("tool", "lookup_invoice(oct) -> 3 line items, total 412.00 EUR " + "x" * 200),
    ("assistant", "I see a duplicate line for the add-on."),
    ("user", "Can you refund the duplicate?"),
    ("tool", "refund(line=2) -> ok, 39.00 EUR " + "y" * 150),
    ("user", "Thanks. Also, will this happen again next month?"),
]




def agent_loop(provider: TracerProvider, tier: str, layout: str) -> dict[str, SelectionReport]:
    """Six agent steps, each selection run under the application's ``agent.step N``
    span; the in-process reports by run id."""
    tracer = provider.get_tracer("agent")
    spans = span_collector(provider, tier, layout)
    pipeline = Pipeline(scorer=CompositeScorer([(RecencyScorer(), 2.0), (KindScorer(), 1.0)]),
                        placer=UShapedPlacer(),
                        budget=ContextBudget(max_tokens=300, target_tokens=100,
                                             output_reserve=50))
    start = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    history = [ContextItem(content="You are a billing support agent.", tokens=12,
                           kind="SystemPrompt", pinned=True)]
    reports = {}
    for step, (role, text) in enumerate(AGENT_TURNS):
        history.append(ContextItem(content=f"{role}: {text}", tokens=max(4, len(text) // 4),
                                   kind="ToolOutput" if role == "tool" else "Message",
                                   timestamp=start + timedelta(minutes=step)))
        with tracer.start_as_current_span(f"agent.step {step}"):
            diagnostics = DiagnosticTraceCollector(tier)
            pipeline.run(history, collector=FanOutCollector(diagnostics, spans))
            reports[diagnostics.events[0].run_id] = diagnostics.build_report()
    return reports


def five_thousand(provider: TracerProvider) -> dict[str, SelectionReport]:
    """A 5,000-candidate run at Full in the events layout (the caller raises the SDK's
    event limit); the in-process report by run id."""
    spans = span_collector(provider, "Full", "events")
    items = [ContextItem(f"candidate {k}: " + "w" * (k % 13), 20 + k % 37,
                         kind="ToolOutput" if k % 5 == 0 else "Message")
             for k in range(5000)]
    diagnostics = DiagnosticTraceCollector("Full")
    Pipeline(RecencyScorer(), GreedySlice()).run(
        items, ContextBudget(max_tokens=40_000, target_tokens=30_000),
        FanOutCollector(diagnostics, spans))
    return {diagnostics.events[0].run_id: diagnostics.build_report()}
