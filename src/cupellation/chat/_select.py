"""``select_messages``: a provider's message list in, the messages that fit the budget
out, in conversation order, in the same shape, with every decision explained.

Each message is read once (its text, tool calls, tool results and tokens), trimmed
when asked, and grouped into units: a message alone, or a whole tool exchange. Each
unit becomes one :class:`~cupellation.ContextItem`, so the specification's pipeline
selects units and its report explains units; the kept units' original message
objects are returned.

**Caching.** An agent loop sends the same list again with a message or two appended.
``select_messages`` keeps what it read of the last :data:`CONVERSATIONS_KEPT`
conversations (each message object, its counts, its unit and item), found again by
the identity of the list's messages: when a list starts with the messages of an
earlier call, only the new ones are read. Messages are read once per object, so a
message changed in place after a call is not read again: replace it with a new
object instead (or call :func:`clear_message_cache`).

**Timestamps.** The items' timestamps order the units and let time-based scorers
work: on the first call the last unit is stamped ``now`` (default: the current time)
and each earlier one a microsecond before; units appended later are stamped when they
are first seen, after every earlier unit. A unit keeps its stamp while its messages
stay the same objects, so a ``DecayScorer`` sees how long ago a message arrived.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

import msgspec

from .._collectors import (
    DiagnosticTraceCollector,
    FanOutCollector,
    TraceCollector,
    TraceDetailLevel,
)
from .._model import ContextBudget, ContextItem, ContextKind, ContextSource, fits_int64
from .._pipeline import Pipeline
from .._report import SelectionReport
from ..events import RunInfo
from ..exceptions import (
    ConfigurationError,
    DecodeError,
    InvalidTypeError,
    InvalidValueError,
)
from ..placing import ChronologicalPlacer
from ..policy import Policy, get_preset
from ._messages import (
    CALLS,
    FORMATS,
    RESULTS,
    SYSTEM,
    Message,
    MessageFormat,
    format_hint,
    read_message,
    read_system,
    without_thinking,
)
from ._tokens import CounterSpec, TextCounter, resolve_counter
from ._trim import TRIMMED_KEY, check_limits
from ._units import Span, group, trailing_turn

__all__ = [
    "CONVERSATIONS_KEPT",
    "MESSAGE_COUNT_KEY",
    "MESSAGE_START_KEY",
    "MessageSelection",
    "ThinkingMode",
    "clear_message_cache",
    "ordering_problems",
    "select_messages",
    "select_messages_with_report",
]

#: How many conversations ``select_messages`` remembers (see the module doc).
CONVERSATIONS_KEPT = 32
#: Metadata key: the index of a unit's first message in the list given.
MESSAGE_START_KEY = "chat.message_index"
#: Metadata key: how many messages the unit holds.
MESSAGE_COUNT_KEY = "chat.message_count"

#: What happens to Anthropic thinking blocks of kept messages (see select_messages).
ThinkingMode = Literal["keep", "strip_after_change"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_DEFAULT_PRESET = "chat"


# -- the result -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageSelection:
    """What :func:`select_messages_with_report` returns.

    ``messages`` is what :func:`select_messages` returns (the kept messages, in the
    shape given); ``report`` explains every unit, kept or left out, in conversation
    order. ``kept`` and ``dropped`` are indices into the list given; ``trimmed`` the
    kept messages sent as trimmed copies, ``thinking_stripped`` those sent without
    their thinking blocks. ``tokens`` is the window's count (the kept units'
    tokens); ``token_counter`` names the counter and ``token_estimates`` says
    whether any count is an estimate.
    """

    messages: Any
    report: SelectionReport
    kept: tuple[int, ...]
    dropped: tuple[int, ...]
    trimmed: tuple[int, ...]
    thinking_stripped: tuple[int, ...]
    tokens: int
    token_counter: str
    token_estimates: bool


# -- the cache of conversations ---------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Unit:
    span: Span
    item: ContextItem
    stamp: int  # microseconds since the epoch
    outputs: tuple[Any, ...]  # the objects its messages send


@dataclass(slots=True, eq=False)
class _Conversation:
    """What one conversation's messages were read into."""

    options: tuple[Any, ...]
    fmt: str
    counter: TextCounter
    objects: list[Any]
    messages: list[Message]
    units: list[_Unit]
    system: _Unit | None
    candidates: list[ContextItem]
    positions: dict[int, int]            # id(item) -> its index in candidates
    outputs: dict[int, tuple[Any, ...]]  # id(item) -> the objects its messages send
    spans: dict[int, Span]               # id(item) -> its messages
    estimates: bool
    pin_at: int | None                   # the message whose unit is pinned
    sent: list[Any]                      # each message's object to send, in order: the
    #                                      given one, or its trimmed copy


