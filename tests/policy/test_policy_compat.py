"""Policies written by cupellation 0.2.0 still load, and the presets build the very
pipelines they built then (the policy layer now builds through the strategy
registry, with no description classes of its own)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cupellation import ContextBudget, ContextItem
from cupellation.policy import Policy, get_preset, load_policy, presets

#: Files that 0.2.0's Policy.to_toml() and to_json() wrote: the seven presets, a
#: policy using every scorer type nested, and one per count/knapsack slicer.
WRITTEN = Path(__file__).with_name("data") / "written-by-0.2.0"

#: What 0.2.0's build_pipeline gave for each preset: repr of scorer, slicer, placer.
PIPELINES_0_2_0 = {
    "Chat": ("CompositeScorer(children=[(RecencyScorer(), 3.0), (KindScorer(), 1.0)])",
             "GreedySlice()", "ChronologicalPlacer()"),
    "CodeReview": ("CompositeScorer(children=[(KindScorer(), 2.0), (PriorityScorer(), 2.0), "
                   "(RecencyScorer(), 1.0)])", "GreedySlice()", "ChronologicalPlacer()"),
    "Rag": ("CompositeScorer(children=[(ReflexiveScorer(), 3.0), (KindScorer(), 1.0)])",
            "GreedySlice()", "UShapedPlacer()"),
    "DocumentQa": ("CompositeScorer(children=[(KindScorer(), 2.0), (ReflexiveScorer(), 2.0), "
                   "(PriorityScorer(), 1.0)])", "KnapsackSlice(bucket_size=100)",
                   "UShapedPlacer()"),
    "ToolUse": ("CompositeScorer(children=[(KindScorer(), 2.0), (RecencyScorer(), 2.0), "
                "(PriorityScorer(), 1.0)])", "GreedySlice()", "ChronologicalPlacer()"),
    "LongRunning": ("CompositeScorer(children=[(RecencyScorer(), 3.0), (FrequencyScorer(), "
                    "1.0), (KindScorer(), 1.0)])", "GreedySlice()", "ChronologicalPlacer()"),
    "Debugging": ("CompositeScorer(children=[(PriorityScorer(), 3.0), (KindScorer(), 2.0), "
                  "(RecencyScorer(), 1.0)])", "GreedySlice()", "ChronologicalPlacer()"),
}

#: What each preset's pipeline included under 0.2.0 for _candidates() in (1000, 300).
INCLUDED_0_2_0 = {
    "Chat": ["c13", "c9", "c5", "c1"],
    "CodeReview": ["c7", "c10", "c5", "c1", "c4"],
    "Rag": ["c4", "c3", "c2", "c11"],
    "DocumentQa": ["c4", "c3", "c9"],
    "ToolUse": ["c10", "c2", "c13", "c5", "c1"],
    "LongRunning": ["c10", "c6", "c2", "c5", "c1", "c0"],
    "Debugging": ["c7", "c10", "c5", "c1", "c4"],
}


def _candidates() -> list[ContextItem]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    kinds = ["Message", "Document", "ToolOutput", "Memory", "SystemPrompt"]
    return [ContextItem(content=f"c{k}", tokens=40 + 13 * (k % 5), kind=kinds[k % 5],
                        priority=(k * 7) % 11 if k % 3 else None,
                        tags=("a",) if k % 2 else ("b", "c"),
                        timestamp=start + timedelta(minutes=k * 17 % 23) if k % 4 else None,
                        future_relevance_hint=(k % 6) / 5 if k % 5 else None)
            for k in range(14)]


@pytest.mark.parametrize("path", sorted(WRITTEN.iterdir()), ids=lambda path: path.name)
def test_a_policy_file_written_by_0_2_0_loads_and_writes_the_same_text(path: Path) -> None:
    """Every policy file 0.2.0 wrote (TOML and JSON: presets, every scorer type nested
    in composites and a scaled scorer, decay curves with durations, quota, count-quota
    and knapsack slicers, a budget) loads, and writing it again gives the same text:
    the table form of every strategy is unchanged."""
    text = path.read_text(encoding="utf-8")
    policy = load_policy(path)
    assert (policy.to_toml() if path.suffix == ".toml" else policy.to_json()) == text


@pytest.mark.parametrize("name", list(PIPELINES_0_2_0))
def test_each_preset_builds_the_pipeline_0_2_0_built(name: str) -> None:
    """A preset's pipeline has the scorer, slicer and placer 0.2.0 built (by repr),
    its table is the file 0.2.0 wrote, and it includes the same items in the same
    order for the same candidates."""
    policy = get_preset(name)
    pipeline = policy.build_pipeline(ContextBudget(1000, 300))
    assert (repr(pipeline.scorer), repr(pipeline.slicer), repr(pipeline.placer)) == (
        PIPELINES_0_2_0[name])
    assert policy.to_dict() == json.loads((WRITTEN / f"{name}.json").read_text("utf-8"))
    assert load_policy(WRITTEN / f"{name}.toml") == policy
    report = pipeline.dry_run(_candidates())
    assert [entry.item.content for entry in report.included] == INCLUDED_0_2_0[name]


def test_the_presets_are_the_seven_files() -> None:
    """Nothing was added to or dropped from the presets."""
    assert sorted(presets()) == sorted(PIPELINES_0_2_0)
    assert all(isinstance(policy, Policy) for policy in presets().values())
