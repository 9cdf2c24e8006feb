"""Chat transcripts as context items, one item per text and per tool call or result:
OpenAI-style and Anthropic-style message lists parsed from JSON (what ``cupellation
select --chat`` reads).

    from cupellation.chat import chat_to_items, load_chat

    items = chat_to_items([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "4°C, rain"},
    ])

**Formats.** OpenAI style is a list of ``{"role", "content", "tool_calls",
"tool_call_id", "name"}`` messages (or an object with such a ``"messages"``
list), content being a string or a list of parts (``{"type": "text", "text"}``,
``{"type": "refusal", "refusal"}``, images, audio and files). Anthropic style is
``{"system": ..., "messages": [...]}`` with user and assistant messages whose
content is a string or a list of blocks (``text``, ``tool_use``,
``tool_result``, images, documents, thinking). :func:`detect_chat_format`
tells them apart by their features (a top-level ``system``, ``tool_use`` /
``tool_result`` blocks; ``system`` / ``tool`` roles, ``tool_calls``,
``tool_call_id``); a transcript of plain user and assistant text reads the
same either way. Pass ``format=`` to say which: a transcript that shows the other
format is then refused (:class:`~cupellation.exceptions.FormatMismatchError`).

**Kinds.** System and developer messages become ``SystemPrompt``; user and
assistant text becomes ``Message``; each tool call (an OpenAI ``tool_calls``
entry or ``function_call``, an Anthropic ``tool_use`` block) becomes its own
item of kind ``ToolCall`` (:data:`TOOL_CALL`, not one of the specification's
well-known kinds: give it a weight in ``KindScorer`` if it matters), written as
``name(arguments)``; each tool result (an OpenAI ``tool`` or ``function``
message, an Anthropic ``tool_result`` block) becomes ``ToolOutput``. Tool
calls and results have source ``Tool``, the rest ``Chat``. ``kinds=`` maps the
roles ``system``, ``user``, ``assistant``, ``tool_call`` and ``tool_result`` to
other kinds. Text parts of one message are joined with newlines; parts that
are not text (images, audio, files, documents, thinking) are left out and
listed in metadata ``chat.omitted_parts`` (a message with nothing else
becomes a placeholder such as ``[image]``). Empty messages make no item.

**Pinning.** The first system message (OpenAI ``system`` or ``developer``; the
Anthropic top-level ``system``) is pinned unless ``pin_system=False``; a
message's own ``"pinned": true`` pins it too.

**Order.** Every item carries ``chat.position`` (its 0-based place in the
conversation) and ``chat.message_index`` (the index of its message; absent for
the Anthropic top-level system). Because the pipeline hands the placer its
selection in slicer order, order is also kept in timestamps, so that
:class:`~cupellation.ChronologicalPlacer` restores the conversation:

- a message's own ``"timestamp"`` (ISO 8601 with an offset) or ``"created_at"``
  (the same, or Unix seconds) is kept exactly on its first item; its further
  items (a tool call after the text) follow 1 µs apart;
- items of messages without one are spaced 1 µs after the previous timed item
  (or before the first one); when no message has a timestamp, the last item
  gets ``now`` (or ``end=``) and each earlier one 1 µs less, so
  :class:`~cupellation.RecencyScorer` ranks later turns higher while a
  :class:`~cupellation.DecayScorer` sees every turn as current.

``chat.timestamp`` says ``"message"`` or ``"synthesized"``. With
``synthesize_timestamps=False`` only messages' own timestamps are used.
Messages may also carry ``"priority"`` (an integer) and ``"tags"`` (strings).

**Tokens.** ``token_counter(text) -> int`` counts when given (``chat.tokens``:
``"counter"``). Otherwise, with ``use_tiktoken`` (the default), ``tiktoken_encoding``
(``o200k_base`` or ``cl100k_base``) counts exactly from local data, never fetched
(``"tiktoken:o200k_base"``; see :mod:`cupellation.chat`: the ``tokens`` extra
installs the data). When it cannot, the count falls back to the estimate
``ceil(characters / 4)`` (at least 1), marked ``chat.tokens = "estimate"``, and
says so once per process (a :class:`~cupellation.chat.TokenEstimateWarning` and
the ``cupellation.chat`` logger). ``use_tiktoken=False`` asks for the estimate.
Content only: these items carry no per-message overheads.

Bad input raises :class:`~cupellation.exceptions.DecodeError` naming the
message and field (``messages[3].tool_calls[0].function.name``), the value,
and for JSON Lines files the line.

Telling the formats apart and reading the messages is ``_parsing``'s; this
module turns what it reads into items (kinds, timestamps, tokens) and reads
files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .._model import ContextItem, ContextKind
from ..exceptions import ConfigurationError, DecodeError, InvalidTypeError, InvalidValueError
from ._parsing import (
    ChatFormat,
    Reader,
    Segment,
    check_chat_format,
    detect_chat_format,
    messages_of,
)
from ._tokens import OFFLINE_ENCODINGS, estimate_tokens, resolve_counter, warn_estimate

__all__ = [
    "MESSAGE_INDEX_KEY",
    "POSITION_KEY",
    "TOKENS_KEY",
    "TOOL_CALL",
    "ChatFormat",
    "TokenCounter",
    "chat_to_items",
    "detect_chat_format",
    "load_chat",
]


#: Counts the tokens of a text.
TokenCounter = Callable[[str], int]

#: The kind of a tool call item (an extension of the well-known kinds).
TOOL_CALL = ContextKind("ToolCall")

#: Metadata key: the item's 0-based position in the conversation.
POSITION_KEY = "chat.position"
#: Metadata key: the index of the message the item came from.
MESSAGE_INDEX_KEY = "chat.message_index"
#: Metadata key: how ``tokens`` was obtained (``counter``, ``tiktoken:<name>``, ``estimate``).
TOKENS_KEY = "chat.tokens"

_ROLE_KEY = "chat.role"
_FORMAT_KEY = "chat.format"
_TIMESTAMP_KEY = "chat.timestamp"

_DEFAULT_KINDS: Mapping[str, ContextKind] = {
    "system": ContextKind.SYSTEM_PROMPT,
    "user": ContextKind.MESSAGE,
    "assistant": ContextKind.MESSAGE,
    "tool_call": TOOL_CALL,
    "tool_result": ContextKind.TOOL_OUTPUT,
}
_MICROSECOND = timedelta(microseconds=1)


def _resolve_counter(counter: TokenCounter | None, use_tiktoken: bool,
                     encoding: str) -> tuple[TokenCounter, str]:
    if counter is not None:
        if not callable(counter):
            raise InvalidTypeError("token_counter", counter, "a callable text -> int, or None")
        return counter, "counter"
    if use_tiktoken:
        if encoding not in OFFLINE_ENCODINGS:
            warn_estimate(f"{encoding!r} has no offline data (only "
                          f"{', '.join(OFFLINE_ENCODINGS)} do)")
            return estimate_tokens, "estimate"
        try:
            return resolve_counter(encoding), f"tiktoken:{encoding}"
        except ConfigurationError as exc:
            warn_estimate(exc.problem.partition("; install")[0])
    return estimate_tokens, "estimate"


def _shifted(moment: datetime, microseconds: int, segment: Segment,
             synthesized: bool) -> datetime:
    """``moment`` moved by ``microseconds``; a DecodeError naming the segment's
    message when that leaves the date range (years 1 to 9999)."""
    try:
        return moment + microseconds * _MICROSECOND
    except OverflowError:
        where = (f"messages[{segment.message_index}]" if segment.message_index is not None
                 else segment.role)
        edge = "after the last" if microseconds > 0 else "before the first"
        if synthesized:
            problem = (f"has no timestamp, and the one synthesized for it "
                       f"({abs(microseconds)} microsecond(s) from a neighbour's) would fall "
                       f"{edge} representable instant (years 1 to 9999): give the message "
                       "its own timestamp")
            field_name = where
        else:
            problem = (f"its part {segment.offset} would be timed {edge} representable "
                       f"instant (years 1 to 9999): the message's timestamp is at the edge "
                       "of the range and each further part is one microsecond later")
            field_name = f"{where}.timestamp"
        raise DecodeError(field_name, moment.isoformat(), problem) from None


def _timestamps(segments: list[Segment], synthesize: bool,
                end: datetime | None) -> list[tuple[datetime | None, str | None]]:
    """Each segment's timestamp and where it came from (see the module doc). A
    timestamp at the edge of the date range is kept as it is; one the rule would
    move past the edge (a later part, a synthesized neighbour) is a DecodeError."""
    own: list[datetime | None] = [
        None if s.timestamp is None else _shifted(s.timestamp, s.offset, s, False)
        for s in segments
    ]
    result: list[tuple[datetime | None, str | None]] = [
        (moment, None if moment is None else "message") for moment in own
    ]
    if not synthesize:
        return result
    timed = [position for position, moment in enumerate(own) if moment is not None]
    if not timed:
        last = (datetime.now(UTC) if end is None else end).astimezone(UTC)
        count = len(segments)
        return [(_shifted(last, -(count - 1 - position), segments[position], True),
                 "synthesized") for position in range(count)]
    first = timed[0]
    anchor_moment = own[first]
    assert anchor_moment is not None
    anchor = first
    for position in range(len(segments)):
        moment = own[position]
        if moment is not None:
            anchor, anchor_moment = position, moment
            continue
        if position < first:
            base = own[first]
            assert base is not None
            result[position] = (_shifted(base, -(first - position), segments[position], True),
                                 "synthesized")
        else:
            result[position] = (_shifted(anchor_moment, position - anchor, segments[position],
                                         True), "synthesized")
    return result


def _kinds(kinds: Mapping[str, ContextKind | str] | None) -> Mapping[str, ContextKind]:
    if kinds is None:
        return _DEFAULT_KINDS
    if not isinstance(kinds, Mapping):
        raise InvalidTypeError("kinds", kinds, "a mapping of role to kind")
    merged = dict(_DEFAULT_KINDS)
    for role, kind in kinds.items():
        if role not in _DEFAULT_KINDS:
            raise InvalidValueError(f"kinds[{role!r}]", role,
                                    f"must be one of {', '.join(_DEFAULT_KINDS)}")
        merged[role] = ContextKind(kind)
    return merged


def chat_to_items(
    data: Any,
    *,
    format: ChatFormat | None = None,
    token_counter: TokenCounter | None = None,
    use_tiktoken: bool = True,
    tiktoken_encoding: str = "o200k_base",
    pin_system: bool = True,
    synthesize_timestamps: bool = True,
    end: datetime | None = None,
    kinds: Mapping[str, ContextKind | str] | None = None,
) -> list[ContextItem]:
    """The context items of a transcript, in conversation order (see the module doc).

    ``data`` is a list of messages or an object with ``"messages"`` (and, for
    Anthropic, ``"system"``), as parsed from JSON. ``format`` says which
    (a transcript showing the other format raises
    :class:`~cupellation.exceptions.FormatMismatchError`).
    ``token_counter`` counts tokens (else tiktoken's ``tiktoken_encoding`` when
    ``use_tiktoken`` and available, else the estimate). ``end`` is the
    timestamp of the last item when timestamps are synthesized from nothing
    (default: now). ``kinds`` maps ``system``, ``user``, ``assistant``,
    ``tool_call`` and ``tool_result`` to other kinds.

    Raises :class:`~cupellation.exceptions.DecodeError` naming the message and
    field for a malformed transcript.
    """
    return _convert(data, None, _Options(
        format=format, token_counter=token_counter, use_tiktoken=use_tiktoken,
        tiktoken_encoding=tiktoken_encoding, pin_system=pin_system,
        synthesize_timestamps=synthesize_timestamps, end=end, kinds=kinds))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Options:
    """The conversion options of :func:`chat_to_items` and :func:`load_chat`."""

    format: ChatFormat | None
    token_counter: TokenCounter | None
    use_tiktoken: bool
    tiktoken_encoding: str
    pin_system: bool
    synthesize_timestamps: bool
    end: datetime | None
    kinds: Mapping[str, ContextKind | str] | None

    def __post_init__(self) -> None:
        if self.format is not None and self.format not in ("openai", "anthropic"):
            raise InvalidValueError("format", self.format,
                                    "must be 'openai', 'anthropic' or None")
        end = self.end
        if end is not None and (not isinstance(end, datetime) or end.utcoffset() is None):
            raise InvalidValueError("end", end, "must be a timezone-aware datetime or None")


def _convert(data: Any, lines: Sequence[int] | None, options: _Options) -> list[ContextItem]:
    """:func:`chat_to_items`, with each message's line for JSON Lines input."""
    messages, system, has_system = messages_of(data)
    chosen: ChatFormat = detect_chat_format(data) if options.format is None else options.format
    if options.format is not None:  # a format given is checked, never trusted
        check_chat_format(messages, chosen)
    if chosen == "openai" and has_system:
        raise DecodeError("system", system,
                          "is not part of the OpenAI format (use a 'system' role message)")
    counter, counted_by = _resolve_counter(options.token_counter, options.use_tiktoken,
                                           options.tiktoken_encoding)
    reader = Reader(chosen, _kinds(options.kinds), lines)
    if chosen == "openai":
        reader.openai(messages)
    else:
        reader.anthropic(system, has_system, messages)
    segments = reader.segments
    moments = _timestamps(segments, options.synthesize_timestamps, options.end)
    first_system = next((position for position, s in enumerate(segments)
                         if s.role in ("system", "developer")), None)
    items: list[ContextItem] = []
    for position, (segment, (moment, origin)) in enumerate(zip(segments, moments, strict=True)):
        tokens = counter(segment.text)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InvalidValueError("token_counter", tokens,
                                    "must return a non-negative integer")
        metadata: dict[str, Any] = {POSITION_KEY: position}
        if segment.message_index is not None:
            metadata[MESSAGE_INDEX_KEY] = segment.message_index
        metadata[_ROLE_KEY] = segment.role
        metadata[_FORMAT_KEY] = chosen
        metadata[TOKENS_KEY] = counted_by
        if origin is not None:
            metadata[_TIMESTAMP_KEY] = origin
        metadata.update(segment.metadata)
        try:
            items.append(ContextItem(
                content=segment.text, tokens=tokens, kind=segment.kind, source=segment.source,
                priority=segment.priority, tags=segment.tags, metadata=metadata,
                timestamp=moment,
                pinned=segment.pinned or (options.pin_system and position == first_system),
            ))
        except (InvalidValueError, InvalidTypeError) as exc:
            index = segment.message_index
            where = "system" if index is None else f"messages[{index}]"
            raise reader.error(index, f"{where}.{exc.field}", exc.value, exc.problem) from None
    return items