_LOCK = threading.Lock()
_CONVERSATIONS: list[_Conversation] = []


def clear_message_cache() -> None:
    """Forget every conversation ``select_messages`` remembers (the next call reads
    its messages afresh)."""
    with _LOCK:
        _CONVERSATIONS.clear()


def _common_prefix(known: list[Any], given: Sequence[Any]) -> int:
    """How many leading messages ``given`` shares with ``known``, by identity."""
    if all(map(operator.is_, known, given)):  # C-level: stops at the shorter list
        return min(len(known), len(given))
    for index, (old, new) in enumerate(zip(known, given, strict=False)):
        if old is not new:
            return index
    return min(len(known), len(given))  # pragma: no cover - found by the loop above


def _remembered(options: tuple[Any, ...], given: Sequence[Any]
                ) -> tuple[_Conversation | None, int]:
    """The remembered conversation sharing the longest prefix with ``given``."""
    best: _Conversation | None = None
    best_common = 0
    first = given[0] if given else None
    for conversation in _CONVERSATIONS:
        if conversation.options != options:
            continue
        objects = conversation.objects
        if objects and given and objects[0] is not first:
            continue
        common = _common_prefix(objects, given)
        if best is None or common > best_common:
            best, best_common = conversation, common
            if common == len(objects):
                break
    return best, best_common


def _remember(conversation: _Conversation, replaced: _Conversation | None) -> None:
    if _CONVERSATIONS and _CONVERSATIONS[0] is conversation:
        return  # already the most recently used
    if replaced is not None and replaced in _CONVERSATIONS:
        _CONVERSATIONS.remove(replaced)
    _CONVERSATIONS.insert(0, conversation)
    del _CONVERSATIONS[CONVERSATIONS_KEPT:]


# -- reading a conversation -------------------------------------------------------------


def _detect(given: Sequence[Any], start: int, has_system: bool, name: str
            ) -> tuple[str | None, str]:
    """The format ``given[start:]`` shows (None when it shows none), and why."""
    found: dict[str, str] = {}
    for index in range(start, len(given)):
        hint = format_hint(given[index])
        if hint is not None and hint[0] not in found:
            found[hint[0]] = f"{name}[{index}] {hint[1]}"
    if has_system and "anthropic" not in found:
        found["anthropic"] = "a system prompt passed apart"
    if len(found) > 1:
        (one, why_one), (other, why_other) = list(found.items())[:2]
        raise DecodeError(name, None, f"mixes formats: {why_one} ({one}), but {why_other} "
                                      f"({other}); pass format= to say which")
    if found:
        fmt, why = next(iter(found.items()))
        return fmt, why
    return None, ""


class _Request:
    """One call's arguments, checked, and the options a remembered conversation must
    share (a plain slotted class: it is made on every call)."""

    __slots__ = ("counter_spec", "fmt", "given", "has_system", "limits", "name", "now",
                 "options", "system")

    def __init__(self, *, given: Sequence[Any], system: Any, has_system: bool,
                 fmt: str | None, counter_spec: CounterSpec | TextCounter,
                 limits: Mapping[ContextKind, int], now: datetime | None, name: str) -> None:
        self.given = given
        self.system = system
        self.has_system = has_system
        self.fmt = fmt
        self.counter_spec = counter_spec
        self.limits = limits
        self.now = now
        self.name = name
        # A system prompt other than text is compared by identity: the conversation
        # holds it, so its id is not reused while the conversation is remembered.
        self.options: tuple[Any, ...] = (
            fmt, counter_spec, tuple(limits.items()), has_system,
            system if isinstance(system, str) else id(system))


