"""Strategy tables: the JSON-native form every built-in scorer, slicer, placer and
decay curve has, and the per-family tables they register in.

A built-in strategy declares, in its own module:

- ``type_name``: the ``type`` of its table (``"recency"``, ``"count_quota"``);
- ``settings``: the other keys its table may hold;
- ``to_dict()``: its table, ``type`` first, every setting written out;
- classmethod ``from_dict(data, *, path=...)``: the strategy a table describes,
  every error naming its path inside the table (``scorer.children[1].weight``);

and registers with its family's :class:`StrategyTable` by decorator
(``@SCORERS.register``). Nothing else lists the built-ins: the registry
(``cupellation._registry``), policies and the conformance runner all find them
through these tables.

A strategy that is not a built-in (a ``FunctionScorer``, a user's own slicer)
is recorded as ``{"type": "custom", "repr": "<its repr, 200 characters at most>"}``:
a run that used it reads like any other, and rebuilding it raises
:class:`~cupellation.exceptions.CustomStrategyError` naming its path.

The helpers below are shared by every ``from_dict``: paths, key checks with
"did you mean" suggestions, type checks, error relocation, durations and
timestamps.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Generic, TypeVar

from ._model import ascii_fold, format_timestamp, parse_timestamp
from .exceptions import (
    ConfigurationError,
    CustomStrategyError,
    DecodeError,
    InvalidTypeError,
    InvalidValueError,
)

__all__ = [
    "CUSTOM_TYPE",
    "REPR_LIMIT",
    "StrategyTable",
    "array_value",
    "bool_value",
    "built",
    "check_keys",
    "child",
    "custom_table",
    "decode_duration",
    "decode_timestamp",
    "encode_duration",
    "encode_timestamp",
    "fold_type_name",
    "index",
    "relocated",
    "require",
    "suggest",
    "table",
    "text_value",
]

#: The ``type`` of the table that records a strategy which is not a built-in.
CUSTOM_TYPE = "custom"
#: How many characters of a custom strategy's ``repr`` its table keeps.
REPR_LIMIT = 200

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TYPE_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")

_E = TypeVar("_E", bound=InvalidValueError | InvalidTypeError)
_T = TypeVar("_T")
#: The class-object protocol of a family (what ``from_dict`` looks like there).
_F = TypeVar("_F")
_C = TypeVar("_C", bound=type)


# -- paths and errors ------------------------------------------------------------


def child(path: str, key: str) -> str:
    """The path of ``key`` inside the table at ``path``: ``scorer.weights``, or
    ``scorer.weights['Tool Output']`` for a key that is not an identifier."""
    if _IDENTIFIER.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def index(path: str, position: int) -> str:
    """The path of entry ``position`` of the array at ``path``."""
    return f"{path}[{position}]"


def relocated(exc: _E, path: str) -> _E:
    """A copy of ``exc`` (same class) whose field is prefixed with ``path``.

    The value types validate with their own field names (``children[1].weight``);
    the decoder knows where the value came from (``scorer``), so the error the
    caller sees names the whole path: ``scorer.children[1].weight``.
    """
    if not path:
        return exc
    field = exc.field
    full = f"{path}{field}" if field.startswith("[") or not field else f"{path}.{field}"
    problem: str = getattr(exc, "problem", "")
    moved = type(exc).__new__(type(exc))
    moved.args = (f"{full}: {problem} (got {exc.value!r})",)
    moved.field = full
    moved.value = exc.value
    moved.problem = problem
    return moved


def built(path: str, factory: Callable[[], _T]) -> _T:
    """``factory()``, with any validation error relocated under ``path``."""
    try:
        return factory()
    except (InvalidValueError, InvalidTypeError) as exc:
        raise relocated(exc, path) from None


def suggest(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean `x`?"`` for the closest of ``choices``, or ``""``."""
    options = list(choices)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if not close:
        folded = {ascii_fold(option): option for option in options}
        close = [folded[m] for m in difflib.get_close_matches(ascii_fold(word), folded, n=1)]
    return f"; did you mean `{close[0]}`?" if close else ""


# -- reading tables --------------------------------------------------------------


def table(value: Any, path: str) -> Mapping[str, Any]:
    """``value`` itself, after checking it is a table (a mapping with string keys)."""
    if not isinstance(value, Mapping):
        raise InvalidTypeError(path or "policy", value, "a table (a JSON object)")
    for key in value:
        if not isinstance(key, str):
            raise InvalidTypeError(path or "policy", key, "a table with string keys")
    return value


def check_keys(data: Mapping[str, Any], path: str, allowed: Sequence[str],
               required: Sequence[str] = ()) -> None:
    """Reject a key not in ``allowed`` (suggesting the closest) and a missing required key."""
    for key, value in data.items():
        if key not in allowed:
            raise ConfigurationError(
                child(path, key), value,
                f"is not a known key{suggest(key, allowed)} "
                f"(the keys here are: {', '.join(allowed)})",
            )
    for key in required:
        if key not in data:
            raise ConfigurationError(child(path, key), None, "is required")


