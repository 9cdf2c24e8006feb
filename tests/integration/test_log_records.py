"""Runs as OpenTelemetry log records (LogRecordCollector, setup_otlp(logs=True)): one
record per event whose attributes are the flat mapping, body the event type,
timestamp the run's started_at; what a real OTLP/HTTP receiver gets, stringified as
the Collector's clickhouse exporter does, reads back into the same report."""

from __future__ import annotations

import contextlib
import logging
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from cupellation import (
    DiagnosticTraceCollector,
    FanOutCollector,
    SelectionReport,
    TraceDetailLevel,
    build_report,
)
from cupellation.events import (
    PipelineEvent,
    RunCompleted,
    RunFailed,
    RunStarted,
    event_from_dict,
    event_to_dict,
    stamp_service,
)
from cupellation_exporters import LOG_SCOPE_NAME, LogRecordCollector, run_timestamp, setup_otlp
from logs._workload import random_budget, random_items, random_pipeline

from .fake_otlp import LOGS_METHOD, FakeGrpcBackend, FakeHttpBackend, Received
from .go_strings import go_as_string, go_float, go_json, row_from_attributes, typed_attributes

_SERVICE = "agent-fleet"


def _memory_provider() -> tuple[LoggerProvider, InMemoryLogRecordExporter]:
    provider = LoggerProvider(resource=Resource.create({"service.name": _SERVICE}),
                              shutdown_on_exit=False)
    memory = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    return provider, memory


def _runs(collector: Any, count: int, seed: int = 7
          ) -> dict[str, tuple[tuple[PipelineEvent, ...], SelectionReport]]:
    """``count`` random runs (failed ones too) into ``collector`` and a report
    collector: each run's in-process events and report, by run id."""
    rng = random.Random(seed)
    out = {}
    for _ in range(count):
        diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
        with contextlib.suppress(Exception):  # a failed run is recorded too
            random_pipeline(rng).run(random_items(rng, rng.randint(0, 12)), random_budget(rng),
                                     FanOutCollector(diagnostics, collector))
        events = diagnostics.events
        out[events[0].run_id] = (events, diagnostics.build_report())
    return out


def _rebuilt(rows: Iterable[dict[str, Any]]) -> dict[str, SelectionReport]:
    """Each run's report folded from its records' flat mappings (in seq order)."""
    by_run: dict[str, list[tuple[int, PipelineEvent]]] = defaultdict(list)
    for flat in rows:
        event = event_from_dict(flat)
        by_run[event.run_id].append((int(flat["seq"]), event))
    return {run_id: build_report(event for _, event in sorted(events, key=lambda e: e[0]))
            for run_id, events in by_run.items()}


def test_each_event_is_one_record_carrying_its_flat_mapping() -> None:
    """With full capture, every event of random runs is one record, in order: its
    attributes are the event's flat mapping (the run's service filled in from the
    provider's resource, the end event's digest set), its body the event type, its
    timestamp the run's started_at, severity INFO, scope cupellation; the reports
    folded from the records equal the in-process ones (so the digests verify)."""
    provider, memory = _memory_provider()
    runs = _runs(LogRecordCollector(logger_provider=provider, content_capture="full"), 12)
    records: Sequence[ReadableLogRecord] = memory.get_finished_logs()
    assert len(records) == sum(len(events) for events, _ in runs.values())
    rows: list[dict[str, Any]] = [dict(record.log_record.attributes or {}) for record in records]
    for record, row in zip(records, rows, strict=True):
        events, _ = runs[row["run_id"]]
        started = events[0]
        assert isinstance(started, RunStarted)
        event = stamp_service([events[row["seq"]]], lambda: _SERVICE)[0]
        expected = event_to_dict(event)
        if isinstance(event, RunCompleted | RunFailed):
            assert str(row.pop("digest")).startswith("sha256:")
            expected.pop("digest", None)
        assert row == {k: tuple(v) if isinstance(v, list) else v for k, v in expected.items()}
        log = record.log_record
        assert log.body == row["type"]
        assert log.timestamp == run_timestamp(started)
        assert log.severity_text == "INFO"
        assert record.instrumentation_scope is not None
        assert record.instrumentation_scope.name == LOG_SCOPE_NAME
        assert record.resource.attributes["service.name"] == _SERVICE
    assert {row["service"] for row in rows if row["type"] == "run_started"} == {_SERVICE}
    rebuilt = _rebuilt(dict(record.log_record.attributes or {}) for record in records)
    assert rebuilt == {run_id: report for run_id, (_, report) in runs.items()}


