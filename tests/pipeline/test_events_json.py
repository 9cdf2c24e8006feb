"""Events and reasons: their JSON form, lenient decoding and type-aware equality."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from cupellation import ContextBudget, ContextItem, DecodeError
from cupellation._events import (
    EVENT_SCHEMA_VERSION,
    CountShortfall,
    ItemExcluded,
    ItemIncluded,
    Overflow,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    UnknownEvent,
    event_from_json,
    event_to_json,
)
from cupellation._reasons import (
    RESERVED_EXCLUSION_REASONS,
    BudgetExceeded,
    CountCapExceeded,
    Deduplicated,
    ExclusionReason,
    Filtered,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
    QuotaCapExceeded,
    QuotaRequireDisplaced,
    ScoredTooLow,
    UnknownExclusionReason,
    exclusion_reason_from_json,
    exclusion_reason_to_json,
    inclusion_reason_from_json,
)

ITEM = ContextItem("hello", 12, kind="Document", tags=("a",),
                   timestamp=datetime(2024, 5, 1, 12, 30, 15, 250, tzinfo=UTC))
BUDGET = ContextBudget(1000, 800, output_reserve=50, reserved_slots={"Message": 1})

ALL_EVENTS: list[PipelineEvent] = [
    RunStarted("r1", datetime(2024, 1, 2, tzinfo=UTC), BUDGET,
               {"scorer": "RecencyScorer()", "deduplication": True}, 3, 42,
               "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"),
    StageCompleted("r1", PipelineStage.SCORE, 1.25, 3, 3),
    ItemExcluded("r1", PipelineStage.SLICE, 2, ITEM, 0.5, BudgetExceeded(12, 3)),
    ItemIncluded("r1", 0, 0, ITEM, 1.0, InclusionReason.PINNED),
    Overflow("r1", 17, (0, 2), BUDGET),
    CountShortfall("r1", "tool", 3, 1),
    RunCompleted("r1", 4.5, 2, 30, 1),
    RunFailed("r1", PipelineStage.PLACE, "BudgetOverflowError", "too big", 2.0),
    RunFailed("r1", None, "InvalidTypeError", "bad candidate", 0.1),
]

SPEC_EXCLUSIONS: list[tuple[ExclusionReason, dict[str, Any]]] = [
    (BudgetExceeded(2048, 512),
     {"reason": "BudgetExceeded", "item_tokens": 2048, "available_tokens": 512}),
    (ScoredTooLow(0.12, 0.25), {"reason": "ScoredTooLow", "score": 0.12, "threshold": 0.25}),
    (Deduplicated("tool_output_abc123"),
     {"reason": "Deduplicated", "deduplicated_against": "tool_output_abc123"}),
    (QuotaCapExceeded("ToolOutput", 3, 4),
     {"reason": "QuotaCapExceeded", "kind": "ToolOutput", "cap": 3, "actual": 4}),
    (QuotaRequireDisplaced("SystemPrompt"),
     {"reason": "QuotaRequireDisplaced", "displaced_by_kind": "SystemPrompt"}),
    (NegativeTokens(-1), {"reason": "NegativeTokens", "tokens": -1}),
    (PinnedOverride("system prompt"),
     {"reason": "PinnedOverride", "displaced_by": "system prompt"}),
    (Filtered("max_age_filter"), {"reason": "Filtered", "filter_name": "max_age_filter"}),
]


@pytest.mark.parametrize("event", ALL_EVENTS, ids=lambda e: type(e).__name__)
def test_every_event_type_round_trips_through_json(event: PipelineEvent) -> None:
    """Encoding an event to JSON text and decoding it gives an equal event, with
    the schema version and type discriminator written on it."""
    wire = json.loads(json.dumps(event_to_json(event)))
    assert wire["schema"] == EVENT_SCHEMA_VERSION
    assert wire["type"] == event.type
    assert event_from_json(wire) == event


def test_unknown_event_type_is_kept_and_reencodes_unchanged() -> None:
    """An event type from a newer version becomes an UnknownEvent holding its
    data (kept, not skipped) and encodes back to the same JSON."""
    wire = {"schema": 7, "type": "stage_retried", "run_id": "r9", "attempt": 2,
            "detail": {"why": "x"}}
    event = event_from_json(wire)
    assert isinstance(event, UnknownEvent)
    assert event.type == "stage_retried"
    assert event.data["attempt"] == 2
    assert event_to_json(event) == wire


def test_unknown_stage_and_unknown_fields_do_not_fail() -> None:
    """A stage name this version does not know is kept as a string, and
    unknown fields are ignored."""
    wire = {"schema": 1, "type": "stage_completed", "run_id": "r", "stage": "Rerank",
            "duration_ms": 0.5, "items_in": 4, "items_out": 2, "gpu": "none"}
    event = event_from_json(wire)
    assert isinstance(event, StageCompleted)
    assert event.stage == "Rerank"
    assert event_to_json(event)["stage"] == "Rerank"


@pytest.mark.parametrize("missing", ["duration_ms", "items_in", "run_id", "type"])
def test_missing_known_field_raises_decode_error_naming_it(missing: str) -> None:
    """A known event type without one of its fields is damage, reported with the field."""
    wire: dict[str, Any] = {"schema": 1, "type": "stage_completed", "run_id": "r",
                            "stage": "Score", "duration_ms": 0.5, "items_in": 4,
                            "items_out": 2}
    del wire[missing]
    with pytest.raises(DecodeError, match=missing) as info:
        event_from_json(wire)
    assert info.value.field == missing


def test_mistyped_field_raises_decode_error_with_value() -> None:
    """A boolean where a count belongs is rejected with the field and the value."""
    wire = {"schema": 1, "type": "count_shortfall", "run_id": "r", "kind": "tool",
            "required_count": True, "satisfied_count": 1}
    with pytest.raises(DecodeError, match="required_count") as info:
        event_from_json(wire)
    assert info.value.value is True


def test_event_equality_is_type_aware() -> None:
    """Two event types with field-for-field equal tuples are still different events."""
    a = RunCompleted("r", 1.0, 2, 3, 4)
    assert a == RunCompleted("r", 1.0, 2, 3, 4)
    assert a != ("r", 1.0, 2, 3, 4)
    assert hash(a) == hash(RunCompleted("r", 1.0, 2, 3, 4))


@pytest.mark.parametrize(("reason", "wire"), SPEC_EXCLUSIONS, ids=lambda x: str(x)[:30])
def test_all_eight_spec_exclusion_variants_match_the_wire_format(
        reason: ExclusionReason, wire: dict[str, Any]) -> None:
    """Each of the specification's eight variants encodes to the envelope of
    the seed (discriminator plus sibling fields, nothing else) and decodes back."""
    assert exclusion_reason_to_json(reason) == wire
    assert exclusion_reason_from_json(wire) == reason


def test_reserved_variants_are_the_specifications_reserved_ones() -> None:
    """The reserved set names exactly the variants the specification reserves
    (plus the count-quota variant cupellation does not emit)."""
    assert {"ScoredTooLow", "QuotaCapExceeded", "QuotaRequireDisplaced",
            "Filtered"} <= RESERVED_EXCLUSION_REASONS
    assert "BudgetExceeded" not in RESERVED_EXCLUSION_REASONS


def test_reasons_with_equal_fields_but_different_variants_differ() -> None:
    """Deduplicated("x") and PinnedOverride("x") share a tuple shape but are different reasons."""
    dedup: object = Deduplicated("x")
    assert dedup != PinnedOverride("x")
    assert len({Deduplicated("x"), PinnedOverride("x"), Deduplicated("x")}) == 2


def test_unknown_exclusion_reason_keeps_name_and_fields() -> None:
    """A variant from another implementation decodes to a value that keeps its
    name and fields and re-encodes unchanged."""
    wire = {"reason": "TooToxic", "classifier": "v2", "score": 0.97}
    reason = exclusion_reason_from_json(wire)
    assert isinstance(reason, UnknownExclusionReason)
    assert reason.name == "TooToxic"
    assert exclusion_reason_to_json(reason) == wire


def test_count_cap_exceeded_wire_form() -> None:
    """The count-quota cap reason carries kind, cap and the count already selected."""
    assert exclusion_reason_to_json(CountCapExceeded("tool", 2, 2)) == {
        "reason": "CountCapExceeded", "kind": "tool", "cap": 2, "count": 2}
    assert exclusion_reason_from_json(
        exclusion_reason_to_json(CountCapExceeded("tool", 2, 2))) == CountCapExceeded("tool", 2, 2)


def test_known_reason_missing_field_raises() -> None:
    """BudgetExceeded without available_tokens is rejected, naming the field."""
    with pytest.raises(DecodeError, match="available_tokens"):
        exclusion_reason_from_json({"reason": "BudgetExceeded", "item_tokens": 3})


def test_inclusion_reasons_round_trip_and_known_ones_are_shared() -> None:
    """Known inclusion reasons decode to the shared constants; unknown ones keep fields."""
    assert inclusion_reason_from_json({"reason": "Scored"}) is InclusionReason.SCORED
    assert InclusionReason.ZERO_TOKEN.to_json() == {"reason": "ZeroToken"}
    odd = inclusion_reason_from_json({"reason": "Boosted", "by": "user"})
    assert odd.name == "Boosted"
    assert odd.to_json() == {"reason": "Boosted", "by": "user"}
