"""Spans decode back to the event stream they came from: the attribute mapping is the
exact inverse of the encoder, the fast item encoder agrees with the definition over
the events' flat mapping, and a run rebuilt from spans equals the in-process one."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    TraceDetailLevel,
    build_report,
)
from cupellation.events import (
    ContentCapture,
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
    apply_content_capture,
    event_from_dict,
    event_to_dict,
)
from cupellation.otel import runs_from_spans
from cupellation.otel._encode import (
    Encoded,
    exclusion_batch_attributes,
    exclusion_batch_columns,
    included_batch_attributes,
    included_batch_columns,
    reference_attributes,
    stage_event_attributes,
    text_totals,
)
from cupellation.otel._names import (
    check_totals,
    exclusion_attributes,
    exclusion_flat,
    included_attributes,
    included_flat,
    other_attributes,
    other_event_name,
    other_flat,
    run_attributes,
    run_flat,
    stage_attributes,
    stage_flat,
)
from cupellation.reasons import (
    BudgetExceeded,
    CountCapExceeded,
    Deduplicated,
    ExclusionReason,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
    ScoredTooLow,
    UnknownExclusionReason,
)
from pipeline._runs import budgets, candidates, pipelines

from ._support import make_sdk, run_both

RUN = "0123456789abcdef0123456789abcdef"
ITEM = ContextItem(content="hello <b>", tokens=7, kind="Document", source="Rag", priority=2,
                   tags=("a", "B"), metadata={"k": [1, {"x": None}]},
                   timestamp=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
                   future_relevance_hint=0.25, pinned=True, original_tokens=9)
BUDGET = ContextBudget(max_tokens=100, target_tokens=80, output_reserve=5,
                       reserved_slots={"Message": 3}, estimation_safety_margin_percent=2.5)
REASONS: list[ExclusionReason] = [
    BudgetExceeded(item_tokens=7, available_tokens=2),
    BudgetExceeded(item_tokens=9, available_tokens=0),  # disagrees with the item's tokens
    Deduplicated(deduplicated_against=3),
    PinnedOverride(displaced_by=0),
    NegativeTokens(tokens=-4),
    CountCapExceeded(kind="ToolOutput", cap=2, count=2),
    ScoredTooLow(score=0.5, threshold=0.75),  # a field named like the event's score
    UnknownExclusionReason(reason_name="FromTheFuture", fields=MappingProxyType(
        {"item_tokens": 3, "score": 1.5, "reason.deep": True, "note": "n", "seq": 4})),
]


def _one_of_each() -> list[PipelineEvent]:
    return [
        RunStarted(run_id=RUN, seq=0, started_at=datetime(2026, 1, 1, tzinfo=UTC),
                   budget=BUDGET, pipeline={"scorer": "RecencyScorer()", "deduplication": True},
                   candidate_count=3, candidate_tokens=-2, detail_level="Full",
                   content_capture="hash", trace_id="ab" * 16, span_id="cd" * 8),
        StageStarted(run_id=RUN, seq=1, stage=PipelineStage.SCORE, items_in=3),
        StageCompleted(run_id=RUN, seq=2, stage=PipelineStage.SCORE, duration_ms=0.1 + 0.2,
                       items_in=3, items_out=3),
        StageStarted(run_id=RUN, seq=3, stage="Rerank", items_in=3),
        CountShortfall(run_id=RUN, seq=4, kind="ToolOutput", required_count=2,
                       satisfied_count=1),
        Overflow(run_id=RUN, seq=5, tokens_over_budget=3, item_indices=(0, 2), budget=BUDGET),
        UnknownEvent(run_id=RUN, seq=6, event_type="from_the_future",
                     fields=MappingProxyType({"x": 1, "type.y": "z"})),
        RunCompleted(run_id=RUN, seq=7, duration_ms=1.5, included_count=1, included_tokens=7,
                     excluded_count=2),
        RunFailed(run_id=RUN, seq=7, stage=PipelineStage.SLICE, error_type="ValueError",
                  error_text="boom", duration_ms=2.25),
        RunFailed(run_id=RUN, seq=1, error_type="KeyboardInterrupt", error_text="",
                  duration_ms=0.0),
    ]


@pytest.mark.parametrize("event", _one_of_each(), ids=lambda e: type(e).__name__)
def test_run_stage_and_other_events_decode_exactly(event: PipelineEvent) -> None:
    """Each run, stage and other event comes back equal from the attributes it is
    written as (a stage this version does not know, an unknown event, a failure
    before any stage included)."""
    flat = event_to_dict(event)
    if isinstance(event, RunStarted | RunCompleted | RunFailed):
        found = run_flat(run_attributes(flat))
    elif isinstance(event, StageStarted | StageCompleted):
        found = stage_flat(stage_attributes(flat), RUN)
    else:
        found = [other_flat(other_event_name(flat["type"]), other_attributes(flat), RUN)]
    (decoded,) = [event_from_dict(f) for f in found]
    assert decoded == event


@pytest.mark.parametrize("reason", REASONS, ids=lambda r: r.name)
@pytest.mark.parametrize("carrier", ["Slice", None])
def test_exclusions_decode_exactly_whatever_the_reason(reason: Any, carrier: str | None
                                                       ) -> None:
    """An exclusion with any reason (shared item_tokens, fields named like the event's
    own attributes, an unknown variant with nested data) comes back equal, on its
    stage's span or on the root (where the stage is written)."""
    event = ItemExcluded(run_id=RUN, seq=9, stage=PipelineStage.SLICE, candidate_index=4,
                         score=0.125, item=ITEM, reason=reason)
    flat = event_to_dict(event)
    attributes = exclusion_attributes(flat, carrier, True)
    assert all(name.startswith("cupel.") for name in attributes)
    assert exclusion_flat(attributes, RUN, carrier) == flat
    assert event_from_dict(exclusion_flat(attributes, RUN, carrier)) == event
    assert ("cupel.exclusion.stage" in attributes) == (carrier is None)


