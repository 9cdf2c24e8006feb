"""``select_messages``: a provider's message list in, the messages that fit the budget
out, in conversation order, in the same shape, with every decision explained.

The list is read into a conversation (:mod:`._conversation`: each message read once,
grouped into units, each unit one :class:`~cupellation.ContextItem`, remembered
between the calls of an agent loop), so the specification's pipeline selects units
and its report explains units; the kept units' original message objects are returned.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar, Unpack, overload

import msgspec

from .._collectors import (
    DiagnosticTraceCollector,
    FanOutCollector,
    TraceCollector,
    TraceDetailLevel,
)
from .._model import ContextBudget, ContextItem
from .._pipeline import Pipeline
from .._report import SelectionReport
from ..events import RunInfo
from ..exceptions import (
    ConfigurationError,
    DecodeError,
    InvalidTypeError,
    InvalidValueError,
    PinnedBudgetError,
)
from ..placing import ChronologicalPlacer
from ..policy import Policy, get_preset
from ._conversation import (
    Conversation,
    Request,
    check_given_format,
    detect_format,
    read_conversation,
)
from ._messages import (
    ASSISTANT,
    CALLS,
    FORMATS,
    REASONING,
    RESULTS,
    THINKING_BLOCKS,
    MessageFormat,
    field_of,
    without_thinking,
)
from ._options import SelectKeywords, SelectOptions, ThinkingMode, merged_options
from ._reading import read_message
from ._tokens import resolve_counter
from ._trim import check_limits
from ._units import group, last_turn_start

__all__ = [
    "Choice",
    "Chosen",
    "MessageSelection",
    "choice",
    "choose",
    "ordering_problems",
    "read_messages",
    "select_messages",
    "select_messages_with_report",
    "selection",
]

_M = TypeVar("_M")
#: The shape of the messages a selection returns: the input's (a list, a tuple, a dict).
_S_co = TypeVar("_S_co", covariant=True)
_DEFAULT_PRESET = "chat"


# -- the result -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageSelection(Generic[_S_co]):
    """What :func:`select_messages_with_report` returns.

    ``messages`` is what :func:`select_messages` returns (the kept messages, in the
    shape given: ``MessageSelection[list[M]]`` for a list of ``M``,
    ``MessageSelection[dict[str, object]]`` for a mapping); ``report`` explains
    every unit, kept or left out, in conversation order. ``kept`` and ``dropped``
    are indices into the list given; ``trimmed`` the kept messages sent as trimmed
    copies, ``thinking_stripped`` those sent without
    their thinking blocks. ``tokens`` is the window's count (the kept units'
    tokens); ``token_counter`` names the counter and ``token_estimates`` says
    whether any count is an estimate.
    """

    messages: _S_co
    report: SelectionReport
    kept: tuple[int, ...]
    dropped: tuple[int, ...]
    trimmed: tuple[int, ...]
    thinking_stripped: tuple[int, ...]
    tokens: int
    token_counter: str
    token_estimates: bool


# -- the pipeline -----------------------------------------------------------------------

_PIPELINES: dict[int, tuple[object, Pipeline]] = {}
_PIPELINES_KEPT = 16


def _pipeline(policy: Policy | Pipeline | str | None) -> tuple[Pipeline, ContextBudget | None]:
    """The pipeline of ``policy``, placing in conversation order without deduplication
    (see select_messages), and the policy's own budget."""
    key = policy if policy is not None else _DEFAULT_PRESET
    found = _PIPELINES.get(id(key))
    if found is not None and found[0] is key:
        return found[1], found[1].budget
    if isinstance(key, str):
        source: Policy | Pipeline = get_preset(key)
    elif isinstance(key, Policy | Pipeline):
        source = key
    else:
        raise InvalidTypeError("policy", policy, "a Policy, a Pipeline, a preset name or None")
    built = source.build_pipeline() if isinstance(source, Policy) else source
    pipeline = built.with_placer(ChronologicalPlacer()).with_deduplication(False)
    if len(_PIPELINES) >= _PIPELINES_KEPT:
        _PIPELINES.pop(next(iter(_PIPELINES)))
    _PIPELINES[id(key)] = (key, pipeline)
    return pipeline, pipeline.budget


