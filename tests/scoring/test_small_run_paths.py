"""The plain-Python paths that small runs take (``SMALL_RANK``, ``SMALL_COMPOSITE``,
``SMALL_GREEDY``, the run's ``SMALL_SORT``: numpy's fixed cost per call outweighs its
speed below about 150 items) give exactly what the numpy paths give: the same floats, the same
order, the same errors, each child scorer called once."""

from __future__ import annotations

import pickle
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

import cupellation._run
from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    Pipeline,
    TraceDetailLevel,
)
from cupellation.exceptions import ScorerError
from cupellation.scoring import (
    CompositeScorer,
    FunctionScorer,
    PriorityScorer,
    RecencyScorer,
    _composite,
    _rank,
)
from cupellation.slicing import _greedy

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _keys(rng: random.Random, n: int) -> list[int | None]:
    """Keys with Nones, ties (a small range) and, sometimes, huge values."""
    span = rng.choice((3, 50, 2**62))
    return [None if rng.random() < 0.2 else rng.randrange(-span, span) for _ in range(n)]


def test_small_rank_scores_equal_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    """For 400 random key lists of 0-128 keys (Nones, ties, 62-bit values) the plain
    ranking returns the very floats the numpy ranking returns."""
    rng = random.Random(7)
    cases = [_keys(rng, rng.randrange(0, _rank.SMALL_RANK + 1)) for _ in range(400)]
    small = [_rank.rank_scores(keys) for keys in cases]
    monkeypatch.setattr(_rank, "SMALL_RANK", 0)
    assert small == [_rank.rank_scores(keys) for keys in cases]
    assert any(len({s for s in scores if s}) < len(scores) - 2 for scores in small)  # ties met


def _items(rng: random.Random, n: int) -> list[ContextItem]:
    return [ContextItem(f"item {k}", rng.randrange(0, 50),
                        priority=None if rng.random() < 0.3 else rng.randrange(0, 5),
                        timestamp=None if rng.random() < 0.2
                        else T0 + timedelta(seconds=rng.randrange(0, 20)))
            for k in range(n)]


def test_small_composite_sums_equal_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A composite over 1-128 items with weights that round (1/3, 1/7) sums to the same
    floats on both paths."""
    rng = random.Random(11)
    scorer = CompositeScorer([(RecencyScorer(), 1.0), (PriorityScorer(), 3.0),
                              (RecencyScorer(), 3.0 / 7.0)])
    cases = [_items(rng, rng.randrange(1, _composite.SMALL_COMPOSITE + 1)) for _ in range(150)]
    small = [scorer.score_all(items) for items in cases]
    monkeypatch.setattr(_composite, "SMALL_COMPOSITE", 0)
    assert small == [scorer.score_all(items) for items in cases]


@pytest.mark.parametrize("children", [
    [(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)],
    [(RecencyScorer(), 1.0), (PriorityScorer(), 3.0), (RecencyScorer(), 3.0 / 7.0)],
    [(PriorityScorer(), 1.0)],
], ids=["two", "three", "one"])
def test_trusted_children_sum_as_the_checked_path_does(
        children: list[tuple[Any, float]]) -> None:
    """A composite of recency and priority scorers (one, two or three children) sums a
    small run without checking the children's lists, and gets the very floats the
    checked path gets (the flag turned off on an equal composite) over 1-128 items."""
    rng = random.Random(13)
    trusted = CompositeScorer(children)
    checked = CompositeScorer(children)
    object.__setattr__(checked, "_float_children", False)
    assert trusted._float_children
    for _ in range(150):
        items = _items(rng, rng.randrange(1, _composite.SMALL_COMPOSITE + 1))
        assert trusted.score_all(items) == checked.score_all(items)


def test_the_pipeline_trusts_only_scorers_that_return_finite_floats() -> None:
    """``checked_scores`` hands back a recency, priority or trusted composite's own
    list unchecked (the same floats as checked), and still refuses a NaN from a
    composite with a custom child and from a RecencyScorer subclass, naming the
    candidate."""
    items = _items(random.Random(4), 6)
    index = list(range(10, 16))
    trusted = CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)])
    assert _composite.finite_float_lists(trusted)
    assert _composite.finite_float_lists(PriorityScorer())
    got = cupellation._run.checked_scores(trusted, items, index)
    assert got == trusted.score_all(items)
    checked = CompositeScorer(trusted.children)
    object.__setattr__(checked, "_float_children", False)
    assert not _composite.finite_float_lists(checked)
    assert cupellation._run.checked_scores(checked, items, index) == got

    class _Nan(RecencyScorer):
        __slots__ = ()

        def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
            return [float("nan")] * len(items)

    for scorer in (_Nan(), CompositeScorer([(RecencyScorer(), 1.0),
                                            (_Counting([0.5] * 6), 1.0)]),
                   CompositeScorer([(_Nan(), 1.0), (PriorityScorer(), 1.0)])):
        assert not _composite.finite_float_lists(scorer)
    with pytest.raises(ScorerError) as caught:
        cupellation._run.checked_scores(_Nan(), items, index)
    assert caught.value.index == 10
    nan_child = CompositeScorer([(_Nan(), 1.0), (PriorityScorer(), 1.0)])
    with pytest.raises(ScorerError) as caught:
        cupellation._run.checked_scores(nan_child, items, index)
    assert caught.value.index == 10


def test_only_built_in_float_list_scorers_skip_the_checks() -> None:
    """The unchecked sum is for children of exactly RecencyScorer or PriorityScorer: a
    subclass (which may override score_all) or a custom scorer keeps the checks, and
    a subclass returning text still raises the ScorerError naming the item; the flag
    is left out of a pickle (which then reads in versions without it) and worked out
    again on loading, from any state that lacks it."""
    class _Odd(RecencyScorer):
        __slots__ = ()

        def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
            return ["high"] * len(items)  # type: ignore[list-item]

    odd = CompositeScorer([(RecencyScorer(), 1.0), (_Odd(), 1.0)])
    assert not odd._float_children
    with pytest.raises(ScorerError) as caught:
        odd.score_all(_items(random.Random(1), 3))
    assert caught.value.index == 0
    assert not CompositeScorer([(_Counting([0.5]), 1.0)])._float_children
    plain = CompositeScorer([(RecencyScorer(), 1.0), (PriorityScorer(), 1.0)])
    assert pickle.loads(pickle.dumps(plain))._float_children
    assert "_float_children" not in plain.__getstate__()[1]  # pickles read either way
    old = CompositeScorer.__new__(CompositeScorer)
    old.__setstate__((None, {"children": plain.children, "scorers": plain.scorers,
                             "weights": plain.weights}))
    assert old._float_children
    assert old == plain


class _Counting:
    """A scorer returning fixed raw scores (any type), counting its calls."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.calls = 0

    def score_all(self, items: Sequence[ContextItem], /) -> Any:
        self.calls += 1
        return self.raw


