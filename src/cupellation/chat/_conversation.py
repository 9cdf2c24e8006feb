"""What ``select_messages`` reads a provider's message list into, and remembers
between calls: each message read once (its texts, calls, results and tokens), grouped
into units (a message alone, or a whole tool exchange), each unit made one
:class:`~cupellation.ContextItem`.

**Caching.** An agent loop sends the same list again with a message or two appended.
The last :data:`CONVERSATIONS_KEPT` conversations are remembered (each message object,
its counts, its unit and item), found again by the identity of the list's messages:
when a list starts with the messages of an earlier call, only the new ones are read.
Messages are read once per object, so a message changed in place after a call is not
read again: replace it with a new object instead (or call :func:`clear_message_cache`).

**Timestamps.** The items' timestamps order the units and let time-based scorers
work: on the first call the last unit is stamped ``now`` (default: the current time)
and each earlier one a microsecond before; units appended later are stamped when they
are first seen, after every earlier unit. A unit keeps its stamp while its messages
stay the same objects, so a ``DecayScorer`` sees how long ago a message arrived.
"""

from __future__ import annotations

import operator
import threading
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from .._model import ContextItem, ContextKind, ContextSource, fits_int64
from ..exceptions import DecodeError, FormatMismatchError
from ._messages import (
    CALLS,
    RESULTS,
    SYSTEM,
    Message,
    format_hint,
)
from ._reading import read_message, read_system
from ._tokens import CounterSpec, TextCounter, resolve_counter
from ._trim import TRIMMED_KEY
from ._units import OpenEnd, Span, group, last_turn_start, trailing_turn

__all__ = [
    "CONVERSATIONS_KEPT",
    "MESSAGE_COUNT_KEY",
    "MESSAGE_START_KEY",
    "Conversation",
    "Request",
    "Unit",
    "check_given_format",
    "clear_message_cache",
    "detect_format",
    "extend_conversation",
    "fresh_conversation",
    "read_conversation",
]

#: How many conversations ``select_messages`` remembers (see the module doc).
CONVERSATIONS_KEPT = 32
#: Metadata key: the index of a unit's first message in the list given.
MESSAGE_START_KEY = "chat.message_index"
#: Metadata key: how many messages the unit holds.
MESSAGE_COUNT_KEY = "chat.message_count"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


# -- the cache of conversations ---------------------------------------------------------


@dataclass(slots=True, eq=False)
class Unit:
    span: Span
    item: ContextItem
    stamp: int  # microseconds since the epoch
    outputs: tuple[Any, ...]  # the objects its messages send


@dataclass(slots=True, eq=False)
class Conversation:
    """What one conversation's messages were read into."""

    options: tuple[Any, ...]
    fmt: str
    fmt_shown: bool                      # given, or shown by a message (not a default)
    counter: TextCounter
    objects: list[Any]
    messages: list[Message]
    units: list[Unit]
    system: Unit | None
    candidates: list[ContextItem]
    positions: dict[int, int]            # id(item) -> its index in candidates
    outputs: dict[int, tuple[Any, ...]]  # id(item) -> the objects its messages send
    spans: dict[int, Span]               # id(item) -> its messages
    estimates: bool
    pin_at: int | None                   # the message whose unit is pinned
    sent: list[Any]                      # each message's object to send, in order: the
    #                                      given one, or its trimmed copy
    turn: int | None                     # the last message that starts a turn
    #                                      (``last_turn_start(messages)``), kept so an
    #                                      append scans only the new messages for it
    #                                      (three scans of the whole list were 7% of an
    #                                      append at 90 exchanges: 83 -> 78 us, min)


_LOCK = threading.Lock()
_CONVERSATIONS: list[Conversation] = []


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
                ) -> tuple[Conversation | None, int]:
    """The remembered conversation sharing the longest prefix with ``given``."""
    best: Conversation | None = None
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


def _remember(conversation: Conversation, replaced: Conversation | None) -> None:
    if _CONVERSATIONS and _CONVERSATIONS[0] is conversation:
        return  # already the most recently used
    if replaced is not None and replaced in _CONVERSATIONS:
        _CONVERSATIONS.remove(replaced)
    _CONVERSATIONS.insert(0, conversation)
    del _CONVERSATIONS[CONVERSATIONS_KEPT:]


