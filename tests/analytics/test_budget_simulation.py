"""Budget simulation (spec/src/analytics/budget-simulation.md): GetMarginalItems and
FindMinBudgetFor, their guards and exact messages, the DryRun determinism they rest
on, and the reuse of Score/Deduplicate/Sort across dry runs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import (
    ContextBudget,
    ContextItem,
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    OverflowStrategy,
    Pipeline,
    PriorityScorer,
    QuotaSlice,
    ReflexiveScorer,
    ScoredItem,
    UShapedPlacer,
)
from cupellation.analytics import (
    FIND_MIN_BUDGET_GUARD_MESSAGE,
    MARGINAL_GUARD_MESSAGE,
    find_min_budget_for,
    get_marginal_items,
    scaled_budget,
    search_min_budget,
)
from cupellation.exceptions import (
    InvalidValueError,
    NonMonotonicSlicerError,
    SpecArgumentError,
)
from cupellation.slicing import CountQuotaEntry, QuotaEntry


class CountingScorer:
    """PriorityScorer that counts its score_all calls (a custom scorer)."""

    def __init__(self) -> None:
        self.calls = 0
        self.inner = PriorityScorer()

    def score_all(self, items: Sequence[ContextItem]) -> list[float]:
        self.calls += 1
        return list(self.inner.score_all(items))


class CountingSlicer:
    """GreedySlice that counts its slice calls: one per dry run."""

    def __init__(self) -> None:
        self.calls = 0

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /
              ) -> list[ContextItem]:
        self.calls += 1
        return GreedySlice().slice(scored, budget)


def _items(n: int = 8) -> list[ContextItem]:
    return [ContextItem(f"item {k}", 10 * (k % 4 + 1), priority=k) for k in range(n)]


def _budget(max_tokens: int = 100, target: int = 80) -> ContextBudget:
    return ContextBudget(max_tokens, target)


# -- the exact messages --------------------------------------------------------------


def test_the_guard_messages_are_the_chapters_word_for_word() -> None:
    """Both InvalidOperationException messages are quoted exactly, and str() of the
    error is the message alone."""
    assert MARGINAL_GUARD_MESSAGE == (
        "GetMarginalItems requires monotonic item inclusion. QuotaSlice produces "
        "non-monotonic inclusion as budget changes shift percentage allocations.")
    assert FIND_MIN_BUDGET_GUARD_MESSAGE == (
        "FindMinBudgetFor requires monotonic item inclusion. QuotaSlice and "
        "CountQuotaSlice produce non-monotonic inclusion as budget changes shift "
        "allocations. Use a GreedySlice or KnapsackSlice inner slicer for budget "
        "simulation.")


def test_get_marginal_items_refuses_quota_slice_with_the_exact_message() -> None:
    """The QuotaSlice guard of GetMarginalItems raises with the chapter's message."""
    items = _items()
    pipeline = Pipeline(PriorityScorer(), QuotaSlice(GreedySlice(), [QuotaEntry("Message")]))
    with pytest.raises(NonMonotonicSlicerError) as caught:
        get_marginal_items(pipeline, items, _budget(), 10)
    assert str(caught.value) == MARGINAL_GUARD_MESSAGE
    assert caught.value.field == "slicer"


@pytest.mark.parametrize("slicer", [
    QuotaSlice(GreedySlice(), [QuotaEntry("Message")]),
    CountQuotaSlice(GreedySlice(), [CountQuotaEntry("Message", 1, cap_count=3)]),
    CountConstrainedKnapsackSlice([CountQuotaEntry("Message", 1, cap_count=3)]),
])
def test_find_min_budget_for_refuses_quota_slicers_with_the_exact_message(
        slicer: object) -> None:
    """QuotaSlice, CountQuotaSlice (and the count-constrained knapsack, a count quota
    slicer too) raise the FindMinBudgetFor guard with the chapter's message."""
    items = _items()
    pipeline = Pipeline(PriorityScorer(), slicer)  # type: ignore[arg-type]
    with pytest.raises(NonMonotonicSlicerError) as caught:
        find_min_budget_for(pipeline, items, items[0], 100, budget=_budget())
    assert str(caught.value) == FIND_MIN_BUDGET_GUARD_MESSAGE


def test_find_min_budget_for_preconditions_have_the_exact_messages() -> None:
    """targetItem not an element of items (by identity: an equal copy is not one), and
    searchCeiling below the item's tokens, raise the ArgumentException messages."""
    items = _items()
    pipeline = Pipeline(PriorityScorer(), budget=_budget())
    copy = ContextItem(items[0].content, items[0].tokens, priority=items[0].priority)
    assert copy == items[0]
    with pytest.raises(SpecArgumentError) as caught:
        find_min_budget_for(pipeline, items, copy, 100)
    assert str(caught.value) == "targetItem must be an element of items"
    assert caught.value.field == "target_item"
    with pytest.raises(SpecArgumentError) as caught:
        find_min_budget_for(pipeline, items, items[3], items[3].tokens - 1)
    assert str(caught.value) == "searchCeiling must be >= targetItem.Tokens"
    assert caught.value.value == items[3].tokens - 1