def test_a_child_that_is_not_plain_floats_joins_numpys_path_once() -> None:
    """A child returning a numpy array or ints after a plain one: the same sum as the
    numpy path, each child called exactly once; a child returning text raises the
    ScorerError naming its position, as the numpy path does."""
    items = _items(random.Random(3), 4)
    plain = _Counting([0.1, 0.2, 0.3, 0.4])
    array = _Counting(np.array([1.0, 0.5, 0.25, 0.125]))
    ints = _Counting([1, 0, 1, 0])
    scorer = CompositeScorer([(plain, 1.0), (array, 2.0), (ints, 3.0 / 7.0)])
    got = scorer.score_all(items)
    weights = scorer.weights
    expected = ((np.zeros(4) + np.array(plain.raw) * weights[0])
                + np.array(array.raw) * weights[1]) + np.array(ints.raw, float) * weights[2]
    assert got == expected.tolist()
    assert (plain.calls, array.calls, ints.calls) == (1, 1, 1)
    text = CompositeScorer([(plain, 1.0), (_Counting([0.1, "0.5", 0.1, 0.1]), 1.0)])
    with pytest.raises(ScorerError) as caught:
        text.score_all(items)
    assert caught.value.index == 1


def test_small_greedy_order_equals_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The visiting order over 1-128 items (zero tokens, equal densities, -0.0 and 0.0
    scores, negative tokens) is the numpy order; NaN scores take numpy's path."""
    rng = random.Random(5)
    cases = []
    for _ in range(400):
        n = rng.randrange(1, _greedy.SMALL_GREEDY + 1)
        tokens = [rng.choice((0, 1, 2, 4, 10, -3, 2**60)) for _ in range(n)]
        scores = [rng.choice((0.0, -0.0, 0.5, 1.0, 0.25, 1 / 3, -0.5)) for _ in range(n)]
        cases.append((tokens, scores))
    cases.append(([1, 2, 3], [0.5, float("nan"), 0.5]))
    small = [_greedy.greedy_density_order(t, s) for t, s in cases]
    monkeypatch.setattr(_greedy, "SMALL_GREEDY", 0)
    assert small == [_greedy.greedy_density_order(t, s) for t, s in cases]
    assert _greedy._small_density_order([1, 2, 3], [0.5, float("nan"), 0.5]) is None


