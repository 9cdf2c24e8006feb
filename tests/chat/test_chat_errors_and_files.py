"""Malformed transcripts fail naming the message, the field, the value and the line;
files are read as JSON or JSON Lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cupellation import select_messages
from cupellation.chat import chat_to_items, load_chat
from cupellation.exceptions import DecodeError, InvalidValueError


@pytest.mark.parametrize(("data", "field", "value"), [
    ([{"role": "wizard", "content": "x"}], "messages[0].role", "wizard"),
    ([{"content": "x"}], "messages[0].role", None),
    ([{"role": "user", "content": 5}], "messages[0].content", 5),
    ([{"role": "user", "content": [{"type": "text"}]}], "messages[0].content[0].text", None),
    ([{"role": "user", "content": [7]}], "messages[0].content[0]", 7),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [
        {"id": "1", "function": {"arguments": "{}"}}]}],
     "messages[1].tool_calls[0].function.name", None),
    ([{"role": "assistant", "tool_calls": [{"id": "1"}]}],
     "messages[0].tool_calls[0].function", None),
    ([{"role": "tool", "content": "r"}], "messages[0].tool_call_id", None),
    ([{"role": "user", "content": "x", "timestamp": "2026-01-01T00:00:00"}],
     "messages[0].timestamp", "2026-01-01T00:00:00"),
    ([{"role": "user", "content": "x", "priority": "high"}], "messages[0].priority", "high"),
    ([{"role": "user", "content": "x", "tags": "a"}], "messages[0].tags", "a"),
    ("hello", "messages", "hello"),
    ({"msgs": []}, "messages", None),
    ({"system": "s", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role",
     "robot"),
    ({"system": "s", "messages": [{"role": "user", "content": [
        {"type": "tool_result", "content": "r"}]}]},
     "messages[0].content[0].tool_use_id", None),
    ({"system": "s", "messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "input": {}}]}]},
     "messages[0].content[0].name", None),
])
def test_malformed_messages_name_index_field_and_value(data: Any, field: str,
                                                       value: Any) -> None:
    """Each malformed transcript raises DecodeError naming the message index and
    field and carrying the offending value."""
    with pytest.raises(DecodeError) as caught:
        chat_to_items(data, use_tiktoken=False)
    assert caught.value.field == field
    assert caught.value.value == value
    assert field in str(caught.value)


def test_a_top_level_system_is_not_openai() -> None:
    """format='openai' with a top-level system is refused rather than dropped."""
    with pytest.raises(DecodeError, match="system"):
        chat_to_items({"system": "s", "messages": []}, format="openai")


def test_bad_options_are_refused() -> None:
    """Unknown formats, roles in kinds, naive end times and bad counters are refused."""
    with pytest.raises(InvalidValueError):
        chat_to_items([], format="gemini")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        chat_to_items([], kinds={"robot": "X"})
    with pytest.raises(InvalidValueError):
        chat_to_items([{"role": "user", "content": "x"}], token_counter=lambda text: -1)


def test_json_and_json_lines_files_are_read(tmp_path: Path) -> None:
    """A JSON file (list or object) and a JSON Lines file of messages give the
    same items as the parsed data; so does the text itself."""
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    as_json = tmp_path / "chat.json"
    as_json.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    as_lines = tmp_path / "chat.jsonl"
    as_lines.write_text("\n".join(json.dumps(m) for m in messages) + "\n\n", encoding="utf-8")
    single = tmp_path / "one.jsonl"
    single.write_text(json.dumps(messages[1]) + "\n", encoding="utf-8")
    expected = [i.content for i in chat_to_items(messages, use_tiktoken=False)]
    for source in (as_json, str(as_lines), as_lines.read_text(encoding="utf-8")):
        assert [i.content for i in load_chat(source, use_tiktoken=False)] == expected
    assert [i.content for i in load_chat(single, use_tiktoken=False)] == ["u"]


def test_json_lines_errors_name_the_line(tmp_path: Path) -> None:
    """A bad message in a JSON Lines file names its line; so does a line that is
    not JSON."""
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "a"}\n\n{"role": "user", "content": 3}\n',
                    encoding="utf-8")
    with pytest.raises(DecodeError) as caught:
        load_chat(path, use_tiktoken=False)
    assert caught.value.line == 3
    assert caught.value.field == "messages[1].content"
    assert "line 3" in str(caught.value)
    path.write_text('{"role": "user", "content": "a"}\n{"role": \n', encoding="utf-8")
    with pytest.raises(DecodeError) as broken:
        load_chat(path)
    assert broken.value.line == 2


def test_broken_json_names_the_line() -> None:
    """A JSON document that does not parse reports its line."""
    with pytest.raises(DecodeError) as caught:
        load_chat('[\n{"role": "user",\n "content": }\n]')
    assert caught.value.line == 3


def test_long_one_line_json_is_read_as_text() -> None:
    """A one-line transcript longer than a file name may be is parsed, not stat-ed."""
    text = json.dumps([{"role": "user", "content": "x" * 400}])
    assert [i.content for i in load_chat(text, use_tiktoken=False)] == ["x" * 400]


def test_timestamps_at_the_edges_of_the_date_range() -> None:
    """A message at 9999-12-31T23:59:59.999999Z or at created_at -62135596800 (year 1)
    keeps its timestamp; a neighbour whose synthesized timestamp would leave the
    range is a DecodeError naming it (both were OverflowError), and so is a second
    item of a message at the last instant. Without synthesis nothing is moved."""
    last = "9999-12-31T23:59:59.999999Z"
    items = chat_to_items([{"role": "user", "content": "x", "timestamp": last}])
    assert items[0].timestamp is not None
    assert items[0].timestamp.isoformat() == "9999-12-31T23:59:59.999999+00:00"
    with pytest.raises(DecodeError, match="after the last representable") as after:
        chat_to_items([{"role": "user", "content": "x", "timestamp": last},
                       {"role": "assistant", "content": "y"}])
    assert after.value.field == "messages[1]"
    with pytest.raises(DecodeError, match="before the first representable") as before:
        chat_to_items({"system": "s", "messages": [
            {"role": "user", "content": "x", "created_at": -62135596800}]})
    assert before.value.field == "system"
    with pytest.raises(DecodeError, match="part 1") as part:
        chat_to_items([{"role": "assistant", "content": "c", "timestamp": last,
                        "tool_calls": [{"id": "1", "type": "function",
                                        "function": {"name": "f", "arguments": "{}"}}]}])
    assert part.value.field == "messages[0].timestamp"
    kept = chat_to_items([{"role": "user", "content": "x", "timestamp": last},
                          {"role": "assistant", "content": "y"}],
                         synthesize_timestamps=False)
    assert [item.timestamp is None for item in kept] == [False, True]


def test_json_lines_files_may_hold_raw_line_separators(tmp_path: Path) -> None:
    """A JSON Lines transcript whose strings hold raw U+2028, U+2029 and U+0085 is
    split at \\n only, so each message reads whole with its line numbers right."""
    text = "a\u2028b\u2029c\u0085d"
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"role": "user", "content": text}, ensure_ascii=False) + "\n"
                    + json.dumps({"role": "assistant", "content": 5}) + "\n",
                    encoding="utf-8")
    with pytest.raises(DecodeError) as caught:
        load_chat(path)
    assert caught.value.line == 2
    path.write_text(json.dumps({"role": "user", "content": text}, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    assert [item.content for item in load_chat(path)] == [text]


_CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(("messages", "system", "where"), [
    ([{"role": "user", "content": "bad \ud800 text"}], None, "messages[0]"),
    ([{"role": "user", "content": "ok"}, {"role": "assistant", "content": None,
      "tool_calls": [{**_CALL, "id": "c\udc00"}]},
      {"role": "tool", "tool_call_id": "c\udc00", "content": "r"}], None, "messages[1]"),
    ([{"role": "assistant", "content": None, "tool_calls": [
        {**_CALL, "function": {"name": "f\ud800", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "r"}], None, "messages[0]"),
    ([{"role": "assistant", "content": None, "tool_calls": [
        {**_CALL, "function": {"name": "f", "arguments": "{\"q\": \"\udfff\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "r"}], None, "messages[0]"),
    ([{"role": "assistant", "content": None, "tool_calls": [_CALL]},
      {"role": "tool", "tool_call_id": "c1", "content": "x\ud800"}], None, "messages[1]"),
    ([{"role": "user", "content": "hi"}], "system \ud800", "system"),
])
def test_text_that_is_not_unicode_is_refused_naming_the_message(
        messages: list[Any], system: str | None, where: str) -> None:
    """A lone surrogate (which no UTF-8 output can hold) anywhere in a message (its
    content, a call id, a tool name, the arguments, a result) or in Anthropic's system
    prompt is refused when the message is read, naming that message: never an item
    holding text that no log or span can carry (the units' items are built without
    checking their texts again)."""
    with pytest.raises(DecodeError, match="not Unicode") as caught:
        select_messages(messages, system=system, max_tokens=1000)
    assert caught.value.field == where
