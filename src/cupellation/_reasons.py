"""Inclusion and exclusion reasons (``spec/src/diagnostics/exclusion-reasons.md``).

Every reason is an immutable value with a ``name`` (the wire discriminator) and
its data fields. The wire form is the envelope ``{"reason": "<Name>", ...fields}``
with absent fields omitted, never null.

Reasons are named tuples rather than dataclasses: an Item-level run builds one
per excluded candidate, and tuple construction is several times cheaper. Their
equality is made type-aware below so that ``Deduplicated("x")`` never equals
``PinnedOverride("x")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple, TypeAlias

from .exceptions import DecodeError

__all__ = [
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
    "RESERVED_EXCLUSION_REASONS",
    "ScoredTooLow",
    "UnknownExclusionReason",
    "exclusion_reason_from_json",
    "exclusion_reason_to_json",
    "inclusion_reason_from_json",
]


class BudgetExceeded(NamedTuple):
    """The item did not fit in the tokens still available (Slice, or Place under Truncate)."""

    item_tokens: int
    available_tokens: int

    @property
    def name(self) -> str:
        return "BudgetExceeded"


class ScoredTooLow(NamedTuple):
    """Reserved: the item scored below a selection threshold."""

    score: float
    threshold: float

    @property
    def name(self) -> str:
        return "ScoredTooLow"


class Deduplicated(NamedTuple):
    """A byte-exact duplicate of another candidate's content that scored at least as high."""

    deduplicated_against: str

    @property
    def name(self) -> str:
        return "Deduplicated"


class QuotaCapExceeded(NamedTuple):
    """Reserved: the item's kind exceeded its quota cap."""

    kind: str
    cap: int
    actual: int

    @property
    def name(self) -> str:
        return "QuotaCapExceeded"


class QuotaRequireDisplaced(NamedTuple):
    """Reserved: displaced to satisfy another kind's quota requirement."""

    displaced_by_kind: str

    @property
    def name(self) -> str:
        return "QuotaRequireDisplaced"


class NegativeTokens(NamedTuple):
    """The item declared a negative token count (Classify)."""

    tokens: int

    @property
    def name(self) -> str:
        return "NegativeTokens"


class PinnedOverride(NamedTuple):
    """The item would have fitted had pinned items not taken the budget."""

    displaced_by: str

    @property
    def name(self) -> str:
        return "PinnedOverride"


class Filtered(NamedTuple):
    """Reserved: excluded by a user-defined filter predicate."""

    filter_name: str

    @property
    def name(self) -> str:
        return "Filtered"


@dataclass(frozen=True, slots=True)
class CountCapExceeded:
    """A count-quota slicer dropped the item because its kind had reached ``cap`` items.

    ``count`` is how many items of that kind were already selected. A
    dataclass rather than a named tuple: a tuple cannot have a ``count`` field,
    and the name follows the other implementations' ``CountCapExceeded {kind,
    cap, count}``.
    """

    kind: str
    cap: int
    count: int

    @property
    def name(self) -> str:
        return "CountCapExceeded"


class CountRequireCandidatesExhausted(NamedTuple):
    """Defined for forward compatibility with count-quota diagnostics; not emitted.

    A shortfall excludes no item: cupellation reports it as a
    :class:`~cupellation.CountShortfall` event instead.
    """

    kind: str

    @property
    def name(self) -> str:
        return "CountRequireCandidatesExhausted"


class UnknownExclusionReason(NamedTuple):
    """A reason this version does not know, kept with its name and fields.

    Decoding data from another implementation or a newer specification
    yields this; it re-encodes to exactly the JSON it came from.
    """

    reason_name: str
    fields: Mapping[str, Any]

    @property
    def name(self) -> str:
        return self.reason_name


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

_KNOWN_EXCLUSIONS: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        BudgetExceeded, ScoredTooLow, Deduplicated, QuotaCapExceeded, QuotaRequireDisplaced,
        NegativeTokens, PinnedOverride, Filtered, CountCapExceeded,
        CountRequireCandidatesExhausted,
    )
}

#: Variants no built-in stage emits (the specification reserves them).
RESERVED_EXCLUSION_REASONS: frozenset[str] = frozenset(
    {"ScoredTooLow", "QuotaCapExceeded", "QuotaRequireDisplaced", "Filtered",
     "CountRequireCandidatesExhausted"}
)


