"""The data model against bad input and its two serialised forms: unknown keys,
metadata that is not JSON, timestamps that leave the datetime range in UTC,
and to_dict/from_dict (mappings) and to_json/from_json (JSON text)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from cupellation._model import ContextBudget, ContextItem
from cupellation.exceptions import DecodeError, InvalidTypeError, InvalidValueError

PLUS_FIVE = timezone(timedelta(hours=5))
MINUS_FIVE = timezone(timedelta(hours=-5))


# -- unknown keys -------------------------------------------------------------

@pytest.mark.parametrize(("key", "suggestion"), [
    ("Pinned", "pinned"),
    ("future_relevance_hint", "futureRelevanceHint"),
    ("futurerelevancehint", "futureRelevanceHint"),
    ("ORIGINALTOKENS", "originalTokens"),
    ("original-tokens", "originalTokens"),
    ("tokns", "tokens"),
    ("metdata", "metadata"),
])
def test_unknown_item_key_is_a_decode_error_with_a_suggestion(key: str, suggestion: str) -> None:
    """A key that is not one of the wire format's eleven is refused, never dropped, and
    the error suggests the field meant (case-insensitive match first)."""
    with pytest.raises(DecodeError) as info:
        ContextItem.from_dict({"content": "a", "tokens": 1, key: True})
    assert info.value.field == key
    assert f"did you mean `{suggestion}`?" in str(info.value)


def test_unknown_item_key_without_a_close_match_lists_the_fields() -> None:
    """A key like no field at all is refused and the message lists the known fields."""
    with pytest.raises(DecodeError, match="not a ContextItem field") as info:
        ContextItem.from_dict({"content": "a", "tokens": 1, "colour": "red"})
    assert info.value.value == "red"
    assert "futureRelevanceHint" in str(info.value)
    assert "did you mean" not in str(info.value)


def test_unknown_budget_key_is_a_decode_error_with_a_suggestion() -> None:
    """ContextBudget.from_dict refuses unknown keys the same way (a misspelt
    outputReserve would otherwise silently give a larger budget)."""
    with pytest.raises(DecodeError, match="did you mean `outputReserve`") as info:
        ContextBudget.from_dict({"maxTokens": 10, "targetTokens": 5, "output_reserve": 3})
    assert info.value.field == "output_reserve"


# -- metadata -----------------------------------------------------------------

@pytest.mark.parametrize(("metadata", "path"), [
    ({"s": {1, 2}}, "metadata['s']"),
    ({"b": b"raw"}, "metadata['b']"),
    ({"o": object()}, "metadata['o']"),
    ({"when": datetime(2024, 1, 1, tzinfo=UTC)}, "metadata['when']"),
    ({"nan": math.nan}, "metadata['nan']"),
    ({"inf": math.inf}, "metadata['inf']"),
    ({"ninf": -math.inf}, "metadata['ninf']"),
    ({1: "x"}, "metadata[1]"),
    ({"outer": {"inner": [1, {2: "x"}]}}, "metadata['outer']['inner'][1][2]"),
    ({"list": [1, 2, {3}]}, "metadata['list'][2]"),
])
def test_metadata_that_is_not_json_is_refused_naming_its_path(
        metadata: dict[Any, Any], path: str) -> None:
    """Sets, bytes, objects, non-finite floats and non-string keys, at any depth,
    raise InvalidValueError naming the metadata[...] path and the value."""
    with pytest.raises(InvalidValueError) as info:
        ContextItem("a", 1, metadata=metadata)
    assert info.value.field == path
    assert str(info.value).startswith(f"{path}:")


def test_metadata_that_contains_itself_is_refused() -> None:
    """A self-referencing list cannot be JSON: refused, not a RecursionError."""
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(InvalidValueError, match="contains itself") as info:
        ContextItem("a", 1, metadata={"loop": loop})
    assert info.value.field == "metadata['loop'][1]"


def test_a_container_repeated_without_a_cycle_is_accepted() -> None:
    """The same list under two keys is not a cycle (a diamond, not a loop)."""
    shared = [1, 2]
    item = ContextItem("a", 1, metadata={"x": shared, "y": {"z": shared}})
    assert item.to_dict()["metadata"] == {"x": [1, 2], "y": {"z": [1, 2]}}


def test_metadata_is_deep_frozen() -> None:
    """Nested mappings become read-only and lists become tuples: nothing reachable
    from the item can be changed, and changing the caller's objects changes nothing."""
    inner: dict[str, Any] = {"list": [1, 2], "deeper": {"k": "v"}}
    item = ContextItem("a", 1, metadata={"inner": inner, "top": [{"x": 1}]})
    inner["list"].append(3)
    inner["deeper"]["k"] = "changed"
    frozen = item.metadata["inner"]
    assert isinstance(frozen, Mapping)
    assert frozen["list"] == (1, 2)
    assert frozen["deeper"]["k"] == "v"
    with pytest.raises(TypeError):
        frozen["list"] = ()  # type: ignore[index]
    with pytest.raises(TypeError):
        frozen["deeper"]["k"] = "x"
    with pytest.raises(AttributeError):
        frozen["list"].append(4)
    with pytest.raises(TypeError):
        item.metadata["top"][0]["x"] = 2


