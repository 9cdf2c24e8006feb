"""The flat form of events: one mapping with dotted keys, derived from the declarations.

Each event field gets a codec chosen from its declared type. A codec writes its
value under one key or, for a nested value, under ``<field>.<name>`` keys: an
item's and a budget's from their wire declarations (:mod:`cupellation._model.wire`),
a reason's from the reason's own declaration, the pipeline description from
:data:`~.types.PIPELINE_KEYS`. Values are only str, int, float, bool or lists of
those; absent optional values are omitted, never null.

Every mapping starts ``type``, ``schema``, ``run_id``, ``seq``, then the event's
fields in declaration order (a known reason's fields sorted by name): the order
of the canonical JSON line (:func:`event_to_json`), which the run digest hashes.

Decoding is strict inside cupellation's namespaces: an unknown ``item.*``,
``budget.*``, ``pipeline.*`` or ``reason.*`` key, or a field that belongs to
another reason, is a :class:`~cupellation.exceptions.DecodeError` naming it.
Any other key is ignored (log shippers and structlog processors add their own).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, get_type_hints

import msgspec

from .._model import ContextBudget, ContextItem, first_wide_int, format_timestamp, parse_timestamp
from .._model.wire import (
    BUDGET_FIELDS,
    INT64_PROBLEM,
    ITEM_FIELDS,
    WireKind,
    flat_get,
    flat_int,
    flat_json_text,
    from_flat,
    read_flat_value,
    to_flat,
)
from ..exceptions import DecodeError, InvalidTypeError, InvalidValueError
from ..reasons import (
    KNOWN_EXCLUSION_REASONS,
    REFERENCE_FIELDS,
    ExclusionReason,
    InclusionReason,
    UnknownExclusionReason,
    exclusion_reason_from_dict,
    inclusion_reason_from_dict,
    reason_fields,
)
from ._types import (
    KNOWN_EVENTS,
    PIPELINE_KEYS,
    BaseEvent,
    PipelineEvent,
    PipelineStage,
    StageName,
    UnknownEvent,
)

__all__ = [
    "EVENT_SCHEMA_VERSION",
    "READABLE_SCHEMAS",
    "event_from_dict",
    "event_from_json",
    "event_to_dict",
    "event_to_json",
    "events_from_json_lines",
    "json_line_error",
    "flat_keys",
    "reason_to_flat",
    "stage_from_name",
]

#: Version of the events' flat form; written as ``schema`` on every event. Version 3
#: added ``digest``, the run information and strict namespaces; version 2 still reads.
EVENT_SCHEMA_VERSION: Final = 3
#: The versions this library decodes.
READABLE_SCHEMAS: Final = frozenset({2, 3})

_Flat = dict[str, Any]
def _check_str(key: str, value: Any) -> str:
    text: str = read_flat_value(WireKind.TEXT, key, value)
    return text


def _check_float(key: str, value: Any) -> float:
    number: float = read_flat_value(WireKind.FLOAT, key, value)
    return number


def _check_json_ints(key: str, value: Any) -> Any:
    """``value`` (decoded JSON kept as it is: an unknown event's or reason's field),
    after checking it holds no integer beyond int64."""
    wide = first_wide_int(value)
    if wide is not None:
        raise DecodeError(key + wide[0], wide[1], INT64_PROBLEM)
    return value


def _finite(key: str, value: float) -> float:
    if not math.isfinite(value):
        raise InvalidValueError(key, value, "must be finite to be projected")
    return value


def _required(data: Mapping[str, Any], key: str) -> Any:
    return flat_get(data, key, True)


def _optional(data: Mapping[str, Any], key: str) -> Any:
    return flat_get(data, key, False)


class _Codec:
    """Encodes one event field into the flat mapping and decodes it back."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def encode(self, value: Any, out: _Flat) -> None:
        raise NotImplementedError

    def decode(self, data: Mapping[str, Any]) -> Any:
        raise NotImplementedError


class _Scalar(_Codec):
    """A string or a number, under the field's own name."""

    __slots__ = ("check", "optional")

    def __init__(self, key: str, check: Callable[[str, Any], Any], optional: bool) -> None:
        super().__init__(key)
        self.check = check
        self.optional = optional

    def encode(self, value: Any, out: _Flat) -> None:
        if value is None:
            if not self.optional:
                raise InvalidValueError(self.key, None, "is required")
            return
        if type(value) is float:
            _finite(self.key, value)
        out[self.key] = value

    def decode(self, data: Mapping[str, Any]) -> Any:
        value = (_optional if self.optional else _required)(data, self.key)
        return None if value is None else self.check(self.key, value)