def _budget(max_tokens: int | None, target_tokens: int | None,
            budget: ContextBudget | None, fallback: ContextBudget | None) -> ContextBudget:
    if budget is not None:
        if max_tokens is not None or target_tokens is not None:
            raise ConfigurationError("budget", budget,
                                     "give either budget= or max_tokens= / target_tokens=")
        if not isinstance(budget, ContextBudget):
            raise InvalidTypeError("budget", budget, "a ContextBudget or None")
        return budget
    if max_tokens is not None:
        return ContextBudget(max_tokens=max_tokens,
                             target_tokens=max_tokens if target_tokens is None else target_tokens)
    if target_tokens is not None:
        raise ConfigurationError("max_tokens", None, "is needed with target_tokens")
    if fallback is None:
        raise ConfigurationError("budget", None, "pass max_tokens= (and target_tokens=), "
                                                 "budget=, or a policy with a budget")
    return fallback


# -- the call ---------------------------------------------------------------------------


def _unpack(messages: Any, system: Any) -> tuple[Sequence[Any], Any, bool, str | None]:
    """(the message list, the system prompt, whether one was given, the key of the
    mapping holding the list or None for a bare list)."""
    if isinstance(messages, Mapping):
        key = "messages" if "messages" in messages else "input" if "input" in messages else None
        if key is None:
            raise DecodeError("messages", None, "is required (a list, or a mapping with a "
                                                "'messages' or 'input' list)")
        given = messages[key]
        if not isinstance(given, list | tuple):
            raise DecodeError(key, given, "must be a list of messages")
        if "system" in messages:
            if system is not None:
                raise ConfigurationError("system", system,
                                         "is given twice: as system= and in the mapping")
            return given, messages["system"], messages["system"] is not None, key
        return given, system, system is not None, key
    if isinstance(messages, list | tuple):
        return messages, system, system is not None, None
    raise DecodeError("messages", messages,
                      "must be a list of messages, or a mapping with a 'messages' list")


def _shaped(messages: Any, key: str | None, kept: list[Any]) -> Any:
    if key is None:
        return kept if isinstance(messages, list) else tuple(kept)
    return {**messages, key: kept}


class Choice(NamedTuple):
    """How a call selects, once its options are checked (see :func:`choice`)."""

    pipeline: Pipeline
    budget: ContextBudget
    collector: TraceCollector | None
    run_info: RunInfo | None
    anthropic_thinking: ThinkingMode
    want_report: bool


class Chosen(NamedTuple):
    """What a call chose: the messages to send, the units placed, the report (when
    asked for) and the messages sent without their thinking blocks."""

    kept: list[Any]
    placed: list[ContextItem]
    report: SelectionReport | None
    stripped: tuple[int, ...]


def choice(options: SelectOptions, *, want_report: bool) -> Choice:
    """The checked options of a call that selects (see :class:`SelectOptions`)."""
    pipeline, policy_budget = _pipeline(options.policy)
    return Choice(pipeline, _budget(options.max_tokens, options.target_tokens, options.budget,
                                    policy_budget),
                  options.collector, options.run_info, options.anthropic_thinking, want_report)


def choose(conversation: Conversation, how: Choice) -> Chosen:
    """Run the pipeline on ``conversation``'s units and map the placed units back to
    the messages to send."""
    diagnostics: DiagnosticTraceCollector | None = None
    sink = how.collector
    if how.want_report:
        diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
        sink = diagnostics if sink is None else FanOutCollector(diagnostics, sink)
    try:
        placed = how.pipeline.run(conversation.candidates, how.budget, sink,
                                  run_info=None if sink is None else _with_counter(
                                      how.run_info, conversation))
    except PinnedBudgetError as error:
        raise _named_overflow(conversation, error) from None
    kept = _kept_objects(conversation, placed)
    stripped: tuple[int, ...] = ()
    if how.anthropic_thinking == "strip_after_change" and conversation.fmt == "anthropic":
        kept, stripped = _strip_thinking(conversation, placed)
    report = diagnostics.build_report() if diagnostics is not None else None
    return Chosen(kept, placed, report, stripped)


