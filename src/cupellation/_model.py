"""The Cupel data model: ContextItem, ContextKind, ContextSource, ContextBudget,
OverflowStrategy and ScoredItem (``spec/src/data-model``)."""

from __future__ import annotations

import difflib
import enum
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple, Self, overload

from .exceptions import (
    DecodeError,
    InvalidTextError,
    InvalidTypeError,
    InvalidValueError,
    MetadataTooDeepError,
)

__all__ = [
    "MAX_METADATA_DEPTH",
    "ContextBudget",
    "ContextItem",
    "ContextKind",
    "ContextSource",
    "OverflowStrategy",
    "ScoredItem",
    "ScoredItems",
    "ascii_fold",
    "format_timestamp",
    "parse_timestamp",
]

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_fold(text: str) -> str:
    """Lower-case ASCII letters only, as the specification's comparisons require.

    ``str.lower`` would also fold non-ASCII letters ("É" to "é"), which the
    specification does not do.
    """
    return text.translate(_ASCII_LOWER)


#: How many levels of mappings and lists ``ContextItem.metadata`` may nest, counting
#: the metadata mapping itself: ``{"a": {"b": [1]}}`` is 3 levels. Real metadata is a
#: few levels deep; the limit keeps every encoder and decoder clear of unbounded
#: recursion (Python's own limit is about 1,000 frames).
MAX_METADATA_DEPTH = 64


def check_text(field_name: str, value: str) -> str:
    """``value``, after checking it is Unicode text: no lone surrogate (U+D800..U+DFFF).

    Raises :class:`~cupellation.exceptions.InvalidTextError` naming ``field_name``
    and the position. ASCII text is settled without a scan; other text by one
    UTF-8 encoding, which fails exactly on a lone surrogate.
    """
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTextError(field_name, value, exc.start) from None
    return value


class _FoldedName:
    """An extensible string enumeration compared with ASCII case folding."""

    __slots__ = ("_folded", "value")
    _field: ClassVar[str] = "name"
    value: str
    _folded: str

    def __init__(self, value: str | _FoldedName) -> None:
        if isinstance(value, _FoldedName):
            value = value.value
        if not isinstance(value, str):
            raise InvalidTypeError(self._field, value, "a string")
        if not value.strip():
            raise InvalidValueError(self._field, value, "must not be empty or whitespace-only")
        check_text(self._field, value)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "_folded", ascii_fold(value))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, type(self)):
            return self._folded == other._folded
        if isinstance(other, str):
            return self._folded == ascii_fold(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._folded)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __reduce__(self) -> tuple[type[Self], tuple[str]]:
        return (type(self), (self.value,))

    @property
    def folded(self) -> str:
        """The ASCII-folded form used for comparison and hashing."""
        return self._folded


class ContextKind(_FoldedName):
    """The kind of a context item; extensible, compared case-insensitively.

    Well-known values are class attributes: ``ContextKind.MESSAGE`` and so on.
    ``ContextKind("message") == ContextKind.MESSAGE == "MESSAGE"``.
    """

    __slots__ = ()
    _field = "kind"
    MESSAGE: ClassVar[ContextKind]
    DOCUMENT: ClassVar[ContextKind]
    TOOL_OUTPUT: ClassVar[ContextKind]
    MEMORY: ClassVar[ContextKind]
    SYSTEM_PROMPT: ClassVar[ContextKind]


ContextKind.MESSAGE = ContextKind("Message")
ContextKind.DOCUMENT = ContextKind("Document")
ContextKind.TOOL_OUTPUT = ContextKind("ToolOutput")
ContextKind.MEMORY = ContextKind("Memory")
ContextKind.SYSTEM_PROMPT = ContextKind("SystemPrompt")


class ContextSource(_FoldedName):
    """The origin of a context item; extensible, compared case-insensitively."""

    __slots__ = ()
    _field = "source"
    CHAT: ClassVar[ContextSource]
    TOOL: ClassVar[ContextSource]
    RAG: ClassVar[ContextSource]


ContextSource.CHAT = ContextSource("Chat")
ContextSource.TOOL = ContextSource("Tool")
ContextSource.RAG = ContextSource("Rag")


