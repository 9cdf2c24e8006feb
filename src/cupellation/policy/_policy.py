"""The :class:`Policy` value and its table form (``to_dict`` / ``from_dict``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeAlias, TypeVar

from .._model import ContextBudget, OverflowStrategy
from .._pipeline import Pipeline
from ..exceptions import ConfigurationError, InvalidTypeError, InvalidValueError
from ..placing import ChronologicalPlacer, UShapedPlacer
from ..scoring import DecayCurve, ExponentialCurve, StepCurve, WindowCurve
from ..slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
    ScarcityBehavior,
)
from . import _toml
from ._codec import (
    check_keys,
    child,
    decode_duration,
    decode_timestamp,
    index,
    relocated,
    require,
    suggest,
    table,
    type_key,
)
from ._scorers import (
    Clock,
    CompositeChild,
    CompositeSpec,
    DecaySpec,
    FrequencySpec,
    KindSpec,
    MetadataKeySpec,
    MetadataTrustSpec,
    PrioritySpec,
    RecencySpec,
    ReflexiveSpec,
    ScaledSpec,
    ScorerSpec,
    TagSpec,
    is_scorer_spec,
)
from ._text import parse_document

__all__ = [
    "PLACER_TYPES",
    "SLICER_TYPES",
    "PlacerSpec",
    "Policy",
    "SlicerSpec",
]

#: The slicers a policy can describe (they are immutable values already).
SlicerSpec: TypeAlias = (GreedySlice | KnapsackSlice | QuotaSlice | CountQuotaSlice
                         | CountConstrainedKnapsackSlice)
#: The placers a policy can describe.
PlacerSpec: TypeAlias = ChronologicalPlacer | UShapedPlacer

#: Slicer ``type`` names as written in a policy file.
SLICER_TYPES: tuple[str, ...] = (
    "greedy", "knapsack", "quota", "count_quota", "count_constrained_knapsack",
)
#: Placer ``type`` names as written in a policy file.
PLACER_TYPES: tuple[str, ...] = ("chronological", "u_shaped")

_T = TypeVar("_T")

_POLICY_KEYS = ("name", "description", "deduplication", "overflow_strategy", "scorer",
                "slicer", "placer", "budget")
_BUDGET_KEYS = ("max_tokens", "target_tokens", "output_reserve", "reserved_slots",
                "estimation_safety_margin_percent")


def _build(path: str, factory: Callable[[], _T]) -> _T:
    """``factory()``, with any validation error relocated under ``path``."""
    try:
        return factory()
    except (InvalidValueError, InvalidTypeError) as exc:
        raise relocated(exc, path) from None


def _lookup(value: Any, path: str, names: Sequence[str], what: str,
            suffixes: Sequence[str]) -> str:
    """The canonical ``type`` name ``value`` stands for (see :func:`type_key`)."""
    key = type_key(value, path, suffixes=suffixes)
    for name in names:
        if name.replace("_", "") == key:
            return name
    raise ConfigurationError(
        child(path, "type"), value,
        f"is not a {what} type{suggest(str(value), names)} (one of: {', '.join(names)})",
    )


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise InvalidTypeError(path, value, "a string")
    return value


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(path, value, "a boolean (true or false)")
    return value


def _array(value: Any, path: str) -> Sequence[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidTypeError(path, value, "an array")
    return value


# -- scorers ---------------------------------------------------------------------

_SCORER_NAMES: tuple[str, ...] = (
    "recency", "priority", "kind", "tag", "frequency", "reflexive", "composite", "scaled",
    "metadata_trust", "metadata_key", "decay",
)
_SCORER_SUFFIXES = ("scorer", "spec")


def _curve_from(value: Any, path: str) -> DecayCurve:
    data = table(value, path)
    name = _lookup(require(data, "type", path), path, ("exponential", "step", "window"),
                   "decay curve", ("curve",))
    if name == "exponential":
        check_keys(data, path, ("type", "half_life"), ("half_life",))
        half_life = decode_duration(data["half_life"], child(path, "half_life"))
        return _build(path, lambda: ExponentialCurve(half_life=half_life))
    if name == "window":
        check_keys(data, path, ("type", "max_age"), ("max_age",))
        max_age = decode_duration(data["max_age"], child(path, "max_age"))
        return _build(path, lambda: WindowCurve(max_age=max_age))
    check_keys(data, path, ("type", "windows"), ("windows",))
    windows_path = child(path, "windows")
    windows = []
    for position, raw in enumerate(_array(data["windows"], windows_path)):
        where = index(windows_path, position)
        entry = table(raw, where)
        check_keys(entry, where, ("max_age", "score"), ("max_age", "score"))
        windows.append((decode_duration(entry["max_age"], child(where, "max_age")),
                        entry["score"]))
    return _build(path, lambda: StepCurve(windows=windows))


def scorer_from_dict(value: Any, path: str = "scorer", *,
                     extra: tuple[str, ...] = ()) -> ScorerSpec:
    """The scorer description a table gives; errors name the path inside it.

    ``extra`` names keys the caller reads itself (a composite child's
    ``weight``): they are allowed, and suggested for a misspelt key.
    """
    data = table(value, path)

    def check(allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> None:
        check_keys(data, path, (*allowed, *extra), required)

    name = _lookup(require(data, "type", path), path, _SCORER_NAMES, "scorer",
                   _SCORER_SUFFIXES)
    spec: ScorerSpec
    if name in ("recency", "priority", "frequency", "reflexive"):
        check(("type",))
        simple: dict[str, type[RecencySpec | PrioritySpec | FrequencySpec | ReflexiveSpec]] = {
            "recency": RecencySpec, "priority": PrioritySpec,
            "frequency": FrequencySpec, "reflexive": ReflexiveSpec,
        }
        return simple[name]()
    if name == "kind":
        check(("type", "weights"))
        weights = data.get("weights")
        if weights is not None:
            weights = table(weights, child(path, "weights"))
        spec = _build(path, lambda: KindSpec(weights=weights))
    elif name == "tag":
        check(("type", "tag_weights", "case_sensitive"), ("tag_weights",))
        tag_weights = table(data["tag_weights"], child(path, "tag_weights"))
        case_sensitive = _bool(data.get("case_sensitive", False),
                               child(path, "case_sensitive"))
        spec = _build(path, lambda: TagSpec(tag_weights=tag_weights,
                                            case_sensitive=case_sensitive))
    elif name == "metadata_trust":
        check(("type", "default_score"))
        default = data.get("default_score", 0.5)
        spec = _build(path, lambda: MetadataTrustSpec(default_score=default))
    elif name == "metadata_key":
        check(("type", "key", "value", "boost"), ("key", "value", "boost"))
        key = _string(data["key"], child(path, "key"))
        wanted = _string(data["value"], child(path, "value"))
        spec = _build(path, lambda: MetadataKeySpec(key=key, value=wanted,
                                                    boost=data["boost"]))
    elif name == "decay":
        check(("type", "curve", "null_timestamp_score", "reference_time"), ("curve",))
        curve = _curve_from(data["curve"], child(path, "curve"))
        raw_time = data.get("reference_time")
        moment = (None if raw_time is None
                  else decode_timestamp(raw_time, child(path, "reference_time")))
        null_score = data.get("null_timestamp_score", 0.5)
        spec = _build(path, lambda: DecaySpec(curve=curve, null_timestamp_score=null_score,
                                              reference_time=moment))
    elif name == "scaled":
        check(("type", "inner"), ("inner",))
        inner = scorer_from_dict(data["inner"], child(path, "inner"))
        spec = ScaledSpec(inner=inner)
    else:
        check(("type", "children"), ("children",))
        children_path = child(path, "children")
        children = []
        for position, raw in enumerate(_array(data["children"], children_path)):
            where = index(children_path, position)
            entry = table(raw, where)
            scorer = scorer_from_dict(entry, where, extra=("weight",))
            if "weight" not in entry:
                raise ConfigurationError(child(where, "weight"), None,
                                         "is required (each child has a weight)")
            weight = entry["weight"]
            children.append(_build(where, partial(CompositeChild, scorer=scorer, weight=weight)))
        spec = _build(path, lambda: CompositeSpec(children=tuple(children)))
    return spec


# -- slicers and placers --------------------------------------------------------

_SLICER_SUFFIXES = ("slicer", "slice")


def _quota_entries(value: Any, path: str) -> list[QuotaEntry]:
    entries = []
    for position, raw in enumerate(_array(value, path)):
        where = index(path, position)
        entry = table(raw, where)
        check_keys(entry, where, ("kind", "require", "cap"), ("kind",))
        kind = _string(entry["kind"], child(where, "kind"))
        entries.append(_build(where, partial(
            QuotaEntry, kind, entry.get("require", 0.0), entry.get("cap", 100.0))))
    return entries


def _count_entries(value: Any, path: str) -> list[CountQuotaEntry]:
    entries = []
    for position, raw in enumerate(_array(value, path)):
        where = index(path, position)
        entry = table(raw, where)
        check_keys(entry, where, ("kind", "require_count", "cap_count"), ("kind", "cap_count"))
        kind = _string(entry["kind"], child(where, "kind"))
        entries.append(_build(where, partial(
            CountQuotaEntry, kind, entry.get("require_count", 0), cap_count=entry["cap_count"])))
    return entries


def slicer_from_dict(value: Any, path: str = "slicer") -> SlicerSpec:
    """The slicer a table describes; errors name the path inside it."""
    data = table(value, path)
    name = _lookup(require(data, "type", path), path, SLICER_TYPES, "slicer", _SLICER_SUFFIXES)
    if name == "greedy":
        check_keys(data, path, ("type",))
        return GreedySlice()
    if name == "knapsack":
        check_keys(data, path, ("type", "bucket_size"))
        return _build(path, lambda: KnapsackSlice(data.get("bucket_size", 100)))
    if name == "quota":
        check_keys(data, path, ("type", "inner", "quotas"))
        inner = slicer_from_dict(data.get("inner", {"type": "greedy"}), child(path, "inner"))
        quotas = _quota_entries(data.get("quotas", []), child(path, "quotas"))
        return _build(path, lambda: QuotaSlice(inner, quotas))
    if name == "count_quota":
        check_keys(data, path, ("type", "inner", "entries", "scarcity"), ("entries",))
        inner = slicer_from_dict(data.get("inner", {"type": "greedy"}), child(path, "inner"))
        entries = _count_entries(data["entries"], child(path, "entries"))
        scarcity = data.get("scarcity", ScarcityBehavior.DEGRADE.value)
        return _build(path, lambda: CountQuotaSlice(inner, entries, scarcity))
    check_keys(data, path, ("type", "entries", "bucket_size", "scarcity"), ("entries",))
    entries = _count_entries(data["entries"], child(path, "entries"))
    scarcity = data.get("scarcity", ScarcityBehavior.DEGRADE.value)
    return _build(path, lambda: CountConstrainedKnapsackSlice(
        entries, data.get("bucket_size", 100), scarcity))


def slicer_to_dict(slicer: SlicerSpec) -> dict[str, Any]:
    """The table of a built-in slicer."""
    if isinstance(slicer, GreedySlice):
        return {"type": "greedy"}
    if isinstance(slicer, KnapsackSlice):
        return {"type": "knapsack", "bucket_size": slicer.bucket_size}
    if isinstance(slicer, QuotaSlice):
        return {"type": "quota", "inner": slicer_to_dict(_known_slicer(slicer.inner, "inner")),
                "quotas": [{"kind": q.kind.value, "require": q.require, "cap": q.cap}
                           for q in slicer.quotas]}
    entries = [{"kind": e.kind.value, "require_count": e.require_count,
                "cap_count": e.cap_count} for e in slicer.entries]
    if isinstance(slicer, CountQuotaSlice):
        return {"type": "count_quota",
                "inner": slicer_to_dict(_known_slicer(slicer.inner, "inner")),
                "entries": entries, "scarcity": slicer.scarcity.value}
    return {"type": "count_constrained_knapsack", "entries": entries,
            "bucket_size": slicer.bucket_size, "scarcity": slicer.scarcity.value}


_SLICER_CLASSES = (GreedySlice, KnapsackSlice, QuotaSlice, CountQuotaSlice,
                   CountConstrainedKnapsackSlice)


def _known_slicer(value: object, path: str) -> SlicerSpec:
    """``value``, after checking it is a built-in slicer whose inner slicers are too."""
    if type(value) not in _SLICER_CLASSES:
        raise InvalidTypeError(
            path, value,
            "a built-in slicer (GreedySlice, KnapsackSlice, QuotaSlice, CountQuotaSlice or "
            "CountConstrainedKnapsackSlice); a policy cannot describe custom slicers",
        )
    if isinstance(value, QuotaSlice | CountQuotaSlice):
        _known_slicer(value.inner, f"{path}.inner")
    assert isinstance(value, _SLICER_CLASSES)
    return value


def placer_from_dict(value: Any, path: str = "placer") -> PlacerSpec:
    """The placer a table describes."""
    data = table(value, path)
    name = _lookup(require(data, "type", path), path, PLACER_TYPES, "placer", ("placer",))
    check_keys(data, path, ("type",))
    return ChronologicalPlacer() if name == "chronological" else UShapedPlacer()


def placer_to_dict(placer: PlacerSpec) -> dict[str, Any]:
    """The table of a built-in placer."""
    return {"type": "chronological" if isinstance(placer, ChronologicalPlacer) else "u_shaped"}


# -- budget ---------------------------------------------------------------------


def budget_from_dict(value: Any, path: str = "budget") -> ContextBudget:
    """The budget a table describes (snake_case keys, as :class:`ContextBudget`)."""
    data = table(value, path)
    check_keys(data, path, _BUDGET_KEYS, ("max_tokens", "target_tokens"))
    slots = data.get("reserved_slots")
    if slots is not None:
        slots = table(slots, child(path, "reserved_slots"))
    return _build(path, lambda: ContextBudget(
        max_tokens=data["max_tokens"],
        target_tokens=data["target_tokens"],
        output_reserve=data.get("output_reserve", 0),
        reserved_slots=slots,
        estimation_safety_margin_percent=data.get("estimation_safety_margin_percent", 0.0),
    ))


def budget_to_dict(budget: ContextBudget) -> dict[str, Any]:
    """Every field of ``budget``, snake_case."""
    return {
        "max_tokens": budget.max_tokens,
        "target_tokens": budget.target_tokens,
        "output_reserve": budget.output_reserve,
        "reserved_slots": {kind.value: count for kind, count in budget.reserved_slots.items()},
        "estimation_safety_margin_percent": budget.estimation_safety_margin_percent,
    }


# -- text check -----------------------------------------------------------------


def _check_text(value: Any, path: str) -> None:
    """Refuse strings no policy file can hold (lone surrogates), anywhere in a table."""
    if isinstance(value, str):
        if any(0xD800 <= ord(char) <= 0xDFFF for char in value):
            raise InvalidValueError(path, value,
                                    "contains a lone surrogate (not valid Unicode text)")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_text(key, path)
            _check_text(item, child(path, str(key)))
    elif isinstance(value, list):
        for position, item in enumerate(value):
            _check_text(item, index(path, position))


# -- Policy ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A declarative pipeline configuration: which scorer, slicer and placer,
    whether to deduplicate, what to do on overflow, and optionally a budget.

    ``scorer`` is a scorer description (:class:`RecencySpec`,
    :class:`CompositeSpec` ...); ``slicer`` and ``placer`` are the built-in
    slicer and placer values themselves (:class:`~cupellation.GreedySlice`,
    :class:`~cupellation.UShapedPlacer` ...), which are immutable already.
    ``overflow_strategy`` accepts a name in any case. Policies compare by
    value, convert losslessly to a table (:meth:`to_dict`), TOML
    (:meth:`to_toml`) and JSON (:meth:`to_json`), and build a
    :class:`~cupellation.Pipeline` with :meth:`build_pipeline`.

    Invalid values raise :class:`~cupellation.exceptions.InvalidValueError`
    (or its subclass ``ConfigurationError``) or
    :class:`~cupellation.exceptions.InvalidTypeError` naming the field.
    """

    scorer: ScorerSpec
    slicer: SlicerSpec = field(default_factory=GreedySlice)
    placer: PlacerSpec = field(default_factory=ChronologicalPlacer)
    deduplication: bool = True
    overflow_strategy: OverflowStrategy = OverflowStrategy.THROW
    budget: ContextBudget | None = None
    name: str | None = None
    description: str | None = None

    def __post_init__(self) -> None:
        if not is_scorer_spec(self.scorer):
            raise InvalidTypeError("scorer", self.scorer,
                                   "a scorer description (e.g. RecencySpec(), CompositeSpec)")
        _known_slicer(self.slicer, "slicer")
        if type(self.placer) not in (ChronologicalPlacer, UShapedPlacer):
            raise InvalidTypeError("placer", self.placer,
                                   "ChronologicalPlacer() or UShapedPlacer()")
        if not isinstance(self.deduplication, bool):
            raise InvalidTypeError("deduplication", self.deduplication, "a bool")
        object.__setattr__(self, "overflow_strategy",
                           OverflowStrategy.parse(self.overflow_strategy))
        if self.budget is not None and not isinstance(self.budget, ContextBudget):
            raise InvalidTypeError("budget", self.budget, "a ContextBudget or None")
        for name in ("name", "description"):
            text = getattr(self, name)
            if text is not None and not isinstance(text, str):
                raise InvalidTypeError(name, text, "a string or None")
        if self.name is not None and not self.name.strip():
            raise InvalidValueError("name", self.name, "must not be empty")
        _check_text(self.to_dict(), "")

    # -- conversion ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The policy as JSON-native data (the shape of a policy file).

        ``name``, ``description`` and ``budget`` appear only when set; every
        other setting is written out, defaults included.
        """
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        out["deduplication"] = self.deduplication
        out["overflow_strategy"] = self.overflow_strategy.value
        out["scorer"] = self.scorer.to_dict()
        out["slicer"] = slicer_to_dict(self.slicer)
        out["placer"] = placer_to_dict(self.placer)
        if self.budget is not None:
            out["budget"] = budget_to_dict(self.budget)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """The policy a table describes (the inverse of :meth:`to_dict`).

        ``scorer`` is required; ``slicer`` defaults to greedy, ``placer`` to
        chronological, ``deduplication`` to true and ``overflow_strategy`` to
        ``"Throw"``. Unknown keys are refused with a suggestion; every error
        names its path (``scorer.children[1].weight``) and value.
        """
        root = table(data, "")
        check_keys(root, "", _POLICY_KEYS, ("scorer",))
        name = root.get("name")
        if name is not None:
            name = _string(name, "name")
        description = root.get("description")
        if description is not None:
            description = _string(description, "description")
        scorer = scorer_from_dict(root["scorer"], "scorer")
        slicer = (slicer_from_dict(root["slicer"], "slicer") if "slicer" in root
                  else GreedySlice())
        placer = (placer_from_dict(root["placer"], "placer") if "placer" in root
                  else ChronologicalPlacer())
        budget = budget_from_dict(root["budget"], "budget") if "budget" in root else None
        deduplication = _bool(root.get("deduplication", True), "deduplication")
        overflow = root.get("overflow_strategy", OverflowStrategy.THROW.value)
        if not isinstance(overflow, str):
            raise InvalidTypeError("overflow_strategy", overflow,
                                   "one of 'Throw', 'Truncate', 'Proceed'")
        return cls(scorer=scorer, slicer=slicer, placer=placer, deduplication=deduplication,
                   overflow_strategy=OverflowStrategy.parse(overflow), budget=budget,
                   name=name, description=description)

    @classmethod
    def from_json(cls, text: str) -> Policy:
        """The policy in JSON text (see :func:`~cupellation.policy.load_policy`)."""
        return cls.from_dict(parse_document(text, "json", "<policy>"))

    @classmethod
    def from_toml(cls, text: str) -> Policy:
        """The policy in TOML text (see :func:`~cupellation.policy.load_policy`)."""
        return cls.from_dict(parse_document(text, "toml", "<policy>"))

    def to_json(self, *, indent: int | None = 2) -> str:
        """The policy as JSON text (:meth:`to_dict`), ending in a newline."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False) + "\n"

    def to_toml(self) -> str:
        """The policy as TOML text (:meth:`to_dict`); ``load_policy`` reads it back equal."""
        return _toml.dumps(self.to_dict())

    # -- building -----------------------------------------------------------------

    def build_pipeline(self, budget: ContextBudget | None = None, *,
                       clock: Clock | None = None) -> Pipeline:
        """A :class:`~cupellation.Pipeline` configured as this policy says.

        ``budget`` overrides the policy's own budget (either may be ``None``:
        the pipeline then needs a budget per run). ``clock`` is the wall clock
        of decay scorers without a fixed ``reference_time`` (default:
        :func:`~cupellation.scoring.utc_now`).
        """
        if budget is not None and not isinstance(budget, ContextBudget):
            raise InvalidTypeError("budget", budget, "a ContextBudget or None")
        if clock is not None and not callable(clock):
            raise InvalidTypeError("clock", clock, "a zero-argument callable or None")
        return Pipeline(
            scorer=self.scorer.build(clock=clock),
            slicer=self.slicer,
            placer=self.placer,
            deduplication=self.deduplication,
            overflow_strategy=self.overflow_strategy,
            budget=self.budget if budget is None else budget,
        )

    def with_budget(self, budget: ContextBudget | None) -> Policy:
        """A copy with another budget (``None`` removes it)."""
        return Policy(scorer=self.scorer, slicer=self.slicer, placer=self.placer,
                      deduplication=self.deduplication,
                      overflow_strategy=self.overflow_strategy, budget=budget,
                      name=self.name, description=self.description)

