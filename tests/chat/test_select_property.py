"""A property of select_messages over generated transcripts, in every format: single
and parallel tool calls, Anthropic thinking blocks beside tool_use (and Responses
reasoning items), images as non-text parts, random budgets, presets and trim limits.
Whatever is kept, the provider's ordering rules hold (checked by an oracle apart from
the library), the kept messages are the objects given in their order, and the report
agrees with what was sent."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cupellation.chat import MessageFormat, ordering_problems, select_messages_with_report
from cupellation.exceptions import BudgetOverflowError, PinnedBudgetError

from ._conversations import FORMATS, Step, conversations, render
from ._provider_rules import problems

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
#: Examples per run (CUPELLATION_CHAT_EXAMPLES raises it for a long local run).
EXAMPLES = int(os.environ.get("CUPELLATION_CHAT_EXAMPLES", "160"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(FORMATS), typed=st.booleans(), steps=conversations(),
       max_tokens=st.integers(0, 1500), target_share=st.floats(0.3, 1.0),
       preset=st.sampled_from(["chat", "tooluse", "rag", "documentqa", "longrunning",
                               "debugging"]),
       trim=st.none() | st.integers(20, 120),
       thinking=st.sampled_from(["keep", "strip_after_change"]))
def test_every_selection_keeps_the_providers_rules(
        fmt: str, typed: bool, steps: list[Step], max_tokens: int, target_share: float,
        preset: str, trim: int | None, thinking: Any) -> None:
    """Generated transcripts, any budget: no orphaned tool call or result, results right
    after their calls, Anthropic's first message the user's and its trailing thinking
    turn intact (kept thinking), the kept messages the given objects in order (copies
    only where trimmed or stripped), the report's units in conversation order and their
    tokens within the budget."""
    rendered = render(fmt, "You are terse.", steps, typed=typed)
    form = cast(MessageFormat, fmt)
    assert ordering_problems(rendered.messages, system=rendered.system, format=form) == []
    limits = None if trim is None else {"ToolOutput": trim, "Message": trim + 10}
    target = int(max_tokens * target_share)
    everything = select_messages_with_report(
        rendered.messages, system=rendered.system, format=form, max_tokens=10**9,
        trim=limits, now=NOW)
    pinned_tokens = sum(e.item.tokens for e in everything.report.included if e.item.pinned)
    options: dict[str, Any] = {
        "system": rendered.system, "format": form, "max_tokens": max_tokens,
        "target_tokens": target, "policy": preset, "trim": limits,
        "anthropic_thinking": thinking, "now": NOW}
    if pinned_tokens > max_tokens:  # only then: the pinned units do not fit at all
        with pytest.raises(PinnedBudgetError):
            select_messages_with_report(rendered.messages, **options)
        return
    if pinned_tokens > target:  # Throw: the pinned units alone pass the target
        with pytest.raises(BudgetOverflowError):
            select_messages_with_report(rendered.messages, **options)
        return
    selection = select_messages_with_report(rendered.messages, **options)
    sent = selection.messages
    # The thinking rule binds when the transcript keeps it (thinking was on for its turn).
    thinking_rule = thinking == "keep" and problems(fmt, rendered.messages, thinking=True) == []
    assert problems(fmt, sent, thinking=thinking_rule) == []
    assert ordering_problems(sent, system=rendered.system, format=form) == []
    assert list(selection.kept) == sorted(selection.kept)
    assert set(selection.kept) | set(selection.dropped) == set(range(len(rendered.messages)))
    edited = set(selection.trimmed) | set(selection.thinking_stripped)
    for index, message in zip(selection.kept, sent, strict=True):
        assert (message is rendered.messages[index]) == (index not in edited)
    starts = [e.item.metadata.get("chat.message_index", -1) for e in selection.report.included]
    assert starts == sorted(starts)
    assert selection.tokens == sum(e.item.tokens for e in selection.report.included)
    unpinned = sum(e.item.tokens for e in selection.report.included if not e.item.pinned)
    pinned = selection.tokens - unpinned
    assert unpinned <= max(0, target - pinned)
    if fmt == "anthropic" and sent:
        assert sent[0] is rendered.messages[0]  # the first user message is pinned
