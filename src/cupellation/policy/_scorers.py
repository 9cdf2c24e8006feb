"""Scorer descriptions: immutable values that say which scorer to build and how.

A built scorer cannot be a policy's value: scorers compare by identity and a
:class:`~cupellation.scoring.DecayScorer` holds a clock (a callable). A
description compares by value, converts to and from a plain dict, and builds
the scorer on demand with :meth:`build`.

Each description validates on construction with the scorer's own rules and
field names (``children[1].weight``); the policy decoder prefixes the path it
read the value from (``scorer.children[1].weight``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeAlias

from .._model import ContextKind
from ..exceptions import ConfigurationError, InvalidTypeError
from ..scoring import (
    CompositeScorer,
    DecayCurve,
    DecayScorer,
    ExponentialCurve,
    FrequencyScorer,
    KindScorer,
    MetadataKeyScorer,
    MetadataTrustScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    Scorer,
    StepCurve,
    TagScorer,
    WindowCurve,
    utc_now,
)
from ..scoring._base import check_unit_interval, check_weight
from ._codec import encode_duration, encode_timestamp

__all__ = [
    "SCORER_TYPES",
    "Clock",
    "CompositeChild",
    "CompositeSpec",
    "DecaySpec",
    "FrequencySpec",
    "KindSpec",
    "MetadataKeySpec",
    "MetadataTrustSpec",
    "PrioritySpec",
    "RecencySpec",
    "ReflexiveSpec",
    "ScaledSpec",
    "ScorerSpec",
    "TagSpec",
    "curve_to_dict",
    "is_scorer_spec",
]

#: A zero-argument callable returning a timezone-aware datetime.
Clock = Callable[[], datetime]


class _Spec:
    """Shared behaviour of the scorer descriptions (``type_name``, ``build``, ``to_dict``)."""

    __slots__ = ()
    #: The ``type`` written in a policy file.
    type_name: ClassVar[str]

    def build(self, *, clock: Clock | None = None) -> Scorer:  # pragma: no cover - abstract
        """The scorer this describes. ``clock`` is the wall clock of decay scorers
        that do not fix a ``reference_time`` (default: :func:`~cupellation.scoring.utc_now`)."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The JSON-native table of this description (``type`` first)."""
        return {"type": self.type_name}


@dataclass(frozen=True, slots=True, kw_only=True)
class RecencySpec(_Spec):
    """Describes :class:`~cupellation.scoring.RecencyScorer` (no settings)."""

    type_name: ClassVar[str] = "recency"

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.RecencyScorer`."""
        return RecencyScorer()


@dataclass(frozen=True, slots=True, kw_only=True)
class PrioritySpec(_Spec):
    """Describes :class:`~cupellation.scoring.PriorityScorer` (no settings)."""

    type_name: ClassVar[str] = "priority"

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.PriorityScorer`."""
        return PriorityScorer()


@dataclass(frozen=True, slots=True, kw_only=True)
class FrequencySpec(_Spec):
    """Describes :class:`~cupellation.scoring.FrequencyScorer` (no settings)."""

    type_name: ClassVar[str] = "frequency"

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.FrequencyScorer`."""
        return FrequencyScorer()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReflexiveSpec(_Spec):
    """Describes :class:`~cupellation.scoring.ReflexiveScorer` (no settings)."""

    type_name: ClassVar[str] = "reflexive"

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.ReflexiveScorer`."""
        return ReflexiveScorer()


@dataclass(frozen=True, slots=True, kw_only=True)
class KindSpec(_Spec):
    """Describes :class:`~cupellation.scoring.KindScorer`.

    ``weights`` maps kind names to weights (stored with :class:`ContextKind`
    keys, so names compare ignoring case); ``None`` means the specification's
    default weights.
    """

    type_name: ClassVar[str] = "kind"
    weights: Mapping[ContextKind, float] | Mapping[str, float] | None = field(
        default=None, hash=False)

    def __post_init__(self) -> None:
        if self.weights is not None:
            # KindScorer validates (finite, >= 0, no case duplicates) and
            # normalises the keys; keep its read-only copy.
            object.__setattr__(self, "weights", KindScorer(self.weights).weights)

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.KindScorer` with these weights."""
        return KindScorer(None if self.weights is None else dict(self.weights))

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "kind"}`` plus ``weights`` when they are not the defaults."""
        out: dict[str, Any] = {"type": self.type_name}
        if self.weights is not None:
            out["weights"] = {ContextKind(kind).value: weight
                              for kind, weight in self.weights.items()}
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TagSpec(_Spec):
    """Describes :class:`~cupellation.scoring.TagScorer`: tag weights and
    whether tags compare case-sensitively."""

    type_name: ClassVar[str] = "tag"
    tag_weights: Mapping[str, float] = field(hash=False)
    case_sensitive: bool = False

    def __post_init__(self) -> None:
        built = TagScorer(self.tag_weights, case_sensitive=self.case_sensitive)
        object.__setattr__(self, "tag_weights", built.tag_weights)

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.TagScorer`."""
        return TagScorer(dict(self.tag_weights), case_sensitive=self.case_sensitive)

    def to_dict(self) -> dict[str, Any]:
        """``type``, ``tag_weights`` and ``case_sensitive``."""
        return {"type": self.type_name, "tag_weights": dict(self.tag_weights),
                "case_sensitive": self.case_sensitive}


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataTrustSpec(_Spec):
    """Describes :class:`~cupellation.scoring.MetadataTrustScorer`."""

    type_name: ClassVar[str] = "metadata_trust"
    default_score: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "default_score",
                           check_unit_interval("default_score", self.default_score))

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.MetadataTrustScorer`."""
        return MetadataTrustScorer(default_score=self.default_score)

    def to_dict(self) -> dict[str, Any]:
        """``type`` and ``default_score``."""
        return {"type": self.type_name, "default_score": self.default_score}


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataKeySpec(_Spec):
    """Describes :class:`~cupellation.scoring.MetadataKeyScorer`: ``boost`` when
    ``metadata[key] == value``, else 1.0."""

    type_name: ClassVar[str] = "metadata_key"
    key: str
    value: str
    boost: float

    def __post_init__(self) -> None:
        built = MetadataKeyScorer(self.key, self.value, self.boost)
        object.__setattr__(self, "boost", built.boost)

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.MetadataKeyScorer`."""
        return MetadataKeyScorer(self.key, self.value, self.boost)

    def to_dict(self) -> dict[str, Any]:
        """``type``, ``key``, ``value`` and ``boost``."""
        return {"type": self.type_name, "key": self.key, "value": self.value,
                "boost": self.boost}


