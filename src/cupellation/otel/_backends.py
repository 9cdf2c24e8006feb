"""What trace backends hand back, as the spans the decoder reads.

Each reader here turns one backend's answer into :class:`~._spans.SpanData`, once,
so that every layout of spans the encoder writes is decoded by the one decoder:

- Phoenix's REST API: ``GET /v1/projects/{p}/spans`` (``{"data": [span, ...],
  "next_cursor": ...}``, spans with ``context``, flat attribute objects and ISO
  times) and ``GET /v1/projects/{p}/spans/otlpv1`` (OTLP spans in snake_case, every
  member present, absent ones null); several saved pages (a JSON array of pages,
  JSON lines, or pages written one after the other) are merged, a span repeated
  across overlapping pages counted once;
- MLflow's ``GET /api/3.0/mlflow/traces/batchGet`` (``{"traces": [{"trace_info",
  "spans"}]}``, the spans OTLP in snake_case or lowerCamelCase, ids base64 or hex,
  and every attribute value JSON-encoded as text) and the ``Trace`` objects of
  ``mlflow.search_traces(return_type="list")`` (read by duck typing: mlflow is never
  imported);
- Jaeger's v3 API (``{"result": {"resourceSpans": [...]}}``, one object or a stream
  of them).

Tempo's ``/api/traces/{id}`` (``batches``) and ``/api/v2/traces/{id}`` (``trace``),
OTLP/JSON and Jaeger's v1 JSON are read by :mod:`._spans` and :mod:`._jaeger`.
Every reader checks the shape it is given and raises
:class:`~cupellation.exceptions.DecodeError` naming where it is wrong and what
was expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..exceptions import DecodeError
from ._names import LIST_ATTRIBUTES
from ._spans import (
    COUNT_BOUNDS,
    SpanData,
    SpanEventData,
    bounded_int,
    checked_text,
    is_otlp_document,
    json_array,
    json_object,
    shown,
    spans_from_otlp_json,
)

__all__ = [
    "backend_of",
    "documents_in",
    "merged_spans",
    "spans_from_backend_document",
    "spans_from_mlflow_json",
    "spans_from_mlflow_traces",
    "spans_from_phoenix_json",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_HEX = re.compile(r"[0-9a-fA-F]+")
#: The members of one OTLP span a Phoenix or MLflow document may spell in snake_case.
_OTLP_SPAN_KEYS = frozenset({"trace_id", "span_id", "start_time_unix_nano", "traceId",
                             "spanId", "startTimeUnixNano"})


# -- recognising a document -----------------------------------------------------------------


def _first_span(items: Sequence[Any]) -> Mapping[str, Any] | None:
    return next((item for item in items if isinstance(item, Mapping)), None)


def backend_of(document: Any) -> str | None:
    """Which backend's answer ``document`` (one parsed JSON value) looks like:
    ``"phoenix"``, ``"mlflow"``, ``"jaeger-v3"``, or None for anything else (OTLP/JSON,
    Tempo and Jaeger v1 included, which other readers take)."""
    if not isinstance(document, Mapping):
        return None
    if "traces" in document and isinstance(document["traces"], list):
        first = _first_span(document["traces"])
        if first is None or "trace_info" in first or "traceInfo" in first:
            return "mlflow"
    if isinstance(document.get("info"), Mapping) and isinstance(document.get("data"), Mapping):
        return "mlflow"  # one Trace.to_json()
    if isinstance(document.get("result"), Mapping) and is_otlp_document(document["result"]):
        return "jaeger-v3"
    data = document.get("data")
    if isinstance(data, list) and "next_cursor" in document:
        return "phoenix"
    if isinstance(data, list) and data:
        first = _first_span(data)
        if first is not None and "spans" not in first and (
                "context" in first or "span_id" in first):
            return "phoenix"
    return None


def documents_in(text: str) -> Iterator[tuple[int, Any]]:
    """The JSON values in ``text`` one after the other (JSON lines, or documents
    written back to back), each with the line it starts on. Raises DecodeError naming
    the line of text that is not JSON."""
    decoder = json.JSONDecoder()
    at, line = 0, 1
    size = len(text)
    while True:
        while at < size and text[at] in " \t\r\n\ufeff":
            if text[at] == "\n":
                line += 1
            at += 1
        if at >= size:
            return
        try:
            value, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError) as exc:
            problem = ("nests arrays or objects too deeply" if isinstance(exc, RecursionError)
                       else f"is not valid JSON ({exc})")
            shown_text = text[at:at + 60]
            raise DecodeError("trace", shown_text, problem, line=line) from None
        yield line, value
        line += text.count("\n", at, end)
        at = end


def spans_from_backend_document(document: Any, path: str = "trace") -> list[SpanData]:
    """The spans of one backend answer :func:`backend_of` recognises. Raises
    DecodeError for anything else."""
    backend = backend_of(document)
    if backend == "phoenix":
        return _phoenix_page(document, path)
    if backend == "mlflow":
        return _mlflow_document(document, path)
    if backend == "jaeger-v3":
        return _otlp_spans(document["result"], f"{path}.result")
    raise DecodeError(path, shown(sorted(document) if isinstance(document, Mapping)
                                  else type(document).__name__),
                      "is not an answer of Phoenix (data), MLflow (traces) or Jaeger v3 "
                      "(result)")


def merged_spans(spans: Iterable[SpanData]) -> list[SpanData]:
    """``spans`` without repeats of the same span (same trace, span id and content):
    saved pages may overlap. Spans sharing ids but not content are all kept, for the
    decoder to report."""
    seen: set[tuple[str | None, str | None]] = set()
    kept: dict[tuple[str | None, str | None], SpanData] = {}
    out = []
    for span in spans:
        key = (span.trace_id, span.span_id)
        if span.span_id is not None and key in seen and kept[key] == span:
            continue
        seen.add(key)
        kept.setdefault(key, span)
        out.append(span)
    return out


# -- OTLP in snake_case ----------------------------------------------------------------------


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _otlp_camel(value: Any) -> Any:
    """OTLP as protobuf's JSON mapping writes it with the proto field names
    (snake_case, absent members null) as OTLP/JSON (lowerCamelCase, absent members
    left out). Only members are renamed: attribute keys are values (``{"key": ...}``)."""
    if isinstance(value, Mapping):
        return {_camel(key) if isinstance(key, str) else key: _otlp_camel(item)
                for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_otlp_camel(item) for item in value]
    return value


def _otlp_spans(document: Mapping[str, Any], path: str) -> list[SpanData]:
    """The spans of an OTLP traces document, errors naming ``path``."""
    try:
        return spans_from_otlp_json(document)
    except DecodeError as exc:
        field = exc.field.replace("trace", path, 1) if exc.field.startswith("trace") else (
            exc.field)
        raise DecodeError(field, exc.value, exc.problem, line=exc.line) from None


def _otlp_span_list(spans: Sequence[Any], path: str, values: Any = None) -> list[SpanData]:
    """OTLP spans (snake_case or camelCase) given as a bare list, each read with its
    errors named ``path[k]``; ``values`` rewrites each span first (MLflow)."""
    return [_otlp_one(raw, f"{path}[{k}]", values) for k, raw in enumerate(spans)]


def _otlp_one(raw: Any, where: str, values: Any = None) -> SpanData:
    """One OTLP span (snake_case or camelCase), its errors named ``where``."""
    span = _otlp_camel(json_object(raw, where))
    if values is not None:
        span = values(span, where)
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    try:
        (read,) = spans_from_otlp_json(document)
    except DecodeError as exc:
        inner = "trace.resourceSpans[0].scopeSpans[0].spans[0]"
        field = where + exc.field[len(inner):] if exc.field.startswith(inner) else exc.field
        raise DecodeError(field, exc.value, exc.problem, line=exc.line) from None
    return read


# -- Phoenix ------------------------------------------------------------------------------------


def _phoenix_page(document: Mapping[str, Any], path: str) -> list[SpanData]:
    data = json_array(document.get("data"), f"{path}.data")
    spans = []
    for k, raw in enumerate(data):
        where = f"{path}.data[{k}]"
        span = json_object(raw, where)
        if "context" in span:
            spans.append(_phoenix_span(span, where))
        elif _OTLP_SPAN_KEYS & set(span):
            spans.append(_otlp_one(span, where))
        else:
            raise DecodeError(where, shown(sorted(span)), "is not a Phoenix span: expected "
                              "context (the /spans endpoint) or span_id (/spans/otlpv1)")
    return spans


def _hex_id(value: Any, digits: int, path: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) != digits or not _HEX.fullmatch(value):
        raise DecodeError(path, shown(value), f"must be {digits} hex digits")
    return None if int(value, 16) == 0 else value.lower()


def _iso_ns(value: Any, path: str) -> int | None:
    """An ISO 8601 time (Phoenix's, microsecond precision) as Unix nanoseconds."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise DecodeError(path, shown(value), "must be an ISO 8601 time")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise DecodeError(path, shown(value), "must be an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise DecodeError(path, shown(value), "must name its UTC offset")
    micros = (moment - _EPOCH) // _MICROSECOND
    if micros < 0:
        raise DecodeError(path, shown(value), "must not be before 1970")
    return micros * 1000


def _flat_attributes(value: Any, path: str) -> dict[str, Any]:
    """Phoenix's attribute object (flat dotted keys; a nested object is flattened
    back into dotted keys) as attribute values: text, numbers, booleans and lists."""
    out: dict[str, Any] = {}

    def walk(prefix: str, node: Mapping[str, Any], where: str) -> None:
        for key, item in node.items():
            name = checked_text(key, where) if not prefix else f"{prefix}.{key}"
            here = f"{where}[{key!r}]"
            if isinstance(item, Mapping):
                walk(name, item, here)
            elif name in out:
                raise DecodeError(here, shown(item), f"repeats the attribute {name}")
            else:
                out[name] = _plain(item, here)

    walk("", json_object(value, path) if value is not None else {}, path)
    return out


def _plain(value: Any, path: str) -> Any:
    if isinstance(value, str):
        return checked_text(value, path)
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, list):
        return [_plain(item, f"{path}[{k}]") for k, item in enumerate(value)]
    raise DecodeError(path, shown(value), "must be text, a number, a boolean or a list")