def _read(request: _Request) -> _Conversation:
    """The conversation of ``request``: remembered, grown, or read afresh."""
    given = request.given
    options = request.options
    with _LOCK:
        known, common = _remembered(options, given)
        if known is not None and common == len(known.objects) == len(given):
            _remember(known, known)  # most recently used first
            return known
    conversation = _extend(request, known, common)
    with _LOCK:
        _remember(conversation, known if known is not None and common == len(
            known.objects) else None)
    return conversation


def _extend(request: _Request, known: _Conversation | None, common: int) -> _Conversation:
    """A conversation for ``request.given``, reusing ``known``'s first ``common``
    messages, and its units up to the last one that appending may change (the last
    unit; an Anthropic trailing turn from its start). Work is done for the new
    messages only, so a growing list costs what it grows by."""
    given = request.given
    name = request.name
    if known is None or common == 0:
        return _fresh(request)
    fmt, counter = known.fmt, known.counter
    detected, why = _detect(given, common, False, name)
    if request.fmt is None and detected is not None and detected != fmt:
        raise DecodeError(name, None, f"mixes formats: {why} ({detected}), but earlier "
                                      f"messages are {fmt}; pass format= to say which")
    new = [read_message(given[index], fmt, f"{name}[{index}]", counter, request.limits)
           for index in range(common, len(given))]
    messages = known.messages[:common] + new
    grown = common == len(known.messages)
    # Units ending at or before ``limit`` are kept as they are.
    limit = min(common, known.units[-1].span.start if known.units else 0)
    if fmt == "anthropic":
        turn = trailing_turn(messages)
        if turn is not None:
            limit = min(limit, turn)
    kept = len(known.units)
    while kept and known.units[kept - 1].span.end > limit:
        kept -= 1
    units = known.units[:kept]
    # Units regrouped unchanged (the same messages, all known) are taken as they were.
    reusable = {(unit.span.start, unit.span.end): unit for unit in known.units[kept:]
                if unit.span.end <= common}
    # Growing, the item -> position and messages maps are shared and only added to:
    # an item of an earlier call keeps its entry (the same in both: the units before
    # it are the same), so a call still placing it reads it safely.
    positions = known.positions if grown else dict(known.positions)
    outputs = known.outputs if grown else dict(known.outputs)
    spans = known.spans if grown else dict(known.spans)
    restart = units[-1].span.end if units else 0
    pin_at = known.pin_at
    if pin_at is None or pin_at >= common:
        pin_at = _pin_at(messages, fmt, restart if pin_at is None else 0)
    estimates = (known.estimates if grown else any(m.estimated_parts for m in messages)
                 ) or counter.estimate or any(m.estimated_parts for m in new)
    last_stamp = units[-1].stamp if units else (
        known.system.stamp if known.system is not None else None)
    added = _new_units(messages, _Reading(fmt, counter, restart, pin_at, last_stamp), request,
                       reusable)
    system_offset = 1 if known.system is not None else 0
    candidates = known.candidates[:kept + system_offset]
    for unit in added:
        positions[id(unit.item)] = len(candidates)
        outputs[id(unit.item)] = unit.outputs
        candidates.append(unit.item)
        spans[id(unit.item)] = unit.span
    return _Conversation(
        options=known.options, fmt=fmt, counter=counter, objects=list(given),
        messages=messages, units=units + added, system=known.system, candidates=candidates,
        positions=positions, outputs=outputs, spans=spans, estimates=estimates, pin_at=pin_at,
        sent=known.sent[:common] + [message.output for message in new])