def test_records_carry_the_current_span_and_the_capture_policy() -> None:
    """Records emitted inside a span carry its trace and span ids; under the default
    capture (none) no content leaves the process and run_started says so."""
    provider, memory = _memory_provider()
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("agent") as span:
        _runs(LogRecordCollector(logger_provider=provider), 1)
    context = span.get_span_context()
    records = memory.get_finished_logs()
    assert {(r.log_record.trace_id, r.log_record.span_id) for r in records} == {
        (context.trace_id, context.span_id)}
    attributes = [dict(r.log_record.attributes or {}) for r in records]
    assert attributes[0]["content_capture"] == "none"
    contents = [a["item.content"] for a in attributes if "item.content" in a]
    assert all(str(c).startswith("<candidate ") for c in contents)


class _Broken(LoggerProvider):
    def get_logger(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("broken provider")


def test_a_failing_provider_never_reaches_the_run(caplog: pytest.LogCaptureFixture) -> None:
    """A provider that raises is logged once per run on the cupellation logger; the
    runs themselves complete with their usual reports."""
    collector = LogRecordCollector(logger_provider=_Broken(shutdown_on_exit=False))
    with caplog.at_level(logging.ERROR, logger="cupellation"):
        runs = _runs(collector, 3)
    assert all(not report.incomplete for _, report in runs.values())
    failures = [r for r in caplog.records if "LogRecordCollector failed" in r.getMessage()]
    assert len(failures) == len(runs)


def test_go_as_string_writes_what_pdata_writes() -> None:
    """The test's copy of pdata's AsString gives Go's own strings for the values whose
    Go form differs from Python's (checked against pdata's float64AsString rules and
    encoding/json's escaping)."""
    cases: list[tuple[Any, str]] = [
        (1.5e21, "1.5e+21"), (1e21, "1e+21"), (1e-7, "1e-7"), (1.25e-10, "1.25e-10"),
        (1e20, "100000000000000000000"), (0.1, "0.1"), (3.0, "3"), (-0.0, "-0"),
        (0.0, "0"), (1e-6, "0.000001"), (123456789.125, "123456789.125"),
        (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
        (True, "true"), (False, "false"), (-42, "-42"), ("<a> & b", "<a> & b"),
        (("x", "<b>&", "\u2028", 'q"\\\n\x01'),
         '["x","\\u003cb\\u003e\\u0026","\\u2028","q\\"\\\\\\n\\u0001"]'),
        ((1, 2), "[1,2]"), ((), "[]"), ((0.5, 2e21), "[0.5,2e+21]"),
    ]
    for value, expected in cases:
        assert go_as_string(value) == expected, value
    assert go_float(-2.5e-8) == "-2.5e-8"
    assert go_json(["é"]) == '["é"]'


def _any_value(value: AnyValue) -> Any:
    """An OTLP AnyValue as the Collector's pdata holds it (its AsRaw)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_any_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind is not None else None


def _rows(received: Sequence[Received]) -> list[dict[str, Any]]:
    """The otel_logs rows the clickhouse exporter would write for what arrived:
    ServiceName from the resource, Timestamp, Body, LogAttributes as AsString."""
    rows = []
    for request in received:
        for resource_logs in request.logs_request().resource_logs:
            resource = {kv.key: _any_value(kv.value)
                        for kv in resource_logs.resource.attributes}
            for scope_logs in resource_logs.scope_logs:
                for log in scope_logs.log_records:
                    attributes = {kv.key: _any_value(kv.value) for kv in log.attributes}
                    rows.append({
                        "ServiceName": resource.get("service.name", ""),
                        "Timestamp": log.time_unix_nano or log.observed_time_unix_nano,
                        "Body": go_as_string(_any_value(log.body)),
                        "SeverityText": log.severity_text,
                        "ScopeName": scope_logs.scope.name,
                        "LogAttributes": row_from_attributes(attributes),
                    })
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_what_a_receiver_gets_reads_back_into_the_same_reports(protocol: str) -> None:
    """setup_otlp(logs=True) sends the records to a real OTLP receiver on loopback
    (HTTP/protobuf, then gRPC); written as the clickhouse exporter writes rows (every
    attribute a Go AsString) and read back by the declared types, they give every
    run's report, digests verified; ServiceName is the run's recorded service; every
    row of a run has the run's started_at as Timestamp and the event type as Body."""
    backend = FakeHttpBackend() if protocol == "http/protobuf" else FakeGrpcBackend()
    with backend:
        providers = setup_otlp(protocol=protocol, endpoint=backend.endpoint,  # type: ignore[arg-type]
                               service_name=_SERVICE, logs=True)
        try:
            runs = _runs(providers.log_collector(content_capture="full"), 20, seed=11)
        finally:
            providers.shutdown()
        received = [r for r in backend.received
                    if r.path.endswith("/v1/logs") or r.path == LOGS_METHOD]
    rows = _rows(received)
    assert len(rows) == sum(len(events) for events, _ in runs.values())
    typed = [typed_attributes(row["LogAttributes"]) for row in rows]
    assert _rebuilt(typed) == {run_id: report for run_id, (_, report) in runs.items()}
    for row, flat in zip(rows, typed, strict=True):
        events, _ = runs[flat["run_id"]]
        assert isinstance(events[0], RunStarted)
        assert row["Timestamp"] == run_timestamp(events[0])
        assert row["Body"] == flat["type"]
        assert row["ServiceName"] == _SERVICE
        assert (row["SeverityText"], row["ScopeName"]) == ("INFO", LOG_SCOPE_NAME)
        if flat["type"] == "run_started":
            assert flat["service"] == row["ServiceName"]


def test_setup_otlp_builds_the_log_exporter_from_arguments_and_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """logs=True builds a LoggerProvider on the shared resource whose exporter posts
    to <endpoint>/v1/logs over HTTP, or the gRPC exporter; OTEL_EXPORTER_OTLP_LOGS_*
    wins over OTEL_EXPORTER_OTLP_*; OTEL_LOGS_EXPORTER=otlp turns logs on when the
    argument is left out; without either there is no logger provider, and
    log_collector() says why."""
    def exporter(providers: Any) -> Any:
        processor = providers.logger_provider._multi_log_record_processor
        return processor._log_record_processors[0]._batch_processor._exporter

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    http = setup_otlp(logs=True, service_name="svc")
    try:
        assert exporter(http)._endpoint == "http://collector:4318/v1/logs"
        assert http.logger_provider is not None
        assert http.logger_provider.resource.attributes["service.name"] == "svc"
        assert http.log_collector().service == "svc"
    finally:
        http.shutdown(timeout_seconds=1)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://logs:4318/custom")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "otlp")
    grpc_providers = setup_otlp()
    try:
        assert type(exporter(grpc_providers)).__module__.startswith(
            "opentelemetry.exporter.otlp.proto.grpc")
        assert grpc_providers.protocol == "http/protobuf"  # traces keep their own
    finally:
        grpc_providers.shutdown(timeout_seconds=1)
    monkeypatch.delenv("OTEL_LOGS_EXPORTER")
    plain = setup_otlp()
    try:
        assert plain.logger_provider is None
        with pytest.raises(ValueError, match="logs=True"):
            plain.log_collector()
    finally:
        plain.shutdown(timeout_seconds=1)
    assert trace.get_tracer_provider() is not http.tracer_provider  # nothing global



def test_a_digest_key_makes_the_end_record_an_hmac_that_only_the_key_verifies() -> None:
    """With digest_key, each run's end record carries hmac-sha256 over the run's
    canonical lines: the records fold, with the key, into the in-process reports; read
    without the key the digest cannot be checked, and with another key it is a
    mismatch the report lists as incomplete."""
    provider, memory = _memory_provider()
    runs = _runs(LogRecordCollector(logger_provider=provider, content_capture="full",
                                    digest_key="fleet-key"), 4, seed=3)
    rows: list[dict[str, Any]] = [dict(r.log_record.attributes or {})
                                  for r in memory.get_finished_logs()]
    ends = [row for row in rows if row["type"] in ("run_completed", "run_failed")]
    assert len(ends) == len(runs)
    assert all(str(row["digest"]).startswith("hmac-sha256:") for row in ends)
    by_run: dict[str, list[PipelineEvent]] = defaultdict(list)
    for row in rows:
        by_run[str(row["run_id"])].append(event_from_dict(row))
    for run_id, (_, report) in runs.items():
        assert build_report(by_run[run_id], digest_key="fleet-key") == report
        wrong = build_report(by_run[run_id], digest_key="another-key")
        assert any("digest mismatch" in line for line in wrong.incomplete)
