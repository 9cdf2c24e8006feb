"""Slicing conformance vectors (``spec/src/conformance/format.md``, "Slicing Vectors").

The slicer is built by the strategy registry, as a policy's is: the runner only
renames the vector format's keys to the table's (:func:`slicer_table`). Where
the two formats differ: ``inner_slicer`` (the table's ``inner``) is a name
whose slicer takes the keys its decorator does not, or a table with its own
``type`` and settings; ``scarcity_behavior`` is the table's ``scarcity``; a
count quota's ``entries`` default to none; ``count_constrained_knapsack`` may
name its (always knapsack) ``inner_slicer``. Names compare ignoring ASCII case,
with ``-`` and ``_`` interchangeable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .. import _registry as registry
from .._model import ContextBudget
from ..exceptions import ConfigurationError, InvalidTypeError
from ..slicing import Slicer, slice_with_details
from ._errors import UnsupportedConfigError, VectorFailure, check_keys
from ._vectors import scored_item_from_vector

__all__ = ["SLICER_NAMES", "build_slicer", "run_slicing_vector", "slicer_table"]

#: The slicer names vectors use, in the specification's spelling.
SLICER_NAMES: tuple[str, ...] = registry.SLICER_TYPES

#: The settings of the slicers whose vector settings differ from their table's.
#: A decorator slicer (quota, count_quota) hands every other key to its inner
#: slicer, which must take it.
_KEYS: dict[str, tuple[str, ...]] = {
    "quota": ("inner_slicer", "quotas"),
    "count_quota": ("inner_slicer", "entries", "scarcity_behavior"),
    "count_constrained_knapsack": ("inner_slicer", "bucket_size", "entries", "scarcity_behavior"),
}
#: The keys of a quota entry and a count entry.
_ENTRY_KEYS = {"quotas": ("kind", "require", "cap"),
               "entries": ("kind", "require_count", "cap_count")}


def _entries(config: Mapping[str, Any], key: str, path: str, owner: str) -> list[Any]:
    value = config.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise InvalidTypeError(f"config.{key}", value, "an array of tables")
    for position, table in enumerate(value):
        check_keys(table, _ENTRY_KEYS[key], f"{path}.{key}[{position}]", owner)
    return value


def _inner(key: str, config: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The table of the inner slicer of ``quota`` or ``count_quota``.

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
        return slicer_table(inner["type"], settings, path=f"{path}.inner_slicer",
                            context=f"the inner slicer of {key!r}")
    return slicer_table(inner, rest, path=path, context=f"the inner slicer of {key!r}",
                        also_known=_KEYS[key])


def _scarcity(config: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    if "scarcity_behavior" in config:
        out["scarcity"] = config["scarcity_behavior"]
    return out


def _decorated(name: str, config: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The table of a quota, count-quota or count-constrained-knapsack slicer."""
    if name == "quota":
        return {"type": name, "inner": _inner(name, config, path),
                "quotas": _entries(config, "quotas", path, "a quota entry")}
    entries = _entries(config, "entries", path, "a count quota entry")
    if name == "count_quota":
        return _scarcity(config, {"type": name, "inner": _inner(name, config, path),
                                  "entries": entries})
    owner = "the 'count_constrained_knapsack' slicer"
    check_keys(config, _KEYS[name], path, owner)
    inner, _ = registry.settings_of("slicer", config.get("inner_slicer", "knapsack"),
                                    f"{path}.inner_slicer")
    if inner != "knapsack":
        raise ConfigurationError("config.inner_slicer", config["inner_slicer"],
                                 "count_constrained_knapsack always slices with a knapsack")
    out = {"type": name, "entries": entries}
    if "bucket_size" in config:
        out["bucket_size"] = config["bucket_size"]
    return _scarcity(config, out)


def slicer_table(name: Any, config: Mapping[str, Any], *, path: str = "config",
                 context: str | None = None, also_known: Collection[str] = ()
                 ) -> dict[str, Any]:
    """The strategy table of the slicer a vector names, from its ``[config]`` table
    (keys renamed to the table's, see the module doc).

    A key that neither the slicer nor its inner slicer takes raises
    :class:`~cupellation.conformance.UnsupportedConfigError` naming its path
    (``path`` is where ``config`` sits; ``context`` says what the slicer is,
    ``also_known`` lists keys the caller reads itself, for the suggestion).
    Raises :class:`~cupellation.exceptions.ConfigurationError` for an
    unknown name.
    """
    if not isinstance(name, str):
        raise InvalidTypeError("slicer", name, "a string")
    key, settings = registry.settings_of("slicer", name, path)
    if key in _KEYS:
        return _decorated(key, config, path)
    owner = f"the {key!r} slicer" + (f" ({context})" if context else "")
    for stray in config:
        if stray not in settings:
            raise UnsupportedConfigError(f"{path}.{stray}", owner, (*settings, *also_known))
    return {"type": key, **config}


def build_slicer(name: Any, config: Mapping[str, Any], *, path: str = "config",
                 context: str | None = None, also_known: Collection[str] = ()) -> Slicer:
    """The slicer a vector names, configured from its ``[config]`` table: built by
    the strategy registry from :func:`slicer_table` (the same arguments).

    Raises :class:`~cupellation.conformance.UnsupportedConfigError` for a key
    no slicer takes, and :class:`~cupellation.exceptions.ConfigurationError`
    for an unknown name or an invalid setting (naming its path).
    """
    table = slicer_table(name, config, path=path, context=context, also_known=also_known)
    return registry.build_slicer(table, path=path)


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
