"""One guarded delivery path, the three detail levels, and the content capture policy."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    EventCollector,
    FanOutCollector,
    Pipeline,
    RecencyScorer,
    TraceDetailLevel,
    build_report,
)
from cupellation.events import (
    ContentCapture,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    RunFailed,
    RunStarted,
    apply_content_capture,
    content_digest,
)
from cupellation.exceptions import BudgetOverflowError, ScorerError
from cupellation.reasons import Deduplicated, PinnedOverride
from cupellation.scoring import FunctionScorer

BUDGET = ContextBudget(max_tokens=100, target_tokens=60)
ITEMS = [ContextItem(content="sys", tokens=20, pinned=True),
         *(ContextItem(content=f"m{i % 4}", tokens=10 + i) for i in range(8)),
         ContextItem(content="neg", tokens=-1)]
PIPELINE = Pipeline(scorer=RecencyScorer(), budget=BUDGET)


class Recorder(EventCollector):
    """Keeps every event it is given."""

    def __init__(self, level: TraceDetailLevel = TraceDetailLevel.FULL) -> None:
        super().__init__(level)
        self.seen: list[PipelineEvent] = []

    def on_event(self, event: PipelineEvent, /) -> None:
        self.seen.append(event)


class Exploding(Recorder):
    """Raises on the n-th record() call, counting calls."""

    def __init__(self, at_call: int) -> None:
        super().__init__()
        self.at_call = at_call
        self.calls = 0

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        self.calls += 1
        if self.calls == self.at_call:
            raise RuntimeError("sink is broken")
        super().record(events)


@pytest.mark.parametrize("at_call", [1, 2, 5, 9])
def test_a_raising_collector_changes_nothing_and_is_dropped(
        at_call: int, caplog: pytest.LogCaptureFixture) -> None:
    """A collector that raises leaves the run's result unchanged, is logged once on the
    cupellation logger, and is called no more in that run."""
    expected = PIPELINE.run(ITEMS)
    collector = Exploding(at_call)
    with caplog.at_level(logging.ERROR, logger="cupellation"):
        assert PIPELINE.run(ITEMS, collector=collector) == expected
    assert collector.calls == at_call
    records = [r for r in caplog.records if r.name == "cupellation"]
    assert len(records) == 1
    assert "sink is broken" in (records[0].exc_text or "")


def test_a_failed_run_reraises_its_own_exception_when_the_collector_raises_too() -> None:
    """A collector raising on run_failed never replaces the run's exception: the
    very same object propagates."""
    seen: list[BaseException] = []

    class RaisesOnFailure(Recorder):
        def on_event(self, event: PipelineEvent, /) -> None:
            if isinstance(event, RunFailed):
                assert event.exception is not None
                seen.append(event.exception)
                raise RuntimeError("collector failure")

    throwing = Pipeline(scorer=RecencyScorer(), budget=ContextBudget(max_tokens=100,
                                                                      target_tokens=10))
    with pytest.raises(BudgetOverflowError) as caught:
        throwing.run([ContextItem(content="big", tokens=20, pinned=True),
                      ContextItem(content="x", tokens=1)], collector=RaisesOnFailure())
    assert seen == [caught.value]


def test_run_failed_carries_the_identical_exception() -> None:
    """run_failed holds the exception object the caller receives."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    bad = Pipeline(scorer=FunctionScorer(lambda item, items: float("nan")), budget=BUDGET)
    with pytest.raises(ScorerError) as caught:
        bad.run(ITEMS, collector=collector)
    failed = collector.events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.exception is caught.value
    assert failed.error_type == "ScorerError"
    assert failed.stage is not None


def test_a_raising_fan_out_child_is_dropped_and_the_others_carry_on(
        caplog: pytest.LogCaptureFixture) -> None:
    """In a fan-out, one raising child is logged once and skipped; the others get
    the whole run and fold the same report as alone."""
    broken, healthy = Exploding(3), DiagnosticTraceCollector(TraceDetailLevel.FULL)
    alone = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    PIPELINE.run(ITEMS, collector=alone)
    with caplog.at_level(logging.ERROR, logger="cupellation"):
        PIPELINE.run(ITEMS, collector=FanOutCollector(broken, healthy))
    assert broken.calls == 3
    assert len([r for r in caplog.records if r.name == "cupellation"]) == 1
    # Equal but for the stage timings, which differ between two runs.
    got, want = healthy.build_report(), alone.build_report()
    assert replace(got, events=()) == replace(want, events=())
    assert [e.stage for e in got.events] == [e.stage for e in want.events]


def test_an_observer_that_raises_is_told_nothing_more_but_recording_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    """A DiagnosticTraceCollector's observer that raises is logged once and detached;
    the collector's report is still whole."""
    calls: list[str] = []

    def observer(event: PipelineEvent) -> None:
        calls.append(event.type)
        raise ValueError("observer bug")

    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL, observer=observer)
    with caplog.at_level(logging.ERROR, logger="cupellation"):
        PIPELINE.run(ITEMS, collector=collector)
    assert calls == ["run_started"]
    assert collector.build_report().is_complete


@pytest.mark.parametrize(("level", "exclusions", "inclusions"), [
    (TraceDetailLevel.STAGE_ONLY, False, False),
    (TraceDetailLevel.STAGE_AND_EXCLUSIONS, True, False),
    (TraceDetailLevel.FULL, True, True),
])
def test_detail_levels_match_the_opentelemetry_tiers(level: TraceDetailLevel, exclusions: bool,
                                                     inclusions: bool) -> None:
    """StageOnly records no item event, StageAndExclusions only exclusions, Full
    everything; run_started names the tier."""
    recorder = Recorder(level)
    PIPELINE.run(ITEMS, collector=recorder)
    types = {type(e) for e in recorder.seen}
    assert (ItemExcluded in types) == exclusions
    assert (ItemIncluded in types) == inclusions
    started = recorder.seen[0]
    assert isinstance(started, RunStarted)
    assert started.detail_level == level.tier


