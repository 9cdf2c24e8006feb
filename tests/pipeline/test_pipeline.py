"""The six-stage pipeline: budgets, pinned items, overflow strategies, bad input,
and the exclusion reasons each stage emits."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from cupellation import ContextBudget, ContextItem, OverflowStrategy
from cupellation._collectors import DiagnosticTraceCollector, TraceDetailLevel
from cupellation._model import ScoredItem
from cupellation._pipeline import Pipeline
from cupellation.events import (
    ItemExcluded,
    Overflow,
    PipelineStage,
    RunFailed,
    StageCompleted,
    StageStarted,
)
from cupellation.exceptions import (
    BudgetOverflowError,
    InvalidTypeError,
    PinnedBudgetError,
    ScorerError,
)
from cupellation.placing import UShapedPlacer
from cupellation.reasons import RESERVED_EXCLUSION_REASONS, Deduplicated, PinnedOverride
from cupellation.scoring import FunctionScorer, PriorityScorer, RecencyScorer
from cupellation.slicing import CountQuotaEntry, CountQuotaSlice, GreedySlice, KnapsackSlice
from cupellation.testing import assert_excluded, assert_report_consistent, expect

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def item(content: str, tokens: int = 10, *, day: int | None = None,
         pinned: bool = False, kind: str = "Message", priority: int | None = None) -> ContextItem:
    """A ContextItem dated ``day`` days after 2024-01-01 (undated when None)."""
    timestamp = None if day is None else T0 + timedelta(days=day)
    return ContextItem(content, tokens, kind=kind, timestamp=timestamp, pinned=pinned,
                       priority=priority)


def run_with_report(pipeline: Pipeline, items: Sequence[ContextItem], budget: ContextBudget
                    ) -> tuple[list[ContextItem], DiagnosticTraceCollector]:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    return pipeline.run(items, budget, collector), collector


RECENCY = Pipeline(scorer=RecencyScorer())


class TakeAll:
    """A slicer that ignores the budget, to drive the Place stage into overflow."""

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget) -> list[ContextItem]:
        return [s.item for s in scored]


def test_output_is_placed_chronologically_and_report_explains_every_candidate() -> None:
    """Greedy fills the target by density; the report lists the rest with reasons."""
    items = [item("old", 60, day=0), item("mid", 30, day=5), item("new", 30, day=9)]
    out, collector = run_with_report(RECENCY, items, ContextBudget(1000, 70))
    assert [i.content for i in out] == ["mid", "new"]
    report = collector.build_report()
    assert_report_consistent(report)
    assert report.is_complete
    (expect(report)
        .include_exactly_n_items_with_kind("Message", 2)
        .have_at_least_n_exclusions(1)
        .excluded_items_are_sorted_by_score_descending()
        .exclude_item_with_budget_details(lambda i: i.content == "old", 60, 10))


def test_effective_budget_subtracts_reserve_and_pinned_exactly() -> None:
    """The slicer sees min(max(0, target - pinned), max - reserve - pinned): with
    max 300, reserve 150, pinned 100, target 280, only 50 tokens remain."""
    items = [item("pin", 100, pinned=True), item("a", 50, day=2), item("b", 10, day=1)]
    budget = ContextBudget(300, 280, output_reserve=150)
    out = RECENCY.run(items, budget)
    assert sorted(i.content for i in out) == ["a", "pin"]
    assert budget.effective(100) == ContextBudget(50, 50)
    assert budget.effective(400) == ContextBudget(0, 0)


def test_pinned_items_over_available_raise_at_classify_with_both_numbers() -> None:
    """Pinned tokens above max - reserve raise PinnedBudgetError naming both numbers,
    and the failed run still emits run_failed naming the Classify stage, the
    error's type and text, and carrying the very exception raised."""
    collector = DiagnosticTraceCollector()
    with pytest.raises(PinnedBudgetError, match=r"require 120 tokens, but only 100") as info:
        RECENCY.run([item("p", 120, pinned=True)], ContextBudget(150, 100, output_reserve=50),
                    collector)
    assert (info.value.pinned_tokens, info.value.available_tokens) == (120, 100)
    failed = collector.events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.stage is PipelineStage.CLASSIFY
    assert failed.error_type == "PinnedBudgetError"
    assert failed.error_text == str(info.value)
    assert failed.exception is info.value
    assert not collector.build_report().is_complete