def require(data: Mapping[str, Any], key: str, path: str) -> Any:
    """``data[key]``, or a :class:`ConfigurationError` naming ``path.key`` when it is missing."""
    if key not in data:
        raise ConfigurationError(child(path, key), None, "is required")
    return data[key]


def text_value(value: Any, path: str) -> str:
    """``value``, after checking it is a string."""
    if not isinstance(value, str):
        raise InvalidTypeError(path, value, "a string")
    return value


def bool_value(value: Any, path: str) -> bool:
    """``value``, after checking it is a boolean."""
    if not isinstance(value, bool):
        raise InvalidTypeError(path, value, "a boolean (true or false)")
    return value


def array_value(value: Any, path: str) -> Sequence[Any]:
    """``value``, after checking it is an array (a sequence that is not text or a table)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidTypeError(path, value, "an array")
    return value


def fold_type_name(value: Any, path: str, *, suffixes: Sequence[str]) -> str:
    """A strategy ``type`` name folded for lookup: ASCII lower case, without
    ``-``, ``_`` or spaces, and without a trailing class suffix such as ``scorer``.

    So ``"metadata_trust"``, ``"MetadataTrust"`` and ``"MetadataTrustScorer"``
    all become ``"metadatatrust"``.
    """
    if not isinstance(value, str):
        raise InvalidTypeError(child(path, "type"), value, "a type name (a string)")
    folded = ascii_fold(value)
    for separator in ("-", "_", " "):
        folded = folded.replace(separator, "")
    for suffix in suffixes:
        if folded.endswith(suffix) and folded != suffix:
            folded = folded[: -len(suffix)]
            break
    return folded


# -- the family tables -----------------------------------------------------------


def custom_table(strategy: object) -> dict[str, Any]:
    """``{"type": "custom", "repr": ...}``: how a strategy that is not a built-in is
    recorded (its ``repr``, at most :data:`REPR_LIMIT` characters)."""
    try:
        text = repr(strategy)
    except Exception:  # a repr that raises must not hide the run
        text = f"<{type(strategy).__name__} whose repr() raised>"
    if len(text) > REPR_LIMIT:
        text = text[: REPR_LIMIT - 3] + "..."
    return {"type": CUSTOM_TYPE, "repr": text}


class StrategyTable(Generic[_F]):
    """The built-in strategies of one family (scorers, slicers, placers or decay
    curves), by ``type_name``.

    ``family`` is how errors name a member (``"scorer"``, ``"decay curve"``);
    ``suffixes`` are the class suffixes a ``type`` may carry
    (``"MetadataTrustScorer"``).
    """

    __slots__ = ("_by_key", "family", "suffixes")

    def __init__(self, family: str, *, suffixes: tuple[str, ...]) -> None:
        self.family = family
        self.suffixes = suffixes
        self._by_key: dict[str, _F] = {}

    def register(self, cls: _C) -> _C:
        """Class decorator: add ``cls`` under its own ``type_name``.

        ``cls`` must declare ``type_name`` (snake_case) and ``settings`` itself
        and have ``to_dict`` and ``from_dict``; a second class under the same
        name is refused.
        """
        name = cls.__dict__.get("type_name")
        if not isinstance(name, str) or not _TYPE_NAME.fullmatch(name):
            raise TypeError(f"{cls.__name__} must declare a snake_case type_name")
        if not isinstance(cls.__dict__.get("settings"), tuple):
            raise TypeError(f"{cls.__name__} must declare its settings (a tuple of keys)")
        for method in ("to_dict", "from_dict"):
            if not callable(getattr(cls, method, None)):
                raise TypeError(f"{cls.__name__} must have {method}()")
        key = fold_type_name(name, "type", suffixes=self.suffixes)
        if key in self._by_key:
            raise TypeError(f"{self.family} type {name!r} is registered twice")
        self._by_key[key] = cls  # type: ignore[assignment]  # the family's class protocol
        return cls

    def unregister(self, cls: type) -> None:
        """Remove ``cls`` (registered by :meth:`register`); a class that is not
        registered is left alone. For an application's own strategies and tests."""
        for key, found in list(self._by_key.items()):
            if found is cls:
                del self._by_key[key]

    def names(self) -> tuple[str, ...]:
        """Every registered ``type_name``, sorted."""
        return tuple(sorted(cls.type_name for cls in self._by_key.values()))  # type: ignore[attr-defined]

    def classes(self) -> tuple[_F, ...]:
        """Every registered class, sorted by ``type_name``."""
        return tuple(self._by_key[key] for key in sorted(self._by_key))

    def lookup(self, data: Any, path: str) -> _F:
        """The class a table's ``type`` names (case, ``-``, ``_`` and a class suffix
        ignored). Raises :class:`ConfigurationError` naming ``path.type`` for an
        unknown name, with a suggestion, and
        :class:`~cupellation.exceptions.CustomStrategyError` for a custom record."""
        value = require(table(data, path), "type", path)
        key = fold_type_name(value, path, suffixes=self.suffixes)
        found = self._by_key.get(key)
        if found is not None:
            return found
        if key == CUSTOM_TYPE:
            raise CustomStrategyError(path or self.family, data.get("repr"))
        names = self.names()
        raise ConfigurationError(
            child(path, "type"), value,
            f"is not a {self.family} type{suggest(str(value), names)} "
            f"(one of: {', '.join(names)})",
        )

    def read(self, cls: type, data: Any, path: str, *, required: Sequence[str] = (),
             extra: Sequence[str] = ()) -> Mapping[str, Any]:
        """``data`` as ``cls``'s table: its keys ``type`` (optional, but naming
        ``cls`` when present), ``cls.settings`` and ``extra``; ``required`` present."""
        found = table(data, path)
        settings: tuple[str, ...] = cls.settings  # type: ignore[attr-defined]
        check_keys(found, path, ("type", *settings, *extra), required)
        if "type" in found and self.lookup(found, path) is not cls:
            own: str = cls.type_name  # type: ignore[attr-defined]
            raise ConfigurationError(child(path, "type"), found["type"],
                                     f"does not name a {own!r} {self.family}")
        return found

    def holds(self, strategy: object) -> bool:
        """Whether ``strategy`` is an instance of a registered class itself (a
        subclass may behave differently, so it is not)."""
        return type(strategy) in self._by_key.values()

    def describe(self, strategy: object) -> dict[str, Any]:
        """``strategy.to_dict()`` for a built-in, else :func:`custom_table`."""
        if self.holds(strategy):
            out: dict[str, Any] = strategy.to_dict()  # type: ignore[attr-defined]
            return out
        return custom_table(strategy)


