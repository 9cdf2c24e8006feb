"""ScoredItems: the parallel-list sequence the pipeline hands to slicers and placers."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import (
    ChronologicalPlacer,
    ContextBudget,
    ContextItem,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaSlice,
    UShapedPlacer,
)
from cupellation._model import ScoredItem, ScoredItems
from cupellation.exceptions import InvalidTypeError, InvalidValueError
from cupellation.slicing import CountQuotaEntry, QuotaEntry, Slicer

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_behaves_as_a_sequence_of_scored_items() -> None:
    """Indexing, iteration, slicing, length and equality all see ScoredItem values."""
    a, b = ContextItem("a", 1), ContextItem("b", 2)
    view = ScoredItems([a, b], [0.5, 1])
    assert len(view) == 2
    assert view[1] == ScoredItem(b, 1.0)
    assert list(view) == [ScoredItem(a, 0.5), ScoredItem(b, 1.0)]
    assert view[:1] == [ScoredItem(a, 0.5)]
    assert view == ScoredItems([a, b], [0.5, 1.0])
    assert list(view.tokens) == [1, 2]
    assert isinstance(view[1:], ScoredItems)
    assert list(view[1:].tokens) == [2]


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_rejects_non_finite_scores_naming_the_index(bad: float) -> None:
    """A NaN or infinite score is refused with its index."""
    with pytest.raises(InvalidValueError, match=r"scores\[1\]"):
        ScoredItems([ContextItem("a", 1), ContextItem("b", 1)], [0.1, bad])


def test_rejects_mismatched_lengths_and_non_items() -> None:
    """Lists of different lengths, or a non-item, are refused."""
    with pytest.raises(InvalidValueError, match="one score per item"):
        ScoredItems([ContextItem("a", 1)], [0.1, 0.2])
    with pytest.raises(InvalidTypeError, match=r"items\[0\]"):
        ScoredItems(["a"], [0.1])  # type: ignore[list-item]


items_and_scores = st.lists(
    st.tuples(st.integers(0, 60), st.floats(0, 1), st.sampled_from(["m", "d", "t"]),
              st.none() | st.integers(0, 9)),
    max_size=25,
).map(lambda rows: (
    [ContextItem(f"c{k}", t, kind=kind,
                 timestamp=None if day is None else T0 + timedelta(days=day))
     for k, (t, _, kind, day) in enumerate(rows)],
    sorted((s for _, s, _, _ in rows), reverse=True),
))

SLICERS: list[Slicer] = [GreedySlice(), KnapsackSlice(bucket_size=5),
           QuotaSlice(GreedySlice(), [QuotaEntry("m", require=20, cap=60)]),
           CountQuotaSlice(GreedySlice(), [CountQuotaEntry("t", 1, cap_count=2)])]


@settings(max_examples=100, deadline=None)
@given(data=items_and_scores, target=st.integers(0, 300))
def test_built_in_strategies_treat_scored_items_like_a_list_of_pairs(
        data: tuple[list[ContextItem], list[float]], target: int) -> None:
    """Every built-in slicer and placer gives the same result for a ScoredItems
    (their fast path) as for the equivalent list of ScoredItem pairs."""
    items, scores = data
    view = ScoredItems(items, scores)
    pairs = [ScoredItem(i, s) for i, s in zip(items, scores, strict=True)]
    budget = ContextBudget(max(target, 1), target)
    for slicer in SLICERS:
        assert slicer.slice(view, budget) == slicer.slice(pairs, budget)
    for placer in (ChronologicalPlacer(), UShapedPlacer()):
        assert placer.place(view) == placer.place(pairs)
