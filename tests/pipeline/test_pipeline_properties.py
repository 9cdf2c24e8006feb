"""Properties of whole runs over random candidates and configurations (hypothesis)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cupellation import ContextBudget, ContextItem, OverflowStrategy
from cupellation._collectors import DiagnosticTraceCollector, TraceDetailLevel
from cupellation._pipeline import Pipeline
from cupellation._report import build_report
from cupellation.events import (
    ItemExcluded,
    ItemIncluded,
    RunFailed,
    event_from_json,
    event_to_json,
)
from cupellation.exceptions import BudgetOverflowError, CountRequirementError, PinnedBudgetError
from cupellation.placing import ChronologicalPlacer, UShapedPlacer
from cupellation.reasons import (
    RESERVED_EXCLUSION_REASONS,
    BudgetExceeded,
    Deduplicated,
    NegativeTokens,
    PinnedOverride,
)
from cupellation.scoring import (
    CompositeScorer,
    FrequencyScorer,
    KindScorer,
    PriorityScorer,
    RecencyScorer,
    Scorer,
)
from cupellation.slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
    Slicer,
)
from cupellation.testing import assert_report_consistent, expect

T0 = datetime(2024, 1, 1, tzinfo=UTC)

candidate = st.builds(
    ContextItem,
    content=st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h"]),
    tokens=st.integers(min_value=-5, max_value=120),
    kind=st.sampled_from(["Message", "Document", "ToolOutput", "Memory"]),
    priority=st.none() | st.integers(-3, 3),
    tags=st.lists(st.sampled_from(["x", "Y", "z"]), max_size=2),
    timestamp=st.none() | st.integers(0, 50).map(lambda d: T0 + timedelta(days=d)),
    pinned=st.sampled_from([False, False, False, True]),
)
scorers: st.SearchStrategy[Scorer] = st.sampled_from([
    RecencyScorer(), PriorityScorer(), KindScorer(), FrequencyScorer(),
    CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
])
slicers: st.SearchStrategy[Slicer] = st.sampled_from([
    GreedySlice(), KnapsackSlice(bucket_size=7),
    QuotaSlice(GreedySlice(), [QuotaEntry("Message", require=20, cap=60),
                               QuotaEntry("Document", require=10, cap=50)]),
    # Count quotas commit required items whatever the budget: the way a real
    # selection overshoots the target and reaches Truncate and Proceed.
    CountQuotaSlice(GreedySlice(), [CountQuotaEntry("ToolOutput", 2, cap_count=3),
                                    CountQuotaEntry("Memory", 0, cap_count=1)]),
    CountConstrainedKnapsackSlice([CountQuotaEntry("Document", 1, cap_count=2)], bucket_size=9),
])
budgets = st.tuples(st.integers(0, 600), st.integers(0, 600), st.integers(0, 100)).map(
    lambda t: ContextBudget(max(t[0], t[1]), min(t[0], t[1]),
                            output_reserve=min(t[2], max(t[0], t[1])))
)
pipelines = st.builds(
    Pipeline,
    scorer=scorers,
    slicer=slicers,
    placer=st.sampled_from([ChronologicalPlacer(), UShapedPlacer()]),
    deduplication=st.booleans(),
    overflow_strategy=st.sampled_from(list(OverflowStrategy)),
)

# Candidate lists that sometimes hold the same ContextItem object twice.
candidates = st.lists(candidate, max_size=12).flatmap(
    lambda items: st.just(items) if not items else st.sampled_from(
        [items, [*items, items[0]], [items[-1], *items]]))

PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _run(pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget
         ) -> tuple[list[ContextItem] | None, DiagnosticTraceCollector]:
    out, collector, _ = _run_catching(pipeline, items, budget)
    return out, collector


def _run_catching(pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget
                  ) -> tuple[list[ContextItem] | None, DiagnosticTraceCollector,
                             Exception | None]:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    try:
        return pipeline.run(items, budget, collector), collector, None
    except (BudgetOverflowError, PinnedBudgetError, CountRequirementError) as exc:
        return None, collector, exc


#: Slicers whose selection never exceeds the target they are given; the
#: count-quota ones commit required items whatever the budget (by the spec).
BUDGET_BOUND = (GreedySlice, KnapsackSlice, QuotaSlice)


@PROPERTY
@given(pipeline=pipelines, items=candidates, budget=budgets)
def test_every_candidate_is_decided_exactly_once(
        pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget) -> None:
    """In a finished run each candidate index gets exactly one item event, the
    report's totals count every candidate (negative-token ones too), and the
    report's invariants hold."""
    out, collector = _run(pipeline, items, budget)
    if out is None:
        return
    decided = [e.candidate_index for e in collector.events
               if isinstance(e, ItemExcluded | ItemIncluded)]
    assert sorted(decided) == list(range(len(items)))
    report = collector.build_report()
    assert report.is_complete
    assert report.total_candidates == len(items) == len(report.included) + len(report.excluded)
    assert report.total_tokens_considered == sum(i.tokens for i in items)
    assert [i.item for i in report.included] == out
    assert_report_consistent(report)
    (expect(report)
        .excluded_items_are_sorted_by_score_descending()
        .have_at_least_n_exclusions(len(items) - len(out))
        .have_kind_coverage_count(len({i.kind for i in out})))


