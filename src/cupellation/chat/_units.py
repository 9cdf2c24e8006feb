"""Units of selection: a message alone, or a whole tool exchange, and the providers'
ordering rules that make them so.

The rules (each provider refuses a list that breaks one, with a 400; the wording
quoted is the provider's):

- **OpenAI Chat Completions** (and LangChain messages, which become them): an
  assistant message with ``tool_calls`` is followed at once by one ``tool`` message
  per call id, with only tool messages between ("An assistant message with
  'tool_calls' must be followed by tool messages responding to each 'tool_call_id'");
  a ``tool`` message answers a call of that assistant message ("messages with role
  'tool' must be a response to a preceeding message with 'tool_calls'").
- **OpenAI Responses**: every ``*_call`` item has its ``*_call_output`` with the same
  ``call_id`` after it and every output its call before it ("No tool output found for
  function call ...", "No tool call found for function call output with call_id
  ..."); a ``reasoning`` item is followed by the item it produced ("... of type
  'reasoning' was provided without its required following item") and that item keeps
  its reasoning ("... without its required 'reasoning' item").
- **Anthropic Messages**: the ``tool_use`` blocks of an assistant message are answered
  by ``tool_result`` blocks in the next message, a user message whose content starts
  with them ("`tool_use` ids were found without `tool_result` blocks immediately
  after"; "unexpected `tool_use_id` found in `tool_result` blocks"); the first message
  is a user message ("first message must use the \\"user\\" role").

So a unit is: an assistant message with tool calls and the messages answering them
(parallel calls included; Anthropic: the assistant message and the next user
message); for Responses, the run of one response's output items (reasoning, message,
calls) with the outputs answering its calls; every other message alone. Keeping or
dropping whole units, in their order, keeps every rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..exceptions import DecodeError
from ._messages import ASSISTANT, CALLS, REASONING, RESULTS, SYSTEM, USER, Message

__all__ = ["OpenEnd", "Span", "group", "last_turn_start", "trailing_turn"]

_MODEL_OUTPUT = frozenset({REASONING, ASSISTANT, CALLS})


@dataclass(slots=True)
class Span:
    """A unit: the messages ``[start, end)`` of the list."""

    start: int
    end: int
    exchange: bool = False
    model_only: bool = False  # Responses: model output items only, no results yet
    pinned: bool = False      # Anthropic: the start of a trailing thinking turn


class OpenEnd(NamedTuple):
    """A rule the list breaks only because it ends where it does (a call not answered
    yet, a reasoning item whose output is still to come): appending may settle it.
    ``at`` is the index of the message that breaks it; the rest is the DecodeError's."""

    at: int
    field: str
    value: object
    problem: str


class _Problems:
    """Collects problems, or raises the first as a DecodeError naming the message;
    problems of the list's open end go to ``open_end`` when given (see group)."""

    __slots__ = ("found", "name", "open_end")

    def __init__(self, found: list[str] | None, name: str,
                 open_end: list[OpenEnd] | None = None) -> None:
        self.found = found
        self.name = name
        self.open_end = open_end

    def __call__(self, index: int, path: str, value: object, problem: str) -> None:
        if self.found is None:
            raise DecodeError(f"{self.name}[{index}]{path}", value, problem)
        self.found.append(f"{self.name}[{index}]{path}: {problem}")

    def at_end(self, index: int, path: str, value: object, problem: str) -> None:
        """A problem appending may settle: put aside when ``open_end`` is given."""
        if self.open_end is None:
            self(index, path, value, problem)
        else:
            self.open_end.append(OpenEnd(index, f"{self.name}[{index}]{path}", value, problem))