class _Flag(_Codec):
    """A bool that defaults to false: written only when true."""

    __slots__ = ()

    def encode(self, value: Any, out: _Flat) -> None:
        if value:
            out[self.key] = True

    def decode(self, data: Mapping[str, Any]) -> Any:
        value = _optional(data, self.key)
        if value is not None and not isinstance(value, bool):
            raise DecodeError(self.key, value, "must be true or false")
        return bool(value)


class _Timestamp(_Codec):
    __slots__ = ()

    def encode(self, value: datetime, out: _Flat) -> None:
        out[self.key] = format_timestamp(value)

    def decode(self, data: Mapping[str, Any]) -> datetime:
        return parse_timestamp(_check_str(self.key, _required(data, self.key)),
                               field_name=self.key)


_STAGES_BY_NAME: Final = {stage.value: stage for stage in PipelineStage}


def stage_from_name(name: str) -> StageName:
    """A stage as events hold it: the known :class:`PipelineStage`, or the name."""
    return _STAGES_BY_NAME.get(name, name)


class _Stage(_Codec):
    __slots__ = ("optional",)

    def __init__(self, key: str, optional: bool) -> None:
        super().__init__(key)
        self.optional = optional

    def encode(self, value: StageName | None, out: _Flat) -> None:
        if value is not None:
            out[self.key] = value.value if isinstance(value, PipelineStage) else value

    def decode(self, data: Mapping[str, Any]) -> StageName | None:
        value = (_optional if self.optional else _required)(data, self.key)
        if value is None:
            return None
        return stage_from_name(_check_str(self.key, value))


class _IntTuple(_Codec):
    __slots__ = ()

    def encode(self, value: tuple[int, ...], out: _Flat) -> None:
        out[self.key] = list(value)

    def decode(self, data: Mapping[str, Any]) -> tuple[int, ...]:
        value = _required(data, self.key)
        if not isinstance(value, list | tuple):
            raise DecodeError(self.key, value, "must be a list of integers")
        return tuple(flat_int(f"{self.key}[{k}]", v) for k, v in enumerate(value))


class _InProcessOnly(_Codec):
    """A field that never leaves the process (a run's exception object)."""

    __slots__ = ()

    def encode(self, value: Any, out: _Flat) -> None:
        pass

    def decode(self, data: Mapping[str, Any]) -> Any:
        return None


