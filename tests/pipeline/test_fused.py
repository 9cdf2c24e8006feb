"""The fused path (``cupellation._fused``) against the stage path (``_run.Run``), its
oracle: the same window (the same objects, in the same order) or the same exception
with the same message, over the conformance vectors, generated runs (Hypothesis) and
a few larger runs that take the numpy paths; and Pipeline.run choosing it only for an
untraced run of a built-in configuration."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import tomli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cupellation._fused as fused_module
import cupellation._pipeline as pipeline_module
import cupellation._run as run_module
from cupellation import ContextBudget, ContextItem, OverflowStrategy, Pipeline
from cupellation._collectors import NULL_COLLECTOR, DiagnosticTraceCollector, TraceDetailLevel
from cupellation._fused import fused_run
from cupellation._run import Run
from cupellation.conformance import run_paths
from cupellation.conformance._errors import VectorFailure
from cupellation.conformance._pipeline import build_pipeline, run_pipeline_vector
from cupellation.conformance._vectors import item_from_vector
from cupellation.events import RunInfo
from cupellation.exceptions import BudgetOverflowError, PinnedBudgetError, ScorerError
from cupellation.placing import ChronologicalPlacer, UShapedPlacer
from cupellation.scoring import (
    CompositeScorer,
    DecayScorer,
    ExponentialCurve,
    FixedClock,
    FunctionScorer,
    KindScorer,
    MetadataTrustScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    Scorer,
    TagScorer,
)
from cupellation.slicing import GreedySlice, KnapsackSlice

T0 = datetime(2024, 1, 1, tzinfo=UTC)
VECTORS = Path(__file__).resolve().parents[1] / "data" / "conformance" / "required" / "pipeline"

#: What a run came to: ("window", ids of the placed items) or ("raised", type,
#: message, args, type of the cause).
Outcome = tuple[Any, ...]


def _outcome(call: Callable[[], list[ContextItem] | None]) -> Outcome | None:
    try:
        placed = call()
    except Exception as exc:  # compared, never swallowed: the other path must match
        cause = None if exc.__cause__ is None else type(exc.__cause__)
        return ("raised", type(exc), str(exc), exc.args, cause)
    return None if placed is None else ("window", [id(item) for item in placed])


def _stage(pipeline: Pipeline, items: Sequence[ContextItem], budget: ContextBudget
           ) -> Outcome | None:
    return _outcome(lambda: Run(pipeline, items, budget, NULL_COLLECTOR, "", None).execute())


def _fused(pipeline: Pipeline, items: Sequence[ContextItem], budget: ContextBudget
           ) -> Outcome | None:
    return _outcome(lambda: fused_run(pipeline, items, budget))


def _fused_arrays(pipeline: Pipeline, items: Sequence[ContextItem], budget: ContextBudget
                  ) -> Outcome | None:
    """The fused path with its large-run forms at every size: the columns as arrays
    (LARGE_RUN) and Deduplicate's hash comparison (HASHED_CONTENTS), restored after."""
    saved = fused_module.LARGE_RUN, run_module.HASHED_CONTENTS
    fused_module.LARGE_RUN = run_module.HASHED_CONTENTS = 0
    try:
        return _fused(pipeline, items, budget)
    finally:
        fused_module.LARGE_RUN, run_module.HASHED_CONTENTS = saved


def _vector(path: Path) -> tuple[Pipeline, list[ContextItem], ContextBudget, list[str]]:
    with path.open("rb") as handle:
        doc = tomli.load(handle)
    table = doc["budget"]
    budget = ContextBudget(max_tokens=table["max_tokens"], target_tokens=table["target_tokens"],
                           output_reserve=table.get("output_reserve", 0))
    items = [item_from_vector(entry) for entry in doc.get("items", ())]
    expected = [entry["content"] for entry in doc.get("expected_output", ())]
    return build_pipeline(doc.get("config", {})), items, budget, expected


def test_conformance_vectors_give_the_same_window_on_both_paths() -> None:
    """Every required pipeline vector: the stage path gives the expected output, and
    the fused path, wherever it runs, the very same objects in the same order. It runs
    on every vector but the knapsack one and the one with a negative token count."""
    taken = []
    for path in sorted(VECTORS.glob("*.toml")):
        pipeline, items, budget, expected = _vector(path)
        stage = _stage(pipeline, items, budget)
        assert stage is not None, path.name
        assert stage[0] == "window", path.name
        assert [next(i.content for i in items if id(i) == k) for k in stage[1]] == expected
        fused = _fused(pipeline, items, budget)
        if fused is not None:
            taken.append(path.stem)
            assert fused == stage, path.name
    assert sorted(taken) == sorted(
        p.stem for p in VECTORS.glob("*.toml")
        if p.stem not in ("knapsack-chronological", "diag-negative-tokens"))