def test_throw_overflow_raises_with_merged_tokens_and_target() -> None:
    """Pinned items over target (but within max) overflow; Throw raises with both numbers."""
    pipeline = Pipeline(scorer=RecencyScorer())
    with pytest.raises(BudgetOverflowError, match=r"require 90 tokens, exceeding target budget "
                                                  r"of 80") as info:
        pipeline.run([item("p", 90, pinned=True), item("x", 5, day=1)], ContextBudget(200, 80))
    assert (info.value.merged_tokens, info.value.target_tokens) == (90, 80)


def test_truncate_keeps_pinned_and_drops_lowest_scored_that_no_longer_fit() -> None:
    """Under Truncate a slicer that over-fills is cut back from the tail in score
    order; pinned items always stay, and the removed item says why: the event
    names the pinned item by its candidate index, the report by its content."""

    pipeline = Pipeline(scorer=RecencyScorer(), slicer=TakeAll(),
                        overflow_strategy=OverflowStrategy.TRUNCATE)
    items = [item("pin", 40, pinned=True), item("new", 30, day=9), item("old", 30, day=1)]
    out, collector = run_with_report(pipeline, items, ContextBudget(200, 80))
    assert sorted(i.content for i in out) == ["new", "pin"]
    report = collector.build_report()
    assert_excluded(report, "old", reason="PinnedOverride", displaced_by="pin")
    excluded_event = next(e for e in collector.events if isinstance(e, ItemExcluded))
    assert excluded_event.stage is PipelineStage.PLACE
    assert excluded_event.reason == PinnedOverride(displaced_by=0)


def test_truncate_budget_exceeded_when_it_would_not_fit_even_without_pins() -> None:
    """An item larger than the whole target is BudgetExceeded, not PinnedOverride."""

    pipeline = Pipeline(scorer=RecencyScorer(), slicer=TakeAll(), overflow_strategy="truncate")
    items = [item("pin", 10, pinned=True), item("huge", 95, day=2)]
    _, collector = run_with_report(pipeline, items, ContextBudget(200, 90))
    expect(collector.build_report()).exclude_item_with_budget_details(
        lambda i: i.content == "huge", 95, 80)


def test_proceed_keeps_everything_and_emits_one_overflow_event() -> None:
    """Proceed accepts the over-budget selection and reports it (OverflowEvent)."""
    pipeline = Pipeline(scorer=RecencyScorer(), slicer=TakeAll(),
                        overflow_strategy=OverflowStrategy.PROCEED)
    items = [item("pin", 70, pinned=True), item("z", 0, day=1), item("w", 20, day=2)]
    out, collector = run_with_report(pipeline, items, ContextBudget(200, 80))
    assert [i.content for i in out] == ["z", "w", "pin"]
    overflows = [e for e in collector.events if isinstance(e, Overflow)]
    assert len(overflows) == 1
    assert overflows[0].tokens_over_budget == 10
    report = collector.build_report()
    assert report.overflow is not None
    assert [i.content for i in report.overflow.overflowing_items] == ["pin", "w", "z"]
    (expect(report)
        .include_item_matching(lambda e: e.item.content == "z" and e.reason.name == "ZeroToken")
        .include_item_matching(lambda e: (e.item.content, e.reason.name, e.score)
                               == ("pin", "Pinned", 1.0))
        .have_budget_utilization_above(0.449, ContextBudget(200, 80)))


def test_no_overflow_event_for_other_strategies() -> None:
    """Overflow events come only under Proceed (the specification's MUST)."""

    pipeline = Pipeline(scorer=RecencyScorer(), slicer=TakeAll(), overflow_strategy="truncate")
    _, collector = run_with_report(pipeline, [item("a", 60, day=1), item("b", 60, day=2)],
                                   ContextBudget(200, 80))
    assert not [e for e in collector.events if isinstance(e, Overflow)]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_score_raises_naming_scorer_and_candidate_index(bad: float) -> None:
    """A custom scorer returning NaN or infinity is stopped at Score, naming the
    scorer and the candidate's index in the original list (NaN never reaches Sort)."""
    scorer = FunctionScorer(lambda it, _all: bad if it.content == "b" else 0.5, name="odd")
    pipeline = Pipeline(scorer=scorer)
    candidates = [item("pin", 1, pinned=True), item("a"), item("b")]
    with pytest.raises(ScorerError, match=r"for candidate index 2") as info:
        pipeline.run(candidates, ContextBudget(100, 50))
    assert info.value.index == 2
    assert "FunctionScorer(odd)" in str(info.value)


