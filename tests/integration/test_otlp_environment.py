"""The OTEL_EXPORTER_OTLP_* variables test_setup_otlp.py leaves untested: the
traces-only timeout and compression, deflate, the compression argument, gRPC's
endpoint, timeout and compression from the environment, and the metrics endpoint;
and otlp_span_exporter (what replay sends through) honouring the same variables."""

from __future__ import annotations

import time

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from cupellation_exporters import OtlpProviders, otlp_span_exporter, setup_otlp

from .fake_otlp import TRACE_METHOD, FakeGrpcBackend, FakeHttpBackend, Received
from .workload import SPANS_PER_RUN, run_selections


def _traces(fake: FakeHttpBackend | FakeGrpcBackend) -> list[Received]:
    return [r for r in fake.received if r.path.endswith(("/v1/traces", TRACE_METHOD))]


def _send_one_run(otlp: OtlpProviders) -> int:
    ended = run_selections(otlp.tracer_provider, 1)
    otlp.shutdown()
    return ended


def test_traces_compression_wins_and_deflate_reaches_the_wire(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=deflate wins over
    OTEL_EXPORTER_OTLP_COMPRESSION=gzip: the request is deflate-encoded (and the fake
    backend decodes it to the spans sent)."""
    with FakeHttpBackend() as fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "deflate")
        ended = _send_one_run(setup_otlp(metrics=False))
        [request] = _traces(fake)
        names = fake.span_names()
    assert request.headers["content-encoding"] == "deflate"
    assert len(names) == ended


@pytest.mark.parametrize("environment", [None, "deflate"])
def test_the_compression_argument_wins_over_the_environment(
        environment: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """compression="gzip" reaches the wire, whatever OTEL_EXPORTER_OTLP_COMPRESSION
    says; compression="none" sends it uncompressed."""
    if environment is not None:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", environment)
    with FakeHttpBackend() as fake:
        _send_one_run(setup_otlp(endpoint=fake.endpoint, compression="gzip", metrics=False))
        _send_one_run(setup_otlp(endpoint=fake.endpoint, compression="none", metrics=False))
        first, second = _traces(fake)
    assert first.headers["content-encoding"] == "gzip"
    assert "content-encoding" not in second.headers


def test_traces_timeout_wins_over_the_generic_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=1 wins over OTEL_EXPORTER_OTLP_TIMEOUT=30: an
    export to a backend answering after 5 s is cut at 1 s, and shutdown with it."""
    with FakeHttpBackend("slow", delay=5.0) as fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "30")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")
        otlp = setup_otlp(metrics=False)
        started = time.monotonic()
        ended = _send_one_run(otlp)
        elapsed = time.monotonic() - started
    assert otlp.span_processor.shutdown_timeout_millis == 1000
    assert elapsed < 1.0 + 2.0
    assert otlp.dropped_spans == ended


def test_grpc_takes_endpoint_timeout_and_compression_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
    where spans go, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT bounds a slow backend's export
    and OTEL_EXPORTER_OTLP_COMPRESSION=gzip sets the channel's compression (the gRPC
    exporter's setting: the server cannot see it once decompressed)."""
    with FakeGrpcBackend("slow", delay=5.0) as fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        otlp = setup_otlp(metrics=False)
        exporter = otlp.span_processor.exporter.exporter
        assert getattr(exporter, "_compression", None) is grpc.Compression.Gzip
        started = time.monotonic()
        ended = _send_one_run(otlp)
        elapsed = time.monotonic() - started
        received = _traces(fake)
    assert otlp.protocol == "grpc"
    assert received  # it reached the traces endpoint, not :9
    assert elapsed < 1.0 + 2.0
    assert otlp.dropped_spans == ended


def test_the_metrics_endpoint_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metrics asked for with OTEL_METRICS_EXPORTER=otlp: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
    is taken verbatim for metrics while traces go to OTEL_EXPORTER_OTLP_ENDPOINT +
    /v1/traces."""
    with FakeHttpBackend() as fake:
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "otlp")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", fake.endpoint + "/m")
        otlp = setup_otlp()
        assert otlp.meter_provider is not None
        otlp.meter_provider.get_meter("tests").create_counter("cupel.runs").add(1)
        run_selections(otlp.tracer_provider, 1)
        assert otlp.force_flush(timeout_seconds=5)
        otlp.shutdown()
        paths = {r.path for r in fake.received}
    assert paths == {"/m", "/v1/traces"}


def _via_provider(exporter: SpanExporter) -> int:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ended = run_selections(provider, 1)
    provider.shutdown()
    return ended



@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_otlp_span_exporter_honours_the_same_variables(
        protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """otlp_span_exporter() (replay's exporter) reads OTEL_EXPORTER_OTLP_PROTOCOL,
    _ENDPOINT and _HEADERS as setup_otlp does, and headers= merges over them."""
    fake: FakeHttpBackend | FakeGrpcBackend = (
        FakeGrpcBackend() if protocol == "grpc" else FakeHttpBackend())
    with fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=core,x-project-name=env")
        ended = _via_provider(otlp_span_exporter(headers={"X-Project-Name": "arg"}))
        received = _traces(fake)
        names = fake.span_names()
    assert len(names) == ended == SPANS_PER_RUN
    assert {r.headers["x-project-name"] for r in received} == {"arg"}
    assert {r.headers["x-team"] for r in received} == {"core"}


def test_otlp_span_exporter_refuses_bad_arguments() -> None:
    """Invalid protocol, compression or timeout arguments raise ValueError at once."""
    with pytest.raises(ValueError, match="protocol"):
        otlp_span_exporter(protocol="http/json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compression"):
        otlp_span_exporter(compression="zstd")
    with pytest.raises(ValueError, match="timeout"):
        otlp_span_exporter(timeout=-1)


@pytest.mark.parametrize("value", [None, "none", "console", ""])
def test_metrics_are_sent_only_when_asked(monkeypatch: pytest.MonkeyPatch,
                                         value: str | None) -> None:
    """Without metrics=True or OTEL_METRICS_EXPORTER naming otlp, setup_otlp builds no
    MeterProvider and nothing is sent to /v1/metrics."""
    with FakeHttpBackend() as fake:
        if value is not None:
            monkeypatch.setenv("OTEL_METRICS_EXPORTER", value)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake.endpoint)
        otlp = setup_otlp()
        assert otlp.meter_provider is None
        run_selections(otlp.tracer_provider, 1)
        otlp.shutdown()
        paths = {r.path for r in fake.received}
    assert paths == {"/v1/traces"}