def test_the_conformance_runner_checks_the_untraced_run_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner passes every pipeline vector, and fails one whose untraced run (the
    fused path) returns another order than its traced run, naming both orders."""
    summary = run_paths([VECTORS])
    assert len(summary.results) == len(list(VECTORS.glob("*.toml")))
    assert [result.reason for result in summary.results if not result.passed] == []

    def reversed_window(*args: Any) -> list[ContextItem] | None:
        placed = fused_run(*args)
        return None if placed is None else placed[::-1]

    monkeypatch.setattr(pipeline_module, "fused_run", reversed_window)
    with (VECTORS / "greedy-chronological.toml").open("rb") as handle:
        doc = tomli.load(handle)
    with pytest.raises(VectorFailure, match=r"untraced run: got .*, the traced run"):
        run_pipeline_vector(doc)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, for each run that asks the fused path, whether it took the run."""
    taken: list[bool] = []

    def spy(*args: Any) -> list[ContextItem] | None:
        placed = fused_run(*args)
        taken.append(placed is not None)
        return placed

    monkeypatch.setattr(pipeline_module, "fused_run", spy)
    return taken


class _Deaf:
    """A collector that listens to nothing (``is_enabled`` False)."""

    is_enabled = False
    detail_level = TraceDetailLevel.FULL

    def record(self, events: object) -> None:
        """Never called: the run is untraced."""
        raise AssertionError(events)


def test_pipeline_run_takes_the_fused_path_only_when_nobody_listens(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An untraced run (no collector, a disabled one, a valid run_info) of a built-in
    configuration goes through the fused path; a traced run, a knapsack slicer, a
    placer subclass or a bad run_info never does (the stage path then decides)."""
    taken = _spy(monkeypatch)
    items = [ContextItem(f"c{k}", tokens=10 + k, priority=k) for k in range(5)]
    budget = ContextBudget(100, 40)
    pipeline = Pipeline(PriorityScorer(), placer=UShapedPlacer())
    pipeline.run(items, budget)
    pipeline.run(items, budget, _Deaf())
    pipeline.run(items, budget, run_info=RunInfo(session_id="s"))
    assert taken == [True, True, True]
    taken.clear()
    pipeline.run(items, budget, DiagnosticTraceCollector(TraceDetailLevel.STAGE_ONLY))
    assert taken == []

    class Placer(ChronologicalPlacer):
        """A subclass may change anything: the stage path runs it."""

    Pipeline(PriorityScorer(), KnapsackSlice(bucket_size=5)).run(items, budget)
    Pipeline(PriorityScorer(), placer=Placer()).run(items, budget)
    assert taken == [False, False]
    with pytest.raises(TypeError, match="run_info"):
        pipeline.run(items, budget, run_info="not a RunInfo")  # type: ignore[arg-type]
    assert taken == [False, False]


# -- generated runs ------------------------------------------------------------------

def _odd_nan(item: ContextItem, _items: Sequence[ContextItem]) -> float:
    return math.nan if item.tokens % 7 == 3 else 0.5


def _odd_raise(item: ContextItem, _items: Sequence[ContextItem]) -> float:
    if item.tokens % 5 == 1:
        raise ValueError(f"no score for {item.content}")
    return 0.25


def _ints(item: ContextItem, _items: Sequence[ContextItem]) -> float:
    return item.tokens % 4  # an int: the checked conversion (score_array) path


SCORERS: list[Scorer] = [
    RecencyScorer(), PriorityScorer(), KindScorer(), TagScorer({"x": 1.0, "Y": 0.5}),
    ReflexiveScorer(), MetadataTrustScorer(),
    CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
    CompositeScorer([(KindScorer(), 1.0), (FunctionScorer(_ints), 3.0)]),
    ScaledScorer(PriorityScorer()),
    DecayScorer(ExponentialCurve(timedelta(days=7)), clock=FixedClock(T0 + timedelta(days=60))),
    FunctionScorer(_odd_nan), FunctionScorer(_odd_raise), FunctionScorer(_ints),
]

candidate = st.builds(
    ContextItem,
    content=st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h"]),
    tokens=st.integers(min_value=-2, max_value=120).map(lambda t: 0 if t == -1 else t),
    kind=st.sampled_from(["Message", "Document", "ToolOutput", "SystemPrompt"]),
    priority=st.none() | st.integers(-3, 3),
    tags=st.lists(st.sampled_from(["x", "Y", "z"]), max_size=2),
    metadata=st.none() | st.fixed_dictionaries({"cupel:trust": st.sampled_from(["0.2", "0.9"])}),
    timestamp=st.none() | st.integers(0, 50).map(lambda d: T0 + timedelta(days=d)),
    pinned=st.sampled_from([False, False, False, True]),
)
# Candidate lists that sometimes hold the same ContextItem object twice.
candidates = st.lists(candidate, max_size=14).flatmap(
    lambda items: st.just(items) if not items else st.sampled_from(
        [items, [*items, items[0]], [items[-1], *items]]))
pipelines = st.builds(
    Pipeline, scorer=st.sampled_from(SCORERS), slicer=st.just(GreedySlice()),
    placer=st.sampled_from([ChronologicalPlacer(), UShapedPlacer()]),
    deduplication=st.booleans(), overflow_strategy=st.sampled_from(list(OverflowStrategy)))
budgets = st.builds(
    lambda target, extra, reserve, slot, margin: ContextBudget(
        max_tokens=target + extra + reserve, target_tokens=target, output_reserve=reserve,
        reserved_slots={"Message": slot} if slot else None,
        estimation_safety_margin_percent=margin),
    st.integers(0, 400), st.integers(0, 200), st.integers(0, 30), st.integers(0, 40),
    st.sampled_from([0.0, 0.0, 12.5]))


def _same_outcome(pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget) -> None:
    stage = _stage(pipeline, items, budget)
    fused = _fused(pipeline, items, budget)
    assert _fused_arrays(pipeline, items, budget) == fused
    if fused is None:
        # The only candidates it hands back here: a negative token count.
        assert any(item.tokens < 0 for item in items)
        return
    assert fused == stage


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipeline=pipelines, items=candidates, budget=budgets)
def test_generated_runs_end_the_same_on_both_paths(
        pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget) -> None:
    """For generated candidates (duplicate contents, the same object twice, pinned,
    zero and negative tokens), budgets (reserve, reserved slots, safety margin) and
    built-in configurations (every overflow strategy, scorers that return NaN, raise
    or return ints), the fused path returns the same objects in the same order as the
    stage path, or raises the same exception with the same message and cause; and so
    does the fused path's large-run form (arrays from Sort to Slice) on the same runs."""
    _same_outcome(pipeline, items, budget)


@pytest.mark.exhaustive
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipeline=pipelines, items=candidates, budget=budgets)
def test_generated_runs_end_the_same_on_both_paths_exhaustively(
        pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget) -> None:
    """The same property as above over 500 generated runs."""
    _same_outcome(pipeline, items, budget)