def _phoenix_span(span: Mapping[str, Any], path: str) -> SpanData:
    name = span.get("name")
    if not isinstance(name, str):
        raise DecodeError(path + ".name", shown(name), "must be a string")
    context = json_object(span.get("context"), path + ".context")
    events = []
    for k, raw in enumerate(json_array(span.get("events"), path + ".events")):
        where = f"{path}.events[{k}]"
        event = json_object(raw, where)
        event_name = event.get("name")
        if not isinstance(event_name, str):
            raise DecodeError(where + ".name", shown(event_name), "must be a string")
        events.append(SpanEventData(
            name=checked_text(event_name, where + ".name"),
            attributes=_flat_attributes(event.get("attributes"), where + ".attributes"),
            timestamp_ns=_iso_ns(event.get("timestamp"), where + ".timestamp")))
    return SpanData(
        name=checked_text(name, path + ".name"),
        attributes=_flat_attributes(span.get("attributes"), path + ".attributes"),
        events=tuple(events),
        trace_id=_hex_id(context.get("trace_id"), 32, path + ".context.trace_id"),
        span_id=_hex_id(context.get("span_id"), 16, path + ".context.span_id"),
        parent_span_id=_hex_id(span.get("parent_id"), 16, path + ".parent_id"),
        start_ns=_iso_ns(span.get("start_time"), path + ".start_time"),
        end_ns=_iso_ns(span.get("end_time"), path + ".end_time"))


