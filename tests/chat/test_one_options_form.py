"""One form of the selection options (issue 27): SelectOptions is their only
declaration, the keyword sugar of every entry point is its TypedDict (keys and types
held equal to the dataclass's fields), and no entry point's public signature says
``Any``; the result types follow the input, as mypy --strict sees them here."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, assert_type, get_type_hints, is_typeddict

import pytest

from cupellation import MessageHistory, SelectOptions, select_messages, select_messages_with_report
from cupellation.chat import MessageSelection, SelectKeywords
from cupellation.integrations import langchain, openai_agents, pydantic_ai

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


def _holds_any(hint: object, seen: frozenset[int] = frozenset()) -> bool:
    """Whether ``hint`` is or holds ``Any`` (inside unions, generics, Unpack, a
    TypedDict's keys, a TypeVar's bound)."""
    if hint is Any:
        return True
    if id(hint) in seen:
        return False
    seen = seen | {id(hint)}
    if isinstance(hint, type) and is_typeddict(hint):
        return any(_holds_any(value, seen) for value in get_type_hints(hint).values())
    if isinstance(hint, typing.TypeVar):
        return any(_holds_any(value, seen) for value in (hint.__bound__, *hint.__constraints__)
                   if value is not None)
    return any(_holds_any(argument, seen) for argument in typing.get_args(hint)
               if argument is not Ellipsis and not isinstance(argument, list | str))


def _signatures() -> Iterator[tuple[str, Callable[..., object]]]:
    """Every public callable through which the selection options arrive, and the
    overloads of those that have them."""
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
        ("input_filter", openai_agents.input_filter),
        ("InputFilter.__init__", openai_agents.InputFilter.__init__),
        ("history_processor", pydantic_ai.history_processor),
        ("HistoryProcessor.__init__", pydantic_ai.HistoryProcessor.__init__),
        ("WindowMiddleware.__init__", langchain.WindowMiddleware.__init__),
    ]
    for name, function in entries:
        yield name, function
        for number, overload in enumerate(typing.get_overloads(function)):
            yield f"{name} (overload {number + 1})", overload
    for name in ("messages", "system"):
        prop = inspect.getattr_static(MessageHistory, name)
        assert isinstance(prop, property)
        assert prop.fget is not None
        yield f"MessageHistory.{name}", prop.fget


def test_no_entry_point_signature_says_any() -> None:
    """select_messages and select_messages_with_report (each overload too),
    MessageHistory's methods, SelectOptions and the integrations' constructors: no
    parameter or return type is or holds Any (the keyword sugar's TypedDict, the
    result's MessageSelection and the trim limits included)."""
    signatures = list(_signatures())
    assert len(signatures) > 20  # the overloads were found
    offenders = {name: {key: value for key, value in get_type_hints(
                     function, include_extras=True).items() if _holds_any(value)}
                 for name, function in signatures}
    assert {name: hints for name, hints in offenders.items() if hints} == {}
    assert _holds_any(dict[str, list[Any]])  # the checker sees what it must
    assert _holds_any(typing.Unpack[SelectKeywords]) is False


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
