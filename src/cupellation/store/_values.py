"""Attribute values as the Collector writes them, and back.

The Collector's ``clickhouse`` exporter stores every log attribute as a string, made by
pdata's ``pcommon.Value.AsString()`` (``pdata/pcommon/value.go``): a string as it is,
an int in decimal, a bool ``true``/``false``, a double by ``float64AsString`` (ES6
number-to-string: ``0.5``, ``1e-7``, ``1.5e+21``, ``100000000000000000000``), a list
as Go's ``json.Marshal`` writes it (compact; ``<``, ``>``, ``&``, U+2028 and U+2029
escaped). :func:`attribute_text` does the same in Python.

The way back reads each string by the type its key is declared with (the event
declarations, :data:`~cupellation._model.wire.ITEM_FIELDS` and the reasons), so
``1.5e+21`` (Go) and ``1.5e21`` (ClickHouse) are the same float, and
:func:`canonical_line` gives the event's canonical JSON line: the one its digest was
computed over. A key of no declared type (an unknown event's field, a pipeline value,
another program's attribute) is read as a bool, an integer or a number when it looks
like one, else as text; a guess that differs from what was written makes the run's
digest differ, so the run is reported incomplete, never silently wrong. A string
that does not parse as its declared type is passed on as text, and the event's
decoder names the field.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Final, get_type_hints

import msgspec

from .._model.wire import BUDGET_FIELDS, ITEM_FIELDS, WireKind
from ..events._types import KNOWN_EVENTS, PIPELINE_KEYS, StageName
from ..reasons import KNOWN_EXCLUSION_REASONS

__all__ = ["UNREADABLE_ROW", "Kind", "attribute_text", "attributes_of", "canonical_line",
           "go_float", "kind_of", "typed_flat", "typed_text"]


class Kind(enum.Enum):
    """How an attribute's string is read back."""

    TEXT = "text"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    JSON = "json"      #: a list, as JSON text
    GUESS = "guess"    #: no declared type: bool, int, number or text, as it looks


_INT: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_BOOLS: Final = {"true": True, "false": False}


def go_float(value: float) -> str:
    """``value`` as pdata's ``float64AsString`` writes it (ES6 style)."""
    if not math.isfinite(value):
        return "json: unsupported value: " + ("NaN" if math.isnan(value)
                                              else ("+Inf" if value > 0 else "-Inf"))
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    assert isinstance(exponent, int)
    prefix = "-" if sign else ""
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        power = exponent + len(text) - 1
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        shown = f"-{-power}" if power < 0 else f"+{power:02d}"
        return f"{prefix}{mantissa}e{shown}"
    if exponent >= 0:
        return prefix + text + "0" * exponent
    point = len(text) + exponent
    if point > 0:
        return f"{prefix}{text[:point]}.{text[point:]}"
    return f"{prefix}0.{'0' * -point}{text}"


_GO_ESCAPES: Final = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                      0x2028: "\\u2028", 0x2029: "\\u2029"}