def selection(conversation: Conversation, messages: _M, chosen: Chosen) -> MessageSelection[_M]:
    """The :class:`MessageSelection` of a call: ``messages`` in the shape given."""
    assert chosen.report is not None
    kept = _kept_indices(conversation, chosen.placed)
    kept_set = set(kept)
    return MessageSelection(
        messages=messages, report=chosen.report, kept=tuple(kept),
        dropped=tuple(k for k in range(len(conversation.messages)) if k not in kept_set),
        trimmed=tuple(k for k in kept if conversation.messages[k].trimmed),
        thinking_stripped=chosen.stripped,
        tokens=sum(item.tokens for item in chosen.placed),
        token_counter=conversation.counter.name, token_estimates=conversation.estimates)


class _Call(NamedTuple):
    """The reading options of one select_messages call (see :class:`SelectOptions`);
    a named tuple, made on every call in half the time of a frozen dataclass."""

    system: Any
    options: SelectOptions
    now: datetime | None


def _run(messages: Any, call: _Call, how: Choice) -> tuple[Conversation, Chosen, Any]:
    """Read ``messages`` (remembered, grown or afresh) and select: the conversation,
    what was chosen, and the kept messages in the shape given."""
    conversation, key = _read(messages, call.options, call.system, call.now)
    chosen = choose(conversation, how)
    return conversation, chosen, _shaped(messages, key, chosen.kept)


def _read(messages: Any, options: SelectOptions, system: Any, now: datetime | None
          ) -> tuple[Conversation, str | None]:
    """The conversation of ``messages`` and the key of the mapping holding them."""
    if now is not None and (not isinstance(now, datetime) or now.utcoffset() is None):
        raise InvalidValueError("now", now, "must be a timezone-aware datetime or None")
    given, system_value, has_system, key = _unpack(messages, system)
    request = Request(given=given, system=system_value, has_system=has_system,
                      fmt=options.format, counter_spec=options.token_counter,
                      limits=check_limits(options.trim), now=now, name=key or "messages")
    return read_conversation(request), key


def read_messages(messages: Any, options: SelectOptions, *, system: Any = None,
                  now: datetime | None = None) -> Conversation:
    """The conversation ``select_messages(messages, options, system=system, now=now)``
    selects from: the same reading, units and items (remembered as that call
    remembers them), for the message analytics that run its pipeline themselves."""
    return _read(messages, options, system, now)[0]


def _named_overflow(conversation: Conversation, error: PinnedBudgetError) -> PinnedBudgetError:
    """``error`` saying which messages are pinned and how to make them fit."""
    named: list[str] = []
    for item in conversation.candidates:
        if not item.pinned:
            continue
        span = conversation.spans[id(item)]
        where = ("system" if span.start < 0 else f"messages[{span.start}]"
                 if span.end - span.start == 1 else f"messages[{span.start}:{span.end}]")
        named.append(f"{where} ({item.kind.value}, {item.tokens} tokens)")
    return PinnedBudgetError(
        error.pinned_tokens, error.available_tokens,
        detail=f"the pinned messages are {', '.join(named)}; raise the budget, or pass "
               "trim= (such as trim={'ToolOutput': 2000}) to cut long tool results and "
               "messages to their head and tail")


