"""Every JSON example of the seeds (vendored in tests/data/seeds) is read and written
back to the letter: the reason envelopes, the items, the included and excluded entries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cupellation import ContextItem, SelectionReport
from cupellation.reasons import (
    BudgetExceeded,
    Deduplicated,
    ExclusionReason,
    Filtered,
    InclusionReason,
    NegativeTokens,
    QuotaCapExceeded,
    QuotaRequireDisplaced,
    ScoredTooLow,
    exclusion_reason_from_dict,
    inclusion_reason_from_dict,
    reason_to_dict,
)

from .conftest import SEEDS_DIR

EXCLUSION_EXAMPLES: dict[str, ExclusionReason] = {
    "exclusion_reason_budget_exceeded.json": BudgetExceeded(item_tokens=2048,
                                                            available_tokens=512),
    "exclusion_reason_deduplicated.json": Deduplicated(deduplicated_against="tool_output_abc123"),
    "exclusion_reason_negative_tokens.json": NegativeTokens(tokens=-1),
    "exclusion_reason_scored_too_low.json": ScoredTooLow(score=0.12, threshold=0.25),
    "exclusion_reason_quota_cap_exceeded.json": QuotaCapExceeded(kind="ToolOutput", cap=3,
                                                                 actual=4),
    "exclusion_reason_quota_require_displaced.json": QuotaRequireDisplaced(
        displaced_by_kind="SystemPrompt"),
    "exclusion_reason_filtered.json": Filtered(filter_name="max_age_filter"),
}


def _fixture(name: str) -> Any:
    return json.loads((SEEDS_DIR / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(EXCLUSION_EXAMPLES))
def test_each_exclusion_reason_example_decodes_to_its_variant_and_back(name: str) -> None:
    """Each of the seven exclusion reason examples decodes to the variant with the
    example's values, and encodes back to the identical envelope."""
    wire = _fixture(name)
    reason = exclusion_reason_from_dict(wire)
    assert reason == EXCLUSION_EXAMPLES[name]
    assert reason_to_dict(reason) == wire


def test_the_inclusion_reason_example_is_scored() -> None:
    """The inclusion reason example is the shared Scored constant, and encodes back to
    the envelope with the discriminator alone."""
    wire = _fixture("inclusion_reason_scored.json")
    assert inclusion_reason_from_dict(wire) is InclusionReason.SCORED
    assert reason_to_dict(InclusionReason.SCORED) == wire == {"reason": "Scored"}


def test_every_item_of_the_examples_round_trips_as_a_context_item() -> None:
    """The seven items of the SelectionReport examples decode as ContextItems and
    encode back to the identical objects (defaults omitted, camelCase)."""
    items = _fixture("context_items.json")
    assert len(items) == 7
    for wire in items:
        assert ContextItem.from_dict(wire).to_dict() == wire


def test_the_included_and_excluded_entry_examples_round_trip_in_a_report() -> None:
    """The IncludedItem example and both ExcludedItem examples, put in one report
    whose totals follow the chapter's rules, come back out of it to the letter."""
    included = _fixture("included_item_scored.json")
    excluded = [_fixture("excluded_item_budget_exceeded.json"),
                _fixture("excluded_item_deduplicated.json")]
    wire = {"events": [], "included": [included], "excluded": excluded,
            "total_candidates": 3,
            "total_tokens_considered": sum(entry["item"]["tokens"]
                                           for entry in [included, *excluded])}
    report = SelectionReport.from_dict(wire)
    assert [entry.score for entry in report.excluded] == [0.60, 0.40]
    assert report.to_dict() == wire
