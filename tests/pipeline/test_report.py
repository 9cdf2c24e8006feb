"""The SelectionReport: the seeds' JSON shape to the letter, and build_report as a pure fold."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    InvalidValueError,
    ItemEventBatch,
    Pipeline,
    RecencyScorer,
    TraceDetailLevel,
)
from cupellation._events import (
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
)
from cupellation._reasons import BudgetExceeded, Deduplicated, InclusionReason, NegativeTokens
from cupellation._report import SelectionReport, build_report


def _seed_json(seed: Path, marker: str) -> dict[str, Any]:
    """The first JSON object after ``marker`` in a seed document."""
    text = seed.read_text(encoding="utf-8")
    start = text.index("{", text.index(marker))
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            parsed: dict[str, Any] = json.loads(text[start:end + 1])
            return parsed
    raise AssertionError(f"no complete JSON object after {marker!r} in {seed}")


def test_seed_complete_example_round_trips_exactly(shared_dir: Path) -> None:
    """The seed's complete SelectionReport example decodes and re-encodes to the
    identical JSON: field names, reason envelopes, omitted absent fields."""
    seed = next((shared_dir / "seeds").glob("000_*.txt"))
    wire = _seed_json(seed, "Complete JSON example:")
    report = SelectionReport.from_json(wire)
    assert report.total_candidates == 5
    assert [e.reason.name for e in report.excluded] == ["BudgetExceeded", "Deduplicated"]
    assert report.to_json() == wire


def _run(events: list[PipelineEvent], run_id: str = "r") -> list[PipelineEvent]:
    started = RunStarted(run_id, datetime(2024, 1, 1, tzinfo=UTC), ContextBudget(100, 50),
                         {}, 4, 0)
    return [started, *events, RunCompleted(run_id, 1.0, 0, 0, 0)]


A = ContextItem("a", 10)
B = ContextItem("b", 20)
C = ContextItem("c", 30)
D = ContextItem("d", -5)


def test_excluded_sorted_by_score_descending_stable_on_ties() -> None:
    """Excluded entries are ordered by score descending; equal scores keep the
    order in which they were excluded."""
    events = _run([
        ItemExcluded("r", PipelineStage.CLASSIFY, 3, D, 0.0, NegativeTokens(-5)),
        ItemExcluded("r", PipelineStage.DEDUPLICATE, 1, B, 0.4, Deduplicated("b")),
        ItemExcluded("r", PipelineStage.SLICE, 2, C, 0.4, BudgetExceeded(30, 5)),
        ItemExcluded("r", PipelineStage.SLICE, 0, A, 0.9, BudgetExceeded(10, 5)),
    ])
    report = build_report(events)
    assert [e.item.content for e in report.excluded] == ["a", "b", "c", "d"]
    assert report.is_complete
    assert report.total_candidates == 4
    assert report.total_tokens_considered == 55


def test_included_follow_placed_position_not_event_order() -> None:
    """Included entries are in final placed order whatever order the events came in."""
    events = _run([
        ItemIncluded("r", 0, 2, A, 0.5, InclusionReason.SCORED),
        ItemIncluded("r", 1, 0, B, 1.0, InclusionReason.PINNED),
        ItemIncluded("r", 2, 1, C, 0.7, InclusionReason.SCORED),
        ItemExcluded("r", PipelineStage.CLASSIFY, 3, D, 0.0, NegativeTokens(-5)),
    ])
    report = build_report(events)
    assert [i.item.content for i in report.included] == ["b", "c", "a"]


def test_stage_events_become_trace_events_without_sort() -> None:
    """Stage completions become the report's TraceEvents (items in as item_count);
    the internal Sort stage, which the specification's PipelineStage omits, is left out."""
    events = _run([
        StageCompleted("r", PipelineStage.CLASSIFY, 0.3, 4, 3),
        StageCompleted("r", PipelineStage.SORT, 0.1, 3, 3),
        StageCompleted("r", PipelineStage.SLICE, 1.4, 3, 2),
    ])
    report = build_report(events)
    assert [(e.stage, e.item_count) for e in report.events] == [
        (PipelineStage.CLASSIFY, 4), (PipelineStage.SLICE, 3)]


