"""DecayScorer (``spec/src/scorers/decay.md``): a score from an item's age,
measured against an injected clock, through a decay curve."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Protocol, Self

from .._model import ContextItem
from .._tables import (
    StrategyTable,
    array_value,
    built,
    check_keys,
    child,
    decode_duration,
    decode_timestamp,
    encode_duration,
    encode_timestamp,
    index,
    table,
)
from ..exceptions import ConfigurationError, InvalidTypeError
from ._base import SCORERS, BuiltinScorer, Clock, check_unit_interval

__all__ = [
    "CURVES",
    "CurveType",
    "DecayCurve",
    "DecayScorer",
    "ExponentialCurve",
    "FixedClock",
    "StepCurve",
    "WindowCurve",
    "build_curve",
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


@dataclass(frozen=True, slots=True)
class FixedClock:
    """A clock that always reads ``moment``: reproducible decay scores.

    ``moment`` must be timezone-aware; it is kept in UTC. A
    :class:`DecayScorer` with a fixed clock writes ``moment`` as its table's
    ``reference_time``, and a table with a ``reference_time`` builds one.

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``moment`` for a naive datetime.
    """

    moment: datetime

    def __post_init__(self) -> None:
        moment = self.moment
        if not isinstance(moment, datetime):
            raise InvalidTypeError("moment", moment, "a timezone-aware datetime")
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise ConfigurationError("moment", moment, "must be timezone-aware (UTC semantics)")
        try:
            object.__setattr__(self, "moment", moment.astimezone(UTC))
        except OverflowError:
            raise ConfigurationError("moment", moment,
                                     "is outside the datetime range in UTC") from None

    def __call__(self) -> datetime:
        """``moment``, every time."""
        return self.moment

    def __repr__(self) -> str:
        return f"FixedClock({encode_timestamp(self.moment)})"


class CurveType(Protocol):
    """What a built-in decay curve class offers the registry (the class object itself)."""

    type_name: str
    settings: tuple[str, ...]

    def from_dict(self, data: Mapping[str, Any], /, *, path: str = ...) -> DecayCurve:
        """The curve a table describes."""
        ...


#: The built-in decay curves by ``type_name``.
CURVES: StrategyTable[CurveType] = StrategyTable("decay curve", suffixes=("curve",))


def build_curve(data: Mapping[str, Any], *, path: str = "curve") -> DecayCurve:
    """The built-in decay curve a table describes, by its ``type``."""
    return CURVES.lookup(data, path).from_dict(data, path=path)


class DecayCurve(ABC):
    """A decay curve: a map from an age (a non-negative duration) to a score in [0.0, 1.0]."""

    __slots__ = ()

    @abstractmethod
    def apply(self, age: timedelta) -> float:
        """The score of an item of this ``age`` (``age >= 0``)."""


@CURVES.register
@dataclass(frozen=True, slots=True)
class ExponentialCurve(DecayCurve):
    """``2 ** (-age / half_life)``: 1.0 at age zero, 0.5 at one half-life, never negative.

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``half_life`` unless it is greater than zero. Table:
    ``{"type": "exponential", "half_life": "24h"}`` (a duration text, or seconds).
    """

    type_name: ClassVar[str] = "exponential"
    settings: ClassVar[tuple[str, ...]] = ("half_life",)
    half_life: timedelta

    def __post_init__(self) -> None:
        _check_duration("half_life", self.half_life)

    def apply(self, age: timedelta) -> float:
        """``2 ** (-seconds(age) / seconds(half_life))``."""
        exponent: float = -age.total_seconds() / self.half_life.total_seconds()
        return math.pow(2.0, exponent)

    def to_dict(self) -> dict[str, Any]:
        """``type`` and ``half_life`` in its text form."""
        return {"type": self.type_name, "half_life": encode_duration(self.half_life)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "curve") -> Self:
        """The curve a table describes."""
        data = CURVES.read(cls, data, path, required=cls.settings)
        half_life = decode_duration(data["half_life"], child(path, "half_life"))
        return built(path, lambda: cls(half_life=half_life))


@CURVES.register
@dataclass(frozen=True, slots=True)
class StepCurve(DecayCurve):
    """Piecewise constant: the score of the first window whose ``max_age`` is
    strictly greater than the age, else the last window's score.

    ``windows`` is a non-empty sequence of ``(max_age, score)`` pairs from
    youngest to oldest: ``max_age`` values strictly increasing and greater than
    zero, scores in ``[0.0, 1.0]``. An age equal to a boundary falls into the
    next (older) window. Stored as a tuple of pairs.

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming the
    offending window otherwise. Table:
    ``{"type": "step", "windows": [{"max_age": "1h", "score": 1.0}, ...]}``.
    """

    type_name: ClassVar[str] = "step"
    settings: ClassVar[tuple[str, ...]] = ("windows",)
    windows: Sequence[tuple[timedelta, float]]

    def __post_init__(self) -> None:
        windows = self.windows
        if isinstance(windows, str | bytes) or not isinstance(windows, Sequence):
            raise InvalidTypeError("windows", windows, "a sequence of (max_age, score) pairs")
        if len(windows) == 0:
            raise ConfigurationError("windows", windows, "must contain at least one window")
        checked: list[tuple[timedelta, float]] = []
        for position, window in enumerate(windows):
            if not isinstance(window, tuple | list) or len(window) != 2:
                raise InvalidTypeError(f"windows[{position}]", window, "a (max_age, score) pair")
            max_age = _check_duration(f"windows[{position}].max_age", window[0])
            score = check_unit_interval(f"windows[{position}].score", window[1])
            if checked and max_age <= checked[-1][0]:
                raise ConfigurationError(
                    f"windows[{position}].max_age", max_age,
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

    def to_dict(self) -> dict[str, Any]:
        """``type`` and ``windows``, each ``{"max_age": <text>, "score": ...}``."""
        return {"type": self.type_name, "windows": [
            {"max_age": encode_duration(max_age), "score": score}
            for max_age, score in self.windows
        ]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "curve") -> Self:
        """The curve a table describes."""
        data = CURVES.read(cls, data, path, required=cls.settings)
        windows_path = child(path, "windows")
        windows = []
        for position, raw in enumerate(array_value(data["windows"], windows_path)):
            where = index(windows_path, position)
            entry = table(raw, where)
            check_keys(entry, where, ("max_age", "score"), ("max_age", "score"))
            windows.append((decode_duration(entry["max_age"], child(where, "max_age")),
                            entry["score"]))
        return built(path, lambda: cls(windows=windows))


@CURVES.register
@dataclass(frozen=True, slots=True)
class WindowCurve(DecayCurve):
    """Binary: 1.0 while ``age < max_age``, 0.0 from ``max_age`` on (half-open ``[0, max_age)``).

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``max_age`` unless it is greater than zero. Table:
    ``{"type": "window", "max_age": "2d"}``.
    """

    type_name: ClassVar[str] = "window"
    settings: ClassVar[tuple[str, ...]] = ("max_age",)
    max_age: timedelta

    def __post_init__(self) -> None:
        _check_duration("max_age", self.max_age)

    def apply(self, age: timedelta) -> float:
        """1.0 if ``age < max_age`` else 0.0."""
        return 1.0 if age < self.max_age else 0.0

    def to_dict(self) -> dict[str, Any]:
        """``type`` and ``max_age`` in its text form."""
        return {"type": self.type_name, "max_age": encode_duration(self.max_age)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "curve") -> Self:
        """The curve a table describes."""
        data = CURVES.read(cls, data, path, required=cls.settings)
        max_age = decode_duration(data["max_age"], child(path, "max_age"))
        return built(path, lambda: cls(max_age=max_age))


@SCORERS.register
class DecayScorer(BuiltinScorer):
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

    Table: ``{"type": "decay", "curve": {...}, "null_timestamp_score": 0.5}``,
    plus ``"reference_time"`` (ISO 8601) when the clock is a
    :class:`FixedClock`. Any other clock (:func:`utc_now`, a test's own) is
    not part of the table: it means "the time of the run", and a scorer built
    from the table reads the clock given to ``from_dict`` (default: the wall
    clock).
    """

    absolute = True
    __slots__ = ("clock", "curve", "null_timestamp_score")
    type_name = "decay"
    settings = ("curve", "null_timestamp_score", "reference_time")
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

    def to_dict(self) -> dict[str, Any]:
        """``type``, ``curve``, ``null_timestamp_score``, and ``reference_time`` when the
        clock is a :class:`FixedClock`."""
        out: dict[str, Any] = {"type": self.type_name, "curve": CURVES.describe(self.curve),
                               "null_timestamp_score": self.null_timestamp_score}
        if isinstance(self.clock, FixedClock):
            out["reference_time"] = encode_timestamp(self.clock.moment)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "scorer",
                  clock: Clock | None = None) -> Self:
        """The decay scorer a table describes: a :class:`FixedClock` at
        ``reference_time`` when the table has one, else ``clock`` (default:
        :func:`utc_now`)."""
        data = SCORERS.read(cls, data, path, required=("curve",))
        curve = build_curve(data["curve"], path=child(path, "curve"))
        raw_time = data.get("reference_time")
        used: Clock = utc_now if clock is None else clock
        if raw_time is not None:
            used = FixedClock(decode_timestamp(raw_time, child(path, "reference_time")))
        null_score = data.get("null_timestamp_score", 0.5)
        return built(path, lambda: cls(curve, clock=used, null_timestamp_score=null_score))

    def _value(self) -> tuple[Any, ...]:
        return (self.curve, self.null_timestamp_score, self.clock)

    def __repr__(self) -> str:
        clock = getattr(self.clock, "__qualname__", None) or repr(self.clock)
        return (
            f"DecayScorer(curve={self.curve!r}, "
            f"null_timestamp_score={self.null_timestamp_score!r}, clock={clock})"
        )
