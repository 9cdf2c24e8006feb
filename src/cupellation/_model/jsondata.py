"""JSON data as the data model holds it: read-only metadata, signed 64-bit integers,
finite numbers, UTC timestamps, strict JSON text, and decode errors that name the key."""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from ..exceptions import (
    DecodeError,
    InvalidTypeError,
    InvalidValueError,
    MetadataTooDeepError,
)
from .names import ascii_fold, check_text

__all__ = [
    "EMPTY_METADATA",
    "EPOCH",
    "MAX_METADATA_DEPTH",
    "MICROSECOND",
    "check_aware",
    "check_finite",
    "check_int",
    "check_known_keys",
    "check_nonneg_int",
    "dumps_json",
    "first_wide_int",
    "fits_int64",
    "format_timestamp",
    "freeze_json",
    "hint_from_json",
    "hint_to_json",
    "json_list",
    "json_object",
    "loads_json",
    "parse_timestamp",
    "thaw_json",
    "unknown_key_error",
]


#: How many levels of mappings and lists ``ContextItem.metadata`` may nest, counting
#: the metadata mapping itself: ``{"a": {"b": [1]}}`` is 3 levels. Real metadata is a
#: few levels deep; the limit keeps every encoder and decoder clear of unbounded
#: recursion (Python's own limit is about 1,000 frames).
MAX_METADATA_DEPTH = 64


