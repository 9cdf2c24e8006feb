"""What the OpenTelemetry Collector's ``clickhouse`` exporter does to a log record's
attributes, written out in Python for the tests: every value becomes a string in
``LogAttributes`` by pdata's ``Value.AsString`` (Go), and a reader takes the strings
back by the types the event declarations give each flat key.

``go_as_string`` follows ``pdata/pcommon/value.go``: text as is; ``true``/``false``;
integers in decimal; doubles as ES6 numbers (``float64AsString``: fixed notation for
1e-6 <= |x| < 1e21, else Go's shortest ``e`` form with ``e-09`` cleaned to ``e-9``);
lists as ``encoding/json``'s ``Marshal`` (HTML characters and U+2028/U+2029
escaped, only ``\\"``, ``\\\\``, ``\\n``, ``\\r``, ``\\t`` as short escapes).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, get_type_hints

from cupellation._model.wire import BUDGET_FIELDS, ITEM_FIELDS, WireKind
from cupellation.events._types import KNOWN_EVENTS
from cupellation.reasons import reason_field_types

__all__ = ["go_as_string", "go_float", "go_json", "row_from_attributes", "typed_attributes"]

_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
         "\u2029": "\\u2029"}


def go_float(value: float) -> str:
    """``float64AsString``: the shortest digits that read back as ``value`` (Python's
    ``repr`` finds the same ones), in fixed notation for 1e-6 <= |x| < 1e21 (and 0),
    else as ``d.ddde+XX`` / ``d.ddde-X``."""
    if math.isinf(value) or math.isnan(value):
        return f"json: unsupported value: {'NaN' if math.isnan(value) else repr(value)}"
    shortest = Decimal(repr(value)).normalize()
    size = abs(value)
    if size == 0 or 1e-6 <= size < 1e21:
        return format(shortest, "f")
    sign, digits, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)
    power = exponent + len(digits) - 1
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    tail = f"e+{power:02d}" if power >= 0 else f"e-{-power}"
    return ("-" if sign else "") + mantissa + tail


def _go_string(text: str) -> str:
    out = ['"']
    for char in text:
        if char in _SHORT:
            out.append(_SHORT[char])
        elif char in _HTML:
            out.append(_HTML[char])
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def go_json(value: Any) -> str:
    """``encoding/json.Marshal`` of a decoded attribute value (lists of scalars)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, Sequence):
        return "[" + ",".join(go_json(item) for item in value) + "]"
    raise TypeError(f"no Go JSON form here for {value!r}")


def go_as_string(value: Any) -> str:
    """pdata ``Value.AsString`` of an attribute value as OTLP carries it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return go_json(value)
    if isinstance(value, Sequence):
        return go_json(list(value))
    raise TypeError(f"no AsString here for {value!r}")


def row_from_attributes(attributes: Mapping[str, Any]) -> dict[str, str]:
    """The ``LogAttributes`` map the exporter writes for a record's attributes."""
    return {key: go_as_string(value) for key, value in attributes.items()}


_ITEM = {field.name: field.kind for field in ITEM_FIELDS}
_BUDGET = {field.name: field.kind for field in BUDGET_FIELDS}
_HINTS = {cls.type: get_type_hints(cls) for cls in KNOWN_EVENTS}


def _by_kind(kind: WireKind, text: str) -> Any:
    if kind is WireKind.INT:
        return int(text)
    if kind in (WireKind.FLOAT, WireKind.HINT):
        return float(text)
    if kind is WireKind.BOOL:
        return text == "true"
    if kind is WireKind.TAGS:
        return json.loads(text)
    return text


def _by_hint(hint: Any, text: str) -> Any:
    if hint in (int, int | None):
        return int(text)
    if hint in (float, float | None):
        return float(text)
    if hint is bool:
        return text == "true"
    if hint == tuple[int, ...]:
        return json.loads(text)
    return text


def typed_attributes(row: Mapping[str, str]) -> dict[str, Any]:
    """A ``LogAttributes`` map read back by the declared type of each flat key (the
    inverse of :func:`row_from_attributes` for cupellation's records)."""
    hints = _HINTS.get(row.get("type", ""), {})
    reason_types = reason_field_types(row.get("reason.name", "")) or {}
    out: dict[str, Any] = {}
    for key, text in row.items():
        head, _, name = key.partition(".")
        if key in ("schema", "seq"):
            out[key] = int(text)
        elif head == "item" and name in _ITEM:
            out[key] = _by_kind(_ITEM[name], text)
        elif head == "budget" and name in _BUDGET:
            out[key] = _by_kind(_BUDGET[name], text)
        elif head == "pipeline":
            out[key] = (text == "true") if name == "deduplication" else text
        elif head == "reason" and name != "name":
            wanted = reason_types.get(name)
            out[key] = int(text) if wanted is int else float(text) if wanted is float else text
        else:
            out[key] = _by_hint(hints.get(key), text)
    return out
