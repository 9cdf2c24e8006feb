"""The :class:`Policy` value and its table form (``to_dict`` / ``from_dict``).

A policy holds the built-in strategies themselves (they compare by value);
their tables, and building them from tables, come from the strategy registry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .._model import ContextBudget, OverflowStrategy
from .._pipeline import Pipeline
from .._registry import (
    PLACER_TYPES,
    SCORER_TYPES,
    SLICER_TYPES,
    build_placer,
    build_scorer,
    build_slicer,
    describe_placer,
    describe_scorer,
    describe_slicer,
    find_custom,
)
from .._tables import bool_value, built, check_keys, child, index, table, text_value
from ..exceptions import InvalidTypeError, InvalidValueError
from ..placing import ChronologicalPlacer, Placer
from ..scoring import Clock, Scorer
from ..slicing import GreedySlice, Slicer
from . import _toml
from ._text import parse_document

__all__ = ["Policy", "budget_from_dict", "budget_to_dict"]

_POLICY_KEYS = ("name", "description", "deduplication", "overflow_strategy", "scorer",
                "slicer", "placer", "budget")
_BUDGET_KEYS = ("max_tokens", "target_tokens", "output_reserve", "reserved_slots",
                "estimation_safety_margin_percent")


# -- budget ---------------------------------------------------------------------


def budget_from_dict(value: Any, path: str = "budget") -> ContextBudget:
    """The budget a table describes (snake_case keys, as :class:`ContextBudget`)."""
    data = table(value, path)
    check_keys(data, path, _BUDGET_KEYS, ("max_tokens", "target_tokens"))
    slots = data.get("reserved_slots")
    if slots is not None:
        slots = table(slots, child(path, "reserved_slots"))
    return built(path, lambda: ContextBudget(
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


# -- checks ---------------------------------------------------------------------


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


def _check_strategy(family: str, strategy: object, described: dict[str, Any],
                    rebuild: Callable[[dict[str, Any]], object], names: tuple[str, ...]) -> None:
    """Refuse a strategy a policy cannot write: one that is (or holds) a custom
    strategy, or one whose table does not give it back."""
    found = find_custom(described, family)
    if found is not None:
        where, shown = found
        if where == family:
            raise InvalidTypeError(where, strategy, f"a built-in {family} ({', '.join(names)}); "
                                                    "a policy cannot describe custom strategies")
        raise InvalidTypeError(where, shown, "a built-in strategy; a policy cannot describe "
                                             "custom strategies")
    rebuilt = rebuild(described)
    if rebuilt != strategy:
        raise InvalidValueError(
            family, strategy,
            f"holds a setting a policy cannot write (read back from its table it is "
            f"{rebuilt!r}); a decay scorer's clock, say, must be utc_now or a FixedClock")


# -- Policy ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A declarative pipeline configuration: which scorer, slicer and placer,
    whether to deduplicate, what to do on overflow, and optionally a budget.

    ``scorer``, ``slicer`` and ``placer`` are built-in strategies
    (:class:`~cupellation.RecencyScorer`, a
    :class:`~cupellation.CompositeScorer` of them,
    :class:`~cupellation.GreedySlice`, :class:`~cupellation.UShapedPlacer`
    ...): immutable values that compare by value. ``overflow_strategy``
    accepts a name in any case. Policies compare by value, convert losslessly
    to a table (:meth:`to_dict`), TOML (:meth:`to_toml`) and JSON
    (:meth:`to_json`), and build a :class:`~cupellation.Pipeline` with
    :meth:`build_pipeline`.

    A custom strategy (a :class:`~cupellation.FunctionScorer`, a user's own
    slicer), even nested, is refused with
    :class:`~cupellation.exceptions.InvalidTypeError` naming its path
    (``scorer.children[1]``): a policy is what a file can hold. Other invalid
    values raise :class:`~cupellation.exceptions.InvalidValueError` (or its
    subclass ``ConfigurationError``) naming the field.
    """

    scorer: Scorer
    slicer: Slicer = field(default_factory=GreedySlice)
    placer: Placer = field(default_factory=ChronologicalPlacer)
    deduplication: bool = True
    overflow_strategy: OverflowStrategy = OverflowStrategy.THROW
    budget: ContextBudget | None = None
    name: str | None = None
    description: str | None = None

    def __post_init__(self) -> None:
        _check_strategy("scorer", self.scorer, describe_scorer(self.scorer), build_scorer,
                        SCORER_TYPES)
        _check_strategy("slicer", self.slicer, describe_slicer(self.slicer), build_slicer,
                        SLICER_TYPES)
        _check_strategy("placer", self.placer, describe_placer(self.placer), build_placer,
                        PLACER_TYPES)
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
        out["scorer"] = describe_scorer(self.scorer)
        out["slicer"] = describe_slicer(self.slicer)
        out["placer"] = describe_placer(self.placer)
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
            name = text_value(name, "name")
        description = root.get("description")
        if description is not None:
            description = text_value(description, "description")
        overflow = root.get("overflow_strategy", OverflowStrategy.THROW.value)
        if not isinstance(overflow, str):
            raise InvalidTypeError("overflow_strategy", overflow,
                                   "one of 'Throw', 'Truncate', 'Proceed'")
        return cls(
            scorer=build_scorer(root["scorer"], path="scorer"),
            slicer=build_slicer(root["slicer"], path="slicer") if "slicer" in root
            else GreedySlice(),
            placer=build_placer(root["placer"], path="placer") if "placer" in root
            else ChronologicalPlacer(),
            deduplication=bool_value(root.get("deduplication", True), "deduplication"),
            overflow_strategy=OverflowStrategy.parse(overflow),
            budget=budget_from_dict(root["budget"], "budget") if "budget" in root else None,
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
        scorer = self.scorer
        if clock is not None:
            scorer = build_scorer(describe_scorer(scorer), clock=clock)
        return Pipeline(
            scorer=scorer,
            slicer=self.slicer,
            placer=self.placer,
            deduplication=self.deduplication,
            overflow_strategy=self.overflow_strategy,
            budget=self.budget if budget is None else budget,
        )

    def with_budget(self, budget: ContextBudget | None) -> Policy:
        """A copy with another budget (``None`` removes it)."""
        return replace(self, budget=budget)