def test_the_generated_runs_reach_every_ending() -> None:
    """The property above is not vacuous: its configurations reach a window, a window
    under Truncate with pinned items over the target, and each refusal (pinned over
    budget, Throw overflow, a NaN score, a scorer that raises) on the fused path."""
    # b scores NaN under _odd_nan (45 % 7 == 3), c makes _odd_raise raise (31 % 5 == 1).
    items = [ContextItem("a", tokens=50, pinned=True), ContextItem("b", tokens=45),
             ContextItem("c", tokens=31, priority=2)]
    small = ContextBudget(max_tokens=60, target_tokens=40)
    cases: list[tuple[Pipeline, ContextBudget, type[Exception] | None]] = [
        (Pipeline(PriorityScorer()), ContextBudget(200, 150), None),
        (Pipeline(PriorityScorer(), overflow_strategy="truncate"), small, None),
        (Pipeline(PriorityScorer()), ContextBudget(40, 40), PinnedBudgetError),
        (Pipeline(PriorityScorer()), small, BudgetOverflowError),
        (Pipeline(FunctionScorer(_odd_nan)), ContextBudget(200, 150), ScorerError),
        (Pipeline(FunctionScorer(_odd_raise)), ContextBudget(200, 150), ScorerError),
    ]
    for pipeline, budget, error in cases:
        fused = _fused(pipeline, items, budget)
        assert fused is not None
        assert fused == _stage(pipeline, items, budget)
        assert fused[0] == ("window" if error is None else "raised")
        assert error is None or fused[1] is error


