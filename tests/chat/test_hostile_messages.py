"""Generated hostile message lists: select_messages, MessageHistory and
ordering_problems end with a window or a named error (a CupelError naming the
message), never another exception, whatever shape the messages take."""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cupellation import MessageHistory, select_messages
from cupellation.chat import chat_to_items, ordering_problems
from cupellation.exceptions import CupelError, DecodeError

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
EXAMPLES = int(os.environ.get("CUPELLATION_CHAT_EXAMPLES", "160"))

_TEXT = st.sampled_from(["", "hi", "é数据", "\u2028", "\x00", "a" * 300, "<|endoftext|>",
                         "c1", "c2", "\ud800"])
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=True), _TEXT)
_ROLE = st.sampled_from(["user", "assistant", "system", "developer", "tool", "function",
                         "model", "", None, 7])
_TYPE = st.sampled_from(["text", "image", "image_url", "input_image", "input_text",
                         "output_text", "tool_use", "tool_result", "thinking",
                         "redacted_thinking", "document", "file", "function_call",
                         "function_call_output", "reasoning", "message", "bogus", None, 3])
_KEYS = st.sampled_from(["type", "text", "id", "name", "input", "content", "tool_use_id",
                         "call_id", "arguments", "output", "source", "image_url", "url",
                         "data", "media_type", "thinking", "signature", "summary", "role",
                         "tool_calls", "function", "tool_call_id", "is_error", "status"])


def _values(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(children, max_size=3),
                     st.dictionaries(_KEYS, children, max_size=4),
                     st.fixed_dictionaries({"type": _TYPE},
                                           optional={"text": _TEXT, "id": _TEXT,
                                                     "name": _TEXT, "content": children,
                                                     "input": children,
                                                     "tool_use_id": _TEXT}))


_VALUE = st.recursive(_SCALAR, _values, max_leaves=12)
_CALL = st.fixed_dictionaries(
    {"id": _TEXT, "type": st.sampled_from(["function", "custom", None])},
    optional={"function": st.one_of(
        st.fixed_dictionaries({"name": _TEXT, "arguments": st.one_of(_TEXT, _VALUE)}),
        _VALUE)})
_DICT_MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": _ROLE},
        optional={"content": _VALUE, "tool_calls": st.one_of(st.lists(_CALL, max_size=3),
                                                             _VALUE),
                  "tool_call_id": st.one_of(_TEXT, _VALUE), "name": _TEXT}),
    st.fixed_dictionaries(
        {"type": _TYPE},
        optional={"call_id": _TEXT, "name": _TEXT, "arguments": _VALUE, "output": _VALUE,
                  "role": _ROLE, "content": _VALUE, "summary": _VALUE, "id": _TEXT}))
#: Messages as dicts, as objects with the same fields as attributes (as the SDKs' own
#: objects are read), and as any value at all.
_MESSAGE = st.one_of(_DICT_MESSAGE,
                     _DICT_MESSAGE.map(lambda fields: SimpleNamespace(**fields)), _VALUE)


def _named_or_fine(call: Any) -> None:
    """Run ``call``: a CupelError (a named refusal) or a result, nothing else."""
    with contextlib.suppress(CupelError):
        call()


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@example(messages=[{"role": "user", "tool_calls": 1}], fmt=None, system=None, max_tokens=0,
         trim=None)
@example(messages=[{"role": "user", "content": [{"type": []}]}], fmt=None, system=None,
         max_tokens=0, trim=None)
@example(messages=[{"type": "reasoning", "summary": {"text": "a dict, not a list"}}],
         fmt="openai-responses", system=None, max_tokens=100, trim=None)
@example(messages=[{"type": "function_call", "call_id": "c1", "name": 5, "arguments": "{}"}],
         fmt="openai-responses", system=None, max_tokens=100, trim=None)
@given(messages=st.lists(_MESSAGE, max_size=8),
       fmt=st.sampled_from([None, "openai", "openai-responses", "anthropic", "langchain"]),
       system=st.one_of(st.none(), _VALUE), max_tokens=st.integers(0, 3000),
       trim=st.one_of(st.none(), st.just({"ToolOutput": 40, "Message": 60})))
def test_hostile_message_lists_end_in_a_window_or_a_named_error(
        messages: list[Any], fmt: Any, system: Any, max_tokens: int,
        trim: dict[str, int] | None) -> None:
    """Random message lists (roles, contents, blocks, tool calls and Responses items of
    any shape, as dicts or objects, with lone surrogates, NaN, huge integers, nesting;
    found a TypeError for a ``tool_calls`` that is not a list and another for a block
    whose ``type`` is a list): every entry point
    either answers or raises a CupelError; a history refusing a message keeps the
    messages it had, and answers as select_messages on them would (or both refuse)."""
    options: dict[str, Any] = {"format": fmt, "token_counter": "estimate", "trim": trim}
    _named_or_fine(lambda: select_messages(messages, system=system, max_tokens=max_tokens,
                                           now=NOW, **options))
    _named_or_fine(lambda: ordering_problems(messages, system=system, format=fmt))
    _named_or_fine(lambda: chat_to_items(messages if system is None else
                                         {"system": system, "messages": messages},
                                         use_tiktoken=False))
    try:
        history = MessageHistory(system=system, now=NOW, **options)
    except CupelError:
        return
    accepted: list[Any] = []
    for message in messages:
        try:
            history.append(message, now=NOW)
        except CupelError:
            assert history.messages == accepted
            continue
        accepted.append(message)
        assert len(history) == len(accepted)
    _named_or_fine(lambda: history.select(max_tokens=max_tokens))


@pytest.mark.parametrize(("message", "fmt", "field", "value"), [
    ({"role": "assistant", "tool_calls": {"id": "c1"}}, "openai",
     "messages[0].tool_calls", {"id": "c1"}),
    ({"role": "assistant", "tool_calls": "c1"}, "openai", "messages[0].tool_calls", "c1"),
    ({"type": "reasoning", "summary": {"text": "t"}}, "openai-responses",
     "messages[0].summary", {"text": "t"}),
    ({"type": "function_call", "call_id": "c1", "name": 5, "arguments": "{}"},
     "openai-responses", "messages[0].name", 5),
    ({"type": "ai", "content": "x", "tool_calls": 3}, "langchain",
     "messages[0].tool_calls", 3),
])
def test_fields_of_the_wrong_shape_are_refused_naming_them(
        message: dict[str, Any], fmt: Any, field: str, value: Any) -> None:
    """A field that must be a list given as an object or a string (whose keys or
    characters would be read as calls), or a call's name that is not text (which would
    be sent on as its repr): refused with DecodeError naming the message's field and
    value, by select_messages and by a history's append alike."""
    with pytest.raises(DecodeError) as caught:
        select_messages([message], format=fmt, max_tokens=1000, token_counter="estimate")
    assert (caught.value.field, caught.value.value) == (field, value)
    history = MessageHistory(format=fmt, token_counter="estimate")
    with pytest.raises(DecodeError) as appended:
        history.append(message)
    assert (appended.value.field, appended.value.value) == (field, value)
    assert len(history) == 0
