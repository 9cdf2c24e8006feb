"""Log lines back into records and events: the fast path, the record finder and the
slow path.

**Fast path.** Most lines an audit log holds are one record at the top level of
a JSON object, with no other key. For the frequent event types (stage events,
item decisions, the run's end) ``msgspec`` decodes such a line straight into a
typed record generated from the declarations (:mod:`cupellation.events._records`),
validating every field in C (integers within int64, a non-empty content, a
timezone-aware time) and refusing any key the record does not declare. A few
checks the types cannot make are made here: a known reason with exactly its own
fields, names and metadata the data model accepts, a reason's token count equal
to its item's. Anything else — another schema version, an unknown type, key or
reason, a record nested in a shipper's envelope, a value the checks refuse —
makes the fast path give up, and the line goes the slow way, so the fast path
never decides anything the events module would not: tests check that it yields exactly
what :func:`~cupellation.events.event_from_dict` yields, on random runs and on
fuzzed lines.

**Slow path.** The line is decoded as generic JSON (after any text before its
first ``{``, such as a timestamp or a ``stdout F`` prefix), the record is found
(:func:`find_record`), and the events module's :func:`~cupellation.events.event_from_dict`
decodes it with its full validation and error messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, Final

import msgspec

from .._model import ContextKind, ContextSource
from ..events import EVENT_SCHEMA_VERSION, PipelineEvent
from ..events._records import (
    EXCLUDED_RECORD,
    INCLUDED_RECORD,
    INCLUSIONS,
    METADATA,
    REASON_FIELDS,
    RECORD_DECODER,
    RUN_COMPLETED_RECORD,
    RUN_FAILED_RECORD,
    RecordError,
    item_metadata,
    name_of,
)
from ..reasons import KNOWN_EXCLUSION_REASONS, reason_field_types

__all__ = ["ENVELOPE_KEYS", "RECORD_KEYS", "FastDecoder", "canonical_bytes", "checked_record",
           "fast_event", "fast_record", "find_record"]

#: The keys that make a JSON object one of our records.
RECORD_KEYS: Final = ("schema", "type", "run_id", "seq")

#: Where a log shipper or formatter may nest a record, tried in this order: an
#: object under one of these keys, or JSON text in it (``{"log": "{...}"}``).
ENVELOPE_KEYS: Final = ("log", "record", "message", "msg", "event", "json", "jsonPayload",
                        "fields", "data", "body", "payload", "structured", "attributes")
_ENVELOPE_DEPTH: Final = 3

_UNSET: Final = msgspec.UNSET
_decode: Final = RECORD_DECODER.decode
_encode: Final = msgspec.json.encode
_replace: Final = msgspec.structs.replace
_END_RECORDS: Final = (RUN_COMPLETED_RECORD, RUN_FAILED_RECORD)
#: Every reason field of an exclusion record, read in one call.
_REASON_VALUES: Final = attrgetter(*(f"reason_{field}" for field in REASON_FIELDS))


def _own_values(name: str) -> Callable[[Any], tuple[Any, ...]]:
    """A getter of a known reason's own record attributes, always as a tuple."""
    attributes = [f"reason_{field}" for field in reason_field_types(name) or ()]
    # attrgetter of one name gives the value itself: asked twice, it gives a tuple.
    return attrgetter(*(attributes * 2 if len(attributes) == 1 else attributes or ["reason"]))


#: Each known exclusion reason: a getter of its own fields, how many of the other
#: reasons' fields an exclusion record then has unset, and the field whose value must
#: equal the item's tokens (if any).
_REASONS: Final[Mapping[str, tuple[Callable[[Any], tuple[Any, ...]], int, str | None]]] = {
    name: (_own_values(name), len(REASON_FIELDS) - len(reason_field_types(name) or ()),
           None if cls.tokens_field is None else "reason_" + cls.tokens_field)
    for name, cls in KNOWN_EXCLUSION_REASONS.items()}
