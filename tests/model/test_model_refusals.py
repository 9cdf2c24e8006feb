"""Values the data model refuses at construction, each with a named error: a lone
surrogate in any string field (InvalidTextError) and metadata nested deeper than
ContextItem.MAX_METADATA_DEPTH (MetadataTooDeepError)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cupellation import ContextBudget, ContextItem, ContextKind, ContextSource
from cupellation.exceptions import (
    CupelError,
    DecodeError,
    InvalidTextError,
    InvalidValueError,
    MetadataTooDeepError,
)
from cupellation.scoring import KindScorer

LONE = "\ud83d"  # the first half of an emoji's surrogate pair, alone


def _nested(levels: int) -> dict[str, Any]:
    """A metadata mapping ``levels`` containers deep, counting itself (mappings and
    lists alternating)."""
    value: Any = "leaf"
    for level in range(levels - 1):
        value = [value] if level % 2 == 0 else {"k": value}
    return {"top": value}


@pytest.mark.parametrize(("arguments", "field", "index"), [
    ({"content": f"text{LONE}"}, "content", 4),
    ({"content": "x", "kind": f"Me{LONE}ssage"}, "kind", 2),
    ({"content": "x", "source": f"{LONE}rag"}, "source", 0),
    ({"content": "x", "tags": ["fine", f"ta{LONE}g"]}, "tags[1]", 2),
    ({"content": "x", "metadata": {f"k{LONE}": 1}}, f"metadata key {'k' + LONE!r}", 1),
    ({"content": "x", "metadata": {"a": f"v{LONE}"}}, "metadata['a']", 1),
    ({"content": "x", "metadata": {"a": [{"b": ["ok", f"deep{LONE}"]}]}},
     "metadata['a'][0]['b'][1]", 4),
    ({"content": "x", "metadata": {"a": {f"inner{LONE}": None}}},
     f"metadata['a'] key {'inner' + LONE!r}", 5),
    ({"content": "x", "tags": ["\udc00"]}, "tags[0]", 0),
])
def test_a_lone_surrogate_in_any_item_string_is_an_invalid_text_error(
        arguments: dict[str, Any], field: str, index: int) -> None:
    """Content, kind, source, each tag, and metadata keys and string values at any
    depth: a lone surrogate raises InvalidTextError (an InvalidValueError) naming the
    field (a key by its escaped repr) and where the surrogate sits. Such a string is
    not Unicode text: no UTF-8 output (JSON, a log line, a span) could hold it."""
    with pytest.raises(InvalidTextError) as info:
        ContextItem(tokens=1, **arguments)
    assert isinstance(info.value, InvalidValueError)
    assert isinstance(info.value, CupelError)
    assert info.value.field == field
    assert info.value.index == index
    assert "lone surrogate" in str(info.value)


def test_a_surrogate_pair_and_other_text_are_accepted() -> None:
    """A properly paired astral character, accents and CJK are text: accepted, and
    the item writes as UTF-8 JSON."""
    item = ContextItem(content="😀 héllo 漢字", tokens=1, kind="Kïnd", source="Sôurce",
                       tags=["tág"], metadata={"clé": ["välue", {"ключ": "значение"}]})
    assert ContextItem.from_json(item.to_json().encode("utf-8")) == item


@pytest.mark.parametrize("build", [
    lambda: ContextKind(f"x{LONE}"),
    lambda: ContextSource(f"x{LONE}"),
    lambda: ContextBudget(100, 50, reserved_slots={f"Mess{LONE}age": 3}),
    lambda: KindScorer({f"x{LONE}": 1.0}),
])
def test_kind_and_source_names_anywhere_refuse_lone_surrogates(build: Any) -> None:
    """The extensible names (ContextKind, ContextSource) refuse a lone surrogate
    wherever they are made: as an item's kind, a budget's reserved_slots key, a
    KindScorer's weight key."""
    with pytest.raises(InvalidTextError):
        build()


def test_a_reserved_slots_key_names_its_field() -> None:
    """The budget names the reserved_slots key as the offending field."""
    with pytest.raises(InvalidTextError) as info:
        ContextBudget(100, 50, reserved_slots={f"Mess{LONE}age": 3})
    assert info.value.field == "reserved_slots key"


def test_decoding_a_lone_surrogate_escape_is_a_decode_error_naming_the_field() -> None:
    """JSON may spell a lone surrogate as an escape ("\\ud83d"); from_json and
    from_dict refuse it as a DecodeError naming the field (never an item that
    every sink then fails on)."""
    text = json.dumps({"content": "ok", "tokens": 1, "tags": ["a", LONE]})
    assert "\\ud83d" in text
    with pytest.raises(DecodeError) as info:
        ContextItem.from_json(text)
    assert info.value.field == "tags[1]"
    with pytest.raises(DecodeError, match="lone surrogate"):
        ContextBudget.from_json(json.dumps({"maxTokens": 9, "targetTokens": 9,
                                            "reservedSlots": {LONE: 1}}))


def test_metadata_may_nest_exactly_the_documented_limit() -> None:
    """ContextItem.MAX_METADATA_DEPTH is 64, counting the metadata mapping itself:
    64 levels are accepted (and round trip through JSON), 65 are not."""
    assert ContextItem.MAX_METADATA_DEPTH == 64
    deepest = _nested(64)
    item = ContextItem(content="x", tokens=1, metadata=deepest)
    assert item.to_dict()["metadata"] == deepest
    assert ContextItem.from_json(item.to_json()) == item
    with pytest.raises(MetadataTooDeepError) as info:
        ContextItem(content="x", tokens=1, metadata=_nested(65))
    assert isinstance(info.value, InvalidValueError)
    assert info.value.limit == 64
    assert info.value.field.startswith("metadata['top']")
    assert "64 levels" in str(info.value)


def test_metadata_far_deeper_than_python_recursion_is_refused_not_a_recursion_error() -> None:
    """Metadata nested 100,000 levels (deeper than Python's recursion limit) is a
    MetadataTooDeepError at construction, and as JSON a DecodeError: never a
    RecursionError."""
    value: Any = "leaf"
    for _ in range(100_000):
        value = {"k": value}
    with pytest.raises(MetadataTooDeepError):
        ContextItem(content="x", tokens=1, metadata=value)
    text = '{"content": "x", "tokens": 1, "metadata": ' + '{"k": ' * 50_000 + "1" + (
        "}" * 50_000) + "}"
    with pytest.raises(DecodeError):
        ContextItem.from_json(text)


def test_a_long_value_is_shortened_in_the_message_but_kept_whole_on_the_error() -> None:
    """A megabyte of content with a lone surrogate at its end: the message shows at
    most 200 characters of the value; the exception keeps the value itself."""
    content = "a" * 1_000_000 + LONE
    with pytest.raises(InvalidTextError) as info:
        ContextItem(content=content, tokens=1)
    assert len(str(info.value)) < 500
    assert info.value.value == content
    assert info.value.index == 1_000_000