def _fresh(request: _Request) -> _Conversation:
    """A conversation read from nothing."""
    given, name = request.given, request.name
    detected, _ = _detect(given, 0, request.has_system, name)
    fmt = request.fmt or detected or "openai"
    if request.has_system and fmt != "anthropic":
        raise DecodeError("system", request.system,
                          f"is passed apart only in the Anthropic format, not {fmt}")
    counter = resolve_counter(request.counter_spec,
                              flavour="anthropic" if fmt == "anthropic" else "openai")
    messages = [read_message(obj, fmt, f"{name}[{index}]", counter, request.limits)
                for index, obj in enumerate(given)]
    system: _Unit | None = None
    estimates = counter.estimate or any(m.estimated_parts for m in messages)
    stamp = _first_stamp(request.now, len(messages) + 1, None)
    if request.has_system:
        system_message = read_system(request.system, counter)
        estimates = estimates or system_message.estimated_parts > 0
        system = _unit(Span(-1, 0), [system_message], fmt, counter, request.limits, stamp,
                       pinned=True)
    pin_at = _pin_at(messages, fmt, 0)
    units = _new_units(messages, _Reading(fmt, counter, 0, pin_at,
                                          system.stamp if system is not None else None),
                       request, {})
    everything = units if system is None else [system, *units]
    return _Conversation(
        options=request.options, fmt=fmt, counter=counter, objects=list(given),
        messages=messages, units=units, system=system,
        candidates=[unit.item for unit in everything],
        positions={id(unit.item): index for index, unit in enumerate(everything)},
        outputs={id(unit.item): unit.outputs for unit in everything},
        spans={id(unit.item): unit.span for unit in everything}, estimates=estimates,
        pin_at=pin_at, sent=[message.output for message in messages])


def _pin_at(messages: list[Message], fmt: str, start: int) -> int | None:
    """The message whose unit is pinned: the first system message (OpenAI, Responses,
    LangChain), so it stays first; Anthropic's first message, which must be the
    user's. Looked for from ``start``."""
    anthropic = fmt == "anthropic"
    for index in range(start, len(messages)):
        if (messages[index].category != SYSTEM) == anthropic:
            return index
    return None


class _Reading(NamedTuple):
    """Where new units start: the conversation's format and counter, the first
    message to group (``restart``), the pinned message and the last stamp given."""

    fmt: str
    counter: TextCounter
    restart: int
    pin_at: int | None
    last_stamp: int | None


def _new_units(messages: list[Message], reading: _Reading, request: _Request,
               reusable: Mapping[tuple[int, int], _Unit]) -> list[_Unit]:
    """The units of ``messages[reading.restart:]``: a ``reusable`` unit of the same span
    and pin as it was, the others made and stamped after ``reading.last_stamp``."""
    fmt, counter, restart, pin_at, last_stamp = reading
    spans = group(messages, fmt, restart, name=request.name)
    if fmt == "anthropic":
        spans = _anchor_turn(messages, spans)
    units: list[_Unit] = []
    for span in spans:  # reusable units can only lead: they lie within the known messages
        old = reusable.get((span.start, span.end))
        if old is None or old.item.pinned != (span.pinned or (
                pin_at is not None and span.start <= pin_at < span.end)):
            break
        units.append(old)
        last_stamp = old.stamp
    stamp = _first_stamp(request.now, len(spans) - len(units), last_stamp)
    for offset, span in enumerate(spans[len(units):]):
        pinned = span.pinned or (pin_at is not None and span.start <= pin_at < span.end)
        units.append(_unit(span, messages[span.start:span.end], fmt, counter,
                           request.limits, stamp + offset, pinned=pinned))
    return units


def _anchor_turn(messages: list[Message], spans: list[Span]) -> list[Span]:
    """The spans with an Anthropic trailing thinking turn's start made one pinned unit:
    its user message, the first assistant message (which starts with the thinking
    block) and that message's results. Later exchanges of the turn stay units of their
    own: with the start always sent, the turn starts with its thinking block whatever
    else is kept. (The start is never before the first span: the restart point is at or
    before it.)"""
    turn = trailing_turn(messages)
    if turn is None or not spans:
        return spans
    first = next((k for k, span in enumerate(spans) if span.end > turn), None)
    if first is None:
        return spans
    caller = next(k for k in range(turn + 1, len(messages)) if messages[k].category == CALLS)
    last = next(k for k in range(first, len(spans)) if spans[k].end > caller)
    anchor = Span(min(spans[first].start, turn), spans[last].end, exchange=True, pinned=True)
    return [*spans[:first], anchor, *spans[last + 1:]]


