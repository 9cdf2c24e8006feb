"""Shared pieces of the OpenTelemetry tests: private SDK providers, span processors
that misbehave or watch, and converters from SDK spans to the file formats the
decoder reads (OTLP/JSON with hex or base64 ids, OTLP protobuf, Jaeger's JSON). The
Jaeger builder is the one home of that format's fixtures: tests/api/_artifacts.py and
benchmarks/mutation_campaign.py import it too."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from opentelemetry import context as otel_context
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    Pipeline,
    SelectionReport,
    TraceDetailLevel,
)
from cupellation.events import PipelineEvent, stamp_service
from cupellation.otel import SpanCollector

UNLIMITED = SpanLimits(max_attributes=SpanLimits.UNSET, max_events=SpanLimits.UNSET,
                       max_span_attributes=SpanLimits.UNSET,
                       max_event_attributes=SpanLimits.UNSET,
                       max_attribute_length=SpanLimits.UNSET,
                       max_span_attribute_length=SpanLimits.UNSET)


@dataclass
class Sdk:
    """A private TracerProvider with an in-memory exporter, and a MeterProvider with an
    in-memory reader."""

    tracer_provider: TracerProvider
    exporter: InMemorySpanExporter
    meter_provider: MeterProvider
    reader: InMemoryMetricReader

    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        """Every finished span."""
        return tuple(self.exporter.get_finished_spans())

    def collector(self, tier: str = "Full", content_capture: str | None = "full",
                  metrics: bool = True, layout: str = "columns") -> SpanCollector:
        """A SpanCollector on these providers."""
        return SpanCollector(tracer_provider=self.tracer_provider,
                             meter_provider=self.meter_provider if metrics else None,
                             tier=tier, content_capture=content_capture, layout=layout)

    def by_name(self, name: str) -> list[ReadableSpan]:
        """The finished spans called ``name``."""
        return [s for s in self.spans if s.name == name]

    def metric_points(self) -> dict[str, list[Any]]:
        """Metric data points by instrument name."""
        data = self.reader.get_metrics_data()
        points: dict[str, list[Any]] = {}
        if data is None:
            return points
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
        return points


def make_sdk(limits: SpanLimits | None = UNLIMITED,
             processors: Sequence[SpanProcessor] = ()) -> Sdk:
    """Fresh providers; ``limits=None`` keeps the SDK's default limits (128 events)."""
    provider = TracerProvider(span_limits=limits) if limits is not None else TracerProvider()
    for processor in processors:
        provider.add_span_processor(processor)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    return Sdk(provider, exporter, MeterProvider(metric_readers=[reader]), reader)


@dataclass
class Traced:
    """One run recorded in process and as spans."""

    result: list[ContextItem] | None
    error: BaseException | None
    events: tuple[PipelineEvent, ...]
    report: SelectionReport


def run_both(pipeline: Pipeline, items: Sequence[ContextItem], budget: ContextBudget,
             spans: SpanCollector, level: TraceDetailLevel = TraceDetailLevel.FULL) -> Traced:
    """Run once with a DiagnosticTraceCollector and ``spans`` side by side. The
    events are the in-process ones with the service the span collector records
    (its provider's ``service.name``), as the spans carry them."""
    diagnostics = DiagnosticTraceCollector(level)
    result: list[ContextItem] | None = None
    error: BaseException | None = None
    try:
        result = pipeline.run(list(items), budget, FanOutCollector(diagnostics, spans))
    except Exception as exc:
        error = exc
    service = spans.service
    events = tuple(stamp_service(diagnostics.events, lambda: service))
    return Traced(result, error, events, diagnostics.build_report())


# -- span processors --------------------------------------------------------------------


class Raising(SpanProcessor):
    """Raises from on_start or on_end of the span named ``name`` (any span if None)."""

    def __init__(self, where: str, name: str | None = None) -> None:
        self.where = where
        self.name = name

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        """Raise when told to raise on start."""
        if self.where == "start" and (self.name is None or span.name == self.name):  # type: ignore[attr-defined]
            raise RuntimeError(f"processor refuses to start {span.name}")  # type: ignore[attr-defined]

    def on_end(self, span: ReadableSpan) -> None:
        """Raise when told to raise on end."""
        if self.where == "end" and (self.name is None or span.name == self.name):
            raise RuntimeError(f"processor refuses to end {span.name}")


@dataclass
class Watcher(SpanProcessor):
    """Counts spans started and ended, by name."""

    started: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        """Note a start."""
        self.started.append(span.name)  # type: ignore[attr-defined]

    def on_end(self, span: ReadableSpan) -> None:
        """Note an end."""
        self.ended.append(span.name)

    @property
    def open(self) -> list[str]:
        """Spans started and not ended."""
        left = list(self.started)
        for name in self.ended:
            if name in left:
                left.remove(name)
        return left