def group(messages: Sequence[Message], fmt: str, start: int = 0,
          problems: list[str] | None = None, name: str = "messages",
          open_end: list[OpenEnd] | None = None) -> list[Span]:
    """The units of ``messages[start:]`` (``start`` must begin a unit).

    A list that breaks a rule raises :class:`~cupellation.exceptions.DecodeError`
    naming the message (``messages[4].tool_call_id``) and the rule; with
    ``problems`` given, each problem is added there instead and grouping goes on.
    With ``open_end`` given, the problems only the list's end causes (calls not
    answered yet, a trailing reasoning item) are added there instead: a list still
    being appended to (:class:`~cupellation.chat.MessageHistory`) is grouped as far
    as it goes, its open exchange a unit that the next messages complete.
    """
    report = _Problems(problems, name, open_end)
    if fmt == "anthropic":
        return _anthropic(messages, start, report)
    if fmt == "openai-responses":
        return _responses(messages, start, report)
    return _chat(messages, start, report)


def _chat(messages: Sequence[Message], start: int, problem: _Problems) -> list[Span]:
    units: list[Span] = []
    pending: set[str] = set()
    caller: Span | None = None
    for index in range(start, len(messages)):
        message = messages[index]
        if message.category == RESULTS:
            unknown = [answer for answer in message.answers if answer not in pending]
            if caller is None or unknown:
                problem(index, ".tool_call_id", (unknown or message.answers)[0],
                        "answers no tool call of the assistant message just before it (only "
                        "tool messages may come between); OpenAI refuses it: \"messages with "
                        "role 'tool' must be a response to a preceeding message with "
                        "'tool_calls'\"")
                units.append(Span(index, index + 1, exchange=True))
                continue
            pending.difference_update(message.answers)
            caller.end = index + 1
            continue
        if caller is not None and pending:
            _unanswered(problem, caller.start, sorted(pending))
        pending = set()
        caller = None
        unit = Span(index, index + 1, exchange=message.category == CALLS)
        units.append(unit)
        if message.category == CALLS:
            pending = {call_id for call_id, _, _ in message.calls}
            caller = unit
    if caller is not None and pending:
        _unanswered(problem.at_end, caller.start, sorted(pending))
    return units


def _unanswered(problem: Callable[[int, str, object, str], None], index: int,
                ids: list[str]) -> None:
    problem(index, ".tool_calls", ids,
            "has tool calls that no tool message answers next; OpenAI refuses it: \"An "
            "assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(ids)}\"")


def _responses(messages: Sequence[Message], start: int, problem: _Problems) -> list[Span]:
    units: list[Span] = []
    pending: dict[str, tuple[int, int]] = {}  # call id -> (its unit in ``units``, its item)
    for index in range(start, len(messages)):
        message = messages[index]
        if message.category == RESULTS:
            call_id = message.answers[0]
            owner = pending.pop(call_id, None)
            if owner is None:
                problem(index, ".call_id", call_id,
                        "answers no earlier call; OpenAI refuses it: \"No tool call found for "
                        f"function call output with call_id {call_id}.\"")
                units.append(Span(index, index + 1, exchange=True))
                continue
            at = owner[0]
            if at < len(units) - 1:  # answered after other items: one unit from the call on
                units[at:] = [Span(units[at].start, index + 1, exchange=True)]
                for other, (unit, item) in pending.items():
                    if unit > at:
                        pending[other] = (at, item)
            else:
                units[-1].end = index + 1
                units[-1].exchange = True
            units[-1].model_only = False
            continue
        if message.category in _MODEL_OUTPUT:
            last = units[-1] if units else None
            if last is not None and last.model_only and last.end == index:
                last.end = index + 1
            else:
                last = Span(index, index + 1, model_only=True)
                units.append(last)
            if message.category == CALLS:
                last.exchange = True
                for call_id, _, _ in message.calls:
                    pending[call_id] = (len(units) - 1, index)
            continue
        units.append(Span(index, index + 1))
    for call_id, (_, item) in pending.items():
        problem.at_end(item, ".call_id", call_id,
                       "has no output after it; OpenAI refuses it: \"No tool output found "
                       f"for function call {call_id}.\"")
    for index in range(start, len(messages)):
        if messages[index].category != REASONING:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        if following is None or following.category not in _MODEL_OUTPUT:
            (problem if following is not None else problem.at_end)(
                index, "", messages[index].role,
                    "is a reasoning item with no item after it that it produced; OpenAI "
                    "refuses it: \"... of type 'reasoning' was provided without its "
                    "required following item.\"")
    return units


