"""The strategy registry: every built-in scorer, slicer, placer and decay curve by
its type name, and the one builder that policies, the conformance runner and the
pipeline's record of itself all use.

Each family has a table (:class:`~cupellation._tables.StrategyTable`) that the
built-ins register in from their own modules; this module only gathers them.
A strategy's table is ``{"type": <type_name>, <settings>...}``, nested
strategies being tables too (a composite's ``children``, a quota slicer's
``inner``, a decay scorer's ``curve``)::

    build_scorer({"type": "composite", "children": [
        {"type": "recency", "weight": 3.0}, {"type": "kind", "weight": 1.0}]})

``describe_*`` give the table of any strategy, recording one that is not a
built-in as ``{"type": "custom", "repr": ...}``; :func:`strategy_json` is the
compact text ``run_started`` carries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ._model import ContextBudget
from ._tables import CUSTOM_TYPE, StrategyTable, built, check_keys, child, index, table
from .exceptions import CupelError, InvalidTypeError, InvalidValueError
from .placing._protocol import PLACERS, Placer, build_placer
from .scoring._base import SCORERS, Scorer, build_scorer
from .scoring._decay import CURVES, build_curve
from .slicing._protocol import SLICERS, Slicer, build_slicer

__all__ = [
    "BUDGET_KEYS",
    "CURVE_TYPES",
    "PLACER_TYPES",
    "SCORER_TYPES",
    "SLICER_TYPES",
    "build_curve",
    "build_placer",
    "build_scorer",
    "build_slicer",
    "budget_from_dict",
    "budget_to_dict",
    "check_strategy",
    "check_text",
    "describe_placer",
    "describe_scorer",
    "describe_slicer",
    "find_custom",
    "needs_settings",
    "settings_of",
    "standalone_types",
    "strategy_json",
]

#: A strategy family, as :func:`settings_of` names it.
Family = Literal["scorer", "slicer", "placer", "curve"]

#: Every built-in scorer's ``type``, sorted.
SCORER_TYPES: tuple[str, ...] = SCORERS.names()
#: Every built-in slicer's ``type``, sorted.
SLICER_TYPES: tuple[str, ...] = SLICERS.names()
#: Every built-in placer's ``type``, sorted.
PLACER_TYPES: tuple[str, ...] = PLACERS.names()
#: Every built-in decay curve's ``type``, sorted.
CURVE_TYPES: tuple[str, ...] = CURVES.names()


def _table(family: Family) -> StrategyTable[Any]:
    tables: dict[str, StrategyTable[Any]] = {"scorer": SCORERS, "slicer": SLICERS,
                                             "placer": PLACERS, "curve": CURVES}
    return tables[family]


def standalone_types(family: Family) -> tuple[str, ...]:
    """The registered types of ``family`` that a table holding only its ``type``
    builds, sorted: what a CLI flag such as ``--scorer`` can name. A class that
    builds so but is pointless without settings says ``needs_settings = True``.
    Read at each call, so a strategy registered later is listed."""
    names = []
    for cls in _table(family).classes():
        if getattr(cls, "needs_settings", False):
            continue
        try:
            cls.from_dict({"type": cls.type_name}, path=family)
        except CupelError:
            continue  # a required setting: only a policy file can describe it
        names.append(cls.type_name)
    return tuple(names)


def needs_settings(family: Family) -> tuple[str, ...]:
    """The registered types of ``family`` that only a policy file can describe
    (those :func:`standalone_types` leaves out), sorted."""
    alone = set(standalone_types(family))
    return tuple(name for name in _table(family).names() if name not in alone)


def settings_of(family: Family, type_name: Any, path: str) -> tuple[str, tuple[str, ...]]:
    """The canonical ``type_name`` a (possibly loosely spelt) name stands for in
    ``family``, and the settings its table may hold besides ``type``.

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``path.type`` for an unknown name.
    """
    cls = _table(family).lookup({"type": type_name}, path)
    return cls.type_name, cls.settings


def describe_scorer(scorer: Scorer) -> dict[str, Any]:
    """The table of ``scorer``: its ``to_dict()``, or the custom record."""
    return SCORERS.describe(scorer)


def describe_slicer(slicer: Slicer) -> dict[str, Any]:
    """The table of ``slicer``: its ``to_dict()``, or the custom record."""
    return SLICERS.describe(slicer)


def describe_placer(placer: Placer) -> dict[str, Any]:
    """The table of ``placer``: its ``to_dict()``, or the custom record."""
    return PLACERS.describe(placer)


def strategy_json(table: Mapping[str, Any]) -> str:
    """A strategy table as compact JSON text with sorted keys (what ``run_started``
    carries). Text that UTF-8 cannot hold (a lone surrogate in a setting) is
    written with ``\\u`` escapes instead, so every sink can write it."""
    text = json.dumps(table, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(table, sort_keys=True, separators=(",", ":"))
    return text


def find_custom(value: Any, path: str) -> tuple[str, str] | None:
    """The path and ``repr`` of the first custom record inside a strategy table, or
    ``None`` when every strategy in it is a built-in."""
    if isinstance(value, Mapping):
        if value.get("type") == CUSTOM_TYPE:
            return path, str(value.get("repr"))
        for key, inner in value.items():
            found = find_custom(inner, child(path, str(key)))
            if found is not None:
                return found
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            found = find_custom(inner, index(path, position))
            if found is not None:
                return found
    return None


# -- what a policy holds beside its strategies (see cupellation.Policy) -------------

#: The keys of a budget's table (snake_case, as :class:`ContextBudget`).
BUDGET_KEYS = ("max_tokens", "target_tokens", "output_reserve", "reserved_slots",
               "estimation_safety_margin_percent")


def budget_from_dict(value: Any, path: str = "budget") -> ContextBudget:
    """The budget a table describes (snake_case keys, as :class:`ContextBudget`)."""
    data = table(value, path)
    check_keys(data, path, BUDGET_KEYS, ("max_tokens", "target_tokens"))
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


def check_text(value: Any, path: str) -> None:
    """Refuse strings no policy file can hold (lone surrogates), anywhere in a table."""
    if isinstance(value, str):
        if any(0xD800 <= ord(char) <= 0xDFFF for char in value):
            raise InvalidValueError(path, value,
                                    "contains a lone surrogate (not valid Unicode text)")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_text(key, path)
            check_text(item, child(path, str(key)))
    elif isinstance(value, list):
        for position, item in enumerate(value):
            check_text(item, index(path, position))


def check_strategy(family: Literal["scorer", "slicer", "placer"], strategy: object,
                   described: dict[str, Any]) -> None:
    """Refuse a strategy a policy cannot write: one that is (or holds) a custom
    strategy (``InvalidTypeError`` naming its path), or one whose table
    (``described``) does not give it back."""
    families: dict[str, tuple[tuple[str, ...], Callable[[dict[str, Any]], object]]] = {
        "scorer": (SCORER_TYPES, build_scorer), "slicer": (SLICER_TYPES, build_slicer),
        "placer": (PLACER_TYPES, build_placer)}
    names, rebuild = families[family]
    found = find_custom(described, family)
    if found is not None:
        where, shown = found
        if where == family:
            raise InvalidTypeError(where, strategy, f"a built-in {family} ({', '.join(names)}); "
                                                    "a policy cannot describe custom strategies")
        raise InvalidTypeError(where, shown, "a built-in strategy; a policy cannot describe "
                                             "custom strategies")
    rebuilt: object = rebuild(described)
    if rebuilt != strategy:
        raise InvalidValueError(
            family, strategy,
            f"holds a setting a policy cannot write (read back from its table it is "
            f"{rebuilt!r}); a decay scorer's clock, say, must be utc_now or a FixedClock")
