"""Every run records the service that ran it: RunInfo.service travels in run_started
(schema 3, an optional key the digest covers); the sinks fill it in from their
``service=``, the SDK provider's resource or OTEL_SERVICE_NAME, so an audit file and
the Collector's ServiceName agree."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    Pipeline,
    PriorityScorer,
    RunInfo,
)
from cupellation.events import (
    RunStarted,
    Verification,
    event_from_dict,
    event_to_dict,
)
from cupellation.exceptions import InvalidTypeError, InvalidValueError
from cupellation.logs import AuditLog, StructlogSink, read_runs
from cupellation.otel import SpanCollector, runs_from_spans
from cupellation.settings import check_service, resolve_service

_ENV = ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES")


@pytest.fixture(autouse=True)
def _no_service_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


def _run(collector: Any, run_info: RunInfo | None = None) -> None:
    items = [ContextItem(content=f"c{k}", tokens=10, priority=k) for k in range(4)]
    Pipeline(scorer=PriorityScorer()).run(items, ContextBudget(max_tokens=100, target_tokens=25),
                                          collector, run_info=run_info)


class _Keep(logging.Handler):
    """Keeps the records it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep ``record``."""
        self.records.append(record)


def _started(path: Path) -> dict[str, Any]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return next(line for line in lines if line["type"] == "run_started")


def test_run_info_service_travels_in_run_started_and_the_digest_covers_it(
        tmp_path: Path) -> None:
    """RunInfo(service=...) is written in run_started, reads back as the event's and
    the RunInfo's service, verified; the same file with the service changed reads
    as a digest mismatch (the digest covers the new key)."""
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as audit:
        _run(audit, RunInfo(service="checkout"))
    assert _started(path)["service"] == "checkout"
    (run,) = read_runs(path)
    assert run.verification is Verification.VERIFIED
    assert run.started is not None
    assert run.started.service == "checkout"
    assert run.started.run_info.service == "checkout"
    path.write_text(path.read_text().replace('"service":"checkout"', '"service":"billing"'))
    (changed,) = read_runs(path)
    assert changed.verification is Verification.MISMATCH


def test_a_run_started_without_the_key_reads_as_no_service_and_writes_none() -> None:
    """An old schema-3 line without ``service`` decodes with service None, and an event
    without a service writes no key (old readers and files stay as they were)."""
    events: list[Any] = []
    collector = DiagnosticTraceCollector()
    _run(collector)
    started = collector.events[0]
    assert isinstance(started, RunStarted)
    assert started.service is None
    flat = event_to_dict(started)
    assert "service" not in flat
    events.append(event_from_dict(flat))
    assert events[0] == started
    named = event_to_dict(event_from_dict({**flat, "service": "svc"}))
    assert named["service"] == "svc"
    assert list(named)[-1] == "service"


def test_the_sink_fills_the_service_from_its_argument_then_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run naming no service is recorded under AuditLog(service=...); without it
    under OTEL_SERVICE_NAME, then service.name in OTEL_RESOURCE_ATTRIBUTES
    (percent-decoded, the last pair winning); with none of them, under none. A
    service the run names wins over all of them."""
    def recorded(**options: Any) -> Any:
        path = tmp_path / f"a{len(list(tmp_path.iterdir()))}.jsonl"
        with AuditLog(path, **options) as audit:
            _run(audit)
        return _started(path).get("service")

    assert recorded() is None
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=a%20b,x=1,service.name=c%2Cd")
    assert recorded() == "c,d"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    assert recorded() == "from-env"
    assert recorded(service="given") == "given"
    path = tmp_path / "named.jsonl"
    with AuditLog(path, service="given") as audit:
        _run(audit, RunInfo(service="run-own"))
    assert _started(path)["service"] == "run-own"


def test_an_audit_file_names_the_service_the_collector_would_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a process whose SDK tracer provider has a resource, the audit log, the
    structlog records and the spans all name that resource's service.name, which is
    the Collector's ServiceName for the process, even when OTEL_SERVICE_NAME says
    otherwise (Resource.create's explicit name wins in the SDK, so in the Collector);
    and with only OTEL_SERVICE_NAME, they name what Resource.create() takes from it."""
    monkeypatch.setenv("OTEL_SERVICE_NAME", "env-name")
    for resource, expected in ((Resource.create({"service.name": "explicit"}), "explicit"),
                               (Resource.create(), "env-name")):
        assert resource.attributes["service.name"] == expected  # the Collector's ServiceName
        provider = TracerProvider(resource=resource)
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        monkeypatch.setattr(trace, "get_tracer_provider", lambda p=provider: p)
        path = tmp_path / f"{expected}.jsonl"
        logger = logging.getLogger(f"test.service.{expected}")
        logger.propagate = False
        kept = _Keep()
        logger.addHandler(kept)
        logger.setLevel(logging.INFO)
        with AuditLog(path) as audit:
            _run(FanOutCollector(audit, SpanCollector(tracer_provider=provider),
                                 StructlogSink(logger)))
        logger.removeHandler(kept)
        assert _started(path)["service"] == expected
        assert kept.records[0].service == expected  # type: ignore[attr-defined]
        (rebuilt,) = runs_from_spans(memory.get_finished_spans())
        assert rebuilt.verification == "verified"
        assert rebuilt.events[0].service == expected  # type: ignore[union-attr]


def test_resolve_service_order_and_bad_arguments(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """resolve_service: the value, else the provider's resource service.name, else
    OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES, else None; providers without a
    resource (the API's proxy) are passed over. check_service refuses blank text and
    non-text, naming ``service``."""
    provider = TracerProvider(resource=Resource({"service.name": "res"}))
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=attrs")
    assert resolve_service(None, trace.ProxyTracerProvider()) == "attrs"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "env")
    assert resolve_service(None) == "env"
    assert resolve_service(None, provider) == "res"
    assert resolve_service("arg", provider) == "arg"
    with pytest.raises(InvalidValueError, match="service"):
        check_service("  ")
    with pytest.raises(InvalidTypeError, match="service"):
        check_service(3)
    with pytest.raises(InvalidTypeError, match="service"):
        RunInfo(service=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="service"):
        AuditLog(tmp_path / "a.jsonl", service="")