@PROPERTY
@given(pipeline=pipelines, items=candidates, budget=budgets)
def test_non_pinned_tokens_respect_the_strategy_budget_rules(
        pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget) -> None:
    """Budget-bound slicers keep non-pinned tokens within the effective target;
    under Throw and Truncate the whole window fits the target unless pinned
    items alone exceed it; Throw raises only when the merged selection is over."""
    out, _, error = _run_catching(pipeline, items, budget)
    valid = [i for i in items if i.tokens >= 0]
    pinned_tokens = sum(i.tokens for i in valid if i.pinned)
    if pinned_tokens > budget.max_tokens - budget.output_reserve:
        assert isinstance(error, PinnedBudgetError)
        return
    if isinstance(error, BudgetOverflowError):
        assert pipeline.overflow_strategy is OverflowStrategy.THROW
        assert error.merged_tokens > error.target_tokens == budget.target_tokens
        return
    if out is None:
        assert isinstance(error, CountRequirementError)
        return
    unpinned = sum(i.tokens for i in out if not i.pinned)
    if isinstance(pipeline.slicer, BUDGET_BOUND):
        assert unpinned <= budget.effective(pinned_tokens).target_tokens
    if pipeline.overflow_strategy is not OverflowStrategy.PROCEED:
        total = sum(i.tokens for i in out)
        assert total <= budget.target_tokens or unpinned == 0
    assert sum(1 for i in out if i.pinned) == sum(1 for i in valid if i.pinned)


def _refuse_constant(name: str) -> object:
    raise AssertionError(f"{name} is not valid JSON")


@PROPERTY
@given(pipeline=pipelines, items=candidates, budget=budgets)
def test_report_from_json_round_tripped_events_equals_live_report(
        pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget) -> None:
    """Folding the events after a JSON round trip (one strict-JSON line each) gives
    the same report as folding the live events (failed runs included). Every
    event decodes equal to the live one, save that run_failed's exception object
    stays in process: its flat form keeps the error's type and text (new with
    the event stream), and a failed run's live event holds the very exception
    raised."""
    _, collector, error = _run_catching(pipeline, items, budget)
    lines = [event_to_json(e) for e in collector.events]
    for line in lines:
        assert "\n" not in line
        json.loads(line, parse_constant=_refuse_constant)
    decoded = [event_from_json(line) for line in lines]
    live = [msgspec.structs.replace(e, exception=None) if isinstance(e, RunFailed) else e
            for e in collector.events]
    assert decoded == live
    assert build_report(decoded) == collector.build_report()
    failed = [e for e in collector.events if isinstance(e, RunFailed)]
    assert [f.exception for f in failed] == ([] if error is None else [error])


@PROPERTY
@given(pipeline=pipelines, items=candidates, budget=budgets)
def test_runs_are_deterministic_and_do_not_touch_the_candidates(
        pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget) -> None:
    """The same input gives the same window twice; the candidate list is unchanged."""
    before = list(items)
    first, _ = _run(pipeline, items, budget)
    second, _ = _run(pipeline, items, budget)
    assert first == second
    assert items == before


@PROPERTY
@given(pipeline=pipelines, items=candidates, budget=budgets)
def test_every_exclusion_reason_is_true_of_its_item(
        pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget) -> None:
    """Each reason's data describes its own item and the run: BudgetExceeded
    carries the item's tokens, PinnedOverride names a pinned candidate and
    comes only when the item did not fit, NegativeTokens only for negative
    counts, Deduplicated only against another candidate of identical content;
    no reserved variant. Reasons that point at another candidate hold its
    index in events (new with the event stream) and its content in the report."""
    out, collector = _run(pipeline, items, budget)
    if out is None:
        return
    included = {e.candidate_index for e in collector.events if isinstance(e, ItemIncluded)}
    deduplicated = {e.candidate_index for e in collector.events
                    if isinstance(e, ItemExcluded) and isinstance(e.reason, Deduplicated)}
    for event in collector.events:
        if not isinstance(event, ItemExcluded):
            continue
        reason, item = event.reason, event.item
        assert item is items[event.candidate_index]
        assert reason.name not in RESERVED_EXCLUSION_REASONS
        if isinstance(reason, BudgetExceeded):
            assert reason.item_tokens == item.tokens
            assert reason.available_tokens >= 0
        elif isinstance(reason, PinnedOverride):
            assert isinstance(reason.displaced_by, int)
            assert items[reason.displaced_by].pinned
            assert reason.displaced_by in included
        elif isinstance(reason, NegativeTokens):
            assert item.tokens < 0
            assert reason.tokens == item.tokens
        elif isinstance(reason, Deduplicated):
            kept = reason.deduplicated_against
            assert isinstance(kept, int)
            assert kept != event.candidate_index
            assert items[kept].content == item.content
            assert kept not in deduplicated
    report = collector.build_report()
    pinned_contents = {i.content for i in items if i.pinned and i.tokens >= 0}
    for entry in report.excluded:
        if isinstance(entry.reason, PinnedOverride):
            assert entry.reason.displaced_by in pinned_contents
        elif isinstance(entry.reason, Deduplicated):
            assert entry.reason.deduplicated_against == entry.item.content
