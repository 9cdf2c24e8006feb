"""Properties of every scorer on random inputs (hypothesis):

- determinism and purity: the same input twice gives the same output, the
  input list and its items are unchanged, one score per item;
- the fast Recency, Priority, Frequency, Scaled (and Composite) passes give
  exactly the scores of a direct transcription of the specification's
  per-item pseudocode (below), ties, ``None`` values and repeated instances
  included;
- ``score(item, all_items)`` agrees with ``score_all``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

import cupellation.scoring._frequency as frequency_module
from cupellation import ContextItem
from cupellation.scoring import (
    CompositeScorer,
    DecayScorer,
    ExponentialCurve,
    FrequencyScorer,
    FunctionScorer,
    KindScorer,
    MetadataKeyScorer,
    MetadataTrustScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    Scorer,
    ScorerBase,
    StepCurve,
    TagScorer,
    WindowCurve,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=12)
PROPERTY = settings(max_examples=100, deadline=None)

# -- the specification's pseudocode, transcribed as literally as possible -----------


_UPPER_TO_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def ascii_equal_ignoring_case(a: str, b: str) -> bool:
    """CASE-INSENSITIVE-EQUAL: compare after folding A-Z to a-z only."""
    return a.translate(_UPPER_TO_LOWER) == b.translate(_UPPER_TO_LOWER)


def recency_score(item: ContextItem, all_items: Sequence[ContextItem]) -> float:
    """RECENCY-SCORE."""
    if item.timestamp is None:
        return 0.0
    count_with_timestamp = 0
    rank = 0
    for other in all_items:
        if other.timestamp is None:
            continue
        count_with_timestamp += 1
        if other.timestamp < item.timestamp:
            rank += 1
    if count_with_timestamp <= 1:
        return 1.0
    return rank / (count_with_timestamp - 1)


def priority_score(item: ContextItem, all_items: Sequence[ContextItem]) -> float:
    """PRIORITY-SCORE."""
    if item.priority is None:
        return 0.0
    count_with_priority = 0
    rank = 0
    for other in all_items:
        if other.priority is None:
            continue
        count_with_priority += 1
        if other.priority < item.priority:
            rank += 1
    if count_with_priority <= 1:
        return 1.0
    return rank / (count_with_priority - 1)


def shares_any_tag(tags_a: Sequence[str], tags_b: Sequence[str]) -> bool:
    """SHARES-ANY-TAG."""
    return any(ascii_equal_ignoring_case(a, b) for a in tags_a for b in tags_b)


def frequency_score(item: ContextItem, all_items: Sequence[ContextItem]) -> float:
    """FREQUENCY-SCORE (self skipped by identity)."""
    if len(item.tags) == 0 or len(all_items) <= 1:
        return 0.0
    matching = 0
    for other in all_items:
        if other is item:
            continue
        if len(other.tags) == 0:
            continue
        if shares_any_tag(item.tags, other.tags):
            matching += 1
    return matching / (len(all_items) - 1)


def scaled_score(
    item: ContextItem,
    all_items: Sequence[ContextItem],
    inner: Callable[[ContextItem, Sequence[ContextItem]], float],
) -> float:
    """SCALED-SCORE, calling the inner per-item function N times."""
    if len(all_items) == 0:
        return 0.5
    raw = math.nan
    low = math.inf
    high = -math.inf
    for other in all_items:
        s = inner(other, all_items)
        if s < low:  # noqa: PLR1730 - the pseudocode, literally
            low = s
        if s > high:  # noqa: PLR1730
            high = s
        if other is item:
            raw = s
    if high == low:
        return 0.5
    return (raw - low) / (high - low)


def composite_score(
    item: ContextItem,
    all_items: Sequence[ContextItem],
    children: Sequence[tuple[Callable[[ContextItem, Sequence[ContextItem]], float], float]],
) -> float:
    """COMPOSITE-SCORE with CONSTRUCT-COMPOSITE's normalisation."""
    total = 0.0
    for _, weight in children:
        total += weight
    result = 0.0
    for fn, weight in children:
        result = result + fn(item, all_items) * (weight / total)
    return result


