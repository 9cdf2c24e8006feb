"""The exclusion and inclusion reasons are pure functions of small values: called
directly, without a pipeline or a collector, they explain what a stage decided."""

from __future__ import annotations

from cupellation import ContextBudget, ContextItem, ContextKind
from cupellation._attribution import (
    Merged,
    Pinned,
    Ranked,
    Sliced,
    deduplicated,
    inclusions,
    slice_exclusions,
    truncation_exclusions,
)
from cupellation.reasons import (
    BudgetExceeded,
    CountCapExceeded,
    Deduplicated,
    InclusionReason,
    PinnedOverride,
)
from cupellation.slicing import SliceOutcome


def _ranked(items: list[ContextItem]) -> Ranked:
    return Ranked(items=items, scores=[1.0 - k / 10 for k in range(len(items))],
                  tokens=[item.tokens for item in items], order=list(range(len(items))),
                  scoreable_idx=[10 + k for k in range(len(items))])


def test_slice_exclusions_tell_budget_count_cap_and_pinned_apart() -> None:
    """Left out by the slicer: a kind at its cap (and otherwise fitting) is
    CountCapExceeded, an item over the target only because of the pinned items is
    PinnedOverride naming the pinned item that pushed it out, the rest
    BudgetExceeded with the room the stage had left; candidate indices and scores
    come from the ranked order."""
    budget = ContextBudget(max_tokens=200, target_tokens=100)
    pins = [ContextItem("p1", 20, pinned=True), ContextItem("p2", 30, pinned=True)]
    pinned = Pinned(items=pins, indices=[0, 1], tokens=50, budget=budget)
    items = [ContextItem("t1", 10, kind="ToolOutput"), ContextItem("t2", 10, kind="ToolOutput"),
             ContextItem("big", 70), ContextItem("huge", 150)]
    outcome = SliceOutcome(selected=(items[0],), count_caps=((ContextKind("ToolOutput"), 1),))
    sliced = Sliced(outcome=outcome, chosen=[0], tokens=10, effective=budget.effective(50))
    decisions = slice_exclusions(_ranked(items), sliced, pinned)
    assert list(decisions.indices) == [11, 12, 13]
    assert [item.content for item in decisions.items] == ["t2", "big", "huge"]
    assert list(decisions.scores) == [0.9, 0.8, 0.7]
    assert list(decisions.reasons) == [
        CountCapExceeded(kind="ToolOutput", cap=1, count=1),
        PinnedOverride(displaced_by=1),  # 100 - 20 = 80 still held 70; 100 - 50 did not
        BudgetExceeded(item_tokens=150, available_tokens=40),
    ]
    assert decisions.positions is None


def test_truncation_exclusions_read_the_final_state() -> None:
    """Removed by Truncate: PinnedOverride when the item fits beside the kept sliced
    items but for the pinned ones, else BudgetExceeded against the kept total."""
    budget = ContextBudget(max_tokens=200, target_tokens=60)
    pins = [ContextItem("p", 40, pinned=True)]
    pinned = Pinned(items=pins, indices=[4], tokens=40, budget=budget)
    merged = Merged(items=[pins[0], ContextItem("a", 15), ContextItem("b", 30),
                           ContextItem("c", 50)],
                    scores=[1.0, 0.9, 0.8, 0.7], indices=[4, 0, 1, 2], tokens=135)
    decisions = truncation_exclusions(merged, removed=[2, 3], kept_tokens=55, pinned_kept=40,
                                      pinned=pinned)
    assert list(decisions.indices) == [1, 2]
    assert list(decisions.reasons) == [PinnedOverride(displaced_by=4),
                                       BudgetExceeded(item_tokens=50, available_tokens=5)]


def test_deduplicated_names_the_survivor_by_candidate_index() -> None:
    """Each duplicate names the candidate index of the item that kept its content."""
    items = [ContextItem("x", 1), ContextItem("y", 1), ContextItem("x", 1)]
    decisions = deduplicated(items, [3, 5, 7], [0.2, 0.5, 0.9], {"x": 2, "y": 1})
    assert list(decisions.indices) == [3]
    assert list(decisions.reasons) == [Deduplicated(deduplicated_against=7)]


def test_inclusions_mark_pinned_zero_token_and_scored_items_in_final_order() -> None:
    """Placed items carry their final positions; pinned ones are Pinned, zero-token
    ones ZeroToken (reported with score 0.0), the rest Scored with their score."""
    pin, zero, plain = (ContextItem("p", 5, pinned=True), ContextItem("z", 0),
                        ContextItem("s", 5))
    merged = Merged(items=[pin, zero, plain], scores=[1.0, 0.4, 0.6], indices=[2, 0, 1],
                    tokens=10)
    decisions = inclusions([plain, pin, zero], where=[2, 0, 1], merged=merged, pinned_count=1)
    assert list(decisions.indices) == [1, 2, 0]
    assert list(decisions.scores) == [0.6, 1.0, 0.0]
    assert list(decisions.reasons) == [InclusionReason.SCORED, InclusionReason.PINNED,
                                       InclusionReason.ZERO_TOKEN]
    assert decisions.positions is not None
    assert list(decisions.positions) == [0, 1, 2]
