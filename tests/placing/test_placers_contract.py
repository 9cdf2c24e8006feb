"""Placer contract: protocol, immutability, repr, input checks, and hypothesis properties
(permutation of the input, deterministic, matches a direct reading of the spec)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import ContextItem, ScoredItem
from cupellation.exceptions import InvalidTypeError, InvalidValueError
from cupellation.placing import ChronologicalPlacer, Placer, UShapedPlacer

PLACERS: list[Placer] = [ChronologicalPlacer(), UShapedPlacer()]
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_builtins_satisfy_protocol() -> None:
    """Both built-ins are runtime instances of the Placer protocol."""
    for placer in PLACERS:
        assert isinstance(placer, Placer)


def test_custom_class_satisfies_protocol() -> None:
    """Any object with a place method is a Placer; one without is not."""

    class Reverse:
        def place(self, items: Sequence[ScoredItem], /) -> list[ContextItem]:
            return [entry.item for entry in reversed(items)]

    assert isinstance(Reverse(), Placer)
    assert not isinstance(object(), Placer)


def test_repr_is_readable() -> None:
    """repr names the class and can be evaluated back to an equal placer."""
    assert repr(ChronologicalPlacer()) == "ChronologicalPlacer()"
    assert repr(UShapedPlacer()) == "UShapedPlacer()"
    assert eval(repr(UShapedPlacer())) == UShapedPlacer()


@pytest.mark.parametrize("placer", PLACERS, ids=repr)
def test_placers_are_immutable(placer: Placer) -> None:
    """No attribute can be set on a built-in placer."""
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        placer.extra = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("placer", PLACERS, ids=repr)
def test_non_sequence_input_rejected(placer: Placer) -> None:
    """A non-sequence argument is an InvalidTypeError naming the items."""
    with pytest.raises(InvalidTypeError, match="items"):
        placer.place(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("placer", PLACERS, ids=repr)
def test_entry_without_context_item_rejected(placer: Placer) -> None:
    """An entry that is not (ContextItem, score) is rejected with its index."""
    good = ScoredItem(ContextItem(content="a", tokens=1), 0.5)
    with pytest.raises(InvalidTypeError, match=r"items\[1\]"):
        placer.place([good, ("not an item", 0.5)])  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_u_shaped_rejects_non_finite_scores(bad: float) -> None:
    """UShapedPlacer refuses NaN and infinite scores, naming the entry."""
    items = [ScoredItem(ContextItem(content="a", tokens=1), 0.5),
             ScoredItem(ContextItem(content="b", tokens=1), bad)]
    with pytest.raises(InvalidValueError, match=r"items\[1\]\.score"):
        UShapedPlacer().place(items)


@pytest.mark.parametrize("bad", ["0.5", None, True])
def test_u_shaped_rejects_non_numeric_scores(bad: Any) -> None:
    """UShapedPlacer refuses strings, None and bools as scores."""
    items = [ScoredItem(ContextItem(content="a", tokens=1), bad)]
    with pytest.raises(InvalidTypeError, match=r"items\[0\]\.score"):
        UShapedPlacer().place(items)


def test_chronological_ignores_scores_entirely() -> None:
    """ChronologicalPlacer does not read scores, so even a NaN score is harmless."""
    items = [ScoredItem(ContextItem(content="a", tokens=1), math.nan)]
    assert [i.content for i in ChronologicalPlacer().place(items)] == ["a"]


# -- hypothesis -------------------------------------------------------------

_scores = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0]),
                    st.floats(-10, 10, allow_nan=False, allow_infinity=False))
_stamps = st.one_of(st.none(), st.integers(0, 20).map(lambda m: T0 + timedelta(minutes=m)))


@st.composite
def scored_lists(draw: st.DrawFn) -> list[ScoredItem]:
    """Lists of scored items with many score and timestamp ties, some duplicate contents."""
    n = draw(st.integers(0, 30))
    return [
        ScoredItem(
            ContextItem(content=f"c{draw(st.integers(0, 5))}", tokens=1,
                        timestamp=draw(_stamps)),
            draw(_scores),
        )
        for _ in range(n)
    ]


def _spec_chronological(items: list[ScoredItem]) -> list[ContextItem]:
    """CHRONOLOGICAL-COMPARE applied literally as a comparator sort."""

    def compare(a: int, b: int) -> int:
        ta, tb = items[a].item.timestamp, items[b].item.timestamp
        if ta is not None and tb is not None:
            if ta != tb:
                return -1 if ta < tb else 1
            return -1 if a < b else (1 if a > b else 0)
        if ta is not None:
            return -1
        if tb is not None:
            return 1
        return -1 if a < b else (1 if a > b else 0)

    order = sorted(range(len(items)), key=functools.cmp_to_key(compare))
    return [items[i].item for i in order]


def _spec_u_shaped(items: list[ScoredItem]) -> list[ContextItem]:
    """U-SHAPED-PLACE transcribed from the spec's pseudocode (left/right pointers)."""
    ranked = sorted(range(len(items)), key=lambda i: (-items[i].score, i))
    result: list[ContextItem | None] = [None] * len(items)
    left, right = 0, len(items) - 1
    for rank, index in enumerate(ranked):
        if rank % 2 == 0:
            result[left] = items[index].item
            left += 1
        else:
            result[right] = items[index].item
            right -= 1
    assert all(item is not None for item in result)
    return [item for item in result if item is not None]


@settings(max_examples=150, deadline=None)
@given(items=scored_lists())
def test_output_is_permutation_of_input(items: list[ScoredItem]) -> None:
    """Each placer returns exactly the input objects, each once, nothing added."""
    for placer in PLACERS:
        placed = placer.place(items)
        assert len(placed) == len(items)
        assert sorted(map(id, placed)) == sorted(id(entry.item) for entry in items)


@settings(max_examples=150, deadline=None)
@given(items=scored_lists())
def test_placers_are_deterministic(items: list[ScoredItem]) -> None:
    """Placing the same input twice (also by a fresh placer) gives the same order."""
    for placer in PLACERS:
        first = [id(i) for i in placer.place(items)]
        assert [id(i) for i in placer.place(items)] == first
        assert [id(i) for i in type(placer)().place(list(items))] == first


@settings(max_examples=150, deadline=None)
@given(items=scored_lists())
def test_chronological_matches_spec_comparator(items: list[ScoredItem]) -> None:
    """ChronologicalPlacer equals the spec's CHRONOLOGICAL-COMPARE sort, by identity."""
    expected = [id(i) for i in _spec_chronological(items)]
    assert [id(i) for i in ChronologicalPlacer().place(items)] == expected


@settings(max_examples=150, deadline=None)
@given(items=scored_lists())
def test_u_shaped_matches_spec_pseudocode(items: list[ScoredItem]) -> None:
    """UShapedPlacer equals the spec's U-SHAPED-PLACE pseudocode, by identity."""
    expected = [id(i) for i in _spec_u_shaped(items)]
    assert [id(i) for i in UShapedPlacer().place(items)] == expected


@settings(max_examples=100, deadline=None)
@given(items=scored_lists())
def test_u_shaped_scores_never_rise_towards_the_middle(items: list[ScoredItem]) -> None:
    """Scores are non-increasing from each edge to the middle (the U shape)."""
    by_id = {id(entry.item): entry.score for entry in items}
    scores = [by_id[id(i)] for i in UShapedPlacer().place(items)]
    n = len(scores)
    left = scores[: (n + 1) // 2]
    right = scores[(n + 1) // 2:][::-1]
    assert all(a >= b for a, b in itertools.pairwise(left))
    assert all(a >= b for a, b in itertools.pairwise(right))