def test_checked_greedy_select_equals_the_checking_one() -> None:
    """On columns the pipeline has checked (non-negative int64 tokens, zeros among
    them, finite float scores with -0.0 and ties) the unchecked plain selection takes
    the same items in the same order as GreedySlice's own, at every size up to
    SMALL_GREEDY and past it, at targets from 1 to past the total."""
    rng = random.Random(17)
    for _ in range(400):
        n = rng.randrange(1, _greedy.SMALL_GREEDY + 20)
        tokens = [rng.choice((0, 1, 2, 4, 10, 37, 2**62, 2**63 - 1)) for _ in range(n)]
        scores = [rng.choice((0.0, -0.0, 0.5, 1.0, 0.25, 1 / 3, 1e-300)) for _ in range(n)]
        target = rng.choice((1, 5, 40, 2**62, 2**63 - 1))
        assert (_greedy.checked_greedy_select(tokens, scores, target)
                == _greedy.greedy_order_select(tokens, scores, target))


def _tied(item: ContextItem, items: Sequence[ContextItem]) -> float:
    """Few distinct scores (many ties), -0.0 among them."""
    return (-0.0, 0.0, 0.25, 0.5)[item.tokens % 4]


def test_small_sort_ranks_as_numpy_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of 1-128 candidates with tied scores and duplicate contents (deduplication
    leaving survivors) give the same window and the same report entries on both sort
    paths, and a NaN score still raises the ScorerError naming its candidate."""
    rng = random.Random(13)
    pipeline = Pipeline(FunctionScorer(_tied, name="tied"))
    cases = []
    for _ in range(120):
        n = rng.randrange(1, cupellation._run.SMALL_SORT + 1)
        items = [ContextItem(f"c{rng.randrange(0, max(1, n // 2))}", rng.randrange(1, 30))
                 for _ in range(n)]
        cases.append((items, ContextBudget(10_000, max(1, sum(i.tokens for i in items) // 2))))

    def outcome() -> list[tuple[list[ContextItem], list[Any]]]:
        out = []
        for items, budget in cases:
            report = pipeline.dry_run(items, budget)  # its events carry times: not compared
            entries: list[Any] = [*report.included, *report.excluded]
            out.append((pipeline.run(items, budget),
                        [(e.item, e.score, e.reason) for e in entries]))
        return out

    small = outcome()
    monkeypatch.setattr(cupellation._run, "SMALL_SORT", 0)
    assert small == outcome()
    monkeypatch.undo()
    nan = Pipeline(FunctionScorer(lambda i, a: float("nan") if i.tokens == 7 else 0.5))
    with pytest.raises(ScorerError) as caught:
        nan.run([ContextItem("a", 3), ContextItem("b", 7)], ContextBudget(100, 50))
    assert caught.value.index == 1


class _ScaledFloat(int):
    """A token count whose float form says a hundred times its value."""

    def __float__(self) -> float:
        return float(int(self)) * 100.0


class _AlwaysTrue(int):
    """A token count that is true even at zero."""

    def __bool__(self) -> bool:
        return True


@pytest.mark.parametrize(("tokens", "priorities", "expected"), [
    ([_ScaledFloat(3), 2, 2], (5, 4, 3), ["b", "c"]),
    ([5, _AlwaysTrue(0), 4], (1, 0, 5), ["c", "b"]),
], ids=["float-form", "truth"])
def test_int_subclass_tokens_take_greedy_slices_own_order(
        tokens: list[int], priorities: tuple[int, ...], expected: list[str]) -> None:
    """A ContextItem accepts an int subclass as its tokens; one whose ``__float__`` or
    ``__bool__`` says otherwise than its value is ordered by GreedySlice's own checking
    path, so an untraced run, a traced run, a prepared run and GreedySlice's own
    selection agree (the unchecked order would take ``a`` alone, or divide by zero)."""
    items = [ContextItem(name, tokens=count, priority=priority)
             for name, count, priority in zip("abc", tokens, priorities, strict=True)]
    pipeline = Pipeline(PriorityScorer())
    budget = ContextBudget(4, 4)
    untraced = [item.content for item in pipeline.run(items, budget)]
    traced = [item.content for item in pipeline.run(
        items, budget, DiagnosticTraceCollector(TraceDetailLevel.FULL))]
    prepared = [item.content for item in pipeline.prepare(items).run(budget)]
    assert untraced == traced == prepared == expected
    scores = [0.5, 0.25, 1.0]
    assert (_greedy.checked_greedy_select(tokens, scores, 4)
            == _greedy.greedy_order_select(tokens, scores, 4))