def _go_json(value: Any) -> str:
    """A list as Go's ``encoding/json`` writes it (compact, HTML-escaped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return msgspec.json.encode(value).decode("utf-8").translate(_GO_ESCAPES)
    if isinstance(value, list | tuple):
        return "[" + ",".join(_go_json(entry) for entry in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_go_json(str(k))}:{_go_json(v)}"
                              for k, v in sorted(value.items())) + "}"
    return _go_json(str(value))


def attribute_text(value: Any) -> str:
    """One flat value as the Collector stores it (Go's ``AsString``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    return _go_json(value)


def attributes_of(flat: Mapping[str, Any]) -> dict[str, str]:
    """A flat mapping as the ``LogAttributes`` the Collector writes for it."""
    return {key: attribute_text(value) for key, value in flat.items()}


def _kind_of_hint(hint: Any) -> Kind | None:
    table: dict[Any, Kind] = {
        str: Kind.TEXT, str | None: Kind.TEXT, int: Kind.INT, int | None: Kind.INT,
        float: Kind.FLOAT, float | None: Kind.FLOAT, bool: Kind.BOOL, datetime: Kind.TEXT,
        StageName: Kind.TEXT, StageName | None: Kind.TEXT, tuple[int, ...]: Kind.JSON,
        int | str: Kind.GUESS}
    for known, kind in table.items():
        if hint == known:
            return kind
    return None


_WIRE_KINDS: Final = {WireKind.INT: Kind.INT, WireKind.FLOAT: Kind.FLOAT,
                      WireKind.HINT: Kind.FLOAT, WireKind.BOOL: Kind.BOOL,
                      WireKind.TAGS: Kind.JSON}


def _declared_kinds() -> dict[str, Kind]:
    """Every declared flat key and how its string is read (one table for all events:
    a key has one type wherever it appears)."""
    kinds: dict[str, Kind] = {"type": Kind.TEXT, "schema": Kind.INT, "run_id": Kind.TEXT,
                              "seq": Kind.INT, "reason.name": Kind.TEXT}
    for cls in KNOWN_EVENTS:
        for name, hint in get_type_hints(cls).items():
            if name in ("type",) or name.startswith("_"):
                continue
            kind = _kind_of_hint(hint)
            if kind is not None:
                kinds.setdefault(name, kind)
    for prefix, fields in (("item.", ITEM_FIELDS), ("budget.", BUDGET_FIELDS)):
        for wire in fields:
            kinds[prefix + wire.name] = _WIRE_KINDS.get(wire.kind, Kind.TEXT)
    for key in PIPELINE_KEYS:
        kinds["pipeline." + key] = Kind.GUESS
    for reason in KNOWN_EXCLUSION_REASONS.values():
        for name, hint in get_type_hints(reason).items():
            kind = _kind_of_hint(hint)
            if kind is not None and name in reason.__struct_fields__:
                kinds.setdefault("reason." + name, kind)
    return kinds


_KINDS: Final = _declared_kinds()


def _guess(text: str) -> Any:
    if text in _BOOLS:
        return _BOOLS[text]
    if _INT.fullmatch(text):
        return int(text)
    if _NUMBER.fullmatch(text):
        return float(text)
    return text


def _typed(kind: Kind, text: str) -> Any:
    if kind is Kind.TEXT:
        return text
    if kind is Kind.INT:
        return int(text) if _INT.fullmatch(text) else text
    if kind is Kind.FLOAT:
        return float(text) if _NUMBER.fullmatch(text) else text
    if kind is Kind.BOOL:
        return _BOOLS.get(text, text)
    if kind is Kind.JSON:
        try:
            return msgspec.json.decode(text)
        except msgspec.DecodeError:
            return text
    return _guess(text)


def kind_of(key: str) -> Kind:
    """How the string of the flat key ``key`` is read back (:attr:`Kind.GUESS` for a
    key of no declared type)."""
    return _KINDS.get(key, Kind.GUESS)


def typed_text(kind: Kind, text: str) -> Any:
    """One attribute string read back as ``kind`` (text that does not parse as it is
    passed on as text)."""
    return _typed(kind, text)


def typed_flat(attributes: Mapping[str, str]) -> dict[str, Any]:
    """``LogAttributes`` read back into the flat mapping, each value by its key's
    declared type (see the module's docstring)."""
    kinds = _KINDS
    guess = Kind.GUESS
    return {key: _typed(kinds.get(key, guess), text) for key, text in attributes.items()}


_encode: Final = msgspec.json.Encoder().encode


#: What stands for a row no JSON line can hold (text that is not Unicode): a line the
#: log reader counts as damaged, so the run it belonged to shows a gap.
UNREADABLE_ROW: Final = b'{"schema":3,"run_id":<a stored row that is not Unicode text>}\n'


def canonical_line(attributes: Mapping[str, str]) -> bytes:
    """The JSON line (with its newline) of a row's ``LogAttributes``, typed back: what
    the log reader folds and hashes like any audit-log line (:data:`UNREADABLE_ROW`
    for a row holding text that is not Unicode, such as a lone surrogate)."""
    try:
        return _encode(typed_flat(attributes)) + b"\n"
    except (UnicodeError, msgspec.EncodeError):
        return UNREADABLE_ROW
