"""Every built-in scorer writes its table (to_dict) and reads it back (from_dict),
compares by value, and is found by type name through the strategy registry; a
scorer registered from its own module is found by policies, the conformance
runner and Pipeline.from_policy with no other change."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Self

import pytest

from cupellation import ContextBudget, ContextItem, Pipeline
from cupellation._registry import (
    CURVE_TYPES,
    SCORER_TYPES,
    build_curve,
    build_scorer,
    describe_scorer,
    settings_of,
)
from cupellation._tables import StrategyTable
from cupellation.conformance import UnsupportedConfigError
from cupellation.conformance._scoring import build_scorer as build_vector_scorer
from cupellation.exceptions import ConfigurationError, CustomStrategyError, InvalidTypeError
from cupellation.policy import Policy, load_policy
from cupellation.scoring import (
    CompositeScorer,
    DecayCurve,
    DecayScorer,
    ExponentialCurve,
    FixedClock,
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
    StepCurve,
    TagScorer,
    WindowCurve,
    utc_now,
)
from cupellation.scoring._base import SCORERS, BuiltinScorer, Clock

MOMENT = datetime(2026, 1, 1, tzinfo=UTC)

#: One scorer of each type, with the table it writes.
TABLES: list[tuple[Scorer, dict[str, Any]]] = [
    (RecencyScorer(), {"type": "recency"}),
    (PriorityScorer(), {"type": "priority"}),
    (FrequencyScorer(), {"type": "frequency"}),
    (ReflexiveScorer(), {"type": "reflexive"}),
    (KindScorer(), {"type": "kind"}),
    (KindScorer({"memory": 2.0}), {"type": "kind", "weights": {"memory": 2.0}}),
    (TagScorer({"a": 1.0}, case_sensitive=True),
     {"type": "tag", "tag_weights": {"a": 1.0}, "case_sensitive": True}),
    (MetadataTrustScorer(0.25), {"type": "metadata_trust", "default_score": 0.25}),
    (MetadataKeyScorer("k", "v", 3), {"type": "metadata_key", "key": "k", "value": "v",
                                      "boost": 3.0}),
    (DecayScorer(StepCurve([(timedelta(hours=1), 0.5)]), clock=FixedClock(MOMENT)),
     {"type": "decay", "curve": {"type": "step", "windows": [{"max_age": "1h", "score": 0.5}]},
      "null_timestamp_score": 0.5, "reference_time": "2026-01-01T00:00:00Z"}),
    (DecayScorer(ExponentialCurve(timedelta(days=1)), clock=utc_now, null_timestamp_score=0.0),
     {"type": "decay", "curve": {"type": "exponential", "half_life": "1d"},
      "null_timestamp_score": 0.0}),
    (ScaledScorer(DecayScorer(WindowCurve(timedelta(minutes=5)), clock=utc_now)),
     {"type": "scaled", "inner": {"type": "decay", "curve": {"type": "window", "max_age": "5m"},
                                  "null_timestamp_score": 0.5}}),
    (CompositeScorer([(RecencyScorer(), 2), (ScaledScorer(KindScorer()), 1.5)]),
     {"type": "composite", "children": [
         {"type": "recency", "weight": 2.0},
         {"type": "scaled", "weight": 1.5, "inner": {"type": "kind"}}]}),
]


def test_the_table_cases_cover_every_scorer_type() -> None:
    """TABLES holds a scorer of each registered type."""
    assert {table["type"] for _scorer, table in TABLES} == set(SCORER_TYPES)
    assert len(SCORER_TYPES) == 11


@pytest.mark.parametrize(("scorer", "table"), TABLES, ids=lambda value: repr(value)[:40])
def test_each_scorer_writes_its_table_and_reads_it_back(scorer: Scorer,
                                                        table: dict[str, Any]) -> None:
    """to_dict() is the documented table; its class's from_dict() and the registry's
    build_scorer() both give an equal scorer back (with an equal hash)."""
    assert describe_scorer(scorer) == table
    rebuilt = build_scorer(table)
    assert rebuilt == scorer
    assert hash(rebuilt) == hash(scorer)
    assert type(scorer).from_dict(table) == scorer  # type: ignore[attr-defined]
    assert copy.deepcopy(scorer) == scorer
    assert pickle.loads(pickle.dumps(scorer)) == scorer


CURVES: list[tuple[DecayCurve, dict[str, Any]]] = [
    (ExponentialCurve(timedelta(hours=36)), {"type": "exponential", "half_life": "1d12h"}),
    (WindowCurve(timedelta(seconds=1.5)), {"type": "window", "max_age": "1.5s"}),
    (StepCurve([(timedelta(minutes=1), 1.0), (timedelta(days=7), 0.0)]),
     {"type": "step", "windows": [{"max_age": "1m", "score": 1.0},
                                  {"max_age": "7d", "score": 0.0}]}),
]


@pytest.mark.parametrize(("curve", "table"), CURVES, ids=repr)
def test_each_decay_curve_writes_its_table_and_reads_it_back(
        curve: DecayCurve, table: dict[str, Any]) -> None:
    """Every curve type: durations are written in their shortest exact text and the
    registry reads the table back to an equal curve."""
    assert {entry["type"] for _c, entry in CURVES} == set(CURVE_TYPES)
    assert curve.to_dict() == table  # type: ignore[attr-defined]
    assert build_curve(table) == curve


def test_scorers_compare_by_their_settings() -> None:
    """Equal settings make equal scorers; other settings, another type or another
    clock do not; a FunctionScorer is equal to one wrapping the same function."""
    assert KindScorer({"Memory": 1.0}) == KindScorer({"memory": 1.0})
    assert KindScorer({"Memory": 1.0}) != KindScorer({"Memory": 2.0})
    assert KindScorer() != KindScorer(dict(KindScorer().weights))  # defaults are a setting
    assert RecencyScorer() != PriorityScorer()
    curve = WindowCurve(timedelta(hours=1))
    assert DecayScorer(curve, clock=utc_now) != DecayScorer(curve, clock=FixedClock(MOMENT))
    assert DecayScorer(curve, clock=FixedClock(MOMENT)) == DecayScorer(
        curve, clock=FixedClock(MOMENT.astimezone(timezone(timedelta(hours=3)))))
    assert FunctionScorer(len) == FunctionScorer(len)  # type: ignore[arg-type]
    assert len({RecencyScorer(), RecencyScorer(), TagScorer({"a": 1.0})}) == 2


def test_a_fixed_clock_reads_its_moment_in_utc() -> None:
    """FixedClock returns its (UTC) moment every time and refuses a naive one."""
    clock = FixedClock(datetime(2026, 1, 1, 3, tzinfo=timezone(timedelta(hours=3))))
    assert clock() == clock() == MOMENT
    assert clock().tzinfo is UTC
    assert repr(clock) == "FixedClock(2026-01-01T00:00:00Z)"
    with pytest.raises(ConfigurationError, match="moment"):
        FixedClock(datetime(2026, 1, 1))
    with pytest.raises(InvalidTypeError, match="moment"):
        FixedClock("2026-01-01")  # type: ignore[arg-type]


def test_from_dict_names_the_path_of_what_is_wrong() -> None:
    """Errors name their path inside the table, from where it sits; a table whose
    type names another scorer is refused by a class's own from_dict."""
    with pytest.raises(ConfigurationError, match=r"^s\.children\[0\]\.inner\.wieghts: "):
        build_scorer({"type": "composite", "children": [
            {"type": "scaled", "weight": 1, "inner": {"type": "kind", "wieghts": {}}}]},
            path="s")
    with pytest.raises(ConfigurationError, match=r"^scorer\.type: does not name a 'recency'"):
        RecencyScorer.from_dict({"type": "priority"})
    assert RecencyScorer.from_dict({}) == RecencyScorer()  # the type may be left out
    assert settings_of("scorer", "MetadataKeyScorer", "x") == (
        "metadata_key", ("key", "value", "boost"))