def spans_from_phoenix_json(data: str | bytes | Mapping[str, Any] | Sequence[Any]
                            ) -> list[SpanData]:
    """The spans of what Phoenix's REST API returns (either endpoint, see the module
    documentation): one page, a JSON array of pages, or pages one after the other
    (JSON lines or back to back). Pages are merged; a span repeated by overlapping
    pages is kept once."""
    return merged_spans(_read_pages(data, "phoenix"))


def _read_pages(data: Any, backend: str) -> list[SpanData]:
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError("trace", f"{len(data)} bytes",
                              f"is not UTF-8 text ({exc})") from None
    documents: list[tuple[int | None, str, Any]]
    if isinstance(data, str):
        documents = [(line, "trace", value) for line, value in documents_in(data)]
    elif isinstance(data, Mapping):
        documents = [(None, "trace", data)]
    elif isinstance(data, list | tuple):
        documents = [(None, f"trace[{k}]", value) for k, value in enumerate(data)]
    else:
        raise DecodeError("trace", type(data).__name__, f"must be {backend} JSON")
    spans: list[SpanData] = []
    for line, where, document in documents:
        pages = document if isinstance(document, list) else [document]
        for k, page in enumerate(pages):
            at = where if not isinstance(document, list) else f"{where}[{k}]"
            if backend_of(page) != backend:
                raise DecodeError(at, shown(sorted(page) if isinstance(page, Mapping)
                                            else type(page).__name__),
                                  _EXPECTED[backend], line=line)
            try:
                spans.extend(spans_from_backend_document(page, at))
            except DecodeError as exc:
                if line is None or exc.line is not None:
                    raise
                raise DecodeError(exc.field, exc.value, exc.problem, line=line) from None
    return spans


