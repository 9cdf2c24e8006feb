"""The agent loop's defects of issue 24, each pinned by a test that failed before
its fix: Anthropic's thinking rule, names counted, the latest user message pinned in
every format, a pinned overflow that names the messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from cupellation import (
    SelectionReport,
    SelectOptions,
    select_messages,
    select_messages_with_report,
)
from cupellation.chat import EXCHANGE_KEY, ordering_problems, resolve_counter
from cupellation.cli import main
from cupellation.exceptions import PinnedBudgetError

from ._conversations import FORMATS, render, weather_conversation

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _thinking_loop() -> list[dict[str, Any]]:
    """An Anthropic conversation with thinking: a finished first turn whose tool
    result is large, then a second turn still in its tool loop."""
    return [
        {"role": "user", "content": "first task " + "word " * 30},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan one", "signature": "s1"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "big " * 300}]},
        {"role": "assistant", "content": [{"type": "text", "text": "first done"}]},
        {"role": "user", "content": "second task"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan two", "signature": "s3"},
            {"type": "tool_use", "id": "t2", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2",
                                      "content": "small"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "again", "signature": "s4"},
            {"type": "tool_use", "id": "t3", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3",
                                      "content": "small too"}]},
    ]


def test_strip_after_change_keeps_the_current_turns_first_thinking_block() -> None:
    """With strip_after_change and an earlier exchange left out, the current turn's
    first assistant message keeps its thinking block (Anthropic: "a final assistant
    message must start with a thinking block"); a later one is stripped; the window
    passes ordering_problems, which now checks that rule."""
    messages = _thinking_loop()
    for budget in (120, 160, 200, 400):
        selection = select_messages_with_report(
            messages, system="terse", max_tokens=budget,
            anthropic_thinking="strip_after_change", now=NOW)
        assert 5 not in selection.thinking_stripped
        sent = selection.messages[selection.kept.index(5)]
        assert sent["content"][0]["type"] == "thinking"
        assert ordering_problems(selection.messages, system="terse") == []


def test_ordering_problems_flags_a_final_turn_without_its_thinking_block() -> None:
    """A list whose final tool-using turn opens without a thinking block, while
    thinking is on (blocks elsewhere, or thinking=True), is one problem naming the
    message; with thinking=False, none."""
    messages = _thinking_loop()
    stripped = [*messages[:5], {"role": "assistant", "content": messages[5]["content"][1:]},
                *messages[6:]]
    found = ordering_problems(stripped, system="terse")
    assert len(found) == 1
    assert found[0].startswith("messages[5].content")
    assert "thinking block" in found[0]
    bare = [{"role": m["role"], "content": [b for b in m["content"] if b["type"] != "thinking"]
             if isinstance(m["content"], list) else m["content"]} for m in messages]
    assert len(ordering_problems(bare, system="terse", thinking=True)) == 1
    assert ordering_problems(bare, system="terse", thinking=False) == []
    assert ordering_problems(messages, system="terse") == []


#: A fixed corpus of named messages (the issue's own example first).
NAMED = [
    {"role": "user", "content": "hi", "name": "customer_support_tier_two"},
    {"role": "system", "content": "You are terse.", "name": "policy"},
    {"role": "assistant", "content": "Hello there, how can I help?", "name": "agent_7"},
    {"role": "user", "content": "Où est la gare ? 駅はどこですか", "name": "traveller_ünïcode"},
]


def test_a_messages_name_counts_its_own_tokens_and_one_more() -> None:
    """Each named message counts what the OpenAI Cookbook's num_tokens_from_messages
    counts: 3 + its values' tokens (role, content, name) + 1 for the name; the
    issue's example is 11 tokens (it counted 6)."""
    count = resolve_counter("o200k_base")
    for message in NAMED:
        selection = select_messages_with_report([message], max_tokens=10_000,
                                                token_counter="o200k_base", format="openai")
        expected = (3 + count(message["role"]) + count(message["content"])
                    + count(message["name"]) + 1)
        assert selection.tokens == expected, message
    first = select_messages_with_report([NAMED[0]], max_tokens=100, token_counter="o200k_base")
    assert first.tokens == 11


def test_a_tool_messages_name_is_counted_in_openai_and_langchain() -> None:
    """A tool message's name (LangChain's ToolNode always sets one) adds its tokens and
    one more, in OpenAI dicts and in LangChain messages alike."""
    count = resolve_counter("o200k_base")
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}
    plain = {"role": "tool", "tool_call_id": "c1", "content": "found it"}
    named = {**plain, "name": "lookup_customer_records"}
    extra = count("lookup_customer_records") + 1
    tokens = [select_messages_with_report([call, m], max_tokens=10_000,
                                          token_counter="o200k_base").tokens
              for m in (plain, named)]
    assert tokens[1] - tokens[0] == extra
    ai = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {}, "id": "c1",
                                            "type": "tool_call"}])
    lc = [select_messages_with_report(
        [ai, ToolMessage(content="found it", tool_call_id="c1", **extra_fields)],
        max_tokens=10_000, token_counter="o200k_base").tokens
          for extra_fields in ({}, {"name": "lookup_customer_records"})]
    assert lc[1] - lc[0] == extra


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("budget", [60, 120])
def test_the_latest_user_message_is_kept_in_every_format(fmt: str, budget: int) -> None:
    """policy='documentqa' at 60 and 120 tokens: every format's window holds the
    latest user message (pinned), as Anthropic's always did; the OpenAI window was
    the system message alone."""
    rendered = render(fmt, "You are a weather assistant.", weather_conversation(), typed=False)
    selection = select_messages_with_report(
        rendered.messages, system=rendered.system, max_tokens=budget, policy="documentqa",
        format=fmt, token_counter="o200k_base", now=NOW)  # type: ignore[call-overload]
    last_user = max(k for k, m in enumerate(rendered.messages) if _is_user_text(fmt, m))
    assert last_user in selection.kept
    pinned = [entry for entry in selection.report.included if entry.item.pinned]
    assert any(entry.item.metadata.get("chat.message_index") == last_user
               or (entry.item.metadata.get("chat.message_index", 0) <= last_user
                   < entry.item.metadata.get("chat.message_index", 0)
                   + entry.item.metadata.get("chat.message_count", 0)) for entry in pinned)


