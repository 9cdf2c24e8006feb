"""Collectors: the null path builds nothing, detail levels gate item events,
observers see events synchronously and cannot break a run, fan-out feeds many."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import cupellation._pipeline as pipeline_module
from cupellation import (
    ContextBudget,
    ContextItem,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    ScoredItem,
)
from cupellation._collectors import (
    NULL_COLLECTOR,
    DiagnosticTraceCollector,
    FanOutCollector,
    TraceCollector,
    TraceDetailLevel,
)
from cupellation._events import (
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    RunCompleted,
    RunStarted,
    StageCompleted,
)
from cupellation._pipeline import Pipeline
from cupellation.scoring import RecencyScorer

T0 = datetime(2024, 1, 1, tzinfo=UTC)
ITEMS = [ContextItem(f"m{k}", 10 * (k + 1), timestamp=T0 + timedelta(days=k)) for k in range(5)]
ITEMS.append(ContextItem("neg", -1))
BUDGET = ContextBudget(1000, 60)
PIPELINE = Pipeline(scorer=RecencyScorer())

EVENT_NAMES = ("RunStarted", "StageCompleted", "ItemExcluded", "ItemEventBatch", "Overflow",
               "CountShortfall", "RunCompleted", "RunFailed")


def _forbid_event_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an event object was constructed")

    for name in EVENT_NAMES:
        monkeypatch.setattr(pipeline_module, name, refuse)
    # Should a hot path build events with tuple.__new__(EventType, ...), trap that too.
    real_new = tuple.__new__

    class TrappedTuple(tuple):  # type: ignore[type-arg]
        def __new__(cls, *args: Any) -> Any:
            if getattr(cls, "__name__", "") in (*EVENT_NAMES, "ItemIncluded"):
                raise AssertionError("an event object was constructed")
            return real_new(cls, *args)

    monkeypatch.setattr(pipeline_module, "tuple", TrappedTuple, raising=False)


class _TakeAll:
    """Ignores the budget so that the Place stage overflows."""

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget) -> list[ContextItem]:
        return [s.item for s in scored]


DUPLICATED = [*ITEMS, ContextItem("m1", 10, timestamp=T0)]
OVERFLOWING = [ContextItem("pin", 30, pinned=True), *ITEMS]
SCENARIOS: dict[str, tuple[Pipeline, list[ContextItem]]] = {
    "plain": (PIPELINE, ITEMS),
    "duplicates": (PIPELINE, DUPLICATED),
    "truncate": (Pipeline(RecencyScorer(), _TakeAll(), overflow_strategy="truncate"),
                 OVERFLOWING),
    "proceed": (Pipeline(RecencyScorer(), _TakeAll(), overflow_strategy="proceed"),
                OVERFLOWING),
    "shortfall": (Pipeline(RecencyScorer(), CountQuotaSlice(
        GreedySlice(), [CountQuotaEntry("Memory", 2, cap_count=2)])), ITEMS),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_null_collector_path_constructs_no_event(monkeypatch: pytest.MonkeyPatch,
                                                 scenario: str) -> None:
    """With every event constructor the pipeline uses replaced by one that fails,
    a run with the null collector (and with no collector) still succeeds and
    selects what it selected before — through deduplication, Truncate, Proceed
    and count shortfalls — while the same run with a diagnostic collector trips
    the trap, so the trap is real."""
    pipeline, items = SCENARIOS[scenario]
    unpatched = [i.content for i in pipeline.run(items, BUDGET, DiagnosticTraceCollector())]
    _forbid_event_construction(monkeypatch)
    assert [i.content for i in pipeline.run(items, BUDGET, NULL_COLLECTOR)] == unpatched
    assert [i.content for i in pipeline.run(items, BUDGET)] == unpatched
    with pytest.raises(AssertionError, match="event object was constructed"):
        pipeline.run(items, BUDGET, DiagnosticTraceCollector())


def test_stage_level_builds_no_item_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """At Stage level the pipeline does not even construct item events."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an item event was constructed")

    monkeypatch.setattr(pipeline_module, "ItemExcluded", refuse)
    monkeypatch.setattr(pipeline_module, "ItemEventBatch", refuse)
    collector = DiagnosticTraceCollector(TraceDetailLevel.STAGE)
    PIPELINE.run(ITEMS, BUDGET, collector)
    assert isinstance(collector.events[0], RunStarted)
    assert isinstance(collector.events[-1], RunCompleted)


