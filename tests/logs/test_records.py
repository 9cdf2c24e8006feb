"""StructlogSink: one record per event through structlog or stdlib logging, silent
until the application opts in, readable back into the same report."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from structlog.testing import capture_logs

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    Pipeline,
    PriorityScorer,
    TraceDetailLevel,
)
from cupellation.events import ContentCapture, event_to_dict
from cupellation.logs import STDLIB_LOGGER_NAME, StructlogSink, log_record, read_runs

#: Attributes every stdlib LogRecord has.
LOG_RECORD_ATTRIBUTES = set(vars(logging.LogRecord("n", 0, "p", 0, "m", None, None))) | {
    "message", "asctime"}
ITEMS = [ContextItem("pinned prompt", 10, kind="SystemPrompt", pinned=True),
         ContextItem("keep me", 20, priority=3, metadata={"k": 1}),
         ContextItem("too big", 500, priority=2),
         ContextItem("keep me", 20, priority=1),
         ContextItem("negative", -1)]
BUDGET = ContextBudget(max_tokens=200, target_tokens=100)


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


def _run(sink: Any) -> DiagnosticTraceCollector:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(scorer=PriorityScorer()).run(ITEMS, BUDGET, FanOutCollector(collector, sink))
    return collector


class JsonFormatter(logging.Formatter):
    """What a stdlib-only application's JSON formatter does: message plus extras."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"message": record.getMessage(), "level": record.levelname,
               "logger": record.name}
        out.update({k: v for k, v in vars(record).items() if k not in LOG_RECORD_ATTRIBUTES})
        return json.dumps(out)


def test_capture_logs_sees_one_named_record_per_event_with_the_flat_fields() -> None:
    """Under structlog, each event becomes one record named cupel.<type> whose fields
    are exactly the events' flat mapping (plus the level capture_logs adds)."""
    with capture_logs() as records:
        collector = _run(StructlogSink())
    events = collector.events
    assert [r["event"] for r in records] == ["cupel." + e.type for e in events]
    for record, event in zip(records, events, strict=True):
        fields = {k: v for k, v in record.items() if k not in ("event", "log_level")}
        expected = event_to_dict(event)
        if event.type == "run_completed":  # the sink writes the run's digest into its end
            assert fields.pop("digest").startswith("sha256:")
        assert fields == expected
        assert record["log_level"] == "info"
    names = {r["event"] for r in records}
    assert {"cupel.item_excluded", "cupel.item_included", "cupel.run_started"} <= names


def test_records_carry_the_current_span_ids_so_a_trace_leads_to_its_lines() -> None:
    """Inside an OpenTelemetry span, every record but run_started gets trace_id and
    span_id of that span (run_started carries the ids it was built with)."""
    tracer = TracerProvider().get_tracer("test")
    with capture_logs() as records, tracer.start_as_current_span("agent turn") as span:
        _run(StructlogSink())
    context = span.get_span_context()
    trace_id, span_id = format(context.trace_id, "032x"), format(context.span_id, "016x")
    for record in records:
        assert record["trace_id"] == trace_id
        assert record["span_id"] == span_id
    with capture_logs() as outside:
        _run(StructlogSink())
    assert not any("trace_id" in r for r in outside)


def test_the_library_is_silent_until_the_application_opts_in(
        capsys: pytest.CaptureFixture[str]) -> None:
    """With neither structlog nor logging configured, a run with a sink prints nothing
    anywhere (records go to the stdlib logger, which has no handler yet), and a run
    without a sink writes no record at all."""
    _run(StructlogSink())
    Pipeline(scorer=PriorityScorer()).run(ITEMS, BUDGET)
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == ""
    assert not structlog.is_configured()