# -- GetMarginalItems ----------------------------------------------------------------


def test_marginal_items_are_the_full_runs_items_missing_from_the_reduced_run() -> None:
    """primary \\ margin, in the full run's placed order: the items that a budget
    `slack_tokens` smaller (max and target both) no longer includes."""
    items = [ContextItem(f"i{k}", 10, priority=10 - k) for k in range(6)]
    pipeline = Pipeline(PriorityScorer())
    budget = ContextBudget(60, 50)
    full = pipeline.run(items, budget)
    reduced = pipeline.run(items, ContextBudget(40, 30))
    marginal = get_marginal_items(pipeline, items, budget, 20)
    assert marginal == [item for item in full if all(item is not r for r in reduced)]
    assert [item.content for item in marginal] == ["i3", "i4"]
    assert all(any(m is item for item in items) for m in marginal)


def test_marginal_items_with_no_slack_are_none_and_bad_slack_is_refused() -> None:
    """A slack of 0 compares a run with itself (determinism: nothing marginal); a
    negative slack or one above target_tokens is refused naming slack_tokens."""
    items = _items()
    pipeline = Pipeline(PriorityScorer())
    assert get_marginal_items(pipeline, items, _budget(), 0) == []
    for slack in (-1, 81):
        with pytest.raises(InvalidValueError) as caught:
            get_marginal_items(pipeline, items, _budget(), slack)
        assert caught.value.field == "slack_tokens"


def test_marginal_items_keep_output_reserve_and_reserved_slots() -> None:
    """The reduced budget keeps output_reserve and reserved_slots (the chapter's
    text): an item the reserve crowds out is marginal at the right slack."""
    items = [ContextItem(f"i{k}", 10, priority=10 - k) for k in range(5)]
    pipeline = Pipeline(PriorityScorer())
    budget = ContextBudget(60, 40, output_reserve=20, reserved_slots={"Document": 10})
    # Effective target: min(40 - 10, 60 - 20 - 10) = 30 -> three items; with slack 10:
    # min(30 - 10, 50 - 20 - 10) = 20 -> two.
    marginal = get_marginal_items(pipeline, items, budget, 10)
    assert [item.content for item in marginal] == ["i2"]


# -- FindMinBudgetFor ----------------------------------------------------------------


def test_min_budget_is_the_smallest_budget_that_includes_the_item() -> None:
    """Where inclusion is monotonic (equal token counts: greedy takes a prefix of its
    order), brute force over every budget agrees with the binary search for every
    item, the target scaled with the max as scaled_budget says."""
    items = [ContextItem(f"item {k}", 20, priority=(k * 7) % 10) for k in range(10)]
    budget = ContextBudget(200, 150)
    pipeline = Pipeline(PriorityScorer(), budget=budget)
    for item in items:
        expected = next((size for size in range(item.tokens, 400)
                         if any(x is item for x in pipeline.run(items,
                                                                scaled_budget(budget, size)))),
                        None)
        assert find_min_budget_for(pipeline, items, item, 399) == expected


def test_a_found_budget_always_includes_the_item() -> None:
    """Greedy's skip-and-continue is not strictly monotonic with unequal token counts
    (the chapter assumes it is); whatever the search returns is still verified: a
    dry run at that budget includes the item."""
    items = _items(10)
    budget = ContextBudget(200, 150)
    pipeline = Pipeline(ReflexiveScorer(), budget=budget)
    for item in items:
        found = find_min_budget_for(pipeline, items, item, 399)
        assert found is not None
        assert any(x is item for x in pipeline.run(items, scaled_budget(budget, found)))


def test_min_budget_tests_the_lower_bound_itself() -> None:
    """An item that fits at exactly its own token count gets that count (the
    chapter's loop never tries its lower bound; ours does)."""
    only = ContextItem("only", 25)
    pipeline = Pipeline(PriorityScorer(), budget=ContextBudget(100, 100))
    assert find_min_budget_for(pipeline, [only], only, 100) == 25


def test_min_budget_is_none_when_the_ceiling_is_too_low_and_defaults_to_max() -> None:
    """Not selectable within [tokens, ceiling] is None; the ceiling defaults to the
    budget's max_tokens, at which an excluded item stays excluded."""
    items = [ContextItem(f"item {k}", 20, priority=k) for k in range(10)]
    budget = ContextBudget(60, 60)
    pipeline = Pipeline(PriorityScorer(), budget=budget)
    report = pipeline.dry_run(items)
    left_out = next(item for item in items
                    if all(entry.item is not item for entry in report.included))
    assert find_min_budget_for(pipeline, items, left_out) is None
    assert find_min_budget_for(pipeline, items, left_out, 10_000) is not None


