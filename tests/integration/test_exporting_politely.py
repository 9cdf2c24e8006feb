"""Exporting politely: gRPC batches are split to stay under the receiver's default
4 MiB and a span too large on its own is counted as dropped; metrics are sent only
when asked, and a failing metrics export is reported once per process."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cupellation_exporters._otlp as otlp_module
from cupellation_exporters import (
    GRPC_MAX_REQUEST_BYTES,
    TOO_LARGE,
    DropCountingSpanExporter,
    otlp_span_exporter,
    setup_otlp,
)

from .fake_otlp import FakeGrpcBackend, FakeHttpBackend

MIB = 1024 * 1024


def _spans(sizes: list[int]) -> list[ReadableSpan]:
    """One finished span per size, each with a string attribute of that many bytes."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests")
    for k, size in enumerate(sizes):
        with tracer.start_as_current_span(f"span {k}") as span:
            span.set_attribute("payload", "x" * size)
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_grpc_batches_are_split_under_4_mib_and_an_oversized_span_is_counted() -> None:
    """Nine spans of 1 MiB and one of 5 MiB in one batch to a gRPC receiver with the
    default 4 MiB limit: every request it receives is under 4 MiB, the nine spans all
    arrive, and the one too large alone is dropped, counted as too_large."""
    spans = _spans([MIB] * 4 + [5 * MIB] + [MIB] * 5)
    with FakeGrpcBackend() as fake:
        exporter = DropCountingSpanExporter(otlp_span_exporter(
            protocol="grpc", endpoint=fake.endpoint, timeout=10))
        assert exporter.max_request_bytes == GRPC_MAX_REQUEST_BYTES
        result = exporter.export(spans)
        exporter.shutdown()
        requests = [r for r in fake.received if r.path.endswith("TraceService/Export")]
    assert result is SpanExportResult.FAILURE  # not every span went out
    assert len(requests) >= 3
    assert all(len(r.body) < 4 * MIB for r in requests)
    names = [s.name for r in requests for rs in r.trace_request().resource_spans
             for ss in rs.scope_spans for s in ss.spans]
    assert sorted(names) == sorted(s.name for s in spans if s.name != "span 4")
    assert exporter.counter.by_reason()[TOO_LARGE] == 1
    assert exporter.dropped_spans == 1


def test_http_batches_are_not_split() -> None:
    """Over HTTP (no 4 MiB default) a batch goes out whole, as one request."""
    with FakeHttpBackend() as fake:
        exporter = DropCountingSpanExporter(otlp_span_exporter(
            protocol="http/protobuf", endpoint=fake.endpoint, timeout=10))
        assert exporter.max_request_bytes is None
        assert exporter.export(_spans([MIB] * 5)) is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert len(fake.received) == 1


def test_a_failing_metrics_export_warns_once_per_process(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Metrics asked for, to a backend refusing them, over three set-ups (three CLI
    runs in one process): one warning on the cupellation logger with the SDK's reason
    and how metrics are asked for; the SDK's own failure lines are kept out."""
    monkeypatch.setattr(otlp_module, "_METRICS_WARNED", [False])
    caplog.set_level(logging.WARNING)
    with FakeHttpBackend("refuse") as fake:
        for _ in range(3):
            otlp = setup_otlp(endpoint=fake.endpoint, metrics=True, timeout=2)
            assert otlp.meter_provider is not None
            otlp.meter_provider.get_meter("tests").create_counter("cupel.runs").add(1)
            otlp.force_flush(timeout_seconds=5)
            otlp.shutdown()
    ours = [r for r in caplog.records if r.name == "cupellation"
            and "exporting metrics over OTLP failed" in r.getMessage()]
    assert len(ours) == 1
    assert "OTEL_METRICS_EXPORTER=otlp" in ours[0].getMessage()
    # The SDK's own words (its HTTP 400) when its failure line reached the exporter's
    # filter; under a loaded machine the SDK may give up on time instead, silently,
    # and the warning then says so in general terms.
    message = ours[0].getMessage()
    assert "(Failed to export metrics batch code: 400" in message or (
        "(the backend refused them or could not be reached)" in message)
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")
                and "metric" in r.getMessage().lower()]


def test_the_applications_own_metric_export_failures_are_not_held_back() -> None:
    """After setup_otlp(metrics=True), the SDK metric exporters' loggers still pass what
    the application's own exporters log there: only the lines logged inside
    cupellation's wrapped export call are held back for its one warning. (Read by a
    handler on each logger, past the logger's filters: earlier tests in the session
    may have changed propagation or disabled loggers.)"""
    class Gather(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.getMessage())

    gather = Gather()
    loggers = [logging.getLogger(name) for name in otlp_module._METRIC_LOGGERS]
    saved = [(logger.disabled, logger.level) for logger in loggers]
    for logger in loggers:
        logger.disabled = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(gather)
    try:
        with FakeHttpBackend("refuse") as fake:
            otlp = setup_otlp(endpoint=fake.endpoint, metrics=True, timeout=2)
            try:
                for logger in loggers:
                    logger.error("Failed to export metrics batch: the app's own")
            finally:
                otlp.shutdown()
    finally:
        for logger, (disabled, level) in zip(loggers, saved, strict=True):
            logger.removeHandler(gather)
            logger.disabled = disabled
            logger.setLevel(level)
    assert gather.messages.count("Failed to export metrics batch: the app's own") == len(
        loggers)
