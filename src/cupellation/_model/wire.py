"""The wire shapes of ContextItem and ContextBudget, declared once.

Each field is declared here one time — its attribute name, its key in the wire format's
JSON, what its values look like, its default and when it is written — and every
form is derived from the declaration:

- the wire format's JSON (``ContextItem.to_dict``/``from_dict``, ``ContextBudget``'s);
- the event stream's flat form (``item.<name>`` and ``budget.<name>`` keys, which
  JSON lines, log records and span attributes carry): :func:`to_flat`,
  :func:`from_flat`;
- the ``msgspec`` structs of the fast paths (the report's JSON writer, the log
  reader), built with ``msgspec.defstruct`` by :func:`seed_struct` and
  :func:`flat_struct_fields`.

A new field is one more :class:`WireField` line; no encoder or decoder lists the
fields again.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Final, Literal

import msgspec

from ..exceptions import DecodeError, InvalidValueError
from .jsondata import (
    check_known_keys,
    fits_int64,
    format_timestamp,
    hint_from_json,
    hint_to_json,
    json_list,
    json_object,
    parse_timestamp,
    thaw_json,
    unknown_key_error,
)

__all__ = [
    "BUDGET_FIELDS",
    "ITEM_FIELDS",
    "REQUIRED",
    "WireField",
    "WireKind",
    "check_flat_keys",
    "flat_get",
    "flat_int",
    "column_writer",
    "flat_writer",
    "flat_json_text",
    "flat_struct_fields",
    "from_flat",
    "from_seed",
    "read_flat_value",
    "seed_struct",
    "to_flat",
    "to_seed",
]


class WireKind(enum.Enum):
    """What a field's values look like on the wire."""

    TEXT = "text"            #: a string
    NAME = "name"            #: a kind or source name (``ContextKind``), as its text
    INT = "int"              #: a signed 64-bit integer
    FLOAT = "float"          #: a finite number
    HINT = "hint"            #: a number; the wire format also spells NaN and infinities as text
    BOOL = "bool"            #: true or false
    TAGS = "tags"            #: a list of strings
    METADATA = "metadata"    #: JSON data: a JSON object, compact JSON text when flat
    SLOTS = "slots"          #: ``{kind: tokens}``: a JSON object, JSON text when flat
    TIMESTAMP = "timestamp"  #: ISO 8601 text with an offset (written in UTC with ``Z``)


