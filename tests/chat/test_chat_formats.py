"""OpenAI- and Anthropic-style transcripts become the documented context items."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cupellation import ContextKind, ContextSource
from cupellation.chat import (
    MESSAGE_INDEX_KEY,
    POSITION_KEY,
    TOOL_CALL,
    chat_to_items,
    detect_chat_format,
)
from cupellation.exceptions import DecodeError

END = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

OPENAI: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Oslo?", "name": "ada"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}},
        {"id": "c2", "type": "function",
         "function": {"name": "clock", "arguments": "{}"}},
    ]},
    {"role": "tool", "tool_call_id": "c1", "content": "4°C, rain"},
    {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "12:00"}]},
    {"role": "assistant", "content": [
        {"type": "text", "text": "It is 4°C at noon."},
        {"type": "image_url", "image_url": {"url": "https://example.invalid/x.png"}},
    ]},
    {"role": "user", "content": ""},
    {"role": "developer", "content": "Answer in metric."},
]

ANTHROPIC: dict[str, Any] = {
    "model": "any",
    "system": [{"type": "text", "text": "Be kind."}, {"type": "text", "text": "Be brief."}],
    "messages": [
        {"role": "user", "content": "Find the runbook."},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "search first", "signature": "s"},
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "runbook"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
             "content": [{"type": "text", "text": "timeout"}]},
            {"type": "text", "text": "Try again."},
        ]},
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "AAAA"}},
        ]},
    ],
}


def _summary(items: list[Any]) -> list[tuple[str, str, str, bool]]:
    return [(item.kind.value, item.source.value, item.content, item.pinned) for item in items]


def test_openai_messages_become_kinds_in_conversation_order() -> None:
    """System and developer -> SystemPrompt (only the first pinned), user and
    assistant text -> Message, each tool call -> ToolCall, each tool message ->
    ToolOutput; text parts are joined, images left out, empty messages dropped."""
    items = chat_to_items(OPENAI, end=END, use_tiktoken=False)
    assert _summary(items) == [
        ("SystemPrompt", "Chat", "You are terse.", True),
        ("Message", "Chat", "Weather in Oslo?", False),
        ("ToolCall", "Tool", 'weather({"city": "Oslo"})', False),
        ("ToolCall", "Tool", "clock({})", False),
        ("ToolOutput", "Tool", "4°C, rain", False),
        ("ToolOutput", "Tool", "12:00", False),
        ("Message", "Chat", "It is 4°C at noon.", False),
        ("SystemPrompt", "Chat", "Answer in metric.", False),
    ]
    assert [item.metadata[POSITION_KEY] for item in items] == list(range(8))
    assert [item.metadata[MESSAGE_INDEX_KEY] for item in items] == [0, 1, 2, 2, 3, 4, 5, 7]
    assert items[1].metadata["chat.name"] == "ada"
    assert items[2].metadata["chat.tool_call_id"] == "c1"
    assert items[4].metadata["chat.tool_name"] == "weather"
    assert items[5].metadata["chat.tool_name"] == "clock"
    assert items[6].metadata["chat.omitted_parts"] == ("image_url",)
    assert {item.metadata["chat.format"] for item in items} == {"openai"}
    assert ContextKind("ToolCall") == TOOL_CALL


def test_anthropic_blocks_become_kinds_in_conversation_order() -> None:
    """The top-level system (text blocks joined) is pinned; tool_use blocks
    become ToolCall and tool_result blocks ToolOutput, split out of their
    message in block order; an image-only message becomes a placeholder."""
    items = chat_to_items(ANTHROPIC, end=END, use_tiktoken=False)
    assert _summary(items) == [
        ("SystemPrompt", "Chat", "Be kind.\nBe brief.", True),
        ("Message", "Chat", "Find the runbook.", False),
        ("Message", "Chat", "Searching.", False),
        ("ToolCall", "Tool", 'search({"q": "runbook"})', False),
        ("ToolOutput", "Tool", "timeout", False),
        ("Message", "Chat", "Try again.", False),
        ("Message", "Chat", "[image]", False),
    ]
    assert MESSAGE_INDEX_KEY not in items[0].metadata
    assert items[2].metadata["chat.omitted_parts"] == ("thinking",)
    assert items[4].metadata["chat.is_error"] is True
    assert items[4].metadata["chat.tool_name"] == "search"
    assert items[4].source == ContextSource.TOOL
    assert items[6].metadata["chat.omitted_parts"] == ("image",)
    assert {item.metadata["chat.format"] for item in items} == {"anthropic"}


def test_legacy_openai_function_calls_and_refusals_are_read() -> None:
    """function_call and the function role are the older tool protocol; a
    refusal part is text."""
    items = chat_to_items([
        {"role": "assistant", "content": None,
         "function_call": {"name": "lookup", "arguments": '{"id": 3}'}},
        {"role": "function", "name": "lookup", "content": "found 3"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
    ], use_tiktoken=False)
    assert _summary(items) == [
        ("ToolCall", "Tool", 'lookup({"id": 3})', False),
        ("ToolOutput", "Tool", "found 3", False),
        ("Message", "Chat", "I can't.", False),
    ]
    assert items[1].metadata["chat.tool_name"] == "lookup"


def test_pinning_and_kinds_can_be_configured() -> None:
    """pin_system=False pins nothing; a message's own pinned flag pins it; kinds
    maps roles to other kinds."""
    messages = [{"role": "system", "content": "s"},
                {"role": "user", "content": "u", "pinned": True}]
    items = chat_to_items(messages, pin_system=False, use_tiktoken=False,
                          kinds={"user": "Question", "system": "Memory"})
    assert [(i.kind.value, i.pinned) for i in items] == [("Memory", False), ("Question", True)]


def test_priorities_and_tags_of_messages_are_kept() -> None:
    """A message's priority and tags reach each of its items."""
    items = chat_to_items([{"role": "assistant", "content": "x", "priority": 7,
                            "tags": ["urgent"],
                            "tool_calls": [{"id": "a", "function": {"name": "f"}}]}],
                          use_tiktoken=False)
    assert [(i.priority, i.tags) for i in items] == [(7, ("urgent",)), (7, ("urgent",))]
    assert items[1].content == "f()"