def _first_stamp(now: datetime | None, count: int, after: int | None) -> int:
    """The stamp of the first of ``count`` new units: the last one at ``now``, each
    earlier a microsecond before, and all after ``after`` (the last known stamp)."""
    moment = datetime.now(UTC) if now is None else now
    stamp = (moment - _EPOCH) // _MICROSECOND - max(count - 1, 0)
    if after is not None and stamp <= after:
        stamp = after + 1
    return stamp


def _unit(span: Span, part: list[Message], fmt: str, counter: TextCounter,
          limits: Mapping[ContextKind, int], stamp: int, *, pinned: bool) -> _Unit:
    """The unit of ``part`` and its item.

    The item is built with :meth:`ContextItem.trusted`, without the constructor's
    checks, because each is settled already: every text in it (the content and the
    call ids) was checked to be Unicode when its message was read (``_checked_text``),
    the metadata holds only those texts, ints and tuples, and the token counts are
    checked to fit int64 here. In an agent loop this is the one item made per turn:
    the checked constructor cost 7 us of the 21 us a later call may add to a 100 us
    pipeline (benchmarks/bench_chat.py)."""
    tokens = sum(m.tokens for m in part)
    original = sum(m.original_tokens for m in part)
    if not fits_int64(original):  # original >= tokens >= 0: counters return no negative
        where = "system" if span.start < 0 else f"messages[{span.start}]"
        raise DecodeError(where, original, "counts more tokens than an int64 holds")
    exchange = span.exchange or any(m.category in (CALLS, RESULTS) for m in part)
    kind = ContextKind.TOOL_OUTPUT if exchange else (
        part[0].kind if len(part) == 1 else ContextKind.MESSAGE)
    metadata: dict[str, Any] = {"chat.format": fmt, "chat.tokens": counter.name}
    if span.start >= 0:
        metadata[MESSAGE_START_KEY] = span.start
        metadata[MESSAGE_COUNT_KEY] = len(part)
    call_ids = tuple(call_id for m in part for call_id, _, _ in m.calls)
    if call_ids:
        metadata["chat.tool_call_ids"] = call_ids
    estimated = sum(m.estimated_parts for m in part)
    if estimated:
        metadata["chat.estimated_parts"] = estimated
    trimmed = tuple(MappingProxyType({**cut.record(), "message": span.start + offset,
                                      "limit": limits[m.pieces[position].kind]})  # type: ignore[index]
                    for offset, m in enumerate(part) for position, cut in m.trimmed)
    if trimmed:
        metadata[TRIMMED_KEY] = trimmed
    item = ContextItem.trusted(
        content="\n".join(m.line for m in part), tokens=tokens, kind=kind,
        source=ContextSource.TOOL if exchange else ContextSource.CHAT, priority=None,
        tags=(), metadata=MappingProxyType(metadata),
        timestamp=_EPOCH + stamp * _MICROSECOND, future_relevance_hint=None,
        pinned=pinned, original_tokens=original if trimmed else None)
    return _Unit(span, item, stamp, tuple(m.output for m in part) if span.start >= 0 else ())


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


@dataclass(slots=True)
class _Outcome:
    messages: Any
    conversation: _Conversation
    placed: list[ContextItem]
    report: SelectionReport | None
    stripped: tuple[int, ...]


