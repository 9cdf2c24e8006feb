"""Real artifacts of one demo run (the bundled candidates and policy, as
``cupellation demo`` runs them), for the decoder tests to read whole and to mutate:
its events as JSON lines, its audit log, and its spans as OTLP/JSON lines (the
exporters' file format), Jaeger JSON and OTLP protobuf."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib.resources import files
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import ContextItem, EventCollector, FanOutCollector, TraceDetailLevel
from cupellation.events import PipelineEvent, event_to_json
from cupellation.logs import AuditLog
from cupellation.otel import SpanCollector
from cupellation.policy import Policy
from cupellation_exporters import otlp_json_line


class _Events(EventCollector):
    """Keeps every event of the run."""

    def __init__(self) -> None:
        super().__init__(TraceDetailLevel.FULL)
        self.events: list[PipelineEvent] = []

    def on_event(self, event: PipelineEvent) -> None:
        self.events.append(event)


@dataclass(frozen=True)
class DemoArtifacts:
    """One demo run, as each artifact holds it."""

    events: tuple[PipelineEvent, ...]
    events_jsonl: bytes
    audit_log: bytes
    otlp_json: str
    jaeger_json: str
    otlp_proto: bytes


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


def _jaeger(spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """The spans as Jaeger's UI downloads them: microsecond times, events as logs
    named by their ``event`` field."""
    out = []
    for span in spans:
        assert span.context is not None
        assert span.start_time
        assert span.end_time
        entry: dict[str, Any] = {
            "traceID": format(span.context.trace_id, "032x"),
            "spanID": format(span.context.span_id, "016x"),
            "operationName": span.name,
            "references": [] if span.parent is None else [
                {"refType": "CHILD_OF", "traceID": format(span.context.trace_id, "032x"),
                 "spanID": format(span.parent.span_id, "016x")}],
            "startTime": span.start_time // 1000,
            "duration": (span.end_time - span.start_time) // 1000,
            "tags": [_jaeger_tag(k, v) for k, v in (span.attributes or {}).items()],
            "logs": [{"timestamp": event.timestamp // 1000,
                      "fields": [_jaeger_tag("event", event.name)] + [
                          _jaeger_tag(k, v) for k, v in (event.attributes or {}).items()]}
                     for event in span.events],
            "processID": "p1",
        }
        out.append(entry)
    return {"data": [{"traceID": out[0]["traceID"], "spans": out,
                      "processes": {"p1": {"serviceName": "tests", "tags": []}}}]}


@cache
def demo_artifacts() -> DemoArtifacts:
    """The demo run's artifacts (made once per test session)."""
    data = files("cupellation") / "_data"
    policy = Policy.from_json((data / "demo_policy.json").read_text(encoding="utf-8"))
    items = [ContextItem.from_dict(entry) for entry in
             json.loads((data / "demo_candidates.json").read_text(encoding="utf-8"))]
    pipeline = policy.build_pipeline(clock=lambda: datetime(2026, 11, 21, tzinfo=UTC))
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    events = _Events()
    with TemporaryDirectory() as folder:
        log_path = Path(folder) / "audit.jsonl"
        with AuditLog(log_path) as audit:
            pipeline.run(items, collector=FanOutCollector(
                events, audit, SpanCollector(tracer_provider=provider, tier="Full",
                                             content_capture="full")))
        audit_log = log_path.read_bytes()
    spans = tuple(exporter.get_finished_spans())
    return DemoArtifacts(
        events=tuple(events.events),
        events_jsonl=b"".join(event_to_json(e).encode("utf-8") + b"\n"
                              for e in events.events),
        audit_log=audit_log,
        otlp_json=otlp_json_line(spans),
        jaeger_json=json.dumps(_jaeger(spans)),
        otlp_proto=encode_spans(spans).SerializeToString())
