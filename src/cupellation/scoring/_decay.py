"""DecayScorer (``spec/src/scorers/decay.md``): a score from an item's age,
measured against an injected clock, through a decay curve."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .._model import ContextItem
from ..exceptions import ConfigurationError, InvalidTypeError
from ._base import ScorerBase, _Immutable, check_unit_interval

__all__ = [
    "DecayCurve",
    "DecayScorer",
    "ExponentialCurve",
    "StepCurve",
    "WindowCurve",
    "utc_now",
]

_ZERO = timedelta(0)


def utc_now() -> datetime:
    """The current time in UTC: the wall clock to pass as
    ``DecayScorer(..., clock=utc_now)`` (there is no default, D042)."""
    return datetime.now(UTC)


def _check_duration(field: str, value: Any) -> timedelta:
    if not isinstance(value, timedelta):
        raise InvalidTypeError(field, value, "a datetime.timedelta")
    if value <= _ZERO:
        raise ConfigurationError(field, value, "must be greater than zero")
    return value


class DecayCurve(ABC):
    """A decay curve: a map from an age (a non-negative duration) to a score in [0.0, 1.0]."""

    __slots__ = ()

    @abstractmethod
    def apply(self, age: timedelta) -> float:
        """The score of an item of this ``age`` (``age >= 0``)."""


@dataclass(frozen=True, slots=True)
class ExponentialCurve(DecayCurve):
    """``2 ** (-age / half_life)``: 1.0 at age zero, 0.5 at one half-life, never negative.

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``half_life`` unless it is greater than zero.
    """

    half_life: timedelta

    def __post_init__(self) -> None:
        _check_duration("half_life", self.half_life)

    def apply(self, age: timedelta) -> float:
        """``2 ** (-seconds(age) / seconds(half_life))``."""
        exponent: float = -age.total_seconds() / self.half_life.total_seconds()
        return math.pow(2.0, exponent)


@dataclass(frozen=True, slots=True)
class StepCurve(DecayCurve):
    """Piecewise constant: the score of the first window whose ``max_age`` is
    strictly greater than the age, else the last window's score.

    ``windows`` is a non-empty sequence of ``(max_age, score)`` pairs from
    youngest to oldest: ``max_age`` values strictly increasing and greater than
    zero, scores in ``[0.0, 1.0]``. An age equal to a boundary falls into the
    next (older) window. Stored as a tuple of pairs.

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming the
    offending window otherwise.
    """

    windows: Sequence[tuple[timedelta, float]]

    def __post_init__(self) -> None:
        windows = self.windows
        if isinstance(windows, str | bytes) or not isinstance(windows, Sequence):
            raise InvalidTypeError("windows", windows, "a sequence of (max_age, score) pairs")
        if len(windows) == 0:
            raise ConfigurationError("windows", windows, "must contain at least one window")
        checked: list[tuple[timedelta, float]] = []
        for index, window in enumerate(windows):
            if not isinstance(window, tuple | list) or len(window) != 2:
                raise InvalidTypeError(f"windows[{index}]", window, "a (max_age, score) pair")
            max_age = _check_duration(f"windows[{index}].max_age", window[0])
            score = check_unit_interval(f"windows[{index}].score", window[1])
            if checked and max_age <= checked[-1][0]:
                raise ConfigurationError(
                    f"windows[{index}].max_age", max_age,
                    f"must be greater than the previous window's max_age ({checked[-1][0]})",
                )
            checked.append((max_age, score))
        object.__setattr__(self, "windows", tuple(checked))

    def apply(self, age: timedelta) -> float:
        """The first window with ``max_age > age`` (strict), else the last one."""
        for max_age, score in self.windows:
            if max_age > age:
                return score
        return self.windows[-1][1]


@dataclass(frozen=True, slots=True)
class WindowCurve(DecayCurve):
    """Binary: 1.0 while ``age < max_age``, 0.0 from ``max_age`` on (half-open ``[0, max_age)``).

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``max_age`` unless it is greater than zero.
    """

    max_age: timedelta

    def __post_init__(self) -> None:
        _check_duration("max_age", self.max_age)

    def apply(self, age: timedelta) -> float:
        """1.0 if ``age < max_age`` else 0.0."""
        return 1.0 if age < self.max_age else 0.0


class DecayScorer(_Immutable, ScorerBase):
    """A score from how long ago an item's ``timestamp`` was, through a :class:`DecayCurve`.

    ``age = max(0, clock() - timestamp)``: future-dated items count as age zero.
    An item without a timestamp scores ``null_timestamp_score`` (in
    ``[0.0, 1.0]``, default 0.5, neutral). ``clock`` is required (the
    specification's time provider has no default, D042): a zero-argument
    callable returning a timezone-aware datetime, such as :func:`utc_now` for
    the wall clock or a fixed one for reproducible scores. It is read once per
    :meth:`score_all` call, so one pass scores every item against the same
    instant. Absolute: other items are never inspected.

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``clock`` when it is not callable.
    """

    absolute = True
    __slots__ = ("clock", "curve", "null_timestamp_score")
    curve: DecayCurve
    null_timestamp_score: float
    clock: Callable[[], datetime]

    def __init__(
        self,
        curve: DecayCurve,
        *,
        clock: Callable[[], datetime],
        null_timestamp_score: float = 0.5,
    ) -> None:
        if not isinstance(curve, DecayCurve):
            raise InvalidTypeError(
                "curve", curve, "a DecayCurve (ExponentialCurve, StepCurve or WindowCurve)"
            )
        if not callable(clock):
            raise ConfigurationError(
                "clock", clock,
                "must be a zero-argument callable returning a timezone-aware datetime "
                "(for the wall clock pass clock=utc_now)",
            )
        object.__setattr__(self, "curve", curve)
        object.__setattr__(
            self, "null_timestamp_score",
            check_unit_interval("null_timestamp_score", null_timestamp_score),
        )
        object.__setattr__(self, "clock", clock)

    def _now(self) -> datetime:
        now = self.clock()
        if not isinstance(now, datetime):
            raise InvalidTypeError("clock()", now, "a timezone-aware datetime")
        if now.tzinfo is None or now.utcoffset() is None:
            raise ConfigurationError("clock()", now, "must return a timezone-aware datetime")
        return now

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's decay score, all against one reading of the clock."""
        if not items:
            return []
        now = self._now()
        apply = self.curve.apply
        null_score = self.null_timestamp_score
        scores: list[float] = []
        append = scores.append
        for item in items:
            timestamp = item.timestamp
            if timestamp is None:
                append(null_score)
                continue
            age = now - timestamp
            # The clamp comes before the curve, as the specification requires.
            append(apply(age if age > _ZERO else _ZERO))
        return scores

    def __repr__(self) -> str:
        clock = getattr(self.clock, "__qualname__", None) or repr(self.clock)
        return (
            f"DecayScorer(curve={self.curve!r}, "
            f"null_timestamp_score={self.null_timestamp_score!r}, clock={clock})"
        )
