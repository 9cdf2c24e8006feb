"""GreedySlice: spec/src/slicers/greedy.md, its edge-case table and conformance notes."""

from __future__ import annotations

import sys

import pytest
from _slicing_support import budget, contents, reference_greedy, scored, scored_lists
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import ContextItem, ScoredItem
from cupellation.exceptions import InvalidTypeError, InvalidValueError
from cupellation.slicing import GreedySlice, Slicer

GREEDY = GreedySlice()


def test_is_a_slicer_with_a_readable_repr() -> None:
    """GreedySlice satisfies the Slicer protocol, has no mutable state and reprs as its
    constructor call."""
    assert isinstance(GREEDY, Slicer)
    assert repr(GREEDY) == "GreedySlice()"
    assert not hasattr(GREEDY, "__dict__")
    assert GreedySlice() == GREEDY


# -- the edge-case table ------------------------------------------------------

def test_empty_input_gives_empty_list() -> None:
    """Edge case: empty scoredItems -> empty list."""
    assert GREEDY.slice([], budget(100)) == []


def test_zero_target_gives_empty_list_even_with_zero_token_items() -> None:
    """Edge case: targetTokens <= 0 -> empty list (zero-token items included in that)."""
    items = scored(("z", 0, 0.5), ("a", 10, 0.9))
    assert GREEDY.slice(items, budget(0, 100)) == []


def test_all_zero_token_items_are_selected() -> None:
    """Edge case: all items zero-token -> all selected."""
    items = scored(("a", 0, 0.9), ("b", 0, 0.1), ("c", 0, 0.0))
    assert contents(GREEDY.slice(items, budget(1))) == ["a", "b", "c"]


def test_single_item_that_fits_is_selected() -> None:
    """Edge case: a single item within the budget is selected (exact fit included)."""
    items = scored(("a", 100, 0.5))
    assert contents(GREEDY.slice(items, budget(100))) == ["a"]


def test_single_item_exceeding_budget_leaves_only_zero_token_items() -> None:
    """Edge case: a single item over budget is not selected; zero-token items still are."""
    assert GREEDY.slice(scored(("big", 101, 0.9)), budget(100)) == []
    items = scored(("big", 101, 0.9), ("z", 0, 0.1))
    assert contents(GREEDY.slice(items, budget(100))) == ["z"]


def test_all_items_exceeding_budget_leave_only_zero_token_items() -> None:
    """Edge case: every item over budget individually -> only zero-token items."""
    items = scored(("a", 200, 0.9), ("z1", 0, 0.5), ("b", 150, 0.4), ("z2", 0, 0.3))
    assert contents(GREEDY.slice(items, budget(100))) == ["z1", "z2"]


def test_all_items_fitting_are_all_selected() -> None:
    """Edge case: everything fits -> everything selected."""
    items = scored(("a", 10, 0.9), ("b", 20, 0.5), ("c", 30, 0.1))
    assert sorted(contents(GREEDY.slice(items, budget(60)))) == ["a", "b", "c"]


# -- conformance notes --------------------------------------------------------

def test_output_is_in_density_order_not_input_order() -> None:
    """The result follows density descending (0.007, 0.005), not the score-sorted input."""
    items = scored(("big", 400, 0.9), ("mid", 100, 0.7), ("low", 100, 0.5))
    assert contents(GREEDY.slice(items, budget(300))) == ["mid", "low"]


def test_equal_densities_keep_input_index_order() -> None:
    """Deterministic tie-break: equal density -> lower original index first."""
    items = scored(("a", 200, 0.4), ("b", 100, 0.2), ("c", 50, 0.1), ("d", 10, 0.02))
    assert contents(GREEDY.slice(items, budget(1000))) == ["a", "b", "c", "d"]
    # The tie decides which item gets the last 200 tokens.
    assert contents(GREEDY.slice(items, budget(200))) == ["a"]


