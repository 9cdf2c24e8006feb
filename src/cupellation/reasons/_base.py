"""What every reason shares: the base class and its registry, the reason no one
here knows, inclusion reasons, and the wire envelope's codec (see the package)."""

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final, TypeAlias, TypeVar

import msgspec

from .._model import fits_int64
from ..exceptions import ConfigurationError, DecodeError

__all__ = [
    "KNOWN_EXCLUSION_REASONS",
    "BaseExclusionReason",
    "ExclusionReason",
    "InclusionReason",
    "Rivals",
    "UnknownExclusionReason",
    "exclusion_reason_from_dict",
    "inclusion_reason_from_dict",
    "reason_field_types",
    "reason_fields",
    "reason_styles",
    "reason_to_dict",
    "reason_word",
    "reference_fields",
    "references_of",
    "register_exclusion_reason",
    "unregister_exclusion_reason",
]


def _hash_with_mapping(*parts: Any) -> int:
    """A hash for a frozen value holding a mapping whose values may be unhashable
    (decoded JSON): the mapping counts by its keys, which equal values share."""
    return hash(tuple(frozenset(part) if isinstance(part, Mapping) else part
                      for part in parts))


#: The badge colour of a reason that says nothing of its own (an unknown one).
_PLAIN_STYLE = "#495057"