class _Required:
    """The default of a field that must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: The ``default`` of a field that has none.
REQUIRED: Final[Any] = _Required()


@dataclass(frozen=True, slots=True)
class WireField:
    """One field of a wire shape.

    ``name`` is the attribute and the flat key's last part (``item.<name>``);
    ``key`` the wire format's JSON key. ``default`` is what an absent key stands for
    (:data:`REQUIRED` when it must be present). The wire format's JSON writes a field
    when ``seed_always`` or when it is not at its default; the flat form writes
    it when ``flat_always`` (and then requires it when decoding) or when it is
    not at its default.
    """

    name: str
    key: str
    kind: WireKind
    default: Any = REQUIRED
    seed_always: bool = False
    flat_always: bool = False

    def is_default(self, value: Any) -> bool:
        """True when ``value`` is what an absent key stands for (so it is left out)."""
        default = self.default
        if default is REQUIRED:
            return False
        kind = self.kind
        if kind is WireKind.NAME:
            return bool(value.value == default)
        if kind in (WireKind.TAGS, WireKind.METADATA, WireKind.SLOTS):
            return not value
        if default is None or type(default) is bool:
            return value is default
        return bool(value == default)


#: ContextItem, in the wire format's order (``seeds/context-item.md``).
ITEM_FIELDS: Final[tuple[WireField, ...]] = (
    WireField("content", "content", WireKind.TEXT, seed_always=True, flat_always=True),
    WireField("tokens", "tokens", WireKind.INT, seed_always=True, flat_always=True),
    WireField("kind", "kind", WireKind.NAME, "Message", seed_always=True, flat_always=True),
    WireField("source", "source", WireKind.NAME, "Chat", flat_always=True),
    WireField("priority", "priority", WireKind.INT, None),
    WireField("tags", "tags", WireKind.TAGS, ()),
    WireField("metadata", "metadata", WireKind.METADATA, None),
    WireField("timestamp", "timestamp", WireKind.TIMESTAMP, None),
    WireField("future_relevance_hint", "futureRelevanceHint", WireKind.HINT, None),
    WireField("pinned", "pinned", WireKind.BOOL, False),
    WireField("original_tokens", "originalTokens", WireKind.INT, None),
)

#: ContextBudget (``spec/src/data-model/context-budget.md``).
BUDGET_FIELDS: Final[tuple[WireField, ...]] = (
    WireField("max_tokens", "maxTokens", WireKind.INT, seed_always=True, flat_always=True),
    WireField("target_tokens", "targetTokens", WireKind.INT, seed_always=True,
              flat_always=True),
    WireField("output_reserve", "outputReserve", WireKind.INT, 0, flat_always=True),
    WireField("reserved_slots", "reservedSlots", WireKind.SLOTS, None),
    WireField("estimation_safety_margin_percent", "estimationSafetyMarginPercent",
              WireKind.FLOAT, 0.0, flat_always=True),
)


# -- the wire format's JSON -----------------------------------------------------------------


def to_seed(fields: Sequence[WireField], value: Any) -> dict[str, Any]:
    """``value``'s fields as the wire format's JSON object (plain dicts and lists)."""
    out: dict[str, Any] = {}
    for field in fields:
        current = getattr(value, field.name)
        if field.seed_always or not field.is_default(current):
            out[field.key] = _seed_value(field.kind, current)
    return out


def _seed_value(kind: WireKind, value: Any) -> Any:
    if kind is WireKind.NAME:
        return value.value
    if kind is WireKind.TAGS:
        return list(value)
    if kind is WireKind.METADATA:
        return thaw_json(value)
    if kind is WireKind.SLOTS:
        return {name.value: tokens for name, tokens in value.items()}
    if kind is WireKind.TIMESTAMP:
        return format_timestamp(value)
    if kind is WireKind.HINT:
        return hint_to_json(value)
    return value


def from_seed(owner: str, fields: Sequence[WireField], data: Mapping[str, Any]
              ) -> dict[str, Any]:
    """The constructor's arguments for the wire format's JSON object ``data``.

    Raises :class:`~cupellation.exceptions.DecodeError` naming the key for a
    key ``owner`` does not have (suggesting the closest), a required key that is
    missing, or a value of the wrong JSON shape; the constructor checks the rest.
    """
    check_known_keys(owner, data, [field.key for field in fields])
    arguments: dict[str, Any] = {}
    for field in fields:
        key = field.key
        if key not in data and field.default is REQUIRED:
            raise DecodeError(key, None, "is required")
        kind = field.kind
        if kind is WireKind.TAGS:
            value: Any = json_list(data, key)
        elif kind in (WireKind.METADATA, WireKind.SLOTS):
            value = json_object(data, key)
        else:
            value = data.get(key, field.default)
            if kind is WireKind.TIMESTAMP and value is not None:
                value = parse_timestamp(value, field_name=key)
            elif kind is WireKind.HINT:
                value = hint_from_json(value)
        arguments[field.name] = value
    return arguments


# -- the flat form -----------------------------------------------------------------------


def flat_json_text(key: str, value: Any) -> str:
    """JSON data as the flat form carries it: compact text, keys sorted."""
    try:
        return msgspec.json.encode(value, order="sorted").decode("utf-8")
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidValueError(key, value, f"cannot be written as JSON ({exc})") from None


def to_flat(fields: Sequence[WireField], value: Any, prefix: str, out: dict[str, Any]) -> None:
    """Write ``value``'s fields into the flat mapping ``out`` as ``<prefix><name>`` keys
    (defaults left out, unless a field is always written).

    Raises :class:`~cupellation.exceptions.InvalidValueError` for a number no
    projection can carry (NaN, an infinity).
    """
    writer = _WRITERS.get((id(fields), prefix))
    if writer is None:
        writer = _WRITERS[(id(fields), prefix)] = flat_writer(fields, prefix)
    writer(value, out)


_WRITERS: dict[tuple[int, str], Callable[[Any, dict[str, Any]], int]] = {}


def _finite_value(key: str, value: float) -> float:
    if not math.isfinite(value):
        raise InvalidValueError(key, value, "must be finite to be projected")
    return value


def _finite_column(column: list[Any]) -> bool:
    """True when the sum of ``column``'s values other than None and zero is finite,
    so that every one of them is (False also when the sum overflows or a value is
    not a number, or infinities of both signs: the caller then checks value by
    value)."""
    try:
        return math.isfinite(math.fsum(filter(None, column)))
    except (TypeError, ValueError, OverflowError):  # (ValueError: inf + -inf)
        return False


def _slots_text(key: str, value: Mapping[Any, int]) -> str:
    return flat_json_text(key, {name.value: tokens for name, tokens in value.items()})


#: How the generated writer turns a value of each kind into its flat form.
_CONVERSIONS: Final[Mapping[WireKind, str]] = {
    WireKind.NAME: "v = v.value",
    WireKind.TAGS: "v = list(v)",
    WireKind.TIMESTAMP: "v = format_timestamp(v)",
    WireKind.METADATA: "v = flat_json_text({key}, thaw_json(v))",
    WireKind.SLOTS: "v = _slots_text({key}, v)",
    WireKind.FLOAT: "_finite_value({key}, v)",
    WireKind.HINT: "_finite_value({key}, v)",
}


def flat_writer(fields: Sequence[WireField], prefix: str, skip: Sequence[str] = ()
                ) -> Callable[[Any, dict[str, Any]], int]:
    """The function writing ``value``'s ``fields`` (less those named in ``skip``) into a
    flat mapping as ``<prefix><name>`` keys, defaults left out (what :func:`to_flat`
    does), returning how many characters of text it wrote (strings, and strings in
    lists) for a projection that counts them. A number no projection can carry (NaN,
    an infinity) raises :class:`~cupellation.exceptions.InvalidValueError`.

    The function is generated from the declaration, one straight-line step per
    field (as ``dataclasses`` and ``msgspec`` generate their own methods): a loop
    over the fields costs a projection more than the rest of its work per item.
    """
    lines = ["def write(value, out):", "    length = 0"]
    for field in fields:
        if field.name in skip:
            continue
        key = repr(prefix + field.name)
        lines.append(f"    v = value.{field.name}")
        indent = "    "
        if not field.flat_always:
            # The negation of WireField.is_default, for this field's kind and default.
            test = ("v" if field.kind in (WireKind.TAGS, WireKind.METADATA, WireKind.SLOTS)
                    else f"v.value != {field.default!r}" if field.kind is WireKind.NAME
                    else "v is not None" if field.default is None
                    else "v is not False" if field.default is False
                    else f"v != {field.default!r}")
            lines.append(f"    if {test}:")
            indent = "        "
        conversion = _CONVERSIONS.get(field.kind)
        if conversion is not None:
            lines.append(indent + conversion.format(key=key))
        lines.append(f"{indent}out[{key}] = v")
        if field.kind in (WireKind.TEXT, WireKind.NAME, WireKind.TIMESTAMP,
                          WireKind.METADATA, WireKind.SLOTS):
            lines.append(f"{indent}length += len(v)")
        elif field.kind is WireKind.TAGS:
            lines.append(f"{indent}length += sum(map(len, v))")
    lines.append("    return length")
    namespace: dict[str, Any] = {
        "format_timestamp": format_timestamp, "flat_json_text": flat_json_text,
        "thaw_json": thaw_json, "_slots_text": _slots_text, "_finite_value": _finite_value}
    exec("\n".join(lines), namespace)  # the source is built above from the fields
    write: Callable[[Any, dict[str, Any]], int] = namespace["write"]
    return write


#: The conversions of :data:`_CONVERSIONS` as expressions of ``v`` (for comprehensions).
_EXPRESSIONS: Final[Mapping[WireKind, str]] = {
    WireKind.NAME: "v.value",
    WireKind.TAGS: "list(v)",
    WireKind.TIMESTAMP: "cached_timestamp(v)",
    WireKind.METADATA: "flat_json_text({key}, thaw_json(v))",
    WireKind.SLOTS: "_slots_text({key}, v)",
    WireKind.FLOAT: "_finite_value({key}, v)",
    WireKind.HINT: "_finite_value({key}, v)",
}

#: Timestamp text by timestamp: the same items are traced run after run (an agent
#: loop's history), and formatting costs more than the rest of an item's columns.
_cached_timestamp = functools.lru_cache(maxsize=65_536)(format_timestamp)


def column_writer(fields: Sequence[WireField], prefix: str, skip: Sequence[str] = ()
                  ) -> Callable[[Sequence[Any], dict[str, list[Any]]], None]:
    """The column-wise twin of :func:`flat_writer`: the function writing, for a
    sequence of values, one list per field (less those in ``skip``) under
    ``<prefix><name>``, holding what :func:`flat_writer` would write for each value
    and None where it would write nothing (a default); a field that is default for
    every value gets no list. Raises as :func:`flat_writer` does. Generated from the
    declaration, one comprehension per field."""
    lines = ["def write(values, out):"]
    for field in fields:
        if field.name in skip:
            continue
        key = repr(prefix + field.name)
        expression = _EXPRESSIONS.get(field.kind, "v").format(key=key)
        # One pass a field: ``for v in [x.<name>]`` binds ``v`` as a plain assignment
        # (CPython 3.9+ compiles the idiom so), no intermediate list of the values.
        each = f"for x in values for v in [x.{field.name}]"
        if field.flat_always:
            lines.append(f"    out[{key}] = [{expression} {each}]")
            continue
        test = ("v" if field.kind in (WireKind.TAGS, WireKind.METADATA, WireKind.SLOTS)
                else f"v.value != {field.default!r}" if field.kind is WireKind.NAME
                else "v is not None" if field.default is None
                else "v is not False" if field.default is False
                else f"v != {field.default!r}")
        if field.kind in (WireKind.FLOAT, WireKind.HINT) and field.default is None:
            # The values as they are (None stays None), checked finite by one C-level
            # sum; only a column that fails it is checked value by value, raising for
            # its first non-finite value as the per-value check would.
            lines.append(f"    column = [x.{field.name} for x in values]")
            lines.append("    if not _finite_column(column):")
            lines.append(f"        [{expression} for v in column if v is not None]")
        elif expression == "v" and test == "v is not None":
            lines.append(f"    column = [x.{field.name} for x in values]")  # (None stays)
        else:
            lines.append(f"    column = [{expression} if {test} else None {each}]")
        lines.append("    if column.count(None) != len(column):")
        lines.append(f"        out[{key}] = column")
    namespace: dict[str, Any] = {
        "format_timestamp": format_timestamp, "flat_json_text": flat_json_text,
        "thaw_json": thaw_json, "_slots_text": _slots_text, "_finite_value": _finite_value,
        "cached_timestamp": _cached_timestamp, "_finite_column": _finite_column}
    exec("\n".join(lines), namespace)  # the source is built above from the fields
    write: Callable[[Sequence[Any], dict[str, list[Any]]], None] = namespace["write"]
    return write


def check_flat_keys(owner: str, fields: Sequence[WireField], data: Mapping[str, Any],
                    prefix: str) -> None:
    """Refuse a ``<prefix>*`` key that is not one of ``fields`` (``item.tagz``), naming
    it and the closest known key."""
    names = _NAMES.get(id(fields))
    if names is None:
        names = _NAMES[id(fields)] = frozenset(field.name for field in fields)
    start = len(prefix)
    for key in data:
        if key.startswith(prefix) and key[start:] not in names:
            known = [prefix + field.name for field in fields]
            raise unknown_key_error(owner, key, data[key], known)


_NAMES: dict[int, frozenset[str]] = {}


def flat_get(data: Mapping[str, Any], key: str, required: bool) -> Any:
    """The value of ``key`` in a flat mapping: a required key must be present and not
    null; an optional one is None when absent, and must be absent rather than null."""
    value = data.get(key, _MISSING)
    if value is _MISSING:
        if required:
            raise DecodeError(key, None, "is required")
        return None
    if value is None:
        raise DecodeError(key, None, "must not be null" if required
                          else "must be omitted, not null, when absent")
    return value


def from_flat(owner: str, fields: Sequence[WireField], data: Mapping[str, Any], prefix: str
              ) -> dict[str, Any]:
    """The constructor's arguments for the ``<prefix><name>`` keys of a flat mapping.

    Strict: an unknown ``<prefix>*`` key, a missing required key, a null, or a
    value of the wrong type raises :class:`~cupellation.exceptions.DecodeError`
    naming the key.
    """
    check_flat_keys(owner, fields, data, prefix)
    plan = _PLANS.get((id(fields), prefix))
    if plan is None:
        plan = _PLANS[(id(fields), prefix)] = [
            (field.name, prefix + field.name, field.flat_always, field.default,
             _FLAT_READERS[field.kind]) for field in fields]
    arguments: dict[str, Any] = {}
    for name, key, required, default, read in plan:
        value = data.get(key, _MISSING)
        if value is _MISSING and not required:
            arguments[name] = default
        elif value is _MISSING or value is None:
            flat_get(data, key, required)  # raises, naming the key
        else:
            arguments[name] = read(key, value)
    return arguments


_MISSING: Any = object()
_PLANS: dict[tuple[int, str], list[tuple[str, str, bool, Any, Callable[[str, Any], Any]]]] = {}


def read_flat_value(kind: WireKind, key: str, value: Any) -> Any:
    """A flat value of ``kind`` checked (DecodeError naming ``key``) and converted."""
    return _FLAT_READERS[kind](key, value)


def _read_text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise DecodeError(key, value, "must be a string")
    return value


def _read_timestamp(key: str, value: Any) -> Any:
    return parse_timestamp(_read_text(key, value), field_name=key)


def _read_number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DecodeError(key, value, "must be a number")
    if not math.isfinite(value):
        raise DecodeError(key, value, "must be a finite number")
    return float(value)


def _read_bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise DecodeError(key, value, "must be true or false")
    return value


def _read_tags(key: str, value: Any) -> tuple[str, ...]:
    if not (isinstance(value, list | tuple) and all(isinstance(t, str) for t in value)):
        raise DecodeError(key, value, "must be a list of strings")
    return tuple(value)


INT64_PROBLEM: Final = ("must fit in a signed 64-bit integer (the specification's integers, "
                        "and what OpenTelemetry and protobuf carry)")


def flat_int(key: str, value: Any) -> int:
    """``value`` checked to be an integer within int64 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise DecodeError(key, value, "must be an integer")
    number = value if type(value) is int else int(value)
    if not fits_int64(number):
        raise DecodeError(key, value, INT64_PROBLEM)
    return number