_CURVES = (ExponentialCurve, StepCurve, WindowCurve)


def curve_to_dict(curve: DecayCurve) -> dict[str, Any]:
    """The table of a built-in decay curve, durations in their text form."""
    if isinstance(curve, ExponentialCurve):
        return {"type": "exponential", "half_life": encode_duration(curve.half_life)}
    if isinstance(curve, WindowCurve):
        return {"type": "window", "max_age": encode_duration(curve.max_age)}
    if isinstance(curve, StepCurve):
        return {"type": "step", "windows": [
            {"max_age": encode_duration(max_age), "score": score}
            for max_age, score in curve.windows
        ]}
    raise InvalidTypeError("curve", curve, "an ExponentialCurve, StepCurve or WindowCurve")


def _fixed_clock(moment: datetime) -> Clock:
    def clock() -> datetime:
        return moment

    clock.__qualname__ = f"fixed_clock({encode_timestamp(moment)})"
    return clock


@dataclass(frozen=True, slots=True, kw_only=True)
class DecaySpec(_Spec):
    """Describes :class:`~cupellation.scoring.DecayScorer`.

    ``curve`` is one of the built-in curves (they are immutable values already).
    ``reference_time``, when set, fixes the instant ages are measured from
    (reproducible scores); when ``None`` the scorer reads the clock given to
    :meth:`build` (the wall clock by default).
    """

    type_name: ClassVar[str] = "decay"
    curve: DecayCurve
    null_timestamp_score: float = 0.5
    reference_time: datetime | None = None

    def __post_init__(self) -> None:
        if type(self.curve) not in _CURVES:
            raise InvalidTypeError("curve", self.curve,
                                   "an ExponentialCurve, StepCurve or WindowCurve")
        object.__setattr__(self, "null_timestamp_score",
                           check_unit_interval("null_timestamp_score",
                                               self.null_timestamp_score))
        moment = self.reference_time
        if moment is not None:
            if not isinstance(moment, datetime):
                raise InvalidTypeError("reference_time", moment, "a timezone-aware datetime")
            if moment.tzinfo is None or moment.utcoffset() is None:
                raise ConfigurationError("reference_time", moment,
                                         "must be timezone-aware (UTC semantics)")
            try:
                object.__setattr__(self, "reference_time", moment.astimezone(UTC))
            except OverflowError:
                raise ConfigurationError("reference_time", moment,
                                         "is outside the datetime range in UTC") from None

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.DecayScorer`: its clock is fixed at
        ``reference_time`` when set, else ``clock`` (default: the wall clock)."""
        if self.reference_time is not None:
            used = _fixed_clock(self.reference_time)
        else:
            used = utc_now if clock is None else clock
        return DecayScorer(self.curve, clock=used,
                           null_timestamp_score=self.null_timestamp_score)

    def to_dict(self) -> dict[str, Any]:
        """``type``, ``curve``, ``null_timestamp_score`` and ``reference_time`` when set."""
        out: dict[str, Any] = {"type": self.type_name, "curve": curve_to_dict(self.curve),
                               "null_timestamp_score": self.null_timestamp_score}
        if self.reference_time is not None:
            out["reference_time"] = encode_timestamp(self.reference_time)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaledSpec(_Spec):
    """Describes :class:`~cupellation.scoring.ScaledScorer` around ``inner``."""

    type_name: ClassVar[str] = "scaled"
    inner: ScorerSpec

    def __post_init__(self) -> None:
        if not isinstance(self.inner, _SPEC_TYPES):
            raise InvalidTypeError("inner", self.inner, "a scorer description (e.g. RecencySpec())")

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.ScaledScorer` around the built inner scorer."""
        return ScaledScorer(self.inner.build(clock=clock))

    def to_dict(self) -> dict[str, Any]:
        """``type`` and the ``inner`` table."""
        return {"type": self.type_name, "inner": self.inner.to_dict()}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompositeChild:
    """One weighted entry of a :class:`CompositeSpec`.

    ``weight`` is relative (weights are divided by their sum) and must be
    finite and greater than zero.
    """

    scorer: ScorerSpec
    weight: float

    def __post_init__(self) -> None:
        if not isinstance(self.scorer, _SPEC_TYPES):
            raise InvalidTypeError("scorer", self.scorer,
                                   "a scorer description (e.g. RecencySpec())")
        object.__setattr__(self, "weight", check_weight("weight", self.weight, positive=True))

    def to_dict(self) -> dict[str, Any]:
        """The child scorer's table with its ``weight`` beside ``type``."""
        out = self.scorer.to_dict()
        return {"type": out.pop("type"), "weight": self.weight, **out}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompositeSpec(_Spec):
    """Describes :class:`~cupellation.scoring.CompositeScorer`: the weighted
    average of its children (which may themselves be composites)."""

    type_name: ClassVar[str] = "composite"
    children: tuple[CompositeChild, ...]

    def __post_init__(self) -> None:
        children = self.children
        if isinstance(children, str | bytes) or not isinstance(children, Sequence):
            raise InvalidTypeError("children", children, "a sequence of CompositeChild")
        children = tuple(children)
        if not children:
            raise ConfigurationError("children", [], "must contain at least one scorer")
        for position, entry in enumerate(children):
            if not isinstance(entry, CompositeChild):
                raise InvalidTypeError(f"children[{position}]", entry, "a CompositeChild")
        # The check CompositeScorer makes, summed the way it sums (math.fsum would
        # raise OverflowError on 1e308 + 1e308 instead of giving inf).
        total = 0.0
        for entry in children:
            total += entry.weight
        if not math.isfinite(total):
            raise ConfigurationError("children", [entry.weight for entry in children],
                                     "weights sum to infinity")
        object.__setattr__(self, "children", children)

    @classmethod
    def of(cls, *pairs: tuple[ScorerSpec, float]) -> CompositeSpec:
        """``CompositeSpec.of((RecencySpec(), 3.0), (KindSpec(), 1.0))``."""
        return cls(children=tuple(CompositeChild(scorer=s, weight=w) for s, w in pairs))

    def build(self, *, clock: Clock | None = None) -> Scorer:
        """A new :class:`~cupellation.scoring.CompositeScorer` of the built children."""
        return CompositeScorer([(entry.scorer.build(clock=clock), entry.weight)
                                for entry in self.children])

    def to_dict(self) -> dict[str, Any]:
        """``type`` and ``children``, each child's table carrying its ``weight``."""
        return {"type": self.type_name,
                "children": [entry.to_dict() for entry in self.children]}


#: Any scorer description.
ScorerSpec: TypeAlias = (
    RecencySpec | PrioritySpec | KindSpec | TagSpec | FrequencySpec | ReflexiveSpec
    | CompositeSpec | ScaledSpec | MetadataTrustSpec | MetadataKeySpec | DecaySpec
)

_SPEC_TYPES: tuple[type[_Spec], ...] = (
    RecencySpec, PrioritySpec, KindSpec, TagSpec, FrequencySpec, ReflexiveSpec,
    CompositeSpec, ScaledSpec, MetadataTrustSpec, MetadataKeySpec, DecaySpec,
)

#: Scorer ``type`` name -> description class.
SCORER_TYPES: Mapping[str, type[_Spec]] = {cls.type_name: cls for cls in _SPEC_TYPES}


def is_scorer_spec(value: object) -> bool:
    """True for an instance of one of the scorer descriptions."""
    return isinstance(value, _SPEC_TYPES)

