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

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import ContextItem, EventCollector, FanOutCollector, TraceDetailLevel
from cupellation.events import PipelineEvent, event_to_json
from cupellation.logs import AuditLog
from cupellation.otel import SpanCollector
from cupellation.policy import Policy
from cupellation_exporters import otlp_json_line
from otel._support import jaeger_document


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
        jaeger_json=json.dumps(jaeger_document(spans)),
        otlp_proto=encode_spans(spans).SerializeToString())
