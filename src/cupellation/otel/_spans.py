"""Spans as the decoder reads them, and the readers that make them: SDK ``ReadableSpan``
objects, OTLP/JSON (the collector's file exporter, Tempo's trace API) and OTLP
protobuf (Jaeger's JSON is read by :mod:`._jaeger`, with the checks here).

Every reader checks the shape it is given and raises
:class:`~cupellation.exceptions.DecodeError` naming where it is wrong
(``resourceSpans[0].scopeSpans[1].spans[3].attributes[2]``); it never lets an
exception from deep inside escape.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._model import check_text
from ..exceptions import DecodeError, InvalidTextError

__all__ = [
    "COUNT_BOUNDS",
    "INT64_BOUNDS",
    "OTLP_EXTRA",
    "TIME_US_BOUNDS",
    "SpanData",
    "SpanEventData",
    "bounded_int",
    "checked_text",
    "is_otlp_document",
    "json_array",
    "json_object",
    "load_json",
    "number",
    "optional_int",
    "shown",
    "span_data",
    "spans_from_otlp_json",
    "spans_from_otlp_proto",
]

#: The extra that installs the OTLP protobuf classes.
OTLP_EXTRA = "cupellation[otlp]"



@dataclass(frozen=True, slots=True)
class SpanEventData:
    """One span event: its name, attributes, time and how many attributes it lost."""

    name: str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    timestamp_ns: int | None = None
    dropped_attributes: int = 0


@dataclass(frozen=True, slots=True)
class SpanData:
    """One span as the decoder reads it, whatever it was read from.

    Ids are lowercase hex (32 digits for a trace, 16 for a span), or None where the
    source had none. ``dropped_attributes`` and ``dropped_events`` are what the
    source says was lost (an SDK span's limits, OTLP's ``dropped*Count``, Jaeger's
    ``otel.dropped_*_count`` tags).
    """

    name: str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[SpanEventData, ...] = ()
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    dropped_attributes: int = 0
    dropped_events: int = 0


# -- SDK spans ----------------------------------------------------------------------------


def _hex(value: int, digits: int) -> str | None:
    return None if not value else format(value, f"0{digits}x")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def span_data(span: Any) -> SpanData:
    """A :class:`SpanData` from an SDK ``ReadableSpan`` (or a SpanData, unchanged).

    Raises :class:`DecodeError` for an object that is neither.
    """
    if isinstance(span, SpanData):
        return span
    try:
        name = span.name
        context = span.context
        parent = span.parent
        attributes = dict(span.attributes or {})
        events = tuple(SpanEventData(
            name=event.name, attributes=dict(event.attributes or {}),
            timestamp_ns=event.timestamp,
            dropped_attributes=_count(getattr(event, "dropped_attributes", 0)))
            for event in span.events)
        return SpanData(
            name=name if isinstance(name, str) else str(name),
            attributes=attributes, events=events,
            trace_id=None if context is None else _hex(context.trace_id, 32),
            span_id=None if context is None else _hex(context.span_id, 16),
            parent_span_id=None if parent is None else _hex(parent.span_id, 16),
            start_ns=span.start_time, end_ns=span.end_time,
            dropped_attributes=_count(getattr(span, "dropped_attributes", 0)),
            dropped_events=_count(getattr(span, "dropped_events", 0)),
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise DecodeError("span", type(span).__name__,
                          f"is not an OpenTelemetry ReadableSpan or SpanData ({exc})") from None


# -- OTLP/JSON ------------------------------------------------------------------------------


def load_json(data: str | bytes | Any, what: str) -> Any:
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(what, f"{len(data)} bytes", f"is not UTF-8 text ({exc})") from None
    if isinstance(data, str):
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            shown = data if len(data) <= 60 else data[:57] + "..."
            problem = ("nests arrays or objects too deeply" if isinstance(exc, RecursionError)
                       else f"is not valid JSON ({exc})")
            raise DecodeError(what, shown, problem) from None
    return data


def checked_text(value: str, path: str) -> str:
    """``value``, after checking it is Unicode text: a lone surrogate (which JSON's
    ``\\ud800`` escapes can carry) could be read but never sent on as UTF-8."""
    try:
        return check_text(path, value)
    except InvalidTextError as exc:
        raise DecodeError(path, shown(value), exc.problem) from None


def json_object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DecodeError(path, shown(value), "must be a JSON object")
    return value


def json_array(value: Any, path: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise DecodeError(path, shown(value), "must be a JSON array")
    return value


def shown(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= 60 else text[:57] + "..."


def _otlp_id(value: Any, size: int, path: str) -> str | None:
    """An OTLP id as hex: given as hex (OTLP/JSON) or base64 (protobuf's JSON mapping,
    Tempo's API); empty or absent is None."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise DecodeError(path, shown(value), "must be an id string")
    if len(value) == 2 * size:
        try:
            int(value, 16)
        except ValueError:
            pass
        else:
            return None if int(value, 16) == 0 else value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise DecodeError(path, value, f"is neither {2 * size} hex digits nor the base64 of "
                          f"{size} bytes")
    return None if not any(raw) else raw.hex()


#: The ranges OTLP gives its integers: an attribute's ``intValue`` is an int64, a
#: time in nanoseconds a fixed64 (unsigned), a dropped count a uint32. A value
#: outside them cannot be sent on (the SDK's encoder fails on it), so a reader
#: refuses it, naming where it is.
INT64_BOUNDS = (-(2**63), 2**63 - 1, "a signed 64-bit integer")
_TIME_NS = (0, 2**64 - 1, "an unsigned 64-bit count of nanoseconds")
COUNT_BOUNDS = (0, 2**32 - 1, "an unsigned 32-bit count")
#: Jaeger's times are microseconds; as nanoseconds they must still fit OTLP's fixed64.
TIME_US_BOUNDS = (0, (2**64 - 1) // 1000, "a count of microseconds that fits OTLP's nanoseconds")
#: How deeply arrayValue and kvlistValue may nest (as deep as item metadata may).
_MAX_VALUE_DEPTH = 64
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]{1,40}")


def bounded_int(value: Any, path: str, bounds: tuple[int, int, str] = INT64_BOUNDS) -> int:
    number: int | None = None
    if isinstance(value, bool):
        raise DecodeError(path, value, "must be an integer")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        # Digits only: int() would also take "1_000", and raise past 4,300 digits.
        if _INTEGER_TEXT.fullmatch(value.strip()):
            number = int(value)
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None:
        raise DecodeError(path, shown(value), "must be an integer")
    low, high, what = bounds
    if not low <= number <= high:
        raise DecodeError(path, shown(value), f"must be {what}")
    return number


def optional_int(value: Any, path: str, bounds: tuple[int, int, str] = INT64_BOUNDS) -> int | None:
    return None if value is None or value == "" else bounded_int(value, path, bounds)


def number(value: Any, path: str) -> float:
    if isinstance(value, bool):
        raise DecodeError(path, value, "must be a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if value in special:
            return special[value]
        try:
            return float(value)
        except ValueError:
            pass
    raise DecodeError(path, shown(value), "must be a number")


def _any_value(value: Any, path: str, depth: int = 1) -> Any:
    """An OTLP/JSON AnyValue as a Python value (None for an empty one)."""
    value = json_object(value, path)
    if depth > _MAX_VALUE_DEPTH:
        raise DecodeError(path, shown(value), f"nests arrays and key-value lists more than "
                          f"{_MAX_VALUE_DEPTH} levels deep")
    if "stringValue" in value:
        text = value["stringValue"]
        if not isinstance(text, str):
            raise DecodeError(path + ".stringValue", shown(text), "must be a string")
        return checked_text(text, path + ".stringValue")
    if "intValue" in value:
        return bounded_int(value["intValue"], path + ".intValue")
    if "doubleValue" in value:
        return number(value["doubleValue"], path + ".doubleValue")
    if "boolValue" in value:
        flag = value["boolValue"]
        if not isinstance(flag, bool):
            raise DecodeError(path + ".boolValue", shown(flag), "must be true or false")
        return flag
    if "arrayValue" in value:
        inner = json_object(value["arrayValue"], path + ".arrayValue")
        return [_any_value(v, f"{path}.arrayValue.values[{k}]", depth + 1)
                for k, v in enumerate(json_array(inner.get("values"), path + ".arrayValue.values"))]
    if "kvlistValue" in value:
        inner = json_object(value["kvlistValue"], path + ".kvlistValue")
        return _key_values(inner.get("values"), path + ".kvlistValue.values", depth + 1)
    if "bytesValue" in value:
        return value["bytesValue"] if isinstance(value["bytesValue"], str) else None
    return None


def _key_values(values: Any, path: str, depth: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, raw in enumerate(json_array(values, path)):
        where = f"{path}[{k}]"
        entry = json_object(raw, where)
        key = entry.get("key")
        if not isinstance(key, str):
            raise DecodeError(where + ".key", shown(key), "must be a string")
        out[checked_text(key, where + ".key")] = _any_value(entry.get("value", {}),
                                                            where + ".value", depth)
    return out


def _otlp_span(span: Mapping[str, Any], path: str) -> SpanData:
    name = span.get("name", "")
    if not isinstance(name, str):
        raise DecodeError(path + ".name", shown(name), "must be a string")
    name = checked_text(name, path + ".name")
    events = []
    for k, raw in enumerate(json_array(span.get("events"), path + ".events")):
        where = f"{path}.events[{k}]"
        event = json_object(raw, where)
        event_name = event.get("name", "")
        if not isinstance(event_name, str):
            raise DecodeError(where + ".name", shown(event_name), "must be a string")
        events.append(SpanEventData(
            name=checked_text(event_name, where + ".name"),
            attributes=_key_values(event.get("attributes"), where + ".attributes"),
            timestamp_ns=optional_int(event.get("timeUnixNano"), where + ".timeUnixNano",
                                       _TIME_NS),
            dropped_attributes=optional_int(event.get("droppedAttributesCount"),
                                             where + ".droppedAttributesCount", COUNT_BOUNDS) or 0))
    return SpanData(
        name=name,
        attributes=_key_values(span.get("attributes"), path + ".attributes"),
        events=tuple(events),
        trace_id=_otlp_id(span.get("traceId"), 16, path + ".traceId"),
        span_id=_otlp_id(span.get("spanId"), 8, path + ".spanId"),
        parent_span_id=_otlp_id(span.get("parentSpanId"), 8, path + ".parentSpanId"),
        start_ns=optional_int(span.get("startTimeUnixNano"), path + ".startTimeUnixNano",
                               _TIME_NS),
        end_ns=optional_int(span.get("endTimeUnixNano"), path + ".endTimeUnixNano", _TIME_NS),
        dropped_attributes=optional_int(span.get("droppedAttributesCount"),
                                         path + ".droppedAttributesCount", COUNT_BOUNDS) or 0,
        dropped_events=optional_int(span.get("droppedEventsCount"),
                                     path + ".droppedEventsCount", COUNT_BOUNDS) or 0,
    )


def _otlp_document(document: Mapping[str, Any], path: str) -> Iterator[SpanData]:
    """The spans of one OTLP/JSON traces document (``resourceSpans``, or Tempo's
    ``batches``, or a ``trace`` wrapping either)."""
    if "trace" in document and isinstance(document["trace"], Mapping):
        document = document["trace"]
        path += ".trace"
    key = "resourceSpans" if "resourceSpans" in document else "batches"
    if key not in document:
        raise DecodeError(path, shown(sorted(document)),
                          "has neither resourceSpans nor batches: not OTLP/JSON traces")
    for r, raw in enumerate(json_array(document[key], f"{path}.{key}")):
        where = f"{path}.{key}[{r}]"
        resource = json_object(raw, where)
        scope_key = ("scopeSpans" if "scopeSpans" in resource
                     else "instrumentationLibrarySpans")
        for s, raw_scope in enumerate(json_array(resource.get(scope_key), f"{where}.{scope_key}")):
            scope_path = f"{where}.{scope_key}[{s}]"
            scope = json_object(raw_scope, scope_path)
            for k, span in enumerate(json_array(scope.get("spans"), scope_path + ".spans")):
                span_path = f"{scope_path}.spans[{k}]"
                yield _otlp_span(json_object(span, span_path), span_path)


def is_otlp_document(value: Any) -> bool:
    """True for a JSON object shaped like an OTLP traces document."""
    if not isinstance(value, Mapping):
        return False
    if isinstance(value.get("trace"), Mapping):
        value = value["trace"]
    return "resourceSpans" in value or "batches" in value


_OTHER_SIGNALS = ("resourceMetrics", "resourceLogs", "resourceProfiles")


def spans_from_otlp_json(data: str | bytes | Mapping[str, Any]) -> list[SpanData]:
    """The spans of OTLP/JSON: one traces object (``{"resourceSpans": [...]}``; Tempo's
    ``{"batches": [...]}`` or ``{"trace": {...}}``), or JSON lines of them as the
    collector's file exporter writes (metrics and logs lines are skipped). Ids may be
    hex or base64."""
    if isinstance(data, Mapping):
        return list(_otlp_document(data, "trace"))
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError("trace", f"{len(data)} bytes",
                              f"is not UTF-8 text ({exc})") from None
    elif isinstance(data, str):
        text = data
    else:
        raise DecodeError("trace", type(data).__name__, "must be OTLP/JSON text or a mapping")
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, Mapping):
        return list(_otlp_document(whole, "trace"))
    spans: list[SpanData] = []
    # Lines end at "\n" only: U+2028, U+0085 and the like may stand unescaped inside
    # a JSON string (str.splitlines would cut the line there).
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except (ValueError, RecursionError) as exc:
            problem = ("nests arrays or objects too deeply" if isinstance(exc, RecursionError)
                       else f"is not valid JSON ({exc})")
            raise DecodeError("trace", shown(line), problem, line=number) from None
        if not isinstance(document, Mapping):
            raise DecodeError("trace", shown(document), "must be a JSON object per line",
                              line=number)
        if not is_otlp_document(document) and any(k in document for k in _OTHER_SIGNALS):
            continue
        try:
            spans.extend(_otlp_document(document, "trace"))
        except DecodeError as exc:
            raise DecodeError(exc.field, exc.value, exc.problem, line=number) from None
    return spans


# -- OTLP protobuf ------------------------------------------------------------------------


def _proto_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, which)


def _proto_attributes(values: Iterable[Any]) -> dict[str, Any]:
    return {kv.key: _proto_value(kv.value) for kv in values}


def _proto_id(raw: bytes) -> str | None:
    return raw.hex() if raw and any(raw) else None


def _proto_spans(message: Any) -> list[SpanData]:
    spans = []
    for resource in message.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                spans.append(SpanData(
                    name=span.name, attributes=_proto_attributes(span.attributes),
                    events=tuple(SpanEventData(
                        name=e.name, attributes=_proto_attributes(e.attributes),
                        timestamp_ns=e.time_unix_nano or None,
                        dropped_attributes=e.dropped_attributes_count) for e in span.events),
                    trace_id=_proto_id(span.trace_id), span_id=_proto_id(span.span_id),
                    parent_span_id=_proto_id(span.parent_span_id),
                    start_ns=span.start_time_unix_nano or None,
                    end_ns=span.end_time_unix_nano or None,
                    dropped_attributes=span.dropped_attributes_count,
                    dropped_events=span.dropped_events_count))
    return spans


def spans_from_otlp_proto(data: bytes) -> list[SpanData]:
    """The spans of OTLP protobuf bytes: a ``TracesData`` or an
    ``ExportTraceServiceRequest`` (the same wire form), or a sequence of them each
    preceded by its length as a 4-byte big-endian integer.

    Needs the ``opentelemetry-proto`` package (``pip install 'cupellation[otlp]'``);
    raises :class:`ImportError` saying so without it, and
    :class:`~cupellation.exceptions.DecodeError` for bytes that are not OTLP.
    """
    try:
        from opentelemetry.proto.trace.v1 import trace_pb2  # noqa: PLC0415 - optional
    except ImportError as exc:
        raise ImportError(f"reading OTLP protobuf needs the opentelemetry-proto package: "
                          f"pip install '{OTLP_EXTRA}' ({exc})") from exc
    if not isinstance(data, bytes | bytearray | memoryview):
        raise DecodeError("trace", type(data).__name__, "must be bytes of OTLP protobuf")
    data = bytes(data)

    def parse(chunk: bytes) -> list[SpanData]:
        message = trace_pb2.TracesData()
        message.ParseFromString(chunk)
        return _proto_spans(message)

    try:
        spans = parse(data)
    except Exception as exc:  # protobuf's DecodeError, or whatever a broken input raises
        first_error: Exception | None = exc
        spans = []
    else:
        first_error = None
    if spans:
        return spans
    framed = _framed(data)
    if framed:
        try:
            return [span for chunk in framed for span in parse(chunk)]
        except Exception:  # fall through to the unframed error
            pass
    if first_error is not None:
        raise DecodeError("trace", f"{len(data)} bytes",
                          f"is not OTLP protobuf ({type(first_error).__name__}: "
                          f"{first_error})") from None
    return spans


def _framed(data: bytes) -> list[bytes]:
    """``data`` split as 4-byte big-endian length-prefixed messages, or [] if it is not."""
    chunks = []
    at = 0
    while at < len(data):
        if at + 4 > len(data):
            return []
        size = int.from_bytes(data[at:at + 4], "big")
        at += 4
        if size == 0 or at + size > len(data):
            return []
        chunks.append(data[at:at + size])
        at += size
    return chunks
