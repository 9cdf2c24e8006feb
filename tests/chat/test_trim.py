"""Trim instead of drop: head and tail with a visible marker, counted with the same
counter, originalTokens set, the original's identity kept in metadata; in
select_messages before tool exchanges are grouped, an exchange costing the sum after."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from cupellation import ContextItem, select_messages
from cupellation.chat import (
    MIN_TRIM_LIMIT,
    TRIMMED_KEY,
    resolve_counter,
    select_messages_with_report,
    trim_items,
)
from cupellation.exceptions import InvalidTypeError, InvalidValueError

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
LOG = "".join(f"line {k}: status=ok value={k * 7}\n" for k in range(400))


def test_an_item_over_its_kinds_limit_keeps_head_and_tail_within_the_limit() -> None:
    """The trimmed content starts like the original, ends like it, holds the marker
    saying how many characters were left out, and counts at most the limit with the
    same counter; originalTokens and the identity (digest, length) are recorded."""
    count = resolve_counter("o200k_base")
    item = ContextItem(content=LOG, tokens=count(LOG), kind="ToolOutput",
                       metadata={"source": "shell"})
    [trimmed] = trim_items([item], {"ToolOutput": 120}, token_counter="o200k_base")
    assert trimmed.content.startswith("line 0: status=ok")
    assert trimmed.content.endswith("line 399: status=ok value=2793\n")
    omitted = len(LOG) - len(trimmed.content.replace(_marker_of(trimmed.content), ""))
    assert f"[... {omitted:,} characters omitted ...]" in trimmed.content
    assert trimmed.tokens == count(trimmed.content) <= 120
    assert trimmed.tokens >= 100  # the limit is used, not wasted
    assert trimmed.original_tokens == item.tokens
    assert trimmed.metadata["source"] == "shell"
    [record] = trimmed.metadata[TRIMMED_KEY]
    assert record == {"original_tokens": item.tokens, "tokens": trimmed.tokens,
                      "original_chars": len(LOG), "limit": 120,
                      "original_digest": "sha256:" + hashlib.sha256(LOG.encode()).hexdigest()}


def _marker_of(content: str) -> str:
    start = content.index("\n[... ")
    return content[start:content.index(" omitted ...]\n") + len(" omitted ...]\n")]


def test_items_within_their_limit_and_other_kinds_pass_through_as_they_are() -> None:
    """Only kinds with a limit, and only items over it, change: the rest are the same
    objects."""
    short = ContextItem(content="short", tokens=1, kind="ToolOutput")
    other = ContextItem(content=LOG, tokens=5000, kind="Document")
    out = trim_items([short, other], {"ToolOutput": 50})
    assert out[0] is short
    assert out[1] is other


def test_limits_are_checked() -> None:
    """Limits under the minimum, non-integers and repeated kinds are refused, naming
    the kind."""
    with pytest.raises(InvalidValueError, match="ToolOutput"):
        trim_items([], {"ToolOutput": MIN_TRIM_LIMIT - 1})
    with pytest.raises(InvalidTypeError, match="Message"):
        trim_items([], {"Message": 50.5})  # type: ignore[dict-item]
    with pytest.raises(InvalidValueError, match="repeats"):
        trim_items([], {"toolOutput": 50, "ToolOutput": 60})
    with pytest.raises(InvalidTypeError, match="trim"):
        select_messages([], max_tokens=10, trim=[("ToolOutput", 50)])  # type: ignore[call-overload]


def test_select_messages_trims_results_before_grouping_and_sums_the_exchange() -> None:
    """A large tool result is trimmed alone, then grouped with its call: the exchange's
    tokens are the sum after trimming and its originalTokens the sum before; the call
    is never cut; the original message is untouched and a trimmed copy is sent."""
    result = {"role": "tool", "tool_call_id": "c1", "content": LOG}
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "tail_log", "arguments": "{}"}}]}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "what does the log say?"}, call, result]
    plain = select_messages_with_report(messages, max_tokens=100000, now=NOW)
    cut = select_messages_with_report(messages, max_tokens=100000, now=NOW,
                                      trim={"ToolOutput": 200})
    before = plain.report.included[1].item
    after = cut.report.included[1].item
    assert after.original_tokens == before.tokens
    assert after.tokens < before.tokens
    count = resolve_counter("auto")
    sent = cut.messages[2]
    assert sent is not result
    assert result["content"] == LOG
    assert count(sent["content"]) <= 200
    assert after.tokens == before.tokens - count(LOG) + count(sent["content"])
    assert cut.messages[1] is call
    [record] = after.metadata[TRIMMED_KEY]
    assert record["message"] == 2
    assert record["original_digest"] == "sha256:" + hashlib.sha256(LOG.encode()).hexdigest()
    assert cut.trimmed == (2,)


def test_each_anthropic_tool_result_is_trimmed_alone() -> None:
    """Two tool_result blocks in one user message are two tool results: each is cut to
    the limit in a copy of the message; the assistant's tool_use stays whole."""
    assistant = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "cat", "input": {"f": "a"}},
        {"type": "tool_use", "id": "t2", "name": "cat", "input": {"f": "b"}}]}
    results = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": LOG},
        {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": LOG}]},
        {"type": "text", "text": "both files"}]}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "show both"}, assistant,
                                      results]
    selection = select_messages_with_report(messages, system="terse", max_tokens=100000,
                                            trim={"ToolOutput": 60}, now=NOW)
    sent = selection.messages[2]
    count = resolve_counter("auto", flavour="anthropic")
    assert sent is not results
    assert count(sent["content"][0]["content"]) <= 60
    assert count(sent["content"][1]["content"][0]["text"]) <= 60
    assert sent["content"][2] is results["content"][2]
    assert selection.messages[1] is assistant
    item = selection.report.included[-1].item
    assert [entry["message"] for entry in item.metadata[TRIMMED_KEY]] == [2, 2]


def test_a_message_of_several_text_parts_is_left_whole() -> None:
    """Text in several parts has no one place to cut: it is not trimmed (and counted
    whole)."""
    message = {"role": "user", "content": [{"type": "text", "text": LOG},
                                           {"type": "text", "text": LOG}]}
    selection = select_messages_with_report([message], max_tokens=100000,
                                            trim={"Message": 50}, now=NOW)
    assert selection.messages[0] is message
    assert selection.trimmed == ()