def reference_all(
    fn: Callable[[ContextItem, Sequence[ContextItem]], float], items: Sequence[ContextItem]
) -> list[float]:
    """The per-item reference applied to every item."""
    return [fn(item, items) for item in items]


# -- strategies -------------------------------------------------------------------------

TAG_WORDS = ["web", "Web", "WEB", "api", "API", "db", "cli", "é", "É", ""]
KINDS = ["Message", "message", "Document", "ToolOutput", "Memory", "SYSTEMPROMPT", "Custom"]
TRUST = ["0.5", "1.5", "-0.2", "NaN", "high", "", "0.85", "inf"]

timestamps = st.one_of(
    st.none(),
    # Few distinct instants so ties are common; some far apart, some microseconds apart.
    st.sampled_from([T0, T0 + timedelta(microseconds=1), T0 + timedelta(hours=1),
                     T0 + timedelta(days=400), T0 - timedelta(days=3)]),
    st.integers(-(10**9), 10**9).map(lambda seconds: T0 + timedelta(seconds=seconds)),
)
priorities = st.one_of(st.none(), st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1))
hints = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                  st.floats(-0.5, 1.5))


@st.composite
def context_items(draw: st.DrawFn) -> ContextItem:
    """A random item exercising every field the scorers read."""
    metadata: dict[str, Any] = {}
    if draw(st.booleans()):
        # Metadata is JSON: a non-finite float cannot be stored (its text can).
        metadata["cupel:trust"] = draw(st.one_of(
            st.sampled_from(TRUST), st.floats(allow_nan=False, allow_infinity=False)))
    if draw(st.booleans()):
        metadata["k"] = draw(st.sampled_from(["v", "V", "w", 1]))
    return ContextItem(
        content=draw(st.sampled_from(["a", "b", "c", "same"])),
        tokens=draw(st.integers(0, 50)),
        kind=draw(st.sampled_from(KINDS)),
        timestamp=draw(timestamps),
        priority=draw(priorities),
        tags=tuple(draw(st.lists(st.sampled_from(TAG_WORDS), max_size=4))),
        future_relevance_hint=draw(hints),
        metadata=metadata,
    )


@st.composite
def item_lists(draw: st.DrawFn, max_distinct: int = 12) -> list[ContextItem]:
    """A random item list, sometimes holding the same instance more than once."""
    distinct = draw(st.lists(context_items(), max_size=max_distinct))
    if not distinct:
        return []
    indices = draw(st.lists(st.integers(0, len(distinct) - 1), max_size=4))
    extra = [distinct[index] for index in indices]
    order = draw(st.permutations([*distinct, *extra]))
    return list(order)


def every_scorer() -> list[Scorer]:
    """One instance of every built-in scorer, plus nested composites."""
    return [
        RecencyScorer(), PriorityScorer(), KindScorer(), KindScorer({"custom": 3.0}),
        TagScorer({"web": 2.0, "api": 1.0, "é": 0.5}),
        TagScorer({"Web": 1.0}, case_sensitive=True), FrequencyScorer(), ReflexiveScorer(),
        ScaledScorer(RecencyScorer()), ScaledScorer(FrequencyScorer()),
        MetadataTrustScorer(default_score=0.25), MetadataKeyScorer("k", "v", 1.5),
        DecayScorer(ExponentialCurve(timedelta(hours=6)), clock=lambda: NOW),
        DecayScorer(StepCurve([(timedelta(hours=1), 0.9), (timedelta(days=2), 0.4)]),
                    null_timestamp_score=0.0, clock=lambda: NOW),
        DecayScorer(WindowCurve(timedelta(days=1)), clock=lambda: NOW),
        CompositeScorer([(RecencyScorer(), 3.0), (PriorityScorer(), 1.0),
                         (ScaledScorer(CompositeScorer([(KindScorer(), 1.0),
                                                        (FrequencyScorer(), 2.0)])), 0.5)]),
        FunctionScorer(lambda item, items: float(len(items) - item.tokens)),
    ]