def test_scorer_returning_wrong_number_of_scores_raises() -> None:
    """A scorer whose score_all returns too few scores is rejected with the counts."""

    class Short:
        def score_all(self, items: Sequence[ContextItem]) -> list[float]:
            return [0.5]

    with pytest.raises(ScorerError, match="for 2 items"):
        Pipeline(scorer=Short()).run([item("a"), item("b")], ContextBudget(100, 50))


def test_candidate_that_is_not_a_context_item_raises_naming_its_index() -> None:
    """A dict among the candidates is rejected with its index."""
    bad: list[object] = [item("a"), {"content": "b", "tokens": 3}]
    with pytest.raises(InvalidTypeError, match=r"candidates\[1\]"):
        RECENCY.run(bad, ContextBudget(100, 50))  # type: ignore[arg-type]


def test_deduplication_keeps_highest_score_and_lowest_index_on_ties() -> None:
    """Byte-exact duplicates: the higher score survives; on equal scores the earlier one.
    Each Deduplicated event names the kept copy by its candidate index."""
    items = [item("x", day=1), item("x", day=5), item("y", priority=1), item("y", priority=1)]
    out, collector = run_with_report(Pipeline(scorer=RecencyScorer()), items,
                                     ContextBudget(1000, 500))
    report = collector.build_report()
    dupes = [e for e in collector.events if isinstance(e, ItemExcluded)]
    assert [(e.candidate_index, e.reason) for e in dupes] == [
        (0, Deduplicated(deduplicated_against=1)), (3, Deduplicated(deduplicated_against=2))]
    assert sorted(i.content for i in out) == ["x", "y"]
    assert report.total_candidates == 4


def test_deduplication_disabled_keeps_duplicates() -> None:
    """With deduplication off both copies of the same content can be selected."""
    pipeline = Pipeline(scorer=RecencyScorer(), deduplication=False)
    out = pipeline.run([item("x", day=1), item("x", day=2)], ContextBudget(100, 50))
    assert [i.content for i in out] == ["x", "x"]


def test_same_object_twice_without_dedup_is_tracked_per_candidate() -> None:
    """One ContextItem object passed twice is two candidates; both are reported."""
    shared = item("s", 10, day=1)
    pipeline = Pipeline(scorer=RecencyScorer(), deduplication=False)
    out, collector = run_with_report(pipeline, [shared, shared], ContextBudget(100, 50))
    assert len(out) == 2
    report = collector.build_report()
    assert report.is_complete
    assert len(report.included) == 2


def test_count_quota_cap_exclusions_and_shortfalls_reach_the_report() -> None:
    """CountQuotaSlice's cap exclusions become CountCapExceeded reasons and its
    shortfalls become report entries."""
    slicer = CountQuotaSlice(GreedySlice(), [
        CountQuotaEntry("tool", require_count=0, cap_count=1),
        CountQuotaEntry("memory", require_count=2, cap_count=3),
    ])
    items = [item("t1", 10, day=1, kind="tool"), item("t2", 10, day=2, kind="tool"),
             item("m1", 10, day=3, kind="memory")]
    out, collector = run_with_report(Pipeline(scorer=RecencyScorer(), slicer=slicer), items,
                                     ContextBudget(1000, 500))
    report = collector.build_report()
    assert sorted(i.content for i in out) == ["m1", "t2"]
    assert_excluded(report, "t1", reason="CountCapExceeded", kind="tool", cap=1)
    (expect(report)
        .include_exactly_n_items_with_kind("tool", 1)
        .have_no_exclusions_for_kind("memory")
        .have_kind_coverage_count(2))
    assert [(s.kind.value, s.required_count, s.satisfied_count)
            for s in report.count_requirement_shortfalls] == [("memory", 2, 1)]


