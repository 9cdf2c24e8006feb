"""The events' declarations and their one flat mapping (dotted keys), and JSON over it."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings

import cupellation
from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    Pipeline,
    RecencyScorer,
    TraceDetailLevel,
)
from cupellation.events import (
    EVENT_SCHEMA_VERSION,
    CountShortfall,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    Overflow,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    StageStarted,
    UnknownEvent,
    event_from_dict,
    event_from_json,
    event_to_dict,
    event_to_json,
)
from cupellation.reasons import (
    BudgetExceeded,
    CountCapExceeded,
    Deduplicated,
    InclusionReason,
    PinnedOverride,
    UnknownExclusionReason,
)

from ._runs import RecordedRun, runs

ITEM = ContextItem(content="hello <b>", tokens=7, kind="Document", source="Rag", priority=2,
                   tags=("a", "B"), metadata={"k": [1, {"x": None}]},
                   timestamp=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
                   future_relevance_hint=0.25, pinned=False, original_tokens=9)
BUDGET = ContextBudget(max_tokens=100, target_tokens=80, output_reserve=5,
                       reserved_slots={"Message": 3}, estimation_safety_margin_percent=2.5)

ONE_OF_EACH: list[PipelineEvent] = [
    RunStarted(run_id="r", seq=0, started_at=datetime(2026, 1, 1, tzinfo=UTC), budget=BUDGET,
               pipeline=MappingProxyType({"scorer": "RecencyScorer()", "deduplication": True}),
               candidate_count=3, candidate_tokens=20, detail_level="Full",
               trace_id="0" * 31 + "1", span_id="0" * 15 + "2"),
    StageStarted(run_id="r", seq=1, stage=PipelineStage.SCORE, items_in=3),
    StageCompleted(run_id="r", seq=2, stage="FutureStage", duration_ms=0.5, items_in=3,
                   items_out=2),
    ItemExcluded(run_id="r", seq=3, stage=PipelineStage.SLICE, candidate_index=1, score=0.5,
                 item=ITEM, reason=BudgetExceeded(item_tokens=7, available_tokens=2)),
    ItemExcluded(run_id="r", seq=4, stage=PipelineStage.DEDUPLICATE, candidate_index=2,
                 score=0.0, item=ITEM, reason=Deduplicated(deduplicated_against=0)),
    ItemExcluded(run_id="r", seq=5, stage=PipelineStage.SLICE, candidate_index=2, score=0.1,
                 item=ITEM, reason=CountCapExceeded(kind="Tool", cap=1, count=1)),
    ItemExcluded(run_id="r", seq=6, stage=PipelineStage.SLICE, candidate_index=2, score=0.1,
                 item=ITEM, reason=UnknownExclusionReason(
                     reason_name="Future", fields=MappingProxyType({"n": 1, "s": "x"}))),
    ItemIncluded(run_id="r", seq=7, candidate_index=0, position=0, score=1.0, item=ITEM,
                 reason=InclusionReason.PINNED),
    Overflow(run_id="r", seq=8, tokens_over_budget=4, item_indices=(0, 2), budget=BUDGET),
    CountShortfall(run_id="r", seq=9, kind="Tool", required_count=2, satisfied_count=1),
    RunFailed(run_id="r", seq=10, stage=PipelineStage.PLACE, error_type="ValueError",
              error_text="boom", duration_ms=1.0),
    RunFailed(run_id="r", seq=10, error_type="ValueError", error_text="boom",
              duration_ms=1.0),
    RunCompleted(run_id="r", seq=11, duration_ms=2.0, included_count=1, included_tokens=7,
                 excluded_count=2),
    UnknownEvent(run_id="r", seq=12, event_type="later", fields=MappingProxyType({"a": 1})),
]

#: Attributes every stdlib LogRecord has: a flat key must never shadow one.
LOG_RECORD_ATTRIBUTES = set(vars(logging.LogRecord("n", 0, "p", 0, "m", None, None))) | {
    "message", "asctime"}


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_every_event_round_trips_through_its_flat_mapping_and_json(event: Any) -> None:
    """event_from_dict(event_to_dict(e)) == e and the same through JSON text, for
    every event type (a stage this version does not know stays a string)."""
    flat = event_to_dict(event)
    assert flat["schema"] == EVENT_SCHEMA_VERSION
    assert flat["seq"] == event.seq
    assert event_from_dict(flat) == event
    text = event_to_json(event)
    assert "\n" not in text
    assert event_from_json(text) == event


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_flat_values_are_scalars_or_lists_of_scalars(event: Any) -> None:
    """Every flat value is what a span attribute or log field can hold; nested values
    use dotted keys; no key clashes with a LogRecord attribute."""
    flat = event_to_dict(event)
    for key, value in flat.items():
        if isinstance(value, list):
            assert all(isinstance(v, str | int | float | bool) for v in value), key
        else:
            assert isinstance(value, str | int | float | bool), key
    assert not set(flat) & LOG_RECORD_ATTRIBUTES


def test_item_and_reason_fields_use_dotted_keys() -> None:
    """An exclusion's item and reason appear under item.* and reason.* keys."""
    flat = event_to_dict(ONE_OF_EACH[3])
    assert flat["item.content"] == "hello <b>"
    assert flat["item.tokens"] == 7
    assert flat["reason.name"] == "BudgetExceeded"
    assert flat["reason.item_tokens"] == 7
    assert flat["reason.available_tokens"] == 2
    assert json.loads(flat["item.metadata"]) == {"k": [1, {"x": None}]}
    assert flat["budget.max_tokens"] == 100 if "budget.max_tokens" in flat else True