def test_to_dict_gives_plain_json_that_the_caller_may_change() -> None:
    """to_dict turns the frozen metadata back into dicts and lists (json.dumps
    works on it), and changing that copy leaves the item alone."""
    item = ContextItem("a", 1, metadata={"m": [1, {"n": (2, 3)}], "none": None, "ok": True})
    wire = item.to_dict()
    assert wire["metadata"] == {"m": [1, {"n": [2, 3]}], "none": None, "ok": True}
    assert type(wire["metadata"]) is dict
    assert type(wire["metadata"]["m"]) is list
    assert type(wire["metadata"]["m"][1]) is dict
    assert json.loads(json.dumps(wire, allow_nan=False)) == wire
    wire["metadata"]["m"].append("extra")
    assert item.metadata["m"] == (1, {"n": (2, 3)})


def test_metadata_that_is_not_json_in_a_mapping_is_a_decode_error() -> None:
    """Decoding reports bad metadata as DecodeError with the same path."""
    with pytest.raises(DecodeError) as info:
        ContextItem.from_dict({"content": "a", "tokens": 1, "metadata": {"x": [math.nan]}})
    assert info.value.field == "metadata['x'][0]"


# -- timestamps ---------------------------------------------------------------

@pytest.mark.parametrize("moment", [
    datetime(1, 1, 1, tzinfo=PLUS_FIVE),
    datetime(9999, 12, 31, 23, tzinfo=MINUS_FIVE),
])
def test_timestamp_overflowing_in_utc_is_an_invalid_value(moment: datetime) -> None:
    """A timestamp whose UTC instant is outside datetime's range raises
    InvalidValueError naming the field, never a bare OverflowError."""
    with pytest.raises(InvalidValueError) as info:
        ContextItem("a", 1, timestamp=moment)
    assert info.value.field == "timestamp"


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:00:00-05:00"])
def test_timestamp_overflowing_in_utc_is_a_decode_error(text: str) -> None:
    """The same timestamps in JSON raise DecodeError naming the field."""
    with pytest.raises(DecodeError) as info:
        ContextItem.from_dict({"content": "a", "tokens": 1, "timestamp": text})
    assert info.value.field == "timestamp"
    with pytest.raises(DecodeError):
        ContextItem.from_json(json.dumps({"content": "a", "tokens": 1, "timestamp": text}))


def test_timestamps_at_the_edges_that_fit_are_kept() -> None:
    """The boundary instants themselves (year 1 and year 9999 in UTC) are accepted."""
    early = ContextItem("a", 1, timestamp=datetime(1, 1, 1, 5, tzinfo=PLUS_FIVE))
    assert early.timestamp == datetime(1, 1, 1, tzinfo=UTC)
    late = ContextItem("a", 1, timestamp=datetime(9999, 12, 31, 18, tzinfo=MINUS_FIVE))
    assert late.timestamp == datetime(9999, 12, 31, 23, tzinfo=UTC)


# -- dict and JSON text -------------------------------------------------------

def test_item_json_text_round_trip() -> None:
    """to_json gives JSON text (non-ASCII kept) and from_json reads it back equal."""
    item = ContextItem("héllo", 5, kind="ToolOutput", tags=["x"], metadata={"m": [1, {"n": "é"}]},
                       timestamp=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                       future_relevance_hint=math.inf, pinned=True)
    text = item.to_json()
    assert isinstance(text, str)
    assert "héllo" in text
    assert json.loads(text) == item.to_dict()
    assert ContextItem.from_json(text) == item
    assert ContextItem.from_json(text.encode("utf-8")) == item


def test_budget_dict_and_json_text_round_trip() -> None:
    """ContextBudget has the same pair: to_dict/from_dict and to_json/from_json."""
    budget = ContextBudget(100, 50, output_reserve=10, reserved_slots={"Message": 2},
                           estimation_safety_margin_percent=12.5)
    assert ContextBudget.from_dict(budget.to_dict()) == budget
    text = budget.to_json()
    assert json.loads(text) == budget.to_dict()
    assert ContextBudget.from_json(text) == budget


@pytest.mark.parametrize("owner", [ContextItem, ContextBudget])
def test_from_json_takes_text_and_points_mappings_to_from_dict(owner: type[Any]) -> None:
    """Passing a mapping to from_json (the old dict-based name) is a type error
    that names from_dict."""
    with pytest.raises(InvalidTypeError, match="from_dict"):
        owner.from_json({"content": "a", "tokens": 1})


def test_from_json_is_strict_json_with_line_numbers() -> None:
    """NaN/Infinity tokens are not JSON and are refused; malformed text is a
    DecodeError carrying the line number."""
    with pytest.raises(DecodeError, match="not valid JSON"):
        ContextItem.from_json('{"content": "a", "tokens": 1, "futureRelevanceHint": NaN}')
    with pytest.raises(DecodeError) as info:
        ContextItem.from_json('{\n"content": "a",\n"tokens": }')
    assert info.value.line == 3
    with pytest.raises(DecodeError, match="must be a JSON object"):
        ContextItem.from_json("[1, 2]")