def test_larger_runs_take_the_same_numpy_paths() -> None:
    """Past 128 items (numpy's sort, greedy order and scorer paths), with duplicate
    contents, repeated objects and pinned items, both paths give the same window, and
    so does the fused path's large-run form."""
    rng = random.Random(26)
    for size in (129, 200, 257):
        items = [ContextItem(f"c{rng.randrange(size // 2)}", tokens=rng.randrange(0, 90),
                             priority=rng.choice([None, *range(9)]),
                             timestamp=T0 + timedelta(hours=rng.randrange(500)),
                             kind=rng.choice(["Message", "Document"]),
                             pinned=rng.random() < 0.03) for _ in range(size)]
        items += items[:5]
        total = sum(item.tokens for item in items)
        budget = ContextBudget(max_tokens=total, target_tokens=total // 3)
        for scorer in (SCORERS[6], SCORERS[7], FunctionScorer(_ints)):
            for dedup in (True, False):
                pipeline = Pipeline(scorer, placer=UShapedPlacer(), deduplication=dedup,
                                    overflow_strategy="truncate")
                fused = _fused(pipeline, items, budget)
                assert fused is not None
                assert fused[0] == "window"
                assert fused == _stage(pipeline, items, budget), (size, scorer, dedup)
                assert _fused_arrays(pipeline, items, budget) == fused


@pytest.mark.parametrize("pinned_count", [1, 2, 16, 17, 60])
def test_a_large_run_splits_off_any_number_of_pinned_items(pinned_count: int) -> None:
    """In the large-run form, 1-60 pinned items at random places (the first and the
    last candidate among them) are split off in candidate order, deleted from a copy
    when few and compressed out when many, and the window is the stage path's."""
    rng = random.Random(pinned_count)
    size = 300
    ends = [0, size - 1][:pinned_count]
    where = sorted({*ends, *rng.sample(range(1, size - 1), pinned_count - len(ends))})
    items = [ContextItem(f"c{k}", tokens=rng.randrange(0, 30), pinned=k in where,
                         priority=rng.choice([None, *range(9)]),
                         timestamp=T0 + timedelta(hours=rng.randrange(500)))
             for k in range(size)]
    pinned, scoreable, pinned_at = fused_module._split_large(items)
    assert pinned_at == where
    assert [id(item) for item in pinned] == [id(items[k]) for k in where]
    assert [id(item) for item in scoreable] == [id(item) for item in items if not item.pinned]
    budget = ContextBudget(max_tokens=10_000, target_tokens=sum(i.tokens for i in items) // 2)
    pipeline = Pipeline(SCORERS[6], placer=UShapedPlacer())
    fused = _fused_arrays(pipeline, items, budget)
    assert fused is not None
    assert fused[0] == "window"
    assert fused == _stage(pipeline, items, budget)


def test_a_large_run_names_the_candidate_whose_score_is_refused() -> None:
    """In the large-run form with pinned candidates ahead (the fused path keeps the
    scoreable items' candidate indices as an array), a NaN score and a scorer that raises are
    refused on both paths with the same message, naming the same candidate index."""
    items = [ContextItem(f"p{k}", tokens=1, pinned=True) for k in range(3)]
    items += [ContextItem(f"c{k}", tokens=10 + k) for k in range(120)]
    budget = ContextBudget(max_tokens=10_000, target_tokens=5_000)
    # c0 (10 tokens, candidate 3) scores NaN; c1 (11 tokens) makes _odd_raise raise.
    for scorer, where in ((FunctionScorer(_odd_nan), "returned nan (scores must be finite) "
                                                      "for candidate index 3"),
                          (FunctionScorer(_odd_raise), "no score for c1")):
        pipeline = Pipeline(scorer, placer=UShapedPlacer())
        fused = _fused_arrays(pipeline, items, budget)
        assert fused is not None
        assert fused[0] == "raised"
        assert fused == _stage(pipeline, items, budget)
        assert where in fused[2]


def test_negative_tokens_are_handed_back_in_the_large_run_form() -> None:
    """Past LARGE_RUN candidates (lowered here) the fused path reads tokens into an
    array and checks them there: a negative count, on a pinned candidate or another,
    hands the run back to the stage path (None) as the small form does."""
    for pinned in (False, True):
        items = [ContextItem("a", tokens=5), ContextItem("b", tokens=-2, pinned=pinned),
                 ContextItem("c", tokens=7, pinned=True)]
        pipeline = Pipeline(PriorityScorer())
        budget = ContextBudget(max_tokens=100, target_tokens=50)
        assert fused_run(pipeline, items, budget) is None
        assert _fused_arrays(pipeline, items, budget) is None


@pytest.mark.parametrize("count", [0, 1, 2, 3, 500])
def test_a_large_runs_gather_takes_the_items_at_the_positions(count: int) -> None:
    """The large-run form's gather (one ``itemgetter`` call, which returns a bare item
    for one position and refuses none) gives the items at the positions, in their
    order, as the same objects: for no position, one, two, and many with repeats."""
    items = [ContextItem(f"c{k}", tokens=k) for k in range(40)]
    rng = random.Random(count)
    positions = [rng.randrange(len(items)) for _ in range(count)]
    gathered = fused_module._gathered(items, positions)
    assert type(gathered) is list
    assert [id(item) for item in gathered] == [id(items[p]) for p in positions]
