"""The array form of the built-in scorers (``builtin_scores_array``, which the pipeline
asks for past SMALL_SORT items) gives exactly the floats of ``score_all``'s lists, for
recency and priority scorers and composites of them, and is never used for a scorer
whose ``score_all`` is not the built-in one."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

import cupellation._run as run_module
from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    GreedySlice,
    Pipeline,
    TraceDetailLevel,
    UShapedPlacer,
)
from cupellation.exceptions import ScorerError
from cupellation.scoring import (
    CompositeScorer,
    KindScorer,
    PriorityScorer,
    RecencyScorer,
    ScaledScorer,
    Scorer,
    _composite,
    _rank,
)
from cupellation.scoring._composite import builtin_scores_array

T0 = datetime(2025, 1, 1, tzinfo=UTC)
INT64 = 2**63


#: Kinds as items carry them: well-known ones in other cases, and custom ones.
_KINDS = ("Message", "message", "ToolOutput", "TOOL_OUTPUT", "Document", "SystemPrompt",
          "Memory", "Custom", "custom", "Unconfigured")


def _items(rng: random.Random, n: int, *, missing: float) -> list[ContextItem]:
    """``n`` items whose priorities and timestamps are missing with probability
    ``missing``, tie often (a small range) or spread over int64 (priorities)."""
    span = rng.choice((3, 1_000, INT64))
    return [ContextItem(
        f"item {k}", rng.randrange(0, 50), kind=rng.choice(_KINDS),
        priority=None if rng.random() < missing else max(-INT64, min(
            INT64 - 1, rng.randrange(-span, span))),
        timestamp=None if rng.random() < missing
        else T0 + timedelta(microseconds=rng.randrange(0, 40 if span == 3 else 10**12)))
        for k in range(n)]


SCORERS: list[Scorer] = [
    RecencyScorer(),
    PriorityScorer(),
    CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
    CompositeScorer([(RecencyScorer(), 1.0), (PriorityScorer(), 3.0),
                     (RecencyScorer(), 3.0 / 7.0)]),
    KindScorer(),
    KindScorer({"message": 0.3, "Tool_Output": 1.0, "Custom": 0.0}),
    CompositeScorer([(RecencyScorer(), 3.0), (KindScorer(), 1.0)]),
]


def _same_floats(array: np.ndarray | None, expected: Sequence[float] | np.ndarray) -> bool:
    """An array equal to ``expected`` float for float, the sign of zero included."""
    return array is not None and array.dtype == np.float64 and array.tobytes() == np.array(
        expected, dtype=np.float64).tobytes()


@pytest.mark.parametrize("scorer", SCORERS, ids=repr)
@pytest.mark.parametrize("missing", [0.0, 0.02, 0.3, 0.995], ids=lambda p: f"missing{p}")
def test_the_array_form_equals_score_alls_list(scorer: Scorer, missing: float,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """For runs of 0-700 items with no key, a few keys, most keys or nearly all keys
    missing (ties, int64's ends), the array form holds the floats ``score_all`` lists,
    by search and by first positions (SORTED_RANKS lowered), and on the plain ranks'
    side of SMALL_RANK."""
    rng = random.Random(f"{scorer!r} {missing}")  # a str seed: the same in every run
    cases = [_items(rng, n, missing=missing) for n in
             (0, 1, 2, 5, 128, 129, 130, *(rng.randrange(129, 700) for _ in range(12)))]
    for items in cases:
        assert _same_floats(builtin_scores_array(scorer, items), scorer.score_all(items))
    monkeypatch.setattr(_rank, "SORTED_RANKS", 0)
    for items in cases:
        assert _same_floats(builtin_scores_array(scorer, items), scorer.score_all(items))


def test_a_few_present_keys_among_many_take_the_plain_ranks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """300 items of which 100 have a priority: the present keys are ranked by the plain
    dictionary of ``rank_scores`` (at most SMALL_RANK of them), as the list form does,
    and give its floats."""
    ranked: list[int] = []
    plain = _rank._rank_scores_generic

    def counted(keys: Sequence[object], present: list[object], denominator: int
                ) -> list[float]:
        ranked.append(len(present))
        return plain(keys, present, denominator)

    monkeypatch.setattr(_rank, "_rank_scores_generic", counted)
    rng = random.Random(3)
    items = [ContextItem(f"i{k}", 1, priority=rng.randrange(0, 9) if k % 3 == 0 else None)
             for k in range(300)]
    assert sum(item.priority is not None for item in items) <= _rank.SMALL_RANK < len(items)
    got = builtin_scores_array(PriorityScorer(), items)
    assert ranked == [100]  # the array form's ranking: the plain one
    assert _same_floats(got, PriorityScorer().score_all(items))


class _OwnRecency(RecencyScorer):
    __slots__ = ()

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        return [0.25] * len(items)


def test_only_untouched_builtins_have_an_array_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subclass, a composite with any other child (a subclass, a scaled scorer, a
    composite), a composite subclass, and a built-in class whose ``score_all`` was
    replaced all get None, so the pipeline calls their own ``score_all``."""
    items = _items(random.Random(1), 200, missing=0.1)

    class _OwnComposite(CompositeScorer):
        __slots__ = ()

    declined: list[Scorer] = [
        _OwnRecency(),
        CompositeScorer([(RecencyScorer(), 1.0), (_OwnRecency(), 1.0)]),
        CompositeScorer([(RecencyScorer(), 1.0), (ScaledScorer(PriorityScorer()), 1.0)]),
        CompositeScorer([(CompositeScorer([(RecencyScorer(), 1.0)]), 1.0)]),
        _OwnComposite([(RecencyScorer(), 1.0)]),
        ScaledScorer(RecencyScorer()),
    ]
    for scorer in declined:
        assert builtin_scores_array(scorer, items) is None, scorer
    trusted = CompositeScorer([(RecencyScorer(), 1.0), (PriorityScorer(), 1.0)])
    assert builtin_scores_array(trusted, items) is not None
    monkeypatch.setattr(RecencyScorer, "score_all", _OwnRecency.score_all)
    assert builtin_scores_array(RecencyScorer(), items) is None
    assert builtin_scores_array(trusted, items) is None
    assert builtin_scores_array(PriorityScorer(), items) is not None
    monkeypatch.setattr(CompositeScorer, "score_all", lambda self, items: [0.5] * len(items))
    assert builtin_scores_array(
        CompositeScorer([(PriorityScorer(), 1.0)]), items) is None


def test_a_patched_builtin_is_what_a_large_run_scores_with(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A RecencyScorer class whose ``score_all`` was replaced scores a 300-item run with
    the replacement (every item 0.25), not with the built-in ranks."""
    items = _items(random.Random(2), 300, missing=0.0)
    monkeypatch.setattr(RecencyScorer, "score_all", _OwnRecency.score_all)
    scores = run_module.checked_scores(RecencyScorer(), items, range(300))
    assert set(np.asarray(scores).tolist()) == {0.25}


@pytest.mark.parametrize("seed", range(6))
def test_a_large_run_selects_and_reports_the_same_with_and_without_arrays(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of 129-2,000 items through the reference configuration (untraced, and with a
    Full DiagnosticTraceCollector) give the same window and the same report with the
    scores made as arrays as with the arrays declined (the lists, before the pass)."""
    rng = random.Random(seed)
    items = _items(rng, rng.randrange(129, 2_000), missing=rng.choice((0.0, 0.2)))
    items[len(items) // 2] = ContextItem("pinned", 3, pinned=True)
    target = sum(item.tokens for item in items) // 3
    budget = ContextBudget(max_tokens=2 * target + 10, target_tokens=target)
    pipeline = Pipeline(CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
                        GreedySlice(), UShapedPlacer())

    def run() -> tuple[list[ContextItem], dict[str, object]]:
        collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
        window = pipeline.run(items, budget)
        assert pipeline.run(items, budget, collector) == window
        report = collector.build_report().to_dict()
        for stage in report["events"]:
            del stage["duration_ms"]  # timings: the one part that differs run to run
        return window, report

    calls: list[int] = []

    def counted(scorer: object, scored: Sequence[ContextItem]) -> np.ndarray | None:
        calls.append(len(scored))
        return builtin_scores_array(scorer, scored)

    monkeypatch.setattr(run_module, "builtin_scores_array", counted)
    with_arrays = run()
    assert len(calls) == 2  # the fused path and the stage path both asked
    monkeypatch.setattr(run_module, "builtin_scores_array", lambda scorer, scored: None)
    assert run() == with_arrays


def test_composite_arrays_sum_child_by_child_in_order() -> None:
    """Weights that round (1/3, 1/7) over 500 items: the array form's sums are the
    composite's own (``result += scores * weight`` in child order), not a reordered
    or fused sum that could round differently."""
    items = _items(random.Random(9), 500, missing=0.1)
    scorer = CompositeScorer([(RecencyScorer(), 1.0), (PriorityScorer(), 3.0),
                              (RecencyScorer(), 3.0 / 7.0)])
    expected = np.zeros(500)
    for child, weight in zip(scorer.scorers, scorer.weights, strict=True):
        expected += np.array(child.score_all(items)) * weight
    assert _same_floats(builtin_scores_array(scorer, items), expected)
    assert _composite.SMALL_COMPOSITE < 500  # the list form sums in numpy here too


class _RaisingPriority(ContextItem):
    """An item whose priority cannot be read (a subclass's property that raises)."""

    __slots__ = ()

    @property
    def priority(self) -> int | None:
        raise ValueError("bad priority")


@pytest.mark.parametrize("count", [128, 129, 400])
def test_a_key_that_raises_is_the_scorers_error_at_every_size(count: int) -> None:
    """A ContextItem subclass whose priority property raises gives the same ScorerError
    (naming PriorityScorer and the ValueError) on both sides of SMALL_SORT, through
    the list form and through the array form."""
    items = [_RaisingPriority(f"c{k}", 1, priority=k) for k in range(count)]
    with pytest.raises(ScorerError) as caught:
        Pipeline(PriorityScorer()).run(items, ContextBudget(1000, 100))
    assert "PriorityScorer()" in str(caught.value)
    assert "raised ValueError: bad priority" in str(caught.value)


@pytest.mark.parametrize("patched", ["RecencyScorer", "PriorityScorer", "KindScorer",
                                     "CompositeScorer"])
@pytest.mark.parametrize("size", [5, 128, 300])
def test_a_patched_builtin_class_is_checked_at_every_size(
        patched: str, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A built-in scorer class whose ``score_all`` was replaced at runtime by one
    returning NaN is trusted neither by a small run (which skips the check of the
    built-ins' finite scores) nor by a large one (the array form): a run of 5, 128 or
    300 items refuses the NaN with a ScorerError, for the scorer alone and inside a
    composite."""
    cls = {"RecencyScorer": RecencyScorer, "PriorityScorer": PriorityScorer,
           "KindScorer": KindScorer, "CompositeScorer": CompositeScorer}[patched]
    items = _items(random.Random(size), size, missing=0.0)
    budget = ContextBudget(max_tokens=10**6, target_tokens=10**5)
    reference = CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0),
                                 (KindScorer(), 1.0)])
    scorers = [reference] if cls is CompositeScorer else [cls(), reference]
    for scorer in scorers:
        assert _composite.finite_float_lists(scorer)
    monkeypatch.setattr(cls, "score_all", lambda self, items: [float("nan")] * len(items))
    for scorer in scorers:
        assert not _composite.finite_float_lists(scorer)
        with pytest.raises(ScorerError, match="nan"):
            Pipeline(scorer, GreedySlice(), UShapedPlacer()).run(items, budget)


def test_a_kind_scorer_is_trusted_only_with_weights_at_most_one() -> None:
    """A KindScorer whose weights are all at most 1.0 (the defaults) returns finite
    floats in [0, 1], so a small run skips their check and a large run takes its
    array form, alone and as a composite's child; with one weight above 1.0 (whose
    weighted sums could overflow) it is checked and declined as any scorer is."""
    items = _items(random.Random(9), 200, missing=0.0)
    unit = KindScorer({"Message": 1.0, "Document": 0.5})
    heavy = KindScorer({"Message": 1.5})
    for scorer in (KindScorer(), unit, CompositeScorer([(RecencyScorer(), 3.0), (unit, 1.0)])):
        assert _composite.finite_float_lists(scorer)
        assert _same_floats(builtin_scores_array(scorer, items), scorer.score_all(items))
    for scorer in (heavy, CompositeScorer([(RecencyScorer(), 3.0), (heavy, 1.0)])):
        assert not _composite.finite_float_lists(scorer)
        assert builtin_scores_array(scorer, items) is None


def test_a_kind_scorer_looks_kinds_up_by_folded_name_and_takes_any_kind() -> None:
    """KindScorer's lookup by the kinds' folded names gives each item the weight of
    its kind whatever its case (and 0.0 for a kind not configured), as a lookup by
    ContextKind does; an item subclass whose ``kind`` is a plain string still gets
    the ContextKind lookup's answer."""
    scorer = KindScorer({"message": 0.3, "Tool_Output": 1.0, "Custom": 0.0})
    items = _items(random.Random(11), 60, missing=0.0)
    by_kind = [scorer.weights.get(item.kind, 0.0) for item in items]
    assert scorer.score_all(items) == by_kind
    assert set(by_kind) == {0.3, 1.0, 0.0}

    class _TextKind(ContextItem):
        __slots__ = ()

        @property
        def kind(self) -> str:  # type: ignore[override]
            return "message"

    odd = [*items[:3], _TextKind("x", 1)]
    assert scorer.score_all(odd) == [*by_kind[:3], 0.3]
