"""Hypothesis strategies for policies: every built-in scorer (nested), decay curve,
slicer (nested) and placer, with budgets, names and odd text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from cupellation import ContextBudget, OverflowStrategy
from cupellation._model import ascii_fold
from cupellation.placing import ChronologicalPlacer, Placer, UShapedPlacer
from cupellation.policy import Policy
from cupellation.scoring import (
    CompositeScorer,
    DecayScorer,
    ExponentialCurve,
    FixedClock,
    FrequencyScorer,
    KindScorer,
    MetadataKeyScorer,
    MetadataTrustScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    Scorer,
    StepCurve,
    TagScorer,
    WindowCurve,
    utc_now,
)
from cupellation.slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
    ScarcityBehavior,
    Slicer,
)

__all__ = ["budgets", "curves", "json_like", "placers", "policies", "scorers", "slicers",
           "text"]

#: Any text a policy file can hold (no lone surrogates), control characters,
#: quotes, backslashes and non-ASCII included.
text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)
names = text.filter(lambda value: value.strip() != "")
weights = st.one_of(
    st.floats(min_value=1e-9, max_value=1e9, allow_nan=False, allow_infinity=False),
    st.integers(min_value=1, max_value=10**6),
)
unit = st.floats(min_value=0.0, max_value=1.0)
durations = st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=10**6))
moments = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)),
                               timezone(-timedelta(hours=8))]),
)


def _distinct_folded(values: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for value in values:
        seen.setdefault(ascii_fold(value), value)
    return list(seen.values())


kind_names = st.lists(names, max_size=4).map(_distinct_folded)


@st.composite
def _tag_scorer(draw: st.DrawFn) -> TagScorer:
    case_sensitive = draw(st.booleans())
    tags = draw(st.lists(text, max_size=4))
    tags = list(dict.fromkeys(tags)) if case_sensitive else _distinct_folded(tags)
    values = draw(st.lists(st.floats(0.0, 1e6), min_size=len(tags), max_size=len(tags)))
    return TagScorer(dict(zip(tags, values, strict=True)), case_sensitive=case_sensitive)


@st.composite
def _kind_scorer(draw: st.DrawFn) -> KindScorer:
    if draw(st.booleans()):
        return KindScorer()
    kinds = draw(kind_names)
    values = draw(st.lists(st.floats(0.0, 1e6), min_size=len(kinds), max_size=len(kinds)))
    return KindScorer(dict(zip(kinds, values, strict=True)))


@st.composite
def _step_curve(draw: st.DrawFn) -> StepCurve:
    ages = sorted(set(draw(st.lists(durations, min_size=1, max_size=4))))
    scores = draw(st.lists(unit, min_size=len(ages), max_size=len(ages)))
    return StepCurve(windows=list(zip(ages, scores, strict=True)))


curves = st.one_of(
    st.builds(ExponentialCurve, half_life=durations),
    st.builds(WindowCurve, max_age=durations),
    _step_curve(),
)

#: A decay scorer's clock as a policy can write it: the run's (wall) clock, or fixed.
clocks = st.just(utc_now) | moments.map(FixedClock)

leaf_scorers: st.SearchStrategy[Scorer] = st.one_of(
    st.just(RecencyScorer()), st.just(PriorityScorer()), st.just(FrequencyScorer()),
    st.just(ReflexiveScorer()), _kind_scorer(), _tag_scorer(),
    st.builds(MetadataTrustScorer, default_score=unit),
    st.builds(MetadataKeyScorer, key=text, value=text, boost=weights),
    st.builds(DecayScorer, curves, clock=clocks, null_timestamp_score=unit),
)


def _extend(children: st.SearchStrategy[Scorer]) -> st.SearchStrategy[Scorer]:
    entries = st.tuples(children, weights)
    return st.one_of(
        st.lists(entries, min_size=1, max_size=3).map(CompositeScorer),
        st.builds(ScaledScorer, children),
    )


scorers: st.SearchStrategy[Scorer] = st.recursive(leaf_scorers, _extend, max_leaves=6)


@st.composite
def _quota_entries(draw: st.DrawFn) -> list[QuotaEntry]:
    entries = []
    for kind in draw(kind_names):
        require = draw(st.floats(0.0, 25.0))
        cap = draw(st.floats(require, 100.0))
        entries.append(QuotaEntry(kind, require, cap))
    return entries


@st.composite
def _count_entries(draw: st.DrawFn) -> list[CountQuotaEntry]:
    entries = []
    for kind in draw(kind_names):
        require = draw(st.integers(0, 5))
        cap = draw(st.integers(max(require, 1) if require else 0, 10))
        entries.append(CountQuotaEntry(kind, require, cap_count=cap))
    return entries


scarcities = st.sampled_from(list(ScarcityBehavior))
buckets = st.integers(1, 10**6)


def _extend_slicer(inner: st.SearchStrategy[Slicer]) -> st.SearchStrategy[Slicer]:
    non_knapsack = inner.filter(lambda slicer: not isinstance(slicer, KnapsackSlice))
    return st.one_of(
        st.builds(QuotaSlice, inner, _quota_entries()),
        st.builds(CountQuotaSlice, non_knapsack, _count_entries(), scarcities),
    )


slicers: st.SearchStrategy[Slicer] = st.recursive(
    st.one_of(
        st.just(GreedySlice()),
        st.builds(KnapsackSlice, buckets),
        st.builds(CountConstrainedKnapsackSlice, _count_entries(), buckets, scarcities),
    ),
    _extend_slicer, max_leaves=3,
)
placers: st.SearchStrategy[Placer] = st.sampled_from([ChronologicalPlacer(),
                                                      UShapedPlacer()])


@st.composite
def budgets(draw: st.DrawFn) -> ContextBudget:
    """Valid budgets with every field drawn."""
    max_tokens = draw(st.integers(0, 2**63 - 1))
    target = draw(st.integers(0, max_tokens))
    reserve = draw(st.integers(0, max_tokens))
    kinds = draw(kind_names)
    slots = {kind: draw(st.integers(0, 2**63 - 1)) for kind in kinds}
    margin = draw(st.floats(0.0, 100.0))
    return ContextBudget(max_tokens, target, reserve, slots, margin)


policies: st.SearchStrategy[Policy] = st.builds(
    Policy,
    scorer=scorers,
    slicer=slicers,
    placer=placers,
    deduplication=st.booleans(),
    overflow_strategy=st.sampled_from(list(OverflowStrategy)),
    budget=st.none() | budgets(),
    name=st.none() | names,
    description=st.none() | text,
)

_scalars: st.SearchStrategy[Any] = st.one_of(
    st.booleans(), st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False), text,
)

#: JSON-like tables (no null, no NaN): what the TOML writer must round-trip.
json_like: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    text,
    st.recursive(_scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
        max_leaves=10),
    max_size=5,
)
