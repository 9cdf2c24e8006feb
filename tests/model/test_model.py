"""The data model: ContextItem, ContextKind/Source, ContextBudget and their validation."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from cupellation import ContextBudget, ContextItem, ContextKind, ContextSource, OverflowStrategy
from cupellation.exceptions import DecodeError, InvalidTypeError, InvalidValueError


def test_defaults_match_the_specification() -> None:
    """Only content and tokens are required; the other nine fields default as the spec says."""
    item = ContextItem("hi", 3)
    assert item.kind == ContextKind.MESSAGE
    assert item.source == ContextSource.CHAT
    assert (item.priority, item.tags, dict(item.metadata), item.timestamp) == (None, (), {}, None)
    assert (item.future_relevance_hint, item.pinned, item.original_tokens) == (None, False, None)


def test_tags_and_metadata_cannot_be_changed_through_the_item() -> None:
    """Tags become a tuple and metadata a read-only copy: mutating the caller's
    objects or the item's views changes nothing."""
    tags = ["a"]
    metadata: dict[str, Any] = {"k": 1}
    item = ContextItem("x", 1, tags=tags, metadata=metadata)
    tags.append("b")
    metadata["k"] = 2
    assert item.tags == ("a",)
    assert item.metadata["k"] == 1
    with pytest.raises(TypeError):
        item.metadata["k"] = 3  # type: ignore[index]
    with pytest.raises(AttributeError):
        item.tokens = 5  # type: ignore[misc]


@pytest.mark.parametrize(("kwargs", "error", "field"), [
    ({"content": "", "tokens": 1}, InvalidValueError, "content"),
    ({"content": None, "tokens": 1}, InvalidTypeError, "content"),
    ({"content": "a", "tokens": True}, InvalidTypeError, "tokens"),
    ({"content": "a", "tokens": 1.0}, InvalidTypeError, "tokens"),
    ({"content": "a", "tokens": "3"}, InvalidTypeError, "tokens"),
    ({"content": "a", "tokens": 1, "timestamp": datetime(2024, 1, 1)}, InvalidValueError,
     "timestamp"),
    ({"content": "a", "tokens": 1, "kind": "  "}, InvalidValueError, "kind"),
    ({"content": "a", "tokens": 1, "kind": ""}, InvalidValueError, "kind"),
    ({"content": "a", "tokens": 1, "source": "\t"}, InvalidValueError, "source"),
    ({"content": "a", "tokens": 1, "priority": 1.5}, InvalidTypeError, "priority"),
    ({"content": "a", "tokens": 1, "tags": "abc"}, InvalidTypeError, "tags"),
    ({"content": "a", "tokens": 1, "pinned": 1}, InvalidTypeError, "pinned"),
    ({"content": "a", "tokens": 1, "future_relevance_hint": "high"}, InvalidTypeError,
     "future_relevance_hint"),
])
def test_bad_item_values_raise_naming_field_and_value(
        kwargs: dict[str, Any], error: type[Exception], field: str) -> None:
    """Each rejected value raises from the hierarchy with the field and the value in the message."""
    with pytest.raises(error) as info:
        ContextItem(**kwargs)
    assert str(info.value).startswith(f"{field}:")
    assert info.value.field == field  # type: ignore[attr-defined]
    assert repr(kwargs.get(field))[:10] in str(info.value)


def test_timestamps_are_normalised_to_utc() -> None:
    """An aware timestamp in another zone is stored as the same instant in UTC."""
    plus_two = timezone(timedelta(hours=2))
    item = ContextItem("a", 1, timestamp=datetime(2024, 1, 1, 12, tzinfo=plus_two))
    assert item.timestamp == datetime(2024, 1, 1, 10, tzinfo=UTC)
    assert item.timestamp is not None
    assert item.timestamp.tzinfo is UTC


def test_kind_and_source_compare_with_ascii_folding_only() -> None:
    """Kinds compare case-insensitively with ASCII folding, not Unicode folding."""
    assert ContextKind("message") == ContextKind.MESSAGE == "MESSAGE"
    assert hash(ContextKind("ToolOutput")) == hash(ContextKind("TOOLOUTPUT"))
    assert ContextKind("É") != ContextKind("é")
    assert ContextSource("rag") == ContextSource.RAG
    assert ContextKind("Custom").value == "Custom"