class _Call(NamedTuple):
    """The options of one select_messages call, as given (see its docstring); a
    named tuple, made on every call in half the time of a frozen dataclass."""

    system: Any
    max_tokens: int | None
    target_tokens: int | None
    budget: ContextBudget | None
    policy: Policy | Pipeline | str | None
    collector: TraceCollector | None
    token_counter: CounterSpec | TextCounter
    trim: Mapping[Any, int] | None
    format: str | None
    anthropic_thinking: ThinkingMode
    now: datetime | None
    run_info: RunInfo | None


def _run(messages: Any, call: _Call, *, want_report: bool) -> _Outcome:
    format, anthropic_thinking, now = call.format, call.anthropic_thinking, call.now
    if format is not None and format not in FORMATS:
        raise InvalidValueError("format", format, f"must be one of {', '.join(FORMATS)} or None")
    if anthropic_thinking not in ("keep", "strip_after_change"):
        raise InvalidValueError("anthropic_thinking", anthropic_thinking,
                                "must be 'keep' or 'strip_after_change'")
    if now is not None and (not isinstance(now, datetime) or now.utcoffset() is None):
        raise InvalidValueError("now", now, "must be a timezone-aware datetime or None")
    pipeline, policy_budget = _pipeline(call.policy)
    resolved = _budget(call.max_tokens, call.target_tokens, call.budget, policy_budget)
    given, system_value, has_system, key = _unpack(messages, call.system)
    request = _Request(given=given, system=system_value, has_system=has_system, fmt=format,
                       counter_spec=call.token_counter, limits=check_limits(call.trim), now=now,
                       name=key or "messages")
    conversation = _read(request)
    diagnostics: DiagnosticTraceCollector | None = None
    sink = call.collector
    if want_report:
        diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
        sink = (diagnostics if call.collector is None
                else FanOutCollector(diagnostics, call.collector))
    placed = pipeline.run(conversation.candidates, resolved, sink,
                          run_info=None if sink is None else _with_counter(call.run_info,
                                                                             conversation))
    kept = _kept_objects(conversation, placed)
    stripped: tuple[int, ...] = ()
    if anthropic_thinking == "strip_after_change" and conversation.fmt == "anthropic":
        kept, stripped = _strip_thinking(conversation, placed)
    report = diagnostics.build_report() if diagnostics is not None else None
    return _Outcome(_shaped(messages, key, kept), conversation, placed, report, stripped)


def _kept_objects(conversation: _Conversation, placed: list[ContextItem]) -> list[Any]:
    """The messages to send for the units ``placed``, in order: ``conversation.sent``
    less the messages of the units left out.

    Units are placed in conversation order (a ChronologicalPlacer over stamps that
    rise with the unit), so ``placed`` is ``conversation.candidates`` with some left
    out. In an agent loop the kept units' messages usually come in a few runs of
    consecutive messages (everything, or everything but the oldest exchanges): each
    run is then found by one binary search and copied as one slice, a cost that grows
    with the runs, not the units. Past :data:`_RUNS_WORTH_SEARCHING` runs (units left
    out here and there), each remaining unit's messages are looked up instead (~90 ns
    a unit). At 100 units with three left out, 3 us instead of 7 us; at 500 units of
    which 80% scattered ones are left out, the lookups as before
    (benchmarks/bench_chat.py)."""
    candidates = conversation.candidates
    sent = conversation.sent
    count = len(placed)
    if count == len(candidates):
        return list(sent)
    spans, positions = conversation.spans, conversation.positions
    kept: list[Any] = []
    first = 0
    for _ in range(_RUNS_WORTH_SEARCHING):
        if first == count:
            return kept
        end = _run_end(candidates, placed, first, positions[id(placed[first])])
        kept += sent[max(spans[id(placed[first])].start, 0):spans[id(placed[end - 1])].end]
        first = end
    outputs = conversation.outputs
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


def _with_counter(run_info: RunInfo | None, conversation: _Conversation) -> RunInfo:
    """``run_info`` with the conversation's token counter, so logs and spans say how
    the run's tokens were counted (the application's own fields are kept)."""
    counter = conversation.counter.name
    if run_info is None:
        return RunInfo(token_counter=counter, token_estimates=conversation.estimates)
    return msgspec.structs.replace(run_info, token_counter=run_info.token_counter or counter,
                                   token_estimates=run_info.token_estimates
                                   or conversation.estimates)


