"""setup_otlp honours its arguments and the standard OTEL_* variables, returns the
providers without installing them globally, and its wrappers never raise."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Sequence

import pytest
from opentelemetry import trace
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cupellation_exporters import (
    DEFAULT_GRPC_ENDPOINT,
    DEFAULT_HTTP_ENDPOINT,
    DEFAULT_PROTOCOL,
    DEFAULT_SERVICE_NAME,
    EXPORT_FAILED,
    SHUTDOWN,
    DropCountingSpanExporter,
    DropCountingSpanProcessor,
    setup_otlp,
)

from .fake_otlp import TRACE_METHOD, FakeGrpcBackend, FakeHttpBackend, Received
from .workload import SPANS_PER_RUN, run_selections


def _resource_attributes(received: Received) -> dict[str, str]:
    request = received.trace_request()
    pairs: Sequence[KeyValue] = request.resource_spans[0].resource.attributes
    return {pair.key: pair.value.string_value for pair in pairs}


def _traces(fake: FakeHttpBackend | FakeGrpcBackend) -> list[Received]:
    return [r for r in fake.received if r.path.endswith(("/v1/traces", TRACE_METHOD))]


def test_defaults_are_http_protobuf_to_localhost_4318_as_service_cupellation() -> None:
    """With nothing set, setup_otlp picks OTLP/HTTP to http://localhost:4318/v1/traces
    and names the service "cupellation", and installs no global tracer provider."""
    otlp = setup_otlp(metrics=False)
    try:
        exporter = otlp.span_processor.exporter.exporter
        assert otlp.protocol == DEFAULT_PROTOCOL == "http/protobuf"
        assert type(exporter).__module__.endswith("proto.http.trace_exporter")
        assert getattr(exporter, "_endpoint", None) == f"{DEFAULT_HTTP_ENDPOINT}/v1/traces"
        assert otlp.resource.attributes["service.name"] == DEFAULT_SERVICE_NAME
        assert trace.get_tracer_provider() is not otlp.tracer_provider
    finally:
        otlp.shutdown()


def test_grpc_defaults_to_localhost_4317() -> None:
    """protocol="grpc" builds the gRPC exporter aimed at localhost:4317."""
    otlp = setup_otlp(protocol="grpc", metrics=False)
    try:
        exporter = otlp.span_processor.exporter.exporter
        assert type(exporter).__module__.endswith("proto.grpc.trace_exporter")
        assert getattr(exporter, "_endpoint", None) == DEFAULT_GRPC_ENDPOINT.removeprefix(
            "http://")
    finally:
        otlp.shutdown()


def test_http_endpoint_headers_compression_and_service_name_come_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT (base URL, /v1/traces appended), _HEADERS,
    _COMPRESSION=gzip and OTEL_SERVICE_NAME all reach the wire over HTTP."""
    with FakeHttpBackend() as fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake.endpoint + "/")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS",
                           "x-project-name=from-env,authorization=Bearer%20t0ken")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "svc-from-env")
        otlp = setup_otlp(metrics=False)
        run_selections(otlp.tracer_provider, 1)
        otlp.shutdown()
        [request] = _traces(fake)
    assert request.path == "/v1/traces"
    assert request.headers["x-project-name"] == "from-env"
    assert request.headers["authorization"] == "Bearer t0ken"
    assert request.headers["content-encoding"] == "gzip"
    assert request.headers["content-type"] == "application/x-protobuf"
    assert _resource_attributes(request)["service.name"] == "svc-from-env"


