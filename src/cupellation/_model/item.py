"""ContextItem: one piece of context that may go into the window (``spec/src/data-model``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from ..exceptions import DecodeError, InvalidTypeError, InvalidValueError
from .jsondata import (
    EMPTY_METADATA,
    EPOCH,
    MAX_METADATA_DEPTH,
    MICROSECOND,
    check_aware,
    check_int,
    dumps_json,
    freeze_json,
    loads_json,
    thaw_json,
)
from .names import ContextKind, ContextSource, check_text
from .wire import ITEM_FIELDS, from_seed, to_seed

__all__ = ["ContextItem", "trusted_item"]


def _checked_tags(tags: Any) -> Any:
    if type(tags) is not tuple:
        if isinstance(tags, str) or not isinstance(tags, Iterable):
            raise InvalidTypeError("tags", tags, "a sequence of strings")
        tags = tuple(tags)
    for position, tag in enumerate(tags):
        if not isinstance(tag, str):
            raise InvalidTypeError("tags", tag, "a string")
        if not tag.isascii():
            check_text(f"tags[{position}]", tag)
    return tags


def _checked_metadata(metadata: Any) -> Mapping[str, Any]:
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidTypeError("metadata", metadata, "a mapping of str to JSON data")
    if not metadata:
        return EMPTY_METADATA
    frozen: Mapping[str, Any] = freeze_json(metadata, "metadata", set())
    return frozen


def _checked_hint(hint: Any) -> float | None:
    if hint is None:
        return None
    if isinstance(hint, bool) or not isinstance(hint, int | float):
        raise InvalidTypeError("future_relevance_hint", hint, "a float or None")
    try:
        return float(hint)
    except OverflowError:
        raise InvalidValueError("future_relevance_hint", hint,
                                "is too large for a float64") from None


def _checked_content(content: Any) -> str:
    if not isinstance(content, str):
        raise InvalidTypeError("content", content, "a non-empty string")
    if not content:
        raise InvalidValueError("content", content, "must be a non-empty string")
    return check_text("content", content)


def _checked_int(field_name: str, value: Any, *, optional: bool = False) -> Any:
    check_int(field_name, value, optional=optional)
    return value


def _checked_pinned(pinned: Any) -> bool:
    if not isinstance(pinned, bool):
        raise InvalidTypeError("pinned", pinned, "a bool")
    return pinned


def _microseconds(timestamp: datetime | None) -> int | None:
    return None if timestamp is None else (timestamp - EPOCH) // MICROSECOND


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

    The JSON shape (:meth:`to_dict`, :meth:`from_dict`) and the event stream's
    flat ``item.*`` keys are both derived from one declaration of the fields
    (declared once, in the package's wire declarations).
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
        # Checked in declaration order (arguments are evaluated left to right), so
        # the first bad field is the one named.
        self._fill((
            _checked_content(content), _checked_int("tokens", tokens),
            kind if type(kind) is ContextKind else ContextKind(kind),
            source if type(source) is ContextSource else ContextSource(source),
            _checked_int("priority", priority, optional=True), _checked_tags(tags),
            _checked_metadata(metadata),
            None if timestamp is None else check_aware("timestamp", timestamp),
            _checked_hint(future_relevance_hint), _checked_pinned(pinned),
            _checked_int("original_tokens", original_tokens, optional=True)))

    def _fill(self, values: tuple[Any, ...]) -> None:
        """Set every field (``values`` in declaration order) and the derived
        microseconds: a slotted, frozen dataclass is filled through
        ``object.__setattr__``."""
        (content, tokens, kind, source, priority, tags, metadata, timestamp, hint, pinned,
         original_tokens) = values
        # Each slot's own descriptor, called directly: what object.__setattr__ ends in,
        # without its lookup by name (a third of filling an item, which the log and span
        # readers do for every decision they rebuild).
        _SET_CONTENT(self, content)
        _SET_TOKENS(self, tokens)
        _SET_KIND(self, kind)
        _SET_SOURCE(self, source)
        _SET_PRIORITY(self, priority)
        _SET_TAGS(self, tags)
        _SET_METADATA(self, metadata)
        _SET_TIMESTAMP(self, timestamp)
        _SET_HINT(self, hint)
        _SET_PINNED(self, pinned)
        _SET_ORIGINAL_TOKENS(self, original_tokens)
        _SET_TIMESTAMP_US(self, _microseconds(timestamp))

    @classmethod
    def trusted(cls, *, content: str, tokens: int, kind: ContextKind, source: ContextSource,
                priority: int | None, tags: tuple[str, ...], metadata: Mapping[str, Any],
                timestamp: datetime | None, future_relevance_hint: float | None,
                pinned: bool, original_tokens: int | None) -> ContextItem:
        """Build an item from values a decoder has already checked, without checking
        them again: for decoders only (the log and span readers build thousands of
        items from values their typed decoding has validated).

        Every argument must already be what the constructor would store:
        non-empty Unicode ``content``, int64 integers, ``ContextKind`` and
        ``ContextSource`` objects, a tuple of strings, metadata that went through
        the data model's ``freeze_json`` (or the empty read-only mapping), a
        timezone-aware ``timestamp`` (it is converted to UTC here), a float hint
        and a bool. Anything else makes an item that breaks the model's promises.
        """
        return trusted_item(content, tokens, kind, source, priority, tags, metadata, timestamp,
                            future_relevance_hint, pinned, original_tokens)

    def __reduce__(self) -> tuple[type[ContextItem], tuple[Any, ...]]:
        # The read-only metadata views cannot be pickled; rebuild from a plain copy.
        return (type(self), (self.content, self.tokens, self.kind, self.source, self.priority,
                             self.tags, thaw_json(self.metadata), self.timestamp,
                             self.future_relevance_hint, self.pinned, self.original_tokens))

    def __hash__(self) -> int:
        # metadata values may be unhashable; the other fields identify an item well.
        return hash(
            (self.content, self.tokens, self.kind, self.source, self.priority, self.tags,
             self.timestamp, self.future_relevance_hint, self.pinned, self.original_tokens)
        )

    # -- JSON ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The wire format's JSON shape as a plain mapping: ``content``, ``tokens`` and
        ``kind`` always; every other field only when it differs from its
        default (never null). Metadata comes back as plain dicts and lists."""
        return to_seed(ITEM_FIELDS, self)

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (UTF-8 characters kept, not escaped)."""
        return dumps_json(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextItem:
        """Build an item from the wire format's JSON shape (a mapping, as :meth:`to_dict` gives).

        Raises :class:`~cupellation.exceptions.DecodeError` naming the field
        for a missing or mistyped value, and for a key that is not one of the
        wire format's eleven, suggesting the closest (``Pinned``: "did you mean
        `pinned`?"): a misspelt field is never silently dropped.
        """
        if not isinstance(data, Mapping):
            raise DecodeError("item", data, "must be a JSON object")
        arguments = from_seed("ContextItem", ITEM_FIELDS, data)
        try:
            return cls(**arguments)
        except (InvalidValueError, InvalidTypeError) as exc:
            raise DecodeError(exc.field, exc.value, exc.problem) from exc

    @classmethod
    def from_json(cls, text: str | bytes) -> ContextItem:
        """Build an item from JSON text; see :meth:`from_dict`.

        Raises :class:`~cupellation.exceptions.DecodeError` for text that is
        not strict JSON (``NaN`` and ``Infinity`` tokens included) or not an item.
        """
        return cls.from_dict(loads_json(text, "ContextItem"))


_FIELD_NAMES = tuple(wire_field.name for wire_field in ITEM_FIELDS)
assert tuple(
    name for name in ContextItem.__slots__ if name != "_timestamp_us") == _FIELD_NAMES, _FIELD_NAMES

#: The slots' setters (member descriptors' ``__set__``), for ``ContextItem._fill``.
(_SET_CONTENT, _SET_TOKENS, _SET_KIND, _SET_SOURCE, _SET_PRIORITY, _SET_TAGS, _SET_METADATA,
 _SET_TIMESTAMP, _SET_HINT, _SET_PINNED, _SET_ORIGINAL_TOKENS, _SET_TIMESTAMP_US) = (
    ContextItem.__dict__[name].__set__ for name in (
        "content", "tokens", "kind", "source", "priority", "tags", "metadata", "timestamp",
        "future_relevance_hint", "pinned", "original_tokens", "_timestamp_us"))


_new_item = object.__new__


def trusted_item(content: str, tokens: int, kind: ContextKind, source: ContextSource,
                 priority: int | None, tags: tuple[str, ...], metadata: Mapping[str, Any],
                 timestamp: datetime | None, future_relevance_hint: float | None,
                 pinned: bool, original_tokens: int | None) -> ContextItem:
    """:meth:`ContextItem.trusted`, its arguments by position in declaration order:
    the decoders' form. Why: the log and span readers build an item per decision,
    and passing eleven keywords was a fifth of building one (3.6 against 4.6 µs per
    item of a log's records, timed in turns)."""
    if timestamp is not None and timestamp.tzinfo is not UTC:
        timestamp = timestamp.astimezone(UTC)
    item: ContextItem = _new_item(ContextItem)
    item._fill((content, tokens, kind, source, priority, tags,
                metadata if metadata else EMPTY_METADATA, timestamp,
                future_relevance_hint, pinned, original_tokens))
    return item