def test_a_stdlib_only_application_gets_json_records_it_can_read_back() -> None:
    """An application that configures only stdlib logging, with a JSON formatter on a
    handler writing to a StringIO, receives every record with its fields as extras
    (no clash with LogRecord), and read_runs rebuilds the in-process report from it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(STDLIB_LOGGER_NAME)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        collector = _run(StructlogSink())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(collector.events)
    first = json.loads(lines[0])
    assert first["message"] == "cupel.run_started"
    assert first["logger"] == STDLIB_LOGGER_NAME
    reader = read_runs(io.StringIO(stream.getvalue()))
    (run,) = list(reader)
    assert run.report == collector.build_report()
    assert reader.stats.damaged_lines == 0


def test_structlog_rendering_through_stdlib_reaches_a_json_formatter() -> None:
    """When the application routes structlog into stdlib logging (render_to_log_kwargs),
    the records arrive as LogRecords with the fields as extras, and the JSON lines
    they become rebuild the same report."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    app = logging.getLogger("cupellation")
    app.addHandler(handler)
    app.setLevel(logging.INFO)
    structlog.configure(processors=[structlog.stdlib.render_to_log_kwargs],
                        logger_factory=structlog.stdlib.LoggerFactory(),
                        wrapper_class=structlog.stdlib.BoundLogger)
    try:
        collector = _run(StructlogSink())
    finally:
        app.removeHandler(handler)
        app.setLevel(logging.NOTSET)
    (run,) = list(read_runs(io.StringIO(stream.getvalue())))
    assert run.report == collector.build_report()


def test_structlog_json_renderer_lines_rebuild_the_report() -> None:
    """Lines written by structlog's JSONRenderer (``event`` holds the record name, the
    flat fields sit beside it with a timestamp and level) read back to the same report."""
    out = io.StringIO()
    structlog.configure(processors=[structlog.processors.add_log_level,
                                    structlog.processors.TimeStamper(fmt="iso"),
                                    structlog.processors.JSONRenderer()],
                        logger_factory=structlog.PrintLoggerFactory(out))
    collector = _run(StructlogSink())
    lines = out.getvalue().splitlines()
    assert json.loads(lines[1])["event"] == "cupel.stage_started"
    (run,) = list(read_runs(io.StringIO("noise from the app\n" + out.getvalue())))
    assert run.report == collector.build_report()


def test_an_explicit_logger_and_level_are_used() -> None:
    """A logger passed in receives every record at the level asked for; a stdlib
    logger passed in is used even when structlog is configured."""
    calls: list[tuple[str, str, dict[str, Any]]] = []

    class Recorder:
        def warning(self, name: str, **fields: Any) -> None:
            calls.append(("warning", name, fields))

    collector = _run(StructlogSink(Recorder(), level="warning"))
    assert len(calls) == len(collector.events)
    assert all(method == "warning" for method, _, _ in calls)
    with pytest.raises(ValueError, match="level"):
        StructlogSink(level="loud")
    with pytest.raises(TypeError, match="logger"):
        StructlogSink(object())


def test_hash_capture_replaces_content_and_drops_metadata_in_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under hash capture (from the environment, or the parameter, which wins) records
    hold sha256 digests instead of content, no metadata, and run_started says so."""
    monkeypatch.setenv("CUPELLATION_CAPTURE_CONTENT", "hash")
    assert StructlogSink().content_capture is ContentCapture.HASH
    assert StructlogSink(content_capture="full").content_capture is ContentCapture.FULL
    with capture_logs() as records:
        _run(StructlogSink())
    items = [r for r in records if "item.content" in r]
    assert items
    assert all(r["item.content"].startswith("sha256:") for r in items)
    assert not any("item.metadata" in r for r in records)
    assert records[0]["content_capture"] == "hash"


def test_log_record_keys_never_clash_with_log_record_attributes() -> None:
    """No field of any record (span ids included) is a LogRecord attribute name."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(scorer=PriorityScorer()).run(ITEMS, BUDGET, collector)
    for event in collector.events:
        keys = set(log_record(event, "full", span_ids=("a" * 32, "b" * 16)))
        assert not keys & LOG_RECORD_ATTRIBUTES