def test_min_budget_scales_the_target_with_the_max() -> None:
    """With target half of max, an item of 30 tokens alone needs a max of 60."""
    item = ContextItem("x", 30)
    pipeline = Pipeline(PriorityScorer(), budget=ContextBudget(1000, 500))
    assert find_min_budget_for(pipeline, [item], item, 1000) == 60
    assert scaled_budget(ContextBudget(1000, 500, output_reserve=100), 60) == ContextBudget(
        60, 30, 60)


def test_min_budget_for_a_deduplicated_copy_is_none_without_dry_runs() -> None:
    """An item deduplicated against a better copy never reaches the slicer: None,
    found without a dry run."""
    kept = ContextItem("same", 5, priority=9)
    dropped = ContextItem("same", 5, priority=1)
    pipeline = Pipeline(PriorityScorer(), budget=ContextBudget(100, 100))
    search = search_min_budget(pipeline, [kept, dropped], dropped, 100)
    assert search.budget is None
    assert search.excluded_before_slice
    assert search.dry_runs == 0


def test_min_budget_counts_budgets_where_pinned_items_do_not_fit_as_excluded() -> None:
    """Below the pinned items' tokens a dry run raises PinnedBudgetError; the search
    treats it as not included and still finds the minimum."""
    pinned = ContextItem("system", 50, pinned=True)
    item = ContextItem("x", 10)
    pipeline = Pipeline(PriorityScorer(), budget=ContextBudget(100, 100),
                        overflow_strategy=OverflowStrategy.TRUNCATE)
    assert find_min_budget_for(pipeline, [pinned, item], item, 100) == 60
    assert find_min_budget_for(pipeline, [pinned, item], pinned, 100) == 50


def test_min_budget_reuses_scores_and_takes_at_most_log2_dry_runs() -> None:
    """The scorer runs once for the whole search, and the slicer once per dry run:
    at most ceil(log2(ceiling - tokens + 1)) + 1 of them (20 at a ceiling of 2**19)."""
    items = [ContextItem(f"i{k}", 1 + k % 50, priority=k % 17) for k in range(300)]
    scorer, slicer = CountingScorer(), CountingSlicer()
    pipeline = Pipeline(scorer, slicer, budget=ContextBudget(2**19, 2**18))
    search = search_min_budget(pipeline, items, items[7], 2**19)
    assert scorer.calls == 1
    assert slicer.calls == search.dry_runs <= 20
    assert search.budget is not None


@settings(max_examples=60, deadline=None)
@given(tokens=st.lists(st.integers(0, 40), min_size=1, max_size=12),
       priorities=st.lists(st.integers(0, 5), min_size=12, max_size=12),
       max_tokens=st.integers(1, 300), target_pct=st.integers(0, 100),
       size=st.integers(0, 400), knapsack=st.booleans(),
       strategy=st.sampled_from(list(OverflowStrategy)))
def test_a_prepared_dry_run_is_the_pipelines_own_run(
        tokens: list[int], priorities: list[int], max_tokens: int, target_pct: int,
        size: int, knapsack: bool, strategy: OverflowStrategy) -> None:
    """DryRun determinism and the reuse: slicing the prepared Score/Deduplicate/Sort
    results at any budget gives exactly Pipeline.run's window (or its error)."""
    items = [ContextItem(f"c{k % 5}", t, priority=priorities[k], pinned=(k == 3 and t < 20))
             for k, t in enumerate(tokens)]
    pipeline = Pipeline(PriorityScorer(), KnapsackSlice(5) if knapsack else GreedySlice(),
                        UShapedPlacer(), overflow_strategy=strategy)
    budget = scaled_budget(ContextBudget(max_tokens, max_tokens * target_pct // 100), size)
    prepared = pipeline.prepare(items)
    try:
        expected: list[ContextItem] | str = pipeline.run(items, budget)
    except Exception as exc:
        expected = type(exc).__name__
    try:
        got: list[ContextItem] | str = prepared.run(budget)
    except Exception as exc:
        got = type(exc).__name__
    if isinstance(expected, list) and isinstance(got, list):
        assert [id(item) for item in got] == [id(item) for item in expected]
    else:
        assert got == expected


def test_a_search_above_a_budget_finds_the_smallest_larger_one() -> None:
    """``above`` (why's question: what more budget?) searches only budgets greater than
    it: with monotonic inclusion (equal token counts) the answer is the smallest budget
    in (above, ceiling] that includes the item, by brute force, even for items a
    smaller budget also includes; None when none there does."""
    items = [ContextItem(f"item {k}", 20, priority=(k * 7) % 10) for k in range(10)]
    budget = ContextBudget(200, 150)
    pipeline = Pipeline(PriorityScorer(), budget=budget)
    for item in items:
        found = search_min_budget(pipeline, items, item, 399, above=120).budget
        expected = next((size for size in range(121, 400)
                         if any(x is item for x in pipeline.run(items,
                                                                scaled_budget(budget, size)))),
                        None)
        assert found == expected
