"""CompositeScorer and ScaledScorer (``spec/src/scorers/composite.md``,
``spec/src/scorers/scaled.md``): scorers built from other scorers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from reprlib import recursive_repr
from typing import Any, Self, cast

import numpy as np
import numpy.typing as npt

from .._model import ContextItem
from .._tables import array_value, built, check_keys, child, index, table
from ..exceptions import ConfigurationError, InvalidTypeError
from ._base import (
    SCORERS,
    BuiltinScorer,
    Clock,
    Scorer,
    build_scorer,
    check_scorer,
    check_weight,
    score_array,
    scorer_label,
)
from ._kind import KindScorer
from ._rank import PRIORITY_KEY, TIMESTAMP_KEY, PriorityScorer, RecencyScorer, rank_scores_array

__all__ = ["CompositeScorer", "ScaledScorer"]


def _scores_array(scorer: Scorer, items: Sequence[ContextItem]) -> npt.NDArray[np.float64]:
    """``scorer.score_all(items)`` as a float64 array, checked (see :func:`score_array`)."""
    return score_array(scorer_label(scorer), scorer.score_all(items), len(items))


#: Up to this many items, a composite sums its children's scores in plain Python while
#: every child returns a list of floats: four numpy calls per child (array, multiply,
#: add, tolist) cost more than the sum itself below about 150 items.
#: 128 by a joint measurement in whole untraced runs (all four SMALL_ thresholds
#: moved together, 2026-11-28): plain Python took 0.79x numpy's time at 65 items,
#: 0.92x at 100, the same at 150 and 1.2x at 200.
SMALL_COMPOSITE = 128


#: The built-ins whose ``score_all`` returns a list of ``len(items)`` finite Python
#: floats in ``[0, 1]``, by exact type (a subclass may override it), with that
#: ``score_all``, compared by identity (a class patched at runtime with another is not
#: trusted): the rank scorers always, a KindScorer while its weights are at most 1.0
#: (``_unit_weights``; the defaults are).
_OWN_SCORE_ALL: dict[type, Any] = {
    RecencyScorer: RecencyScorer.score_all,
    PriorityScorer: PriorityScorer.score_all,
    KindScorer: KindScorer.score_all,
}
#: The rank scorers' keys, for their array form.
_RANK_KEYS: dict[type, Any] = {RecencyScorer: TIMESTAMP_KEY, PriorityScorer: PRIORITY_KEY}


def _float_list_scorer(scorer: object) -> bool:
    """Whether ``scorer`` is exactly one of ``_OWN_SCORE_ALL``'s types, with unit
    weights if a KindScorer (its class's ``score_all`` is not looked at here)."""
    kind = type(scorer)
    return kind in _OWN_SCORE_ALL and (
        kind is not KindScorer or cast("KindScorer", scorer)._unit_weights)


def _trusted(scorer: object) -> bool:
    """:func:`_float_list_scorer`, its class's ``score_all`` still its own."""
    kind = type(scorer)
    return _float_list_scorer(scorer) and getattr(kind, "score_all", None) is \
        _OWN_SCORE_ALL[kind]


def finite_float_lists(scorer: object) -> bool:
    """Whether ``scorer.score_all(items)`` always returns a list of ``len(items)``
    finite Python floats: a recency or priority scorer (ranks in ``[0, 1]``), a kind
    scorer whose weights are at most 1.0, or a composite of them (their weights sum
    to 1), each class with its own built-in ``score_all`` (compared by identity, as
    :func:`builtin_scores_array` trusts them: a class patched at runtime is checked
    like any scorer). The pipeline then has nothing of a small run's scores to
    check."""
    if type(scorer) is not CompositeScorer:
        return _trusted(scorer)
    if not scorer._float_children or CompositeScorer.score_all is not _COMPOSITE_SCORE_ALL:
        return False
    # Inline, not all() over _trusted: this runs on every small run. For the
    # benchmarks' composite the identity checks cost 0.25-0.45 us a run over trusting
    # by type alone; all() over a generator cost 0.7-1.0 us. (_float_children has
    # settled the children's types and weights.)
    for inner in scorer.scorers:
        kind = type(inner)
        if getattr(kind, "score_all", None) is not _OWN_SCORE_ALL[kind]:
            return False
    return True


def builtin_scores_array(scorer: object, items: Sequence[ContextItem]
                         ) -> npt.NDArray[np.float64] | None:
    """``np.array(scorer.score_all(items))`` for a recency or priority scorer, a kind
    scorer whose weights are at most 1.0, or a composite of them (with their own,
    unpatched ``score_all``): the same floats, finite, made as an array from the
    start; None for any other scorer.

    Why: a large run's scores end as an array (Sort and Slice work on arrays), so each
    child's list of floats and the conversions between lists and arrays were work for
    nothing. Without them the reference pipeline's untraced run takes 0.7-0.9x of its
    time from 200 to 100,000 items and 0.86x at a million, whose peak RSS drops by
    about 44 MiB (``benchmarks/ab_score_arrays.py``, ``bench_pipeline.py``). The sums
    are the composite's own: ``result += scores * weight``, child by child in order.
    Which scorers: exactly those :func:`finite_float_lists` trusts (one rule for both
    sizes), settled before any child's scores are made."""
    if not finite_float_lists(scorer):
        return None
    if type(scorer) is not CompositeScorer:
        return _leaf_scores_array(scorer, items)
    # A trusted composite's children are trusted leaves (_float_children).
    result = np.zeros(len(items), dtype=np.float64)
    for inner, weight in zip(scorer.scorers, scorer.weights, strict=True):
        result += _leaf_scores_array(inner, items) * weight
    return result


def _leaf_scores_array(scorer: object, items: Sequence[ContextItem]
                       ) -> npt.NDArray[np.float64]:
    """A trusted rank or kind scorer's scores as a float64 array."""
    key = _RANK_KEYS.get(type(scorer))
    if key is None:  # a KindScorer: a lookup per item, its list is as cheap
        return np.array(cast("KindScorer", scorer).score_all(items), dtype=np.float64)
    return rank_scores_array(items, key)


def _plain_scores(raw: object, count: int) -> bool:
    """Whether a child's ``raw`` scores are a list of ``count`` floats (nothing for
    ``score_array`` to convert or refuse)."""
    return type(raw) is list and len(raw) == count and all(
        type(value) is float for value in raw)


def _children_of(node: object) -> Sequence[object]:
    if isinstance(node, CompositeScorer):
        return node.scorers
    if isinstance(node, ScaledScorer):
        return (node.inner,)
    return ()


def _detect_cycles(roots: Sequence[object], field: str) -> None:
    """DETECT-CYCLES: a depth-first walk by identity through composite and
    scaled scorers; raises when a scorer is reached again from inside itself.

    A scorer shared by two branches (a diamond) is not a cycle.
    """
    visited: set[int] = set()
    in_path: set[int] = set()

    def visit(node: object) -> None:
        key = id(node)
        if key in visited:
            if key in in_path:
                raise ConfigurationError(
                    field, node, "cycle detected: scorer appears in its own dependency graph"
                )
            return
        visited.add(key)
        in_path.add(key)
        for inner in _children_of(node):
            visit(inner)
        in_path.discard(key)

    for root in roots:
        visit(root)


@SCORERS.register
class CompositeScorer(BuiltinScorer):
    """The weighted average of child scorers' scores.

    ``children`` is a non-empty sequence of ``(scorer, weight)`` pairs; each
    weight must be finite and strictly positive. Weights are relative: they are
    divided by their sum, so ``[(a, 3.0), (b, 1.0)]`` means 0.75·a + 0.25·b.
    Children are scored in order and summed in order. A graph of composite and
    scaled scorers that contains itself is rejected (by identity).

    Raises :class:`~cupellation.exceptions.ConfigurationError` for an empty
    list, a zero, negative or non-finite weight, or a cycle, and
    :class:`~cupellation.exceptions.InvalidTypeError` for an entry that is not
    a ``(Scorer, number)`` pair.

    Table: ``{"type": "composite", "children": [...]}``, each child the table of
    its scorer with its ``weight`` beside ``type``.
    """

    __slots__ = ("_float_children", "children", "scorers", "weights")
    type_name = "composite"
    settings = ("children",)
    children: tuple[tuple[Scorer, float], ...]
    scorers: tuple[Scorer, ...]
    weights: tuple[float, ...]
    #: Whether every child is a built-in whose ``score_all`` always returns a list of
    #: ``len(items)`` finite Python floats in ``[0, 1]`` (``_float_list_scorer``):
    #: then a small run's sum needs no check of what the children return.
    _float_children: bool

    def __init__(self, children: Sequence[tuple[Scorer, float]]) -> None:
        if isinstance(children, str | bytes) or not isinstance(children, Sequence):
            raise InvalidTypeError("children", children, "a sequence of (scorer, weight) pairs")
        if len(children) == 0:
            raise ConfigurationError(
                "children", children, "must contain at least one (scorer, weight) entry"
            )
        scorers: list[Scorer] = []
        raw_weights: list[float] = []
        total = 0.0
        for position, entry in enumerate(children):
            if not isinstance(entry, tuple | list) or len(entry) != 2:
                raise InvalidTypeError(f"children[{position}]", entry, "a (scorer, weight) pair")
            scorer, weight = entry
            scorers.append(check_scorer(f"children[{position}].scorer", scorer))
            raw_weights.append(check_weight(f"children[{position}].weight", weight,
                                            positive=True))
            total += raw_weights[-1]
        if not math.isfinite(total):
            raise ConfigurationError("children", raw_weights, "weights sum to infinity")
        _detect_cycles(scorers, "children")
        object.__setattr__(self, "children", tuple(zip(scorers, raw_weights, strict=True)))
        object.__setattr__(self, "scorers", tuple(scorers))
        object.__setattr__(self, "weights", tuple(weight / total for weight in raw_weights))
        self._set_float_children()

    def _set_float_children(self) -> None:
        object.__setattr__(self, "_float_children",
                           all(map(_float_list_scorer, self.scorers)))

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        # The derived flag is left out, so a pickle reads the same in versions with
        # and without it.
        return None, {"children": self.children, "scorers": self.scorers,
                      "weights": self.weights}

    def __setstate__(self, state: tuple[Any, dict[str, Any]] | None) -> None:
        super().__setstate__(state)
        self._set_float_children()  # derived: a pickle does not hold it

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's weighted average, summed child by child in order."""
        count = len(items)
        # Small runs sum in plain floats while the children's scores allow it: each
        # step is ``total + score * weight`` in IEEE double arithmetic, rounded exactly
        # as numpy's ``result += array * weight`` rounds it, so both give the same floats.
        trusted = self._float_children
        if count <= SMALL_COMPOSITE and trusted and len(self.scorers) == 2:
            return self._pair_sum(items)
        plain: list[float] | None = [0.0] * count if count <= SMALL_COMPOSITE else None
        result = None
        for scorer, weight in zip(self.scorers, self.weights, strict=True):
            raw = scorer.score_all(items)
            if plain is not None:
                # Such children (_float_list_scorer) always return lists of floats.
                if trusted or _plain_scores(raw, count):
                    plain = [total + value * weight
                             for total, value in zip(plain, raw, strict=True)]
                    continue
                result, plain = np.array(plain, dtype=np.float64), None
            if result is None:
                result = np.zeros(count, dtype=np.float64)
            # Element-wise, this is exactly result <- result + score * weight.
            result += score_array(scorer_label(scorer), raw, count) * weight
        if plain is not None:
            return plain
        assert result is not None
        scores: list[float] = result.tolist()
        return scores

    def _pair_sum(self, items: Sequence[ContextItem]) -> list[float]:
        """``score_all`` of a small run of two children that both return lists of
        floats: the same sums, ``(0.0 + s1 * w1) + s2 * w2``, in one comprehension.

        Why: two children is the usual composite (the benchmarks' recency and
        priority), and at 5 items the general loop's intermediate list and zips cost
        about a quarter of the composite's own time (measured: 9.7 against 13.1 µs
        for the whole composite, 15.0 with the checks)."""
        (first_scorer, second_scorer), (first, second) = self.scorers, self.weights
        return [0.0 + x * first + y * second for x, y in
                zip(first_scorer.score_all(items), second_scorer.score_all(items), strict=True)]

    def to_dict(self) -> dict[str, Any]:
        """``type`` and ``children``: each child's table with its ``weight`` beside
        ``type`` (a custom child is recorded as ``{"type": "custom", "repr": ...}``)."""
        children = []
        for scorer, weight in self.children:
            described = SCORERS.describe(scorer)
            children.append({"type": described.pop("type"), "weight": weight, **described})
        return {"type": self.type_name, "children": children}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "scorer",
                  clock: Clock | None = None) -> Self:
        """The composite a table describes; each child needs its ``weight``."""
        data = SCORERS.read(cls, data, path, required=("children",))
        children_path = child(path, "children")
        children: list[tuple[Scorer, Any]] = []
        for position, raw in enumerate(array_value(data["children"], children_path)):
            where = index(children_path, position)
            entry = table(raw, where)
            kind = SCORERS.lookup(entry, where)
            check_keys(entry, where, ("type", "weight", *kind.settings))
            if "weight" not in entry:
                raise ConfigurationError(child(where, "weight"), None,
                                         "is required (each child has a weight)")
            settings = {key: value for key, value in entry.items() if key != "weight"}
            children.append((kind.from_dict(settings, path=where, clock=clock),
                             entry["weight"]))
        return built(path, lambda: cls(children))

    def _value(self) -> tuple[Any, ...]:
        return (self.children,)

    @recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"({scorer!r}, {weight!r})" for scorer, weight in self.children)
        return f"CompositeScorer(children=[{shown}])"


