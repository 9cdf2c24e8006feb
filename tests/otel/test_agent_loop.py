"""A small agent loop instrumented end to end: each turn's context selection is a
cupel.pipeline span inside the application's turn span, beside its retrieval and
model call, and every turn's report comes back from the trace."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    Pipeline,
    SelectionReport,
    TraceDetailLevel,
)
from cupellation.events import RunStarted
from cupellation.scoring import CompositeScorer, FunctionScorer, RecencyScorer
from cupellation.testing import capture_spans

from ._support import attrs

T0 = datetime(2025, 6, 1, tzinfo=UTC)
SYSTEM = ContextItem("You are a helpful agent.", 12, kind="SystemPrompt", pinned=True)
QUESTIONS = ["where is my invoice?", "it was charged twice", "please refund one"]
BUDGET = ContextBudget(max_tokens=260, target_tokens=140, output_reserve=40)


def _children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    kids = [s for s in spans
            if s.parent is not None and s.parent.span_id == parent.context.span_id]
    return sorted(kids, key=lambda s: s.start_time or 0)


def test_an_agent_loop_traces_each_turns_selection_inside_the_turn() -> None:
    """Three turns under agent.run: each turn span holds retrieve, cupel.pipeline (with
    its five stages, the relevance scorer's spans under score) and llm.chat in that
    order; every span is in one trace; each run's run_started names its turn span;
    the reports rebuilt from the trace equal the turns' in-process reports."""
    with capture_spans("Full") as captured:
        tracer = captured.tracer_provider.get_tracer("agent")

        def relevance(item: ContextItem, items: Sequence[ContextItem]) -> float:
            with tracer.start_as_current_span("relevance") as span:
                score = float(sum(word in item.content for word in ("invoice", "refund")))
                span.set_attribute("score", score)
                return score

        pipeline = Pipeline(CompositeScorer([(RecencyScorer(), 1.0),
                                             (FunctionScorer(relevance), 2.0)]))
        history: list[ContextItem] = [SYSTEM]
        reports: list[SelectionReport] = []
        runs: list[RunStarted] = []
        turns: list[trace.Span] = []
        with tracer.start_as_current_span("agent.run"):
            for turn, question in enumerate(QUESTIONS):
                with tracer.start_as_current_span("agent.turn") as turn_span:
                    turn_span.set_attribute("turn", turn)
                    turns.append(turn_span)
                    with tracer.start_as_current_span("retrieve"):
                        documents = [ContextItem(f"doc {turn}.{k} about invoice", 30 + 5 * k,
                                                 kind="Document", timestamp=T0)
                                     for k in range(3)]
                    history.append(ContextItem(question, 8,
                                               timestamp=T0 + timedelta(minutes=turn)))
                    diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
                    window = pipeline.run([*history, *documents], BUDGET,
                                          FanOutCollector(diagnostics, captured.collector))
                    reports.append(diagnostics.build_report())
                    first = diagnostics.events[0]
                    assert isinstance(first, RunStarted)
                    runs.append(first)
                    with tracer.start_as_current_span("llm.chat") as chat:
                        chat.set_attribute("gen_ai.operation.name", "chat")
                        chat.set_attribute("gen_ai.usage.input_tokens",
                                           sum(item.tokens for item in window))
                    history.append(ContextItem(f"answer {turn}", 15,
                                               timestamp=T0 + timedelta(minutes=turn, seconds=30)))
        spans = captured.spans
        rebuilt = captured.reports()

    assert len({s.context.trace_id for s in spans}) == 1
    (agent,) = [s for s in spans if s.name == "agent.run"]
    turn_spans = _children(spans, agent)
    assert [s.name for s in turn_spans] == ["agent.turn"] * 3
    for turn, turn_span in enumerate(turn_spans):
        assert attrs(turn_span)["turn"] == turn
        inside = _children(spans, turn_span)
        assert [s.name for s in inside] == ["retrieve", "cupel.pipeline", "llm.chat"]
        pipeline_span = inside[1]
        stages = _children(spans, pipeline_span)
        assert [s.name for s in stages] == [
            "cupel.stage.classify", "cupel.stage.score", "cupel.stage.deduplicate",
            "cupel.stage.slice", "cupel.stage.place"]
        relevance_spans = _children(spans, stages[1])
        assert relevance_spans
        assert {s.name for s in relevance_spans} == {"relevance"}
        assert runs[turn].span_id == format(turn_span.context.span_id, "016x")
        assert runs[turn].trace_id == format(turn_span.context.trace_id, "032x")
        assert attrs(pipeline_span)["cupel.run.id"] == runs[turn].run_id
    assert rebuilt == reports
    assert all(report.is_complete for report in rebuilt)
    assert [len(r.included) + len(r.excluded) for r in rebuilt] == [5, 7, 9]