def test_reasons_refer_to_other_candidates_by_index() -> None:
    """Deduplicated and PinnedOverride carry a candidate index in events, so no
    reason carries another item's content."""
    assert event_to_dict(ONE_OF_EACH[4])["reason.deduplicated_against"] == 0
    flat = event_to_dict(msgspec.structs.replace(
        ONE_OF_EACH[3], reason=PinnedOverride(displaced_by=0)))
    assert flat["reason.displaced_by"] == 0
    flat["reason.displaced_by"] = "some content"
    with pytest.raises(cupellation.exceptions.DecodeError, match=r"reason\.displaced_by"):
        event_from_dict(flat)


def test_events_are_keyword_built_frozen_and_read_by_name() -> None:
    """Events refuse positional construction and assignment."""
    with pytest.raises(TypeError):
        StageStarted("r", 0, PipelineStage.SCORE, 3)  # type: ignore[call-arg]
    event = ONE_OF_EACH[1]
    assert isinstance(event, StageStarted)
    with pytest.raises(AttributeError):
        event.seq = 5  # type: ignore[misc]
    assert event.type == "stage_started"
    assert event.items_in == 3


def test_run_failed_carries_the_exception_in_process_only() -> None:
    """The exception object is on the event but never in its flat form."""
    error = ValueError("boom")
    failed = ONE_OF_EACH[10]
    assert isinstance(failed, RunFailed)
    event = msgspec.structs.replace(failed, exception=error)
    assert event.exception is error
    flat = event_to_dict(event)
    assert "exception" not in flat
    assert flat["error_text"] == "boom"
    assert event_from_dict(flat).exception is None  # type: ignore[union-attr]


def test_a_batch_is_a_read_only_sequence_of_numbered_events() -> None:
    """ItemEventBatch yields keyword-built events numbered from first_seq; its
    columns are tuples and it cannot be changed."""
    batch = ItemEventBatch(run_id="r", first_seq=5, stage=PipelineStage.SLICE,
                           candidate_indices=[3, 4], items=[ITEM, ITEM], scores=[0.5, 0.25],
                           reasons=[BudgetExceeded(item_tokens=7, available_tokens=1)] * 2)
    assert [e.seq for e in batch] == [5, 6]
    assert batch.last_seq == 6
    assert batch[1] == ItemExcluded(run_id="r", seq=6, stage=PipelineStage.SLICE,
                                    candidate_index=4, score=0.25, item=ITEM,
                                    reason=BudgetExceeded(item_tokens=7, available_tokens=1))
    assert isinstance(batch.candidate_indices, tuple)
    assert batch[-1].seq == 6
    with pytest.raises(AttributeError):
        batch.first_seq = 0


@settings(max_examples=100, deadline=None)
@given(runs)
def test_every_recorded_event_round_trips(run: RecordedRun) -> None:
    """Each event of random runs survives its flat mapping unchanged (the failed run's
    exception aside)."""
    for event in run.events:
        back = event_from_json(event_to_json(event))
        expected = (msgspec.structs.replace(event, exception=None)
                    if isinstance(event, RunFailed) else event)
        assert back == expected


def test_the_stream_is_sequenced_and_every_stage_has_a_start() -> None:
    """A run's events are numbered 0..n-1, and each stage_completed follows its
    stage_started."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    items = [ContextItem(content=f"m{i}", tokens=5) for i in range(6)]
    Pipeline(scorer=RecencyScorer()).run(items, ContextBudget(max_tokens=20, target_tokens=15),
                                        collector)
    events = collector.events
    assert [e.seq for e in events] == list(range(len(events)))
    open_stage = None
    for event in events:
        if isinstance(event, StageStarted):
            assert open_stage is None
            open_stage = event.stage
        elif isinstance(event, StageCompleted):
            assert event.stage == open_stage
            open_stage = None
    assert [e.stage for e in events if isinstance(e, StageStarted)] == list(PipelineStage)