def test_signal_specific_variables_win_and_the_traces_endpoint_is_used_as_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is taken verbatim (no path appended) and
    OTEL_EXPORTER_OTLP_TRACES_HEADERS replaces the generic headers."""
    with FakeHttpBackend() as fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", fake.endpoint + "/custom")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-project-name=generic")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-project-name=traces")
        otlp = setup_otlp(metrics=False)
        run_selections(otlp.tracer_provider, 1)
        otlp.shutdown()
        [request] = fake.received
    assert request.path == "/custom"
    assert request.headers["x-project-name"] == "traces"


def test_arguments_win_over_the_environment_and_headers_merge(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """endpoint=, service_name= and headers= override the variables; headers= is
    merged over OTEL_EXPORTER_OTLP_HEADERS (keys lowercased)."""
    with FakeHttpBackend() as fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-project-name=env,x-team=core")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "svc-from-env")
        otlp = setup_otlp(endpoint=fake.endpoint, headers={"X-Project-Name": "arg"},
                          service_name="svc-arg", metrics=False,
                          resource_attributes={"deployment.environment": "test"})
        run_selections(otlp.tracer_provider, 1)
        otlp.shutdown()
        [request] = fake.received
    assert request.headers["x-project-name"] == "arg"
    assert request.headers["x-team"] == "core"
    resource = _resource_attributes(request)
    assert resource["service.name"] == "svc-arg"
    assert resource["deployment.environment"] == "test"


def test_service_name_from_otel_resource_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    """service.name in OTEL_RESOURCE_ATTRIBUTES is used when OTEL_SERVICE_NAME is not
    set, and its other attributes are kept."""
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=svc-attrs,team=core")
    otlp = setup_otlp(metrics=False)
    otlp.shutdown()
    assert otlp.resource.attributes["service.name"] == "svc-attrs"
    assert otlp.resource.attributes["team"] == "core"


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_PROTOCOL",
                                      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"])
def test_grpc_chosen_by_environment_sends_headers_as_metadata(
        variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL=grpc (or the traces-only variable) switches to gRPC,
    to OTEL_EXPORTER_OTLP_ENDPOINT as is, with OTEL_EXPORTER_OTLP_HEADERS as metadata."""
    with FakeGrpcBackend() as fake:
        monkeypatch.setenv(variable, "grpc")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-project-name=grpc-env")
        otlp = setup_otlp(metrics=False)
        ended = run_selections(otlp.tracer_provider, 2)
        otlp.shutdown()
        received = _traces(fake)
    assert otlp.protocol == "grpc"
    assert len(fake.span_names()) == ended
    assert {r.headers["x-project-name"] for r in received} == {"grpc-env"}
    assert _resource_attributes(received[0])["service.name"] == DEFAULT_SERVICE_NAME


