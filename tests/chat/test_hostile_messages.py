"""Generated hostile message lists: select_messages, MessageHistory and
ordering_problems end with a window or a named error (a CupelError naming the
message), never another exception, whatever shape the messages take."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from _mutating import damaged_text
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
    history = MessageHistory(format=fmt, token_counter="estimate")
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