def flat_json_value(key: str, value: Any) -> Any:
    """The JSON data of a flat JSON-text value (metadata, reserved slots)."""
    if not isinstance(value, str):
        raise DecodeError(key, value, "must be a JSON text")
    try:
        return msgspec.json.decode(value)
    except RecursionError:
        raise DecodeError(key, value, "nests arrays or objects too deeply") from None
    except ValueError as exc:  # msgspec.DecodeError, or a lone surrogate in the text
        raise DecodeError(key, value, f"is not valid JSON ({exc})") from None


#: How each kind of flat value is checked and converted.
_FLAT_READERS: Final[Mapping[WireKind, Callable[[str, Any], Any]]] = {
    WireKind.TEXT: _read_text, WireKind.NAME: _read_text, WireKind.TIMESTAMP: _read_timestamp,
    WireKind.INT: flat_int, WireKind.FLOAT: _read_number, WireKind.HINT: _read_number,
    WireKind.BOOL: _read_bool, WireKind.TAGS: _read_tags,
    WireKind.METADATA: flat_json_value, WireKind.SLOTS: flat_json_value,
}


# -- structs for the fast paths -------------------------------------------------------------

_INT64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_TEXT = Annotated[str, msgspec.Meta(min_length=1)]
_AWARE = Annotated[datetime, msgspec.Meta(tz=True)]
#: Values the flat fast path accepts: only what the canonical writer writes (an empty
#: tags list, ``pinned: false`` or a naive time would not be written, so the slow
#: path, which knows every rule, decides such a line).
_FLAT_TYPES: Final[Mapping[WireKind, Any]] = {
    WireKind.TEXT: _TEXT,
    WireKind.NAME: _TEXT,
    WireKind.INT: _INT64,
    WireKind.FLOAT: float,
    WireKind.HINT: float,
    WireKind.BOOL: Literal[True],
    WireKind.TAGS: Annotated[tuple[str, ...], msgspec.Meta(min_length=1)],
    WireKind.METADATA: _TEXT,
    WireKind.SLOTS: _TEXT,
    WireKind.TIMESTAMP: _AWARE,
}