def test_grpc_headers_argument_merges_over_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Over gRPC too, headers= is merged over OTEL_EXPORTER_OTLP_HEADERS (the SDK's
    gRPC exporter alone would drop the environment's headers when given any)."""
    with FakeGrpcBackend() as fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=core")
        otlp = setup_otlp(protocol="grpc", endpoint=fake.endpoint, metrics=False,
                          headers={"X-Project-Name": "grpc-arg"})
        run_selections(otlp.tracer_provider, 1)
        otlp.shutdown()
        [request] = _traces(fake)
    assert request.headers["x-project-name"] == "grpc-arg"
    assert request.headers["x-team"] == "core"


def test_timeout_from_the_environment_bounds_export_and_shutdown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_TIMEOUT=1 (seconds, as the Python SDK reads it) bounds an
    export to a backend that answers after 5 s, and shutdown with it."""
    with FakeHttpBackend("slow", delay=5.0) as fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
        otlp = setup_otlp(metrics=False)
        ended = run_selections(otlp.tracer_provider, 1)
        started = time.monotonic()
        otlp.shutdown()
        elapsed = time.monotonic() - started
    assert otlp.span_processor.shutdown_timeout_millis == 1000
    assert elapsed < 1.0 + 2.0
    assert otlp.dropped_spans == ended


def test_metrics_go_to_v1_metrics_of_the_same_endpoint() -> None:
    """The MeterProvider exports over OTLP/HTTP to <endpoint>/v1/metrics."""
    with FakeHttpBackend() as fake:
        otlp = setup_otlp(endpoint=fake.endpoint, metrics=True)
        assert otlp.meter_provider is not None
        counter = otlp.meter_provider.get_meter("tests").create_counter("cupel.runs")
        counter.add(3)
        assert otlp.force_flush(timeout_seconds=5)
        otlp.shutdown()
        paths = {r.path for r in fake.received}
    assert "/v1/metrics" in paths


def test_metrics_over_grpc() -> None:
    """With protocol="grpc" the metrics go to the gRPC MetricsService."""
    with FakeGrpcBackend() as fake:
        otlp = setup_otlp(protocol="grpc", endpoint=fake.endpoint, metrics=True)
        assert otlp.meter_provider is not None
        otlp.meter_provider.get_meter("tests").create_counter("cupel.runs").add(1)
        assert otlp.force_flush(timeout_seconds=5)
        otlp.shutdown()
        paths = {r.path for r in fake.received}
    assert any(path.endswith("MetricsService/Export") for path in paths)


def test_invalid_arguments_raise_and_an_unsupported_env_protocol_falls_back(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A bad protocol, compression or timeout argument raises ValueError at setup; an
    unsupported OTEL_EXPORTER_OTLP_PROTOCOL (http/json) logs a warning and uses
    http/protobuf."""
    with pytest.raises(ValueError, match="protocol"):
        setup_otlp(protocol="http/json", metrics=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compression"):
        setup_otlp(compression="brotli", metrics=False)
    with pytest.raises(ValueError, match="timeout"):
        setup_otlp(timeout=0, metrics=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    caplog.set_level(logging.WARNING, logger="cupellation")
    otlp = setup_otlp(metrics=False)
    otlp.shutdown()
    assert otlp.protocol == "http/protobuf"
    assert any("http/json" in record.getMessage() for record in caplog.records)


def test_set_global_installs_the_providers_only_when_asked() -> None:
    """set_global=True makes them OpenTelemetry's global providers (checked in a fresh
    interpreter, as the global can be set once per process)."""
    code = (
        "from opentelemetry import metrics, trace\n"
        "from cupellation_exporters import setup_otlp\n"
        "otlp = setup_otlp(endpoint='http://127.0.0.1:9', set_global=True, metrics=True)\n"
        "assert trace.get_tracer_provider() is otlp.tracer_provider\n"
        "assert metrics.get_meter_provider() is otlp.meter_provider\n"
        "otlp.shutdown(timeout_seconds=1)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr


class _Exploding(SpanExporter):
    """An exporter whose every method raises."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise RuntimeError("boom")

    def shutdown(self) -> None:
        raise RuntimeError("boom")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise RuntimeError("boom")


def test_an_exporter_that_raises_becomes_failures_and_counts() -> None:
    """DropCountingSpanExporter turns exceptions into FAILURE / False, counts the
    spans, and its processor keeps going; spans ended after shutdown are counted too."""
    processor = DropCountingSpanProcessor(_Exploding(), max_queue_size=16,
                                          schedule_delay_millis=10,
                                          shutdown_timeout_millis=2000)
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415

    provider = TracerProvider()
    provider.add_span_processor(processor)
    ended = run_selections(provider, 2)
    assert processor.force_flush(2000) is True
    provider.shutdown()
    tracer = provider.get_tracer("late")
    with tracer.start_as_current_span("after-shutdown"):
        pass
    reasons = processor.counter.by_reason()
    assert reasons[EXPORT_FAILED] == ended
    assert reasons[SHUTDOWN] == 1
    assert processor.dropped_spans == ended + 1
    assert ended == 2 * SPANS_PER_RUN
    wrapper = DropCountingSpanExporter(_Exploding())
    assert wrapper.export([]) is SpanExportResult.FAILURE
    assert wrapper.force_flush() is False
    wrapper.shutdown()