@contextmanager
def no_context_leak() -> Iterator[None]:
    """Assert the current context is the same object after the block as before it."""
    before = otel_context.get_current()
    yield
    assert otel_context.get_current() is before, "a context was left attached"


# -- file formats --------------------------------------------------------------------------


def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    raise TypeError(value)


def _attributes(attributes: Any) -> list[dict[str, Any]]:
    return [{"key": key, "value": _any_value(value)} for key, value in attributes.items()]


def _id(value: int, size: int, ids: str) -> str:
    raw = value.to_bytes(size, "big")
    return raw.hex() if ids == "hex" else base64.b64encode(raw).decode("ascii")


def otlp_document(spans: Sequence[ReadableSpan], ids: str = "hex",
                  key: str = "resourceSpans") -> dict[str, Any]:
    """The OTLP/JSON traces document of ``spans`` (``ids`` "hex" as the OTLP/JSON
    encoding and the collector's file exporter write them, "base64" as protobuf's
    canonical JSON mapping and Tempo's API do)."""
    out = []
    for span in spans:
        entry: dict[str, Any] = {
            "traceId": _id(span.context.trace_id, 16, ids),
            "spanId": _id(span.context.span_id, 8, ids),
            "name": span.name,
            "kind": 1,
            "startTimeUnixNano": str(span.start_time),
            "endTimeUnixNano": str(span.end_time),
            "attributes": _attributes(span.attributes),
            "events": [{"timeUnixNano": str(e.timestamp), "name": e.name,
                        "attributes": _attributes(e.attributes),
                        **({"droppedAttributesCount": e.dropped_attributes}
                           if e.dropped_attributes else {})} for e in span.events],
            "status": {},
        }
        if span.parent is not None:
            entry["parentSpanId"] = _id(span.parent.span_id, 8, ids)
        if span.dropped_events:
            entry["droppedEventsCount"] = span.dropped_events
        if span.dropped_attributes:
            entry["droppedAttributesCount"] = span.dropped_attributes
        out.append(entry)
    return {key: [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "tests"}}]},
        "scopeSpans": [{"scope": {"name": "cupellation"}, "spans": out}]}]}


def otlp_proto_bytes(spans: Sequence[ReadableSpan]) -> bytes:
    """The spans as OTLP protobuf (a TracesData), built through protobuf's JSON mapping."""
    message = trace_pb2.TracesData()
    json_format.ParseDict(otlp_document(spans, ids="base64"), message)
    return message.SerializeToString()


def _jaeger_tag(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, list | tuple):  # Jaeger has no lists: JSON text
        return {"key": key, "type": "string", "value": json.dumps(list(value))}
    return {"key": key, "type": "string", "value": value}


def jaeger_document(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The spans as Jaeger's UI downloads them (``Download JSON``): microsecond times,
    events as logs named by their ``event`` field, dropped counts as otel.* tags."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        trace_id = format(span.context.trace_id, "032x")
        tags = [_jaeger_tag(k, v) for k, v in attrs(span).items()]
        tags.append({"key": "otel.scope.name", "type": "string", "value": "cupellation"})
        tags.append({"key": "span.kind", "type": "string", "value": "internal"})
        if span.dropped_events:
            tags.append(_jaeger_tag("otel.dropped_events_count", span.dropped_events))
        logs = []
        for event in span.events:
            fields = [{"key": "event", "type": "string", "value": event.name}]
            fields += [_jaeger_tag(k, v) for k, v in attrs(event).items()]
            logs.append({"timestamp": event.timestamp // 1000, "fields": fields})
        references = ([{"refType": "CHILD_OF", "traceID": trace_id,
                        "spanID": format(span.parent.span_id, "016x")}]
                      if span.parent is not None else [])
        assert span.start_time is not None
        assert span.end_time is not None
        traces.setdefault(trace_id, []).append({
            "traceID": trace_id, "spanID": format(span.context.span_id, "016x"),
            "operationName": span.name, "references": references, "flags": 1,
            "startTime": span.start_time // 1000,
            "duration": (span.end_time - span.start_time) // 1000,
            "tags": tags, "logs": logs, "processID": "p1", "warnings": None,
        })
    return {"data": [{"traceID": trace_id, "spans": spans_, "processes": {
        "p1": {"serviceName": "tests", "tags": []}}, "warnings": None}
        for trace_id, spans_ in traces.items()],
        "total": 0, "limit": 0, "offset": 0, "errors": None}


def attrs(thing: Any) -> dict[str, Any]:
    """The attributes of an SDK span or span event, as a plain dict (never None)."""
    return dict(thing.attributes or {})
