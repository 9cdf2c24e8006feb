"""The policy a run records: Pipeline.policy() is the configuration as a Policy,
Pipeline.describe() (run_started.pipeline) the same table with each strategy as JSON
text, and Pipeline.from_policy() rebuilds the pipeline from either, so a logged run
can be re-run."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    Pipeline,
    ScoredItem,
    TraceDetailLevel,
)
from cupellation._model import OverflowStrategy
from cupellation._registry import PLACER_TYPES, SCORER_TYPES, SLICER_TYPES, strategy_json
from cupellation.events import RunStarted, event_from_json, event_to_json
from cupellation.exceptions import (
    ConfigurationError,
    CustomStrategyError,
    DecodeError,
    InvalidTypeError,
    InvalidValueError,
)
from cupellation.placing import ChronologicalPlacer, Placer, UShapedPlacer
from cupellation.policy import PRESET_NAMES, Policy, get_preset
from cupellation.scoring import (
    CompositeScorer,
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
from cupellation.slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
    Slicer,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
BUDGET = ContextBudget(max_tokens=900, target_tokens=420, output_reserve=20)
OTHER_BUDGET = ContextBudget(max_tokens=500, target_tokens=400)
KINDS = ("Message", "Document", "ToolOutput", "Memory", "SystemPrompt")


def _items() -> list[ContextItem]:
    items = [ContextItem("system", 30, kind="SystemPrompt", pinned=True)]
    for k in range(24):
        items.append(ContextItem(
            f"item {k % 21}", 15 + (k * 37) % 60, kind=KINDS[k % 5],
            priority=(k * 5) % 7 if k % 4 else None, tags=("a", "b")[: k % 3],
            metadata={"cupel:trust": str((k % 10) / 10), "team": "red" if k % 3 else "blue"},
            timestamp=T0 - timedelta(hours=k * 3) if k % 5 else None,
            future_relevance_hint=(k % 8) / 7 if k % 6 else None))
    return items


MOMENT = FixedClock(T0)
SCORERS: list[Scorer] = [
    RecencyScorer(), PriorityScorer(), FrequencyScorer(), ReflexiveScorer(), KindScorer(),
    KindScorer({"Memory": 2.0, "toolOutput": 0.5}),
    TagScorer({"a": 1.0, "B": 2.0}), TagScorer({"a": 1.0}, case_sensitive=True),
    MetadataTrustScorer(default_score=0.3), MetadataKeyScorer("team", "red", 1.5),
    DecayScorer(ExponentialCurve(half_life=timedelta(hours=12)), clock=MOMENT),
    DecayScorer(WindowCurve(max_age=timedelta(days=1)), clock=MOMENT,
                null_timestamp_score=0.1),
    DecayScorer(StepCurve([(timedelta(hours=6), 1.0), (timedelta(days=2), 0.4)]),
                clock=MOMENT),
    ScaledScorer(PriorityScorer()),
    CompositeScorer([(RecencyScorer(), 3.0), (KindScorer(), 1.0)]),
    CompositeScorer([  # nested composites, scaled inside, every leaf once more
        (CompositeScorer([(PriorityScorer(), 1.0), (ScaledScorer(ReflexiveScorer()), 2.0)]),
         2.0),
        (ScaledScorer(CompositeScorer([(FrequencyScorer(), 1.0),
                                       (TagScorer({"b": 1.0}), 1.0)])), 1.0),
        (MetadataTrustScorer(), 0.5), (MetadataKeyScorer("team", "blue", 2.0), 0.5),
        (DecayScorer(ExponentialCurve(half_life=timedelta(days=1)), clock=MOMENT), 1.0),
    ]),
]
SLICERS: list[Slicer] = [
    GreedySlice(), KnapsackSlice(bucket_size=7),
    QuotaSlice(GreedySlice(), [QuotaEntry("Message", 10.0, 40.0)]),
    CountQuotaSlice(GreedySlice(), [CountQuotaEntry("ToolOutput", 2, cap_count=3)]),
    CountQuotaSlice(QuotaSlice(KnapsackSlice(5), [QuotaEntry("Document", 0.0, 30.0)]),
                    [CountQuotaEntry("Memory", 1, cap_count=2)], "Throw"),
    QuotaSlice(CountQuotaSlice(GreedySlice(), [CountQuotaEntry("Message", 1, cap_count=2)]),
               [QuotaEntry("ToolOutput", 20.0, 50.0)]),
    CountConstrainedKnapsackSlice([CountQuotaEntry("Document", 1, cap_count=2)], 9),
]
PLACERS: list[Placer] = [ChronologicalPlacer(), UShapedPlacer()]
PIPELINES: list[Pipeline] = [
    *(Pipeline(scorer) for scorer in SCORERS),
    *(Pipeline(SCORERS[-1], slicer, UShapedPlacer(), overflow_strategy="Truncate")
      for slicer in SLICERS),
    *(Pipeline(RecencyScorer(), placer=placer, deduplication=False,
               overflow_strategy="proceed") for placer in PLACERS),
]


def _run_started(pipeline: Pipeline, items: Sequence[ContextItem]
                 ) -> tuple[list[str], RunStarted]:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    window = pipeline.run(items, BUDGET, collector)
    started = collector.events[0]
    assert isinstance(started, RunStarted)
    return [item.content for item in window], started


def test_the_cases_cover_every_built_in_strategy() -> None:
    """The round-trip cases below use every registered scorer, slicer and placer type."""
    used: dict[str, set[str]] = {"scorer": set(), "slicer": set(), "placer": set()}

    def walk(table: object, family: str) -> None:
        if isinstance(table, dict):
            if "type" in table and family in ("scorer", "slicer"):
                used[family].add(table["type"])
            for key, value in table.items():
                walk(value, "scorer" if key in ("children", "inner") and family == "scorer"
                     else "slicer" if key == "inner" and family == "slicer" else "")
        elif isinstance(table, list):
            for value in table:
                walk(value, family)

    for pipeline in PIPELINES:
        policy = pipeline.policy().to_dict()
        walk(policy["scorer"], "scorer")
        walk(policy["slicer"], "slicer")
        used["placer"].add(policy["placer"]["type"])
    assert used == {"scorer": set(SCORER_TYPES), "slicer": set(SLICER_TYPES),
                    "placer": set(PLACER_TYPES)}


@pytest.mark.parametrize("pipeline", PIPELINES, ids=repr)
def test_a_recorded_run_rebuilds_its_pipeline_and_selects_the_same(
        pipeline: Pipeline) -> None:
    """run -> run_started.pipeline -> (its JSON line, read back) -> Pipeline.from_policy
    -> the same pipeline (equal by value), which selects the same window, with the
    same recorded policy."""
    items = _items()
    window, started = _run_started(pipeline, items)
    read_back = event_from_json(event_to_json(started))
    assert isinstance(read_back, RunStarted)
    assert read_back.pipeline == started.pipeline == pipeline.describe()
    rebuilt = Pipeline.from_policy(read_back.pipeline)
    assert rebuilt == pipeline
    again, started_again = _run_started(rebuilt, items)
    assert again == window
    assert started_again.pipeline == started.pipeline
    assert Pipeline.from_policy(pipeline.policy()) == pipeline


def test_describe_is_compact_sorted_json_of_each_table() -> None:
    """describe() holds exactly scorer, slicer and placer (compact JSON text with sorted
    keys of to_dict()), deduplication (bool) and overflow_strategy (its name)."""
    pipeline = Pipeline(CompositeScorer([(RecencyScorer(), 3.0), (KindScorer(), 1.0)]),
                        KnapsackSlice(50), UShapedPlacer(), deduplication=False,
                        overflow_strategy="truncate")
    assert dict(pipeline.describe()) == {
        "scorer": '{"children":[{"type":"recency","weight":3.0},'
                  '{"type":"kind","weight":1.0}],"type":"composite"}',
        "slicer": '{"bucket_size":50,"type":"knapsack"}',
        "placer": '{"type":"u_shaped"}',
        "deduplication": False,
        "overflow_strategy": "Truncate",
    }
    assert pipeline.describe() is pipeline.describe()  # made once
    with pytest.raises(TypeError):
        pipeline.describe()["scorer"] = "x"  # type: ignore[index]


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda value: pickle.loads(pickle.dumps(value))],
                         ids=["deepcopy", "pickle"])
def test_a_pipeline_copies_and_pickles_after_describing_itself(
        copier: Callable[[Pipeline], Pipeline]) -> None:
    """A pipeline whose record describe() has made (and cached) still deep-copies and
    pickles, to an equal pipeline with the same record (main could not pickle one)."""
    pipeline = PIPELINES[-len(PLACERS) - 1]
    described = dict(pipeline.describe())
    copied = copier(pipeline)
    assert copied == pipeline
    assert dict(copied.describe()) == described


def test_policy_is_a_policy_and_describe_is_its_table_as_text() -> None:
    """policy() is the configuration as a Policy (the pipeline's budget with it), whose
    table is a policy file's; describe() is that same table with each strategy as JSON
    text; building the policy gives the pipeline back."""
    pipeline = Pipeline(ScaledScorer(TagScorer({"x": 1.0})), QuotaSlice(
        GreedySlice(), [QuotaEntry("Memory", 5.0, 50.0)]), overflow_strategy="proceed",
        budget=BUDGET)
    policy = pipeline.policy()
    assert policy == Policy(scorer=ScaledScorer(TagScorer({"x": 1.0})), slicer=QuotaSlice(
        GreedySlice(), [QuotaEntry("Memory", 5.0, 50.0)]),
        overflow_strategy=OverflowStrategy.PROCEED, budget=BUDGET)
    table = policy.to_dict()
    assert {key: value for key, value in table.items() if key != "budget"} == {
        "deduplication": True, "overflow_strategy": "Proceed",
        "scorer": {"type": "scaled", "inner": {"type": "tag", "tag_weights": {"x": 1.0},
                                               "case_sensitive": False}},
        "slicer": {"type": "quota", "inner": {"type": "greedy"},
                   "quotas": [{"kind": "Memory", "require": 5.0, "cap": 50.0}]},
        "placer": {"type": "chronological"},
    }
    assert {key: json.loads(value) if isinstance(value, str) and key != "overflow_strategy"
            else value for key, value in pipeline.describe().items()} == {
        key: value for key, value in table.items() if key != "budget"}
    assert policy.build_pipeline() == pipeline
    assert Policy.from_dict(table).build_pipeline() == pipeline


@pytest.mark.parametrize("pipeline", PIPELINES, ids=repr)
def test_every_pipeline_of_built_ins_is_its_policy_and_its_record(pipeline: Pipeline) -> None:
    """For every built-in strategy: describe() is policy()'s table as the record's text
    (one form, two spellings), and the policy, its table and the record each build the
    pipeline back."""
    policy = pipeline.with_budget(BUDGET).policy()
    assert policy.budget == BUDGET
    table = policy.to_dict()
    assert dict(pipeline.describe()) == {
        "scorer": strategy_json(table["scorer"]), "slicer": strategy_json(table["slicer"]),
        "placer": strategy_json(table["placer"]), "deduplication": table["deduplication"],
        "overflow_strategy": table["overflow_strategy"]}
    assert list(pipeline.describe()) == ["scorer", "slicer", "placer", "deduplication",
                                         "overflow_strategy"]  # the record's wire order
    assert policy.build_pipeline() == Pipeline.from_policy(policy) == pipeline.with_budget(
        BUDGET)
    assert Pipeline.from_policy(pipeline.describe()) == pipeline


def test_from_policy_takes_a_policy_and_builds_what_build_pipeline_builds() -> None:
    """Pipeline.from_policy(policy) equals policy.build_pipeline() for every preset, with
    and without a budget: the policy's budget is the default one, budget= replaces it,
    and clock= reaches a wall-clock decay scorer as build_pipeline's does."""
    for name in PRESET_NAMES:
        preset = get_preset(name)
        for policy in (preset, preset.with_budget(BUDGET), preset.with_budget(None)):
            built = Pipeline.from_policy(policy)
            assert built == policy.build_pipeline()
            assert built.budget == policy.budget
            assert Pipeline.from_policy(policy, budget=OTHER_BUDGET) == (
                policy.build_pipeline(OTHER_BUDGET))
            assert Pipeline.from_policy(policy, budget=OTHER_BUDGET).budget == OTHER_BUDGET
    decaying = Policy(scorer=DecayScorer(ExponentialCurve(half_life=timedelta(hours=1)),
                                         clock=utc_now))
    rebuilt = Pipeline.from_policy(decaying, clock=MOMENT)
    assert rebuilt == decaying.build_pipeline(clock=MOMENT)
    assert isinstance(rebuilt.scorer, DecayScorer)
    assert rebuilt.scorer.clock == MOMENT


def _odd(item: ContextItem, items: Sequence[ContextItem]) -> float:
    return float(len(item.content) % 3)


class _FirstFits:
    """A user's own slicer and placer."""

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /
              ) -> list[ContextItem]:
        return [entry.item for entry in scored[:2]]

    def place(self, items: Sequence[ScoredItem], /) -> list[ContextItem]:
        return [entry.item for entry in items]

    def __repr__(self) -> str:
        return "_FirstFits(" + "x" * 300 + ")"