def test_zero_token_items_ignore_score_and_come_first() -> None:
    """Zero-token items have density MAX_FLOAT: first, in index order whatever their score."""
    items = scored(("n", 10, 0.9), ("z-low", 0, 0.0), ("z-high", 0, 0.8))
    assert contents(GREEDY.slice(items, budget(10))) == ["z-low", "z-high", "n"]


def test_positive_item_with_max_float_density_ties_zero_token_items_by_index() -> None:
    """An item whose density equals MAX_FLOAT sorts among zero-token items by index."""
    items = [ScoredItem(ContextItem("huge", 1), sys.float_info.max),
             ScoredItem(ContextItem("z", 0), 0.0)]
    assert contents(GREEDY.slice(items, budget(1))) == ["huge", "z"]


def test_items_that_do_not_fit_are_skipped_not_deferred() -> None:
    """A skipped large item does not stop later, smaller items from filling the budget."""
    items = scored(("a", 60, 0.6), ("big", 50, 0.3), ("c", 40, 0.2))
    # densities: a 0.01, big 0.006, c 0.005; after a, 40 remain: big skipped, c taken.
    assert contents(GREEDY.slice(items, budget(100))) == ["a", "c"]


def test_negative_token_items_are_never_selected() -> None:
    """Negative token counts (dropped by Classify in a pipeline) never enter the selection."""
    items = scored(("neg", -50, 0.9), ("a", 100, 0.5))
    assert contents(GREEDY.slice(items, budget(100))) == ["a"]


def test_accepts_plain_pairs_and_returns_the_same_objects() -> None:
    """(item, score) tuples are accepted and the very same item objects come back."""
    item = ContextItem("a", 10)
    (result,) = GREEDY.slice([(item, 0.5)], budget(10))  # type: ignore[list-item]
    assert result is item


def test_rejects_non_finite_scores_and_bad_entries() -> None:
    """NaN/infinite scores and non-ScoredItem entries raise errors naming the entry."""
    with pytest.raises(InvalidValueError, match=r"scored\[0\]\.score"):
        GREEDY.slice([ScoredItem(ContextItem("a", 1), float("nan"))], budget(5))
    with pytest.raises(InvalidTypeError, match=r"scored\[1\]"):
        GREEDY.slice([ScoredItem(ContextItem("a", 1), 0.5), "b"], budget(5))  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError, match="budget"):
        GREEDY.slice([], 100)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(scored_lists(max_size=20), st.integers(min_value=0, max_value=1500))
def test_matches_reference_transcription(entries: list[ScoredItem], target: int) -> None:
    """The numpy implementation returns exactly GREEDY-SLICE's items, in its order."""
    tokens = [entry.item.tokens for entry in entries]
    scores = [entry.score for entry in entries]
    expected = [entries[i].item for i in reference_greedy(tokens, scores, target)]
    actual = GREEDY.slice(entries, budget(target))
    assert [id(item) for item in actual] == [id(item) for item in expected]


def test_token_count_beyond_the_float_range_is_an_invalid_value() -> None:
    """A token count no double can hold (10**400; ContextItem refuses it, so it is forced
    in here) is an InvalidValueError naming the entry, not numpy's bare OverflowError."""
    huge = ContextItem("huge", 5)
    object.__setattr__(huge, "tokens", 10**400)
    entries = [ScoredItem(ContextItem("a", 1), 0.5), ScoredItem(huge, 0.5)]
    with pytest.raises(InvalidValueError) as caught:
        GreedySlice().slice(entries, budget(100))
    assert caught.value.field == "GreedySlice scored[1].item.tokens"
    assert caught.value.value == 10**400


def test_huge_finite_scores_are_ordinary_densities() -> None:
    """Scores far outside [0, 1] (1e305, -1e305) are plain float densities to greedy."""
    entries = scored(("neg", 10, -1e305), ("big", 10, 1e305), ("mid", 10, 0.5))
    assert contents(GreedySlice().slice(entries, budget(20))) == ["big", "mid"]