def _is_user_text(fmt: str, message: Any) -> bool:
    if isinstance(message, HumanMessage):
        return True
    if not isinstance(message, dict) or message.get("role") != "user":
        return False
    content = message.get("content")
    return isinstance(content, str) or any(
        isinstance(block, dict) and block.get("type") in ("text", "input_text")
        for block in content or ())


def test_a_pinned_overflow_names_the_messages_and_suggests_trim() -> None:
    """A 40,000-token tool result in the current turn (Anthropic, thinking: pinned
    with the turn's start) at a smaller budget raises PinnedBudgetError naming the
    pinned messages and their tokens, and saying trim=; with trim= the same call
    fits."""
    messages = _thinking_loop()
    messages[6] = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2",
                                                "content": "log line ok " * 13_000}]}
    with pytest.raises(PinnedBudgetError) as raised:
        select_messages(messages, system="terse", max_tokens=8_000, now=NOW)
    text = str(raised.value)
    assert "messages[4:7]" in text
    assert "trim=" in text
    assert raised.value.pinned_tokens > 30_000
    options = SelectOptions(max_tokens=8_000, trim={"ToolOutput": 2_000})
    assert select_messages(messages, options, system="terse", now=NOW)


def test_langchain_system_message_is_counted_when_in_the_list() -> None:
    """A LangChain SystemMessage in the list is counted and pinned (the middleware
    puts create_agent's system prompt there; see tests/integrations)."""
    messages = [SystemMessage("be brief " * 40), HumanMessage("hi")]
    selection = select_messages_with_report(messages, max_tokens=1_000)
    assert selection.report.included[0].item.pinned
    assert selection.report.included[0].item.tokens > 40


def test_the_cli_selects_a_chat_files_exchanges_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cupellation select` on a chat file, at budgets from 40 to 400 tokens (no
    --target-tokens: it defaults to --max-tokens): a tool call and its results are
    selected as one item, so the kept messages never hold a call without its result
    or a result without its call (at 60 it kept a logs({}) call and dropped its
    result)."""
    messages = [
        {"role": "system", "content": "You are an operations assistant."},
        {"role": "user", "content": "What do the logs say?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "logs", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "uptime",
                                                          "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "E_LOG_LINE error rate 0.2% " * 20},
        {"role": "tool", "tool_call_id": "c2", "content": "up 41 days"},
        {"role": "assistant", "content": "The error rate is 0.2%."},
        {"role": "user", "content": "Thanks."},
    ]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    for budget in (40, 60, 100, 200, 400):
        capsys.readouterr()
        assert main(["select", str(path), "--max-tokens", str(budget), "--report", "-"]) == 0
        report = SelectionReport.from_json(capsys.readouterr().out)
        contents = [entry.item.content for entry in report.included]
        calls = [c for c in contents if "logs({})" in c]
        assert all("E_LOG_LINE" in c and "up 41 days" in c for c in calls), contents
        assert not any("E_LOG_LINE" in c and "logs({})" not in c for c in contents)
        exchange = [e.item for e in report.included + report.excluded
                    if "logs({})" in e.item.content]
        assert len(exchange) == 1
        assert exchange[0].metadata[EXCHANGE_KEY] == 5  # text, two calls, two results
