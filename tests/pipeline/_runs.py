"""Random whole runs for the event stream's property tests: candidates, a pipeline that
exercises every decision kind, and the run's recorded events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from cupellation import (
    ContextBudget,
    ContextItem,
    CountQuotaSlice,
    DiagnosticTraceCollector,
    GreedySlice,
    KnapsackSlice,
    OverflowStrategy,
    Pipeline,
    PriorityScorer,
    RecencyScorer,
    SelectionReport,
    TraceDetailLevel,
    UShapedPlacer,
)
from cupellation.events import ItemEventBatch, PipelineEvent
from cupellation.slicing import CountQuotaEntry

T0 = datetime(2024, 1, 1, tzinfo=UTC)

candidates = st.lists(st.builds(
    ContextItem,
    content=st.sampled_from(["a", "b", "c", "d", "e", "f", "<b>&", "é\u2028x"]),
    tokens=st.integers(min_value=-3, max_value=60),
    kind=st.sampled_from(["Message", "Document", "ToolOutput"]),
    priority=st.none() | st.integers(-3, 3),
    tags=st.lists(st.sampled_from(["x", "Y"]), max_size=2),
    metadata=st.none() | st.fixed_dictionaries({"k": st.integers(0, 3)}),
    timestamp=st.none() | st.integers(0, 50).map(lambda d: T0 + timedelta(days=d)),
    pinned=st.sampled_from([False, False, False, False, True]),
), max_size=14)

pipelines = st.builds(
    Pipeline,
    scorer=st.sampled_from([RecencyScorer(), PriorityScorer()]),
    slicer=st.sampled_from([
        GreedySlice(), KnapsackSlice(bucket_size=5),
        CountQuotaSlice(GreedySlice(), [CountQuotaEntry("ToolOutput", require_count=1,
                                                        cap_count=1)]),
    ]),
    placer=st.sampled_from([None, UShapedPlacer()]),
    deduplication=st.booleans(),
    overflow_strategy=st.sampled_from([OverflowStrategy.PROCEED, OverflowStrategy.TRUNCATE]),
)

budgets = st.builds(
    lambda target, extra, reserve: ContextBudget(
        max_tokens=target + extra + reserve, target_tokens=target, output_reserve=reserve),
    st.integers(0, 200), st.integers(0, 100), st.integers(0, 20))


@dataclass(frozen=True)
class RecordedRun:
    """One run's recorded events and the report folded in process."""

    events: tuple[PipelineEvent, ...]
    entries: tuple[PipelineEvent | ItemEventBatch, ...]
    report: SelectionReport
    failed: bool


def record(pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget,
           level: TraceDetailLevel = TraceDetailLevel.FULL) -> RecordedRun:
    """Run once with a DiagnosticTraceCollector and keep what it saw."""
    collector = DiagnosticTraceCollector(level)
    failed = False
    try:
        pipeline.run(items, budget, collector)
    except Exception:
        failed = True
    entries = tuple(collector._entries)
    return RecordedRun(collector.events, entries, collector.build_report(), failed)


runs = st.builds(record, pipelines, candidates, budgets)
