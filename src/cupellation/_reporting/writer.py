"""A SelectionReport as JSON text, without building a dict per entry.

``to_json`` does not go through ``to_dict``: building a dict per item and per
entry costs several microseconds each, which made a report's JSON text cost
more than the run it describes. Each entry becomes a small struct that msgspec
encodes in C: the item as a struct generated from ContextItem's wire declaration
(the seeds' names, defaults left out), and reasons that encode as their own
envelope (``{"reason": name, ...}``). A test checks that the text decodes to
exactly ``to_dict()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import msgspec

from .._datamodel.jsondata import hint_to_json
from .._datamodel.wire import ITEM_FIELDS, REQUIRED, WireField, WireKind, seed_struct
from ..reasons import KNOWN_EXCLUSION_REASONS, ExclusionReason, InclusionReason, reason_to_dict
from .entries import ExcludedItem, IncludedItem, OverflowReport, TraceEvent, shortfall_to_dict

__all__ = ["encode_report"]

#: The seeds' JSON of an item, generated from ``ITEM_FIELDS``.
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
                f"else _hint_to_json(_h))")  # the seeds spell NaN and infinities as text
    return value


def _entries_function() -> Callable[[Sequence[Any], dict[int, msgspec.Raw]], list[Any]]:
    """``wire_entries(entries, cache)``: each report entry as a struct msgspec encodes in
    C, generated from ``ITEM_FIELDS`` (one expression per field, no call per item:
    this list is most of what writing a large report costs)."""
    fields = ", ".join(_item_expression(f, k) for k, f in enumerate(ITEM_FIELDS))
    source = ("def wire_entries(entries, cache):\n"
              f"    return [_WireEntry(_WireItem({fields}), e.score, "
              "(_r if type(_r := e.reason) in _TAGGED else _wire_reason(_r, cache))) "
              "for e in entries for i in (e.item,)]")
    namespace: dict[str, Any] = {
        "_WireEntry": _WireEntry, "_WireItem": _WireItem, "_TAGGED": _TAGGED_REASONS,
        "_wire_reason": _wire_reason, "_isfinite": math.isfinite, "_hint_to_json": hint_to_json,
        **{f"_d{k}": f.default for k, f in enumerate(ITEM_FIELDS) if f.kind is WireKind.NAME}}
    exec(source, namespace)  # the source is built above from the fields
    function: Callable[[Sequence[Any], dict[int, msgspec.Raw]], list[Any]] = namespace[
        "wire_entries"]
    return function


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


_wire_entries: Final = _entries_function()


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
    out: dict[str, Any] = {
        "events": [e.to_dict() for e in report.events],
        "included": _wire_entries(report.included, cache),
        "excluded": _wire_entries(report.excluded, cache),
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
