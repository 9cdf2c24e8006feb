"""Spans from the JSON Jaeger's UI downloads (``{"data": [{"traceID", "spans",
"processes"}, ...]}``, or one trace object), with the checks of :mod:`._spans`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._model import first_wide_int
from ..exceptions import DecodeError
from ._names import LIST_ATTRIBUTES, list_value
from ._spans import (
    COUNT_BOUNDS,
    INT64_BOUNDS,
    TIME_US_BOUNDS,
    SpanData,
    SpanEventData,
    bounded_int,
    checked_text,
    json_array,
    json_object,
    load_json,
    number,
    optional_int,
    shown,
)

__all__ = ["is_jaeger_document", "spans_from_jaeger_json"]


def _jaeger_id(value: Any, size: int, path: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 2 * size:
        raise DecodeError(path, shown(value), f"must be at most {2 * size} hex digits")
    try:
        number = int(value, 16)
    except ValueError:
        raise DecodeError(path, value, "must be hex digits") from None
    return None if number == 0 else format(number, f"0{2 * size}x")


def _jaeger_tag(tag: Any, path: str) -> tuple[str, Any]:
    tag = json_object(tag, path)
    key = tag.get("key")
    if not isinstance(key, str):
        raise DecodeError(path + ".key", shown(key), "must be a string")
    key = checked_text(key, path + ".key")
    value = _jaeger_value(tag.get("type", "string"), tag.get("value"), path + ".value")
    if key in LIST_ATTRIBUTES:
        try:
            value = list_value(value)
        except RecursionError:
            raise DecodeError(path + ".value", shown(value),
                              "nests JSON arrays too deeply") from None
        wide = first_wide_int(value)
        if wide is not None:
            raise DecodeError(path + ".value" + wide[0], wide[1],
                              f"must be {INT64_BOUNDS[2]}")
    return key, value


def _jaeger_value(kind: Any, value: Any, path: str) -> Any:
    """A tag's value read as its Jaeger ``type`` says (a string when it names none)."""
    if kind in ("int64", "int32"):
        return bounded_int(value, path)
    if kind in ("float64", "float32"):
        return number(value, path)
    if kind == "bool":
        if isinstance(value, str) and value in ("true", "false"):
            value = value == "true"
        if not isinstance(value, bool):
            raise DecodeError(path, shown(value), "must be true or false")
        return value
    if not isinstance(value, str):
        raise DecodeError(path, shown(value), f"must be a string for type {kind}")
    return checked_text(value, path)


def _jaeger_tags(tags: Any, path: str) -> dict[str, Any]:
    return dict(_jaeger_tag(tag, f"{path}[{k}]") for k, tag in enumerate(json_array(tags, path)))


def _jaeger_span(span: Mapping[str, Any], path: str) -> SpanData:
    name = span.get("operationName")
    if not isinstance(name, str):
        raise DecodeError(path + ".operationName", shown(name), "must be a string")
    name = checked_text(name, path + ".operationName")
    attributes = _jaeger_tags(span.get("tags"), path + ".tags")
    dropped_attributes = _jaeger_count(attributes, "otel.dropped_attributes_count",
                                       path + ".tags")
    dropped_events = _jaeger_count(attributes, "otel.dropped_events_count", path + ".tags")
    parent = None
    for k, raw in enumerate(json_array(span.get("references"), path + ".references")):
        reference = json_object(raw, f"{path}.references[{k}]")
        if reference.get("refType", "CHILD_OF") == "CHILD_OF":
            parent = _jaeger_id(reference.get("spanID"), 8, f"{path}.references[{k}].spanID")
            break
    if parent is None and span.get("parentSpanID"):
        parent = _jaeger_id(span.get("parentSpanID"), 8, path + ".parentSpanID")
    events = []
    for k, raw_log in enumerate(json_array(span.get("logs"), path + ".logs")):
        where = f"{path}.logs[{k}]"
        log = json_object(raw_log, where)
        fields = _jaeger_tags(log.get("fields"), where + ".fields")
        event_name = fields.pop("event", "")
        dropped = _jaeger_count(fields, "otel.event.dropped_attributes_count",
                                where + ".fields")
        stamp = optional_int(log.get("timestamp"), where + ".timestamp", TIME_US_BOUNDS)
        events.append(SpanEventData(
            name=event_name if isinstance(event_name, str) else str(event_name),
            attributes=fields, timestamp_ns=None if stamp is None else stamp * 1000,
            dropped_attributes=dropped))
    start = optional_int(span.get("startTime"), path + ".startTime", TIME_US_BOUNDS)
    duration = optional_int(span.get("duration"), path + ".duration", TIME_US_BOUNDS)
    end = None if start is None or duration is None else start + duration
    if end is not None and end > TIME_US_BOUNDS[1]:
        raise DecodeError(path + ".duration", duration, "ends the span past the largest time "
                          "OTLP can hold (2**64 - 1 nanoseconds)")
    return SpanData(
        name=name, attributes=attributes, events=tuple(events),
        trace_id=_jaeger_id(span.get("traceID"), 16, path + ".traceID"),
        span_id=_jaeger_id(span.get("spanID"), 8, path + ".spanID"),
        parent_span_id=parent,
        start_ns=None if start is None else start * 1000,
        end_ns=None if end is None else end * 1000,
        dropped_attributes=dropped_attributes, dropped_events=dropped_events)


def _jaeger_count(tags: dict[str, Any], key: str, path: str) -> int:
    """A dropped count Jaeger keeps as a tag, taken out of ``tags`` (0 when absent)."""
    value = tags.pop(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return 0  # not a count the SDK wrote: nothing says what was lost
    if value > COUNT_BOUNDS[1]:
        raise DecodeError(f"{path}[{key}]", value, f"must be {COUNT_BOUNDS[2]}")
    return value


def is_jaeger_document(value: Any) -> bool:
    """True for JSON shaped like Jaeger's: ``{"data": [trace, ...]}`` or one trace."""
    return isinstance(value, Mapping) and (
        "data" in value or ("spans" in value and "traceID" in value))


def spans_from_jaeger_json(data: str | bytes | Mapping[str, Any]) -> list[SpanData]:
    """The spans of the JSON Jaeger's UI downloads (``{"data": [{"traceID", "spans",
    "processes"}, ...]}``, or one trace object). Span events are Jaeger logs named by
    their ``event`` field; list attributes, which Jaeger holds as JSON text, are
    turned back into lists."""
    document = load_json(data, "trace")
    if isinstance(document, Mapping) and "spans" in document and "data" not in document:
        traces: Sequence[Any] = [document]
        path = "trace"
    else:
        document = json_object(document, "trace")
        if "data" not in document:
            raise DecodeError("trace", shown(sorted(document)),
                              "has no data member: not Jaeger JSON")
        traces = json_array(document["data"], "data")
        path = "data"
    spans = []
    for t, raw in enumerate(traces):
        where = f"{path}[{t}]" if path == "data" else path
        trace = json_object(raw, where)
        if "spans" not in trace:
            raise DecodeError(where, shown(sorted(trace)), "has no spans: not a Jaeger trace")
        for k, span in enumerate(json_array(trace["spans"], where + ".spans")):
            span_path = f"{where}.spans[{k}]"
            spans.append(_jaeger_span(json_object(span, span_path), span_path))
    return spans