def _kept_indices(conversation: _Conversation, placed: list[ContextItem]) -> list[int]:
    spans = conversation.spans
    return [index for item in placed for index in range(max(spans[id(item)].start, 0),
                                                          spans[id(item)].end)]


def _strip_thinking(conversation: _Conversation, placed: list[ContextItem]
                    ) -> tuple[list[Any], tuple[int, ...]]:
    """The kept messages, those after the first change (a message left out or
    trimmed) without their thinking blocks; and which were stripped."""
    indices = _kept_indices(conversation, placed)
    messages = conversation.messages
    kept_set = set(indices)
    change = next((k for k, m in enumerate(messages) if k not in kept_set or m.trimmed),
                  len(messages))
    out: list[Any] = []
    stripped: list[int] = []
    for index in indices:
        message = messages[index]
        if index > change and message.thinking and message.role == "assistant":
            out.append(without_thinking(message.output))
            stripped.append(index)
        else:
            out.append(message.output)
    return out, tuple(stripped)


def select_messages(
    messages: Any,
    *,
    system: Any = None,
    max_tokens: int | None = None,
    target_tokens: int | None = None,
    budget: ContextBudget | None = None,
    policy: Policy | Pipeline | str | None = None,
    collector: TraceCollector | None = None,
    token_counter: CounterSpec | TextCounter = "auto",
    trim: Mapping[Any, int] | None = None,
    format: MessageFormat | None = None,
    anthropic_thinking: ThinkingMode = "keep",
    now: datetime | None = None,
    run_info: RunInfo | None = None,
) -> Any:
    """The messages that fit the budget, in conversation order and in the shape given.

    ``messages`` is a list of OpenAI Chat Completions messages, OpenAI Responses input
    items, Anthropic messages or LangChain messages: dicts, or the SDKs' own objects
    (``openai``, ``anthropic``, ``langchain_core``), mixed as an agent loop appends
    them; or a mapping holding the list under ``messages`` (``input`` for Responses),
    with Anthropic's ``system`` beside it. The result has the same shape: a list, or
    a copy of the mapping with the kept messages. The kept messages are the objects
    given (never rebuilt), except those ``trim`` cut and those
    ``anthropic_thinking="strip_after_change"`` strips, which are new objects.

    - ``system`` is Anthropic's system prompt, passed apart: counted and always kept,
      never returned. System and developer messages of the other formats stay in the
      list; the first is pinned.
    - The unit of selection is a message, or a whole tool exchange (an assistant
      message with tool calls and the results answering them; parallel calls, Anthropic
      ``tool_use`` / ``tool_result``, Responses ``reasoning`` / ``function_call`` /
      ``function_call_output``): kept or dropped together, so the result keeps the
      providers' ordering rules. A list that already breaks one raises
      :class:`~cupellation.exceptions.DecodeError` naming the message and the rule.
      Anthropic: the first message (a user message) is pinned, and a trailing
      tool-use turn with thinking blocks is one unit (see docs/decisions.md).
    - The budget: ``max_tokens`` (and ``target_tokens``, default ``max_tokens``), or
      ``budget``, or the policy's. ``policy`` is a :class:`~cupellation.policy.Policy`,
      a preset name (default ``"chat"``) or a :class:`~cupellation.Pipeline`; whatever
      its placer, units are placed in conversation order (a
      :class:`~cupellation.ChronologicalPlacer` over the units' timestamps), and
      nothing is deduplicated: two equal messages are two moments of the
      conversation.
    - ``collector`` receives the run's events (spans, logs, a report), as for
      :meth:`~cupellation.Pipeline.run`.
    - ``token_counter``: ``"auto"``, ``"o200k_base"``, ``"cl100k_base"``,
      ``"estimate"`` or a callable ``text -> int`` (see :mod:`cupellation.chat`).
    - ``trim``: token limits per kind, such as ``{"ToolOutput": 800}``: a message or
      tool result over its limit is cut to its head and tail (a visible marker
      between) before units are made; the unit records ``originalTokens``.
    - ``format``: ``"openai"``, ``"openai-responses"``, ``"anthropic"`` or
      ``"langchain"``; recognised when not given (a list of plain text messages reads
      as ``"openai"``: pass ``format="anthropic"`` for Anthropic without ``system``).
    - ``anthropic_thinking="strip_after_change"`` removes thinking blocks from the
      kept assistant messages after the first message left out or trimmed, for
      models whose thinking blocks are bound to everything before them (preserved
      thinking); the default ``"keep"`` sends them unchanged.
    - ``now``: the time stamped on new messages (default: the current time).
    - ``run_info``: the session, user and conversation the run belongs to
      (:class:`~cupellation.RunInfo`), recorded in its ``run_started`` event with the
      token counter used and whether any count is an estimate.

    Raises :class:`~cupellation.exceptions.PinnedBudgetError` when the pinned units
    alone exceed the budget, and what :meth:`~cupellation.Pipeline.run` raises.
    """
    call = _Call(system=system, max_tokens=max_tokens, target_tokens=target_tokens,
                 budget=budget, policy=policy, collector=collector,
                 token_counter=token_counter, trim=trim, format=format,
                 anthropic_thinking=anthropic_thinking, now=now, run_info=run_info)
    return _run(messages, call, want_report=False).messages


