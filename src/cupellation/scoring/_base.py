"""The scorer interface (``spec/src/scorers.md``): the :class:`Scorer` protocol,
the :class:`ScorerBase` abstract class and :class:`FunctionScorer`; and what the
built-in scorers share: immutability, comparison by value, and their table form
(``type_name``, ``settings``, ``to_dict`` / ``from_dict``) in :data:`SCORERS`."""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._model import ContextItem
from .._tables import StrategyTable
from ..exceptions import ConfigurationError, InvalidTypeError, InvalidValueError, ScorerError

__all__ = [
    "SCORERS",
    "BuiltinScorer",
    "Clock",
    "FunctionScorer",
    "Immutable",
    "Scorer",
    "ScorerBase",
    "ScorerFunction",
    "ScorerType",
    "build_scorer",
    "check_scorer",
    "check_unit_interval",
    "check_weight",
    "score_array",
    "scorer_label",
]

#: The specification's per-item scorer signature: ``Score(item, allItems) -> float64``.
ScorerFunction = Callable[[ContextItem, Sequence[ContextItem]], float]

#: A zero-argument callable returning a timezone-aware datetime (a decay scorer's
#: time provider).
Clock = Callable[[], datetime]


@runtime_checkable
class Scorer(Protocol):
    """Anything that scores a whole candidate list at once.

    ``score_all(items)`` returns one score per item, in input order, each equal
    to the specification's ``Score(item, allItems)`` with ``allItems = items``.
    A list of floats or a 1-D ``numpy.float64`` array are both fine. Scorers
    must be pure: the same items give the same scores, and nothing is mutated.
    """

    def score_all(self, items: Sequence[ContextItem], /) -> Sequence[float]:
        """The score of every item in ``items``, in input order."""
        ...


class ScorerBase(ABC):
    """Abstract base of the built-in scorers; also offers the per-item form.

    Subclasses implement :meth:`score_all`; :meth:`score` is the
    specification's ``Score(item, allItems)``.
    """

    __slots__ = ()

    #: True for the specification's absolute scorers (KindScorer, TagScorer,
    #: ReflexiveScorer, MetadataTrustScorer, DecayScorer, MetadataKeyScorer),
    #: whose score of an item depends on that item alone: :meth:`score` then
    #: ignores ``all_items`` entirely, as ``spec/src/scorers.md`` says.
    absolute: ClassVar[bool] = False

    @abstractmethod
    def score_all(self, items: Sequence[ContextItem], /) -> Sequence[float]:
        """The score of every item in ``items``, in input order."""

    def score(self, item: ContextItem, all_items: Sequence[ContextItem]) -> float:
        """``Score(item, allItems)``: the score of ``item`` among ``all_items``.

        An absolute scorer ignores ``all_items`` (it may be empty, or not hold
        ``item``). A relative scorer finds ``item`` in ``all_items`` by
        identity and raises :class:`~cupellation.exceptions.InvalidValueError`
        when it is not there.
        """
        if self.absolute:
            return float(self.score_all((item,))[0])
        for index, candidate in enumerate(all_items):
            if candidate is item:
                return float(self.score_all(all_items)[index])
        raise InvalidValueError("item", item, "is not in all_items (compared by identity)")


class ScorerType(Protocol):
    """What a built-in scorer class offers the registry (the class object itself)."""

    type_name: str
    settings: tuple[str, ...]

    def from_dict(self, data: Mapping[str, Any], /, *, path: str = ...,
                  clock: Clock | None = ...) -> Scorer:
        """The scorer a table describes."""
        ...


#: The built-in scorers by ``type_name``; each registers itself in its own module.
SCORERS: StrategyTable[ScorerType] = StrategyTable("scorer", suffixes=("scorer", "spec"))


