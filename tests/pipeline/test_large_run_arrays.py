"""The array forms that the pipeline uses for large runs (``greedy_take_array``,
``greedy_density_array``, ``score_order_array``, the rank scorers' first positions and
the distinct-hash shortcut of Deduplicate) give exactly what their plain forms give,
including in the cases each one treats specially."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cupellation._run as run_module
import cupellation.slicing._greedy as greedy
from cupellation import ContextItem
from cupellation._run import best_of_each_content, score_order, score_order_array
from cupellation.scoring import _rank

INT64_MAX = 2**63 - 1

costs = st.lists(st.one_of(st.integers(0, 60), st.integers(-5, 5), st.integers(0, 10**6),
                           st.just(INT64_MAX)), min_size=0, max_size=120)


def _take_both(tokens: list[int], scores: list[float], target: int) -> tuple[list[int], list[int]]:
    order = greedy.greedy_density_order(tokens, scores)
    plain = greedy.greedy_take(order, tokens, target)
    arrays = greedy.greedy_take_array(np.asarray(order, dtype=np.intp),
                                      np.asarray(tokens, dtype=np.int64), target)
    return plain, arrays.tolist()


@settings(max_examples=200, deadline=None)
@given(tokens=costs, seed=st.integers(0, 2**32), target=st.integers(1, 3_000))
def test_the_array_take_selects_what_the_loop_selects(tokens: list[int], seed: int,
                                                      target: int) -> None:
    """For any costs (zero, negative, huge, int64's maximum) and targets, the array
    take returns the loop's indices in the loop's order."""
    rng = random.Random(seed)
    scores = [rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in tokens]
    plain, arrays = _take_both(tokens, scores, target)
    assert arrays == plain


def test_the_plain_loop_finishes_after_the_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Costs that leave items in play after every round (so the loop finishes the
    take from where the rounds stopped) still give the loop's selection; with one
    round allowed and with the default both."""
    rng = random.Random(7)
    tokens = [rng.choice([1, 2, 3, 50, 51]) for _ in range(2_000)]
    scores = [rng.random() for _ in tokens]
    expected = _take_both(tokens, scores, 400)[0]
    for rounds in (1, 2, greedy.TAKE_ROUNDS):
        monkeypatch.setattr(greedy, "TAKE_ROUNDS", rounds)
        assert _take_both(tokens, scores, 400)[1] == expected, rounds
    # Visiting 6, 5, 1, 1 within 10: one round takes 6 and skips 5, and the two 1s
    # are still in play, so the plain loop finishes the take.
    monkeypatch.setattr(greedy, "TAKE_ROUNDS", 1)
    calls: list[list[int]] = []
    real = greedy.greedy_take

    def recorded(order: list[int], costs: list[int], target: int) -> list[int]:
        calls.append(list(order))
        return real(order, costs, target)

    monkeypatch.setattr(greedy, "greedy_take", recorded)
    plain, arrays = _take_both([6, 5, 1, 1], [0.9, 0.7, 0.1, 0.05], 10)
    assert arrays == plain == [0, 2, 3]
    assert calls[1:] == [[2, 3]]  # after the oracle's call: the finishing loop's


def test_sums_that_could_overflow_int64_take_the_loop() -> None:
    """A target so large that capped running sums could pass int64 is taken by the
    plain loop, and still equals it (Python ints never overflow)."""
    tokens = [INT64_MAX // 3, INT64_MAX // 3, 5, INT64_MAX // 2, 0]
    scores = [1.0, 0.9, 0.8, 0.7, 0.1]
    plain, arrays = _take_both(tokens, scores, INT64_MAX - 1)
    assert arrays == plain == [4, 2, 0, 1]


@settings(max_examples=100, deadline=None)
@given(tokens=st.lists(st.integers(0, 2**62), min_size=1, max_size=90),
       seed=st.integers(0, 2**32))
def test_the_density_array_orders_as_the_list_form(tokens: list[int], seed: int) -> None:
    """greedy_density_array over int64 tokens gives greedy_density_order's order,
    zero tokens and tokens beyond float64's exact integers included."""
    rng = random.Random(seed)
    scores = [rng.choice([0.0, -0.0, 0.25, rng.random()]) for _ in tokens]
    expected = greedy.greedy_density_order(tokens, scores)
    got = greedy.greedy_density_array(np.asarray(tokens, dtype=np.int64),
                                      np.asarray(scores, dtype=np.float64))
    assert got.tolist() == expected


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.integers(-5, 5), st.integers(-2**63, 2**63 - 1)),
                     min_size=129, max_size=260))
def test_rank_scores_equal_the_generic_ranks(keys: list[int | None]) -> None:
    """Past SMALL_RANK keys, the numpy ranks (ties, None keys, int64's ends) equal
    the generic dictionary of first sorted positions, float for float, by search
    and by first positions (SORTED_RANKS lowered to every size)."""
    present = [key for key in keys if key is not None]
    if len(present) <= 1:
        return
    generic = _rank._rank_scores_generic(keys, present, len(present) - 1)
    assert _rank.rank_scores(keys) == generic
    saved = _rank.SORTED_RANKS
    _rank.SORTED_RANKS = 0
    try:
        assert _rank.rank_scores(keys) == generic
    finally:
        _rank.SORTED_RANKS = saved


@settings(max_examples=60, deadline=None)
@given(scores=st.lists(st.sampled_from([0.0, -0.0, 0.5, 1.0, 0.25]), max_size=150),
       keep=st.integers(0, 3))
def test_score_order_arrays_equal_the_lists(scores: list[float], keep: int) -> None:
    """score_order_array's order and scores are score_order's, with and without
    survivors."""
    survivors = None if keep == 0 else [p for p in range(len(scores)) if p % (keep + 1)]
    count = len(scores) if survivors is None else len(survivors)
    order, ranked = score_order_array(scores, survivors)
    numpy_count = max(count, run_module.SMALL_SORT + 1)  # score_order's numpy path
    expected = score_order(np.asarray(scores, dtype=np.float64), survivors, numpy_count)
    assert (order.tolist(), ranked.tolist()) == expected


def test_deduplicate_keeps_the_same_items_past_the_hash_shortcut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past HASHED_CONTENTS items (lowered here), distinct contents give None
    (nothing removed) and one repeated content gives the set-based answer (the best
    score keeps it, ties the earlier)."""
    monkeypatch.setattr(run_module, "HASHED_CONTENTS", 64)
    items = [ContextItem(f"content {k}", tokens=1) for k in range(300)]
    scores = [0.5] * 300
    assert best_of_each_content(items, scores) is None
    repeated = [*items, ContextItem("content 7", tokens=2), ContextItem("content 9", tokens=2)]
    best = best_of_each_content(repeated, [*scores, 0.9, 0.5])
    assert best is not None
    assert best["content 7"] == 300
    assert best["content 9"] == 9
    assert len(best) == 300