def _kept_objects(conversation: Conversation, placed: list[ContextItem]) -> list[Any]:
    """The messages to send for the units ``placed``, in order: ``conversation.sent``
    less the messages of the units left out.

    Units are placed in conversation order (a ChronologicalPlacer over stamps that
    rise with the unit), so ``placed`` is ``conversation.candidates`` with some left
    out. In an agent loop the kept units' messages usually come in a few runs of
    consecutive messages (everything, or everything but the oldest exchanges): each
    run is then found by one binary search and copied as one slice, a cost that grows
    with the runs, not the units. When more than one unit in nine is left out (runs
    are then likely many), or past :data:`_RUNS_WORTH_SEARCHING` runs, each (remaining)
    unit's messages are looked up instead (~90 ns a unit). At 100 units with three left
    out, 3 us instead of 7 us; at 500 units of which 370 are left out here and there,
    the lookups alone (benchmarks/bench_chat.py)."""
    candidates = conversation.candidates
    sent = conversation.sent
    count = len(placed)
    if count == len(candidates):
        return list(sent)
    outputs = conversation.outputs
    if (len(candidates) - count) * 8 > count:
        return list(itertools.chain.from_iterable(map(outputs.__getitem__, map(id, placed))))
    spans, positions = conversation.spans, conversation.positions
    kept: list[Any] = []
    first = 0
    for _ in range(_RUNS_WORTH_SEARCHING):
        if first == count:
            return kept
        end = _run_end(candidates, placed, first, positions[id(placed[first])])
        kept += sent[max(spans[id(placed[first])].start, 0):spans[id(placed[end - 1])].end]
        first = end
    kept += itertools.chain.from_iterable(map(outputs.__getitem__, map(id, placed[first:])))
    return kept


#: How many runs of consecutive kept units _kept_objects copies as slices before it
#: looks up the rest unit by unit: a run costs ~1 us, a lookup ~90 ns.
_RUNS_WORTH_SEARCHING = 4


def _run_end(candidates: list[ContextItem], placed: list[ContextItem], first: int,
             start: int) -> int:
    """The end of the run of ``placed`` from ``first`` that is ``candidates`` from
    ``start``, consecutively: ``placed[k] is candidates[start + k - first]`` holds up
    to the first unit left out after ``start`` and fails from there on (``placed``
    is an in-order subsequence), so the end is found by binary search."""
    low, high = first + 1, min(len(placed), first + len(candidates) - start)
    while low < high:
        middle = (low + high) // 2
        if placed[middle] is candidates[start + middle - first]:
            low = middle + 1
        else:
            high = middle
    return low


def _with_counter(run_info: RunInfo | None, conversation: Conversation) -> RunInfo:
    """``run_info`` with the conversation's token counter, so logs and spans say how
    the run's tokens were counted (the application's own fields are kept)."""
    counter = conversation.counter.name
    if run_info is None:
        return RunInfo(token_counter=counter, token_estimates=conversation.estimates)
    return msgspec.structs.replace(run_info, token_counter=run_info.token_counter or counter,
                                   token_estimates=run_info.token_estimates
                                   or conversation.estimates)


def _kept_indices(conversation: Conversation, placed: list[ContextItem]) -> list[int]:
    spans = conversation.spans
    return [index for item in placed for index in range(max(spans[id(item)].start, 0),
                                                          spans[id(item)].end)]


def _strip_thinking(conversation: Conversation, placed: list[ContextItem]
                    ) -> tuple[list[Any], tuple[int, ...]]:
    """The kept messages, those after the first change (a message left out or
    trimmed) without their thinking blocks; and which were stripped."""
    indices = _kept_indices(conversation, placed)
    messages = conversation.messages
    kept_set = set(indices)
    change = next((k for k, m in enumerate(messages) if k not in kept_set or m.trimmed),
                  len(messages))
    # The current turn's first assistant message keeps its thinking: Anthropic refuses
    # a final assistant turn that does not start with a thinking block.
    current = _current_turn_opener(messages)
    out: list[Any] = []
    stripped: list[int] = []
    for index in indices:
        message = messages[index]
        if (index > change and index != current and message.thinking
                and message.role == "assistant"):
            out.append(without_thinking(message.output))
            stripped.append(index)
        else:
            out.append(message.output)
    return out, tuple(stripped)


def _current_turn_opener(messages: Sequence[Any]) -> int | None:
    """The index of the first assistant message after the last message that starts a
    turn (the current turn's opener), or None."""
    start = last_turn_start(messages)
    first = 0 if start is None else start + 1
    return next((k for k in range(first, len(messages))
                 if messages[k].category in (ASSISTANT, CALLS, REASONING)), None)