def build_scorer(data: Mapping[str, Any], *, path: str = "scorer",
                 clock: Clock | None = None) -> Scorer:
    """The built-in scorer a table describes, by its ``type`` (see :data:`SCORERS`).

    ``clock`` is the time provider of decay scorers without a ``reference_time``
    (default: the wall clock); composite and scaled scorers pass it on.
    """
    return SCORERS.lookup(data, path).from_dict(data, path=path, clock=clock)


class Immutable:
    """Mixin making a slotted built-in immutable once ``__init__`` has set it up, and
    comparing it by value.

    ``__init__`` assigns through ``object.__setattr__``; ``__setstate__`` does
    the same so that pickling and ``copy.deepcopy`` still work. Two instances
    of the same class are equal when their :meth:`_value` is: the settings that
    decide their scores.
    """

    __slots__ = ()

    def _value(self) -> tuple[Any, ...]:
        """The (hashable) settings this instance is equal by; none by default."""
        return ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Immutable)
        return self._value() == other._value()

    def __hash__(self) -> int:
        return hash((type(self), self._value()))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __setstate__(self, state: tuple[Any, dict[str, Any]] | None) -> None:
        if state is None:
            return
        _, slots = state
        for name, value in (slots or {}).items():
            object.__setattr__(self, name, value)


class BuiltinScorer(Immutable, ScorerBase):
    """Base of the built-in scorers: immutable, compared by value, and written as a
    table (a policy file's ``scorer``, ``run_started``'s record of the pipeline).

    A subclass declares ``type_name`` and ``settings`` and registers with
    ``@SCORERS.register``; one with settings overrides :meth:`to_dict` and
    :meth:`from_dict`.
    """

    __slots__ = ()

    #: The ``type`` of this scorer's table.
    type_name: ClassVar[str]
    #: The other keys this scorer's table may hold.
    settings: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """This scorer's table: ``{"type": ...}`` plus its settings."""
        return {"type": self.type_name}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "scorer",
                  clock: Clock | None = None) -> Self:
        """The scorer a table describes (the inverse of :meth:`to_dict`).

        Unknown keys are refused with a suggestion; every error names its
        path inside the table (``path`` is where the table sits).
        """
        SCORERS.read(cls, data, path)
        return cls()