def test_budget_exceeded_writes_item_tokens_once_unless_they_differ() -> None:
    """BudgetExceeded.item_tokens equal to the item's tokens is not written twice; a
    different value goes under cupel.exclusion.reason.item_tokens."""
    for reason, extra in ((REASONS[0], False), (REASONS[1], True)):
        event = ItemExcluded(run_id=RUN, seq=9, stage=PipelineStage.SLICE, candidate_index=4,
                             score=0.125, item=ITEM, reason=reason)
        attributes = exclusion_attributes(event_to_dict(event), "Slice", True)
        assert attributes["cupel.exclusion.item_tokens"] == 7
        assert ("cupel.exclusion.reason.item_tokens" in attributes) is extra


@pytest.mark.parametrize("reason", [InclusionReason.SCORED, InclusionReason.PINNED,
                                    InclusionReason(name="Boosted", fields=MappingProxyType(
                                        {"by": 2, "score": 0.5}))], ids=str)
def test_inclusions_decode_exactly(reason: InclusionReason) -> None:
    """An inclusion, with a known reason or an unknown one with fields, comes back equal."""
    event = ItemIncluded(run_id=RUN, seq=11, candidate_index=1, position=0, score=0.75,
                         item=ITEM, reason=reason)
    attributes = included_attributes(event_to_dict(event), True)
    assert {"cupel.item.kind", "cupel.item.tokens", "cupel.item.score"} <= attributes.keys()
    assert event_from_dict(included_flat(attributes, RUN)) == event


def test_none_capture_leaves_content_and_metadata_out() -> None:
    """Under none capture no attribute holds the content or the metadata."""
    event = ItemExcluded(run_id=RUN, seq=9, stage=PipelineStage.SLICE, candidate_index=4,
                         score=0.125, item=ITEM, reason=REASONS[0])
    attributes = reference_attributes(event, ContentCapture.NONE, "Slice")
    assert attributes is not None
    assert "cupel.item.content" not in attributes
    assert "cupel.item.metadata" not in attributes
    assert not any("hello" in str(v) for v in attributes.values())


def _batches(entries: tuple[Any, ...]) -> list[ItemEventBatch]:
    return [e for e in entries if isinstance(e, ItemEventBatch)]


