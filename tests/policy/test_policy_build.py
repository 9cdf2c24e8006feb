"""Policies build the pipelines they describe, for every scorer, slicer and placer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    ContextKind,
    DecayScorer,
    KindScorer,
    OverflowStrategy,
    PriorityScorer,
    RecencyScorer,
    ScaledScorer,
    TagScorer,
)
from cupellation.placing import UShapedPlacer
from cupellation.policy import Policy, load_policy
from cupellation.scoring import ExponentialCurve, FixedClock, StepCurve, WindowCurve, utc_now
from cupellation.slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    QuotaEntry,
    QuotaSlice,
)

_EVERYTHING = """
name = "everything"
description = "every scorer once"
deduplication = false
overflow_strategy = "proceed"

[scorer]
type = "Composite"

[[scorer.children]]
type = "RecencyScorer"
weight = 1

[[scorer.children]]
type = "priority"
weight = 1

[[scorer.children]]
type = "kind"
weight = 1
weights = { Message = 0.5, ToolOutput = 1.0 }

[[scorer.children]]
type = "tag"
weight = 1
tag_weights = { urgent = 2.0, later = 0.5 }
case_sensitive = true

[[scorer.children]]
type = "frequency"
weight = 1

[[scorer.children]]
type = "reflexive"
weight = 1

[[scorer.children]]
type = "metadata-trust"
weight = 1
default_score = 0.25

[[scorer.children]]
type = "metadata_key"
weight = 1
key = "source"
value = "runbook"
boost = 2.5

[[scorer.children]]
type = "decay"
weight = 1
null_timestamp_score = 0.1
reference_time = 2026-01-02T00:00:00Z
[scorer.children.curve]
type = "step"
windows = [{ max_age = "1h", score = 1.0 }, { max_age = 86400, score = 0.5 }]

[[scorer.children]]
type = "scaled"
weight = 2
[scorer.children.inner]
type = "composite"
[[scorer.children.inner.children]]
type = "decay"
weight = 1
curve = { type = "exponential", half_life = "12h" }
[[scorer.children.inner.children]]
type = "decay"
weight = 1
curve = { type = "window", max_age = "2d" }

[slicer]
type = "quota"
[slicer.inner]
type = "count_quota"
entries = [{ kind = "ToolOutput", require_count = 1, cap_count = 2 }]
scarcity = "throw"
[[slicer.quotas]]
kind = "Message"
require = 10.0
cap = 60.0

[placer]
type = "UShapedPlacer"

[budget]
max_tokens = 1000
target_tokens = 800
output_reserve = 100
reserved_slots = { ToolOutput = 1 }
estimation_safety_margin_percent = 5.0
"""


def test_one_policy_can_use_every_scorer_nested_with_lenient_type_names() -> None:
    """A policy file with every scorer type (composites nested in a scaled scorer),
    class-style or dashed type names, and a native TOML datetime loads and builds."""
    policy = load_policy(_EVERYTHING)
    assert policy.name == "everything"
    assert policy.deduplication is False
    assert policy.overflow_strategy is OverflowStrategy.PROCEED
    assert policy.placer == UShapedPlacer()
    assert policy.slicer == QuotaSlice(
        CountQuotaSlice(GreedySlice(), [CountQuotaEntry("ToolOutput", 1, cap_count=2)],
                        "Throw"),
        [QuotaEntry("Message", 10.0, 60.0)],
    )
    assert policy.budget == ContextBudget(1000, 800, 100, {"ToolOutput": 1}, 5.0)
    pipeline = policy.build_pipeline()
    scorer = pipeline.scorer
    assert isinstance(scorer, CompositeScorer)
    assert [type(child).__name__ for child in scorer.scorers] == [
        "RecencyScorer", "PriorityScorer", "KindScorer", "TagScorer", "FrequencyScorer",
        "ReflexiveScorer", "MetadataTrustScorer", "MetadataKeyScorer", "DecayScorer",
        "ScaledScorer",
    ]
    assert isinstance(scorer.scorers[2], KindScorer)
    assert scorer.scorers[2].weights == {ContextKind("Message"): 0.5,
                                         ContextKind("ToolOutput"): 1.0}
    assert isinstance(scorer.scorers[3], TagScorer)
    assert scorer.scorers[3].case_sensitive is True
    assert scorer.children[-1][1] == 2.0
    assert isinstance(scorer.scorers[-1], ScaledScorer)
    assert pipeline.budget == policy.budget
    assert load_policy(policy.to_toml()) == policy


def test_a_decay_reference_time_fixes_the_clock_and_otherwise_the_given_clock_is_used() -> None:
    """With reference_time the decay scorer measures ages from it; without one,
    build_pipeline's clock (or the wall clock) is used."""
    moment = datetime(2026, 1, 2, tzinfo=UTC)
    item = ContextItem("x", 1, timestamp=moment - timedelta(hours=1))
    fixed = DecayScorer(ExponentialCurve(half_life=timedelta(hours=1)),
                        clock=FixedClock(moment))
    scorer = Policy(scorer=fixed).build_pipeline().scorer
    assert isinstance(scorer, DecayScorer)
    assert scorer.score_all([item]) == [0.5]
    scorer = Policy(scorer=fixed).build_pipeline(clock=utc_now).scorer
    assert scorer.score_all([item]) == [0.5]  # the reference time still wins
    free = DecayScorer(ExponentialCurve(half_life=timedelta(hours=1)), clock=utc_now)
    scorer = Policy(scorer=free).build_pipeline(
        clock=lambda: moment + timedelta(hours=1)).scorer
    assert isinstance(scorer, DecayScorer)
    assert scorer.score_all([item]) == [0.25]
    rebuilt = Policy(scorer=free).build_pipeline().scorer
    assert isinstance(rebuilt, DecayScorer)
    assert rebuilt.clock is utc_now


