"""Scorer construction: validation errors name the field and the value, cycle
detection, immutability, repr, pickling, and the Scorer / ScorerBase /
FunctionScorer interface."""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

import cupellation.scoring as scoring_module
from cupellation import ContextItem
from cupellation.exceptions import (
    ConfigurationError,
    InvalidTypeError,
    InvalidValueError,
    ScorerError,
)
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
    utc_now,
)

# The scoring module seen as Any, for calls that pass wrongly typed arguments on purpose.
untyped: Any = scoring_module

HOUR = timedelta(hours=1)
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def item(content: str = "x", **fields: Any) -> ContextItem:
    """A 10-token item with the given content and fields."""
    return ContextItem(content=content, tokens=10, **fields)


def expect_config_error(build: Callable[[], object], field: str, value_text: str) -> None:
    """``build()`` raises ConfigurationError whose field is ``field`` and whose
    message names ``field`` and shows ``value_text``."""
    with pytest.raises(ConfigurationError) as caught:
        build()
    assert caught.value.field == field
    message = str(caught.value)
    assert field in message
    assert value_text in message


# -- validation errors name field and value ---------------------------------------


@pytest.mark.parametrize(
    ("build", "field", "value_text"),
    [
        (lambda: KindScorer({"Memory": -0.5}), "weights['Memory']", "-0.5"),
        (lambda: KindScorer({"Memory": math.nan}), "weights['Memory']", "nan"),
        (lambda: KindScorer({"Memory": math.inf}), "weights['Memory']", "inf"),
        (lambda: KindScorer({"Memory": 1.0, "memory": 2.0}), "weights", "'memory'"),
        (lambda: KindScorer({"": 1.0}), "weights key", "''"),
        (lambda: TagScorer({"a": -1.0}), "tag_weights['a']", "-1.0"),
        (lambda: TagScorer({"a": math.inf}), "tag_weights['a']", "inf"),
        (lambda: TagScorer({"a": 1.0, "A": 1.0}), "tag_weights", "'A'"),
        (lambda: TagScorer({"a": 1e308, "b": 1e308}), "tag_weights", "1e+308"),
        (lambda: CompositeScorer([]), "children", "[]"),
        (lambda: CompositeScorer([(RecencyScorer(), -2.0)]), "children[0].weight", "-2.0"),
        (lambda: CompositeScorer([(RecencyScorer(), 1.0), (KindScorer(), 0)]),
         "children[1].weight", "0"),
        (lambda: CompositeScorer([(RecencyScorer(), math.nan)]), "children[0].weight", "nan"),
        (lambda: CompositeScorer([(RecencyScorer(), math.inf)]), "children[0].weight", "inf"),
        (lambda: MetadataKeyScorer("k", "v", 0.0), "boost", "0.0"),
        (lambda: MetadataKeyScorer("k", "v", -1.0), "boost", "-1.0"),
        (lambda: MetadataTrustScorer(default_score=1.5), "default_score", "1.5"),
        (lambda: MetadataTrustScorer(default_score=-0.1), "default_score", "-0.1"),
        (lambda: DecayScorer(WindowCurve(HOUR), clock=utc_now, null_timestamp_score=2.0),
         "null_timestamp_score", "2.0"),
        (lambda: untyped.DecayScorer(WindowCurve(HOUR), clock=NOW), "clock", "2025, 1, 1"),
        (lambda: ExponentialCurve(timedelta(0)), "half_life", "timedelta(0)"),
        (lambda: ExponentialCurve(-HOUR), "half_life", "days=-1"),
        (lambda: WindowCurve(timedelta(0)), "max_age", "timedelta(0)"),
        (lambda: StepCurve([]), "windows", "[]"),
        (lambda: StepCurve([(timedelta(0), 0.5)]), "windows[0].max_age", "timedelta(0)"),
        (lambda: StepCurve([(HOUR, 0.5), (HOUR, 0.2)]), "windows[1].max_age", "seconds=3600"),
        (lambda: StepCurve([(2 * HOUR, 0.5), (HOUR, 0.2)]), "windows[1].max_age",
         "seconds=3600"),
        (lambda: StepCurve([(HOUR, 1.5)]), "windows[0].score", "1.5"),
    ],
    ids=["kind-negative", "kind-nan", "kind-inf", "kind-duplicate-case", "kind-empty-name",
         "tag-negative", "tag-inf", "tag-duplicate-case", "tag-total-overflow",
         "composite-empty", "composite-negative", "composite-zero", "composite-nan",
         "composite-inf", "key-zero-boost", "key-negative-boost", "trust-default-high",
         "trust-default-low", "decay-null-score", "decay-clock-datetime", "exp-zero",
         "exp-negative", "window-zero",
         "step-empty", "step-zero", "step-duplicate", "step-unsorted", "step-score"],
)
def test_invalid_configuration_names_field_and_value(
    build: Callable[[], object], field: str, value_text: str
) -> None:
    """Each invalid configuration raises ConfigurationError naming its field and value."""
    expect_config_error(build, field, value_text)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: untyped.KindScorer({"Memory": "0.5"}), "weights['Memory']"),
        (lambda: untyped.KindScorer({"Memory": True}), "weights['Memory']"),
        (lambda: untyped.KindScorer([("Memory", 1.0)]), "weights"),
        (lambda: untyped.TagScorer({1: 1.0}), "tag_weights key"),
        (lambda: untyped.CompositeScorer([(None, 1.0)]), "children[0].scorer"),
        (lambda: untyped.CompositeScorer([(lambda item, items: 0.0, 1.0)]), "children[0].scorer"),
        (lambda: untyped.CompositeScorer([(RecencyScorer, 1.0)]), "children[0].scorer"),
        (lambda: untyped.CompositeScorer([RecencyScorer()]), "children[0]"),
        (lambda: untyped.CompositeScorer(RecencyScorer()), "children"),
        (lambda: untyped.ScaledScorer(None), "inner"),
        (lambda: untyped.MetadataKeyScorer(1, "v", 1.0), "key"),
        (lambda: untyped.MetadataKeyScorer("k", 1, 1.0), "value"),
        (lambda: untyped.DecayScorer("exponential", clock=utc_now), "curve"),
        (lambda: untyped.ExponentialCurve(3600), "half_life"),
        (lambda: untyped.FunctionScorer(0.5), "fn"),
    ],
    ids=["kind-str-weight", "kind-bool-weight", "kind-not-mapping", "tag-int-key",
         "composite-none", "composite-plain-function", "composite-class",
         "composite-not-pair",
         "composite-not-sequence", "scaled-none", "key-int", "value-int", "decay-curve-str",
         "exp-seconds-int", "function-not-callable"],
)
def test_wrong_types_raise_invalid_type_error(build: Callable[[], object], field: str) -> None:
    """A wrongly typed argument raises InvalidTypeError naming the field."""
    with pytest.raises(InvalidTypeError) as caught:
        build()
    assert caught.value.field == field