# -- reading a conversation -------------------------------------------------------------


def detect_format(given: Sequence[Any], start: int, has_system: bool, name: str
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


def check_given_format(given: Sequence[Any], start: int, fmt: str, name: str) -> None:
    """Refuse ``given[start:]`` when a message shows a format other than ``fmt``, the
    one given: read as ``fmt``, its calls and results would not be seen as such (an
    Anthropic ``tool_use`` block is an unknown part to the OpenAI reader), and a
    window could break the provider's rules. A message that shows no format (plain
    text) reads the same in every format and is never refused here."""
    for index in range(start, len(given)):
        hint = format_hint(given[index])
        if hint is not None and hint[0] != fmt:
            raise FormatMismatchError(f"{name}[{index}]", given[index], given_format=fmt,
                                      detected_format=hint[0], shown_by=hint[1])


class Request:
    """One call's arguments, checked, and the options a remembered conversation must
    share (a plain slotted class: it is made on every call)."""

    __slots__ = ("counter_spec", "fmt", "given", "has_system", "limits", "name", "now",
                 "open_end", "options", "regroup_from", "system")

    def __init__(self, *, given: Sequence[Any], system: Any, has_system: bool,
                 fmt: str | None, counter_spec: CounterSpec | TextCounter,
                 limits: Mapping[ContextKind, int], now: datetime | None, name: str,
                 open_end: list[OpenEnd] | None = None,
                 regroup_from: int | None = None,
                 options: tuple[Any, ...] | None = None) -> None:
        self.given = given
        self.system = system
        self.has_system = has_system
        self.fmt = fmt
        self.counter_spec = counter_spec
        self.limits = limits
        self.now = now
        self.name = name
        # A list still being appended to (MessageHistory): the problems of its open
        # end are put here instead of raised (see group), and the units from the
        # message ``regroup_from`` on (the earlier open end) are grouped again.
        self.open_end = open_end
        self.regroup_from = regroup_from
        # A system prompt other than text is compared by identity: the conversation
        # holds it, so its id is not reused while the conversation is remembered.
        # (``options``: these, made once by a caller that makes many requests alike.)
        self.options: tuple[Any, ...] = options if options is not None else (
            fmt, counter_spec, tuple(limits.items()), has_system,
            system if isinstance(system, str) else id(system))


def read_conversation(request: Request) -> Conversation:
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


def extend_conversation(request: Request, known: Conversation) -> Conversation:
    """``known`` grown by the messages ``request.given`` holds past its own (a
    MessageHistory's append: ``known`` itself is left as it was)."""
    return _extend(request, known, len(known.objects))


def fresh_conversation(request: Request) -> Conversation:
    """The conversation of ``request.given``, read from nothing."""
    return _fresh(request)


def _extend(request: Request, known: Conversation | None, common: int) -> Conversation:
    """A conversation for ``request.given``, reusing ``known``'s first ``common``
    messages, and its units up to the last one that appending may change (the last
    unit; an Anthropic trailing turn from its start). Work is done for the new
    messages only, so a growing list costs what it grows by."""
    given = request.given
    name = request.name
    if known is None or common == 0:
        return _fresh(request)
    fmt, counter = known.fmt, known.counter
    fmt_shown = _format_shown(request, known, common)
    if fmt_shown is None:
        return _fresh(request)
    new = [read_message(given[index], fmt, f"{name}[{index}]", counter, request.limits)
           for index in range(common, len(given))]
    messages = known.messages[:common] + new
    grown = common == len(known.messages)
    old_turn = known.turn
    turn = _turn_start(messages, common, old_turn)
    # Units ending at or before ``limit`` are kept as they are.
    limit = _regroup_limit(fmt, known, common)
    if request.regroup_from is not None:
        limit = min(limit, request.regroup_from)
    # The unit of the last turn's start is regrouped, pinned until a later turn
    # starts; Anthropic's trailing turn too (its start is one unit). Chat Completions
    # lists regroup nothing they keep (``_repin_turns`` moves the pin instead).
    for start in _regrouped_turns(fmt, messages, old_turn, turn):
        if start is not None:
            limit = min(limit, start)
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
    added = _new_units(messages, _Reading(fmt, counter, restart, pin_at, last_stamp, turn),
                       request, reusable)
    system_offset = 1 if known.system is not None else 0
    candidates = known.candidates[:kept + system_offset]
    for at, unit in _repin_turns(units, messages, (old_turn, turn), fmt, counter,
                                 request.limits):
        units[at] = unit
        candidates[at + system_offset] = unit.item
        positions[id(unit.item)] = at + system_offset
        outputs[id(unit.item)] = unit.outputs
        spans[id(unit.item)] = unit.span
    for unit in added:
        positions[id(unit.item)] = len(candidates)
        outputs[id(unit.item)] = unit.outputs
        candidates.append(unit.item)
        spans[id(unit.item)] = unit.span
    return Conversation(
        options=known.options, fmt=fmt, fmt_shown=fmt_shown, counter=counter,
        objects=list(given),
        messages=messages, units=units + added, system=known.system, candidates=candidates,
        positions=positions, outputs=outputs, spans=spans, estimates=estimates, pin_at=pin_at,
        sent=known.sent[:common] + [message.output for message in new], turn=turn)


def _format_shown(request: Request, known: Conversation, common: int) -> bool | None:
    """Whether the grown list shows its format (``known``'s, checked against the new
    messages), or None when it must be read afresh: the earlier messages showed no
    format (plain text reads as OpenAI by default) and a new one shows another, so
    the list is read as a whole, as a first call on it would, and the outcome never
    depends on what was remembered."""
    if request.fmt is not None:  # a format given is checked, never replaced
        check_given_format(request.given, common, request.fmt, request.name)
        return True
    detected, why = detect_format(request.given, common, False, request.name)
    if detected is None or detected == known.fmt:
        return known.fmt_shown or detected is not None
    if not known.fmt_shown:
        return None
    raise DecodeError(request.name, None, f"mixes formats: {why} ({detected}), but earlier "
                                          f"messages are {known.fmt}; pass format= to say which")


def _fresh(request: Request) -> Conversation:
    """A conversation read from nothing."""
    given, name = request.given, request.name
    detected: str | None = None
    if request.fmt is not None:
        check_given_format(given, 0, request.fmt, name)
    else:
        detected, _ = detect_format(given, 0, request.has_system, name)
    fmt = request.fmt or detected or "openai"
    if request.has_system and fmt != "anthropic":
        raise DecodeError("system", request.system,
                          f"is passed apart only in the Anthropic format, not {fmt}")
    counter = resolve_counter(request.counter_spec,
                              flavour="anthropic" if fmt == "anthropic" else "openai")
    messages = [read_message(obj, fmt, f"{name}[{index}]", counter, request.limits)
                for index, obj in enumerate(given)]
    system: Unit | None = None
    estimates = counter.estimate or any(m.estimated_parts for m in messages)
    stamp = _first_stamp(request.now, len(messages) + 1, None)
    if request.has_system:
        system_message = read_system(request.system, counter)
        estimates = estimates or system_message.estimated_parts > 0
        system = _unit(Span(-1, 0), [system_message], fmt, counter, request.limits, stamp,
                       pinned=True)
    pin_at = _pin_at(messages, fmt, 0)
    turn = last_turn_start(messages)
    units = _new_units(messages, _Reading(fmt, counter, 0, pin_at,
                                          system.stamp if system is not None else None, turn),
                       request, {})
    everything = units if system is None else [system, *units]
    return Conversation(
        options=request.options, fmt=fmt,
        fmt_shown=request.fmt is not None or detected is not None, counter=counter,
        objects=list(given),
        messages=messages, units=units, system=system,
        candidates=[unit.item for unit in everything],
        positions={id(unit.item): index for index, unit in enumerate(everything)},
        outputs={id(unit.item): unit.outputs for unit in everything},
        spans={id(unit.item): unit.span for unit in everything}, estimates=estimates,
        pin_at=pin_at, sent=[message.output for message in messages], turn=turn)


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
    message to group (``restart``), the pinned message, the last stamp given and the
    last turn's start."""

    fmt: str
    counter: TextCounter
    restart: int
    pin_at: int | None
    last_stamp: int | None
    turn: int | None


def _new_units(messages: list[Message], reading: _Reading, request: Request,
               reusable: Mapping[tuple[int, int], Unit]) -> list[Unit]:
    """The units of ``messages[reading.restart:]``: a ``reusable`` unit of the same span
    and pin as it was, the others made and stamped after ``reading.last_stamp``."""
    fmt, counter, restart, pin_at, last_stamp, turn = reading
    spans = group(messages, fmt, restart, name=request.name, open_end=request.open_end)
    spans = _anchor_turn(messages, spans, turn) if fmt == "anthropic" else _pin_turn_start(
        spans, turn)
    units: list[Unit] = []
    for span in spans:  # reusable units can only lead: they lie within the known messages
        old = reusable.get((span.start, span.end))
        if old is None:
            break
        pinned = span.pinned or (pin_at is not None and span.start <= pin_at < span.end)
        if old.item.pinned != pinned:  # a turn's start, no longer the last: same stamp
            old = _unit(span, messages[span.start:span.end], fmt, counter, request.limits,
                        old.stamp, pinned=pinned)
        units.append(old)
        last_stamp = old.stamp
    stamp = _first_stamp(request.now, len(spans) - len(units), last_stamp)
    for offset, span in enumerate(spans[len(units):]):
        pinned = span.pinned or (pin_at is not None and span.start <= pin_at < span.end)
        units.append(_unit(span, messages[span.start:span.end], fmt, counter,
                           request.limits, stamp + offset, pinned=pinned))
    return units


def _anchor_turn(messages: list[Message], spans: list[Span], start: int | None
                 ) -> list[Span]:
    """The spans of an Anthropic list with its last turn's start (``start``) pinned.

    The unit holding the last user message that starts a turn is pinned, so the
    window always ends with the turn the list ends with: dropping that message (the
    question being answered) would end the window with an earlier turn, whose
    tool-use assistant message need not start with a thinking block, which Anthropic
    refuses when thinking is on. When the trailing turn holds thinking and tool calls,
    its start is one pinned unit: its user message, the first assistant message (which
    starts with the thinking block) and that message's results. Later exchanges of the
    turn stay units of their own: with the start always sent, the turn starts with its
    thinking block whatever else is kept. (The start is never before the first span:
    the restart point is at or before it.)"""
    turn = trailing_turn(messages, start)
    if turn is None or not spans:
        return _pin_turn_start(spans, start)
    first = next((k for k, span in enumerate(spans) if span.end > turn), None)
    if first is None:
        return spans
    caller = next(k for k in range(turn + 1, len(messages)) if messages[k].category == CALLS)
    last = next(k for k in range(first, len(spans)) if spans[k].end > caller)
    anchor = Span(min(spans[first].start, turn), spans[last].end, exchange=True, pinned=True)
    return [*spans[:first], anchor, *spans[last + 1:]]


#: Formats whose grouping never changes a unit that ends where a list stops growing
#: (a tool message joins the assistant message just before it, and only while its
#: calls are open, which a MessageHistory regroups from: ``Request.regroup_from``;
#: Responses' results can merge earlier units, Anthropic keeps its trailing turn
#: whole): growing one groups its new messages only, and the pin of the last turn's
#: start moves by ``_repin_turns``.
LAST_UNIT_FORMATS: Final = frozenset({"openai", "langchain"})


def _turn_start(messages: list[Message], common: int, old_turn: int | None) -> int | None:
    """The last turn's start of ``messages``, whose first ``common`` are those of a
    known list whose last turn started at ``old_turn``: only the new messages are
    scanned when ``old_turn`` lies in the shared part (an agent loop's case: it is
    then the shared part's last one too); a list that replaced it is scanned back
    from ``common``."""
    turn = last_turn_start(messages, common)
    if turn is not None or old_turn is None or old_turn < common:
        return turn if turn is not None else old_turn
    return last_turn_start(messages[:common])


def _regroup_limit(fmt: str, known: Conversation, common: int) -> int:
    """Where a grown list's units may start to differ from ``known``'s (units ending
    at or before it are kept): the first new message in Chat Completions and
    LangChain lists (see LAST_UNIT_FORMATS), else the last known unit's start, since
    a new message may join it (a Responses result, an Anthropic tool_result)."""
    if not known.units:
        return 0
    return common if fmt in LAST_UNIT_FORMATS else min(common, known.units[-1].span.start)


def _regrouped_turns(fmt: str, messages: list[Message], old_turn: int | None,
                     turn: int | None) -> tuple[int | None, ...]:
    """The turn starts that growing a list regroups from, besides its last unit
    (``old_turn`` the known list's last turn start, ``turn`` the grown one's: earlier
    than ``old_turn`` when a list replaced the messages from its turn start on with
    messages that start none, and its unit, kept, must be pinned again)."""
    if fmt == "anthropic":
        return trailing_turn(messages, turn), old_turn, turn
    return () if fmt in LAST_UNIT_FORMATS else (old_turn, turn)


def _repin_turns(units: list[Unit], messages: list[Message],
                 turns: tuple[int | None, int | None], fmt: str, counter: TextCounter,
                 limits: Mapping[ContextKind, int]) -> list[tuple[int, Unit]]:
    """The kept ``units`` (those not regrouped) whose pin must change because the last
    turn's start moved (``turns``: the known list's, the grown one's): at their
    positions, rebuilt with the same stamp (the unit of the new turn start pinned, the
    old one's unpinned, as ``_new_units`` would pin them).

    Why: an agent loop's list is one user turn followed by many tool exchanges, and
    regrouping everything from that turn's start on every append cost more than the
    selection itself (benchmarks/bench_chat.py); only the units holding the old and
    the new turn start can change their pin."""
    old_turn, new_turn = turns
    if fmt not in LAST_UNIT_FORMATS or new_turn == old_turn or not units:
        return []  # other formats regroup from the turn's start, which _new_units pins
    changed: list[tuple[int, Unit]] = []
    for turn in turns:
        if turn is None:
            continue
        at = bisect_right(units, turn, key=_unit_start) - 1
        if at < 0 or not units[at].span.start <= turn < units[at].span.end:
            continue  # in the regrouped part: _new_units pins it
        # A user message is a unit of its own in these formats (never the first
        # system message's, the other pin): its pin is whether it starts the last turn.
        unit = units[at]
        span = unit.span
        pinned = turn == new_turn
        if unit.item.pinned != pinned:
            changed.append((at, _unit(span, messages[span.start:span.end], fmt, counter,
                                      limits, unit.stamp, pinned=pinned)))
    return changed


def _unit_start(unit: Unit) -> int:
    return unit.span.start


def _pin_turn_start(spans: list[Span], start: int | None) -> list[Span]:
    """The spans with the one holding the last turn's start (``start``) pinned (a
    caller regroups from at or before it, so it is among them)."""
    if start is None:
        return spans
    for index in range(len(spans) - 1, -1, -1):
        span = spans[index]
        if span.start <= start < span.end:
            span.pinned = True  # grouped afresh for this call: no other holder
            break
        if span.end <= start:
            break
    return spans


def _first_stamp(now: datetime | None, count: int, after: int | None) -> int:
    """The stamp of the first of ``count`` new units: the last one at ``now``, each
    earlier a microsecond before, and all after ``after`` (the last known stamp)."""
    moment = datetime.now(UTC) if now is None else now
    stamp = (moment - _EPOCH) // _MICROSECOND - max(count - 1, 0)
    if after is not None and stamp <= after:
        stamp = after + 1
    return stamp


def _unit(span: Span, part: list[Message], fmt: str, counter: TextCounter,
          limits: Mapping[ContextKind, int], stamp: int, *, pinned: bool) -> Unit:
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
    return Unit(span, item, stamp, tuple(m.output for m in part) if span.start >= 0 else ())