def test_custom_strategies_are_recorded_by_repr_and_cannot_be_rebuilt() -> None:
    """A FunctionScorer (even nested in a composite) and a user's slicer are recorded
    as {"type": "custom", "repr": ...} (200 characters at most), so the run reads like
    any other; rebuilding raises CustomStrategyError naming which strategy is custom."""
    nested = CompositeScorer([(RecencyScorer(), 1.0), (FunctionScorer(_odd, "odd"), 2.0)])
    pipeline = Pipeline(nested, _FirstFits(), _FirstFits())
    _window, started = _run_started(pipeline, _items())
    scorer = json.loads(str(started.pipeline["scorer"]))
    assert scorer["children"][1] == {"type": "custom", "weight": 2.0,
                                     "repr": "FunctionScorer(odd)"}
    slicer = json.loads(str(started.pipeline["slicer"]))
    assert slicer["type"] == "custom"
    assert len(slicer["repr"]) == 200
    assert slicer["repr"].endswith("...")
    with pytest.raises(CustomStrategyError) as caught:
        Pipeline.from_policy(started.pipeline)
    assert caught.value.field == "pipeline.scorer.children[1]"
    assert caught.value.value == "FunctionScorer(odd)"
    assert "custom strategy" in str(caught.value)
    with pytest.raises(CustomStrategyError) as caught:
        Pipeline.from_policy({**started.pipeline, "scorer": '{"type":"recency"}'})
    assert caught.value.field == "pipeline.slicer"
    with pytest.raises(CustomStrategyError, match=r"^scorer.children\[1\]: ") as caught:
        pipeline.policy()
    assert caught.value.value == "FunctionScorer(odd)"
    with pytest.raises(CustomStrategyError, match=r"^slicer: "):
        Pipeline(RecencyScorer(), _FirstFits()).policy()
    with pytest.raises(CustomStrategyError, match=r"^placer: "):
        Pipeline(RecencyScorer(), placer=_FirstFits()).policy()
    with pytest.raises(InvalidTypeError, match=r"^scorer.children\[1\]: "):
        Policy(scorer=nested)