@dataclass(frozen=True, slots=True)
class InclusionReason:
    """Why an item was selected: ``Scored``, ``Pinned`` or ``ZeroToken``.

    The known variants carry no data and are shared constants
    (``InclusionReason.SCORED``); an unknown variant decoded from elsewhere
    keeps whatever fields it had in ``fields``.
    """

    name: str
    fields: Mapping[str, Any] = field(default_factory=dict, hash=False)

    SCORED: ClassVar[InclusionReason]
    PINNED: ClassVar[InclusionReason]
    ZERO_TOKEN: ClassVar[InclusionReason]

    def to_json(self) -> dict[str, Any]:
        """The wire envelope ``{"reason": name, ...fields}``."""
        return {"reason": self.name, **self.fields}


InclusionReason.SCORED = InclusionReason("Scored")
InclusionReason.PINNED = InclusionReason("Pinned")
InclusionReason.ZERO_TOKEN = InclusionReason("ZeroToken")
_KNOWN_INCLUSIONS = {r.name: r for r in
                     (InclusionReason.SCORED, InclusionReason.PINNED, InclusionReason.ZERO_TOKEN)}


def _typed_eq(self: tuple[Any, ...], other: object) -> bool:
    return type(self) is type(other) and tuple.__eq__(self, other)


def _typed_ne(self: tuple[Any, ...], other: object) -> bool:
    return not _typed_eq(self, other)


def _typed_hash(self: tuple[Any, ...]) -> int:
    # An unknown reason's fields may hold unhashable values; hashing the
    # field names keeps the hash consistent with equality.
    return hash((type(self).__name__, *(
        tuple(sorted(v)) if isinstance(v, Mapping) else v for v in self
    )))


for _cls in (*_KNOWN_EXCLUSIONS.values(), UnknownExclusionReason):
    if not issubclass(_cls, tuple):
        continue
    # Plain tuple equality would make Deduplicated("x") == PinnedOverride("x").
    for _name, _impl in (("__eq__", _typed_eq), ("__ne__", _typed_ne),
                         ("__hash__", _typed_hash)):
        setattr(_cls, _name, _impl)


def exclusion_reason_to_json(reason: ExclusionReason) -> dict[str, Any]:
    """The wire envelope ``{"reason": name, ...fields}``."""
    if isinstance(reason, UnknownExclusionReason):
        return {"reason": reason.reason_name, **reason.fields}
    if isinstance(reason, CountCapExceeded):
        return {"reason": reason.name, "kind": reason.kind, "cap": reason.cap,
                "count": reason.count}
    return {"reason": reason.name, **reason._asdict()}


def exclusion_reason_from_json(data: Mapping[str, Any]) -> ExclusionReason:
    """Decode an envelope; an unknown variant becomes :class:`UnknownExclusionReason`.

    A known variant with a missing field raises :class:`DecodeError` naming it.
    """
    if not isinstance(data, Mapping):
        raise DecodeError("reason", data, "must be a JSON object")
    name = data.get("reason")
    if not isinstance(name, str):
        raise DecodeError("reason", name, "must be a string discriminator")
    cls = _KNOWN_EXCLUSIONS.get(name)
    fields = {k: v for k, v in data.items() if k != "reason"}
    if cls is None:
        return UnknownExclusionReason(name, MappingProxyType(fields))
    values = []
    names = (("kind", "cap", "count") if cls is CountCapExceeded else cls._fields)
    for field_name in names:
        if field_name not in fields:
            raise DecodeError(f"{name}.{field_name}", None, "is required")
        values.append(fields[field_name])
    result: ExclusionReason = cls(*values)
    return result


def inclusion_reason_from_json(data: Mapping[str, Any]) -> InclusionReason:
    """Decode an inclusion envelope; unknown names keep their fields."""
    if not isinstance(data, Mapping):
        raise DecodeError("reason", data, "must be a JSON object")
    name = data.get("reason")
    if not isinstance(name, str):
        raise DecodeError("reason", name, "must be a string discriminator")
    fields = {k: v for k, v in data.items() if k != "reason"}
    if not fields and name in _KNOWN_INCLUSIONS:
        return _KNOWN_INCLUSIONS[name]
    return InclusionReason(name, MappingProxyType(fields))