def select_messages_with_report(
    messages: Any,
    *,
    system: Any = None,
    max_tokens: int | None = None,
    target_tokens: int | None = None,
    budget: ContextBudget | None = None,
    policy: Policy | Pipeline | str | None = None,
    collector: TraceCollector | None = None,
    token_counter: CounterSpec | TextCounter = "auto",
    trim: Mapping[Any, int] | None = None,
    format: MessageFormat | None = None,
    anthropic_thinking: ThinkingMode = "keep",
    now: datetime | None = None,
    run_info: RunInfo | None = None,
) -> MessageSelection:
    """:func:`select_messages`, with its report and what it did to each message (a
    :class:`MessageSelection`). The arguments are the same."""
    call = _Call(system=system, max_tokens=max_tokens, target_tokens=target_tokens,
                 budget=budget, policy=policy, collector=collector,
                 token_counter=token_counter, trim=trim, format=format,
                 anthropic_thinking=anthropic_thinking, now=now, run_info=run_info)
    outcome = _run(messages, call, want_report=True)
    conversation = outcome.conversation
    assert outcome.report is not None
    kept = _kept_indices(conversation, outcome.placed)
    kept_set = set(kept)
    return MessageSelection(
        messages=outcome.messages, report=outcome.report, kept=tuple(kept),
        dropped=tuple(k for k in range(len(conversation.messages)) if k not in kept_set),
        trimmed=tuple(k for k in kept if conversation.messages[k].trimmed),
        thinking_stripped=outcome.stripped,
        tokens=sum(item.tokens for item in outcome.placed),
        token_counter=conversation.counter.name, token_estimates=conversation.estimates)


def ordering_problems(messages: Any, *, system: Any = None,
                      format: MessageFormat | None = None) -> list[str]:
    """Every way ``messages`` breaks its provider's ordering rules (orphaned tool
    calls or results, results out of place, a first Anthropic message that is not the
    user's), one line each, worded after the provider's own 400 errors; empty when
    none. Reads the same inputs as :func:`select_messages`; counts nothing."""
    if format is not None and format not in FORMATS:
        raise InvalidValueError("format", format, f"must be one of {', '.join(FORMATS)} or None")
    given, _, has_system, key = _unpack(messages, system)
    name = key or "messages"
    detected, _ = _detect(given, 0, has_system, name)
    fmt = format or detected or "openai"
    counter = resolve_counter("estimate")
    read = [read_message(obj, fmt, f"{name}[{k}]", counter, {}) for k, obj in enumerate(given)]
    problems: list[str] = []
    group(read, fmt, 0, problems, name=name)
    return problems