def test_a_subclass_of_a_built_in_counts_as_custom() -> None:
    """A user's subclass may score differently from its parent, so it is recorded by
    its repr, not under the parent's type name."""

    class Louder(RecencyScorer):
        __slots__ = ()

        def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
            return [1.0 for _ in items]

    assert json.loads(str(Pipeline(Louder()).describe()["scorer"]))["type"] == "custom"


def test_a_wall_clock_decay_is_recorded_without_a_time_and_rebuilt_with_the_clock_given(
) -> None:
    """A decay scorer on the wall clock is recorded without reference_time; rebuilt
    with clock=FixedClock(started_at) it scores as the run did at that instant."""
    scorer = DecayScorer(ExponentialCurve(half_life=timedelta(hours=1)), clock=utc_now)
    pipeline = Pipeline(scorer)
    _window, started = _run_started(pipeline, _items())
    table = json.loads(str(started.pipeline["scorer"]))
    assert "reference_time" not in table
    rebuilt = Pipeline.from_policy(started.pipeline, clock=FixedClock(started.started_at))
    assert isinstance(rebuilt.scorer, DecayScorer)
    assert rebuilt.scorer.clock == FixedClock(started.started_at)
    assert Pipeline.from_policy(started.pipeline) == pipeline  # the wall clock again