def test_errors_are_also_builtin_value_errors() -> None:
    """ConfigurationError is a ValueError, so generic handlers still catch it."""
    with pytest.raises(ValueError, match="boost"):
        MetadataKeyScorer("k", "v", 0.0)


def test_decay_clock_is_required() -> None:
    """There is no default time provider (decay.md, D042): omitting ``clock`` is Python's
    own missing-argument TypeError, naming it; passing utc_now explicitly works."""
    with pytest.raises(TypeError, match="clock"):
        untyped.DecayScorer(WindowCurve(HOUR))
    with pytest.raises(TypeError, match="clock"):
        untyped.DecayScorer(WindowCurve(HOUR), null_timestamp_score=0.5)
    scorer = DecayScorer(WindowCurve(HOUR), clock=utc_now)
    assert scorer.clock is utc_now
    assert scorer.score_all([item(timestamp=datetime.now(UTC))]) == [1.0]


def test_decay_clock_must_be_callable() -> None:
    """A non-callable clock is a ConfigurationError naming ``clock`` and the value."""
    with pytest.raises(ConfigurationError) as caught:
        untyped.DecayScorer(WindowCurve(HOUR), clock="now")
    assert caught.value.field == "clock"
    assert caught.value.value == "now"
    assert "clock=utc_now" in str(caught.value)


def test_decay_clock_returning_naive_datetime_is_rejected() -> None:
    """A clock returning a naive datetime fails when scoring, naming clock()."""
    scorer = DecayScorer(WindowCurve(HOUR), clock=lambda: datetime(2025, 1, 1))
    with pytest.raises(ConfigurationError, match=r"clock\(\)"):
        scorer.score_all([item(timestamp=NOW)])