def flat_struct_fields(fields: Sequence[WireField], attribute_prefix: str, key_prefix: str
                       ) -> list[tuple[str, Any, Any]]:
    """``msgspec.defstruct`` fields reading ``fields`` from their flat keys: attribute
    ``<attribute_prefix><name>``, key ``<key_prefix><name>``; a field that is not
    always written is ``UNSET`` when absent."""
    out = []
    for field in fields:
        kind: Any = _FLAT_TYPES[field.kind]
        if field.flat_always:
            spec = msgspec.field(name=key_prefix + field.name)
        else:
            kind = kind | msgspec.UnsetType
            spec = msgspec.field(name=key_prefix + field.name, default=msgspec.UNSET)
        out.append((attribute_prefix + field.name, kind, spec))
    return out


def seed_struct(name: str, fields: Sequence[WireField], **options: Any) -> type[msgspec.Struct]:
    """A struct that encodes as the wire format's JSON object of ``fields`` (defaults left out)."""
    spec = []
    for field in fields:
        kind = _SEED_TYPES[field.kind]
        if field.seed_always or field.default is REQUIRED:
            spec.append((field.name, kind, msgspec.field(name=field.key)))
        else:
            default = field.default if field.kind is not WireKind.TAGS else ()
            spec.append((field.name, kind | None if default is None else kind,
                         msgspec.field(name=field.key, default=default)))
    return msgspec.defstruct(name, spec, omit_defaults=True, **options)


_SEED_TYPES: Final[Mapping[WireKind, Any]] = {
    WireKind.TEXT: str, WireKind.NAME: str, WireKind.INT: int, WireKind.FLOAT: float,
    WireKind.HINT: float | str, WireKind.BOOL: bool, WireKind.TAGS: tuple[str, ...],
    WireKind.METADATA: Any, WireKind.SLOTS: Any, WireKind.TIMESTAMP: datetime,
}
