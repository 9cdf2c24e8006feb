"""The plain-list paths used at or below SMALL_N items give exactly the numpy paths'
results (scorers, Greedy's density order, the pipeline's score check and sort)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    GreedySlice,
    Pipeline,
    PriorityScorer,
    RecencyScorer,
    UShapedPlacer,
)
from cupellation import _pipeline as pipeline_module
from cupellation.exceptions import ScorerError
from cupellation.scoring import FunctionScorer, _composite, _rank
from cupellation.slicing import _greedy

from ._runs import T0

PATCHED = (pipeline_module, _composite, _rank, _greedy)

items = st.lists(st.builds(
    ContextItem,
    content=st.sampled_from(["a", "b", "c", "d", "e"]),
    tokens=st.integers(0, 40),
    priority=st.none() | st.integers(-5, 5),
    timestamp=st.none() | st.integers(0, 9).map(lambda d: T0 + timedelta(days=d)),
    pinned=st.sampled_from([False, False, False, True]),
), min_size=1, max_size=60)


@pytest.fixture
def numpy_everywhere() -> Iterator[None]:
    """Force every size onto the numpy path (SMALL_N below any size)."""
    saved = [module.SMALL_N for module in PATCHED]
    for module in PATCHED:
        module.SMALL_N = -1  # type: ignore[attr-defined]
    yield
    for module, value in zip(PATCHED, saved, strict=True):
        module.SMALL_N = value  # type: ignore[attr-defined]


def _window_and_report(candidates: list[ContextItem], budget: ContextBudget
                       ) -> tuple[list[ContextItem], object]:
    pipeline = Pipeline(CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
                        GreedySlice(), UShapedPlacer(), overflow_strategy="Proceed")
    window = pipeline.run(candidates, budget)
    report = pipeline.dry_run(candidates, budget)
    return window, replace(report, events=())


@settings(max_examples=100, deadline=None)
@given(candidates=items, target=st.integers(0, 300))
def test_small_and_numpy_paths_select_identically(candidates: list[ContextItem],
                                                  target: int) -> None:
    """A run at small N gives the same window and report on both paths."""
    budget = ContextBudget(max_tokens=target + sum(i.tokens for i in candidates),
                           target_tokens=target)
    small = _window_and_report(candidates, budget)
    saved = [module.SMALL_N for module in PATCHED]
    try:
        for module in PATCHED:
            module.SMALL_N = -1  # type: ignore[attr-defined]
        large = _window_and_report(candidates, budget)
    finally:
        for module, value in zip(PATCHED, saved, strict=True):
            module.SMALL_N = value  # type: ignore[attr-defined]
    assert small == large


@given(keys=st.lists(st.none() | st.integers(-3, 3), max_size=40))
def test_rank_scores_agree(keys: list[int | None]) -> None:
    """The rank scores of the list path equal those of the array path."""
    small = _rank.rank_scores(keys)
    saved = _rank.SMALL_N  # type: ignore[attr-defined]
    _rank.SMALL_N = -1  # type: ignore[attr-defined]
    try:
        assert _rank.rank_scores(keys) == small
    finally:
        _rank.SMALL_N = saved  # type: ignore[attr-defined]


@given(tokens=st.lists(st.integers(0, 50), min_size=1, max_size=40),
       seed=st.floats(0.0, 1.0))
def test_greedy_density_order_agrees(tokens: list[int], seed: float) -> None:
    """Greedy's density order is the same on both paths, zero tokens and ties included."""
    scores = [round(seed * (k % 5), 2) for k in range(len(tokens))]
    assert (_greedy._density_order_small(tokens, scores)
            == _greedy._density_order(tokens, scores))


def test_a_nan_score_is_caught_on_the_small_path(numpy_everywhere: None) -> None:
    """Both paths name the candidate whose score is not finite (numpy path here; the
    list path is covered by the pipeline's scorer tests)."""
    with pytest.raises(ScorerError, match="candidate index 1"):
        Pipeline(FunctionScorer(lambda item, all_items: float("nan") if item.content == "b"
                                else 0.5)).run(
            [ContextItem(content="a", tokens=1), ContextItem(content="b", tokens=1)],
            ContextBudget(max_tokens=5, target_tokens=5))
