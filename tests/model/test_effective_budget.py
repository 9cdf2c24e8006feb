"""The effective budget is COMPUTE-EFFECTIVE-BUDGET of the specification snapshot
(spec/src/pipeline/slice.md and data-model/context-budget.md at wollax/cupel 0b82dad):
the reserved slots' sum is subtracted from both values, then the safety margin
scales them (floors), and the target is clamped to the max."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cupellation import ContextBudget, ContextItem, Pipeline, PriorityScorer
from cupellation.reasons import BudgetExceeded, PinnedOverride


def compute_effective_budget(max_tokens: int, target_tokens: int, output_reserve: int,
                             reserved_slots: dict[str, int], margin: float,
                             pinned_tokens: int) -> tuple[int, int]:
    """COMPUTE-EFFECTIVE-BUDGET of the snapshot's pipeline/slice.md, line by line."""
    reserved_tokens = sum(reserved_slots.values())
    effective_max = max(0, max_tokens - output_reserve - pinned_tokens - reserved_tokens)
    effective_target = max(0, target_tokens - pinned_tokens - reserved_tokens)
    effective_target = min(effective_target, effective_max)
    if margin > 0:
        multiplier = 1.0 - margin / 100.0
        effective_max = math.floor(effective_max * multiplier)
        effective_target = math.floor(effective_target * multiplier)
        effective_target = min(effective_target, effective_max)
    return effective_max, effective_target


def test_the_issue_example_is_630_tokens() -> None:
    """max 1000, target 800, reservedSlots {Message: 100}, margin 10%: 900/700 after
    the reserved tokens, then 90% of each, so the slicer aims at 630 tokens (810 max).
    The result carries only maxTokens and targetTokens (the chapter's conformance note)."""
    budget = ContextBudget(1000, 800, reserved_slots={"Message": 100},
                           estimation_safety_margin_percent=10.0)
    assert budget.reserved_tokens == 100
    effective = budget.effective(0)
    assert (effective.max_tokens, effective.target_tokens) == (810, 630)
    assert effective.output_reserve == 0
    assert dict(effective.reserved_slots) == {}
    assert effective.estimation_safety_margin_percent == 0.0


@pytest.mark.parametrize(("max_tokens", "target", "reserve", "pinned"), [
    (1000, 800, 0, 0),
    (1000, 800, 100, 0),
    (1000, 800, 100, 150),
    (1000, 1000, 300, 50),     # the target is clamped to the max
    (1000, 800, 0, 800),       # pinned tokens take the whole target
    (1000, 800, 200, 900),     # and more than the max
    (0, 0, 0, 0),
])
@pytest.mark.parametrize(("slots", "margin"), [
    ({}, 0.0), ({"Message": 3, "ToolOutput": 40}, 0.0), ({}, 12.5), ({"Memory": 7}, 100.0),
    ({"Message": 600, "Document": 500}, 5.0),   # reserved slots beyond the whole budget
    ({"Message": 37}, 33.3),
])
def test_effective_budget_is_compute_effective_budget(
        max_tokens: int, target: int, reserve: int, pinned: int,
        slots: dict[str, int], margin: float) -> None:
    """effective() equals the pseudocode for every combination of output reserve,
    pinned tokens, reserved slots and safety margin, and is in every respect (equality,
    hash, repr, JSON) the budget ``ContextBudget(max_tokens, target_tokens)`` makes."""
    budget = ContextBudget(max_tokens, target, output_reserve=reserve, reserved_slots=slots,
                           estimation_safety_margin_percent=margin)
    effective = budget.effective(pinned)
    assert (effective.max_tokens, effective.target_tokens) == compute_effective_budget(
        max_tokens, target, reserve, slots, margin, pinned)
    # Made without the constructor's checks, it is the budget the constructor makes.
    made = ContextBudget(effective.max_tokens, effective.target_tokens)
    assert (effective, hash(effective), repr(effective), effective.to_dict()) == (
        made, hash(made), repr(made), made.to_dict())


@given(max_tokens=st.integers(0, 10**7), target_share=st.floats(0, 1),
       reserve_share=st.floats(0, 1), pinned=st.integers(0, 10**7),
       slots=st.dictionaries(st.sampled_from(["Message", "Document", "Memory"]),
                             st.integers(0, 10**6), max_size=3),
       margin=st.floats(0, 100))
def test_effective_budget_matches_the_pseudocode_on_generated_budgets(
        max_tokens: int, target_share: float, reserve_share: float, pinned: int,
        slots: dict[str, int], margin: float) -> None:
    """For any valid budget the result is the pseudocode's, and the target never
    exceeds the max."""
    target = int(max_tokens * target_share)
    reserve = int(max_tokens * reserve_share)
    budget = ContextBudget(max_tokens, target, output_reserve=reserve, reserved_slots=slots,
                           estimation_safety_margin_percent=margin)
    effective = budget.effective(pinned)
    assert (effective.max_tokens, effective.target_tokens) == compute_effective_budget(
        max_tokens, target, reserve, slots, margin, pinned)
    assert 0 <= effective.target_tokens <= effective.max_tokens


def test_the_pipeline_slices_to_the_effective_target_and_reports_what_was_left() -> None:
    """The run of the issue's example: candidates of 300, 300 and 100 tokens against
    max 1000, target 800, reserved {Message: 100}, margin 10%. The slicer's target is
    630, so the third item no longer fits, and its BudgetExceeded says 30 tokens were
    available (630 - 600), not the 100 that ignoring the reserved slots and the margin
    would give (800 - 700)."""
    budget = ContextBudget(1000, 800, reserved_slots={"Message": 100},
                           estimation_safety_margin_percent=10.0)
    items = [ContextItem(content="a", tokens=300, priority=3),
             ContextItem(content="b", tokens=300, priority=2),
             ContextItem(content="c", tokens=100, priority=1)]
    report = Pipeline(scorer=PriorityScorer()).dry_run(items, budget)
    assert sorted(entry.item.content for entry in report.included) == ["a", "b"]
    assert [(entry.item.content, entry.reason) for entry in report.excluded] == [
        ("c", BudgetExceeded(item_tokens=100, available_tokens=30))]
    assert report.is_complete


def test_pinned_override_follows_the_effective_target_with_reserved_slots_and_margin() -> None:
    """PinnedOverride at Slice compares with the effective target with and without the
    pinned items, both through COMPUTE-EFFECTIVE-BUDGET. max 1000, target 800,
    reserved 100, margin 50%: with nothing pinned the target is 350; with 200 pinned
    tokens (two pins of 100) it is 250. A 300-token item is then over the target only
    because of the pins, and the pin that displaced it is the first one after which
    the target fell below 300 (after the first pin it is 300, still enough; after the
    second, 250) — the second pin, found on the effective target, not on raw tokens."""
    budget = ContextBudget(1000, 800, reserved_slots={"Message": 100},
                           estimation_safety_margin_percent=50.0)
    assert budget.effective(0).target_tokens == 350
    assert budget.effective(100).target_tokens == 300
    assert budget.effective(200).target_tokens == 250
    items = [ContextItem(content="pin one", tokens=100, pinned=True),
             ContextItem(content="pin two", tokens=100, pinned=True),
             ContextItem(content="wide", tokens=300, priority=5),
             ContextItem(content="huge", tokens=400, priority=4)]
    report = Pipeline(scorer=PriorityScorer()).dry_run(items, budget)
    reasons = {entry.item.content: entry.reason for entry in report.excluded}
    assert reasons["wide"] == PinnedOverride(displaced_by="pin two")
    assert reasons["huge"] == BudgetExceeded(item_tokens=400, available_tokens=250)