def test_every_stage_emits_exactly_one_stage_event_even_when_empty() -> None:
    """An empty run still emits one StageStarted and one StageCompleted per stage,
    the start right before the completion, with zero counts."""
    collector = DiagnosticTraceCollector()
    assert RECENCY.run([], ContextBudget(10, 5), collector) == []
    stage_events = [e for e in collector.events if isinstance(e, StageStarted | StageCompleted)]
    order = [PipelineStage.CLASSIFY, PipelineStage.SCORE, PipelineStage.DEDUPLICATE,
             PipelineStage.SORT, PipelineStage.SLICE, PipelineStage.PLACE]
    assert [(type(e), e.stage) for e in stage_events] == [
        (kind, stage) for stage in order for kind in (StageStarted, StageCompleted)]
    assert all(e.items_in == 0 for e in stage_events)
    assert all(e.items_out == 0 for e in stage_events if isinstance(e, StageCompleted))
    report = collector.build_report()
    assert [e.item_count for e in report.events] == [0, 0, 0, 0, 0]


def test_built_in_stages_never_emit_reserved_reasons() -> None:
    """A run exercising every exclusion path emits only active variants."""
    items = [item("neg", -3), item("d", 10, day=1), item("d", 10, day=2),
             item("pin", 50, pinned=True), item("big", 60, day=3), item("fit", 10, day=4)]
    _, collector = run_with_report(Pipeline(scorer=RecencyScorer(), slicer=KnapsackSlice()),
                                   items, ContextBudget(200, 80))
    names = {e.reason.name for e in collector.events if isinstance(e, ItemExcluded)}
    assert names >= {"NegativeTokens", "Deduplicated"}
    assert not names & RESERVED_EXCLUSION_REASONS


def test_pipeline_is_immutable_and_with_methods_copy() -> None:
    """Configuration cannot be changed in place; with_* return new pipelines."""
    pipeline = Pipeline(scorer=RecencyScorer(), budget=ContextBudget(100, 50))
    with pytest.raises(dataclasses.FrozenInstanceError):
        pipeline.deduplication = False  # type: ignore[misc]
    other = pipeline.with_placer(UShapedPlacer()).with_scorer(PriorityScorer())
    assert isinstance(other.placer, UShapedPlacer)
    assert isinstance(pipeline.scorer, RecencyScorer)
    assert pipeline.with_overflow_strategy("proceed").overflow_strategy is OverflowStrategy.PROCEED


def test_default_budget_is_used_and_a_missing_budget_is_an_error() -> None:
    """run() falls back to the pipeline's budget and says so when there is none."""
    pipeline = Pipeline(scorer=RecencyScorer(), budget=ContextBudget(100, 15))
    assert [i.content for i in pipeline.run([item("a", 10, day=1), item("b", 10)])] == ["a"]
    with pytest.raises(ValueError, match="budget"):
        RECENCY.run([item("a")])


def test_bad_configuration_is_rejected_naming_the_field() -> None:
    """Objects without the stage method, a non-bool deduplication flag and an
    unknown overflow strategy are refused at construction."""
    with pytest.raises(ValueError, match="scorer"):
        Pipeline(scorer=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="deduplication"):
        Pipeline(scorer=RecencyScorer(), deduplication="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="overflow_strategy"):
        Pipeline(scorer=RecencyScorer(), overflow_strategy="explode")


def test_dry_run_returns_the_report() -> None:
    """dry_run gives the Item-level report of what run would select."""
    report = RECENCY.dry_run([item("a", 10, day=1), item("b", 100, day=2)], ContextBudget(200, 50))
    assert [i.item.content for i in report.included] == ["a"]
    expect(report).exclude_item_matching_with_reason(lambda i: i.content == "b",
                                                     "BudgetExceeded")


def test_misbehaving_slicer_is_caught() -> None:
    """A slicer returning an item it was not given is reported, not trusted."""

    class Liar:
        def slice(self, scored: Sequence[object], budget: ContextBudget) -> list[ContextItem]:
            return [item("invented")]

    with pytest.raises(Exception, match="not among its inputs"):
        Pipeline(scorer=RecencyScorer(), slicer=Liar()).run([item("a")], ContextBudget(100, 50))


def test_misbehaving_placer_is_caught() -> None:
    """A placer that drops an item breaks the permutation contract and is reported."""

    class Dropper:
        def place(self, items: Sequence[object]) -> list[ContextItem]:
            return []

    with pytest.raises(Exception, match="permutation"):
        Pipeline(scorer=RecencyScorer(), placer=Dropper()).run([item("a")], ContextBudget(100, 50))