_EXPECTED = {
    "phoenix": "is not a page of Phoenix's REST API: expected {\"data\": [span, ...], "
               "\"next_cursor\": ...} from /v1/projects/{project}/spans or /spans/otlpv1",
    "mlflow": "is not MLflow's trace JSON: expected {\"traces\": [{\"trace_info\": ..., "
              "\"spans\": [...]}]} from /api/3.0/mlflow/traces/batchGet",
}


# -- MLflow -------------------------------------------------------------------------------------


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _mlflow_plain(name: str, value: Any, path: str) -> Any:
    """The value of attribute ``name`` as MLflow hands it back, as the value sent.

    MLflow reads a string attribute that is valid JSON as that JSON (the text
    ``{"type":"recency"}`` comes back as an object, ``[1,2]`` as a list). An
    OpenTelemetry attribute is never an object, and cupellation writes lists only
    for :data:`LIST_ATTRIBUTES`: any other object or list is turned back into
    compact JSON text. What this cannot restore (a string such as ``"3"`` that came
    back as a number, JSON text written with other spacing) makes the run's digest
    differ, which the decoder reports: never a silent change."""
    if isinstance(value, list) and name in LIST_ATTRIBUTES:
        return _plain(value, path)
    if isinstance(value, Mapping | list):
        try:
            return _json_text(value)
        except ValueError:
            raise DecodeError(path, shown(value), "must be JSON-safe") from None
    if value is None:
        return "null"
    return _plain(value, path)


def _mlflow_any_value(name: str, value: Any, path: str) -> Any:
    """An OTLP/JSON AnyValue of batchGet, restored as :func:`_mlflow_plain` says."""
    if not isinstance(value, Mapping) or not ("kvlistValue" in value or "arrayValue" in value):
        return value
    (read,) = spans_from_otlp_json({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"name": "-", "attributes": [{"key": "v", "value": value}]}]}]}]})
    restored = _mlflow_plain(name, read.attributes["v"], path)
    return value if isinstance(restored, list) else {"stringValue": restored}