@overload
def select_messages(messages: list[_M], options: SelectOptions | None = None, *,
                    system: object = None, now: datetime | None = None,
                    **keywords: Unpack[SelectKeywords]) -> list[_M]: ...
@overload
def select_messages(messages: tuple[_M, ...], options: SelectOptions | None = None, *,
                    system: object = None, now: datetime | None = None,
                    **keywords: Unpack[SelectKeywords]) -> tuple[_M, ...]: ...
@overload
def select_messages(messages: Mapping[str, object], options: SelectOptions | None = None, *,
                    system: object = None, now: datetime | None = None,
                    **keywords: Unpack[SelectKeywords]) -> dict[str, object]: ...
def select_messages(messages: list[_M] | tuple[_M, ...] | Mapping[str, object],
                    options: SelectOptions | None = None, *, system: object = None,
                    now: datetime | None = None,
                    **keywords: Unpack[SelectKeywords]
                    ) -> list[_M] | tuple[_M, ...] | dict[str, object]:
    """The messages that fit the budget, in conversation order and in the shape given.

    ``messages`` is a list of OpenAI Chat Completions messages, OpenAI Responses input
    items, Anthropic messages or LangChain messages: dicts, or the SDKs' own objects
    (``openai``, ``anthropic``, ``langchain_core``), mixed as an agent loop appends
    them; or a mapping holding the list under ``messages`` (``input`` for Responses),
    with Anthropic's ``system`` beside it. The result has the same shape: a list (a
    tuple for a tuple), or a copy of the mapping with the kept messages. The kept
    messages are the objects given (never rebuilt), except those ``trim`` cut and
    those ``anthropic_thinking="strip_after_change"`` strips, which are new objects
    of the same type.

    ``options`` (a :class:`SelectOptions`) holds the budget, policy, collector, token
    counter, trimming, format and thinking mode; each is also a keyword argument
    (``max_tokens=8000``, typed by :class:`~cupellation.chat.SelectKeywords`), which
    replaces that field of ``options``. The result's type follows the input's: a
    ``list[M]`` gives a ``list[M]``, a ``tuple[M, ...]`` a tuple, a mapping a
    ``dict[str, object]``.

    - ``system`` is Anthropic's system prompt, passed apart: counted and always kept,
      never returned. System and developer messages of the other formats stay in the
      list; the first is pinned.
    - The unit of selection is a message, or a whole tool exchange (an assistant
      message with tool calls and the results answering them; parallel calls, Anthropic
      ``tool_use`` / ``tool_result``, Responses ``reasoning`` / ``function_call`` /
      ``function_call_output``): kept or dropped together, so the result keeps the
      providers' ordering rules. A list that already breaks one raises
      :class:`~cupellation.exceptions.DecodeError` naming the message and the rule.
    - Pinned, in every format: the first system message (Anthropic: the first
      message, which must be the user's, and ``system``), and the unit holding the
      last user message that starts a turn (the question being answered), so the
      window always ends with the current turn. Anthropic: the start of a trailing
      tool-use turn with thinking blocks is one pinned unit (see docs/decisions.md).
    - A ``format`` given is checked, never trusted: a list holding a message that shows
      another format (an Anthropic ``tool_use`` block in a list given as
      ``"openai"``) raises :class:`~cupellation.exceptions.FormatMismatchError`
      naming the message and the format it shows, since read as the wrong format its
      tool exchanges would not be kept whole.
    - ``now``: the time stamped on new messages (default: the current time).

    Raises :class:`~cupellation.exceptions.PinnedBudgetError` naming the pinned
    messages when they alone exceed the budget (``trim=`` cuts a long tool result),
    and what :meth:`~cupellation.Pipeline.run` raises.

    .. versionadded:: 0.3

    .. versionchanged:: 0.4
       The options are one :class:`SelectOptions` value (keywords stay as sugar), and
       the result has the shape given: a list for a list, a tuple for a tuple, a dict
       for a request mapping.
    """
    chosen = merged_options(options, keywords)
    how = choice(chosen, want_report=False)
    shaped: list[_M] | tuple[_M, ...] | dict[str, object] = _run(
        messages, _Call(system, chosen, now), how)[2]
    return shaped


