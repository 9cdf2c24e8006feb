"""A SelectionReport as JSON text, without building a dict per entry.

``to_json`` does not go through ``to_dict``: building a dict per item and per
entry costs several microseconds each, which made a report's JSON text cost
more than the run it describes. Each entry becomes a small struct that msgspec
encodes in C: the item as a struct generated from ContextItem's wire declaration
(the wire format's names, defaults left out), and reasons that encode as their own
envelope (``{"reason": name, ...}``). An item met in an earlier report is
written from its JSON, kept by identity (``_ITEM_JSON``). A test checks that the
text decodes to exactly ``to_dict()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import msgspec

from .._model.jsondata import hint_to_json
from .._model.wire import ITEM_FIELDS, REQUIRED, WireField, WireKind, seed_struct
from ..reasons import KNOWN_EXCLUSION_REASONS, ExclusionReason, InclusionReason, reason_to_dict
from .entries import ExcludedItem, IncludedItem, OverflowReport, TraceEvent, shortfall_to_dict

__all__ = ["encode_report"]

#: The wire format's JSON of an item, generated from ``ITEM_FIELDS``.
_WireItem: Final = seed_struct("_WireItem", ITEM_FIELDS, gc=False)
#: The reasons msgspec encodes as their own wire envelope (tagged structs).
_TAGGED_REASONS: Final = frozenset(KNOWN_EXCLUSION_REASONS.values())


class _WireEntry(msgspec.Struct, gc=False):
    item: Any
    score: float
    reason: Any


def _item_expression(field: WireField, index: int) -> str:
    """The expression giving ``field`` of item ``i`` as the wire struct takes it."""
    value = f"i.{field.name}"
    if field.kind is WireKind.NAME:
        # The default, passed as this very object: msgspec's omit_defaults tests a
        # string default by identity, and a decoded "Chat" is another string object.
        return (f"(_d{index} if (_t{index} := {value}.value) == _d{index} else _t{index})"
                if field.default is not REQUIRED else f"{value}.value")
    if field.kind is WireKind.METADATA:
        # A plain dict of the top level here is cheaper than a call into the encoder's
        # hook for it; deeper read-only mappings (rare) still go through the hook.
        return f"(dict({value}) if {value} else None)"
    if field.kind is WireKind.HINT:
        return (f"(_h if (_h := {value}) is None or _isfinite(_h) "
                f"else _hint_to_json(_h))")  # the wire format spells NaN and infinities as text
    return value


def _items_function() -> Callable[[Sequence[Any]], list[Any]]:
    """``wire_items(items)``: each item as the struct msgspec encodes in C, generated
    from ``ITEM_FIELDS`` (one expression per field, no call per item)."""
    fields = ", ".join(_item_expression(f, k) for k, f in enumerate(ITEM_FIELDS))
    source = f"def wire_items(items):\n    return [_WireItem({fields}) for i in items]"
    namespace: dict[str, Any] = {
        "_WireItem": _WireItem, "_isfinite": math.isfinite, "_hint_to_json": hint_to_json,
        **{f"_d{k}": f.default for k, f in enumerate(ITEM_FIELDS) if f.kind is WireKind.NAME}}
    exec(source, namespace)  # the source is built above from the fields
    function: Callable[[Sequence[Any]], list[Any]] = namespace["wire_items"]
    return function


_wire_items: Final = _items_function()

#: Items met before, by identity, with the item itself (which keeps the id from being
#: reused while the entry lives, and is checked on every hit) and, from the second
#: report that holds it on, its JSON. An item is immutable, so its JSON never changes:
#: a report over the candidates of earlier ones (an agent loop offers its history
#: again every turn) encodes each of them once, instead of building its struct for
#: every report, which was most of what writing a report cost. An item is encoded
#: alone only when met again: one met once (a report rebuilt from a log) costs what it
#: did before, plus this entry.
_ITEM_JSON: dict[int, tuple[Any, msgspec.Raw | None]] = {}
#: Past this many items, or this many bytes of content and JSON held, the cache starts
#: again (a bounded memory, as the audit log's line encoder bounds its fragments: the
#: cache keeps its items alive, and a long document can be megabytes).
_ITEM_JSON_LIMIT: Final = 16_384
_ITEM_JSON_BYTES_LIMIT: Final = 32 * 1024 * 1024
#: The bytes the cache holds (each remembered item's content, each kept JSON).
_HELD = [0]


def _item_json(entries: Sequence[Any], cached: bool) -> list[Any]:
    """Each entry's item as msgspec encodes it: its cached raw JSON when it has been
    met before, its wire struct otherwise (always, when not ``cached``)."""
    items = [e.item for e in entries]
    if not cached:
        return _wire_items(items)
    get = _ITEM_JSON.get
    hits = [hit if (hit := get(id(i))) is not None and hit[0] is i else None for i in items]
    found: list[Any] = [None if hit is None else hit[1] for hit in hits]
    if None not in found:
        return found
    missing = [k for k, raw in enumerate(found) if raw is None]
    if (len(_ITEM_JSON) + len(missing) > _ITEM_JSON_LIMIT
            or _HELD[0] > _ITEM_JSON_BYTES_LIMIT):
        _ITEM_JSON.clear()
        _HELD[0] = 0
    encode = _ENCODER.encode
    held = 0
    for k, wire in zip(missing, _wire_items([items[k] for k in missing]), strict=True):
        item = items[k]
        if hits[k] is None:  # met for the first time: remembered, encoded with the rest
            found[k] = wire
            _ITEM_JSON[id(item)] = (item, None)
            held += len(item.content)
        else:  # met again: encoded alone, once, and kept
            data = encode(wire)
            held += len(data)
            raw = found[k] = msgspec.Raw(data)
            _ITEM_JSON[id(item)] = (item, raw)
    _HELD[0] += held
    return found


def _wire_entries(entries: Sequence[Any], cache: dict[int, msgspec.Raw],
                  cached: bool) -> list[Any]:
    """Each report entry as a struct msgspec encodes in C: its item's raw JSON, its
    score, and its reason (a known exclusion reason encodes as its own envelope)."""
    return [_WireEntry(raw, e.score, (r if type(r := e.reason) in _TAGGED_REASONS
                                      else _wire_reason(r, cache)))
            for e, raw in zip(entries, _item_json(entries, cached), strict=True)]


def _wire_reason(reason: ExclusionReason | InclusionReason,
                 cache: dict[int, msgspec.Raw]) -> Any:
    """A known exclusion reason as itself (it encodes as its envelope); others as raw
    JSON of their envelope, made once per reason object."""
    if type(reason) in _TAGGED_REASONS:
        return reason
    raw = cache.get(id(reason))
    if raw is None:
        raw = cache[id(reason)] = msgspec.Raw(msgspec.json.encode(reason_to_dict(reason)))
    return raw


def _thaw(value: Any) -> Any:
    """Read-only metadata mappings nested in metadata, as dicts, for the encoder."""
    if isinstance(value, Mapping):
        return dict(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


_ENCODER: Final = msgspec.json.Encoder(enc_hook=_thaw)


class _Report(Protocol):
    """What the writer reads of a SelectionReport."""

    @property
    def events(self) -> tuple[TraceEvent, ...]: ...
    @property
    def included(self) -> tuple[IncludedItem, ...]: ...
    @property
    def excluded(self) -> tuple[ExcludedItem, ...]: ...
    @property
    def total_candidates(self) -> int: ...
    @property
    def total_tokens_considered(self) -> int: ...
    @property
    def count_requirement_shortfalls(self) -> tuple[Any, ...]: ...
    @property
    def overflow(self) -> OverflowReport | None: ...
    @property
    def incomplete(self) -> tuple[str, ...]: ...


def encode_report(report: _Report) -> bytes:
    """The report's JSON text (``to_dict``'s shape, member for member) as bytes."""
    cache: dict[int, msgspec.Raw] = {}
    # A report of more entries than the item cache holds items would clear it on every
    # call and never be written from it: its items are encoded without it, and leave
    # what the cache holds (smaller reports' items) alone. Measured at 20,000 items:
    # 4.8-5.2 against 6.0-9.9 µs an entry through the cache that cannot keep them.
    # (Counted in entries, not distinct items: a large report of a few repeated items
    # is written correctly either way, only without the cache's help.)
    cached = len(report.included) + len(report.excluded) <= _ITEM_JSON_LIMIT
    out: dict[str, Any] = {
        "events": [e.to_dict() for e in report.events],
        "included": _wire_entries(report.included, cache, cached),
        "excluded": _wire_entries(report.excluded, cache, cached),
        "total_candidates": report.total_candidates,
        "total_tokens_considered": report.total_tokens_considered,
    }
    if report.count_requirement_shortfalls:
        out["count_requirement_shortfalls"] = [
            shortfall_to_dict(s) for s in report.count_requirement_shortfalls]
    if report.overflow is not None:
        out["overflow"] = report.overflow.to_dict()
    if report.incomplete:
        out["incomplete"] = list(report.incomplete)
    return _ENCODER.encode(out)
