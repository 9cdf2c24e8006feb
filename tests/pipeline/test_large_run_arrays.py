"""The array forms that the pipeline uses for large runs (``greedy_take_array``,
``greedy_density_array``, ``score_order_array``, the rank scorers' ranks (counted, from
keys in order, or by first positions), the descending order of Sort and GreedySlice,
and the distinct-hash shortcut of Deduplicate) give exactly what their plain forms
give, including in the cases each one treats specially."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cupellation._run as run_module
import cupellation.slicing._greedy as greedy
from cupellation import ContextItem, _order
from cupellation._order import QUICK_ORDER, descending_order
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


def _ranks_by_path(keys: list[int]) -> dict[str, list[float]]:
    """``_present_scores`` of ``keys`` past SORTED_RANKS, and which of its three ways
    ranked them: counted, the keys already in order, or argsorted."""
    values = np.asarray(keys, dtype=np.int64)
    assert values.size > _rank.SORTED_RANKS
    counted = _rank._counted_ranks(values)
    in_order = bool((values[:-1] <= values[1:]).all())
    path = "counted" if counted is not None else "in order" if in_order else "argsort"
    return {path: _rank._present_scores(values).tolist()}


@pytest.mark.parametrize(("case", "path"), [
    ("priorities", "counted"),
    ("span equal to the count", "counted"),
    ("span one past the count", "argsort"),
    ("int64's top, a small span", "counted"),
    ("int64's bottom, a small span", "counted"),
    ("timestamps in order, ties", "in order"),
    ("timestamps in order, no ties", "in order"),
    ("timestamps at random", "argsort"),
    ("int64's two ends", "argsort"),
])
def test_large_ranks_by_count_in_order_or_argsort_equal_the_generic(case: str, path: str
                                                                     ) -> None:
    """Past SORTED_RANKS keys, the ranks counted (keys spanning no more integers than
    there are keys, at int64's ends too), taken from keys already in order (ties
    included) and from one argsort each give the generic ranks' floats, and each case
    takes the way named."""
    rng = random.Random(case)
    n = _rank.SORTED_RANKS + 1 + rng.randrange(300)
    keys = {
        "priorities": lambda: [rng.randrange(0, 101) for _ in range(n)],
        "span equal to the count": lambda: [0, n, *(rng.randrange(0, n + 1)
                                                   for _ in range(n - 2))],
        "span one past the count": lambda: [0, n + 1, *(rng.randrange(0, n + 2)
                                                        for _ in range(n - 2))],
        "int64's top, a small span": lambda: [INT64_MAX - rng.randrange(0, 40)
                                              for _ in range(n)],
        "int64's bottom, a small span": lambda: [-INT64_MAX - 1 + rng.randrange(0, 40)
                                                 for _ in range(n)],
        "timestamps in order, ties": lambda: sorted(rng.randrange(0, 10**12)
                                                    for _ in range(n // 2 + 1)) * 2,
        "timestamps in order, no ties": lambda: list(range(0, n * 10**9, 10**9)),
        "timestamps at random": lambda: [rng.randrange(0, 10**12) for _ in range(n)],
        "int64's two ends": lambda: [rng.choice((-INT64_MAX - 1, INT64_MAX, 0))
                                     for _ in range(n)],
    }[case]()
    if case == "timestamps in order, ties":
        keys.sort()
    generic = _rank._rank_scores_generic(keys, keys, len(keys) - 1)
    assert _ranks_by_path(keys) == {path: generic}


def _keys(case: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Float keys of one of descending_order's cases."""
    if case == "distinct":
        return rng.random(n)
    if case == "a few ties, one at each end":
        keys = rng.random(n)
        keys[[0, 1, n - 2, n - 1]] = [5.0, 5.0, -5.0, -5.0]
        keys[rng.choice(n - 4, 40, replace=False) + 2] = 0.5
        return keys
    if case == "many ties, most keys distinct":  # past _FEW_TIES, under the sample's 10%
        return np.round(rng.random(n), 4)
    if case == "a priority's levels":
        return rng.integers(0, 101, n) / 100.0
    if case == "signed zeros":
        return np.where(rng.random(n) < 0.5, 0.0, -0.0)
    if case == "signed zeros among distinct keys":  # ties of 0.0 and -0.0, quicksort's way
        keys = rng.random(n) - 0.5
        keys[rng.choice(n, 40, replace=False)] = rng.choice([0.0, -0.0], 40)
        return keys
    if case == "NaNs among distinct keys":
        keys = rng.random(n)
        keys[rng.choice(n, 30, replace=False)] = np.nan
        return keys
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["distinct", "a few ties, one at each end",
                                  "many ties, most keys distinct", "a priority's levels",
                                  "signed zeros", "signed zeros among distinct keys",
                                  "NaNs among distinct keys"])
@pytest.mark.parametrize("n", [100, QUICK_ORDER + 1, 20_000])
def test_descending_order_is_numpys_stable_order(case: str, n: int) -> None:
    """descending_order, whichever way it takes (numpy's stable sort at or below
    QUICK_ORDER keys, for many ties or a NaN; the quicksort with no tie, with runs of
    ties sorted one by one, or with one more argsort over unique keys), is
    ``argsort(-keys, kind="stable")``: key descending, ties (0.0 and -0.0 among them)
    by position."""
    keys = _keys(case, n, np.random.default_rng(sum(map(ord, case)) + n))
    got = descending_order(keys)
    assert got.dtype == np.intp
    assert got.tolist() == np.argsort(-keys, kind="stable").tolist()


def test_keys_with_many_ties_are_told_by_a_sample() -> None:
    """descending_order sends keys of a few levels (a priority's 101) straight to the
    stable sort, which orders them fastest, and keys mostly distinct to the
    quicksort: the sample tells them apart at every size past QUICK_ORDER."""
    rng = np.random.default_rng(7)
    for n in (QUICK_ORDER + 1, 100_000):
        assert _order._many_ties(-(rng.integers(0, 101, n) / 100.0))
        assert not _order._many_ties(-rng.random(n))
        assert not _order._many_ties(-np.round(rng.random(n), 4))