def _mlflow_span(span: dict[str, Any], path: str) -> dict[str, Any]:
    """A batchGet span with each attribute's object or list value as JSON text."""
    def restored(attributes: Any, where: str) -> Any:
        if not isinstance(attributes, list):
            return attributes
        return [{**pair, "value": _mlflow_any_value(str(pair.get("key")), pair["value"],
                                                    f"{where}[{k}].value")}
                if isinstance(pair, Mapping) and "value" in pair else pair
                for k, pair in enumerate(attributes)]

    span = dict(span)
    span["attributes"] = restored(span.get("attributes"), path + ".attributes")
    events = span.get("events")
    if isinstance(events, list):
        span["events"] = [
            {**event, "attributes": restored(event.get("attributes"),
                                             f"{path}.events[{k}].attributes")}
            if isinstance(event, Mapping) else event for k, event in enumerate(events)]
    return span


def _mlflow_encoded(value: Any, path: str) -> dict[str, Any]:
    """``Trace.to_json()``'s span attributes: an object of JSON-encoded values."""
    out = {}
    for key, text in json_object(value if value is not None else {}, path).items():
        where = f"{path}[{key!r}]"
        if not isinstance(text, str):
            raise DecodeError(where, shown(text), "must be JSON text (MLflow JSON-encodes "
                              "span attribute values)")
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):
            raise DecodeError(where, shown(text), "must be JSON text (MLflow JSON-encodes "
                              "span attribute values)") from None
        out[checked_text(key, where)] = _mlflow_plain(key, decoded, where)
    return out


def _mlflow_dumped_span(raw: Any, path: str) -> SpanData:
    """One span of ``Trace.to_json()``: OTLP members in snake_case, ids base64, the
    span's attributes JSON-encoded, its events' attributes plain."""
    span = json_object(raw, path)
    skeleton = {key: value for key, value in span.items()
                if key not in ("attributes", "events", "links", "status")}
    read = _otlp_one(skeleton, path)
    events = []
    for k, item in enumerate(json_array(span.get("events"), path + ".events")):
        where = f"{path}.events[{k}]"
        event = json_object(item, where)
        name = event.get("name")
        if not isinstance(name, str):
            raise DecodeError(where + ".name", shown(name), "must be a string")
        attributes = json_object(event.get("attributes") or {}, where + ".attributes")
        events.append(SpanEventData(
            name=checked_text(name, where + ".name"),
            attributes={checked_text(key, where): _mlflow_plain(key, value, f"{where}[{key!r}]")
                        for key, value in attributes.items()},
            timestamp_ns=_object_time(event.get("time_unix_nano"), where + ".time_unix_nano")))
    return SpanData(
        name=read.name, attributes=_mlflow_encoded(span.get("attributes"),
                                                   path + ".attributes"),
        events=tuple(events), trace_id=read.trace_id, span_id=read.span_id,
        parent_span_id=read.parent_span_id, start_ns=read.start_ns, end_ns=read.end_ns)


def _mlflow_document(document: Mapping[str, Any], path: str) -> list[SpanData]:
    if "traces" not in document:  # one Trace.to_json()
        data = json_object(document.get("data"), path + ".data")
        at = path + ".data.spans"
        return [_mlflow_dumped_span(raw, f"{at}[{k}]")
                for k, raw in enumerate(json_array(data.get("spans"), at))]
    spans = []
    for k, raw in enumerate(json_array(document.get("traces"), f"{path}.traces")):
        where = f"{path}.traces[{k}]"
        trace = json_object(raw, where)
        at = where + ".spans"
        if "spans" not in trace:  # MLflow always writes it: a trace without it lost its run
            raise DecodeError(at, "missing", "each trace of batchGet holds its spans")
        spans.extend(_otlp_span_list(json_array(trace.get("spans"), at), at, _mlflow_span))
    return spans


def spans_from_mlflow_json(data: str | bytes | Mapping[str, Any] | Sequence[Any]
                           ) -> list[SpanData]:
    """The spans of MLflow's trace JSON (``batchGet``'s ``{"traces": [...]}``; several
    answers as a JSON array or one after the other are merged). Attribute values are
    JSON-decoded, as MLflow JSON-encodes them."""
    return merged_spans(_read_pages(data, "mlflow"))