@pytest.mark.parametrize(("data", "expected"), [
    (OPENAI, "openai"),
    ({"messages": OPENAI}, "openai"),
    (ANTHROPIC, "anthropic"),
    ({"system": "s", "messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "openai"),
])
def test_the_format_is_detected_from_its_features(data: Any, expected: str) -> None:
    """Anthropic: a top-level system or Anthropic blocks; OpenAI: system/tool
    roles, tool_calls, OpenAI parts; plain text reads as OpenAI (identically)."""
    assert detect_chat_format(data) == expected


def test_plain_text_reads_the_same_in_both_formats() -> None:
    """A transcript of plain user and assistant text gives equal items either way."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    openai = chat_to_items(messages, format="openai", end=END, use_tiktoken=False)
    anthropic = chat_to_items(messages, format="anthropic", end=END, use_tiktoken=False)
    assert [i.content for i in openai] == [i.content for i in anthropic]
    assert [i.timestamp for i in openai] == [i.timestamp for i in anthropic]


def test_a_mixed_transcript_is_refused_naming_both_features() -> None:
    """OpenAI roles next to Anthropic blocks is an error that names one of each."""
    data = [{"role": "tool", "tool_call_id": "x", "content": "r"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "f",
                                               "input": {}}]}]
    with pytest.raises(DecodeError) as caught:
        detect_chat_format(data)
    message = str(caught.value)
    assert "messages[0] has role 'tool'" in message
    assert "messages[1].content[0] is a 'tool_use' part" in message
    items = chat_to_items(data[1:], format="anthropic", use_tiktoken=False)
    assert items[0].kind == TOOL_CALL