class Rivals(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What took an excluded item's place, as its reason tells it (``why``).

    ``kind`` names it in ``why``'s JSON (``"higher score"``, ``"pinned"``,
    ``"duplicate"``, ``"none"``). ``reference`` is the one item that took the
    place (its content in a report), told with ``label``; ``takes_room`` says
    whether that item's tokens count against the budget. ``higher_scored``
    points at the included items scoring at least as high, of kind
    ``same_kind`` only when it is set.
    """

    kind: str
    reference: int | str | None = None
    label: str = ""
    takes_room: bool = False
    higher_scored: bool = False
    same_kind: str | None = None


_NO_RIVALS = Rivals(kind="none")


class BaseExclusionReason(msgspec.Struct, frozen=True, gc=False, kw_only=True,
                          tag_field="reason", tag=True):
    """Base of the known exclusion reasons: ``name`` is the class name.

    Tagged with ``reason``, so ``msgspec.json.encode(reason)`` is the wire
    envelope itself (the report's JSON writer relies on it). A subclass declares
    its wire fields and what it means (the class variables and methods below),
    and joins the known reasons by :func:`register_exclusion_reason`.

    .. versionadded:: 0.4
    """

    #: The reason in the words of a span summary ("dropped 6: 4 budget").
    word: ClassVar[str] = ""
    #: The CSS background of its badge on the HTML page.
    style: ClassVar[str] = _PLAIN_STYLE
    #: The field whose value must equal the excluded item's tokens, if any.
    tokens_field: ClassVar[str | None] = None
    #: Whether the specification reserves it and no built-in stage emits it.
    reserved: ClassVar[bool] = False
    #: Whether a larger budget can change the outcome (False: the item is
    #: excluded before the slicer, and :meth:`counterfactual` says why).
    budget_helps: ClassVar[bool] = True

    @property
    def name(self) -> str:
        """The variant's name, as written in ``{"reason": name}``."""
        return type(self).__name__

    def sentence(self) -> str:
        """Why the item was left out, in one plain sentence (``cupellation why``)."""
        return f"excluded ({self.name})"

    def counterfactual(self) -> str:
        """What would have kept the item, or why nothing would."""
        return "nothing this version can tell"

    def rivals(self) -> Rivals:
        """What took the item's place."""
        return _NO_RIVALS


#: Every exclusion reason this version knows, by wire name, in registration order.
_KNOWN_EXCLUSIONS: dict[str, type[BaseExclusionReason]] = {}
#: Each known variant's declared field types (``int``, ``float``, ``str``, or
#: ``object`` for a reference: an index in events, content in a report).
_TYPES: dict[type, dict[str, Any]] = {}
_WIRE_TYPES: Final = (int, float, str)

_R = TypeVar("_R", bound=type[BaseExclusionReason])


def register_exclusion_reason(cls: _R) -> _R:
    """Make ``cls`` a known exclusion reason (a class decorator): decoders then
    build it from its name, and every module that explains reasons asks it.

    Its fields are ``int``, ``float``, ``str`` or ``int | str`` (a reference to
    another candidate); a field name another reason declares must keep that
    reason's type (the log reader holds one column per field name). Raises
    :class:`~cupellation.exceptions.ConfigurationError` naming the problem.

    .. versionadded:: 0.4
    """
    if not (isinstance(cls, type) and issubclass(cls, BaseExclusionReason)):
        raise ConfigurationError("reason", cls, "must be a subclass of BaseExclusionReason")
    name = cls.__name__
    if name in _KNOWN_EXCLUSIONS and _KNOWN_EXCLUSIONS[name] is not cls:
        raise ConfigurationError("reason", name, "is already a known exclusion reason")
    types: dict[str, Any] = {}
    for info in msgspec.structs.fields(cls):
        kind = info.type if info.type in _WIRE_TYPES else object
        if kind is object and info.type != int | str:
            raise ConfigurationError(f"{name}.{info.name}", info.type,
                                     "must be int, float, str or int | str")
        for other, other_types in _TYPES.items():
            if other is not cls and other_types.get(info.name, kind) is not kind:
                raise ConfigurationError(f"{name}.{info.name}", info.type,
                                         f"has another type in {other.__name__}")
        types[info.name] = kind
    _KNOWN_EXCLUSIONS[name] = cls
    _TYPES[cls] = types
    return cls


def unregister_exclusion_reason(cls: type[BaseExclusionReason]) -> None:
    """Forget a reason :func:`register_exclusion_reason` made known (its name then
    decodes as an :class:`UnknownExclusionReason` again). For an application's own
    reasons and tests; a class that is not registered is left alone.

    .. versionadded:: 0.4
    """
    if _KNOWN_EXCLUSIONS.get(cls.__name__) is cls:
        del _KNOWN_EXCLUSIONS[cls.__name__]
        del _TYPES[cls]

class UnknownExclusionReason(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """A reason this version does not know, kept with its name and fields.

    Decoding data from another implementation or a newer specification
    yields this; it encodes back to exactly the fields it came with.
    """

    reason_name: str
    fields: Mapping[str, Any] = msgspec.field(default_factory=lambda: MappingProxyType({}))

    #: An unknown reason is shown by its own name, in the plain badge colour.
    style: ClassVar[str] = _PLAIN_STYLE
    tokens_field: ClassVar[str | None] = None
    #: Unknown: the explanation never guesses that a budget would have helped.
    budget_helps: ClassVar[bool] = False

    @property
    def name(self) -> str:
        """The variant's name as it was found."""
        return self.reason_name

    @property
    def word(self) -> str:
        """Its own name: nothing else is known about it."""
        return self.reason_name

    def sentence(self) -> str:
        """That the reason is unknown here, never another reason's words."""
        return (f"excluded for a reason this version of cupellation does not know "
                f"({self.reason_name})")

    def counterfactual(self) -> str:
        """Unknown."""
        return f"the reason {self.reason_name} is not one this version knows"

    def rivals(self) -> Rivals:
        """Unknown: no item is named."""
        return _NO_RIVALS

    def __hash__(self) -> int:
        return _hash_with_mapping(type(self), self.reason_name, self.fields)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A read-only mapping cannot be pickled or deep-copied: carry a plain copy.
        return (_unknown_exclusion, (self.reason_name, dict(self.fields),
                                     isinstance(self.fields, MappingProxyType)))


#: Any exclusion reason: a known one (a registered subclass of
#: :class:`BaseExclusionReason`) or one this version does not know.
ExclusionReason: TypeAlias = BaseExclusionReason | UnknownExclusionReason

#: Every exclusion reason this version knows, by its wire name (a live, read-only
#: view of the registry). Everything that lists reasons (the flat codec, the log
#: reader's records, the report's JSON writer, the span attributes) derives its
#: list from this mapping.
KNOWN_EXCLUSION_REASONS: Mapping[str, type[BaseExclusionReason]] = MappingProxyType(
    _KNOWN_EXCLUSIONS)



def references_of(cls: type) -> tuple[str, ...]:
    """The fields of the known reason class ``cls`` that refer to another candidate
    (declared ``int | str``), in declaration order; none for any other class."""
    return tuple(field for field, kind in _TYPES.get(cls, {}).items() if kind is object)


def reference_fields() -> frozenset[str]:
    """The known reasons' fields that refer to another candidate (declared
    ``int | str``: an index in events, content in a report)."""
    return frozenset(field for types in _TYPES.values()
                     for field, kind in types.items() if kind is object)


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

    @property
    def style(self) -> str:
        """The CSS background of its badge on the HTML page."""
        return _INCLUSION_MEANING.get(self.name, ("", _PLAIN_STYLE))[1]

    def sentence(self) -> str:
        """Why the item was kept, in one plain sentence; an unknown name says so."""
        known = _INCLUSION_MEANING.get(self.name)
        return known[0] if known else (f"included for a reason this version of cupellation "
                                       f"does not know ({self.name})")

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


#: What each known inclusion reason means: its sentence and its badge colour.
_INCLUSION_MEANING: Final[Mapping[str, tuple[str, str]]] = {
    "Scored": ("its score placed it within the budget", "var(--selected)"),
    "Pinned": ("it is pinned: always included", "var(--pinned)"),
    "ZeroToken": ("it takes no tokens, so it always fits", "#0ca678"),
}


def reason_word(name: str) -> str:
    """The words a span summary gives the exclusion reason called ``name``
    (``"budget"`` for ``BudgetExceeded``); an unknown name is its own word."""
    cls = _KNOWN_EXCLUSIONS.get(name)
    return cls.word if cls is not None and cls.word else name


def reason_styles() -> dict[str, str]:
    """The CSS background of every known reason's badge, exclusion and inclusion,
    by wire name (an unknown name gets the plain badge)."""
    styles = {name: style for name, (_, style) in _INCLUSION_MEANING.items()}
    styles.update((name, cls.style) for name, cls in _KNOWN_EXCLUSIONS.items())
    return styles


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


def reason_field_types(name: str) -> Mapping[str, type] | None:
    """A known exclusion reason's fields and their wire types, in declaration order:
    ``int``, ``float`` or ``str`` (a field that points at another candidate is an
    ``int``, its index, on the wire of events). None for an unknown name."""
    cls = _KNOWN_EXCLUSIONS.get(name)
    if cls is None:
        return None
    return {field: (int if kind is object else kind) for field, kind in _TYPES[cls].items()}
