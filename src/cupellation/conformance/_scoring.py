"""Scoring conformance vectors: the vector's scorer as a strategy table, and
running ``stage = "scoring"`` vectors.

A scoring vector names its scorer in ``[test].scorer``, configures it in
``[config]``, lists ``[[items]]`` and the ``[[expected]]`` score of each item
(by ``content``) within ``[tolerance].score_epsilon``. A vector with
``expect_construction_error = true`` passes when building the scorer raises
:class:`~cupellation.exceptions.ConfigurationError`.

The scorer is built by the strategy registry, as a policy's is: the runner only
renames the vector format's keys to the table's (:func:`scorer_table`). Where
the two formats differ: ``kind`` takes ``use_default_weights``; weights may be
arrays of ``{kind|tag, weight}`` tables; a composite lists ``scorers`` (or,
nested, ``children``) whose entries default to weight 1.0 and may hold their
settings in a ``config`` table; ``scaled`` names ``inner_scorer`` (a name or an
entry) and ``inner_config``; decay curves give ``half_life_secs`` /
``max_age_secs`` in seconds, and ``reference_time`` is required (the vectors
fix the instant; a decay scorer has no default clock, D042). Any other scorer
takes its table's own keys. An unknown key in ``[config]`` (at any depth) is
refused with :class:`~cupellation.conformance.UnsupportedConfigError`; unknown
keys elsewhere (``[test]``, ``[[items]]``, ``[[expected]]``) are ignored, as
the format chapter asks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import _registry as registry
from .._model import ContextItem
from .._registry import SCORER_TYPES, settings_of
from ..exceptions import ConfigurationError, CupelError, InvalidTypeError
from ..scoring import Scorer
from ._errors import UnsupportedConfigError, VectorFailure, check_keys
from ._vectors import item_from_vector, vector_timestamp

__all__ = [
    "SCORER_TYPES",
    "build_scorer",
    "entry_table",
    "item_from_vector",
    "run_scoring_vector",
    "scorer_table",
]

#: The default ``[tolerance].score_epsilon`` (the specification's 1e-9).
DEFAULT_EPSILON = 1e-9

#: A vector's settings of one scorer (its table, its path) -> the table's settings.
_Renamer = Callable[[Mapping[str, Any], str], dict[str, Any]]


def _table(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidTypeError(field, value, "a table")
    return value


def _array(value: Any, field: str) -> Sequence[Any]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise InvalidTypeError(field, value, "an array of tables")
    return value


def _pairs(value: Any, key_name: str, path: str) -> Any:
    """A weight map given as a table ``{name = weight}`` (kept as it is) or as an
    array of tables ``[{<key_name> = name, weight = w}]`` (the vectors' form)."""
    if isinstance(value, Mapping) or not isinstance(value, Sequence) or isinstance(value, str):
        return value
    pairs: dict[Any, Any] = {}
    for position, raw in enumerate(value):
        entry = _table(raw, f"{path}[{position}]")
        check_keys(entry, (key_name, "weight"), f"{path}[{position}]",
                   f"a {path.rpartition('.')[2]} entry")
        for key in (key_name, "weight"):
            if key not in entry:
                raise ConfigurationError(f"{path}[{position}].{key}", None, "is required")
        pairs[entry[key_name]] = entry["weight"]
    return pairs


def _kind(config: Mapping[str, Any], path: str) -> dict[str, Any]:
    known = ("use_default_weights", "weights")
    check_keys(config, known, path, "a 'kind' scorer")
    if config.get("use_default_weights", False):
        if "weights" in config:
            raise UnsupportedConfigError(
                f"{path}.weights", "a 'kind' scorer", known,
                "cannot be honoured together with use_default_weights = true")
        return {}
    if "weights" in config:
        return {"weights": _pairs(config["weights"], "kind", f"{path}.weights")}
    return {}


def _tag(config: Mapping[str, Any], path: str) -> dict[str, Any]:
    check_keys(config, ("tag_weights", "case_sensitive"), path, "a 'tag' scorer")
    out = {"tag_weights": _pairs(config.get("tag_weights", {}), "tag", f"{path}.tag_weights")}
    if "case_sensitive" in config:
        out["case_sensitive"] = config["case_sensitive"]
    return out


def _composite(config: Mapping[str, Any], path: str) -> dict[str, Any]:
    # A top-level composite lists its children under "scorers"; a composite
    # nested in another one under "children" (the vectors' spelling).
    known = ("scorers", "children")
    check_keys(config, known, path, "a 'composite' scorer")
    if "scorers" in config and "children" in config:
        raise UnsupportedConfigError(
            f"{path}.children", "a 'composite' scorer", known,
            "cannot be honoured together with 'scorers' (name the children once)")
    key = "children" if "children" in config else "scorers"
    entries = _array(config.get(key, []), key)
    return {"children": [entry_table(raw, f"{path}.{key}[{position}]")
                         for position, raw in enumerate(entries)]}


def _scaled(config: Mapping[str, Any], path: str) -> dict[str, Any]:
    known = ("inner_scorer", "inner_config")
    check_keys(config, known, path, "a 'scaled' scorer")
    if "inner_scorer" not in config:
        raise ConfigurationError(f"{path}.inner_scorer", None, "is required for a 'scaled' "
                                                               "scorer")
    inner = config["inner_scorer"]
    if isinstance(inner, Mapping):
        if "inner_config" in config:
            raise UnsupportedConfigError(
                f"{path}.inner_config", "a 'scaled' scorer", known,
                "cannot be honoured when inner_scorer is a table (put the settings there)")
        table = entry_table(inner, f"{path}.inner_scorer")
        del table["weight"]
        return {"inner": table}
    inner_config = _table(config.get("inner_config", {}), "inner_config")
    return {"inner": scorer_table(inner, inner_config, path=f"{path}.inner_config")}


#: Each curve type's keys in a vector, and the table's key for its seconds.
_CURVE_SECONDS: dict[str, tuple[str, str]] = {
    "exponential": ("half_life_secs", "half_life"),
    "window": ("max_age_secs", "max_age"),
}


def _seconds(value: Any, path: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTypeError(path, value, "a number of seconds")
    return value


def _curve(config: Mapping[str, Any], path: str) -> dict[str, Any]:
    curve_type, _settings = settings_of("curve", config.get("type"), path)
    if curve_type in _CURVE_SECONDS:
        key, renamed = _CURVE_SECONDS[curve_type]
        check_keys(config, ("type", key), path, f"a {curve_type!r} curve")
        if key not in config:
            raise ConfigurationError(f"{path}.{key}", None, f"is required for a "
                                                            f"{curve_type!r} curve")
        return {"type": curve_type, renamed: _seconds(config[key], f"{path}.{key}")}
    check_keys(config, ("type", "windows"), path, f"a {curve_type!r} curve")
    windows = []
    for position, raw in enumerate(_array(config.get("windows", []), "windows")):
        where = f"{path}.windows[{position}]"
        window = _table(raw, where)
        check_keys(window, ("max_age_secs", "score"), where, "a step window")
        entry = {"max_age" if key == "max_age_secs" else key: value
                 for key, value in window.items()}
        if "max_age" in entry:
            entry["max_age"] = _seconds(entry["max_age"], f"{where}.max_age_secs")
        windows.append(entry)
    return {"type": curve_type, "windows": windows}


def _decay(config: Mapping[str, Any], path: str) -> dict[str, Any]:
    check_keys(config, ("curve", "reference_time", "null_timestamp_score"), path,
               "a 'decay' scorer")
    if "curve" not in config:
        raise ConfigurationError(f"{path}.curve", None, "is required for a 'decay' scorer")
    out: dict[str, Any] = {"curve": _curve(_table(config["curve"], "curve"), f"{path}.curve")}
    # A decay scorer has no default clock (D042): a vector must fix its instant.
    if "reference_time" not in config:
        raise ConfigurationError(f"{path}.reference_time", None,
                                 "is required for a 'decay' scorer (a vector fixes its "
                                 "instant: there is no default clock)")
    out["reference_time"] = vector_timestamp(config["reference_time"], "reference_time")
    if "null_timestamp_score" in config:
        out["null_timestamp_score"] = config["null_timestamp_score"]
    return out


#: The scorers whose vector settings differ from their table's; every other
#: scorer's vector settings are its table's own.
_RENAMERS: dict[str, _Renamer] = {
    "kind": _kind,
    "tag": _tag,
    "composite": _composite,
    "scaled": _scaled,
    "decay": _decay,
}


def scorer_table(type_name: Any, config: Mapping[str, Any], *,
                 path: str = "config") -> dict[str, Any]:
    """The strategy table of the scorer a vector describes: its type name and its
    ``[config]`` table, keys renamed to the table's (see the module doc).

    Every key of ``config`` (and of the tables nested in it) must be a setting
    of that type: any other raises
    :class:`~cupellation.conformance.UnsupportedConfigError` naming its path
    (``path`` is where ``config`` sits in the vector). An unknown type raises
    :class:`~cupellation.exceptions.ConfigurationError`.
    """
    if not isinstance(type_name, str):
        raise InvalidTypeError("type", type_name, "a scorer type name")
    name, settings = settings_of("scorer", type_name, path)
    config = _table(config, "config")
    renamer = _RENAMERS.get(name)
    if renamer is not None:
        return {"type": name, **renamer(config, path)}
    check_keys(config, settings, path, f"a {name!r} scorer")
    return {"type": name, **config}


def entry_table(raw: Any, path: str) -> dict[str, Any]:
    """The table of one entry of a scorer list (a ``[[config.scorers]]`` table of a
    pipeline or composite vector, or a composite's ``children`` entry), with its
    ``weight`` (default 1.0) beside ``type``.

    An entry's settings sit beside ``type`` and ``weight`` or in a nested
    ``config`` table, not both.
    """
    entry = _table(raw, path)
    if "type" not in entry:
        raise ConfigurationError(f"{path}.type", None, "is required (each entry names its "
                                                       "scorer)")
    if "config" in entry:
        check_keys(entry, ("type", "weight", "config"), path,
                   "an entry whose settings are in its [config] table")
        table = scorer_table(entry["type"], _table(entry["config"], f"{path}.config"),
                             path=f"{path}.config")
    else:
        settings = {key: value for key, value in entry.items() if key not in ("type", "weight")}
        table = scorer_table(entry["type"], settings, path=path)
    return {"type": table.pop("type"), "weight": entry.get("weight", 1.0), **table}


def build_scorer(type_name: Any, config: Mapping[str, Any], *, path: str = "config") -> Scorer:
    """The scorer a vector describes, built by the strategy registry from
    :func:`scorer_table`. Raises
    :class:`~cupellation.exceptions.ConfigurationError` for an unknown type, a
    missing required setting, or an invalid one (naming its path), and
    :class:`~cupellation.conformance.UnsupportedConfigError` for an unknown key.
    """
    return registry.build_scorer(scorer_table(type_name, config, path=path), path=path)


def _epsilon(doc: Mapping[str, Any]) -> float:
    tolerance = doc.get("tolerance", {})
    value = tolerance.get("score_epsilon", DEFAULT_EPSILON) if isinstance(
        tolerance, Mapping
    ) else DEFAULT_EPSILON
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise VectorFailure(f"[tolerance].score_epsilon must be a number >= 0, got {value!r}")
    return float(value)


def run_scoring_vector(doc: Mapping[str, Any]) -> None:
    """Run one parsed scoring vector; raise :class:`VectorFailure` when it does not hold.

    The message names the item, the expected and the actual score for a score
    outside the tolerance, and says so when a construction error was expected
    but the scorer was built (or another error was raised).
    """
    scorer = _vector_scorer(doc)
    if scorer is None:
        return  # the construction error the vector expects
    tables = doc.get("items", [])
    try:
        items = [item_from_vector(_table(table, "items[]")) for table in tables]
    except (CupelError, KeyError) as exc:
        raise VectorFailure(f"invalid [[items]] entry: {type(exc).__name__}: {exc}") from exc
    try:
        scores = [float(score) for score in scorer.score_all(items)]
    except Exception as exc:  # any error while scoring is a failure of this vector
        raise VectorFailure(
            f"{scorer!r} raised while scoring: {type(exc).__name__}: {exc}"
        ) from exc
    if len(scores) != len(items):
        raise VectorFailure(f"{scorer!r} returned {len(scores)} scores for {len(items)} items")
    problems = _score_problems(doc, items, scores)
    if problems:
        raise VectorFailure(f"{scorer!r}: " + "; ".join(problems))


def _vector_scorer(doc: Mapping[str, Any]) -> Scorer | None:
    """The scorer a vector builds, or ``None`` when building it raised the
    ConfigurationError the vector expects; VectorFailure otherwise."""
    test = _table(doc.get("test", {}), "test")
    scorer_type = test.get("scorer")
    if not isinstance(scorer_type, str):
        raise VectorFailure(f"[test].scorer must name a scorer type, got {scorer_type!r}")
    expect_error = bool(test.get("expect_construction_error", False))
    try:
        scorer = build_scorer(scorer_type, doc.get("config", {}))
    except ConfigurationError as exc:
        if expect_error:
            return None
        raise VectorFailure(f"building the {scorer_type!r} scorer failed: {exc}") from exc
    except CupelError as exc:
        kind = "a ConfigurationError was expected, got" if expect_error else "building failed:"
        raise VectorFailure(
            f"{scorer_type!r} scorer: {kind} {type(exc).__name__}: {exc}"
        ) from exc
    if expect_error:
        raise VectorFailure(f"expected a construction error, but the scorer was built: {scorer!r}")
    return scorer


def _score_problems(doc: Mapping[str, Any], items: Sequence[ContextItem],
                    scores: list[float]) -> list[str]:
    """Each ``[[expected]]`` score the actual one misses by more than the tolerance."""
    epsilon = _epsilon(doc)
    # Positions per content, so repeated contents match the expected entries in order.
    positions: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        positions.setdefault(item.content, []).append(index)
    used: dict[str, int] = {}
    problems: list[str] = []
    for raw in doc.get("expected", []):
        expected = _table(raw, "expected[]")
        content = expected.get("content")
        want = expected.get("score_approx", expected.get("score"))
        if isinstance(want, bool) or not isinstance(want, int | float):
            raise VectorFailure(f"expected entry for {content!r} has no numeric score_approx")
        taken = used.get(str(content), 0)
        candidates = positions.get(str(content), [])
        if taken >= len(candidates):
            problems.append(f"expected item {content!r} is not among the items")
            continue
        used[str(content)] = taken + 1
        actual = scores[candidates[taken]]
        if not (math.isfinite(actual) and abs(actual - want) <= epsilon):
            problems.append(
                f"item {content!r}: expected {want!r}, got {actual!r} (epsilon {epsilon:g})"
            )
    return problems
