"""Decoding helpers shared by the policy format: paths, key checks with
"did you mean" suggestions, type checks, durations and error relocation."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from .._model import ascii_fold, format_timestamp, parse_timestamp
from ..exceptions import ConfigurationError, DecodeError, InvalidTypeError, InvalidValueError

__all__ = [
    "check_keys",
    "child",
    "decode_duration",
    "decode_timestamp",
    "encode_duration",
    "encode_timestamp",
    "index",
    "relocated",
    "require",
    "suggest",
    "table",
    "type_key",
]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_E = TypeVar("_E", bound=InvalidValueError | InvalidTypeError)


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


def suggest(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean `x`?"`` for the closest of ``choices``, or ``""``."""
    options = list(choices)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if not close:
        folded = {ascii_fold(option): option for option in options}
        close = [folded[m] for m in difflib.get_close_matches(ascii_fold(word), folded, n=1)]
    return f"; did you mean `{close[0]}`?" if close else ""


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


def type_key(value: Any, path: str, *, suffixes: Sequence[str]) -> str:
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