# -- cycle detection ---------------------------------------------------------------------


def test_shared_child_is_not_a_cycle() -> None:
    """The same scorer under two branches (a diamond) is allowed."""
    shared = RecencyScorer()
    left = CompositeScorer([(shared, 1.0)])
    right = ScaledScorer(shared)
    top = CompositeScorer([(left, 1.0), (right, 1.0), (shared, 1.0)])
    assert top.scorers == (left, right, shared)


def test_identical_configurations_are_not_a_cycle() -> None:
    """Two distinct composites with identical configuration nest fine (identity, not equality)."""
    first = CompositeScorer([(RecencyScorer(), 1.0)])
    second = CompositeScorer([(RecencyScorer(), 1.0)])
    CompositeScorer([(first, 1.0), (CompositeScorer([(second, 1.0)]), 1.0)])


def test_direct_self_reference_is_a_cycle() -> None:
    """A composite that lists itself (forced past immutability) is rejected, repr intact."""
    composite = CompositeScorer([(RecencyScorer(), 1.0)])
    object.__setattr__(composite, "scorers", (composite,))
    object.__setattr__(composite, "children", ((composite, 1.0),))
    with pytest.raises(ConfigurationError, match="cycle") as caught:
        CompositeScorer([(composite, 1.0)])
    assert "..." in str(caught.value)  # the recursive repr is cut, not infinite


def test_scaled_rejects_a_cyclic_inner_graph() -> None:
    """ScaledScorer runs the same cycle detection on its inner scorer."""
    composite = CompositeScorer([(RecencyScorer(), 1.0)])
    object.__setattr__(composite, "scorers", (ScaledScorer(composite),))
    with pytest.raises(ConfigurationError, match="cycle"):
        ScaledScorer(composite)


def test_deep_cycle_is_found() -> None:
    """A cycle several levels down is detected."""
    bottom = CompositeScorer([(KindScorer(), 1.0)])
    middle = ScaledScorer(CompositeScorer([(bottom, 1.0)]))
    top = CompositeScorer([(middle, 1.0)])
    object.__setattr__(bottom, "scorers", (top,))
    with pytest.raises(ConfigurationError, match="cycle"):
        CompositeScorer([(PriorityScorer(), 1.0), (top, 2.0)])


# -- immutability, repr, pickling --------------------------------------------------------


def all_builtins() -> list[Scorer]:
    """One configured instance of every built-in scorer."""
    return [
        RecencyScorer(), PriorityScorer(), KindScorer(), KindScorer({"Memory": 2.0}),
        TagScorer({"a": 1.0}), TagScorer({"a": 1.0}, case_sensitive=True), FrequencyScorer(),
        ReflexiveScorer(), CompositeScorer([(RecencyScorer(), 2.0), (KindScorer(), 1.0)]),
        ScaledScorer(PriorityScorer()), MetadataTrustScorer(default_score=0.3),
        MetadataKeyScorer("k", "v", 1.5),
        DecayScorer(StepCurve([(HOUR, 0.9), (2 * HOUR, 0.1)]), clock=utc_now,
                    null_timestamp_score=0.2),
    ]


@pytest.mark.parametrize("scorer", all_builtins(), ids=repr)
def test_builtins_are_immutable(scorer: Scorer) -> None:
    """Setting or deleting any attribute of a built-in raises AttributeError."""
    with pytest.raises(AttributeError):
        scorer.anything = 1  # type: ignore[attr-defined]
    for name in getattr(type(scorer), "__slots__", ()):
        with pytest.raises(AttributeError):
            setattr(scorer, name, None)
        with pytest.raises(AttributeError):
            delattr(scorer, name)


def test_configuration_maps_are_read_only() -> None:
    """Weight maps cannot be changed through the scorer, nor by mutating the input."""
    source = {"Memory": 2.0}
    scorer = KindScorer(source)
    source["Memory"] = 100.0
    assert scorer.score_all([item(kind="Memory")]) == [2.0]
    with pytest.raises(TypeError):
        scorer.weights["Memory"] = 3.0  # type: ignore[index]
    tags = TagScorer({"a": 1.0})
    with pytest.raises(TypeError):
        tags.tag_weights["a"] = 3.0  # type: ignore[index]