def _object_attributes(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DecodeError(path, type(value).__name__, "must be a mapping of attributes")
    out = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise DecodeError(path, shown(key), "must have text keys")
        out[checked_text(key, path)] = _mlflow_plain(key, item, f"{path}[{key!r}]")
    return out


def _object_id(value: Any, digits: int, path: str) -> str | None:
    """An id of an mlflow object: hex (with or without ``0x``), or an int."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return None if value == 0 else format(value, f"0{digits}x")
    if isinstance(value, str):
        text = value[2:] if value.startswith("0x") else value
        if text.startswith("tr-"):
            text = text[3:]
        return _hex_id(text, digits, path)
    raise DecodeError(path, shown(value), "must be a hex id")


def _object_time(value: Any, path: str) -> int | None:
    return None if value is None else bounded_int(value, path, (0, 2**64 - 1,
                                                                "Unix nanoseconds"))


def spans_from_mlflow_traces(traces: Iterable[Any]) -> list[SpanData]:
    """The spans of ``mlflow.entities.Trace`` objects (as
    ``mlflow.search_traces(return_type="list")`` returns them), read by duck typing:
    ``trace.data.spans``, each with ``name``, ``trace_id``, ``span_id``, ``parent_id``,
    ``start_time_ns``, ``end_time_ns``, ``attributes`` and ``events`` (``name``,
    ``timestamp``, ``attributes``). MLflow's span objects hold decoded attribute
    values. Raises DecodeError naming the object and member that is missing or wrong."""
    spans = []
    for t, trace in enumerate(traces):
        where = f"traces[{t}]"
        try:
            listed = list(trace.data.spans)
        except (AttributeError, TypeError):
            raise DecodeError(where, type(trace).__name__, "is not an mlflow Trace: expected "
                              "trace.data.spans") from None
        for k, span in enumerate(listed):
            at = f"{where}.data.spans[{k}]"
            spans.append(_object_span(span, at))
    return merged_spans(spans)


def _object_span(span: Any, path: str) -> SpanData:
    try:
        name = span.name
        attributes = _object_attributes(span.attributes, path + ".attributes")
        events = []
        for e, event in enumerate(span.events or ()):
            where = f"{path}.events[{e}]"
            event_name = event.name
            if not isinstance(event_name, str):
                raise DecodeError(where + ".name", shown(event_name), "must be a string")
            events.append(SpanEventData(
                name=checked_text(event_name, where + ".name"),
                attributes=_object_attributes(event.attributes, where + ".attributes"),
                timestamp_ns=_object_time(getattr(event, "timestamp", None),
                                          where + ".timestamp")))
        trace_id = getattr(span, "_trace_id", None) or getattr(span, "trace_id", None)
        context = getattr(span, "_span", None)
        otel_trace = getattr(getattr(context, "context", None), "trace_id", None)
        return SpanData(
            name=checked_text(name, path + ".name") if isinstance(name, str) else _bad_name(
                name, path),
            attributes=attributes, events=tuple(events),
            trace_id=(_object_id(otel_trace, 32, path + ".trace_id") if otel_trace
                      else _object_id(trace_id, 32, path + ".trace_id")),
            span_id=_object_id(span.span_id, 16, path + ".span_id"),
            parent_span_id=_object_id(span.parent_id, 16, path + ".parent_id"),
            start_ns=_object_time(span.start_time_ns, path + ".start_time_ns"),
            end_ns=_object_time(span.end_time_ns, path + ".end_time_ns"),
            dropped_attributes=bounded_int(getattr(span, "dropped_attributes", 0) or 0,
                                           path, COUNT_BOUNDS),
            dropped_events=bounded_int(getattr(span, "dropped_events", 0) or 0, path,
                                       COUNT_BOUNDS))
    except AttributeError as exc:
        raise DecodeError(path, type(span).__name__,
                          f"is not an mlflow Span: {exc}") from None


def _bad_name(name: Any, path: str) -> str:
    raise DecodeError(path + ".name", shown(name), "must be a string")
