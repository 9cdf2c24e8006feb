"""Log lines back into events: the fast path, the record finder and the slow path.

**Fast path.** Most lines an audit log (or a structlog ``JSONRenderer``, or a
stdlib JSON formatter) holds are one flat record at the top level of a JSON
object. For the frequent event types (stage events, item decisions,
``run_completed``) ``msgspec`` decodes such a line straight into a private
typed struct, validating every field in C (every integer within int64, as the
spine checks), and the event is built from it without the general codec's
per-field dispatch. Anything unusual — another
schema version, an unknown type or reason, a field missing, null, mistyped or
out of range, a content or kind the data model rejects — makes the fast path
give up, and the line goes the slow way, so the fast path never decides
anything the spine would not: tests check that it yields exactly what
:func:`~cupellation.events.event_from_dict` yields, on random runs and on
fuzzed lines.

**Slow path.** The line is decoded as generic JSON (after any text before its
first ``{``, such as a timestamp or a ``stdout F`` prefix), the record is found
(:func:`find_record`), and the spine's :func:`~cupellation.events.event_from_dict`
decodes it with its full validation and error messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

import msgspec

from .._model import (
    _EMPTY_METADATA,
    _EPOCH,
    _MICROSECOND,
    ContextItem,
    ContextKind,
    ContextSource,
    _freeze_json,
    parse_timestamp,
)
from ..events import (
    EVENT_SCHEMA_VERSION,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    StageCompleted,
    StageName,
    StageStarted,
)
from ..reasons import (
    BudgetExceeded,
    CountCapExceeded,
    CountRequireCandidatesExhausted,
    Deduplicated,
    ExclusionReason,
    Filtered,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
    QuotaCapExceeded,
    QuotaRequireDisplaced,
    ScoredTooLow,
)

__all__ = ["ENVELOPE_KEYS", "RECORD_KEYS", "FastDecoder", "fast_event", "find_record"]

#: The keys that make a JSON object one of our records.
RECORD_KEYS = ("schema", "type", "run_id", "seq")

#: Where a log shipper or formatter may nest a record, tried in this order: an
#: object under one of these keys, or JSON text in it (``{"log": "{...}"}``).
ENVELOPE_KEYS = ("log", "record", "message", "msg", "event", "json", "jsonPayload",
                 "fields", "data", "body", "payload", "structured", "attributes")
_ENVELOPE_DEPTH = 3

_UNSET = msgspec.UNSET
_Unset = msgspec.UnsetType
_Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_Seq = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
_RunId = Annotated[str, msgspec.Meta(min_length=1)]
_STAGES: dict[str, StageName] = {stage.value: stage for stage in PipelineStage}


def _f(name: str, default: Any = _UNSET) -> Any:
    """A struct field read from the flat key ``name``."""
    return msgspec.field(default=default, name=name)


class _Flat(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    schema: int
    run_id: _RunId
    seq: _Seq


class _FlatStageStarted(_Flat, tag="stage_started", kw_only=True, gc=False):
    stage: str
    items_in: _Int64


class _FlatStageCompleted(_Flat, tag="stage_completed", kw_only=True, gc=False):
    stage: str
    duration_ms: float
    items_in: _Int64
    items_out: _Int64


class _FlatRunCompleted(_Flat, tag="run_completed", kw_only=True, gc=False):
    duration_ms: float
    included_count: _Int64
    included_tokens: _Int64
    excluded_count: _Int64


class _FlatItem(_Flat, kw_only=True, gc=False):
    candidate_index: _Int64
    score: float
    content: str = _f("item.content", msgspec.NODEFAULT)
    tokens: _Int64 = _f("item.tokens", msgspec.NODEFAULT)
    kind: str = _f("item.kind", msgspec.NODEFAULT)
    source: str = _f("item.source", msgspec.NODEFAULT)
    pinned: bool | _Unset = _f("item.pinned")
    tags: tuple[str, ...] | _Unset = _f("item.tags")
    metadata: str | _Unset = _f("item.metadata")
    timestamp: str | _Unset = _f("item.timestamp")
    priority: _Int64 | _Unset = _f("item.priority")
    future_relevance_hint: float | _Unset = _f("item.future_relevance_hint")
    original_tokens: _Int64 | _Unset = _f("item.original_tokens")
    reason: str = _f("reason.name", msgspec.NODEFAULT)


class _FlatIncluded(_FlatItem, tag="item_included", kw_only=True, gc=False):
    position: _Int64


class _FlatExcluded(_FlatItem, tag="item_excluded", kw_only=True, gc=False):
    stage: str
    item_tokens: _Int64 | _Unset = _f("reason.item_tokens")
    available_tokens: _Int64 | _Unset = _f("reason.available_tokens")
    r_score: float | _Unset = _f("reason.score")
    threshold: float | _Unset = _f("reason.threshold")
    deduplicated_against: _Int64 | _Unset = _f("reason.deduplicated_against")
    r_kind: str | _Unset = _f("reason.kind")
    cap: _Int64 | _Unset = _f("reason.cap")
    actual: _Int64 | _Unset = _f("reason.actual")
    count: _Int64 | _Unset = _f("reason.count")
    displaced_by_kind: str | _Unset = _f("reason.displaced_by_kind")
    r_tokens: _Int64 | _Unset = _f("reason.tokens")
    displaced_by: _Int64 | _Unset = _f("reason.displaced_by")
    filter_name: str | _Unset = _f("reason.filter_name")


_DECODER = msgspec.json.Decoder(
    _FlatStageStarted | _FlatStageCompleted | _FlatRunCompleted | _FlatIncluded
    | _FlatExcluded)
_decode_flat = _DECODER.decode

#: Each known exclusion reason: its class and (reason field, struct attribute) pairs.
_REASONS: dict[str, tuple[type, tuple[tuple[str, str], ...]]] = {
    cls.__name__: (cls, tuple(
        (name, {"score": "r_score", "kind": "r_kind", "tokens": "r_tokens"}.get(name, name))
        for name in cls.__struct_fields__))
    for cls in (BudgetExceeded, ScoredTooLow, Deduplicated, QuotaCapExceeded,
                QuotaRequireDisplaced, NegativeTokens, PinnedOverride, Filtered,
                CountCapExceeded, CountRequireCandidatesExhausted)
}
_INCLUSIONS = {reason.name: reason for reason in
               (InclusionReason.SCORED, InclusionReason.PINNED, InclusionReason.ZERO_TOKEN)}

_CACHE_LIMIT = 4096
_kinds: dict[str, ContextKind] = {}
_sources: dict[str, ContextSource] = {}
_metadata: dict[str, Mapping[str, Any]] = {}
_moments: dict[str, tuple[datetime, int]] = {}
_new = object.__new__


class _GiveUp(Exception):
    """The fast path does not decide this line."""


def _named(cache: dict[str, Any], cls: type, value: str) -> Any:
    """``cls(value)`` (which validates), shared through ``cache``."""
    found = cls(value)
    if len(cache) < _CACHE_LIMIT:
        cache[value] = found
    return found


def _frozen_metadata(text: str) -> Mapping[str, Any]:
    found = _metadata.get(text)
    if found is None:
        value = msgspec.json.decode(text)
        if not isinstance(value, dict):
            raise _GiveUp
        found = _freeze_json(value, "metadata", set()) if value else _EMPTY_METADATA
        if len(_metadata) < _CACHE_LIMIT:
            _metadata[text] = found
    return found


def _moment(text: str) -> tuple[datetime, int]:
    """A timestamp as ``parse_timestamp`` reads it, with its microseconds since the epoch."""
    found = _moments.get(text)
    if found is None:
        moment = parse_timestamp(text, field_name="item.timestamp")
        found = (moment, (moment - _EPOCH) // _MICROSECOND)
        if len(_moments) < _CACHE_LIMIT:
            _moments[text] = found
        else:
            _moments.clear()
    return found


# The item's slots, written directly (ContextItem is a frozen, slotted dataclass).
_S = {name: ContextItem.__dict__[name].__set__ for name in ContextItem.__slots__}
(_s_content, _s_tokens, _s_kind, _s_source, _s_priority, _s_tags, _s_metadata, _s_timestamp,
 _s_us, _s_hint, _s_pinned, _s_original) = (
    _S["content"], _S["tokens"], _S["kind"], _S["source"], _S["priority"], _S["tags"],
    _S["metadata"], _S["timestamp"], _S["_timestamp_us"], _S["future_relevance_hint"],
    _S["pinned"], _S["original_tokens"])


def _item(flat: _FlatItem) -> ContextItem:
    """The item as ``ContextItem(...)`` would build it from these (checked) values."""
    content = flat.content
    if not content:
        raise _GiveUp
    item = _new(ContextItem)
    _s_content(item, content)
    _s_tokens(item, flat.tokens)
    kind = _kinds.get(flat.kind)
    _s_kind(item, kind if kind is not None else _named(_kinds, ContextKind, flat.kind))
    source = _sources.get(flat.source)
    _s_source(item, source if source is not None else _named(_sources, ContextSource,
                                                               flat.source))
    priority = flat.priority
    _s_priority(item, None if priority is _UNSET else priority)
    tags = flat.tags
    _s_tags(item, () if tags is _UNSET else tags)
    metadata = flat.metadata
    _s_metadata(item, _EMPTY_METADATA if metadata is _UNSET else _frozen_metadata(metadata))
    timestamp = flat.timestamp
    if timestamp is _UNSET:
        _s_timestamp(item, None)
        _s_us(item, None)
    else:
        moment, micros = _moment(timestamp)
        _s_timestamp(item, moment)
        _s_us(item, micros)
    hint = flat.future_relevance_hint
    _s_hint(item, None if hint is _UNSET else hint)
    pinned = flat.pinned
    _s_pinned(item, False if pinned is _UNSET else pinned)
    original = flat.original_tokens
    _s_original(item, None if original is _UNSET else original)
    return item


def _exclusion(flat: _FlatExcluded) -> ExclusionReason:
    known = _REASONS.get(flat.reason)
    if known is None:
        raise _GiveUp  # an unknown reason keeps every reason.* key: the slow path
    cls, fields = known
    values = {}
    for name, attribute in fields:
        value = getattr(flat, attribute)
        if value is _UNSET:
            raise _GiveUp
        values[name] = value
    reason: ExclusionReason = cls(**values)
    return reason


_ITEM_START = b',"item.content":'
_ITEM_END = b',"reason.name":'
_ITEM_KEY = b'"item.'
#: Items decoded from the same bytes are the same item: a reader shares them.
_ITEMS_CACHED = 16_384


class FastDecoder:
    """The fast path, with the caches of one read.

    Items recur from run to run (an agent's history is offered again each
    turn), and an item decoded from the same bytes is the same immutable
    item, so the ``item.*`` part of a line — the bytes from ``"item.content"``
    up to ``"reason.name"``, when every ``"item.`` key lies inside them — keys
    a bounded cache of built items. The whole line is still decoded and
    checked every time; only the item's construction is shared.
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[bytes, ContextItem] = {}

    def _cached_item(self, flat: _FlatItem, line: bytes) -> ContextItem:
        start = line.find(_ITEM_START)
        end = line.find(_ITEM_END, start)
        if (start < 0 or end < 0 or line.count(_ITEM_KEY, 0, start)
                or line.count(_ITEM_KEY, end)):
            return _item(flat)
        key = line[start:end]
        items = self._items
        found = items.get(key)
        if found is None:
            found = _item(flat)
            if len(items) >= _ITEMS_CACHED:
                items.clear()
            items[key] = found
        return found

    def _convert(self, flat: Any, line: bytes) -> PipelineEvent:
        kind = type(flat)
        if kind is _FlatExcluded:
            return ItemExcluded(run_id=flat.run_id, seq=flat.seq,
                                stage=_STAGES.get(flat.stage, flat.stage),
                                candidate_index=flat.candidate_index, score=flat.score,
                                item=self._cached_item(flat, line), reason=_exclusion(flat))
        if kind is _FlatIncluded:
            reason = _INCLUSIONS.get(flat.reason)
            # An inclusion reason with data fields keeps them: only the slow path sees them.
            if reason is None or line.count(b'"reason.') != 1:
                raise _GiveUp
            return ItemIncluded(run_id=flat.run_id, seq=flat.seq,
                                candidate_index=flat.candidate_index, position=flat.position,
                                score=flat.score, item=self._cached_item(flat, line),
                                reason=reason)
        if kind is _FlatStageStarted:
            return StageStarted(run_id=flat.run_id, seq=flat.seq,
                                stage=_STAGES.get(flat.stage, flat.stage),
                                items_in=flat.items_in)
        if kind is _FlatStageCompleted:
            return StageCompleted(run_id=flat.run_id, seq=flat.seq,
                                  stage=_STAGES.get(flat.stage, flat.stage),
                                  duration_ms=flat.duration_ms, items_in=flat.items_in,
                                  items_out=flat.items_out)
        return RunCompleted(run_id=flat.run_id, seq=flat.seq, duration_ms=flat.duration_ms,
                            included_count=flat.included_count,
                            included_tokens=flat.included_tokens,
                            excluded_count=flat.excluded_count)

    def event(self, line: bytes) -> PipelineEvent | None:
        """The event of a line holding one flat record at its top level, or None
        when the line needs the slow path (which may still find an event in it)."""
        try:
            flat = _decode_flat(line)
            if flat.schema != EVENT_SCHEMA_VERSION:
                return None
            return self._convert(flat, line)
        except Exception:  # msgspec's errors, _GiveUp, and whatever the model rejects
            return None


def fast_event(line: bytes) -> PipelineEvent | None:
    """:meth:`FastDecoder.event` without a shared item cache."""
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