def test_curves_are_frozen() -> None:
    """Curves are frozen dataclasses; StepCurve stores its windows as a tuple."""
    curve = StepCurve([(HOUR, 0.5)])
    assert curve.windows == ((HOUR, 0.5),)
    with pytest.raises(AttributeError):
        curve.windows = ()  # type: ignore[misc]
    assert ExponentialCurve(HOUR) == ExponentialCurve(timedelta(minutes=60))


@pytest.mark.parametrize(
    ("scorer", "text"),
    [
        (RecencyScorer(), "RecencyScorer()"),
        (KindScorer(), "KindScorer()"),
        (KindScorer({"memory": 2}), "KindScorer(weights={'memory': 2.0})"),
        (TagScorer({"a": 1}), "TagScorer(tag_weights={'a': 1.0})"),
        (CompositeScorer([(RecencyScorer(), 3), (PriorityScorer(), 1)]),
         "CompositeScorer(children=[(RecencyScorer(), 3.0), (PriorityScorer(), 1.0)])"),
        (ScaledScorer(ReflexiveScorer()), "ScaledScorer(inner=ReflexiveScorer())"),
        (MetadataKeyScorer("k", "v", 2), "MetadataKeyScorer(key='k', value='v', boost=2.0)"),
        (MetadataTrustScorer(), "MetadataTrustScorer(default_score=0.5)"),
        (DecayScorer(WindowCurve(HOUR), clock=utc_now),
         "DecayScorer(curve=WindowCurve(max_age=datetime.timedelta(seconds=3600)), "
         "null_timestamp_score=0.5, clock=utc_now)"),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, str) else "",
)
def test_repr_is_readable(scorer: Scorer, text: str) -> None:
    """repr shows the class and its configuration as a constructor call."""
    assert repr(scorer) == text


@pytest.mark.parametrize("scorer", all_builtins(), ids=repr)
def test_builtins_pickle_and_deepcopy(scorer: Scorer) -> None:
    """Pickled and deep-copied built-ins score exactly like the original."""
    items = [item("a", kind="Memory", tags=("a",), priority=2, timestamp=NOW,
                  metadata={"k": "v", "cupel:trust": "0.4"}),
             item("b", tags=("A", "b"), priority=1, timestamp=NOW - HOUR)]
    expected = list(scorer.score_all(items))
    for clone in (pickle.loads(pickle.dumps(scorer)), copy.deepcopy(scorer)):
        assert type(clone) is type(scorer)
        assert repr(clone) == repr(scorer)
        assert list(clone.score_all(items)) == expected


# -- Scorer protocol, ScorerBase.score, FunctionScorer -------------------------------------


class ArrayScorer:
    """A custom scorer that does not inherit ScorerBase and returns a numpy array."""

    def score_all(self, items: Sequence[ContextItem], /) -> Sequence[float]:
        """The item's token count as a float."""
        return np.asarray([float(entry.tokens) for entry in items])  # type: ignore[return-value]


def test_protocol_is_structural() -> None:
    """Any object with score_all is a Scorer; built-ins are too; plain functions are not."""
    assert isinstance(ArrayScorer(), Scorer)
    assert all(isinstance(scorer, Scorer) for scorer in all_builtins())
    assert all(isinstance(scorer, ScorerBase) for scorer in all_builtins())
    assert not isinstance(lambda item, items: 0.0, Scorer)


def test_custom_array_scorer_composes() -> None:
    """A numpy-returning custom scorer works as a composite and scaled child."""
    items = [ContextItem(content="a", tokens=10), ContextItem(content="b", tokens=30)]
    assert CompositeScorer([(ArrayScorer(), 1.0)]).score_all(items) == [10.0, 30.0]
    assert ScaledScorer(ArrayScorer()).score_all(items) == [0.0, 1.0]


def test_composite_rejects_child_returning_wrong_length() -> None:
    """A child that returns the wrong number of scores raises ScorerError naming it."""
    class Short:
        def score_all(self, items: Sequence[ContextItem], /) -> Sequence[float]:
            return [0.0]

    with pytest.raises(ScorerError, match="Short"):
        CompositeScorer([(Short(), 1.0)]).score_all([item("a"), item("b")])