def test_stage_level_report_is_marked_incomplete() -> None:
    """A Stage-level report keeps the stage timings but says its item lists are not whole."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.STAGE)
    PIPELINE.run(ITEMS, BUDGET, collector)
    report = collector.build_report()
    assert len(report.events) == 5
    assert report.included == ()
    assert report.excluded == ()
    assert not report.is_complete


def test_record_item_event_is_gated_by_detail_level() -> None:
    """The collector itself drops item events at Stage level (the spec's MUST)."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.STAGE)
    event = RunCompleted("r", 1.0, 0, 0, 0)
    collector.record_item_event(event)
    assert len(collector.events) == 0
    collector.record_stage_event(event)
    assert list(collector.events) == [event]


def test_item_level_run_orders_events_by_stage() -> None:
    """Events arrive in stage order: start, each stage's item decisions before its
    completion, inclusions at Place, completion last; all share one run_id."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    PIPELINE.run(ITEMS, BUDGET, collector)
    events = collector.events
    assert len({e.run_id for e in events}) == 1
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "RunStarted"
    assert kinds[-1] == "RunCompleted"
    first_stage_done = kinds.index("StageCompleted")
    assert kinds[1] == "ItemExcluded"  # the negative-token item, during Classify
    assert first_stage_done == 2
    last_stage = max(i for i, e in enumerate(events) if isinstance(e, StageCompleted))
    included_at = [i for i, e in enumerate(events) if isinstance(e, ItemIncluded)]
    assert included_at
    assert max(included_at) < last_stage
    decided = sorted(e.candidate_index for e in events
                     if isinstance(e, ItemExcluded | ItemIncluded))
    assert decided == list(range(len(ITEMS)))


def test_observer_is_called_synchronously_for_each_event() -> None:
    """The observer sees every recorded event, in order, while the run is going."""
    seen: list[PipelineEvent] = []
    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM, observer=seen.append)
    PIPELINE.run(ITEMS, BUDGET, collector)
    assert tuple(seen) == collector.events


def test_raising_observer_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    """An observer that raises is logged on the 'cupellation' logger; the run and
    its report are unaffected."""

    def explode(event: PipelineEvent) -> None:
        raise RuntimeError("observer bug")

    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM, observer=explode)
    with caplog.at_level(logging.ERROR, logger="cupellation"):
        out = PIPELINE.run(ITEMS, BUDGET, collector)
    assert out == PIPELINE.run(ITEMS, BUDGET)
    assert collector.build_report().is_complete
    assert any("observer bug" in (r.exc_text or "") or r.exc_info for r in caplog.records)
    assert all(r.name == "cupellation" for r in caplog.records)


class _Broken:
    """A third-party collector whose recording fails."""

    is_enabled = True
    detail_level = TraceDetailLevel.ITEM

    def record_stage_event(self, event: PipelineEvent) -> None:
        raise RuntimeError("sink down")

    def record_item_event(self, event: PipelineEvent) -> None:
        raise RuntimeError("sink down")


def test_fan_out_feeds_every_collector_at_its_own_level() -> None:
    """One run feeds an Item-level and a Stage-level collector; each gets what
    it asked for and a failing sibling does not stop them."""
    items_level = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    stage_level = DiagnosticTraceCollector(TraceDetailLevel.STAGE)
    broken: TraceCollector = _Broken()
    fan = FanOutCollector(broken, items_level, stage_level, NULL_COLLECTOR)
    assert fan.is_enabled
    assert fan.detail_level is TraceDetailLevel.ITEM
    assert NULL_COLLECTOR not in fan.collectors
    PIPELINE.run(ITEMS, BUDGET, fan)
    assert items_level.build_report().is_complete
    assert not any(isinstance(e, ItemExcluded | ItemIncluded) for e in stage_level.events)
    assert [e for e in items_level.events if not isinstance(e, ItemExcluded | ItemIncluded)] == \
        list(stage_level.events)


def test_fan_out_of_disabled_collectors_is_disabled() -> None:
    """A fan-out with nothing enabled is itself disabled, so no events are built."""
    fan = FanOutCollector(NULL_COLLECTOR)
    assert not fan.is_enabled
    assert fan.detail_level is TraceDetailLevel.STAGE


def test_run_started_carries_the_current_span_ids() -> None:
    """Inside an OpenTelemetry span (SDK tracer, local provider — no global state
    touched) run_started carries that span's trace and span ids; outside, none."""
    tracer = TracerProvider().get_tracer("test")
    collector = DiagnosticTraceCollector()
    with tracer.start_as_current_span("agent-turn") as span:
        PIPELINE.run(ITEMS, BUDGET, collector)
    started = collector.events[0]
    assert isinstance(started, RunStarted)
    context = span.get_span_context()
    assert started.trace_id == f"{context.trace_id:032x}"
    assert started.span_id == f"{context.span_id:016x}"
    outside = DiagnosticTraceCollector()
    PIPELINE.run(ITEMS, BUDGET, outside)
    first = outside.events[0]
    assert isinstance(first, RunStarted)
    assert (first.trace_id, first.span_id) == (None, None)


def test_run_ids_are_unique_hex_and_differ_in_a_forked_child() -> None:
    """Each run gets its own 32-hex-digit run_id; a forked child process draws
    from a fresh random prefix, so it never repeats its parent's ids."""
    def run_id() -> str:
        collector = DiagnosticTraceCollector()
        PIPELINE.run([], BUDGET, collector)
        return collector.events[0].run_id

    first, second = run_id(), run_id()
    assert first != second
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report one id and leave at once
        os.write(write_end, run_id().encode())
        os._exit(0)
    os.close(write_end)
    child = os.read(read_end, 64).decode()
    os.waitpid(pid, 0)
    assert child[:16] != first[:16]
    assert child != run_id()