def check_weight(field: str, value: Any, *, positive: bool = False) -> float:
    """Validate a configured weight: a finite number, ``>= 0`` (``> 0`` if ``positive``).

    Raises :class:`InvalidTypeError` for a non-number (``bool`` included) and
    :class:`ConfigurationError` naming ``field`` and ``value`` otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(field, value, "a finite number")
    try:
        result = float(value)
    except OverflowError:  # an int too large for a double
        raise ConfigurationError(field, value, "must be finite") from None
    if not math.isfinite(result):
        raise ConfigurationError(field, value, "must be finite")
    if positive and result <= 0.0:
        raise ConfigurationError(field, value, "must be > 0")
    if result < 0.0:
        raise ConfigurationError(field, value, "must be >= 0")
    return result


def check_unit_interval(field: str, value: Any) -> float:
    """Validate a finite number in ``[0.0, 1.0]``; raise naming ``field`` and ``value``."""
    result = check_weight(field, value)
    if result > 1.0:
        raise ConfigurationError(field, value, "must be within [0.0, 1.0]")
    return result


def score_array(scorer: str, raw: object, count: int) -> npt.NDArray[np.float64]:
    """What a scorer's ``score_all`` returned, as a float64 array of ``count`` scores.

    Accepts a sequence (or iterable) of real numbers or a numeric numpy array.
    Raises :class:`~cupellation.exceptions.ScorerError` naming ``scorer`` for
    anything else: ``None``, text (``"0.5"`` is not a score, even though numpy
    would convert it), bools, a value beyond float64, or the wrong number of
    scores; when one entry is wrong, ``index`` is its position. NaN and
    infinities are left to the caller, which knows the candidates' indices.
    """
    if isinstance(raw, np.ndarray):
        values: Any = raw
    elif (raw is None or isinstance(raw, str | bytes | Mapping)
          or not isinstance(raw, Iterable)):
        raise ScorerError(scorer, None, f"returned {type(raw).__name__}, not a sequence of "
                                        "scores")
    else:
        values = raw if isinstance(raw, list | tuple) else list(raw)
    try:
        # No dtype here: numpy's inference, done in C, tells numbers from the rest
        # (with dtype=float64 it would convert the text "0.5" without a word).
        array = np.asarray(values)
        if array.dtype.kind not in "fiu":
            for position, value in enumerate(values):
                if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
                    raise ScorerError(scorer, position,
                                      f"returned {value!r}, which is not a real number")
            array = np.asarray(values, dtype=np.float64)  # e.g. Fractions, or huge ints
        scores: npt.NDArray[np.float64] = array.astype(np.float64, copy=False)
    except OverflowError as exc:  # an int beyond float64's range
        raise ScorerError(scorer, None,
                          f"returned a number outside float64's range ({exc})") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ScorerError):
            raise
        raise ScorerError(scorer, None, f"returned non-numeric scores ({exc})") from None
    if scores.shape != (count,):
        raise ScorerError(scorer, None,
                          f"returned {scores.size} scores of shape {scores.shape} for "
                          f"{count} items")
    return scores


def check_scorer(field: str, value: Any) -> Scorer:
    """Validate that ``value`` implements :class:`Scorer` (an instance, not a class)."""
    if isinstance(value, type):
        raise InvalidTypeError(field, value, "a Scorer instance, not a class (add '()')")
    if not isinstance(value, Scorer):
        raise InvalidTypeError(
            field, value, "a Scorer (an object with score_all; wrap functions in FunctionScorer)"
        )
    return value


def scorer_label(scorer: object) -> str:
    """A short name for ``scorer`` in error messages (never a deep repr)."""
    return type(scorer).__name__


class FunctionScorer(Immutable, ScorerBase):
    """A scorer made from a plain function ``fn(item, all_items) -> float``.

    ``fn`` has the specification's per-item signature; :meth:`score_all` calls
    it once per item with the whole list, so a relative ``fn`` costs O(N) per
    call and O(N²) per pass. ``name`` labels the scorer in ``repr`` and error
    messages (default: the function's qualified name).
    """

    __slots__ = ("fn", "name")
    fn: ScorerFunction
    name: str

    def __init__(self, fn: ScorerFunction, name: str | None = None) -> None:
        if not callable(fn):
            raise InvalidTypeError("fn", fn, "a callable fn(item, all_items) -> float")
        if name is None:
            name = getattr(fn, "__qualname__", None) or repr(fn)
        elif not isinstance(name, str):
            raise InvalidTypeError("name", name, "a string or None")
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "name", name)

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """``fn(item, items)`` for every item, in order.

        Raises :class:`~cupellation.exceptions.ScorerError` when ``fn`` returns
        something that is not a real number.
        """
        fn = self.fn
        scores: list[float] = []
        for index, item in enumerate(items):
            value = fn(item, items)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ScorerError(
                    self.name, index, f"returned {value!r}, which is not a real number"
                )
            try:
                scores.append(float(value))
            except OverflowError:
                raise ScorerError(self.name, index, f"returned {value!r}, outside float64's "
                                                    "range") from None
        return scores

    def score(self, item: ContextItem, all_items: Sequence[ContextItem]) -> float:
        """``fn(item, all_items)``, once ``item`` is found (by identity) in ``all_items``."""
        if not any(candidate is item for candidate in all_items):
            raise InvalidValueError("item", item, "is not in all_items (compared by identity)")
        value = self.fn(item, all_items)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ScorerError(self.name, None, f"returned {value!r}, which is not a real number")
        return float(value)

    def _value(self) -> tuple[Any, ...]:
        return (self.fn, self.name)

    def __repr__(self) -> str:
        return f"FunctionScorer({self.name})"
