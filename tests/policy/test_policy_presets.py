"""The seven presets: their documented definitions, lookup, and working pipelines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    KindScorer,
    OverflowStrategy,
)
from cupellation.exceptions import InvalidTypeError, InvalidValueError
from cupellation.placing import ChronologicalPlacer, UShapedPlacer
from cupellation.policy import PRESET_NAMES, get_preset, presets
from cupellation.slicing import GreedySlice, KnapsackSlice

#: The documented definitions (scorer type and weight, slicer, placer).
EXPECTED = {
    "Chat": ([("recency", 3.0), ("kind", 1.0)], GreedySlice(), ChronologicalPlacer()),
    "CodeReview": ([("kind", 2.0), ("priority", 2.0), ("recency", 1.0)], GreedySlice(),
                   ChronologicalPlacer()),
    "Rag": ([("reflexive", 3.0), ("kind", 1.0)], GreedySlice(), UShapedPlacer()),
    "DocumentQa": ([("kind", 2.0), ("reflexive", 2.0), ("priority", 1.0)],
                   KnapsackSlice(bucket_size=100), UShapedPlacer()),
    "ToolUse": ([("kind", 2.0), ("recency", 2.0), ("priority", 1.0)], GreedySlice(),
                ChronologicalPlacer()),
    "LongRunning": ([("recency", 3.0), ("frequency", 1.0), ("kind", 1.0)], GreedySlice(),
                    ChronologicalPlacer()),
    "Debugging": ([("priority", 3.0), ("kind", 2.0), ("recency", 1.0)], GreedySlice(),
                  ChronologicalPlacer()),
}


def test_there_are_exactly_the_seven_dotnet_presets_in_order() -> None:
    """presets() holds Chat, CodeReview, Rag, DocumentQa, ToolUse, LongRunning and
    Debugging, in that order, read-only."""
    assert list(presets()) == list(EXPECTED) == list(PRESET_NAMES)
    with pytest.raises(TypeError):
        presets()["Chat"] = presets()["Rag"]  # type: ignore[index]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_preset_matches_its_documented_definition(name: str) -> None:
    """Scorers and weights (in order), slicer, placer, deduplication on, Throw on
    overflow, default kind weights, no budget."""
    policy = presets()[name]
    scorers, slicer, placer = EXPECTED[name]
    assert policy.name == name
    assert policy.description
    assert isinstance(policy.scorer, CompositeScorer)
    assert [(type(child).type_name, weight)  # type: ignore[attr-defined]
            for child, weight in policy.scorer.children] == scorers
    for child, _weight in policy.scorer.children:
        if isinstance(child, KindScorer):
            assert child.to_dict() == {"type": "kind"}  # the default weights
    assert policy.slicer == slicer
    assert policy.placer == placer
    assert policy.deduplication is True
    assert policy.overflow_strategy is OverflowStrategy.THROW
    assert policy.budget is None


@pytest.mark.parametrize("spelling", ["CodeReview", "codereview", "CODEREVIEW", "code-review",
                                      "code_review", "Code Review"])
def test_preset_lookup_ignores_case_and_separators(spelling: str) -> None:
    """get_preset finds a preset whatever its case and separators."""
    assert get_preset(spelling) is presets()["CodeReview"]


def test_an_unknown_preset_lists_the_names_and_suggests_one() -> None:
    """An unknown name raises InvalidValueError with every preset name and the closest."""
    with pytest.raises(InvalidValueError) as caught:
        get_preset("debuging")
    message = str(caught.value)
    assert caught.value.field == "name"
    assert caught.value.value == "debuging"
    assert "did you mean `Debugging`?" in message
    for name in PRESET_NAMES:
        assert name in message
    with pytest.raises(InvalidTypeError):
        get_preset(3)  # type: ignore[arg-type]


def _candidates() -> list[ContextItem]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    items = [ContextItem("You are a helpful reviewer.", 20, kind="SystemPrompt", pinned=True)]
    for k in range(12):
        items.append(ContextItem(
            f"candidate {k}", 40 + 10 * (k % 3),
            kind=("Message", "Document", "ToolOutput", "Memory")[k % 4],
            priority=k % 5, tags=[f"t{k % 3}"], timestamp=start + timedelta(minutes=k),
            future_relevance_hint=(k % 7) / 7,
        ))
    return items


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_preset_builds_a_pipeline_that_selects_within_budget(name: str) -> None:
    """Every preset's pipeline runs: the pinned item is kept and the window fits
    the budget; the policy's settings reach the pipeline."""
    budget = ContextBudget(max_tokens=400, target_tokens=300)
    pipeline = get_preset(name).build_pipeline(budget)
    assert pipeline.budget == budget
    assert pipeline.deduplication is True
    assert pipeline.overflow_strategy is OverflowStrategy.THROW
    assert pipeline.slicer == EXPECTED[name][1]
    window = pipeline.run(_candidates())
    assert window[0].content == "You are a helpful reviewer." or any(i.pinned for i in window)
    assert sum(item.tokens for item in window) <= budget.target_tokens
    assert len(window) > 1
