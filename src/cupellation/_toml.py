"""A small TOML 1.0 writer for JSON-like data (tables, arrays, strings,
integers, floats and booleans): enough for policies, with no dependency.

Tables become ``[a.b]`` sections and non-empty arrays of tables become
``[[a.b]]`` sections, so nested composites read as a tree. Within a table the
plain keys come first, as TOML requires. Floats are written with ``repr`` (the
shortest text that reads back to the same double), so ``tomllib.loads`` of
the output gives back data equal to the input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .exceptions import InvalidTypeError, InvalidValueError

__all__ = ["dumps"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r",
                  '"': '\\"', "\\": "\\\\"}
_INT64 = (-(2**63), 2**63 - 1)


def _string(text: str, path: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        escaped = _SHORT_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise InvalidValueError(path, text,
                                    "contains a lone surrogate, which TOML cannot represent")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _key(key: str, path: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key, path)


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping) and len(value) > 0


def _is_table_array(value: Any) -> bool:
    return (isinstance(value, Sequence) and not isinstance(value, str) and len(value) > 0
            and all(isinstance(entry, Mapping) for entry in value))


def _inline(value: Any, path: str) -> str:
    """A value on one line: scalars, arrays and inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidValueError(path, value, "is outside TOML's 64-bit integer range")
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value, path)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        inner = ", ".join(f"{_key(k, path)} = {_inline(v, f'{path}.{k}')}"
                          for k, v in value.items())
        return "{ " + inner + " }"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_inline(v, f"{path}[{i}]") for i, v in enumerate(value)) + "]"
    raise InvalidTypeError(path, value, "a TOML value (table, array, string, number or bool)")


def _emit(lines: list[str], path: list[str], data: Mapping[str, Any], *,
          array_element: bool) -> None:
    where = ".".join(path) or "policy"
    for key in data:
        if not isinstance(key, str):
            raise InvalidTypeError(where, key, "a table with string keys")
    if path:
        header = ".".join(_key(part, where) for part in path)
        if lines:
            lines.append("")
        lines.append(f"[[{header}]]" if array_element else f"[{header}]")
    tables = []
    arrays = []
    for key, value in data.items():
        if _is_table(value):
            tables.append((key, value))
        elif _is_table_array(value):
            arrays.append((key, value))
        else:
            lines.append(f"{_key(key, where)} = {_inline(value, f'{where}.{key}')}")
    for key, value in tables:
        _emit(lines, [*path, key], value, array_element=False)
    for key, entries in arrays:
        for entry in entries:
            _emit(lines, [*path, key], entry, array_element=True)


def dumps(data: Mapping[str, Any]) -> str:
    """``data`` (a table) as TOML text ending in a newline.

    Raises :class:`~cupellation.exceptions.InvalidValueError` for what TOML
    cannot hold (a lone surrogate, an integer beyond 64 bits) and
    :class:`~cupellation.exceptions.InvalidTypeError` for a value that is not
    JSON-like.
    """
    if not isinstance(data, Mapping):
        raise InvalidTypeError("policy", data, "a table")
    lines: list[str] = []
    _emit(lines, [], data, array_element=False)
    return "\n".join(lines) + "\n"
