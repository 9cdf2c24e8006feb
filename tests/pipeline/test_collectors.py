"""Collectors: the null path builds nothing, detail levels gate item events,
observers see events synchronously and cannot break a run, fan-out feeds many."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import msgspec
import pytest
from opentelemetry.sdk.trace import TracerProvider

import cupellation._attribution as attribution_module
import cupellation._pipeline as pipeline_module
import cupellation._run as run_module
import cupellation.events as events_module
from cupellation import (
    ContextBudget,
    ContextItem,
    CountQuotaSlice,
    GreedySlice,
)
from cupellation._collectors import (
    NULL_COLLECTOR,
    DiagnosticTraceCollector,
    FanOutCollector,
    TraceCollector,
    TraceDetailLevel,
)
from cupellation._model import ScoredItem
from cupellation._pipeline import Pipeline
from cupellation._run import use_trace_context
from cupellation._tracecontext import current_span_ids
from cupellation.events import (
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunStarted,
    StageCompleted,
    StageStarted,
)
from cupellation.reasons import NegativeTokens
from cupellation.scoring import RecencyScorer
from cupellation.slicing import CountQuotaEntry

T0 = datetime(2024, 1, 1, tzinfo=UTC)
ITEMS = [ContextItem(f"m{k}", 10 * (k + 1), timestamp=T0 + timedelta(days=k)) for k in range(5)]
ITEMS.append(ContextItem("neg", -1))
BUDGET = ContextBudget(1000, 60)
PIPELINE = Pipeline(scorer=RecencyScorer())

#: Every event class the pipeline module builds itself (the reasons are built by
#: the attribution module, which explains what the pipeline decided).
RUN_AND_STAGE_EVENTS = ("RunStarted", "StageStarted", "StageCompleted", "Overflow",
                        "CountShortfall", "RunCompleted", "RunFailed")
#: What it builds for item decisions: the batches and the reasons they hold.
ITEM_BUILDERS = ("ItemEventBatch", "BudgetExceeded", "CountCapExceeded", "Deduplicated",
                 "NegativeTokens", "PinnedOverride")
#: The per-item event classes, which a batch builds (in cupellation.events) when read.
ITEM_EVENTS = ("ItemExcluded", "ItemIncluded")


def _refuse(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{what} was constructed")

    return refuse


def _forbid(monkeypatch: pytest.MonkeyPatch, pipeline_names: Sequence[str],
            what: str) -> None:
    """Replace ``pipeline_names`` in the pipeline, run and attribution modules (wherever
    each is used), and the per-item event classes in cupellation.events (where a
    batch builds them), with traps."""
    for name in pipeline_names:
        users = [module for module in (pipeline_module, run_module, attribution_module)
                 if hasattr(module, name)]
        assert users, f"{name} is built by none of these modules"
        for module in users:
            monkeypatch.setattr(module, name, _refuse(what))
    for name in ITEM_EVENTS:
        monkeypatch.setattr(events_module, name, _refuse(what))


class _TakeAll:
    """Ignores the budget so that the Place stage overflows."""

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget) -> list[ContextItem]:
        return [s.item for s in scored]


class _Spy:
    """A third-party collector keeping exactly what each record() call received."""

    is_enabled = True

    def __init__(self, level: TraceDetailLevel) -> None:
        self.detail_level = level
        self.calls: list[Sequence[PipelineEvent]] = []

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        self.calls.append(events)


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
    """With every event class the pipeline builds (run and stage events, item
    batches, the reasons they hold, and the per-item events a batch builds when
    read) replaced by one that fails, a run with the null collector (and with no
    collector) still succeeds and selects what it selected before — through
    deduplication, Truncate, Proceed and count shortfalls — while the same run
    with a diagnostic collector trips the trap, so the trap is real."""
    pipeline, items = SCENARIOS[scenario]
    unpatched = [i.content for i in pipeline.run(items, BUDGET, DiagnosticTraceCollector())]
    _forbid(monkeypatch, (*RUN_AND_STAGE_EVENTS, *ITEM_BUILDERS), "an event object")
    assert [i.content for i in pipeline.run(items, BUDGET, NULL_COLLECTOR)] == unpatched
    assert [i.content for i in pipeline.run(items, BUDGET)] == unpatched
    with pytest.raises(AssertionError, match="event object was constructed"):
        pipeline.run(items, BUDGET, DiagnosticTraceCollector())


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_stage_level_builds_no_item_events(monkeypatch: pytest.MonkeyPatch,
                                          scenario: str) -> None:
    """At StageOnly the pipeline constructs no item batch, no exclusion reason and
    no per-item event — through every scenario — yet still records the run from
    run_started to run_completed."""
    pipeline, items = SCENARIOS[scenario]
    _forbid(monkeypatch, ITEM_BUILDERS, "an item event")
    collector = DiagnosticTraceCollector(TraceDetailLevel.STAGE_ONLY)
    pipeline.run(items, BUDGET, collector)
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


@pytest.mark.parametrize(("level", "exclusions", "inclusions"), [
    (TraceDetailLevel.STAGE_ONLY, False, False),
    (TraceDetailLevel.STAGE_AND_EXCLUSIONS, True, False),
    (TraceDetailLevel.FULL, True, True),
])
def test_item_events_are_gated_by_detail_level(level: TraceDetailLevel, exclusions: bool,
                                                inclusions: bool) -> None:
    """The spec's MUST — item events are not recorded below the item level — now
    holds at the one delivery path: record_item_event is gone, and the pipeline
    hands a collector item batches only as its detail_level asks (exclusion
    batches from StageAndExclusions up, inclusion batches only at Full). Every
    other call is a one-event tuple of a run- or stage-level event.

    Changed deliberately with the event stream: the gate used to sit in
    DiagnosticTraceCollector.record_item_event; the pipeline now gates delivery to its
    caller, and a collector fed by hand discards what its level does not record."""
    spy = _Spy(level)
    PIPELINE.run(ITEMS, BUDGET, spy)
    batches = [c for c in spy.calls if isinstance(c, ItemEventBatch)]
    assert any(b.excluded for b in batches) == exclusions
    assert any(not b.excluded for b in batches) == inclusions
    singles = [c for c in spy.calls if not isinstance(c, ItemEventBatch)]
    assert all(isinstance(c, tuple) and len(c) == 1 for c in singles)
    assert not any(isinstance(c[0], ItemExcluded | ItemIncluded) for c in singles)


def test_a_stage_level_diagnostic_collector_discards_item_events_given_by_hand() -> None:
    """Fed an exclusion batch directly (a replay, a custom caller), a StageOnly
    DiagnosticTraceCollector records nothing of it."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.STAGE_ONLY)
    collector.record(ItemEventBatch(
        run_id="r", first_seq=1, stage=PipelineStage.CLASSIFY, candidate_indices=[0],
        items=[ContextItem("neg", -1)], scores=[0.0], reasons=[NegativeTokens(tokens=-1)]))
    assert collector.events == ()


