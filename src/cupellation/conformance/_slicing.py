"""Slicing conformance vectors (``spec/src/conformance/format.md``, "Slicing Vectors").

Slicer names are those the vectors use (``greedy``, ``knapsack``, ``quota``,
``count_quota``, ``count_constrained_knapsack``), compared ignoring ASCII case
with ``-`` and ``_`` interchangeable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .._model import (
    ContextBudget,
    ascii_fold,
)
from ..exceptions import ConfigurationError, InvalidTypeError
from ..slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
    ScarcityBehavior,
    Slicer,
    slice_with_details,
)
from ._errors import UnsupportedConfigError, VectorFailure, check_keys
from ._vectors import scored_item_from_vector

__all__ = ["SLICER_NAMES", "build_slicer", "run_slicing_vector"]

#: The slicer names vectors use, in the specification's spelling.
SLICER_NAMES: tuple[str, ...] = (
    "greedy", "knapsack", "quota", "count_quota", "count_constrained_knapsack",
)


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise InvalidTypeError(field, value, "a string")
    return ascii_fold(value).replace("-", "_")


def _table_list(config: Mapping[str, Any], key: str, path: str, owner: str,
                known: tuple[str, ...]) -> Sequence[Mapping[str, Any]]:
    value = config.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise InvalidTypeError(f"config.{key}", value, "an array of tables")
    for index, table in enumerate(value):
        check_keys(table, known, f"{path}.{key}[{index}]", owner)
    return value


def _scarcity(config: Mapping[str, Any]) -> ScarcityBehavior:
    return ScarcityBehavior.parse(config.get("scarcity_behavior", ScarcityBehavior.DEGRADE))


def _count_entries(config: Mapping[str, Any], path: str) -> list[CountQuotaEntry]:
    return [
        CountQuotaEntry(
            table["kind"], table.get("require_count", 0), cap_count=table["cap_count"]
        )
        for table in _table_list(config, "entries", path, "a count quota entry",
                                 ("kind", "require_count", "cap_count"))
    ]


#: The settings each slicer takes itself. A decorator slicer (quota,
#: count_quota) hands every other key to its inner slicer, which must take it.
_KEYS: dict[str, tuple[str, ...]] = {
    "greedy": (),
    "knapsack": ("bucket_size",),
    "quota": ("inner_slicer", "quotas"),
    "count_quota": ("inner_slicer", "entries", "scarcity_behavior"),
    "count_constrained_knapsack": ("inner_slicer", "bucket_size", "entries", "scarcity_behavior"),
}


def _inner(key: str, config: Mapping[str, Any], path: str) -> Slicer:
    """The inner slicer of ``quota`` or ``count_quota``.

    ``inner_slicer`` is a name (default ``"greedy"``), and the inner slicer
    takes the keys its decorator does not (``bucket_size``, or the
    ``[[config.quotas]]`` of a quota slicer inside a count quota); or it is a
    table ``{type = name, ...}`` holding the inner slicer's own settings, and
    nothing is handed on.
    """
    rest = {k: v for k, v in config.items() if k not in _KEYS[key]}
    inner = config.get("inner_slicer", "greedy")
    if isinstance(inner, Mapping):
        if rest:
            raise UnsupportedConfigError(
                f"{path}.{next(iter(rest))}", f"the {key!r} slicer", _KEYS[key],
                "is not a setting of this slicer, and its inner_slicer table holds "
                "the inner slicer's settings",
            )
        if "type" not in inner:
            raise ConfigurationError("inner_slicer.type", None, "is required")
        settings = {k: v for k, v in inner.items() if k != "type"}
        return build_slicer(inner["type"], settings, path=f"{path}.inner_slicer",
                            context=f"the inner slicer of {key!r}")
    return build_slicer(inner, rest, path=path, context=f"the inner slicer of {key!r}",
                        also_known=_KEYS[key])


def build_slicer(name: str, config: Mapping[str, Any], *, path: str = "config",
                 context: str | None = None, also_known: Collection[str] = ()) -> Slicer:
    """The slicer a vector names, configured from its ``[config]`` table.

    Recognised keys: ``bucket_size`` (knapsack, count_constrained_knapsack and
    a knapsack inner slicer); ``inner_slicer`` (quota, count_quota; default
    ``"greedy"``; a name, or a table with ``type`` and the inner slicer's
    settings); ``[[config.quotas]]`` with ``kind``, ``require``, ``cap``
    (quota, also as the inner slicer of count_quota); ``[[config.entries]]``
    with ``kind``, ``require_count``, ``cap_count``, and
    ``scarcity_behavior`` (count_quota and count_constrained_knapsack).

    A key that neither the slicer nor its inner slicer takes raises
    :class:`~cupellation.conformance.UnsupportedConfigError` naming its path
    (``path`` is where ``config`` sits; ``context`` says what the slicer is,
    ``also_known`` lists keys the caller reads itself, for the suggestion).
    Raises :class:`~cupellation.exceptions.ConfigurationError` for an
    unknown name.
    """
    key = _name(name, "slicer")
    if key not in _KEYS:
        raise ConfigurationError("slicer", name, f"must be one of {', '.join(SLICER_NAMES)}")
    if key not in ("quota", "count_quota"):
        owner = f"the {key!r} slicer" + (f" ({context})" if context else "")
        for stray in config:
            if stray not in _KEYS[key]:
                raise UnsupportedConfigError(f"{path}.{stray}", owner,
                                             (*_KEYS[key], *also_known))
    if key == "greedy":
        return GreedySlice()
    if key == "knapsack":
        return KnapsackSlice(config.get("bucket_size", 100))
    if key == "quota":
        quotas = [
            QuotaEntry(table["kind"], table.get("require", 0.0), table.get("cap", 100.0))
            for table in _table_list(config, "quotas", path, "a quota entry",
                                     ("kind", "require", "cap"))
        ]
        return QuotaSlice(_inner(key, config, path), quotas)
    if key == "count_quota":
        return CountQuotaSlice(_inner(key, config, path), _count_entries(config, path),
                               _scarcity(config))
    inner = _name(config.get("inner_slicer", "knapsack"), "config.inner_slicer")
    if inner != "knapsack":
        raise ConfigurationError(
            "config.inner_slicer", config["inner_slicer"],
            "count_constrained_knapsack always slices with a knapsack",
        )
    return CountConstrainedKnapsackSlice(
        _count_entries(config, path), config.get("bucket_size", 100), _scarcity(config)
    )


def _expected_count(expected: Mapping[str, Any], key: str) -> int | None:
    value = expected.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"expected.{key}", value, "an integer")
    return value


def run_slicing_vector(doc: Mapping[str, Any]) -> None:
    """Run one slicing vector; raise :class:`VectorFailure` when it does not hold.

    The selection is compared as a set of contents (each content once);
    ``shortfall_count`` and ``cap_excluded_count`` are checked when the
    vector states them. An unknown key in ``[config]`` or ``[budget]``
    raises :class:`~cupellation.conformance.UnsupportedConfigError`. The
    budget is ``ContextBudget(max_tokens=max_tokens or target_tokens,
    target_tokens=target_tokens)``. A missing key raises
    ``KeyError``; a mistyped value a ``TypeError`` or ``ValueError``.
    """
    config: Mapping[str, Any] = doc.get("config", {})
    slicer = build_slicer(doc["test"]["slicer"], config)
    budget_table: Mapping[str, Any] = doc["budget"]
    check_keys(budget_table, ("target_tokens", "max_tokens"), "budget",
               "a slicing vector's budget")
    target = budget_table["target_tokens"]
    budget = ContextBudget(
        max_tokens=budget_table.get("max_tokens", target), target_tokens=target
    )
    tables: Sequence[Mapping[str, Any]] = doc.get("scored_items", [])
    scored = [scored_item_from_vector(table) for table in tables]
    expected: Mapping[str, Any] = doc["expected"]
    wanted = expected["selected_contents"]
    if not isinstance(wanted, list) or not all(isinstance(v, str) for v in wanted):
        raise InvalidTypeError("expected.selected_contents", wanted, "an array of strings")

    outcome = slice_with_details(slicer, scored, budget)

    inputs = {id(entry.item) for entry in scored}
    selected_ids = [id(item) for item in outcome.selected]
    if len(set(selected_ids)) != len(selected_ids) or not inputs.issuperset(selected_ids):
        raise VectorFailure(
            f"{slicer!r} did not return a duplicate-free subset of its input items"
        )
    actual = [item.content for item in outcome.selected]
    if Counter(actual) != Counter(wanted):
        raise VectorFailure(
            f"{slicer!r}: expected selection {sorted(wanted)}, got {sorted(actual)}"
        )
    problems = []
    for key, got in (
        ("shortfall_count", len(outcome.shortfalls)),
        ("cap_excluded_count", len(outcome.cap_exclusions)),
    ):
        want = _expected_count(expected, key)
        if want is not None and want != got:
            problems.append(f"{key}: expected {want}, got {got}")
    if problems:
        raise VectorFailure(f"{slicer!r}: " + "; ".join(problems))