def test_a_custom_scorer_is_recorded_by_repr_and_cannot_be_built() -> None:
    """A scorer that is not a built-in is described as {"type": "custom", "repr": ...};
    building that record raises CustomStrategyError naming its path."""
    custom = FunctionScorer(lambda item, items: 0.0, name="zero")
    assert describe_scorer(custom) == {"type": "custom", "repr": "FunctionScorer(zero)"}
    with pytest.raises(CustomStrategyError) as caught:
        build_scorer({"type": "composite", "children": [
            {"type": "custom", "weight": 1.0, "repr": "FunctionScorer(zero)"}]})
    assert caught.value.field == "scorer.children[0]"


def test_registration_asks_for_what_the_registry_relies_on() -> None:
    """A class without its own snake_case type_name or settings, or a second class
    under a registered name, is refused when it registers."""
    table: StrategyTable[Any] = StrategyTable("scorer", suffixes=("scorer",))

    class NoName(BuiltinScorer):
        __slots__ = ()
        settings = ()

        def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
            return [0.0] * len(items)

    with pytest.raises(TypeError, match="type_name"):
        table.register(NoName)

    class Shouty(NoName):
        __slots__ = ()
        type_name = "Shouty"
        settings = ()

    with pytest.raises(TypeError, match="snake_case"):
        table.register(Shouty)
    with pytest.raises(TypeError, match="registered twice"):
        SCORERS.register(type("Again", (RecencyScorer,), {"__slots__": (),
                                                          "type_name": "recency",
                                                          "settings": ()}))


