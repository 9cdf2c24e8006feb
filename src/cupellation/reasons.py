"""Why a candidate was excluded or included (``spec/src/diagnostics/exclusion-reasons.md``).

Every reason is a frozen, slotted value built by keyword and read by name::

    BudgetExceeded(item_tokens=400, available_tokens=120).available_tokens

``reason.name`` is the wire discriminator (the variant's name). Two variants
point at another candidate: :class:`Deduplicated` (the copy that was kept) and
:class:`PinnedOverride` (the pinned item that took the room). In the event
stream they hold that candidate's **index**, so no reason ever carries another
item's content and a sink's content-capture policy applies in one place; a
SelectionReport resolves the index to the item's content, which is the seeds'
wire form (``"deduplicated_against": "<content>"``).

The wire envelope is ``{"reason": "<Name>", ...fields}`` with absent fields
omitted, never null (:func:`reason_to_dict`, :func:`exclusion_reason_from_dict`).
"""

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, TypeAlias

import msgspec

from ._model import fits_int64
from .exceptions import DecodeError

__all__ = [
    "KNOWN_EXCLUSION_REASONS",
    "REFERENCE_FIELDS",
    "RESERVED_EXCLUSION_REASONS",
    "BudgetExceeded",
    "CountCapExceeded",
    "CountRequireCandidatesExhausted",
    "Deduplicated",
    "ExclusionReason",
    "Filtered",
    "InclusionReason",
    "NegativeTokens",
    "PinnedOverride",
    "QuotaCapExceeded",
    "QuotaRequireDisplaced",
    "ScoredTooLow",
    "UnknownExclusionReason",
    "exclusion_reason_from_dict",
    "inclusion_reason_from_dict",
    "reason_field_types",
    "reason_fields",
    "reason_to_dict",
]


def _hash_with_mapping(*parts: Any) -> int:
    """A hash for a frozen value holding a mapping whose values may be unhashable
    (decoded JSON): the mapping counts by its keys, which equal values share."""
    return hash(tuple(frozenset(part) if isinstance(part, Mapping) else part
                      for part in parts))


class _Reason(msgspec.Struct, frozen=True, gc=False, kw_only=True, tag_field="reason",
              tag=True):
    """Base of the known exclusion reasons: ``name`` is the class name.

    Tagged with ``reason``, so ``msgspec.json.encode(reason)`` is the wire
    envelope itself (the report's JSON writer relies on it).
    """

    @property
    def name(self) -> str:
        """The variant's name, as written in ``{"reason": name}``."""
        return type(self).__name__


class BudgetExceeded(_Reason, frozen=True, kw_only=True):
    """The item did not fit in the tokens still available (Slice, or Place under Truncate)."""

    item_tokens: int
    available_tokens: int


class ScoredTooLow(_Reason, frozen=True, kw_only=True):
    """Reserved: the item scored below a selection threshold."""

    score: float
    threshold: float


class Deduplicated(_Reason, frozen=True, kw_only=True):
    """A byte-exact duplicate of another candidate that scored at least as high.

    ``deduplicated_against`` is the kept candidate's index in the event
    stream, and its content in a SelectionReport.
    """

    deduplicated_against: int | str


class QuotaCapExceeded(_Reason, frozen=True, kw_only=True):
    """Reserved: the item's kind exceeded its quota cap."""

    kind: str
    cap: int
    actual: int


class QuotaRequireDisplaced(_Reason, frozen=True, kw_only=True):
    """Reserved: displaced to satisfy another kind's quota requirement."""

    displaced_by_kind: str


class NegativeTokens(_Reason, frozen=True, kw_only=True):
    """The item declared a negative token count (Classify)."""

    tokens: int


class PinnedOverride(_Reason, frozen=True, kw_only=True):
    """The item would have fitted had the pinned items not taken the budget.

    ``displaced_by`` is the pinned candidate's index in the event stream, and
    its content in a SelectionReport.
    """

    displaced_by: int | str


class Filtered(_Reason, frozen=True, kw_only=True):
    """Reserved: excluded by a user-defined filter predicate."""

    filter_name: str


class CountCapExceeded(_Reason, frozen=True, kw_only=True):
    """A count-quota slicer dropped the item: its kind already had ``cap`` items
    selected (``count`` of them), and the item would otherwise have fitted."""

    kind: str
    cap: int
    count: int


class CountRequireCandidatesExhausted(_Reason, frozen=True, kw_only=True):
    """Defined for forward compatibility with count-quota diagnostics; not emitted.

    A shortfall excludes no item: cupellation reports it as a
    :class:`~cupellation.events.CountShortfall` event instead.
    """

    kind: str