@overload
def select_messages_with_report(messages: list[_M], options: SelectOptions | None = None, *,
                                system: object = None, now: datetime | None = None,
                                **keywords: Unpack[SelectKeywords]
                                ) -> MessageSelection[list[_M]]: ...
@overload
def select_messages_with_report(messages: tuple[_M, ...], options: SelectOptions | None = None,
                                *, system: object = None, now: datetime | None = None,
                                **keywords: Unpack[SelectKeywords]
                                ) -> MessageSelection[tuple[_M, ...]]: ...
@overload
def select_messages_with_report(messages: Mapping[str, object],
                                options: SelectOptions | None = None, *,
                                system: object = None, now: datetime | None = None,
                                **keywords: Unpack[SelectKeywords]
                                ) -> MessageSelection[dict[str, object]]: ...
def select_messages_with_report(messages: list[_M] | tuple[_M, ...] | Mapping[str, object],
                                options: SelectOptions | None = None, *,
                                system: object = None, now: datetime | None = None,
                                **keywords: Unpack[SelectKeywords]
                                ) -> (MessageSelection[list[_M]]
                                      | MessageSelection[tuple[_M, ...]]
                                      | MessageSelection[dict[str, object]]):
    """:func:`select_messages`, with its report and what it did to each message (a
    :class:`MessageSelection` whose ``messages`` are in the shape given). The
    arguments are the same."""
    chosen = merged_options(options, keywords)
    how = choice(chosen, want_report=True)
    conversation, chosen_units, shaped = _run(messages, _Call(system, chosen, now), how)
    return selection(conversation, shaped, chosen_units)


def ordering_problems(messages: Any, *, system: Any = None,
                      format: MessageFormat | None = None,
                      thinking: bool | None = None) -> list[str]:
    """Every way ``messages`` breaks its provider's ordering rules (orphaned tool
    calls or results, results out of place, a first Anthropic message that is not the
    user's; with Anthropic extended thinking, a final turn still in its tool loop
    whose first assistant message does not start with a thinking block), one line each,
    worded after the provider's own 400 errors; empty when none. ``thinking`` says
    whether extended thinking is on (None: on when any message holds a thinking
    block). Reads the same inputs as :func:`select_messages` (a list holding a message
    of another format than ``format`` raises
    :class:`~cupellation.exceptions.FormatMismatchError`); counts nothing."""
    if format is not None and format not in FORMATS:
        raise InvalidValueError("format", format, f"must be one of {', '.join(FORMATS)} or None")
    given, _, has_system, key = _unpack(messages, system)
    name = key or "messages"
    if format is not None:
        check_given_format(given, 0, format, name)
        fmt: str = format
    else:
        fmt = detect_format(given, 0, has_system, name)[0] or "openai"
    counter = resolve_counter("estimate")
    read = [read_message(obj, fmt, f"{name}[{k}]", counter, {}) for k, obj in enumerate(given)]
    problems: list[str] = []
    group(read, fmt, 0, problems, name=name)
    if fmt == "anthropic" and (thinking or (thinking is None and any(m.thinking for m in read))):
        problems += _thinking_problems(read, name)
    return problems


def _thinking_problems(read: list[Any], name: str) -> list[str]:
    """Anthropic with thinking on: the final assistant turn, while it is in its tool
    loop (the list ends with tool results the model is to continue from), must start
    with a thinking block."""
    opener = _current_turn_opener(read)
    if opener is None or not read or read[-1].category != RESULTS or not any(
            m.category == CALLS for m in read[opener:]):
        return []
    content = field_of(read[opener].obj, "content")
    first = content[0] if isinstance(content, list | tuple) and content else None
    if first is not None and field_of(first, "type") in THINKING_BLOCKS:
        return []
    return [f"{name}[{opener}].content: does not start with a thinking block, but it opens "
            "the final assistant turn, which uses tools; Anthropic refuses it: \"When "
            "`thinking` is enabled, a final `assistant` message must start with a thinking "
            "block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)\""]