def _names_a_file(text: str) -> bool:
    """Whether a string names an existing file (JSON text never does)."""
    stripped = text.strip()
    if not stripped or "\n" in stripped or stripped[0] in "{[":
        return False
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL, is not a file
        return False


def load_chat(
    source: str | os.PathLike[str],
    *,
    format: ChatFormat | None = None,
    token_counter: TokenCounter | None = None,
    use_tiktoken: bool = True,
    tiktoken_encoding: str = "o200k_base",
    pin_system: bool = True,
    synthesize_timestamps: bool = True,
    end: datetime | None = None,
    kinds: Mapping[str, ContextKind | str] | None = None,
) -> list[ContextItem]:
    """:func:`chat_to_items` of a JSON document or a JSON Lines file of messages.

    ``source`` is a path (a :class:`~pathlib.Path`, or a one-line string naming
    an existing file) or the text itself. JSON Lines hold one message object
    per line; their errors name the line. The options are those of
    :func:`chat_to_items`.
    """
    options = _Options(
        format=format, token_counter=token_counter, use_tiktoken=use_tiktoken,
        tiktoken_encoding=tiktoken_encoding, pin_system=pin_system,
        synthesize_timestamps=synthesize_timestamps, end=end, kinds=kinds)
    text, where = _source_text(source)
    # JSON Lines end at \n only: a raw U+2028, U+2029 or U+0085 is valid inside a
    # JSON string, and str.splitlines() would cut the record there.
    rows = text.split("\n")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as whole:
        if whole.msg != "Extra data":
            shown = rows[whole.lineno - 1][:80] if 0 < whole.lineno <= len(rows) else ""
            raise DecodeError(where, shown, f"is not valid JSON: {whole.msg}",
                              line=whole.lineno) from None
    else:
        if not (isinstance(data, Mapping) and "role" in data and "messages" not in data):
            return _convert(data, None, options)
    messages, lines = _json_lines(rows, where)
    return _convert(messages, lines, options)


def _source_text(source: object) -> tuple[str, str]:
    """The text of ``source`` (a path, or the text itself) and how errors name it."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _names_a_file(source)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InvalidValueError("source", str(path),
                                    f"cannot be read ({exc.strerror or exc})") from None
        try:
            return data.decode("utf-8"), str(path)
        except UnicodeDecodeError as exc:
            raise DecodeError(str(path), data[exc.start:exc.start + 8],
                              f"is not UTF-8 text ({exc.reason} at byte {exc.start})",
                              line=data.count(b"\n", 0, exc.start) + 1) from None
    if isinstance(source, str):
        return source, "<chat>"
    raise InvalidTypeError("source", source, "a path or the transcript text")


def _json_lines(rows: list[str], where: str) -> tuple[list[Any], list[int]]:
    """JSON Lines: one message per (non-blank) line, and each one's line number."""
    messages: list[Any] = []
    lines: list[int] = []
    for number, line in enumerate(rows, start=1):
        if not line.strip(" \t\r"):
            continue
        try:
            messages.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DecodeError(where, line[:80], f"is not valid JSON ({exc.msg})",
                              line=number) from None
        lines.append(number)
    return messages, lines
