"""The SelectionReport: the wire format's JSON shape to the letter, and build_report as a
pure fold."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    Pipeline,
    RecencyScorer,
    TraceDetailLevel,
)
from cupellation._report import SelectionReport, build_report
from cupellation.events import (
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
    StageName,
    StageStarted,
)
from cupellation.exceptions import InvalidValueError
from cupellation.reasons import (
    BudgetExceeded,
    Deduplicated,
    ExclusionReason,
    InclusionReason,
    NegativeTokens,
)
from cupellation.testing import expect


def test_seed_complete_example_round_trips_exactly(seeds_dir: Path) -> None:
    """The wire format's complete SelectionReport example decodes and re-encodes to the
    identical JSON: field names, reason envelopes, omitted absent fields. Both
    the mapping (from_dict/to_dict) and the text (from_json/to_json) forms. The
    example is abridged (4 items listed, total_candidates 5, tokens 4736 against
    the 2688 listed), so it reads as incomplete, naming both broken rules, and
    ``incomplete`` is the only member the re-encoded JSON adds."""
    wire = json.loads((seeds_dir / "selection_report_complete.json").read_text(encoding="utf-8"))
    report = SelectionReport.from_dict(wire)
    assert report.total_candidates == 5
    assert [e.reason.name for e in report.excluded] == ["BudgetExceeded", "Deduplicated"]
    (expect(report)
        .exclude_item_with_reason("BudgetExceeded")
        .exclude_item_with_reason("Deduplicated")
        .excluded_items_are_sorted_by_score_descending())
    assert not report.is_complete
    assert [line.split(" is ")[0] for line in report.incomplete] == [
        "total_candidates", "total_tokens_considered"]
    assert report.to_dict() == {**wire, "incomplete": list(report.incomplete)}
    assert SelectionReport.from_json(json.dumps(wire)) == report
    assert json.loads(report.to_json()) == {**wire, "incomplete": list(report.incomplete)}
    assert SelectionReport.from_json(report.to_json()) == report


# -- hand-built runs ---------------------------------------------------------------
#
# Events are built with a placeholder seq (0) and run id; _run numbers them
# 0, 1, 2, ... under one run id, as the pipeline would.

AT = datetime(2024, 1, 1, tzinfo=UTC)
BUDGET = ContextBudget(100, 50)


def _excluded(stage: StageName, index: int, item: ContextItem, score: float,
              reason: ExclusionReason) -> ItemExcluded:
    return ItemExcluded(run_id="r", seq=0, stage=stage, candidate_index=index, score=score,
                        item=item, reason=reason)


def _included(index: int, position: int, item: ContextItem, score: float,
              reason: InclusionReason) -> ItemIncluded:
    return ItemIncluded(run_id="r", seq=0, candidate_index=index, position=position,
                        score=score, item=item, reason=reason)


def _started(candidate_count: int = 4, detail_level: str = "Full",
             candidate_tokens: int = 0) -> RunStarted:
    return RunStarted(run_id="r", seq=0, started_at=AT, budget=BUDGET, pipeline={},
                      candidate_count=candidate_count, candidate_tokens=candidate_tokens,
                      detail_level=detail_level)


def _stage(stage: PipelineStage, items_in: int, items_out: int,
           duration_ms: float = 0.5) -> list[PipelineEvent]:
    return [StageStarted(run_id="r", seq=0, stage=stage, items_in=items_in),
            StageCompleted(run_id="r", seq=0, stage=stage, duration_ms=duration_ms,
                           items_in=items_in, items_out=items_out)]


def _numbered(events: Sequence[PipelineEvent], run_id: str = "r") -> list[PipelineEvent]:
    """``events`` under ``run_id``, numbered 0, 1, 2, ..."""
    return [msgspec.structs.replace(e, run_id=run_id, seq=k) for k, e in enumerate(events)]


def _run(events: Sequence[PipelineEvent], run_id: str = "r", candidate_count: int = 4,
         detail_level: str = "Full") -> list[PipelineEvent]:
    """A whole run around ``events``: run_started, then ``events``, then a
    run_completed whose counts (and run_started's candidate tokens) agree with the
    item events; correctly numbered."""
    included = [e.item for e in events if isinstance(e, ItemIncluded)]
    excluded = [e for e in events if isinstance(e, ItemExcluded)]
    candidate_tokens = sum(i.tokens for i in included) + sum(e.item.tokens for e in excluded)
    completed = RunCompleted(run_id=run_id, seq=0, duration_ms=1.0,
                             included_count=len(included),
                             included_tokens=sum(i.tokens for i in included),
                             excluded_count=len(excluded))
    return _numbered([_started(candidate_count, detail_level, candidate_tokens), *events,
                      completed], run_id)


A = ContextItem("a", 10)
B = ContextItem("b", 20)
C = ContextItem("c", 30)
D = ContextItem("d", -5)


def test_excluded_sorted_by_score_descending_stable_on_ties() -> None:
    """Excluded entries are ordered by score descending; equal scores keep the
    order in which they were excluded. The Deduplicated event names the kept
    copy by candidate index; the report gives its content (the wire format's form) —
    new with the event stream, where reasons refer to candidates by index."""
    a_copy = ContextItem("a", 10)
    events = _run([
        _excluded(PipelineStage.CLASSIFY, 3, D, 0.0, NegativeTokens(tokens=-5)),
        _excluded(PipelineStage.DEDUPLICATE, 1, a_copy, 0.4,
                  Deduplicated(deduplicated_against=0)),
        _excluded(PipelineStage.SLICE, 2, C, 0.4,
                  BudgetExceeded(item_tokens=30, available_tokens=5)),
        _excluded(PipelineStage.SLICE, 0, A, 0.9,
                  BudgetExceeded(item_tokens=10, available_tokens=5)),
    ])
    report = build_report(events)
    assert [(e.item.content, e.reason.name) for e in report.excluded] == [
        ("a", "BudgetExceeded"), ("a", "Deduplicated"), ("c", "BudgetExceeded"),
        ("d", "NegativeTokens")]
    assert report.excluded[1].item is a_copy
    assert report.excluded[1].reason == Deduplicated(deduplicated_against="a")
    (expect(report)
        .excluded_items_are_sorted_by_score_descending()
        .exclude_item_with_budget_details(lambda i: i.content == "c", 30, 5)
        .exclude_item_matching_with_reason(lambda i: i is a_copy, Deduplicated))
    assert report.is_complete, report.incomplete
    assert report.total_candidates == 4
    assert report.total_tokens_considered == 45


def test_included_follow_placed_position_not_event_order() -> None:
    """Included entries are in final placed order whatever order the events came in."""
    events = _run([
        _included(0, 2, A, 0.5, InclusionReason.SCORED),
        _included(1, 0, B, 1.0, InclusionReason.PINNED),
        _included(2, 1, C, 0.7, InclusionReason.SCORED),
        _excluded(PipelineStage.CLASSIFY, 3, D, 0.0, NegativeTokens(tokens=-5)),
    ])
    report = build_report(events)
    assert [i.item.content for i in report.included] == ["b", "c", "a"]
    assert report.is_complete, report.incomplete


def test_stage_events_become_trace_events_without_sort() -> None:
    """Stage completions become the report's TraceEvents (items in as item_count,
    with their durations); the internal Sort stage, which the specification's
    PipelineStage omits, is left out. Each stage is a stage_started and
    stage_completed pair (stage_started is new with the event stream)."""
    events = _run([
        StageStarted(run_id="r", seq=0, stage=PipelineStage.CLASSIFY, items_in=4),
        _excluded(PipelineStage.CLASSIFY, 3, D, 0.0, NegativeTokens(tokens=-5)),
        StageCompleted(run_id="r", seq=0, stage=PipelineStage.CLASSIFY, duration_ms=0.3,
                       items_in=4, items_out=3),
        *_stage(PipelineStage.SORT, 3, 3, duration_ms=0.1),
        StageStarted(run_id="r", seq=0, stage=PipelineStage.SLICE, items_in=3),
        _excluded(PipelineStage.SLICE, 2, C, 0.2,
                  BudgetExceeded(item_tokens=30, available_tokens=20)),
        StageCompleted(run_id="r", seq=0, stage=PipelineStage.SLICE, duration_ms=1.4,
                       items_in=3, items_out=2),
        StageStarted(run_id="r", seq=0, stage=PipelineStage.PLACE, items_in=2),
        _included(0, 0, A, 0.5, InclusionReason.SCORED),
        _included(1, 1, B, 0.4, InclusionReason.SCORED),
        StageCompleted(run_id="r", seq=0, stage=PipelineStage.PLACE, duration_ms=0.2,
                       items_in=2, items_out=2),
    ])
    report = build_report(events)
    assert [(e.stage, e.item_count, e.duration_ms) for e in report.events] == [
        (PipelineStage.CLASSIFY, 4, 0.3), (PipelineStage.SLICE, 3, 1.4),
        (PipelineStage.PLACE, 2, 0.2)]
    assert report.is_complete, report.incomplete


def test_report_says_incomplete_when_candidates_lack_item_events() -> None:
    """A stream that accounts for 1 of 4 candidates yields a report that says so,
    and its JSON carries the same list."""
    report = build_report(_run([_included(0, 0, A, 0.5, InclusionReason.SCORED)]))
    assert not report.is_complete
    assert any("3 of 4 candidates" in reason for reason in report.incomplete)
    assert json.loads(report.to_json())["incomplete"] == list(report.incomplete)
    assert report.to_dict()["incomplete"] == list(report.incomplete)


def test_report_says_incomplete_without_start_or_end() -> None:
    """Missing run_started and run_completed events are both named, and nothing else."""
    report = build_report([_included(0, 0, A, 0.5, InclusionReason.SCORED)])
    assert len(report.incomplete) == 2
    assert "run_started" in report.incomplete[0]
    assert "run_completed" in report.incomplete[1]


def test_failed_run_report_names_the_error() -> None:
    """A run_failed event makes the report incomplete with the error's type and text
    (``error_text``, formerly ``message``), and with nothing else: the stage it
    failed in was started but, rightly, never completed."""
    events = _numbered([
        _started(candidate_count=0),
        StageStarted(run_id="r", seq=0, stage=PipelineStage.PLACE, items_in=0),
        RunFailed(run_id="r", seq=0, stage=PipelineStage.PLACE,
                  error_type="BudgetOverflowError", error_text="over", duration_ms=1.0),
    ])
    report = build_report(events)
    assert report.incomplete == ("the run failed: BudgetOverflowError: over",)


def test_events_of_several_runs_need_a_run_id() -> None:
    """Mixing runs is refused unless run_id picks one; with it, only that run is folded."""
    events = [*_run([_included(0, 0, A, 0.5, InclusionReason.SCORED)], candidate_count=1),
              *_run([_included(0, 0, B, 0.5, InclusionReason.SCORED)], run_id="s",
                    candidate_count=1)]
    with pytest.raises(InvalidValueError, match="run_id"):
        build_report(events)
    picked = build_report(events, run_id="s")
    assert [i.item.content for i in picked.included] == ["b"]
    assert picked.is_complete, picked.incomplete


def test_a_candidate_decided_twice_is_reported() -> None:
    """Two item events of the same kind for one candidate index make the report
    say it was decided more than once."""
    report = build_report(_run([
        _included(0, 0, A, 0.5, InclusionReason.SCORED),
        _included(0, 1, A, 0.5, InclusionReason.SCORED),
    ]))
    assert any("decided more than once: 0" in reason for reason in report.incomplete)


def test_a_candidate_both_included_and_excluded_is_reported() -> None:
    """An inclusion and an exclusion for one candidate index make the report say
    the candidate was both included and excluded. (Changed deliberately with the
    event stream: this case used to read "decided more than once"; the fold now
    names the contradiction.)"""
    report = build_report(_run([
        _included(0, 0, A, 0.5, InclusionReason.SCORED),
        _excluded(PipelineStage.SLICE, 0, B, 0.5,
                  BudgetExceeded(item_tokens=20, available_tokens=0)),
    ]))
    assert any("both included and excluded: 0" in reason for reason in report.incomplete)


def test_report_json_round_trip_is_identity() -> None:
    """to_json then from_json (compact or indented) gives an equal report, optional
    members included: count_requirement_shortfalls, overflow and incomplete."""
    events = _run([
        _included(0, 0, A, 0.5, InclusionReason.ZERO_TOKEN),
        _excluded(PipelineStage.SLICE, 2, C, 0.25,
                  BudgetExceeded(item_tokens=30, available_tokens=5)),
        CountShortfall(run_id="r", seq=0, kind="Memory", required_count=2, satisfied_count=1),
        Overflow(run_id="r", seq=0, tokens_over_budget=5, item_indices=(0,), budget=BUDGET),
    ])
    report = build_report(events)
    assert not report.is_complete
    assert report.overflow is not None
    assert report.count_requirement_shortfalls
    text = report.to_json()
    assert {"count_requirement_shortfalls", "overflow", "incomplete"} <= json.loads(text).keys()
    assert SelectionReport.from_json(text) == report
    assert SelectionReport.from_json(report.to_json(indent=2)) == report
    assert SelectionReport.from_dict(report.to_dict()) == report


class _Keeper:
    """A collector keeping exactly what each record() call delivered."""

    is_enabled = True
    detail_level = TraceDetailLevel.FULL

    def __init__(self) -> None:
        self.held: list[PipelineEvent | ItemEventBatch] = []

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        if isinstance(events, ItemEventBatch):
            self.held.append(events)
        else:
            self.held.extend(events)


def test_item_batches_fold_exactly_like_their_expanded_events() -> None:
    """The pipeline delivers a stage's decisions as one ItemEventBatch; folding the
    batches gives the same report as folding the per-item events they expand
    to (and as the DiagnosticTraceCollector beside it), and the expansion is
    the typed events themselves, numbered on from the batch's first_seq."""
    items = [ContextItem(f"c{k}", 10 * (k % 4), timestamp=datetime(2024, 1, 1 + k, tzinfo=UTC))
             for k in range(12)]
    items.append(ContextItem("pin", 15, pinned=True))
    keeper = _Keeper()
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(RecencyScorer()).run(items, ContextBudget(200, 60),
                                  FanOutCollector(keeper, collector))
    held = keeper.held
    batches = [e for e in held if isinstance(e, ItemEventBatch)]
    assert [b.excluded for b in batches] == [True, False]
    expanded = [event for entry in held
                for event in (entry if isinstance(entry, ItemEventBatch) else (entry,))]
    assert tuple(expanded) == collector.events
    assert all(isinstance(e, ItemExcluded | ItemIncluded) for b in batches for e in b)
    assert all([e.seq for e in b] == list(range(b.first_seq, b.last_seq + 1)) for b in batches)
    assert sum(len(b) for b in batches) == len(items)
    assert build_report(held) == build_report(expanded) == collector.build_report()
    assert build_report(held).is_complete
    assert list(batches[0])[1] == batches[0][1]
    assert "exclusions" in repr(batches[0])