def test_report_says_incomplete_when_candidates_lack_item_events() -> None:
    """A stream that accounts for 1 of 4 candidates yields a report that says so."""
    report = build_report(_run([ItemIncluded("r", 0, 0, A, 0.5, InclusionReason.SCORED)]))
    assert not report.is_complete
    assert any("3 of 4 candidates" in reason for reason in report.incomplete)
    assert report.to_json()["incomplete"] == list(report.incomplete)


def test_report_says_incomplete_without_start_or_end() -> None:
    """Missing run_started and run_completed events are both named."""
    report = build_report([ItemIncluded("r", 0, 0, A, 0.5, InclusionReason.SCORED)])
    assert len(report.incomplete) == 2
    assert "run_started" in report.incomplete[0]
    assert "run_completed" in report.incomplete[1]


def test_failed_run_report_names_the_error() -> None:
    """A run_failed event makes the report incomplete with the error's type and message."""
    started = RunStarted("r", datetime(2024, 1, 1, tzinfo=UTC), ContextBudget(100, 50), {}, 0, 0)
    report = build_report([started, RunFailed("r", PipelineStage.PLACE, "BudgetOverflowError",
                                              "over", 1.0)])
    assert report.incomplete == ("the run failed: BudgetOverflowError: over",)


def test_events_of_several_runs_need_a_run_id() -> None:
    """Mixing runs is refused unless run_id picks one; with it, only that run is folded."""
    events = [*_run([ItemIncluded("r", 0, 0, A, 0.5, InclusionReason.SCORED)]),
              *_run([ItemIncluded("s", 0, 0, B, 0.5, InclusionReason.SCORED)], run_id="s")]
    with pytest.raises(InvalidValueError, match="run_id"):
        build_report(events)
    assert [i.item.content for i in build_report(events, run_id="s").included] == ["b"]


def test_a_candidate_decided_twice_is_reported() -> None:
    """Two item events for one candidate index make the report say so."""
    report = build_report(_run([
        ItemIncluded("r", 0, 0, A, 0.5, InclusionReason.SCORED),
        ItemExcluded("r", PipelineStage.SLICE, 0, B, 0.5, BudgetExceeded(20, 0)),
    ]))
    assert any("more than once" in reason for reason in report.incomplete)


def test_report_json_round_trip_is_identity() -> None:
    """to_json then from_json gives an equal report, optional members included."""
    events = _run([
        ItemIncluded("r", 0, 0, A, 0.5, InclusionReason.ZERO_TOKEN),
        ItemExcluded("r", PipelineStage.SLICE, 2, C, 0.25, BudgetExceeded(30, 5)),
    ])
    report = build_report(events)
    assert not report.is_complete
    again = SelectionReport.from_json(json.loads(json.dumps(report.to_json())))
    assert again == report


def test_item_batches_fold_exactly_like_their_expanded_events() -> None:
    """A collector keeps a stage's decisions as an ItemEventBatch; folding the
    batches gives the same report as folding the per-item events they expand
    to, and the expansion is the typed events themselves."""
    items = [ContextItem(f"c{k}", 10 * (k % 4), timestamp=datetime(2024, 1, 1 + k, tzinfo=UTC))
             for k in range(12)]
    items.append(ContextItem("pin", 15, pinned=True))
    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    Pipeline(RecencyScorer()).run(items, ContextBudget(200, 60), collector)
    held = collector._events
    batches = [e for e in held if isinstance(e, ItemEventBatch)]
    assert [b.excluded for b in batches] == [True, False]
    expanded = collector.events
    assert all(isinstance(e, ItemExcluded | ItemIncluded) for b in batches for e in b)
    assert sum(len(b) for b in batches) == len(items)
    assert build_report(held) == build_report(expanded)
    assert list(batches[0])[1] == batches[0][1]
    assert "exclusions" in repr(batches[0])