@settings(max_examples=60, deadline=None)
@given(pipelines, candidates, budgets, st.sampled_from(list(ContentCapture)))
def test_the_fast_item_encoder_agrees_with_the_flat_mapping(
        pipeline: Any, items: list[ContextItem], budget: ContextBudget,
        capture: ContentCapture) -> None:
    """For every item batch of random runs and every capture policy, the column-wise
    encoder gives the attributes the definition (capture, event_to_dict, rename)
    gives, on the deciding stage's span and on the root."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    with contextlib.suppress(Exception):  # a failed run's batches are checked all the same
        pipeline.run(items, budget, collector)
    batches = _batches(tuple(collector._entries))
    batches.append(ItemEventBatch(
        run_id=RUN, first_seq=50, stage=PipelineStage.PLACE, candidate_indices=range(8),
        items=[ITEM] * 8, scores=[0.5] * 8, reasons=REASONS))
    for batch in batches:
        if batch.excluded:
            stage = batch.stage.value  # type: ignore[union-attr]
            for carrier in (stage, None):
                _agree(exclusion_batch_attributes(batch, capture, carrier),
                       [reference_attributes(e, capture, carrier) for e in batch])
        else:
            _agree(included_batch_attributes(batch, capture),
                   [reference_attributes(e, capture, None) for e in batch])
    for event in collector.events:
        if isinstance(event, StageStarted | StageCompleted):
            assert stage_event_attributes(event) == stage_attributes(event_to_dict(event))


@settings(max_examples=60, deadline=None)
@given(pipelines, candidates, budgets, st.sampled_from(list(ContentCapture)))
def test_the_column_encoder_agrees_with_the_flat_mapping(
        pipeline: Any, items: list[ContextItem], budget: ContextBudget,
        capture: ContentCapture) -> None:
    """For every item batch of random runs and every capture policy, the columns the
    columns layout writes hold, row by row, the attributes the definition gives
    (None where it gives none), on the deciding stage's span and on the root; a batch
    the column encoder declines is one the definition cannot project whole."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    with contextlib.suppress(Exception):
        pipeline.run(items, budget, collector)
    batches = _batches(tuple(collector._entries))
    batches.append(ItemEventBatch(
        run_id=RUN, first_seq=50, stage=PipelineStage.PLACE, candidate_indices=range(8),
        items=[ITEM] * 8, scores=[0.5] * 8, reasons=REASONS))
    for batch in batches:
        if batch.excluded:
            stage = batch.stage.value  # type: ignore[union-attr]
            for carrier in (stage, None):
                _columns_agree(exclusion_batch_columns(batch, capture, carrier),
                               [reference_attributes(e, capture, carrier) for e in batch])
        else:
            _columns_agree(included_batch_columns(batch, capture),
                           [reference_attributes(e, capture, None) for e in batch])


def _columns_agree(columns: Any, reference: list[dict[str, Any] | None]) -> None:
    if columns is None:  # declined: the row-wise path (which the test above checks)
        return
    count, by_name = columns
    assert count == len(reference)
    assert all(len(column) == count for column in by_name.values())
    rows = [{k: column[n] for k, column in by_name.items() if column[n] is not None}
            for n in range(count)]
    expected = [{k: list(v) if isinstance(v, tuple) else v for k, v in (a or {}).items()
                 if v is not None} for a in reference]
    assert rows == expected


def _agree(encoded: Encoded, reference: list[dict[str, Any] | None]) -> None:
    """The fast attributes are the reference ones, and its totals are theirs."""
    attributes, count, length = encoded
    assert attributes == reference
    totals = [text_totals(a) for a in reference if a is not None]
    assert (count, length) == (sum(c for c, _ in totals), sum(n for _, n in totals))
    assert all(check_totals(a) == text_totals(a) for a in reference if a is not None)


def test_the_fast_stage_encoder_agrees_for_a_stage_this_version_does_not_know() -> None:
    """stage_event_attributes equals the flat mapping's for unknown stage names too."""
    for event in _one_of_each():
        if isinstance(event, StageStarted | StageCompleted):
            assert stage_event_attributes(event) == stage_attributes(event_to_dict(event))


def _decoded(event: PipelineEvent) -> PipelineEvent:
    return msgspec.structs.replace(event, exception=None) if isinstance(
        event, RunFailed) else event


@settings(max_examples=120, deadline=None)
@given(pipelines, candidates, budgets,
       st.sampled_from(["StageOnly", "StageAndExclusions", "Full"]),
       st.sampled_from(["full", "hash", "none"]))
def test_a_run_rebuilt_from_spans_equals_the_in_process_run(
        pipeline: Any, items: list[ContextItem], budget: ContextBudget, tier: str,
        capture: str) -> None:
    """Random runs (failed ones too) at every tier and capture: the events rebuilt
    from the spans are the in-process events as the capture policy shows them, and
    the rebuilt report is the report of those; with full capture at the Full tier it
    is the in-process report itself, durations to the bit."""
    sdk = make_sdk()
    level = TraceDetailLevel.parse(tier)
    traced = run_both(pipeline, items, budget, sdk.collector(tier, capture), level)
    (rebuilt,) = runs_from_spans(sdk.spans)
    expected = [_decoded(apply_content_capture(e, capture)) for e in traced.events]
    # The root span carries the run's digest, which the rebuilt end event holds and
    # which checks out against the rebuilt events.
    *events, end = rebuilt.events
    assert isinstance(end, RunCompleted | RunFailed)
    assert end.digest is not None
    assert rebuilt.verification == "verified"
    assert rebuilt.digest == end.digest
    assert [*events, msgspec.structs.replace(end, digest=None)] == expected
    assert rebuilt.problems == ()
    assert rebuilt.report == build_report(expected)
    if tier == "Full" and capture == "full":
        assert rebuilt.report == traced.report
        assert rebuilt.report.is_complete == (traced.error is None)