def test_json_shape_is_the_wire_format() -> None:
    """content, tokens and kind always; other fields only when set; camelCase names;
    timestamps ISO 8601 UTC with Z; decoding gives the same item back."""
    item = ContextItem("a", 5, kind="ToolOutput", source="Tool", priority=2, tags=["x"],
                       metadata={"m": [1, 2]}, timestamp=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                       future_relevance_hint=0.5, pinned=True, original_tokens=9)
    wire = item.to_dict()
    assert wire == {"content": "a", "tokens": 5, "kind": "ToolOutput", "source": "Tool",
                    "priority": 2, "tags": ["x"], "metadata": {"m": [1, 2]},
                    "timestamp": "2024-01-02T03:04:05Z", "futureRelevanceHint": 0.5,
                    "pinned": True, "originalTokens": 9}
    assert ContextItem.from_dict(wire) == item
    assert ContextItem("b", 1).to_dict() == {"content": "b", "tokens": 1, "kind": "Message"}


@pytest.mark.parametrize(("wire", "field"), [
    ({"tokens": 1}, "content"),
    ({"content": "a"}, "tokens"),
    ({"content": "a", "tokens": "x"}, "tokens"),
    ({"content": "a", "tokens": 1, "timestamp": "yesterday"}, "timestamp"),
    ({"content": "a", "tokens": 1, "timestamp": "2024-01-01T00:00:00"}, "timestamp"),
])
def test_bad_json_raises_decode_error_naming_field(wire: dict[str, Any], field: str) -> None:
    """Missing or mistyped JSON fields raise DecodeError naming the field."""
    with pytest.raises(DecodeError) as info:
        ContextItem.from_dict(wire)
    assert info.value.field == field


def test_items_and_budgets_pickle_and_deepcopy() -> None:
    """Items (with metadata) and budgets (with reserved slots) survive pickle and deepcopy."""
    item = ContextItem("a", 1, metadata={"k": {"nested": 1}}, tags=("t",))
    budget = ContextBudget(100, 50, reserved_slots={"Message": 2})
    for value in (item, budget):
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.deepcopy(value) == value


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"max_tokens": -1, "target_tokens": 0}, "max_tokens"),
    ({"max_tokens": 10, "target_tokens": -1}, "target_tokens"),
    ({"max_tokens": 10, "target_tokens": 11}, "target_tokens"),
    ({"max_tokens": 10, "target_tokens": 5, "output_reserve": -1}, "output_reserve"),
    ({"max_tokens": 10, "target_tokens": 5, "output_reserve": 11}, "output_reserve"),
    ({"max_tokens": 10, "target_tokens": 5, "estimation_safety_margin_percent": 100.5},
     "estimation_safety_margin_percent"),
    ({"max_tokens": 10, "target_tokens": 5, "estimation_safety_margin_percent": -0.1},
     "estimation_safety_margin_percent"),
    ({"max_tokens": 10, "target_tokens": 5, "estimation_safety_margin_percent": float("nan")},
     "estimation_safety_margin_percent"),
    ({"max_tokens": 10, "target_tokens": 5, "reserved_slots": {"Message": -1}},
     "reserved_slots['Message']"),
])
def test_all_seven_budget_rules(kwargs: dict[str, Any], field: str) -> None:
    """Each of the seven validation rules rejects its invalid value, naming the field."""
    with pytest.raises(InvalidValueError) as info:
        ContextBudget(**kwargs)
    assert info.value.field == field


def test_budget_reserved_slots_are_case_insensitive_and_boundaries_are_valid() -> None:
    """reservedSlots keys fold case; target == max and reserve == max are allowed."""
    budget = ContextBudget(10, 10, output_reserve=10, reserved_slots={"tooloutput": 3},
                           estimation_safety_margin_percent=100)
    assert budget.reserved_for("ToolOutput") == 3
    assert budget.reserved_for("Memory") == 0
    assert ContextBudget.from_dict(budget.to_dict()) == budget


def test_budget_rejects_bool_and_float_counts() -> None:
    """Token counts must be integers, not bools or floats."""
    with pytest.raises(InvalidTypeError, match="max_tokens"):
        ContextBudget(True, 0)
    with pytest.raises(InvalidTypeError, match="target_tokens"):
        ContextBudget(10, 5.0)  # type: ignore[arg-type]


def test_overflow_strategy_parses_names_in_any_case() -> None:
    """OverflowStrategy.parse accepts members and names in any ASCII case."""
    assert OverflowStrategy.parse("truncate") is OverflowStrategy.TRUNCATE
    assert OverflowStrategy.parse(OverflowStrategy.PROCEED) is OverflowStrategy.PROCEED
    with pytest.raises(InvalidValueError, match="overflow_strategy"):
        OverflowStrategy.parse("sometimes")