def json_object(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = data.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise DecodeError(key, value, "must be a JSON object")
    return value


def json_list(data: Mapping[str, Any], key: str) -> tuple[Any, ...]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise DecodeError(key, value, "must be a JSON array")
    return tuple(value)


def unknown_key_error(owner: str, key: object, value: Any,
                       known: Sequence[str]) -> DecodeError:
    """A DecodeError for a key ``owner`` does not have, suggesting the closest one.

    A name equal to a known key ignoring ASCII case (``Pinned``) is suggested
    first, then one equal ignoring ``_`` and ``-`` as well
    (``future_relevance_hint``), then difflib's closest match (``tokns``).
    """
    name = key if isinstance(key, str) else repr(key)
    suggestion: str | None = None
    if isinstance(key, str):
        folded = {ascii_fold(known_key): known_key for known_key in known}
        lowered = ascii_fold(key)
        squashed = lowered.replace("_", "").replace("-", "")
        suggestion = folded.get(lowered) or folded.get(squashed)
        if suggestion is None:
            close = difflib.get_close_matches(squashed, list(folded), n=1, cutoff=0.6)
            suggestion = folded[close[0]] if close else None
    if suggestion is not None:
        problem = f"is not a {owner} field; did you mean `{suggestion}`?"
    else:
        problem = f"is not a {owner} field (known: {', '.join(known)})"
    return DecodeError(name, value, problem)


def check_known_keys(owner: str, data: Mapping[Any, Any], known: Sequence[str]) -> None:
    known_set = frozenset(known)
    for key in data:
        if key not in known_set:
            raise unknown_key_error(owner, key, data[key], known)


def loads_json(text: Any, owner: str) -> Any:
    """``json.loads`` for ``from_json``: strict JSON (no NaN or Infinity tokens),
    errors as :class:`DecodeError` with the line number."""
    if not isinstance(text, str | bytes | bytearray):
        raise InvalidTypeError(
            "text", text, f"JSON text (str or bytes); for a mapping use {owner}.from_dict"
        )

    def reject_constant(name: str) -> Any:
        raise DecodeError("json", name, "is not valid JSON (write non-finite numbers as text)")

    try:
        return json.loads(text, parse_constant=reject_constant)
    except RecursionError:
        raise DecodeError("json", text[:40], "nests arrays or objects too deeply") from None
    except json.JSONDecodeError as exc:
        raise DecodeError("json", exc.doc[max(0, exc.pos - 20):exc.pos + 20], exc.msg,
                          line=exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise DecodeError("json", text[:40], f"is not UTF-8 ({exc.reason})") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise DecodeError("json", text[:40], f"is not valid JSON ({exc})") from None


def dumps_json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, allow_nan=False)


# JSON has no NaN or infinities; a non-finite hint (which ReflexiveScorer
# defines a score for) is written as the string "NaN", "Infinity" or "-Infinity".
_NON_FINITE_TO_JSON = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_NON_FINITE_FROM_JSON = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def hint_to_json(value: float) -> float | str:
    return value if math.isfinite(value) else _NON_FINITE_TO_JSON[repr(value)]


def hint_from_json(value: Any) -> Any:
    if isinstance(value, str):
        if value not in _NON_FINITE_FROM_JSON:
            raise DecodeError("futureRelevanceHint", value,
                              "must be a number, or 'NaN', 'Infinity' or '-Infinity'")
        return _NON_FINITE_FROM_JSON[value]
    return value


_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def fits_int64(value: int) -> bool:
    """True when ``value`` is a signed 64-bit integer, the specification's integers
    (and what OpenTelemetry, protobuf and numpy can carry)."""
    return _INT64_MIN <= value <= _INT64_MAX


def first_wide_int(value: Any) -> tuple[str, int] | None:
    """The first integer beyond int64 inside decoded JSON data, as (its path below
    ``value``, such as ``"['a'][0]"``, the integer), or None.

    Walks mappings, lists and tuples without recursion, so data nested as deep as
    a JSON decoder allows is walked safely.
    """
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, current = pending.pop()
        if isinstance(current, int):
            if not isinstance(current, bool) and not fits_int64(current):
                return path, current
        elif isinstance(current, Mapping):
            pending.extend(reversed([(f"{path}[{key!r}]", nested)
                                     for key, nested in current.items()]))
        elif isinstance(current, list | tuple):
            pending.extend(reversed([(f"{path}[{index}]", nested)
                                     for index, nested in enumerate(current)]))
    return None


def check_int(field_name: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    # bool is an int subclass; a token count of True is a bug, not 1.
    if type(value) is not int and not (isinstance(value, int) and not isinstance(value, bool)):
        raise InvalidTypeError(field_name, value, "an integer" + (" or None" if optional else ""))
    # The specification's integers are signed 64-bit; larger ones cannot be
    # compared with scores or summed with numpy safely.
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidValueError(field_name, value, "must fit in a signed 64-bit integer")


def check_aware(field_name: str, value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise InvalidTypeError(field_name, value, "a timezone-aware datetime or None")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidValueError(field_name, value, "must be timezone-aware (UTC semantics)")
    if value.tzinfo is UTC:
        return value
    try:
        return value.astimezone(UTC)
    except OverflowError:
        # datetime(1, 1, 1, tzinfo=+05:00) is before 0001-01-01 in UTC.
        raise InvalidValueError(field_name, value,
                                "is outside the datetime range once converted to UTC") from None


def format_timestamp(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix; microseconds only when non-zero."""
    if value.tzinfo is UTC:  # what items hold: drop "+00:00"
        return value.isoformat()[:-6] + "Z"
    text = value.astimezone(UTC).replace(tzinfo=None).isoformat()
    return text + "Z"


def parse_timestamp(text: str, *, field_name: str = "timestamp") -> datetime:
    """Parse an ISO 8601 timestamp that carries an offset (``Z`` or ``+hh:mm``)."""
    if not isinstance(text, str):
        raise DecodeError(field_name, text, "must be an ISO 8601 string")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise DecodeError(field_name, text, "is not an ISO 8601 timestamp") from None
    if parsed.tzinfo is None:
        raise DecodeError(field_name, text, "must carry a UTC offset such as 'Z'")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise DecodeError(field_name, text,
                          "is outside the datetime range once converted to UTC") from None


EMPTY_METADATA: Mapping[str, Any] = MappingProxyType({})
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def freeze_json(value: Any, path: str, open_containers: set[int], depth: int = 1,
                 top: str = "") -> Any:
    """``value`` checked to be JSON data and made read-only: mappings become
    ``MappingProxyType`` over a copy, lists and tuples become tuples.

    Raises :class:`InvalidValueError` naming ``path`` (``metadata['a'][0]``)
    for anything JSON cannot hold: a set, bytes, any other object, NaN or an
    infinity, a key that is not a string, or a container that contains itself;
    :class:`InvalidTextError` for a key or string holding a lone surrogate; and
    :class:`MetadataTooDeepError` for containers nested more than
    :data:`MAX_METADATA_DEPTH` levels (``depth`` is the level of ``value``; ``top``
    the path two levels down, which names the too-deep value without 64 indices).
    """
    if value is None or isinstance(value, int):  # bool is an int
        return value
    if isinstance(value, str):
        return value if value.isascii() else check_text(path, value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValueError(path, value, "must be finite: JSON has no NaN or infinity")
        return value
    if isinstance(value, Mapping | list | tuple):
        if id(value) in open_containers:
            raise InvalidValueError(path, value, "contains itself: JSON cannot hold a cycle")
        if depth > MAX_METADATA_DEPTH:
            raise MetadataTooDeepError(f"{top}[...]", value, MAX_METADATA_DEPTH)
        open_containers.add(id(value))
        try:
            return _freeze_container(value, path, open_containers, depth + 1,
                                     path if depth <= 2 else top)
        finally:
            open_containers.discard(id(value))
    raise InvalidValueError(
        path, value,
        f"is of type {type(value).__name__}, which JSON cannot hold (use str, int, float, "
        "bool, None, lists and mappings with string keys)",
    )


def _freeze_container(value: Mapping[Any, Any] | list[Any] | tuple[Any, ...], path: str,
                      open_containers: set[int], inner: int, top: str) -> Any:
    """:func:`freeze_json` of a mapping, list or tuple already marked open: its items
    frozen at depth ``inner``."""
    if isinstance(value, Mapping):
        frozen: dict[str, Any] = {}
        for key, nested in value.items():
            if not isinstance(key, str):
                raise InvalidValueError(f"{path}[{key!r}]", key,
                                        "keys must be strings, as JSON object keys are")
            if not key.isascii():
                check_text(f"{path} key {key!r}", key)
            # Plain scalars (the common case) are taken as they are, without the
            # recursive call and its path text: a chat item's metadata went from
            # 7 calls to 2 (benchmarks/bench_chat.py, the agent loop).
            kind = type(nested)
            if nested is None or kind is int or kind is bool or (
                    kind is str and nested.isascii()):
                frozen[key] = nested
            else:
                frozen[key] = freeze_json(nested, f"{path}[{key!r}]", open_containers,
                                          inner, top)
        return MappingProxyType(frozen)
    return tuple(nested if nested is None or type(nested) is int or (
                     type(nested) is str and nested.isascii())
                 else freeze_json(nested, f"{path}[{index}]", open_containers, inner, top)
                 for index, nested in enumerate(value))


def thaw_json(value: Any) -> Any:
    """The plain JSON data (dicts and lists) a value of :func:`freeze_json` stands for."""
    if isinstance(value, Mapping):
        return {key: thaw_json(nested) for key, nested in value.items()}
    if isinstance(value, tuple):
        return [thaw_json(nested) for nested in value]
    return value



def check_nonneg_int(field_name: str, value: Any) -> None:
    check_int(field_name, value)
    if value < 0:
        raise InvalidValueError(field_name, value, "must be >= 0")


def check_finite(field_name: str, value: Any) -> float:
    """Return ``value`` as a float, rejecting bools, non-numbers, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTypeError(field_name, value, "a finite number")
    try:
        result = float(value)
    except OverflowError:
        raise InvalidValueError(field_name, value, "is too large for a float64") from None
    if not math.isfinite(result):
        raise InvalidValueError(field_name, value, "must be finite")
    return result