class UnknownExclusionReason(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A reason this version does not know, kept with its name and fields.

    Decoding data from another implementation or a newer specification
    yields this; it encodes back to exactly the fields it came with.
    """

    reason_name: str
    fields: Mapping[str, Any] = msgspec.field(default_factory=lambda: MappingProxyType({}))

    @property
    def name(self) -> str:
        """The variant's name as it was found."""
        return self.reason_name

    def __hash__(self) -> int:
        return _hash_with_mapping(type(self), self.reason_name, self.fields)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A read-only mapping cannot be pickled or deep-copied: carry a plain copy.
        return (_unknown_exclusion, (self.reason_name, dict(self.fields),
                                     isinstance(self.fields, MappingProxyType)))


ExclusionReason: TypeAlias = (
    BudgetExceeded
    | ScoredTooLow
    | Deduplicated
    | QuotaCapExceeded
    | QuotaRequireDisplaced
    | NegativeTokens
    | PinnedOverride
    | Filtered
    | CountCapExceeded
    | CountRequireCandidatesExhausted
    | UnknownExclusionReason
)

#: Every exclusion reason this version knows, by its wire name. Everything that
#: lists reasons (the flat codec, the log reader's records, the report's JSON
#: writer, the span attributes) derives its list from this mapping.
KNOWN_EXCLUSION_REASONS: Mapping[str, type[ExclusionReason]] = MappingProxyType({
    cls.__name__: cls
    for cls in (
        BudgetExceeded, ScoredTooLow, Deduplicated, QuotaCapExceeded, QuotaRequireDisplaced,
        NegativeTokens, PinnedOverride, Filtered, CountCapExceeded,
        CountRequireCandidatesExhausted,
    )
})
_KNOWN_EXCLUSIONS = KNOWN_EXCLUSION_REASONS

#: Variants no built-in stage emits (the specification reserves them).
RESERVED_EXCLUSION_REASONS: frozenset[str] = frozenset(
    {"ScoredTooLow", "QuotaCapExceeded", "QuotaRequireDisplaced", "Filtered",
     "CountRequireCandidatesExhausted"}
)

#: Reason fields that refer to another candidate (an index in events).
REFERENCE_FIELDS: frozenset[str] = frozenset({"deduplicated_against", "displaced_by"})


class InclusionReason(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """Why an item was selected: ``Scored``, ``Pinned`` or ``ZeroToken``.

    The known variants carry no data and are shared constants
    (``InclusionReason.SCORED``); an unknown variant decoded from elsewhere
    keeps whatever fields it had in ``fields``.
    """

    name: str
    fields: Mapping[str, Any] = msgspec.field(default_factory=lambda: MappingProxyType({}))

    SCORED: ClassVar["InclusionReason"]
    PINNED: ClassVar["InclusionReason"]
    ZERO_TOKEN: ClassVar["InclusionReason"]

    def __hash__(self) -> int:
        return _hash_with_mapping(type(self), self.name, self.fields)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A read-only mapping cannot be pickled or deep-copied: carry a plain copy.
        return (_inclusion, (self.name, dict(self.fields),
                             isinstance(self.fields, MappingProxyType)))


def _read_only(fields: dict[str, Any], read_only: bool) -> Mapping[str, Any]:
    return MappingProxyType(fields) if read_only else fields


def _unknown_exclusion(name: str, fields: dict[str, Any], read_only: bool
                       ) -> UnknownExclusionReason:
    """An UnknownExclusionReason rebuilt by pickle or deepcopy."""
    return UnknownExclusionReason(reason_name=name, fields=_read_only(fields, read_only))


def _inclusion(name: str, fields: dict[str, Any], read_only: bool) -> InclusionReason:
    """An InclusionReason rebuilt by pickle or deepcopy: a known variant is its constant."""
    if not fields and name in _KNOWN_INCLUSIONS:
        return _KNOWN_INCLUSIONS[name]
    return InclusionReason(name=name, fields=_read_only(fields, read_only))


InclusionReason.SCORED = InclusionReason(name="Scored")
InclusionReason.PINNED = InclusionReason(name="Pinned")
InclusionReason.ZERO_TOKEN = InclusionReason(name="ZeroToken")
_KNOWN_INCLUSIONS = {r.name: r for r in
                     (InclusionReason.SCORED, InclusionReason.PINNED, InclusionReason.ZERO_TOKEN)}


def reason_fields(reason: ExclusionReason | InclusionReason) -> dict[str, Any]:
    """A reason's data fields by name (the envelope without ``reason``)."""
    if isinstance(reason, UnknownExclusionReason | InclusionReason):
        return dict(reason.fields)
    return {name: getattr(reason, name) for name in reason.__struct_fields__}


def reason_to_dict(reason: ExclusionReason | InclusionReason) -> dict[str, Any]:
    """The wire envelope ``{"reason": name, ...fields}``."""
    return {"reason": reason.name, **reason_fields(reason)}


def _known_field(variant: str, name: str, value: Any, expected: Any) -> Any:
    """Check one decoded reason field against its declared type."""
    if value is None:
        raise DecodeError(f"reason.{name}", None, f"is required for {variant} (null given)")
    if expected is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok and not math.isfinite(value):
            raise DecodeError(f"reason.{name}", value, "must be a finite number")
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected is str:
        ok = isinstance(value, str)
    else:  # int | str: a candidate index (events) or content (reports)
        ok = isinstance(value, int | str) and not isinstance(value, bool)
    if not ok:
        raise DecodeError(f"reason.{name}", value, f"has the wrong type for {variant}")
    if isinstance(value, int) and not fits_int64(value):
        raise DecodeError(f"reason.{name}", value, "must fit in a signed 64-bit integer")
    return float(value) if expected is float else value


def exclusion_reason_from_dict(data: Mapping[str, Any]) -> ExclusionReason:
    """Decode an envelope; an unknown variant becomes :class:`UnknownExclusionReason`.

    A known variant with a missing, null or mistyped field, or with a field it
    does not have (a field of another variant), raises
    :class:`~cupellation.exceptions.DecodeError` naming it.
    """
    if not isinstance(data, Mapping):
        raise DecodeError("reason", data, "must be a JSON object")
    name = data.get("reason")
    if not isinstance(name, str):
        raise DecodeError("reason", name, "must be a string discriminator")
    cls = _KNOWN_EXCLUSIONS.get(name)
    if cls is None:
        return UnknownExclusionReason(
            reason_name=name,
            fields=MappingProxyType({k: v for k, v in data.items() if k != "reason"}))
    expected_types = _TYPES[cls]
    for field_name in data:
        if field_name != "reason" and field_name not in expected_types:
            raise DecodeError(f"reason.{field_name}", data[field_name],
                              f"is not a field of {name} (its fields: "
                              f"{', '.join(expected_types) or 'none'})")
    values = {}
    for field_name, expected in expected_types.items():
        if field_name not in data:
            raise DecodeError(f"reason.{field_name}", None, f"is required for {name}")
        values[field_name] = _known_field(name, field_name, data[field_name], expected)
    reason: ExclusionReason = cls(**values)
    return reason


def inclusion_reason_from_dict(data: Mapping[str, Any]) -> InclusionReason:
    """Decode an inclusion envelope; unknown names keep their fields. A known name
    (``Scored``, ``Pinned``, ``ZeroToken``) has no fields: one given raises
    :class:`~cupellation.exceptions.DecodeError` naming it."""
    if not isinstance(data, Mapping):
        raise DecodeError("reason", data, "must be a JSON object")
    name = data.get("reason")
    if not isinstance(name, str):
        raise DecodeError("reason", name, "must be a string discriminator")
    fields = {k: v for k, v in data.items() if k != "reason"}
    if name in _KNOWN_INCLUSIONS:
        if fields:
            field_name = next(iter(fields))
            raise DecodeError(f"reason.{field_name}", fields[field_name],
                              f"is not a field of {name} (it has none)")
        return _KNOWN_INCLUSIONS[name]
    return InclusionReason(name=name, fields=MappingProxyType(fields))


# Each known variant's declared field types, read once from the declarations.
_TYPES: dict[type, dict[str, Any]] = {
    cls: {info.name: (info.type if info.type in (int, float, str) else object)
          for info in msgspec.structs.fields(cls)}
    for cls in _KNOWN_EXCLUSIONS.values()
}


def reason_field_types(name: str) -> Mapping[str, type] | None:
    """A known exclusion reason's fields and their wire types, in declaration order:
    ``int``, ``float`` or ``str`` (a field that points at another candidate is an
    ``int``, its index, on the wire of events). None for an unknown name."""
    cls = _KNOWN_EXCLUSIONS.get(name)
    if cls is None:
        return None
    return {field: (int if kind is object else kind) for field, kind in _TYPES[cls].items()}