def _anthropic(messages: Sequence[Message], start: int, problem: _Problems) -> list[Span]:
    units: list[Span] = []
    first = next((k for k in range(len(messages)) if messages[k].category != SYSTEM), None)
    if first is not None and first >= start and messages[first].category not in (USER,
                                                                                   RESULTS):
        problem(first, ".role", messages[first].role,
                "must be 'user' for the first message; Anthropic refuses it: \"messages: "
                "first message must use the \\\"user\\\" role\"")
    for index in range(start, len(messages)):
        message = messages[index]
        previous = messages[index - 1] if index > start else None
        caller = previous if previous is not None and previous.category == CALLS else None
        if message.category == RESULTS:
            if caller is None:
                problem(index, ".content", message.answers[0],
                        "holds tool_result blocks, but the message before it has no tool_use "
                        "block; Anthropic refuses it: \"`tool_result` block(s) provided when "
                        "previous message does not contain any `tool_use` blocks\"")
                units.append(Span(index, index + 1, exchange=True))
                continue
            asked = [call_id for call_id, _, _ in caller.calls]
            unexpected = [answer for answer in message.answers if answer not in asked]
            if unexpected:
                problem(index, ".content", unexpected[0],
                        "answers a tool_use id the message before it does not hold; Anthropic "
                        f"refuses it: \"unexpected `tool_use_id` found in `tool_result` "
                        f"blocks: {unexpected[0]}\"")
            if not message.results_first:
                problem(index, ".content", "tool_result",
                        "has text before its tool_result blocks, which must come first")
            _check_answered(problem, index - 1, asked, message.answers)
            units[-1].end = index + 1
            continue
        if caller is not None:
            _check_answered(problem, index - 1, [c[0] for c in caller.calls], [])
        units.append(Span(index, index + 1, exchange=message.category == CALLS))
    if len(messages) > start and messages[-1].category == CALLS:
        _check_answered(problem.at_end, len(messages) - 1,
                        [c[0] for c in messages[-1].calls], [])
    return units


def _check_answered(problem: Callable[[int, str, object, str], None], index: int, asked: list[str],
                    answered: list[str]) -> None:
    missing = [call_id for call_id in asked if call_id not in answered]
    if missing:
        problem(index, ".content", missing,
                "has tool_use blocks that the next message does not answer; Anthropic "
                "refuses it: \"`tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}\"")


def last_turn_start(messages: Sequence[Message], stop: int = 0) -> int | None:
    """The index of the last message that starts a turn (an Anthropic user message
    with more than tool results), or None; only messages from ``stop`` on are looked
    at."""
    for index in range(len(messages) - 1, stop - 1, -1):
        if messages[index].genuine_user:
            return index
    return None


def trailing_turn(messages: Sequence[Message], start: int | None) -> int | None:
    """Where the trailing turn of an Anthropic tool-use loop starts, when its start
    must be kept: ``start``, the index of the last message that starts a turn (a user
    message with more than tool results, ``last_turn_start(messages)``), when an
    assistant message after it holds thinking blocks and calls tools. None
    otherwise.

    With extended thinking, the last assistant turn (everything after that user
    message) must start with its thinking block ("When `thinking` is enabled, a final
    `assistant` message must start with a thinking block (preceeding the lastmost set
    of `tool_use` and `tool_result` blocks)"), so its first assistant message cannot
    be dropped while a later exchange of the turn is kept; nor its user message, or
    the turn would run into the assistant message before it.
    """
    if start is None:
        return None
    later = messages[start + 1:]
    if any(m.thinking for m in later) and any(m.category == CALLS for m in later):
        return start
    return None
