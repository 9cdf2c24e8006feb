"""One form of the selection options (issue 27): SelectOptions is their only
declaration, the keyword sugar of every entry point is its TypedDict (keys and types
held equal to the dataclass's fields), and no entry point's public signature says
``Any``; the result types follow the input, as mypy --strict sees them here."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, assert_type, get_type_hints

import pytest

from cupellation import MessageHistory, SelectOptions, select_messages, select_messages_with_report
from cupellation.chat import MessageSelection, SelectKeywords

from ._signatures import anys_in, getter, holds_any

NOW = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)


def test_the_keywords_typeddict_is_the_dataclass_fields() -> None:
    """SelectKeywords has exactly SelectOptions' fields as keys, each of the field's
    type, and every key optional: a field added to one and not the other, or typed
    differently, fails here, so the keyword sugar cannot drift from the value."""
    fields = {field.name: field for field in dataclasses.fields(SelectOptions)}
    field_types = get_type_hints(SelectOptions)
    key_types = get_type_hints(SelectKeywords)
    assert set(key_types) == set(fields)
    assert {name: key_types[name] for name in fields} == {
        name: field_types[name] for name in fields}
    assert SelectKeywords.__optional_keys__ == frozenset(fields)
    assert all(field.default is not dataclasses.MISSING for field in fields.values())


def _signatures() -> Iterator[tuple[str, Callable[..., object]]]:
    """Every public callable of cupellation.chat through which the selection options
    arrive (each integration's tests check its own constructors the same way)."""
    entries: list[tuple[str, Callable[..., object]]] = [
        ("select_messages", select_messages),
        ("select_messages_with_report", select_messages_with_report),
        ("MessageHistory.__init__", MessageHistory.__init__),
        ("MessageHistory.append", MessageHistory.append),
        ("MessageHistory.extend", MessageHistory.extend),
        ("MessageHistory.select", MessageHistory.select),
        ("MessageHistory.select_with_report", MessageHistory.select_with_report),
        ("MessageHistory.copy", MessageHistory.copy),
        ("SelectOptions.merge", SelectOptions.merge),
        ("SelectOptions.replace", SelectOptions.replace),
        ("SelectOptions", SelectOptions),
        ("MessageHistory.messages", getter(MessageHistory, "messages")),
        ("MessageHistory.system", getter(MessageHistory, "system")),
    ]
    yield from entries


def test_no_entry_point_signature_says_any() -> None:
    """select_messages and select_messages_with_report (each overload too),
    MessageHistory's methods and SelectOptions: no parameter or return type is or
    holds Any (the keyword sugar's TypedDict, the result's MessageSelection and the
    trim limits included)."""
    signatures = list(_signatures())
    assert sum(len(typing.get_overloads(function)) for _, function in signatures) == 6
    assert anys_in(signatures) == {}
    assert holds_any(dict[str, list[Any]])  # the checker sees what it must
    assert holds_any(Callable[[Any], None])
    assert not holds_any(Callable[[MessageSelection[list[object]]], None])
    assert holds_any(typing.Unpack[SelectKeywords]) is False
    assert anys_in([("f", _untyped)]) == {"f": {"value": Any}}


def _untyped(value: Any) -> None:
    """What the checker must find."""


def test_the_result_follows_the_input_for_the_type_checker_and_at_run_time() -> None:
    """A list of dicts gives a list of them, a tuple a tuple, a request mapping a dict;
    with a report, a MessageSelection of the same shape; a history of dicts selects
    dicts. assert_type is checked by mypy --strict (run over tests/) and the
    shapes here at run time."""
    messages: list[dict[str, str]] = [{"role": "system", "content": "Be terse."},
                                      {"role": "user", "content": "hello"}]
    window = select_messages(messages, max_tokens=1000, token_counter="estimate", now=NOW)
    assert_type(window, list[dict[str, str]])
    assert window == messages
    as_tuple = select_messages(tuple(messages), max_tokens=1000, token_counter="estimate",
                               now=NOW)
    assert_type(as_tuple, tuple[dict[str, str], ...])
    assert as_tuple == tuple(messages)
    request: dict[str, object] = {"model": "gpt-4o", "messages": messages}
    shaped = select_messages(request, max_tokens=1000, token_counter="estimate", now=NOW)
    assert_type(shaped, dict[str, object])
    assert shaped == request
    report = select_messages_with_report(messages, SelectOptions(max_tokens=1000,
                                                                 token_counter="estimate"))
    assert_type(report, MessageSelection[list[dict[str, str]]])
    assert report.messages == messages
    history = MessageHistory(messages, max_tokens=1000, token_counter="estimate", now=NOW)
    assert_type(history, MessageHistory[dict[str, str]])
    assert_type(history.select(), list[dict[str, str]])
    assert history.select() == messages
    assert_type(history.select_with_report().messages, list[dict[str, str]])


def test_an_unknown_keyword_is_still_refused_at_run_time() -> None:
    """The TypedDict types the keywords for a type checker; at run time a keyword that
    is no field is refused naming it (an untyped caller cannot slip one through)."""
    keywords: dict[str, Any] = {"max_token": 100}
    with pytest.raises(ValueError, match="max_token"):
        select_messages([{"role": "user", "content": "hi"}], **keywords)
