"""SelectOptions: one frozen value for the options every message entry point takes,
with the keywords as sugar for its fields."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest

from cupellation import (
    ContextBudget,
    MessageHistory,
    SelectOptions,
    select_messages,
    select_messages_with_report,
)
from cupellation.exceptions import ConfigurationError, InvalidTypeError, InvalidValueError

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _chat() -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are terse."},
            *[{"role": role, "content": f"{role} message {k} " + "word " * 20}
              for k in range(6) for role in ("user", "assistant")],
            {"role": "user", "content": "last question"}]


def test_an_options_value_selects_as_its_keywords_do_everywhere() -> None:
    """select_messages, select_messages_with_report and MessageHistory given one
    SelectOptions send what the same fields as keywords send (a budget that leaves
    messages out, trimming, a policy)."""
    messages = _chat()
    options = SelectOptions(max_tokens=150, trim={"Message": 30}, policy="chat",
                            token_counter="estimate")
    by_keywords = select_messages(messages, max_tokens=150, trim={"Message": 30},
                                  policy="chat", token_counter="estimate", now=NOW)
    by_value = select_messages(messages, options, now=NOW)
    assert [m["content"] for m in by_value] == [m["content"] for m in by_keywords]
    assert len(by_value) < len(messages)
    report = select_messages_with_report(messages, options, now=NOW)
    assert [m["content"] for m in report.messages] == [m["content"] for m in by_value]
    history = MessageHistory(messages, options, now=NOW)
    assert [m["content"] for m in history.select()] == [m["content"] for m in by_value]
    assert history.options is options


def test_a_keyword_replaces_that_field_of_the_value() -> None:
    """A keyword given beside a value replaces its field; a budget given as keywords
    replaces the value's budget object and the other way round."""
    messages = _chat()
    options = SelectOptions(budget=ContextBudget(max_tokens=60, target_tokens=60),
                            token_counter="estimate")
    small = select_messages_with_report(messages, options, now=NOW)
    large = select_messages_with_report(messages, options, max_tokens=100_000, now=NOW)
    assert small.dropped
    assert not large.dropped
    back = select_messages_with_report(messages, SelectOptions(max_tokens=100_000),
                                       budget=options.budget, token_counter="estimate",
                                       now=NOW)
    assert back.dropped == small.dropped


def test_the_value_is_frozen_and_checked_when_made() -> None:
    """Fields cannot be set; a wrong field raises naming it, when the value is made
    (or replaced), not at the first call."""
    options = SelectOptions(max_tokens=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_tokens = 5  # type: ignore[misc]
    with pytest.raises(InvalidValueError, match="anthropic_thinking"):
        SelectOptions(anthropic_thinking="drop")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="format"):
        SelectOptions(format="gemini")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="max_tokens"):
        SelectOptions(max_tokens="100")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match=r"trim\['ToolOutput'\]"):
        options.replace(trim={"ToolOutput": 1})
    with pytest.raises(ConfigurationError, match="budget"):
        SelectOptions(max_tokens=10, budget=ContextBudget(max_tokens=10, target_tokens=10))
    with pytest.raises(InvalidValueError, match="max_token"):
        select_messages(_chat(), max_token=10)  # type: ignore[call-overload]
    with pytest.raises(InvalidTypeError, match="options"):
        select_messages(_chat(), {"max_tokens": 10})  # type: ignore[call-overload]


def test_a_history_keeps_its_reading_options_fixed() -> None:
    """A history's selections may change the budget or policy, not the format, counter
    or trimming it read its messages with (a ConfigurationError naming the field),
    whether given as keywords or in an options value (checked even when no keyword
    names them); a pickled history keeps its options."""
    history = MessageHistory(_chat(), max_tokens=150, token_counter="estimate", now=NOW)
    assert history.select(max_tokens=100_000) == history.messages
    with pytest.raises(ConfigurationError, match="token_counter"):
        history.select(token_counter="o200k_base")
    with pytest.raises(ConfigurationError, match="token_counter"):
        history.select(SelectOptions(token_counter="o200k_base"), max_tokens=100_000)
    with pytest.raises(ConfigurationError, match="trim"):
        history.select(trim={"ToolOutput": 200})
    copy = pickle.loads(pickle.dumps(history))
    assert copy.options == history.options
    assert [m["content"] for m in copy.select()] == [m["content"] for m in history.select()]


def test_return_types_follow_the_shape_given() -> None:
    """A list gives a list, a tuple a tuple, a mapping a dict with the same keys."""
    messages = _chat()
    assert isinstance(select_messages(messages, max_tokens=10_000), list)
    assert isinstance(select_messages(tuple(messages), max_tokens=10_000), tuple)
    shaped = select_messages({"messages": messages, "model": "gpt-4o"}, max_tokens=10_000)
    assert shaped["model"] == "gpt-4o"
    assert shaped["messages"] == messages