# -- durations -------------------------------------------------------------------

_UNITS_US = {
    "w": 7 * 86_400_000_000,
    "d": 86_400_000_000,
    "h": 3_600_000_000,
    "m": 60_000_000,
    "s": 1_000_000,
    "ms": 1_000,
    "us": 1,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|w|d|h|m|s)")
_DURATION_HELP = ("must be a duration such as '90s', '15m', '24h', '7d' or '1h30m' "
                  "(units w, d, h, m, s, ms, us), or a number of seconds")


def _duration_text_micros(value: str, path: str) -> Decimal:
    text = value.strip()
    position = 0
    micros = Decimal(0)
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        try:
            micros += Decimal(match.group(1)) * _UNITS_US[match.group(2)]
        except InvalidOperation:  # pragma: no cover - the pattern only admits decimals
            break
        position = match.end()
    if not text or position != len(text):
        raise ConfigurationError(path, value, _DURATION_HELP)
    return micros


def decode_duration(value: Any, path: str) -> timedelta:
    """A duration from its text form (``"1h30m"``), a number of seconds, or a timedelta.

    The text is exact: ``"0.000001s"`` is one microsecond; anything finer than
    a microsecond is refused rather than rounded.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise InvalidTypeError(path, value, "a duration string or a number of seconds")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigurationError(path, value, _DURATION_HELP)
        micros = Decimal(repr(value) if isinstance(value, float) else value) * 1_000_000
    elif isinstance(value, str):
        micros = _duration_text_micros(value, path)
    else:
        raise InvalidTypeError(path, value, "a duration string or a number of seconds")
    if micros != micros.to_integral_value():
        raise ConfigurationError(path, value, "must be a whole number of microseconds")
    try:
        return timedelta(microseconds=int(micros))
    except OverflowError:
        raise ConfigurationError(path, value, "is too long for a duration") from None


def encode_duration(value: timedelta) -> str:
    """The exact text form of a duration: ``"1d"``, ``"1h30m"``, ``"2.5s"``.

    Only the components that are not zero are written; ``decode_duration``
    reads it back to the same timedelta.
    """
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    days, micros = divmod(micros, 86_400_000_000)
    hours, micros = divmod(micros, 3_600_000_000)
    minutes, micros = divmod(micros, 60_000_000)
    seconds, micros = divmod(micros, 1_000_000)
    parts = []
    if days:
        parts.append(f"{days}d")
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if micros:
        parts.append(f"{seconds}.{micros:06d}".rstrip("0") + "s")
    elif seconds or not parts:
        parts.append(f"{seconds}s")
    return sign + "".join(parts)


# -- timestamps ------------------------------------------------------------------


def decode_timestamp(value: Any, path: str) -> datetime:
    """An aware datetime from ISO 8601 text with an offset, or a datetime (TOML's own)."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ConfigurationError(path, value, "must carry a UTC offset such as 'Z'")
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise ConfigurationError(path, value, "is outside the datetime range in UTC") from None
    if not isinstance(value, str):
        raise InvalidTypeError(path, value, "an ISO 8601 timestamp with an offset")
    try:
        return parse_timestamp(value, field_name=path)
    except DecodeError as exc:
        raise ConfigurationError(path, value, exc.problem) from None


def encode_timestamp(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix."""
    return format_timestamp(value)