class _Pipeline(_Codec):
    """The pipeline description, as ``pipeline.<key>`` keys (:data:`PIPELINE_KEYS`)."""

    __slots__ = ("keys", "prefix")

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.prefix = key + "."
        self.keys = frozenset(PIPELINE_KEYS)

    def encode(self, value: Mapping[str, Any], out: _Flat) -> None:
        prefix = self.prefix
        unknown = sorted(set(value) - self.keys)
        if unknown:
            raise InvalidValueError(prefix + str(unknown[0]), value[unknown[0]],
                                    f"is not a pipeline field (known: {', '.join(PIPELINE_KEYS)})")
        for name in PIPELINE_KEYS:
            if name in value:
                inner = value[name]
                if not isinstance(inner, str | int | float | bool):
                    raise InvalidTypeError(prefix + name, inner, "a string, number or bool")
                if type(inner) is float:
                    _finite(prefix + name, inner)
                out[prefix + name] = inner

    def decode(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        prefix, start = self.prefix, len(self.prefix)
        found: dict[str, Any] = {}
        for key, value in data.items():
            if not key.startswith(prefix):
                continue
            name = key[start:]
            if name not in self.keys:
                raise DecodeError(key, value, f"is not a pipeline field (known: "
                                  f"{', '.join(prefix + k for k in PIPELINE_KEYS)})")
            if not isinstance(value, str | int | float | bool):
                raise DecodeError(key, value, "must be a string, number or bool")
            if type(value) is int:
                flat_int(key, value)
            elif type(value) is float:
                _check_float(key, value)
            found[name] = value
        return MappingProxyType({name: found[name] for name in PIPELINE_KEYS if name in found})


class _Item(_Codec):
    """A ContextItem as ``item.<field>`` keys (``ITEM_FIELDS``)."""

    __slots__ = ("prefix",)

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.prefix = key + "."

    def encode(self, item: ContextItem, out: _Flat) -> None:
        to_flat(ITEM_FIELDS, item, self.prefix, out)

    def decode(self, data: Mapping[str, Any]) -> ContextItem:
        arguments = from_flat("ContextItem", ITEM_FIELDS, data, self.prefix)
        try:
            return ContextItem(**arguments)
        except (InvalidValueError, InvalidTypeError) as exc:
            raise DecodeError(f"{self.key}.{exc.field}", exc.value, exc.problem) from None


class _Budget(_Codec):
    """A ContextBudget as ``budget.<field>`` keys (``BUDGET_FIELDS``)."""

    __slots__ = ("prefix",)

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.prefix = key + "."

    def encode(self, budget: ContextBudget, out: _Flat) -> None:
        to_flat(BUDGET_FIELDS, budget, self.prefix, out)

    def decode(self, data: Mapping[str, Any]) -> ContextBudget:
        arguments = from_flat("ContextBudget", BUDGET_FIELDS, data, self.prefix)
        try:
            return ContextBudget(**arguments)
        except (InvalidValueError, InvalidTypeError) as exc:
            raise DecodeError(f"{self.key}.{exc.field}", exc.value, exc.problem) from None


class _Reason(_Codec):
    """A reason as ``reason.name`` plus ``reason.<field>`` keys."""

    __slots__ = ("exclusion", "name", "prefix")

    def __init__(self, key: str, exclusion: bool) -> None:
        super().__init__(key)
        self.prefix = key + "."
        self.name = key + ".name"
        self.exclusion = exclusion

    def encode(self, reason: ExclusionReason | InclusionReason, out: _Flat) -> None:
        out[self.name] = reason.name
        prefix = self.prefix
        fields = reason_fields(reason)
        generic = isinstance(reason, UnknownExclusionReason | InclusionReason)
        # A known reason's fields in name order: one order across every reason,
        # which the log reader's typed records share.
        for name in (fields if generic else sorted(fields)):
            value = fields[name]
            if generic and not isinstance(value, str | int | float | bool):
                value = flat_json_text(prefix + name, value)
            elif type(value) is float:
                _finite(prefix + name, value)
            out[prefix + name] = value

    def decode(self, data: Mapping[str, Any]) -> ExclusionReason | InclusionReason:
        name = _check_str(self.name, _required(data, self.name))
        prefix, start = self.prefix, len(self.prefix)
        envelope: dict[str, Any] = {"reason": name}
        for key, value in data.items():
            if key.startswith(prefix) and key != self.name:
                envelope[key[start:]] = _check_json_ints(key, value)
        if not self.exclusion:
            return inclusion_reason_from_dict(envelope)
        reason = exclusion_reason_from_dict(envelope)
        if name in KNOWN_EXCLUSION_REASONS:
            for field in REFERENCE_FIELDS & envelope.keys():
                if not isinstance(envelope[field], int):
                    raise DecodeError(f"{prefix}{field}", envelope[field],
                                      "must be a candidate index in an event")
        return reason


def _codec_for(cls: type[BaseEvent], name: str, hint: Any) -> _Codec:
    """The codec for one declared field, chosen by its type."""
    scalars: dict[Any, Callable[[str, Any], Any]] = {
        str: _check_str, int: flat_int, float: _check_float}
    if hint in scalars:
        return _Scalar(name, scalars[hint], optional=False)
    for base, check in scalars.items():
        if hint == base | None:
            return _Scalar(name, check, optional=True)
    table: dict[Any, Callable[[], _Codec]] = {
        bool: lambda: _Flag(name),
        datetime: lambda: _Timestamp(name),
        StageName: lambda: _Stage(name, optional=False),
        StageName | None: lambda: _Stage(name, optional=True),
        tuple[int, ...]: lambda: _IntTuple(name),
        ContextItem: lambda: _Item(name),
        ContextBudget: lambda: _Budget(name),
        Mapping[str, str | bool]: lambda: _Pipeline(name),
        ExclusionReason: lambda: _Reason(name, exclusion=True),
        InclusionReason: lambda: _Reason(name, exclusion=False),
        BaseException | None: lambda: _InProcessOnly(name),
    }
    for known, make in table.items():
        if hint == known:
            return make()
    raise TypeError(f"{cls.__name__}.{name}: no flat codec for {hint!r}")  # pragma: no cover


class _EventCodec:
    """The flat mapping of one event type, derived from its declaration."""

    __slots__ = ("cls", "fields", "type_name")

    def __init__(self, cls: type[BaseEvent]) -> None:
        self.cls = cls
        self.type_name = cls.type
        hints = get_type_hints(cls)
        self.fields = tuple((name, _codec_for(cls, name, hints[name]))
                            for name in cls.__struct_fields__
                            if name not in ("run_id", "seq"))

    def encode(self, event: BaseEvent) -> _Flat:
        out: _Flat = {"type": self.type_name, "schema": EVENT_SCHEMA_VERSION,
                      "run_id": event.run_id, "seq": event.seq}
        for name, codec in self.fields:
            codec.encode(getattr(event, name), out)
        return out

    def decode(self, data: Mapping[str, Any], run_id: str, seq: int) -> BaseEvent:
        values = {name: codec.decode(data) for name, codec in self.fields}
        return self.cls(run_id=run_id, seq=seq, **values)


_CODECS: Final = {cls.type: _EventCodec(cls) for cls in KNOWN_EVENTS}
_CODECS_BY_CLASS: Final[dict[type, _EventCodec]] = {
    codec.cls: codec for codec in _CODECS.values()}
_ENVELOPE: Final = frozenset({"schema", "type", "run_id", "seq"})


def event_to_dict(event: PipelineEvent) -> dict[str, Any]:
    """The flat mapping of ``event``: dotted keys, JSON-native scalar or list values.

    Raises :class:`~cupellation.exceptions.InvalidValueError` for a value no
    projection can carry (a NaN score, metadata that is not JSON, a pipeline key
    that is not one of :data:`~.types.PIPELINE_KEYS`).
    """
    if isinstance(event, UnknownEvent):
        out: _Flat = {"type": event.event_type, "schema": EVENT_SCHEMA_VERSION,
                      "run_id": event.run_id, "seq": event.seq}
        for key, value in event.fields.items():
            if key not in _ENVELOPE:
                out[key] = value
        return out
    codec = _CODECS_BY_CLASS.get(type(event))
    if codec is None:
        raise InvalidTypeError("event", event, "a cupellation event")
    return codec.encode(event)


def _envelope(data: Mapping[str, Any]) -> tuple[str, str, int]:
    """The checked ``type``, ``run_id`` and ``seq`` of a flat mapping."""
    if not isinstance(data, Mapping):
        raise DecodeError("event", data, "must be a JSON object")
    if set(map(type, data)) - {str}:
        key = next(k for k in data if not isinstance(k, str))
        raise DecodeError("event", key, "keys must be strings, as JSON object keys are")
    schema = _required(data, "schema")
    if type(schema) is not int or schema not in READABLE_SCHEMAS:
        raise DecodeError("schema", schema, f"is not an event schema this version reads "
                          f"({', '.join(map(str, sorted(READABLE_SCHEMAS)))})")
    type_name = _check_str("type", _required(data, "type"))
    run_id = _check_str("run_id", _required(data, "run_id"))
    if not run_id:
        raise DecodeError("run_id", run_id, "must not be empty")
    seq = flat_int("seq", _required(data, "seq"))
    if seq < 0:
        raise DecodeError("seq", seq, "must be >= 0")
    return type_name, run_id, seq


def event_from_dict(data: Mapping[str, Any], *, line: int | None = None) -> PipelineEvent:
    """Decode one event from its flat mapping (the inverse of :func:`event_to_dict`).

    Raises :class:`~cupellation.exceptions.DecodeError` naming the field (and
    ``line``, when given) for a missing, null, mistyped or non-finite value, an
    unknown key in one of cupellation's namespaces, or a ``schema`` this version
    does not read (:data:`READABLE_SCHEMAS`).
    """
    try:
        type_name, run_id, seq = _envelope(data)
        codec = _CODECS.get(type_name)
        if codec is None:
            rest = {k: _check_json_ints(k, v) for k, v in data.items() if k not in _ENVELOPE}
            return UnknownEvent(run_id=run_id, seq=seq, event_type=type_name,
                                fields=MappingProxyType(rest))
        return codec.decode(data, run_id, seq)  # type: ignore[return-value]
    except DecodeError as exc:
        if line is None or exc.line is not None:
            raise
        raise DecodeError(exc.field, exc.value, exc.problem, line=line) from None


_encode_json = msgspec.json.encode


def event_to_json(event: PipelineEvent) -> str:
    """One event as a line of JSON text (its flat mapping), without a newline: the
    canonical line a run's digest hashes."""
    return _encode_json(event_to_dict(event)).decode("utf-8")


def json_line_error(text: str | bytes | bytearray | memoryview, error: Exception,
                    line: int | None) -> DecodeError:
    """The DecodeError for text that is not a JSON value (shown shortened)."""
    shown = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    problem = ("nests arrays or objects too deeply" if isinstance(error, RecursionError)
               else f"is not valid JSON ({error})")
    return DecodeError("event", shown, problem, line=line)


def event_from_json(text: str | bytes, *, line: int | None = None) -> PipelineEvent:
    """Decode one event from JSON text. Invalid JSON, NaN or infinity, and every
    problem :func:`event_from_dict` finds raise :class:`DecodeError`."""
    if not isinstance(text, str | bytes | bytearray | memoryview):
        raise DecodeError("event", type(text).__name__, "must be JSON text (str or bytes)",
                          line=line)
    try:
        data = msgspec.json.decode(text)
    except (ValueError, RecursionError) as exc:
        # msgspec.DecodeError; UnicodeError for text that is not UTF-8 or holds a
        # lone surrogate; RecursionError for arrays or objects nested past
        # Python's recursion limit.
        raise json_line_error(text, exc, line) from None
    return event_from_dict(data, line=line)


def events_from_json_lines(lines: Iterable[str | bytes] | str | bytes, *, first_line: int = 1
                           ) -> Iterator[PipelineEvent]:
    """Decode JSON lines (one event per line; blank lines are skipped), naming the
    line number in any :class:`DecodeError`.

    ``lines`` is an iterable of lines (a file object, a list), or the whole text,
    which is split at ``\\n`` only: U+2028, U+2029 and U+0085 may stand inside a
    JSON string. Anything else raises :class:`InvalidTypeError`.
    """
    if isinstance(lines, str):
        lines = lines.split("\n")
    elif isinstance(lines, bytes):
        lines = lines.split(b"\n")
    elif not isinstance(lines, Iterable):
        raise InvalidTypeError("lines", lines, "an iterable of JSON lines, or JSON text")
    for number, text in enumerate(lines, start=first_line):
        if not isinstance(text, str | bytes | bytearray | memoryview):
            raise DecodeError("event", type(text).__name__, "must be a line of JSON text",
                              line=number)
        if (bytes(text) if isinstance(text, memoryview) else text).strip():
            yield event_from_json(text, line=number)


_EXCLUSION_REASON: Final = _Reason("reason", exclusion=True)
_INCLUSION_REASON: Final = _Reason("reason", exclusion=False)


def reason_to_flat(reason: ExclusionReason | InclusionReason, out: dict[str, Any]) -> None:
    """Write ``reason`` into a flat mapping as ``reason.name`` and ``reason.<field>``."""
    (_INCLUSION_REASON if isinstance(reason, InclusionReason)
     else _EXCLUSION_REASON).encode(reason, out)


def flat_keys(event_type: str) -> frozenset[str] | None:
    """Every key the flat form of an event of ``event_type`` may hold (an exclusion's
    reason fields are every known reason's); None for a type this version does not
    know."""
    codec = _CODECS.get(event_type)
    if codec is None:
        return None
    keys = set(_ENVELOPE)
    for name, field in codec.fields:
        if isinstance(field, _Item):
            keys.update(field.prefix + wire.name for wire in ITEM_FIELDS)
        elif isinstance(field, _Budget):
            keys.update(field.prefix + wire.name for wire in BUDGET_FIELDS)
        elif isinstance(field, _Pipeline):
            keys.update(field.prefix + key for key in PIPELINE_KEYS)
        elif isinstance(field, _Reason):
            keys.add(field.name)
            if field.exclusion:
                keys.update(field.prefix + reason_field for cls in KNOWN_EXCLUSION_REASONS.values()
                            for reason_field in cls.__struct_fields__)
        elif not isinstance(field, _InProcessOnly):
            keys.add(name)
    return frozenset(keys)