def test_item_level_run_orders_events_by_stage() -> None:
    """Events arrive in stage order, numbered 0, 1, 2, ... under one run_id: start;
    then per stage its stage_started, its item decisions, its stage_completed
    (the negative-token item during Classify, inclusions during Place);
    completion last. Every candidate is decided exactly once."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    PIPELINE.run(ITEMS, BUDGET, collector)
    events = collector.events
    assert len({e.run_id for e in events}) == 1
    assert [e.seq for e in events] == list(range(len(events)))
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "RunStarted"
    assert kinds[-1] == "RunCompleted"
    assert kinds[1:4] == ["StageStarted", "ItemExcluded", "StageCompleted"]
    starts = [(i, e.stage) for i, e in enumerate(events) if isinstance(e, StageStarted)]
    ends = [(i, e.stage) for i, e in enumerate(events) if isinstance(e, StageCompleted)]
    assert [s for _, s in starts] == [s for _, s in ends] == list(PipelineStage)
    # Stages do not overlap: each completes before the next starts.
    bounds = [(a, b) for (a, _), (b, _) in zip(starts, ends, strict=True)]
    assert all(a < b < c for (a, b), (c, _) in pairwise(bounds))
    stage_of = {i: stage for (a, b), (_, stage) in zip(bounds, starts, strict=True)
                for i in range(a + 1, b)}
    for i, e in enumerate(events):
        if isinstance(e, ItemExcluded):
            assert stage_of[i] == e.stage
        elif isinstance(e, ItemIncluded):
            assert stage_of[i] is PipelineStage.PLACE
    assert any(isinstance(e, ItemIncluded) for e in events)
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
    """A third-party collector whose recording fails, counting the calls it gets."""

    is_enabled = True
    detail_level = TraceDetailLevel.ITEM

    def __init__(self) -> None:
        self.calls = 0

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        self.calls += 1
        raise RuntimeError("sink down")


def test_fan_out_feeds_every_collector_at_its_own_level(
        caplog: pytest.LogCaptureFixture) -> None:
    """One run feeds a Full-level and a StageOnly collector; each gets what it
    asked for, and a failing sibling, logged once and sent nothing more, does
    not stop them. The StageOnly child gets exactly the Full child's run and
    stage events, except that its run_started names its own level and its events
    are numbered as its own level's stream (a fan-out rewrites both per child —
    new with the event stream)."""
    items_level = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    stage_level = DiagnosticTraceCollector(TraceDetailLevel.STAGE_ONLY)
    broken = _Broken()
    checked: TraceCollector = broken
    fan = FanOutCollector(checked, items_level, stage_level, NULL_COLLECTOR)
    assert fan.is_enabled
    assert fan.detail_level is TraceDetailLevel.FULL
    assert NULL_COLLECTOR not in fan.collectors
    with caplog.at_level(logging.ERROR, logger="cupellation"):
        PIPELINE.run(ITEMS, BUDGET, fan)
    assert broken.calls == 1
    assert len([r for r in caplog.records if "sink down" in (r.exc_text or "")]) == 1
    assert items_level.build_report().is_complete
    assert not any(isinstance(e, ItemExcluded | ItemIncluded) for e in stage_level.events)
    full_started, stage_started = items_level.events[0], stage_level.events[0]
    assert isinstance(full_started, RunStarted)
    assert isinstance(stage_started, RunStarted)
    assert (full_started.detail_level, stage_started.detail_level) == ("Full", "StageOnly")
    assert msgspec.structs.replace(stage_started, detail_level="Full") == full_started
    # The same run and stage events, numbered without the gaps of the item events
    # the StageOnly child does not get.
    assert [msgspec.structs.replace(e, seq=0) for e in items_level.events[1:]
            if not isinstance(e, ItemExcluded | ItemIncluded)
            ] == [msgspec.structs.replace(e, seq=0) for e in stage_level.events[1:]]
    assert [e.seq for e in stage_level.events] == list(range(len(stage_level.events)))


@pytest.mark.parametrize("level", [TraceDetailLevel.STAGE_ONLY,
                                   TraceDetailLevel.STAGE_AND_EXCLUSIONS])
def test_a_fan_out_child_reports_like_a_direct_collector_at_its_level(
        level: TraceDetailLevel) -> None:
    """Behind a Full fan-out, a lower-level child's report says the same about what
    it lacks as a collector of that level given the run directly: the level's own
    omissions, and no lost events."""
    direct = DiagnosticTraceCollector(level)
    PIPELINE.run(ITEMS, BUDGET, direct)
    child = DiagnosticTraceCollector(level)
    PIPELINE.run(ITEMS, BUDGET, FanOutCollector(child, DiagnosticTraceCollector("Full")))
    assert child.build_report().incomplete == direct.build_report().incomplete


def test_fan_out_of_disabled_collectors_is_disabled() -> None:
    """A fan-out with nothing enabled is itself disabled, so no events are built."""
    fan = FanOutCollector(NULL_COLLECTOR)
    assert not fan.is_enabled
    assert fan.detail_level is TraceDetailLevel.STAGE_ONLY


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


def test_a_failing_trace_context_source_never_breaks_a_run() -> None:
    """The pipeline asks its trace-context source (the package sets the OpenTelemetry
    API's) for the current ids: a source that raises leaves run_started without ids
    and the run goes on; the package's own source is back afterwards."""
    def broken() -> tuple[str, str] | None:
        raise RuntimeError("no context here")

    tracer = TracerProvider().get_tracer("test")
    use_trace_context(broken)
    try:
        collector = DiagnosticTraceCollector()
        with tracer.start_as_current_span("agent-turn"):
            placed = PIPELINE.run(ITEMS, BUDGET, collector)
    finally:
        use_trace_context(current_span_ids)
    started = collector.events[0]
    assert isinstance(started, RunStarted)
    assert (started.trace_id, started.span_id) == (None, None)
    assert placed


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