def _json_object(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = data.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise DecodeError(key, value, "must be a JSON object")
    return value


def _json_list(data: Mapping[str, Any], key: str) -> tuple[Any, ...]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise DecodeError(key, value, "must be a JSON array")
    return tuple(value)


def _unknown_key_error(owner: str, key: object, value: Any,
                       known: Sequence[str]) -> DecodeError:
    """A DecodeError for a key ``owner`` does not have, suggesting the closest one.

    A name equal to a known key ignoring ASCII case (``Pinned``) is suggested
    first, then one equal ignoring ``_`` and ``-`` as well
    (``future_relevance_hint``), then difflib's closest match (``tokns``).
    """
    name = key if isinstance(key, str) else repr(key)
    suggestion: str | None = None
    if isinstance(key, str):
        folded = {ascii_fold(known_key): known_key for known_key in known}
        lowered = ascii_fold(key)
        squashed = lowered.replace("_", "").replace("-", "")
        suggestion = folded.get(lowered) or folded.get(squashed)
        if suggestion is None:
            close = difflib.get_close_matches(squashed, list(folded), n=1, cutoff=0.6)
            suggestion = folded[close[0]] if close else None
    if suggestion is not None:
        problem = f"is not a {owner} field; did you mean `{suggestion}`?"
    else:
        problem = f"is not a {owner} field (known: {', '.join(known)})"
    return DecodeError(name, value, problem)


def _check_known_keys(owner: str, data: Mapping[Any, Any], known: Sequence[str]) -> None:
    known_set = frozenset(known)
    for key in data:
        if key not in known_set:
            raise _unknown_key_error(owner, key, data[key], known)


def _loads(text: Any, owner: str) -> Any:
    """``json.loads`` for ``from_json``: strict JSON (no NaN or Infinity tokens),
    errors as :class:`DecodeError` with the line number."""
    if not isinstance(text, str | bytes | bytearray):
        raise InvalidTypeError(
            "text", text, f"JSON text (str or bytes); for a mapping use {owner}.from_dict"
        )

    def reject_constant(name: str) -> Any:
        raise DecodeError("json", name, "is not valid JSON (write non-finite numbers as text)")

    try:
        return json.loads(text, parse_constant=reject_constant)
    except RecursionError:
        raise DecodeError("json", text[:40], "nests arrays or objects too deeply") from None
    except json.JSONDecodeError as exc:
        raise DecodeError("json", exc.doc[max(0, exc.pos - 20):exc.pos + 20], exc.msg,
                          line=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise DecodeError("json", text[:40], f"is not UTF-8 ({exc.reason})") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise DecodeError("json", text[:40], f"is not valid JSON ({exc})") from None


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, allow_nan=False)


# JSON has no NaN or infinities; a non-finite hint (which ReflexiveScorer
# defines a score for) is written as the string "NaN", "Infinity" or "-Infinity".
_NON_FINITE_TO_JSON = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_NON_FINITE_FROM_JSON = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _hint_to_json(value: float) -> float | str:
    return value if math.isfinite(value) else _NON_FINITE_TO_JSON[repr(value)]


def _hint_from_json(value: Any) -> Any:
    if isinstance(value, str):
        if value not in _NON_FINITE_FROM_JSON:
            raise DecodeError("futureRelevanceHint", value,
                              "must be a number, or 'NaN', 'Infinity' or '-Infinity'")
        return _NON_FINITE_FROM_JSON[value]
    return value


_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def fits_int64(value: int) -> bool:
    """True when ``value`` is a signed 64-bit integer, the specification's integers
    (and what OpenTelemetry, protobuf and numpy can carry)."""
    return _INT64_MIN <= value <= _INT64_MAX


def first_wide_int(value: Any) -> tuple[str, int] | None:
    """The first integer beyond int64 inside decoded JSON data, as (its path below
    ``value``, such as ``"['a'][0]"``, the integer), or None.

    Walks mappings, lists and tuples without recursion, so data nested as deep as
    a JSON decoder allows is walked safely.
    """
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, current = pending.pop()
        if isinstance(current, int):
            if not isinstance(current, bool) and not fits_int64(current):
                return path, current
        elif isinstance(current, Mapping):
            pending.extend(reversed([(f"{path}[{key!r}]", nested)
                                     for key, nested in current.items()]))
        elif isinstance(current, list | tuple):
            pending.extend(reversed([(f"{path}[{index}]", nested)
                                     for index, nested in enumerate(current)]))
    return None


def _check_int(field_name: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    # bool is an int subclass; a token count of True is a bug, not 1.
    if type(value) is not int and not (isinstance(value, int) and not isinstance(value, bool)):
        raise InvalidTypeError(field_name, value, "an integer" + (" or None" if optional else ""))
    # The specification's integers are signed 64-bit; larger ones cannot be
    # compared with scores or summed with numpy safely.
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidValueError(field_name, value, "must fit in a signed 64-bit integer")


def _check_aware(field_name: str, value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise InvalidTypeError(field_name, value, "a timezone-aware datetime or None")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidValueError(field_name, value, "must be timezone-aware (UTC semantics)")
    if value.tzinfo is UTC:
        return value
    try:
        return value.astimezone(UTC)
    except OverflowError:
        # datetime(1, 1, 1, tzinfo=+05:00) is before 0001-01-01 in UTC.
        raise InvalidValueError(field_name, value,
                                "is outside the datetime range once converted to UTC") from None


def format_timestamp(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix; microseconds only when non-zero."""
    text = value.astimezone(UTC).replace(tzinfo=None).isoformat()
    return text + "Z"


def parse_timestamp(text: str, *, field_name: str = "timestamp") -> datetime:
    """Parse an ISO 8601 timestamp that carries an offset (``Z`` or ``+hh:mm``)."""
    if not isinstance(text, str):
        raise DecodeError(field_name, text, "must be an ISO 8601 string")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise DecodeError(field_name, text, "is not an ISO 8601 timestamp") from None
    if parsed.tzinfo is None:
        raise DecodeError(field_name, text, "must carry a UTC offset such as 'Z'")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise DecodeError(field_name, text,
                          "is outside the datetime range once converted to UTC") from None


_EMPTY_METADATA: Mapping[str, Any] = MappingProxyType({})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _freeze_json(value: Any, path: str, open_containers: set[int], depth: int = 1,
                 top: str = "") -> Any:
    """``value`` checked to be JSON data and made read-only: mappings become
    ``MappingProxyType`` over a copy, lists and tuples become tuples.

    Raises :class:`InvalidValueError` naming ``path`` (``metadata['a'][0]``)
    for anything JSON cannot hold: a set, bytes, any other object, NaN or an
    infinity, a key that is not a string, or a container that contains itself;
    :class:`InvalidTextError` for a key or string holding a lone surrogate; and
    :class:`MetadataTooDeepError` for containers nested more than
    :data:`MAX_METADATA_DEPTH` levels (``depth`` is the level of ``value``; ``top``
    the path two levels down, which names the too-deep value without 64 indices).
    """
    if value is None or isinstance(value, int):  # bool is an int
        return value
    if isinstance(value, str):
        return value if value.isascii() else check_text(path, value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValueError(path, value, "must be finite: JSON has no NaN or infinity")
        return value
    if isinstance(value, Mapping | list | tuple):
        if id(value) in open_containers:
            raise InvalidValueError(path, value, "contains itself: JSON cannot hold a cycle")
        if depth > MAX_METADATA_DEPTH:
            raise MetadataTooDeepError(f"{top}[...]", value, MAX_METADATA_DEPTH)
        open_containers.add(id(value))
        inner = depth + 1
        if depth <= 2:
            top = path
        try:
            if isinstance(value, Mapping):
                frozen: dict[str, Any] = {}
                for key, nested in value.items():
                    if not isinstance(key, str):
                        raise InvalidValueError(f"{path}[{key!r}]", key,
                                                "keys must be strings, as JSON object keys are")
                    if not key.isascii():
                        check_text(f"{path} key {key!r}", key)
                    frozen[key] = _freeze_json(nested, f"{path}[{key!r}]", open_containers,
                                               inner, top)
                return MappingProxyType(frozen)
            return tuple(_freeze_json(nested, f"{path}[{index}]", open_containers, inner, top)
                         for index, nested in enumerate(value))
        finally:
            open_containers.discard(id(value))
    raise InvalidValueError(
        path, value,
        f"is of type {type(value).__name__}, which JSON cannot hold (use str, int, float, "
        "bool, None, lists and mappings with string keys)",
    )


def _thaw_json(value: Any) -> Any:
    """The plain JSON data (dicts and lists) a value of :func:`_freeze_json` stands for."""
    if isinstance(value, Mapping):
        return {key: _thaw_json(nested) for key, nested in value.items()}
    if isinstance(value, tuple):
        return [_thaw_json(nested) for nested in value]
    return value


#: ContextItem's JSON keys (the seed's camelCase names), in the seed's order.
_ITEM_KEYS: tuple[str, ...] = (
    "content", "tokens", "kind", "source", "priority", "tags", "metadata", "timestamp",
    "futureRelevanceHint", "pinned", "originalTokens",
)

#: ContextBudget's JSON keys.
_BUDGET_KEYS: tuple[str, ...] = (
    "maxTokens", "targetTokens", "outputReserve", "reservedSlots",
    "estimationSafetyMarginPercent",
)


@dataclass(frozen=True, slots=True, init=False)
class ContextItem:
    """One piece of context that may go into the window (immutable).

    ``kind`` and ``source`` accept plain strings; ``tags`` is stored as a tuple.
    ``metadata`` must be JSON data (strings, finite numbers, bools, ``None``,
    lists and mappings with string keys) nested at most
    :attr:`MAX_METADATA_DEPTH` (64) levels of mappings and lists, counting the
    metadata mapping itself (``{"a": {"b": [1]}}`` is 3 levels), and is
    stored as a deep read-only copy: mappings become read-only mappings and
    lists become tuples, so nothing reachable from the item can be changed
    through it (:meth:`to_dict` gives plain dicts and lists back). Items
    compare by value; the pipeline itself tracks them by identity.

    Invalid values raise :class:`~cupellation.exceptions.InvalidValueError` or
    :class:`~cupellation.exceptions.InvalidTypeError` naming the field; two
    have errors of their own: every string (``content``, ``kind``,
    ``source``, each tag, metadata keys and string values at any depth) must be
    Unicode text, and one holding a lone surrogate (U+D800..U+DFFF, which no
    UTF-8 output can hold) raises
    :class:`~cupellation.exceptions.InvalidTextError`; metadata nested deeper
    than the limit raises :class:`~cupellation.exceptions.MetadataTooDeepError`.
    """

    #: How many levels of mappings and lists ``metadata`` may nest (the metadata
    #: mapping itself counts as one).
    MAX_METADATA_DEPTH: ClassVar[int] = MAX_METADATA_DEPTH

    content: str
    tokens: int
    kind: ContextKind
    source: ContextSource
    priority: int | None
    tags: tuple[str, ...]
    metadata: Mapping[str, Any] = field(hash=False)
    timestamp: datetime | None
    future_relevance_hint: float | None
    pinned: bool
    original_tokens: int | None
    #: ``timestamp`` as whole microseconds since the Unix epoch: an exact,
    #: cheaply comparable key for the rank scorers (not part of the item's value).
    _timestamp_us: int | None = field(init=False, repr=False, compare=False, hash=False)

    def __init__(
        self,
        content: str,
        tokens: int,
        kind: ContextKind | str = ContextKind.MESSAGE,
        source: ContextSource | str = ContextSource.CHAT,
        priority: int | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        timestamp: datetime | None = None,
        future_relevance_hint: float | None = None,
        pinned: bool = False,
        original_tokens: int | None = None,
    ) -> None:
        set_ = object.__setattr__
        if not isinstance(content, str):
            raise InvalidTypeError("content", content, "a non-empty string")
        if not content:
            raise InvalidValueError("content", content, "must be a non-empty string")
        set_(self, "content", check_text("content", content))
        _check_int("tokens", tokens)
        set_(self, "tokens", tokens)
        set_(self, "kind", kind if type(kind) is ContextKind else ContextKind(kind))
        set_(self, "source", source if type(source) is ContextSource else ContextSource(source))
        _check_int("priority", priority, optional=True)
        set_(self, "priority", priority)
        if type(tags) is not tuple:
            if isinstance(tags, str) or not isinstance(tags, Iterable):
                raise InvalidTypeError("tags", tags, "a sequence of strings")
            tags = tuple(tags)
        for position, tag in enumerate(tags):
            if not isinstance(tag, str):
                raise InvalidTypeError("tags", tag, "a string")
            if not tag.isascii():
                check_text(f"tags[{position}]", tag)
        set_(self, "tags", tags)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidTypeError("metadata", metadata, "a mapping of str to JSON data")
        if not metadata:
            set_(self, "metadata", _EMPTY_METADATA)
        else:
            set_(self, "metadata", _freeze_json(metadata, "metadata", set()))
        if timestamp is None:
            set_(self, "timestamp", None)
            set_(self, "_timestamp_us", None)
        else:
            utc = _check_aware("timestamp", timestamp)
            set_(self, "timestamp", utc)
            set_(self, "_timestamp_us", (utc - _EPOCH) // _MICROSECOND)
        if future_relevance_hint is not None:
            if isinstance(future_relevance_hint, bool) or not isinstance(
                    future_relevance_hint, int | float):
                raise InvalidTypeError("future_relevance_hint", future_relevance_hint,
                                       "a float or None")
            try:
                future_relevance_hint = float(future_relevance_hint)
            except OverflowError:
                raise InvalidValueError("future_relevance_hint", future_relevance_hint,
                                        "is too large for a float64") from None
        set_(self, "future_relevance_hint", future_relevance_hint)
        if not isinstance(pinned, bool):
            raise InvalidTypeError("pinned", pinned, "a bool")
        set_(self, "pinned", pinned)
        _check_int("original_tokens", original_tokens, optional=True)
        set_(self, "original_tokens", original_tokens)

    def __reduce__(self) -> tuple[type[ContextItem], tuple[Any, ...]]:
        # The read-only metadata views cannot be pickled; rebuild from a plain copy.
        return (type(self), (self.content, self.tokens, self.kind, self.source, self.priority,
                             self.tags, _thaw_json(self.metadata), self.timestamp,
                             self.future_relevance_hint, self.pinned, self.original_tokens))

    def __hash__(self) -> int:
        # metadata values may be unhashable; the other fields identify an item well.
        return hash(
            (self.content, self.tokens, self.kind, self.source, self.priority, self.tags,
             self.timestamp, self.future_relevance_hint, self.pinned, self.original_tokens)
        )

    # -- JSON ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The seed's JSON shape as a plain mapping: ``content``, ``tokens`` and
        ``kind`` always; every other field only when it differs from its
        default (never null). Metadata comes back as plain dicts and lists."""
        out: dict[str, Any] = {"content": self.content, "tokens": self.tokens,
                               "kind": self.kind.value}
        if self.source != ContextSource.CHAT or self.source.value != "Chat":
            out["source"] = self.source.value
        if self.priority is not None:
            out["priority"] = self.priority
        if self.tags:
            out["tags"] = list(self.tags)
        if self.metadata:
            out["metadata"] = _thaw_json(self.metadata)
        if self.timestamp is not None:
            out["timestamp"] = format_timestamp(self.timestamp)
        if self.future_relevance_hint is not None:
            out["futureRelevanceHint"] = _hint_to_json(self.future_relevance_hint)
        if self.pinned:
            out["pinned"] = True
        if self.original_tokens is not None:
            out["originalTokens"] = self.original_tokens
        return out

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (UTF-8 characters kept, not escaped)."""
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextItem:
        """Build an item from the seed's JSON shape (a mapping, as :meth:`to_dict` gives).

        Raises :class:`~cupellation.exceptions.DecodeError` naming the field
        for a missing or mistyped value, and for a key that is not one of the
        seed's eleven, suggesting the closest (``Pinned``: "did you mean
        `pinned`?"): a misspelt field is never silently dropped.
        """
        if not isinstance(data, Mapping):
            raise DecodeError("item", data, "must be a JSON object")
        _check_known_keys("ContextItem", data, _ITEM_KEYS)
        if "content" not in data:
            raise DecodeError("content", None, "is required")
        if "tokens" not in data:
            raise DecodeError("tokens", None, "is required")
        timestamp = data.get("timestamp")
        try:
            return cls(
                content=data["content"],
                tokens=data["tokens"],
                kind=ContextKind(data.get("kind", "Message")),
                source=ContextSource(data.get("source", "Chat")),
                priority=data.get("priority"),
                tags=_json_list(data, "tags"),
                metadata=_json_object(data, "metadata"),
                timestamp=None if timestamp is None else parse_timestamp(timestamp),
                future_relevance_hint=_hint_from_json(data.get("futureRelevanceHint")),
                pinned=data.get("pinned", False),
                original_tokens=data.get("originalTokens"),
            )
        except (InvalidValueError, InvalidTypeError) as exc:
            raise DecodeError(exc.field, exc.value, exc.problem) from exc

    @classmethod
    def from_json(cls, text: str | bytes) -> ContextItem:
        """Build an item from JSON text; see :meth:`from_dict`.

        Raises :class:`~cupellation.exceptions.DecodeError` for text that is
        not strict JSON (``NaN`` and ``Infinity`` tokens included) or not an item.
        """
        return cls.from_dict(_loads(text, "ContextItem"))


def _check_nonneg_int(field_name: str, value: Any) -> None:
    _check_int(field_name, value)
    if value < 0:
        raise InvalidValueError(field_name, value, "must be >= 0")


@dataclass(frozen=True, slots=True, init=False)
class ContextBudget:
    """Token budget constraints, validated at construction (all seven rules).

    ``reserved_slots`` keys may be given as strings; they are stored as
    :class:`ContextKind`, so lookups are case-insensitive. The sum of its
    values (:attr:`reserved_tokens`) is taken off the slicer's budget as
    tokens, and the safety margin then scales what is left: see
    :meth:`effective`.
    """

    max_tokens: int
    target_tokens: int
    output_reserve: int
    reserved_slots: Mapping[ContextKind, int] = field(hash=False)
    estimation_safety_margin_percent: float

    def __init__(
        self,
        max_tokens: int,
        target_tokens: int,
        output_reserve: int = 0,
        reserved_slots: Mapping[ContextKind, int] | Mapping[str, int] | None = None,
        estimation_safety_margin_percent: float = 0.0,
    ) -> None:
        set_ = object.__setattr__
        _check_nonneg_int("max_tokens", max_tokens)
        _check_nonneg_int("target_tokens", target_tokens)
        if target_tokens > max_tokens:
            raise InvalidValueError(
                "target_tokens", target_tokens, f"must be <= max_tokens ({max_tokens})"
            )
        _check_nonneg_int("output_reserve", output_reserve)
        if output_reserve > max_tokens:
            raise InvalidValueError(
                "output_reserve", output_reserve, f"must be <= max_tokens ({max_tokens})"
            )
        margin = estimation_safety_margin_percent
        if isinstance(margin, bool) or not isinstance(margin, int | float):
            raise InvalidTypeError("estimation_safety_margin_percent", margin, "a float")
        if not (0.0 <= margin <= 100.0):  # also rejects NaN
            raise InvalidValueError(
                "estimation_safety_margin_percent", margin, "must be within [0.0, 100.0]"
            )
        slots = {} if reserved_slots is None else reserved_slots
        if not isinstance(slots, Mapping):
            raise InvalidTypeError("reserved_slots", slots, "a mapping of kind to int")
        normalised: dict[ContextKind, int] = {}
        for key, count in slots.items():
            if not isinstance(key, str | ContextKind):
                raise InvalidTypeError("reserved_slots key", key, "a kind name")
            if isinstance(key, str):
                check_text("reserved_slots key", key)
            kind = ContextKind(key)
            if kind in normalised:
                raise InvalidValueError("reserved_slots key", key,
                                        f"repeats kind {kind.value!r} (kinds ignore case)")
            _check_int(f"reserved_slots[{kind.value!r}]", count)
            if count < 0:
                raise InvalidValueError(f"reserved_slots[{kind.value!r}]", count, "must be >= 0")
            normalised[kind] = count
        set_(self, "max_tokens", max_tokens)
        set_(self, "target_tokens", target_tokens)
        set_(self, "output_reserve", output_reserve)
        set_(self, "reserved_slots", MappingProxyType(normalised))
        set_(self, "estimation_safety_margin_percent", float(margin))

    def __hash__(self) -> int:
        return hash((self.max_tokens, self.target_tokens, self.output_reserve,
                     tuple(sorted((k.folded, v) for k, v in self.reserved_slots.items())),
                     self.estimation_safety_margin_percent))

    def __reduce__(self) -> tuple[type[ContextBudget], tuple[Any, ...]]:
        # The read-only slots view cannot be pickled; rebuild from a plain copy.
        return (type(self), (self.max_tokens, self.target_tokens, self.output_reserve,
                             dict(self.reserved_slots), self.estimation_safety_margin_percent))

    def reserved_for(self, kind: ContextKind | str) -> int:
        """Reserved slots for ``kind`` (case-insensitive), 0 when none."""
        return self.reserved_slots.get(ContextKind(kind), 0)

    @property
    def reserved_tokens(self) -> int:
        """The sum of ``reserved_slots``'s values: the ``reservedTokens`` that
        ``COMPUTE-EFFECTIVE-BUDGET`` subtracts from the slicer's budget."""
        return sum(self.reserved_slots.values())

    def effective(self, pinned_tokens: int) -> ContextBudget:
        """The slicer's budget, exactly as ``COMPUTE-EFFECTIVE-BUDGET``
        (``spec/src/pipeline/slice.md`` and ``data-model/context-budget.md`` of
        the specification snapshot)::

            reservedTokens  <- sum(reservedSlots.values)
            effectiveMax    <- max(0, maxTokens - outputReserve - pinnedTokens - reservedTokens)
            effectiveTarget <- max(0, targetTokens - pinnedTokens - reservedTokens)
            effectiveTarget <- min(effectiveTarget, effectiveMax)
            if estimationSafetyMarginPercent > 0:
                multiplier      <- 1.0 - estimationSafetyMarginPercent / 100.0
                effectiveMax    <- floor(effectiveMax * multiplier)
                effectiveTarget <- floor(effectiveTarget * multiplier)
                effectiveTarget <- min(effectiveTarget, effectiveMax)

        For example ``ContextBudget(1000, 800, reserved_slots={"Message": 100},
        estimation_safety_margin_percent=10).effective(0)`` is ``(810, 630)``:
        900 and 700 after the reserved tokens, then 90% of each.

        The result is a fresh budget with only ``max_tokens`` and
        ``target_tokens`` set: as the chapter's conformance notes say, the
        effects of ``output_reserve``, ``reserved_slots`` and
        ``estimation_safety_margin_percent`` are in those two numbers, and the
        original fields are not forwarded. The product is a float64, as in the
        chapter; where its rounding would lift a value above the one it was
        taken from (only possible near 2**53 tokens), the value is kept.
        """
        reserved = self.reserved_tokens
        effective_max = max(0, self.max_tokens - self.output_reserve - pinned_tokens - reserved)
        effective_target = min(max(0, self.target_tokens - pinned_tokens - reserved),
                               effective_max)
        margin = self.estimation_safety_margin_percent
        if margin > 0:
            multiplier = 1.0 - margin / 100.0
            effective_max = min(math.floor(effective_max * multiplier), effective_max)
            effective_target = min(math.floor(effective_target * multiplier),
                                   effective_target, effective_max)
        return ContextBudget(max_tokens=effective_max, target_tokens=effective_target)

    def to_dict(self) -> dict[str, Any]:
        """camelCase JSON as a plain mapping, as the specification names the
        fields; defaults are left out."""
        out: dict[str, Any] = {"maxTokens": self.max_tokens, "targetTokens": self.target_tokens}
        if self.output_reserve:
            out["outputReserve"] = self.output_reserve
        if self.reserved_slots:
            out["reservedSlots"] = {k.value: v for k, v in self.reserved_slots.items()}
        if self.estimation_safety_margin_percent:
            out["estimationSafetyMarginPercent"] = self.estimation_safety_margin_percent
        return out

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextBudget:
        """Inverse of :meth:`to_dict`.

        Raises :class:`~cupellation.exceptions.DecodeError` naming the field
        for a missing, mistyped or invalid value, and for an unknown key
        (with the closest known one as a suggestion).
        """
        if not isinstance(data, Mapping):
            raise DecodeError("budget", data, "must be a JSON object")
        _check_known_keys("ContextBudget", data, _BUDGET_KEYS)
        for required in ("maxTokens", "targetTokens"):
            if required not in data:
                raise DecodeError(required, None, "is required")
        try:
            return cls(
                max_tokens=data["maxTokens"],
                target_tokens=data["targetTokens"],
                output_reserve=data.get("outputReserve", 0),
                reserved_slots=_json_object(data, "reservedSlots"),
                estimation_safety_margin_percent=data.get("estimationSafetyMarginPercent", 0.0),
            )
        except (InvalidValueError, InvalidTypeError) as exc:
            raise DecodeError(exc.field, exc.value, exc.problem) from exc

    @classmethod
    def from_json(cls, text: str | bytes) -> ContextBudget:
        """Build a budget from JSON text; see :meth:`from_dict`."""
        return cls.from_dict(_loads(text, "ContextBudget"))


class OverflowStrategy(enum.Enum):
    """What the Place stage does when the merged selection exceeds ``targetTokens``."""

    THROW = "Throw"
    TRUNCATE = "Truncate"
    PROCEED = "Proceed"

    @classmethod
    def parse(cls, value: OverflowStrategy | str) -> OverflowStrategy:
        """Accept a member or its name in any ASCII case (``"truncate"``)."""
        if isinstance(value, OverflowStrategy):
            return value
        if isinstance(value, str):
            for member in cls:
                if member.value.lower() == ascii_fold(value):
                    return member
        raise InvalidValueError(
            "overflow_strategy", value, "must be one of 'Throw', 'Truncate', 'Proceed'"
        )


class ScoredItem(NamedTuple):
    """A context item with its relevance score (an immutable pair).

    A named tuple rather than a dataclass: the pipeline builds one per
    candidate, and tuple construction is several times cheaper.
    """

    item: ContextItem
    score: float


class ScoredItems(Sequence[ScoredItem]):
    """An immutable sequence of :class:`ScoredItem` backed by two parallel lists.

    The pipeline hands stages this instead of a list of pairs: ``items`` and
    ``scores`` can be read directly (no pair is built per item), while code
    that iterates or indexes still sees ordinary ``ScoredItem`` values. The
    constructor checks that both lists have the same length, that every item
    is a :class:`ContextItem` and that every score is a finite number.
    """

    __slots__ = ("_items", "_scores", "_tokens")
    _items: list[ContextItem]
    _scores: list[float]
    _tokens: list[int] | None

    def __init__(self, items: Iterable[ContextItem], scores: Iterable[float]) -> None:
        item_list = list(items)
        score_list = [check_finite(f"scores[{k}]", s) for k, s in enumerate(scores)]
        if len(item_list) != len(score_list):
            raise InvalidValueError(
                "scores", len(score_list), f"must have one score per item ({len(item_list)})"
            )
        for k, item in enumerate(item_list):
            if not isinstance(item, ContextItem):
                raise InvalidTypeError(f"items[{k}]", item, "a ContextItem")
        self._items = item_list
        self._scores = score_list
        self._tokens = None

    @classmethod
    def _trusted(cls, items: list[ContextItem], scores: list[float],
                 tokens: list[int] | None = None) -> ScoredItems:
        """Wrap lists the pipeline has already validated, without copying them.

        ``tokens``, when given, must be the items' token counts: the pipeline
        keeps them in order so that slicers need not visit every item again.
        """
        self = cls.__new__(cls)
        self._items = items
        self._scores = scores
        self._tokens = tokens
        return self

    @property
    def tokens(self) -> Sequence[int]:
        """The items' token counts, in order (read-only view)."""
        if self._tokens is None:
            self._tokens = [item.tokens for item in self._items]
        return self._tokens

    @property
    def items(self) -> Sequence[ContextItem]:
        """The items, in order (read-only view)."""
        return self._items

    @property
    def scores(self) -> Sequence[float]:
        """The scores, in order (read-only view)."""
        return self._scores

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> ScoredItem: ...

    @overload
    def __getitem__(self, index: slice) -> ScoredItems: ...

    def __getitem__(self, index: int | slice) -> ScoredItem | ScoredItems:
        if isinstance(index, slice):
            tokens = None if self._tokens is None else self._tokens[index]
            return ScoredItems._trusted(self._items[index], self._scores[index], tokens)
        return ScoredItem(self._items[index], self._scores[index])

    def __iter__(self) -> Iterator[ScoredItem]:
        return map(ScoredItem, self._items, self._scores)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ScoredItems):
            return self._items == other._items and self._scores == other._scores
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ScoredItems({len(self)} items)"


def check_finite(field_name: str, value: Any) -> float:
    """Return ``value`` as a float, rejecting bools, non-numbers, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTypeError(field_name, value, "a finite number")
    try:
        result = float(value)
    except OverflowError:
        raise InvalidValueError(field_name, value, "is too large for a float64") from None
    if not math.isfinite(result):
        raise InvalidValueError(field_name, value, "must be finite")
    return result


def items_tokens(items: Sequence[ContextItem]) -> int:
    """Sum of ``tokens`` over ``items``."""
    return sum(item.tokens for item in items)