SCORERS = every_scorer()


def field_values(item: ContextItem) -> tuple[Any, ...]:
    """Every field of ``item``, with metadata copied into a plain dict."""
    return (item.content, item.tokens, item.kind, item.source, item.priority, item.tags,
            dict(item.metadata), item.timestamp, item.future_relevance_hint, item.pinned,
            item.original_tokens)


def same_scores(left: Sequence[float], right: Sequence[float]) -> bool:
    """Element-wise identical, NaN equal to NaN."""
    return len(left) == len(right) and all(
        a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(left, right, strict=True)
    )


# -- properties -------------------------------------------------------------------------


@PROPERTY
@given(items=item_lists())
def test_every_scorer_is_deterministic_and_pure(items: list[ContextItem]) -> None:
    """Twice the same input -> the same scores; the input is left exactly as it was;
    one finite score per item."""
    snapshot = list(items)
    fields = [field_values(item) for item in items]
    for scorer in SCORERS:
        first = [float(score) for score in scorer.score_all(items)]
        second = [float(score) for score in scorer.score_all(items)]
        assert len(first) == len(items)
        assert same_scores(first, second), scorer
        assert all(math.isfinite(score) for score in first), scorer
    assert len(items) == len(snapshot)
    assert all(a is b for a, b in zip(items, snapshot, strict=True))
    assert [field_values(item) for item in items] == fields


ABSOLUTE: list[Scorer] = [
    KindScorer(), TagScorer({"web": 1.0, "db": 3.0}), ReflexiveScorer(), MetadataTrustScorer(),
    MetadataKeyScorer("k", "v", 2.0),
    DecayScorer(ExponentialCurve(timedelta(hours=1)), clock=lambda: NOW),
]


@PROPERTY
@given(items=item_lists())
def test_score_form_absolute_scorers_and_recency_order(items: list[ContextItem]) -> None:
    """score(item, items) equals score_all at the item's position for every scorer;
    absolute scorers score each item the same alone as among the others; recency
    scores lie in [0, 1] and never put an older item above a newer one."""
    for scorer in SCORERS:
        assert isinstance(scorer, ScorerBase)
        batch = [float(score) for score in scorer.score_all(items)]
        for index, item in enumerate(items):
            first = next(i for i, other in enumerate(items) if other is item)
            assert batch[index] == batch[first]
            assert scorer.score(item, items) == batch[first]
    for scorer in ABSOLUTE:
        assert scorer.score_all(items) == [scorer.score_all([item])[0] for item in items], scorer
    result = RecencyScorer().score_all(items)
    assert all(0.0 <= score <= 1.0 for score in result)
    timed = [(item.timestamp, score) for item, score in zip(items, result, strict=True)
             if item.timestamp is not None]
    for stamp_a, score_a in timed:
        for stamp_b, score_b in timed:
            if stamp_a < stamp_b:
                assert score_a < score_b


@PROPERTY
@given(items=item_lists())
def test_rank_and_frequency_passes_match_the_reference(items: list[ContextItem]) -> None:
    """RecencyScorer and PriorityScorer (O(N log N)) and FrequencyScorer (grouped)
    equal RECENCY-SCORE, PRIORITY-SCORE and FREQUENCY-SCORE item by item."""
    assert RecencyScorer().score_all(items) == reference_all(recency_score, items)
    assert PriorityScorer().score_all(items) == reference_all(priority_score, items)
    assert FrequencyScorer().score_all(items) == reference_all(frequency_score, items)