class ConstantScorer(BuiltinScorer):
    """A scorer written as a new built-in would be: only this class and its
    registration (below, inside the fixture) are new."""

    __slots__ = ("value",)
    type_name = "constant"
    settings = ("value",)
    value: float

    def __init__(self, value: float = 0.5) -> None:
        object.__setattr__(self, "value", float(value))

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        return [self.value] * len(items)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "value": self.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "scorer",
                  clock: Clock | None = None) -> Self:
        table = SCORERS.read(cls, data, path)
        return cls(table.get("value", 0.5))

    def _value(self) -> tuple[Any, ...]:
        return (self.value,)

    def __repr__(self) -> str:
        return f"ConstantScorer({self.value!r})"


@pytest.fixture
def constant_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """ConstantScorer registered for one test, then forgotten (monkeypatch restores
    the table)."""
    monkeypatch.setattr(SCORERS, "_by_key", dict(SCORERS._by_key))
    SCORERS.register(ConstantScorer)


@pytest.mark.usefixtures("constant_registered")
def test_a_new_scorer_needs_only_its_own_module() -> None:
    """Registered from its own module, a new scorer type is read by policy files
    (nested in a composite), built by the conformance runner (its vector settings
    are its table's, unknown keys refused), recorded by run_started and rebuilt by
    Pipeline.from_policy: nothing else lists the scorers."""
    policy = load_policy('[scorer]\ntype = "composite"\n[[scorer.children]]\n'
                         'type = "Constant"\nweight = 1.0\nvalue = 0.25\n')
    assert policy.scorer == CompositeScorer([(ConstantScorer(0.25), 1.0)])
    assert load_policy(policy.to_toml()) == policy
    assert build_vector_scorer("constant", {"value": 0.75}) == ConstantScorer(0.75)
    with pytest.raises(UnsupportedConfigError, match="did you mean 'value'"):
        build_vector_scorer("constant", {"valeu": 0.75})
    pipeline = Policy(scorer=ConstantScorer(0.1)).build_pipeline(ContextBudget(100, 50))
    assert pipeline.describe()["scorer"] == '{"type":"constant","value":0.1}'
    assert Pipeline.from_policy(pipeline.describe(), budget=pipeline.budget) == pipeline
    assert pipeline.run([ContextItem("x", 10)])[0].content == "x"
