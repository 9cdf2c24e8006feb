"""Spans sent through setup_otlp to a real Arize Phoenix, over OTLP/HTTP and OTLP/gRPC,
come back through Phoenix's REST API as they were sent."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id

from cupellation_exporters import OtlpProtocol, setup_otlp
from cupellation_exporters.conventions import (
    EXCLUSION_COUNT_ATTRIBUTE,
    PIPELINE_SPAN,
    STAGES,
    stage_span_name,
)

from .phoenix import PHOENIX_PROJECT_ATTRIBUTE, Phoenix, Span

pytestmark = [pytest.mark.slow, pytest.mark.phoenix]

ROOT_ATTRIBUTES: dict[str, Any] = {
    "cupel.candidates": 12,
    "cupel.budget.fill_ratio": 0.75,
    "cupel.scorer": "recency",
    "cupel.kinds": ("Message", "Document", "ToolOutput"),
    "cupel.scores": (0.5, 1.25, 2.0),
    "cupel.tokens": (120, 48, 7),
    "cupel.pinned": True,
}
EXCLUDED_EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("cupel.exclusion", {"cupel.item.index": 3, "cupel.item.score": 0.25,
                             "cupel.reason": "BudgetExceeded",
                             "cupel.item.tokens": (900, 901)}),
    ("cupel.exclusion", {"cupel.item.index": 7, "cupel.item.score": 1.0,
                             "cupel.reason": "Deduplicated",
                             "cupel.item.tokens": (12,)}),
    ("cupel.stage.note", {"cupel.note": "last", "cupel.weights": (1.5, -2.0)}),
]


def _send_selection(protocol: OtlpProtocol, phoenix: Phoenix, project: str,
                    monkeypatch: pytest.MonkeyPatch) -> list[ReadableSpan]:
    """One traced selection (a root, five stages, item events on the slice stage) sent
    through setup_otlp; returns the spans as the SDK recorded them."""
    if protocol == "grpc":
        # Phoenix's gRPC receiver ignores the x-project-name metadata (20.26.1 reads
        # only the resource attribute there), so the project goes in the resource, set
        # through the standard variable; the header is sent too, and is harmless.
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"{PHOENIX_PROJECT_ATTRIBUTE}={project}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-project-name={project}")
        otlp = setup_otlp(protocol="grpc", endpoint=phoenix.grpc_endpoint, metrics=False,
                          timeout=10)
    else:  # the project through the headers argument
        otlp = setup_otlp(protocol="http/protobuf", endpoint=phoenix.http_base_endpoint,
                          headers={"x-project-name": project}, metrics=False, timeout=10)
    recorded = InMemorySpanExporter()
    otlp.tracer_provider.add_span_processor(SimpleSpanProcessor(recorded))
    tracer = otlp.tracer_provider.get_tracer("cupellation.tests.phoenix")
    with tracer.start_as_current_span(PIPELINE_SPAN, attributes=ROOT_ATTRIBUTES):
        for index, stage in enumerate(STAGES):
            with tracer.start_as_current_span(stage_span_name(stage)) as span:
                span.set_attribute(EXCLUSION_COUNT_ATTRIBUTE, index)
                if stage == "slice":
                    for name, attributes in EXCLUDED_EVENTS:
                        span.add_event(name, attributes)
    otlp.shutdown()
    assert otlp.dropped_spans == 0
    assert otlp.span_processor.counter.delivered == 1 + len(STAGES)
    return list(recorded.get_finished_spans())


def _shutdown(exporter: SpanExporter) -> None:
    exporter.shutdown()  # typed through the base class (the OTLP exporter's is not)


def _close_ns(actual: int | str | None, expected: int | None) -> bool:
    """Phoenix keeps microseconds (through a float): equal within 1 µs."""
    assert actual is not None
    assert expected is not None
    return abs(int(actual) - expected) <= 1_000


def _plain(attributes: Mapping[str, object] | None) -> dict[str, object]:
    """SDK attributes with arrays as lists (as every reader gives them back)."""
    return {key: list(value) if isinstance(value, tuple) else value
            for key, value in (attributes or {}).items()}


def _assert_round_trip(sent: Sequence[ReadableSpan], stored: list[Span]) -> None:
    by_id = {span.span_id: span for span in stored}
    assert len(by_id) == len(stored) == len(sent)
    for original in sent:
        context = original.context
        assert context is not None
        back = by_id[format_span_id(context.span_id)]
        assert back.name == original.name
        assert back.trace_id == format_trace_id(context.trace_id)
        parent = original.parent
        assert back.parent_span_id == (None if parent is None
                                       else format_span_id(parent.span_id))
        attributes = dict(back.attributes)
        expected = _plain(original.attributes)
        assert attributes == expected
        for key, value in expected.items():  # int stays int, float stays float
            assert type(attributes[key]) is type(value), key
        assert _close_ns(back.start_ns, original.start_time)
        assert _close_ns(back.end_ns, original.end_time)
        events = back.events
        assert [event.name for event in events] == [e.name for e in original.events]
        for event, sent_event in zip(events, original.events, strict=True):
            assert dict(event.attributes) == _plain(sent_event.attributes)
            assert _close_ns(event.timestamp_ns, sent_event.timestamp)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_selection_survives_the_round_trip_through_phoenix(
        protocol: OtlpProtocol, phoenix: Phoenix, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP (project set by the x-project-name headers argument) and gRPC
    (project set by OTEL_RESOURCE_ATTRIBUTES), a root span, five stage children and three ordered
    events come back from Phoenix's REST API with the same names, lowercase-hex ids,
    parent links, int/float/str/bool/array attributes (types kept), event order and
    values, and timestamps within 1 µs."""
    project = f"cupel-{protocol.replace('/', '-')}-{uuid.uuid4().hex[:8]}"
    sent = _send_selection(protocol, phoenix, project, monkeypatch)
    stored = phoenix.spans(project, expect=len(sent))
    _assert_round_trip(sent, stored)
    roots = [span for span in stored if span.parent_span_id is None]
    assert [root.name for root in roots] == [PIPELINE_SPAN]
    assert {span.name for span in stored} - {PIPELINE_SPAN} == {
        stage_span_name(stage) for stage in STAGES}


def test_resending_a_span_id_does_not_duplicate_it(phoenix: Phoenix,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans exported a second time with the same ids (an exporter retry after a lost
    answer) are stored once: the project still holds exactly the first copy."""
    project = f"cupel-resend-{uuid.uuid4().hex[:8]}"
    sent = _send_selection("http/protobuf", phoenix, project, monkeypatch)
    phoenix.spans(project, expect=len(sent))
    again = OTLPSpanExporter(endpoint=phoenix.http_endpoint,
                             headers={"x-project-name": project}, timeout=10)
    try:
        assert again.export(sent) is SpanExportResult.SUCCESS
    finally:
        _shutdown(again)
    stored = phoenix.spans(project, expect=len(sent), settle=1.0)
    assert len(stored) == len(sent)
    _assert_round_trip(sent, stored)


def test_a_project_with_no_span_reads_as_empty(phoenix: Phoenix) -> None:
    """Before its first span a project answers 404, which read_spans reports as no
    spans rather than an error."""
    assert phoenix.read_spans(f"cupel-empty-{uuid.uuid4().hex[:8]}") == []