def test_the_budget_argument_overrides_the_policy_budget() -> None:
    """build_pipeline(budget) wins over the policy's budget; without either the
    pipeline has none."""
    own = ContextBudget(100, 50)
    other = ContextBudget(200, 100)
    policy = Policy(scorer=RecencyScorer(), budget=own)
    assert policy.build_pipeline().budget == own
    assert policy.build_pipeline(other).budget == other
    assert Policy(scorer=RecencyScorer()).build_pipeline().budget is None
    assert policy.with_budget(None).budget is None


def test_python_built_policies_equal_their_file_form() -> None:
    """A policy made in Python equals the same policy read from JSON and TOML text."""
    policy = Policy(
        scorer=DecayScorer(StepCurve(windows=[(timedelta(hours=1), 1.0),
                                              (timedelta(days=1), 0.5)]),
                           clock=utc_now, null_timestamp_score=0.0),
        slicer=CountConstrainedKnapsackSlice([CountQuotaEntry("Tool", 1, cap_count=3)], 50),
        overflow_strategy="truncate",  # type: ignore[arg-type]
    )
    assert Policy.from_json(policy.to_json()) == policy
    assert Policy.from_toml(policy.to_toml()) == policy
    assert '"max_age": "1h"' in policy.to_json()
    assert policy.overflow_strategy is OverflowStrategy.TRUNCATE


def test_defaults_fill_in_what_a_minimal_policy_leaves_out() -> None:
    """Only the scorer is required: greedy, chronological, deduplication, Throw."""
    policy = load_policy('{"scorer": {"type": "priority"}}')
    assert policy == Policy(scorer=PriorityScorer())
    assert policy.to_dict() == {
        "deduplication": True, "overflow_strategy": "Throw", "scorer": {"type": "priority"},
        "slicer": {"type": "greedy"}, "placer": {"type": "chronological"},
    }


@pytest.mark.parametrize(("suffix", "writer"), [(".toml", "to_toml"), (".json", "to_json"),
                                                (".policy", "to_toml"), (".txt", "to_json")])
def test_files_are_read_by_suffix_or_by_content(tmp_path: Path, suffix: str,
                                                writer: str) -> None:
    """A file's format comes from its suffix, else from its content."""
    policy = Policy(scorer=KindScorer({"Memory": 1.0}), placer=UShapedPlacer())
    path = tmp_path / f"p{suffix}"
    path.write_text(getattr(policy, writer)(), encoding="utf-8")
    assert load_policy(path) == policy
    assert load_policy(str(path)) == policy


def test_kind_weights_compare_ignoring_case_but_keep_their_spelling() -> None:
    """Kind names in weights are matched case-insensitively and written as given."""
    a = Policy(scorer=KindScorer({"toolOutput": 1.0}))
    b = Policy(scorer=KindScorer({"ToolOutput": 1.0}))
    assert a == b
    assert a.to_dict()["scorer"]["weights"] == {"toolOutput": 1.0}


def test_a_policy_holds_the_strategies_it_builds() -> None:
    """The pipeline a policy builds uses the policy's own (immutable) strategies, and a
    window curve survives the trip through a file."""
    policy = Policy(scorer=DecayScorer(WindowCurve(max_age=timedelta(days=2)), clock=utc_now))
    assert policy.build_pipeline().scorer is policy.scorer
    assert load_policy(policy.to_toml()) == policy
    assert policy.to_dict()["scorer"]["curve"] == {"type": "window", "max_age": "2d"}


def test_long_one_line_texts_are_read_as_text_not_paths(tmp_path: Path) -> None:
    """A one-line policy longer than a file name may be is text (no OSError), and a
    path ending in .toml is a path even with '=' in it."""
    text = ('scorer = {type = "tag", tag_weights = {'
            + ", ".join(f"a{k} = 1.0" for k in range(60)) + "}}")
    assert len(text) > 300
    assert isinstance(load_policy(text).scorer, TagScorer)
    folder = tmp_path / "a=b"
    folder.mkdir()
    path = folder / "p.toml"
    path.write_text(Policy(scorer=RecencyScorer()).to_toml(), encoding="utf-8")
    assert load_policy(str(path)) == Policy(scorer=RecencyScorer())