_READABLE: Final = frozenset({2, EVENT_SCHEMA_VERSION})
#: Kind and source names, and metadata texts (``METADATA``), already found valid.
_kinds: set[str] = set()
_sources: set[str] = set()
_NAMES_KEPT: Final = 4096


def _item_ok(record: Any) -> bool:
    """The checks on an item record's values that its struct types cannot make:
    names and metadata the data model accepts (each distinct text checked once)."""
    try:
        name_of(ContextKind, record.item_kind)
        name_of(ContextSource, record.item_source)
        if record.item_metadata is not _UNSET:
            item_metadata(record.item_metadata)
    except (RecordError, ValueError, TypeError):
        return False
    if len(_kinds) > _NAMES_KEPT or len(_sources) > _NAMES_KEPT:
        _kinds.clear()
        _sources.clear()
    _kinds.add(record.item_kind)
    _sources.add(record.item_source)
    return True


def fast_record(line: bytes) -> Any:
    """The record of a line holding one record of a frequent type and no other key,
    checked as the events module checks it; None when the line needs the slow path (which
    may still find an event in it)."""
    try:
        record = _decode(line)
    except (ValueError, RecursionError):  # msgspec's errors, and text that is not UTF-8
        return None
    return checked_record(record)


def checked_record(record: Any) -> Any:
    """``record`` (as ``RECORD_DECODER`` decodes it) when the checks its struct types
    cannot make hold, else None: what :func:`fast_record` makes of its line."""
    if record.schema not in _READABLE:
        return None
    kind = type(record)
    if kind is EXCLUDED_RECORD:
        # A known reason with exactly its own fields (an included record declares no
        # reason field at all, so it refuses one when decoded).
        spec = _REASONS.get(record.reason)
        if (spec is None or _REASON_VALUES(record).count(_UNSET) != spec[1]
                or _UNSET in spec[0](record)):
            return None
        if spec[2] is not None and getattr(record, spec[2]) != record.item_tokens:
            return None  # the fold names the disagreement, from the event
    elif kind is INCLUDED_RECORD:
        if record.reason not in INCLUSIONS:
            return None
    else:
        return record
    metadata = record.item_metadata
    if (record.item_kind in _kinds and record.item_source in _sources
            and (metadata is _UNSET or metadata in METADATA)):
        return record
    return record if _item_ok(record) else None


def canonical_bytes(record: Any) -> bytes:
    """The canonical line (with its newline) of the event ``record`` stands for, an end
    event's without its digest: what the run's digest hashes."""
    if type(record) in _END_RECORDS:
        record = _replace(record, digest=_UNSET)
    return _encode(record) + b"\n"


class FastDecoder:
    """The fast path (stateless: the caches it uses are shared)."""

    __slots__ = ()

    def event(self, line: bytes) -> PipelineEvent | None:
        """The event of a line the fast path decides, or None."""
        record = fast_record(line)
        if record is None:
            return None
        event: PipelineEvent = record.event()
        return event


def fast_event(line: bytes) -> PipelineEvent | None:
    """The event of a line the fast path decides, or None."""
    return FastDecoder().event(line)


def find_record(value: Any, depth: int = 0) -> dict[str, Any] | None:
    """The record in a decoded JSON value: the object itself when it has
    ``schema``, ``type``, ``run_id`` and ``seq``, else the first record found
    under an :data:`ENVELOPE_KEYS` key, as an object or as JSON text, up to
    three levels deep."""
    if not isinstance(value, dict):
        return None
    if all(key in value for key in RECORD_KEYS):
        return value
    if depth >= _ENVELOPE_DEPTH:
        return None
    for key in ENVELOPE_KEYS:
        inner = value.get(key)
        if isinstance(inner, str):
            text = inner.strip()
            if not (text.startswith("{") and text.endswith("}")):
                continue
            try:
                inner = msgspec.json.decode(text)
            except (ValueError, RecursionError):  # msgspec.DecodeError, UnicodeError
                continue
        if isinstance(inner, dict):
            found = find_record(inner, depth + 1)
            if found is not None:
                return found
    return None
