"""The pipeline's budget checks and exclusion reasons follow the specification's rules
exactly (pipeline/classify.md, pipeline/slice.md, diag-pinned-override.toml, and the
reference implementations' CountCapExceeded rule)."""

from __future__ import annotations

from typing import Any

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    CountQuotaSlice,
    GreedySlice,
    Pipeline,
    PriorityScorer,
)
from cupellation.exceptions import PinnedBudgetError, ScorerError
from cupellation.reasons import BudgetExceeded, CountCapExceeded, PinnedOverride
from cupellation.scoring import FunctionScorer
from cupellation.slicing import CountQuotaEntry


def _reasons(pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget
             ) -> dict[str, Any]:
    return {x.item.content: x.reason for x in pipeline.dry_run(items, budget).excluded}


def test_pinned_override_only_when_the_pins_pushed_the_item_over_the_target() -> None:
    """PinnedOverride: over the effective target, and not over the effective target with
    nothing pinned. An item that fits the effective target but lost to higher scores is
    BudgetExceeded, even though it would have fitted had nothing been pinned."""
    budget = ContextBudget(max_tokens=100, target_tokens=60)
    items = [ContextItem(content="pin", tokens=30, pinned=True),
             ContextItem(content="first", tokens=25, priority=9),
             ContextItem(content="second", tokens=25, priority=8),
             ContextItem(content="wide", tokens=40, priority=7),
             ContextItem(content="huge", tokens=70, priority=6)]
    reasons = _reasons(Pipeline(scorer=PriorityScorer()), items, budget)
    assert reasons["wide"] == PinnedOverride(displaced_by="pin")
    assert reasons["huge"] == BudgetExceeded(item_tokens=70, available_tokens=5)
    assert reasons["second"] == BudgetExceeded(item_tokens=25, available_tokens=5)


def test_the_pinned_check_ignores_reserved_slots() -> None:
    """Classify compares pinned tokens with maxTokens - outputReserve only: reserved
    slots do not make a pinned set that fits raise PinnedBudgetError."""
    budget = ContextBudget(max_tokens=100, target_tokens=90, output_reserve=10,
                           reserved_slots={"Message": 50})
    pinned = [ContextItem(content="big pin", tokens=85, pinned=True)]
    report = Pipeline(scorer=PriorityScorer()).dry_run(pinned, budget)
    assert [x.item.content for x in report.included] == ["big pin"]
    with pytest.raises(PinnedBudgetError):
        Pipeline(scorer=PriorityScorer()).run(
            [ContextItem(content="too big", tokens=91, pinned=True)], budget)


def test_count_cap_exclusions_follow_the_reference_rule() -> None:
    """An item left out whose kind is at its cap and which fits the effective target is
    CountCapExceeded(kind, cap, count); one that does not fit is BudgetExceeded, and no
    item is BudgetExceeded while its tokens fit the available tokens."""
    slicer = CountQuotaSlice(GreedySlice(), [CountQuotaEntry("ToolOutput", cap_count=1)])
    budget = ContextBudget(max_tokens=200, target_tokens=100)
    items = [ContextItem(content="tool 1", tokens=10, kind="ToolOutput", priority=9),
             ContextItem(content="tool 2", tokens=10, kind="ToolOutput", priority=8),
             ContextItem(content="tool 3", tokens=150, kind="ToolOutput", priority=7),
             ContextItem(content="message", tokens=20, priority=1)]
    report = Pipeline(scorer=PriorityScorer(), slicer=slicer).dry_run(items, budget)
    reasons = {x.item.content: x.reason for x in report.excluded}
    assert reasons["tool 2"] == CountCapExceeded(kind="ToolOutput", cap=1, count=1)
    assert reasons["tool 3"] == BudgetExceeded(item_tokens=150, available_tokens=70)
    for entry in report.excluded:
        if isinstance(entry.reason, BudgetExceeded):
            assert entry.reason.item_tokens > entry.reason.available_tokens


def test_a_score_beyond_float64_is_a_scorer_error() -> None:
    """A custom scorer returning a number float64 cannot hold raises ScorerError naming
    the scorer, not OverflowError from deep inside."""
    scorer = FunctionScorer(lambda item, items: 10**400)
    with pytest.raises(ScorerError, match="float64"):
        Pipeline(scorer=scorer).run([ContextItem(content="x", tokens=1)],
                                    ContextBudget(max_tokens=10, target_tokens=5))


def test_a_capped_item_the_inner_slicer_dropped_is_still_count_cap_exceeded() -> None:
    """When the inner slicer dropped an item for budget before the cap was weighed, the
    kind still sits at its cap and the item fits the target: CountCapExceeded, not a
    BudgetExceeded whose item_tokens exceed available_tokens only by accident."""
    slicer = CountQuotaSlice(GreedySlice(), [CountQuotaEntry("ToolOutput", require_count=1,
                                                             cap_count=1)])
    budget = ContextBudget(max_tokens=800, target_tokens=450)
    items = [ContextItem(content="diff", tokens=300, kind="Document", priority=5),
             ContextItem(content="failed log", tokens=120, kind="ToolOutput", priority=8),
             ContextItem(content="lint log", tokens=60, kind="ToolOutput", priority=1),
             ContextItem(content="note", tokens=20, priority=9)]
    report = Pipeline(scorer=PriorityScorer(), slicer=slicer).dry_run(items, budget)
    reasons = {x.item.content: x.reason for x in report.excluded}
    assert reasons == {"lint log": CountCapExceeded(kind="ToolOutput", cap=1, count=1)}