def test_score_finds_the_item_by_identity() -> None:
    """score(item, all_items) equals score_all's entry at the item's position."""
    items = [item("a", priority=1), item("b", priority=5), item("c", priority=3)]
    scorer = PriorityScorer()
    assert [scorer.score(entry, items) for entry in items] == scorer.score_all(items)


def test_score_rejects_an_item_not_in_all_items() -> None:
    """An equal but distinct item is not found: InvalidValueError naming 'item'."""
    items = [item("a", priority=1)]
    with pytest.raises(InvalidValueError) as caught:
        RecencyScorer().score(item("a", priority=1), items)
    assert caught.value.field == "item"
    with pytest.raises(InvalidValueError):
        FunctionScorer(lambda entry, entries: 1.0).score(item("z"), items)


def _absolute_scorers() -> list[ScorerBase]:
    """One of each scorer spec/src/scorers.md lists as absolute."""
    now = datetime(2025, 1, 1, tzinfo=UTC)
    return [KindScorer(), TagScorer({"web": 1.0, "db": 3.0}), ReflexiveScorer(),
            MetadataTrustScorer(), MetadataKeyScorer("k", "v", 2.0),
            DecayScorer(ExponentialCurve(timedelta(hours=1)), clock=lambda: now)]


@pytest.mark.parametrize("scorer", _absolute_scorers(), ids=lambda s: type(s).__name__)
def test_absolute_scorers_ignore_all_items(scorer: ScorerBase) -> None:
    """spec/src/scorers.md: for an absolute scorer "the allItems parameter is ignored":
    score(item, all_items) is the same with all_items empty, without the item, or with
    other items around it, and never raises for an item it was not given."""
    subject = item("s", kind="ToolOutput", tags=("web", "db"), future_relevance_hint=0.7,
                   metadata={"cupel:trust": "0.9", "k": "v"},
                   timestamp=datetime(2024, 12, 31, 23, tzinfo=UTC))
    others = [item("o1", kind="Memory", priority=3), item("o2", tags=("web",))]
    alone = scorer.score(subject, [subject])
    assert scorer.score(subject, []) == alone
    assert scorer.score(subject, others) == alone
    assert scorer.score(subject, [*others, subject]) == alone
    assert scorer.score(subject, (item("s"),)) == alone   # an equal item, not this one


def test_exactly_the_specifications_absolute_scorers_are_absolute() -> None:
    """The six built-ins the chapter lists as absolute say so; the relative and
    composite ones (Recency, Priority, Frequency, Composite, Scaled, Function) do not."""
    absolute = {type(scorer).__name__ for scorer in _absolute_scorers() if scorer.absolute}
    assert absolute == {"KindScorer", "TagScorer", "ReflexiveScorer", "MetadataTrustScorer",
                        "MetadataKeyScorer", "DecayScorer"}
    relative: list[ScorerBase] = [
        RecencyScorer(), PriorityScorer(), FrequencyScorer(),
        CompositeScorer([(KindScorer(), 1.0)]), ScaledScorer(KindScorer()),
        FunctionScorer(lambda entry, entries: 1.0),
    ]
    assert [scorer.absolute for scorer in relative] == [False] * len(relative)


def test_function_scorer_calls_fn_with_item_and_all_items() -> None:
    """FunctionScorer passes each item and the whole list, in order."""
    calls: list[tuple[str, int]] = []

    def fn(entry: ContextItem, entries: Sequence[ContextItem]) -> float:
        calls.append((entry.content, len(entries)))
        return entry.tokens / 10

    items = [item("a"), ContextItem(content="b", tokens=5)]
    scorer = FunctionScorer(fn)
    assert scorer.score_all(items) == [1.0, 0.5]
    assert calls == [("a", 2), ("b", 2)]
    assert scorer.score(items[1], items) == 0.5
    assert repr(scorer) == f"FunctionScorer({fn.__qualname__})"
    assert repr(FunctionScorer(fn, name="tokens")) == "FunctionScorer(tokens)"


def test_function_scorer_rejects_non_numeric_results() -> None:
    """A function returning a non-number raises ScorerError naming the scorer and index."""
    scorer = FunctionScorer(lambda entry, entries: "high", name="words")  # type: ignore[arg-type,return-value]
    with pytest.raises(ScorerError, match="words") as caught:
        scorer.score_all([item()])
    assert caught.value.index == 0