@SCORERS.register
class ScaledScorer(BuiltinScorer):
    """Min-max normalisation of an inner scorer: ``(raw - min) / (max - min)``
    over the inner scores of all items.

    An empty list, or inner scores that are all equal, give 0.5 for every
    item. NaN inner scores are skipped when finding min and max, as the
    specification's ``<`` / ``>`` comparisons skip them. The inner scorer runs
    once per pass (the specification's N² calls give the same result).

    Table: ``{"type": "scaled", "inner": {...}}``, the inner scorer's table.
    """

    __slots__ = ("inner",)
    type_name = "scaled"
    settings = ("inner",)
    inner: Scorer

    def __init__(self, inner: Scorer) -> None:
        check_scorer("inner", inner)
        _detect_cycles([inner], "inner")
        object.__setattr__(self, "inner", inner)

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's scaled score."""
        if not items:
            return []
        raw: list[float] = _scores_array(self.inner, items).tolist()
        low = math.inf
        high = -math.inf
        # The specification's single pass, so ties between 0.0 and -0.0 and
        # NaN handling come out the same.
        for value in raw:
            if value < low:  # noqa: PLR1730 - a plain compare is faster than min()
                low = value
            if value > high:  # noqa: PLR1730
                high = value
        if high == low:
            return [0.5] * len(raw)
        span = high - low
        return [(value - low) / span for value in raw]

    def to_dict(self) -> dict[str, Any]:
        """``type`` and the ``inner`` scorer's table."""
        return {"type": self.type_name, "inner": SCORERS.describe(self.inner)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "scorer",
                  clock: Clock | None = None) -> Self:
        """The scaled scorer a table describes."""
        data = SCORERS.read(cls, data, path, required=("inner",))
        inner = build_scorer(data["inner"], path=child(path, "inner"), clock=clock)
        return cls(inner)

    def _value(self) -> tuple[Any, ...]:
        return (self.inner,)

    @recursive_repr()
    def __repr__(self) -> str:
        return f"ScaledScorer(inner={self.inner!r})"


_COMPOSITE_SCORE_ALL = CompositeScorer.score_all