def test_detail_level_names_parse() -> None:
    """The tier names, member names and legacy aliases all parse; the highest member
    records everything."""
    assert TraceDetailLevel.parse("StageAndExclusions") is TraceDetailLevel.STAGE_AND_EXCLUSIONS
    assert TraceDetailLevel.parse("full") is TraceDetailLevel.FULL
    assert TraceDetailLevel.parse("ITEM") is TraceDetailLevel.FULL
    assert max(TraceDetailLevel) is TraceDetailLevel.FULL
    with pytest.raises(ValueError, match="detail_level"):
        TraceDetailLevel.parse("verbose")


def test_fan_out_gives_each_child_its_own_level() -> None:
    """A fan-out of a StageOnly and a Full child delivers item events only to the
    latter, and each child's run_started names its own level."""
    low, high = Recorder(TraceDetailLevel.STAGE_ONLY), Recorder(TraceDetailLevel.FULL)
    PIPELINE.run(ITEMS, collector=FanOutCollector(low, high))
    assert not any(isinstance(e, ItemExcluded | ItemIncluded) for e in low.seen)
    assert any(isinstance(e, ItemIncluded) for e in high.seen)
    assert [e.detail_level for e in (low.seen[0], high.seen[0])  # type: ignore[union-attr]
            ] == ["StageOnly", "Full"]


def _full_events() -> tuple[PipelineEvent, ...]:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    PIPELINE.run(ITEMS, collector=collector)
    return collector.events


def test_hash_capture_replaces_content_with_a_stable_digest() -> None:
    """Under hash capture equal content stays equal, metadata is dropped, reasons (by
    index) are untouched, and run_started records the policy."""
    events = [apply_content_capture(e, "hash") for e in _full_events()]
    started = events[0]
    assert isinstance(started, RunStarted)
    assert started.content_capture == "hash"
    items = [e for e in events if isinstance(e, ItemExcluded | ItemIncluded)]
    assert all(e.item.content.startswith("sha256:") and not e.item.metadata for e in items)
    assert content_digest("m1") == content_digest("m1") != content_digest("m2")
    report = build_report(events)
    dedup = [x for x in report.excluded if isinstance(x.reason, Deduplicated)]
    assert dedup
    assert all(x.reason == Deduplicated(deduplicated_against=x.item.content) for x in dedup)
    assert any("captured as 'hash'" in p for p in report.incomplete)


def test_none_capture_names_the_candidate_index() -> None:
    """Under none capture content becomes a placeholder naming the candidate."""
    events = [apply_content_capture(e, ContentCapture.NONE) for e in _full_events()]
    for event in events:
        if isinstance(event, ItemExcluded | ItemIncluded):
            assert event.item.content == (
                f"<candidate {event.candidate_index}: content not captured>")


def test_full_capture_is_the_identity() -> None:
    """Full capture returns each event unchanged (the same object)."""
    for event in _full_events():
        assert apply_content_capture(event, "full") is event


def test_report_json_keeps_the_seeds_string_reference_fields() -> None:
    """The report resolves candidate indices to content: Deduplicated and
    PinnedOverride are strings in the report's JSON, as the wire format has them."""
    pipeline = Pipeline(scorer=RecencyScorer(),
                        budget=ContextBudget(max_tokens=100, target_tokens=40))
    items = [ContextItem(content="pin", tokens=30, pinned=True),
             ContextItem(content="dup", tokens=5), ContextItem(content="dup", tokens=5),
             ContextItem(content="wide", tokens=20)]
    report = pipeline.dry_run(items)
    reasons = {x.item.content: x.reason for x in report.excluded}
    assert reasons["dup"] == Deduplicated(deduplicated_against="dup")
    assert reasons["wide"] == PinnedOverride(displaced_by="pin")
    assert '"displaced_by":"pin"' in report.to_json()


def test_batches_are_the_only_item_delivery() -> None:
    """Item decisions reach record() as ItemEventBatch objects, one per stage, each
    before that stage's stage_completed."""
    batches: list[ItemEventBatch] = []
    order: list[str] = []

    class Spy(Recorder):
        def record(self, events: Sequence[PipelineEvent], /) -> None:
            if isinstance(events, ItemEventBatch):
                batches.append(events)
                order.append("batch")
            else:
                assert len(events) == 1
                order.append(events[0].type)
            super().record(events)

    PIPELINE.run(ITEMS, collector=Spy())
    assert {str(b.stage) for b in batches if b.excluded} == {"Classify", "Deduplicate",
                                                              "Slice"}
    assert sum(not b.excluded for b in batches) == 1
    for k, entry in enumerate(order):
        if entry == "batch":
            assert order[k + 1] == "stage_completed"


def test_a_collector_whose_properties_raise_leaves_the_run_untraced(
        caplog: pytest.LogCaptureFixture) -> None:
    """A collector whose is_enabled raises is logged and skipped; the run returns its
    usual window."""

    class Broken(Recorder):
        @property
        def is_enabled(self) -> bool:
            raise RuntimeError("cannot tell")

    with caplog.at_level(logging.ERROR, logger="cupellation"):
        assert PIPELINE.run(ITEMS, collector=Broken()) == PIPELINE.run(ITEMS)
    assert any("cannot tell" in (r.exc_text or "") for r in caplog.records)
