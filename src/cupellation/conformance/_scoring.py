"""Scoring conformance vectors: building scorers and items from vector tables,
and running ``stage = "scoring"`` vectors.

A scoring vector names its scorer in ``[test].scorer``, configures it in
``[config]``, lists ``[[items]]`` and the ``[[expected]]`` score of each item
(by ``content``) within ``[tolerance].score_epsilon``. A vector with
``expect_construction_error = true`` passes when building the scorer raises
:class:`~cupellation.exceptions.ConfigurationError`. An unknown key in
``[config]`` (at any depth) is refused with
:class:`~cupellation.conformance.UnsupportedConfigError`; unknown keys
elsewhere (``[test]``, ``[[items]]``, ``[[expected]]``) are ignored, as the
format chapter asks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..exceptions import ConfigurationError, CupelError, InvalidTypeError
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
)
from ._errors import UnsupportedConfigError, VectorFailure, check_keys
from ._vectors import item_from_vector, vector_timestamp

__all__ = [
    "SCORER_TYPES",
    "build_scorer",
    "item_from_vector",
    "run_scoring_vector",
    "scorer_from_entry",
]

#: The default ``[tolerance].score_epsilon`` (the specification's 1e-9).
DEFAULT_EPSILON = 1e-9


def _require(config: Mapping[str, Any], key: str, scorer_type: str) -> Any:
    if key not in config:
        raise ConfigurationError(key, None, f"is required for a {scorer_type!r} scorer")
    return config[key]


def _table(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidTypeError(field, value, "a table")
    return value


def _array(value: Any, field: str) -> Sequence[Any]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise InvalidTypeError(field, value, "an array of tables")
    return value


def _pairs(value: Any, field: str, key_name: str, path: str) -> dict[str, Any]:
    """A weight map given as a table ``{name = weight}`` or as an array of
    tables ``[{<key_name> = name, weight = w}]`` (the vectors' form)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        pairs: dict[str, Any] = {}
        for index, raw in enumerate(value):
            entry = _table(raw, f"{field}[{index}]")
            check_keys(entry, (key_name, "weight"), f"{path}[{index}]", f"a {field} entry")
            pairs[_require(entry, key_name, field)] = _require(entry, "weight", field)
        return pairs
    raise InvalidTypeError(field, value, "a table or an array of tables")


def _seconds(config: Mapping[str, Any], key: str) -> timedelta:
    value = _require(config, key, "decay curve")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTypeError(key, value, "a number of seconds")
    if not math.isfinite(value) or abs(value) > 1e15:
        raise ConfigurationError(key, value, "must be a finite number of seconds")
    return timedelta(seconds=value)


#: Each curve type's keys besides ``type``.
_CURVE_KEYS: dict[str, tuple[str, ...]] = {
    "exponential": ("half_life_secs",),
    "window": ("max_age_secs",),
    "step": ("windows",),
}


def _curve(config: Mapping[str, Any], path: str) -> DecayCurve:
    curve_type = str(config.get("type", "")).lower()
    if curve_type not in _CURVE_KEYS:
        raise ConfigurationError(
            "curve.type", config.get("type"), "must be 'exponential', 'step' or 'window'"
        )
    check_keys(config, ("type", *_CURVE_KEYS[curve_type]), path, f"a {curve_type!r} curve")
    if curve_type == "exponential":
        return ExponentialCurve(half_life=_seconds(config, "half_life_secs"))
    if curve_type == "window":
        return WindowCurve(max_age=_seconds(config, "max_age_secs"))
    windows = []
    for index, raw in enumerate(_array(config.get("windows", []), "windows")):
        window = _table(raw, "windows[]")
        check_keys(window, ("max_age_secs", "score"), f"{path}.windows[{index}]", "a step window")
        windows.append((_seconds(window, "max_age_secs"), _require(window, "score", "step window")))
    return StepCurve(windows=windows)


def _fixed_clock(moment: datetime) -> Callable[[], datetime]:
    def clock() -> datetime:
        return moment

    clock.__qualname__ = f"fixed_clock({moment.isoformat()})"
    return clock


def _build_kind(config: Mapping[str, Any], path: str) -> Scorer:
    if config.get("use_default_weights", False):
        if "weights" in config:
            raise UnsupportedConfigError(
                f"{path}.weights", "a 'kind' scorer", _KEYS["kind"],
                "cannot be honoured together with use_default_weights = true",
            )
        return KindScorer()
    if "weights" in config:
        return KindScorer(_pairs(config["weights"], "weights", "kind", f"{path}.weights"))
    return KindScorer()


def _build_tag(config: Mapping[str, Any], path: str) -> Scorer:
    weights = _pairs(config.get("tag_weights", {}), "tag_weights", "tag", f"{path}.tag_weights")
    return TagScorer(weights, case_sensitive=bool(config.get("case_sensitive", False)))


def scorer_from_entry(raw: Any, path: str) -> tuple[Scorer, float]:
    """The scorer and weight of one entry of a scorer list: a ``[[config.scorers]]``
    table of a pipeline or composite vector, or a composite's ``children`` entry.

    An entry names its ``type`` and ``weight`` (default 1.0); its scorer's
    settings sit beside them (``children`` for a nested composite,
    ``tag_weights`` for a tag scorer ...) or in a nested ``config`` table, not both.
    """
    entry = _table(raw, path)
    scorer_type = _require(entry, "type", "composite child")
    if "config" in entry:
        check_keys(entry, ("type", "weight", "config"), path,
                   "an entry whose settings are in its [config] table")
        config, config_path = _table(entry["config"], f"{path}.config"), f"{path}.config"
    else:
        config = {key: value for key, value in entry.items() if key not in ("type", "weight")}
        config_path = path
    return build_scorer(scorer_type, config, path=config_path), entry.get("weight", 1.0)


def _build_composite(config: Mapping[str, Any], path: str) -> Scorer:
    # A top-level composite lists its children under "scorers"; a composite
    # nested in another one under "children" (the vectors' spelling).
    if "scorers" in config and "children" in config:
        raise UnsupportedConfigError(
            f"{path}.children", "a 'composite' scorer", _KEYS["composite"],
            "cannot be honoured together with 'scorers' (name the children once)",
        )
    key = "children" if "children" in config else "scorers"
    entries = _array(config.get(key, []), key)
    children = [scorer_from_entry(raw, f"{path}.{key}[{index}]")
                for index, raw in enumerate(entries)]
    return CompositeScorer(children)


def _build_scaled(config: Mapping[str, Any], path: str) -> Scorer:
    inner = _require(config, "inner_scorer", "scaled")
    if isinstance(inner, Mapping):
        if "inner_config" in config:
            raise UnsupportedConfigError(
                f"{path}.inner_config", "a 'scaled' scorer", _KEYS["scaled"],
                "cannot be honoured when inner_scorer is a table (put the settings there)",
            )
        scorer, _weight = scorer_from_entry(inner, f"{path}.inner_scorer")
        return ScaledScorer(scorer)
    inner_config = _table(config.get("inner_config", {}), "inner_config")
    return ScaledScorer(build_scorer(inner, inner_config, path=f"{path}.inner_config"))


def _build_decay(config: Mapping[str, Any], path: str) -> Scorer:
    curve = _curve(_table(_require(config, "curve", "decay"), "curve"), f"{path}.curve")
    # DecayScorer has no default clock (D042): a vector must fix its instant.
    moment = vector_timestamp(_require(config, "reference_time", "decay"), "reference_time")
    options: dict[str, Any] = {}
    if "null_timestamp_score" in config:
        options["null_timestamp_score"] = config["null_timestamp_score"]
    return DecayScorer(curve, clock=_fixed_clock(moment), **options)


def _build_metadata_trust(config: Mapping[str, Any], path: str) -> Scorer:
    if "default_score" in config:
        return MetadataTrustScorer(default_score=config["default_score"])
    return MetadataTrustScorer()


def _build_metadata_key(config: Mapping[str, Any], path: str) -> Scorer:
    return MetadataKeyScorer(
        key=_require(config, "key", "metadata_key"),
        value=_require(config, "value", "metadata_key"),
        boost=_require(config, "boost", "metadata_key"),
    )


_BUILDERS: dict[str, Callable[[Mapping[str, Any], str], Scorer]] = {
    "recency": lambda _config, _path: RecencyScorer(),
    "priority": lambda _config, _path: PriorityScorer(),
    "kind": _build_kind,
    "tag": _build_tag,
    "frequency": lambda _config, _path: FrequencyScorer(),
    "reflexive": lambda _config, _path: ReflexiveScorer(),
    "composite": _build_composite,
    "scaled": _build_scaled,
    "decay": _build_decay,
    "metadata_trust": _build_metadata_trust,
    "metadata_key": _build_metadata_key,
}

#: The settings each scorer type takes; any other key is refused.
_KEYS: dict[str, tuple[str, ...]] = {
    "recency": (),
    "priority": (),
    "kind": ("use_default_weights", "weights"),
    "tag": ("tag_weights", "case_sensitive"),
    "frequency": (),
    "reflexive": (),
    "composite": ("scorers", "children"),
    "scaled": ("inner_scorer", "inner_config"),
    "decay": ("curve", "reference_time", "null_timestamp_score"),
    "metadata_trust": ("default_score",),
    "metadata_key": ("key", "value", "boost"),
}

#: The scorer type names vectors use.
SCORER_TYPES: tuple[str, ...] = tuple(_BUILDERS)


def build_scorer(type_name: str, config: Mapping[str, Any], *, path: str = "config") -> Scorer:
    """The scorer a vector describes: its type name (``"recency"``,
    ``"metadata_key"`` ...) and its ``[config]`` table.

    Every key of ``config`` (and of the tables nested in it) must be a setting
    of that type: any other raises
    :class:`~cupellation.conformance.UnsupportedConfigError` naming its path
    (``path`` is where ``config`` sits in the vector) rather than being
    dropped. Raises :class:`~cupellation.exceptions.ConfigurationError` for
    an unknown type, a missing required setting, or an invalid one.
    """
    if not isinstance(type_name, str):
        raise InvalidTypeError("type", type_name, "a scorer type name")
    scorer_type = type_name.lower()
    builder = _BUILDERS.get(scorer_type)
    if builder is None:
        raise ConfigurationError(
            "type", type_name, f"is not a scorer type (expected one of {', '.join(SCORER_TYPES)})"
        )
    table = _table(config, "config")
    check_keys(table, _KEYS[scorer_type], path, f"a {scorer_type!r} scorer")
    return builder(table, path)


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
    test = _table(doc.get("test", {}), "test")
    scorer_type = test.get("scorer")
    if not isinstance(scorer_type, str):
        raise VectorFailure(f"[test].scorer must name a scorer type, got {scorer_type!r}")
    config = doc.get("config", {})
    expect_error = bool(test.get("expect_construction_error", False))

    try:
        scorer = build_scorer(scorer_type, config)
    except ConfigurationError as exc:
        if expect_error:
            return
        raise VectorFailure(f"building the {scorer_type!r} scorer failed: {exc}") from exc
    except CupelError as exc:
        kind = "a ConfigurationError was expected, got" if expect_error else "building failed:"
        raise VectorFailure(
            f"{scorer_type!r} scorer: {kind} {type(exc).__name__}: {exc}"
        ) from exc
    if expect_error:
        raise VectorFailure(f"expected a construction error, but the scorer was built: {scorer!r}")

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
    if problems:
        raise VectorFailure(f"{scorer!r}: " + "; ".join(problems))