@settings(max_examples=100, deadline=None)
@given(
    tag_sets=st.lists(
        st.lists(st.sampled_from([f"t{i}" for i in range(12)]), min_size=0, max_size=5),
        min_size=2, max_size=120,
    ),
    repeats=st.lists(st.integers(0, 119), max_size=10),
)
def test_frequency_matches_the_reference_on_larger_inputs(
    tag_sets: list[list[str]], repeats: list[int]
) -> None:
    """Large enough inputs to use the bitset path (popular tags) agree with the reference,
    whichever way the tags are split between bitsets (Python- or numpy-built) and walks."""
    items = [ContextItem(content=f"c{i}", tokens=1, tags=tuple(tags))
             for i, tags in enumerate(tag_sets)]
    items.extend(items[index % len(items)] for index in repeats)
    expected = reference_all(frequency_score, items)
    strategies = [
        {},  # the defaults
        {"_MIN_POPULAR": 1, "_NUMPY_BITSET": 0},  # every tag a numpy-built bitset
        {"_MIN_POPULAR": 10**9},  # every tag walked
        {"_MIN_POPULAR": 1, "_BITSET_BUDGET": 1},  # one bitset allowed: the most popular tag
    ]
    for overrides in strategies:
        with ExitStack() as stack:
            for name, value in overrides.items():
                stack.enter_context(patch.object(frequency_module, name, value))
            assert FrequencyScorer().score_all(items) == expected, overrides


INNER: list[tuple[Scorer, Callable[[ContextItem, Sequence[ContextItem]], float]]] = [
    (RecencyScorer(), recency_score),
    (PriorityScorer(), priority_score),
    (FrequencyScorer(), frequency_score),
    (ReflexiveScorer(), lambda item, items: ReflexiveScorer().score_all([item])[0]),
    (KindScorer({"message": 5.0, "custom": -0.0}),
     lambda item, items: {"message": 5.0, "custom": -0.0}.get(item.kind.folded, 0.0)),
]


@PROPERTY
@given(items=item_lists(max_distinct=8))
def test_scaled_matches_the_reference(items: list[ContextItem]) -> None:
    """ScaledScorer's single inner pass equals SCALED-SCORE's N inner calls per item,
    for several inner scorers."""
    for scorer, inner in INNER:
        expected = [scaled_score(item, items, inner) for item in items]
        assert ScaledScorer(scorer).score_all(items) == expected, scorer


@PROPERTY
@given(values=st.lists(st.one_of(st.floats(), st.sampled_from([0.0, -0.0, 1.0])),
                       max_size=12),
       repeats=st.lists(st.integers(0, 11), max_size=3))
def test_scaled_handles_nan_infinity_and_signed_zero_like_the_reference(
    values: list[float], repeats: list[int]
) -> None:
    """With an inner scorer returning NaN, infinities or -0.0, the scaled scores are
    still exactly the reference's (NaN where it gives NaN), repeated instances included."""
    items = [ContextItem(content=f"c{i}", tokens=i) for i in range(len(values))]
    if items:
        items.extend(items[index % len(items)] for index in repeats)

    def inner(item: ContextItem, all_items: Sequence[ContextItem]) -> float:
        return values[item.tokens]

    expected = [scaled_score(item, items, inner) for item in items]
    actual = ScaledScorer(FunctionScorer(inner)).score_all(items)
    assert same_scores(actual, expected)
    assert all(math.copysign(1.0, a) == math.copysign(1.0, b)
               for a, b in zip(actual, expected, strict=True) if a == 0.0)


@PROPERTY
@given(items=item_lists(), weights=st.lists(st.floats(1e-3, 1e3), min_size=3, max_size=3))
def test_composite_matches_the_reference(items: list[ContextItem], weights: list[float]) -> None:
    """CompositeScorer's vectorised sum equals COMPOSITE-SCORE bit for bit."""
    children = [(recency_score, weights[0]), (priority_score, weights[1]),
                (frequency_score, weights[2])]
    scorer = CompositeScorer([(RecencyScorer(), weights[0]), (PriorityScorer(), weights[1]),
                              (FrequencyScorer(), weights[2])])
    expected = [composite_score(item, items, children) for item in items]
    assert scorer.score_all(items) == expected


