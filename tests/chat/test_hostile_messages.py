"""Generated hostile message lists: select_messages, MessageHistory and
ordering_problems end with a window or a named error (a CupelError naming the
message), never another exception, whatever shape the messages take."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from _mutating import damaged_text
from cupellation import MessageHistory, select_messages
from cupellation.chat import (
    MessageFormat,
    chat_to_items,
    ordering_problems,
    select_messages_with_report,
)
from cupellation.chat._messages import format_hint
from cupellation.exceptions import (
    BudgetOverflowError,
    CupelError,
    DecodeError,
    FormatMismatchError,
    PinnedBudgetError,
)

from ._conversations import FORMATS, conversations, render, weather_conversation
from ._provider_rules import problems

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
@example(messages=[SimpleNamespace(role="user", content="a" * 400)], fmt=None, system=None,
         max_tokens=0, trim={"ToolOutput": 40, "Message": 60})
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
    history: MessageHistory[Any] = MessageHistory(format=fmt, token_counter="estimate")
    with pytest.raises(DecodeError) as appended:
        history.append(message)
    assert (appended.value.field, appended.value.value) == (field, value)
    assert len(history) == 0


_CHAT_TEXT = (
    '[{"role": "system", "content": "terse"}, {"role": "user", "content": "hi"}, '
    '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": '
    '"function", "function": {"name": "f", "arguments": "{}"}}]}, '
    '{"role": "tool", "tool_call_id": "c1", "content": "r"}]')


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), lines=st.booleans())
def test_damaged_chat_text_and_files_load_or_are_named(data: st.DataObject,
                                                      lines: bool) -> None:
    """A transcript as JSON or as JSON Lines, with characters deleted, doubled or
    replaced (quotes, brackets, newlines, U+2028, NUL, lone surrogates): load_chat of
    the text, and of a file holding it, gives items or a CupelError."""
    import tempfile  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from cupellation.chat import load_chat  # noqa: PLC0415

    text = (_CHAT_TEXT if not lines else "\n".join(
        json.dumps(m) for m in json.loads(_CHAT_TEXT)) + "\n")
    text = damaged_text(data, text, '{}[]",:\n\u2028\x00\ud800 nt1')
    _named_or_fine(lambda: load_chat(text, use_tiktoken=False))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("chat.jsonl" if lines else "chat.json")
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        _named_or_fine(lambda: load_chat(path, use_tiktoken=False))


def test_a_chat_file_that_is_not_utf8_is_named_with_its_line(tmp_path: Any) -> None:
    """load_chat of a JSON Lines file whose second line holds bytes that are not UTF-8
    (an encoded lone surrogate): a DecodeError naming the file and line 2, not a
    UnicodeDecodeError (found by the damaged-text test)."""
    from cupellation.chat import load_chat  # noqa: PLC0415

    path = tmp_path / "chat.jsonl"
    path.write_bytes(b'{"role": "user", "content": "hi"}\n'
                     b'{"role": "user", "content": "\xed\xa0\x80"}\n')
    with pytest.raises(DecodeError) as caught:
        load_chat(path, use_tiktoken=False)
    assert caught.value.field == str(path)
    assert caught.value.line == 2
    assert "is not UTF-8 text" in str(caught.value)


@dataclass(frozen=True)
class _FrozenMessage:
    role: str
    content: str


class _Unchangeable:
    """A message read by attribute whose copy refuses a new value."""

    role = "user"

    @property
    def content(self) -> str:
        return "word " * 400


def test_messages_of_any_object_kind_are_sent_trimmed_as_copies_or_named() -> None:
    """A message that is neither a dict nor an SDK model, over its trim limit: a plain
    attribute object and a frozen dataclass are sent as trimmed copies of their own
    type (the originals untouched); an object whose copy cannot take the trimmed text
    is refused naming the message (it raised AttributeError: no model_copy)."""
    long = "word " * 400
    for message in (SimpleNamespace(role="user", content=long),
                    _FrozenMessage(role="user", content=long)):
        (sent,) = select_messages([message], max_tokens=1000, trim={"Message": 60},
                                  format="openai", now=NOW)
        assert type(sent) is type(message)
        assert sent is not message
        assert message.content == long
        assert "characters omitted" in sent.content
    with pytest.raises(DecodeError) as caught:
        select_messages([_Unchangeable()], max_tokens=1000, trim={"Message": 60},
                        format="openai", now=NOW)
    assert caught.value.field == "messages[0]"
    assert "to send it edited" in str(caught.value)


# -- inputs that lie about their format -------------------------------------------------

_BUDGETS = (0, 60, 150, 300, 600, 1200, 10**6)


def _windows(messages: list[Any], system: str | None, given: str, budget: int
             ) -> Iterator[tuple[str, Callable[[], list[Any]]]]:
    """Each entry point's window of ``messages`` read as ``given`` (a thunk: calling
    it selects): select_messages, select_messages_with_report, a history made of the
    list and a history the list is appended to message by message."""
    options: dict[str, Any] = {"format": given, "token_counter": "estimate"}
    apart = system if given == "anthropic" else None  # passed apart in Anthropic only

    def appended() -> list[Any]:
        history = MessageHistory(system=apart, now=NOW, **options)
        for message in messages:
            history.append(message, now=NOW)
        return history.select(max_tokens=budget)

    yield "select_messages", lambda: select_messages(
        messages, system=system, max_tokens=budget, now=NOW, **options)
    yield "select_messages_with_report", lambda: select_messages_with_report(
        messages, system=system, max_tokens=budget, now=NOW, **options).messages
    yield "MessageHistory", lambda: MessageHistory(
        messages, system=apart, now=NOW, **options).select(max_tokens=budget)
    yield "MessageHistory.append", appended


def _window_or_mismatch(entry: str, window: Callable[[], list[Any]], real: str, given: str,
                        shown: bool) -> list[Any] | None:
    """The window, or None after checking the refusal: a FormatMismatchError naming the
    format the list shows and the one given (a list that shows none reads the same in
    every format, so it is never refused so). A history appended to message by message,
    or any entry point given a list that shows no format, may refuse first a message
    that shows none and that the format given cannot hold (a developer message given as
    Anthropic, an OpenAI system message given as LangChain): a DecodeError naming it."""
    try:
        return window()
    except PinnedBudgetError:
        return None
    except DecodeError as error:
        refused = error
    assert given != real, entry
    if not isinstance(refused, FormatMismatchError):
        assert entry == "MessageHistory.append" or not shown, (entry, refused)
        assert refused.field.startswith("messages["), refused
        return None
    assert shown, entry
    assert (refused.given_format, refused.detected_format) == (given, real)
    assert f"it reads as {real}, not as the format given ({given})" in str(refused)
    assert refused.field.startswith("messages[")
    return None


@pytest.mark.parametrize("typed", [False, True], ids=["dicts", "sdk-objects"])
@pytest.mark.parametrize("real", FORMATS)
@pytest.mark.parametrize("given_format", FORMATS)
def test_a_list_given_as_another_format_is_refused_naming_the_one_it_shows(
        real: str, given_format: str, typed: bool) -> None:
    """The weather transcript in each real format, given with each ``format=``, at
    budgets from nothing to everything, through every entry point: the right format
    gives windows the provider accepts; a wrong one is a FormatMismatchError naming
    the format the list shows and the one given (select_messages of Anthropic messages
    as "openai" returned a window starting with an assistant tool_use whose
    tool_result was dropped: 8 such windows in 53 combinations)."""
    rendered = render(real, "Be brief.", weather_conversation(), typed=typed)
    for budget in _BUDGETS:
        for entry, window in _windows(rendered.messages, rendered.system, given_format,
                                      budget):
            sent = _window_or_mismatch(entry, window, real, given_format, shown=True)
            if given_format == real:
                assert sent is not None or budget < 150, (entry, budget)
            if sent is not None:
                assert problems(real, sent) == [], (entry, budget)
    if given_format != real:
        with pytest.raises(FormatMismatchError):
            ordering_problems(rendered.messages, system=rendered.system,
                              format=cast(MessageFormat, given_format))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(real=st.sampled_from(FORMATS), given_format=st.sampled_from(FORMATS),
       typed=st.booleans(), steps=conversations(), budget=st.integers(0, 1500))
def test_generated_transcripts_in_any_given_format_keep_the_rules_or_are_refused(
        real: str, given_format: str, typed: bool, steps: list[Any], budget: int) -> None:
    """Generated transcripts (parallel calls, thinking, images) in any real format,
    given with any ``format=`` at any budget, through every entry point: a window with
    no provider-rule violation in its real format, or, when the list shows its format
    and it is not the one given, a FormatMismatchError naming it. A list that shows no
    format (plain text) reads as the format given: its window keeps that format's
    rules."""
    rendered = render(real, "You are terse.", steps, typed=typed)
    shown = any(format_hint(message) is not None for message in rendered.messages)
    for entry, window in _windows(rendered.messages, rendered.system, given_format, budget):
        if not shown and real == "anthropic" != given_format and entry.startswith("select"):
            # Anthropic's system prompt is passed apart in no other format
            with pytest.raises(DecodeError, match=r"^system: is passed apart only"):
                window()
            continue
        try:
            sent = _window_or_mismatch(entry, window, real, given_format, shown)
        except BudgetOverflowError:
            continue
        if sent is not None:
            assert problems(real if shown else given_format, sent) == [], entry


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@example(value=None, fmt=None)
@example(value=5, fmt="openai")
@given(value=st.one_of(_VALUE, st.dictionaries(st.sampled_from(["messages", "input",
                                                                  "system"]), _VALUE),
                       st.sets(st.integers(), max_size=3)),
       fmt=st.sampled_from([None, "openai", "openai-responses", "anthropic", "langchain"]))
def test_any_value_as_the_message_list_is_a_window_or_a_named_error(value: Any,
                                                                    fmt: Any) -> None:
    """Any value where the list of messages goes (None, numbers, text, bytes, mappings
    with or without ``messages``/``input``, sets): select_messages,
    select_messages_with_report, ordering_problems, a MessageHistory made of it and
    one extended by it answer or raise a CupelError (MessageHistory(None) and
    MessageHistory(5) raised a bare TypeError)."""
    options: dict[str, Any] = {"format": fmt, "token_counter": "estimate"}
    _named_or_fine(lambda: select_messages(value, max_tokens=500, now=NOW, **options))
    _named_or_fine(lambda: select_messages_with_report(value, max_tokens=500, now=NOW,
                                                       **options))
    _named_or_fine(lambda: ordering_problems(value, format=fmt))
    _named_or_fine(lambda: MessageHistory(value, now=NOW, **options))
    _named_or_fine(lambda: MessageHistory(now=NOW, **options).extend(value, now=NOW))


@pytest.mark.parametrize(("real", "given_format", "shown_by"), [
    ("anthropic", "openai", "messages[1].content[0] is a 'thinking' part"),
    ("openai", "anthropic", "messages[0] has role 'system'"),
])
def test_a_transcript_given_as_the_other_format_is_refused_not_read_short(
        real: str, given_format: Any, shown_by: str) -> None:
    """chat_to_items of the weather transcript given as the other format: a
    FormatMismatchError naming what shows its format (an Anthropic transcript given as
    "openai" came back as 9 items instead of 14, its tool calls and results left out
    without a word); given as its own format, every call and result is an item."""
    rendered = render(real, "Be brief.", weather_conversation(), typed=False)
    data: Any = (rendered.messages if rendered.system is None
                 else {"system": rendered.system, "messages": rendered.messages})
    with pytest.raises(FormatMismatchError) as caught:
        chat_to_items(data, format=given_format, use_tiktoken=False)
    assert (caught.value.given_format, caught.value.detected_format) == (given_format, real)
    assert caught.value.shown_by == shown_by
    items = chat_to_items(data, format=cast(Any, real), use_tiktoken=False)
    assert sum(item.kind.value == "ToolCall" for item in items) == 3
    assert sum(item.kind.value == "ToolOutput" for item in items) == 3