def test_from_policy_refuses_damaged_or_old_records() -> None:
    """A record from before 0.3.0 (a repr), a missing or unknown key, and a bad value
    are refused naming the key; the budget argument becomes the pipeline's own."""
    good = dict(Pipeline(RecencyScorer()).describe())
    with pytest.raises(DecodeError, match=r"pipeline.scorer: .*repr"):
        Pipeline.from_policy({**good, "scorer": "RecencyScorer()"})
    with pytest.raises(ConfigurationError, match=r"pipeline.placer: is required"):
        Pipeline.from_policy({key: value for key, value in good.items() if key != "placer"})
    with pytest.raises(ConfigurationError, match=r"pipeline.budget: is not a known key"):
        Pipeline.from_policy({**good, "budget": "{}"})
    with pytest.raises(InvalidValueError, match=r"pipeline.overflow_strategy"):
        Pipeline.from_policy({**good, "overflow_strategy": "Explode"})
    with pytest.raises(InvalidTypeError, match=r"pipeline.deduplication"):
        Pipeline.from_policy({**good, "deduplication": "yes"})
    with pytest.raises(ConfigurationError, match=r"pipeline.slicer.bucket_size"):
        Pipeline.from_policy({**good, "slicer": '{"type":"knapsack","bucket_size":0}'})
    assert Pipeline.from_policy(good, budget=BUDGET).budget == BUDGET


def test_text_utf8_cannot_hold_is_recorded_with_escapes() -> None:
    """A setting holding a lone surrogate is written with \\u escapes (every sink can
    write the record), and the record still rebuilds the same scorer."""
    pipeline = Pipeline(MetadataKeyScorer("k\ud800", "v", 2.0))
    text = str(pipeline.describe()["scorer"])
    assert text.isascii()
    assert "\\ud800" in text
    assert Pipeline.from_policy(pipeline.describe()) == pipeline
    assert "é" in str(Pipeline(MetadataKeyScorer("clé", "v", 2.0)).describe()["scorer"])
