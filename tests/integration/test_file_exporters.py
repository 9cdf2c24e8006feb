"""The file exporters: the event stream as JSON lines, a SelectionReport replaced
atomically, and spans as OTLP/JSON lines that cupellation.otel and the Collector's
otlpjsonfile receiver read; none of them raises on the telemetry path."""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    GreedySlice,
    Pipeline,
    RecencyScorer,
    SelectionReport,
)
from cupellation.logs import read_runs
from cupellation.otel import SpanCollector, read_trace_file, runs_from_spans
from cupellation_exporters import (
    EventLogExporter,
    OtlpJsonFileSpanExporter,
    ReportFileExporter,
    otlp_json_document,
)

from .selections import Selection, run_selections

UNLIMITED = SpanLimits(max_attributes=SpanLimits.UNSET, max_events=SpanLimits.UNSET,
                       max_span_attributes=SpanLimits.UNSET,
                       max_event_attributes=SpanLimits.UNSET,
                       max_attribute_length=SpanLimits.UNSET,
                       max_span_attribute_length=SpanLimits.UNSET)
HEX_TRACE = re.compile(r"[0-9a-f]{32}")
HEX_SPAN = re.compile(r"[0-9a-f]{16}")
DIGITS = re.compile(r"-?[0-9]+")


def _traced_to_file(path: Path, count: int, seed: str
                    ) -> tuple[list[Selection], list[ReadableSpan], OtlpJsonFileSpanExporter]:
    """``count`` runs through a Full, full-capture SpanCollector whose spans go to an
    OtlpJsonFileSpanExporter at ``path`` (one line per span: SimpleSpanProcessor) and
    to memory."""
    exporter = OtlpJsonFileSpanExporter(path)
    memory = InMemorySpanExporter()
    provider = TracerProvider(span_limits=UNLIMITED)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    spans = SpanCollector(tracer_provider=provider, tier="Full", content_capture="full")
    selections = run_selections(count, seed, also=[spans])
    provider.shutdown()
    return selections, list(memory.get_finished_spans()), exporter


def _lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.split("\n")[:-1]]


def _spans_of(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            yield from scope["spans"]


def _as_protobuf_json(document: dict[str, Any]) -> dict[str, Any]:
    """An OTLP/JSON document with hex ids turned into protobuf's base64, for ParseDict."""
    copy: dict[str, Any] = json.loads(json.dumps(document))
    for span in _spans_of(copy):
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode("ascii")
    return copy


def _values(node: Any) -> Iterator[dict[str, Any]]:
    """Every AnyValue object in a JSON tree."""
    if isinstance(node, dict):
        if "value" in node and isinstance(node["value"], dict) and "key" in node:
            yield node["value"]
        for child in node.values():
            yield from _values(child)
    elif isinstance(node, list):
        for child in node:
            yield from _values(child)


# -- OTLP/JSON lines ---------------------------------------------------------------------------


def test_otlp_json_lines_read_back_into_the_in_process_reports(tmp_path: Path) -> None:
    """Spans written by OtlpJsonFileSpanExporter (Full tier, full capture, one line per
    export) are read back by cupellation.otel.read_trace_file into reports equal to
    the in-process ones: every run, failed ones and odd contents (U+2028, tabs,
    markup, metadata) included."""
    path = tmp_path / "traces.jsonl"
    selections, spans, exporter = _traced_to_file(path, 40, "otlp-json-file")
    assert exporter.failed_exports == 0
    assert exporter.exported_spans == len(spans)
    assert any(s.error is not None for s in selections)
    assert any("\u2028" in item.item.content for s in selections
               for item in s.reports["Full"].excluded + s.reports["Full"].included)
    rebuilt = {run.run_id: run for run in read_trace_file(path)}
    assert set(rebuilt) == {s.run_id for s in selections}
    for selection in selections:
        run = rebuilt[selection.run_id]
        assert run.problems == ()
        assert run.report == selection.reports["Full"]
    assert len(_lines(path)) == len(spans)


def test_each_line_is_otlp_json_as_the_collector_reads_it(tmp_path: Path) -> None:
    """Each line is one {"resourceSpans": [...]} object in the OTLP/JSON encoding:
    lowercase hex trace/span/parent ids (not base64) equal to the SDK spans' ids,
    64-bit integers (times, intValue) as decimal strings, enums (kind, status code)
    as integers, lowerCamelCase keys that protobuf's JSON parser accepts for
    ExportTraceServiceRequest with no unknown field, and no raw Unicode line
    separator."""
    path = tmp_path / "traces.jsonl"
    _selections, spans, _exporter = _traced_to_file(path, 6, "otlp-json-format")
    by_id = {format(s.context.span_id, "016x"): s for s in spans if s.context is not None}
    seen = 0
    raw = path.read_text(encoding="utf-8")
    assert "\u2028" not in raw
    assert "\x85" not in raw
    for document in _lines(path):
        assert list(document) == ["resourceSpans"]
        json_format.ParseDict(_as_protobuf_json(document), ExportTraceServiceRequest())
        for span in _spans_of(document):
            seen += 1
            assert HEX_TRACE.fullmatch(span["traceId"])
            assert HEX_SPAN.fullmatch(span["spanId"])
            original = by_id[span["spanId"]]
            assert original.context is not None
            assert span["traceId"] == format(original.context.trace_id, "032x")
            if original.parent is None:
                assert "parentSpanId" not in span
            else:
                assert span["parentSpanId"] == format(original.parent.span_id, "016x")
            assert span["startTimeUnixNano"] == str(original.start_time)
            assert span["endTimeUnixNano"] == str(original.end_time)
            assert span["kind"] == 1
            assert span["name"] == original.name
            for event in span.get("events", ()):
                assert DIGITS.fullmatch(event["timeUnixNano"])
        for value in _values(document):
            if "intValue" in value:
                assert isinstance(value["intValue"], str)
                assert DIGITS.fullmatch(value["intValue"])
    assert seen == len(spans)


def test_a_failed_run_keeps_its_error_status_as_an_integer_code(tmp_path: Path) -> None:
    """A failed run's root span has status {"code": 2, "message": ...} (ERROR as the
    integer OTLP/JSON asks for)."""
    path = tmp_path / "traces.jsonl"
    selections, _spans, _exporter = _traced_to_file(path, 40, "otlp-json-format")
    assert any(s.error is not None for s in selections)
    statuses = [span.get("status", {}) for document in _lines(path)
                for span in _spans_of(document) if span["name"] == "cupel.pipeline"]
    assert {"code": 2} in [{"code": s.get("code")} for s in statuses]
    assert all(isinstance(s.get("code", 0), int) for s in statuses)


class _BrokenStream:
    """A text stream whose writes fail (a full disk, a closed pipe)."""

    name = "<broken>"

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")

    def flush(self) -> None:
        raise OSError(28, "No space left on device")


def test_the_otlp_json_exporter_never_raises(tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """A stream that cannot be written, a span the OTLP encoder cannot encode (no
    context) and an export after shutdown are FAILUREs, counted and logged once;
    nothing raises, and the good span before them is in the file whole."""
    caplog.set_level(logging.WARNING, logger="cupellation")
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("good"):
        pass
    [good] = memory.get_finished_spans()
    bad = ReadableSpan("no context", context=None)

    broken = OtlpJsonFileSpanExporter(_BrokenStream())  # type: ignore[arg-type]
    assert broken.export([good]) is SpanExportResult.FAILURE
    assert broken.force_flush() is False
    broken.shutdown()

    path = tmp_path / "spans.jsonl"
    exporter = OtlpJsonFileSpanExporter(path)
    assert exporter.export([good]) is SpanExportResult.SUCCESS
    assert exporter.export([bad]) is SpanExportResult.FAILURE
    assert exporter.export([]) is SpanExportResult.SUCCESS
    exporter.shutdown()
    exporter.shutdown()
    assert exporter.export([good]) is SpanExportResult.FAILURE
    assert exporter.failed_exports == 2
    assert broken.failed_exports == 2
    [line] = _lines(path)
    assert [span["name"] for span in _spans_of(line)] == ["good"]
    warnings = [r for r in caplog.records if r.name == "cupellation"]
    assert len(warnings) == 2  # once per exporter


def test_writing_to_a_text_stream(tmp_path: Path) -> None:
    """A text stream (standard output) gets the same lines as a file."""
    path = tmp_path / "spans.txt"
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("tests").start_as_current_span("one"):
        pass
    with path.open("w", encoding="utf-8") as stream:
        exporter = OtlpJsonFileSpanExporter(stream)
        assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS
        exporter.shutdown()
    [document] = _lines(path)
    assert document == otlp_json_document(memory.get_finished_spans())


def test_a_raw_line_separator_inside_a_string_does_not_split_the_line(tmp_path: Path) -> None:
    """cupellation.otel reads OTLP/JSON lines split at newlines only: a line holding a
    raw U+2028 or U+0085 inside a string (as other writers leave them) is one line."""
    path = tmp_path / "traces.jsonl"
    _selections, spans, _exporter = _traced_to_file(path, 3, "separators")
    expected = {run.run_id: run.report for run in runs_from_spans(spans)}
    raw = path.read_text(encoding="utf-8")
    assert "\\u2028" in raw
    path.write_text(raw.replace("\\u2028", "\u2028"), encoding="utf-8")
    assert "\u2028" in path.read_text(encoding="utf-8")
    assert {run.run_id: run.report for run in read_trace_file(path)} == expected


# -- reports -------------------------------------------------------------------------------------


def _big_report(n: int) -> SelectionReport:
    items = [ContextItem(f"item {k} " + "x" * 200, 10 + k % 50) for k in range(n)]
    collector = DiagnosticTraceCollector("Full")
    Pipeline(RecencyScorer(), GreedySlice()).run(
        items, ContextBudget(max_tokens=20_000, target_tokens=10_000), collector)
    return collector.build_report()


def test_a_concurrent_reader_only_ever_sees_whole_reports(tmp_path: Path) -> None:
    """While one thread rewrites the same path with a large and a small report in turn,
    another polling it always parses a whole report, equal to one of the two; no
    temporary file is left behind."""
    path = tmp_path / "report.json"
    large, small = _big_report(3000), _big_report(5)
    exporter = ReportFileExporter(path)
    stop = threading.Event()
    reads: list[SelectionReport] = []
    errors: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                reads.append(SelectionReport.from_json(data))
            except Exception as exc:
                errors.append(f"{len(data)} bytes: {exc}")
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        # At least 60 rewrites, and more (up to 2,000) until the reader has parsed
        # eleven: on a loaded machine the reader's thread may get few turns.
        k = 0
        while k < 60 or (len(reads) <= 10 and k < 2000 and not errors):
            assert exporter.export(large if k % 2 == 0 else small) is SpanExportResult.SUCCESS
            k += 1
    finally:
        stop.set()
        thread.join(timeout=30)
    assert errors == []
    assert len(reads) > 10
    assert any(r == large for r in reads)
    assert all(r in (large, small) for r in reads)
    assert {p.name for p in tmp_path.iterdir()} == {"report.json"}
    assert exporter.written == 60
    assert (path.stat().st_mode & 0o777) == 0o644


def test_reports_of_runs_go_to_one_file_per_run(tmp_path: Path) -> None:
    """As a collector with {run_id} in its path, it writes each run's report (failed
    runs too) when the run ends, equal to the in-process report; without {run_id}
    the file holds the latest run's report."""
    per_run = ReportFileExporter(tmp_path / "runs" / "{run_id}.json")
    (tmp_path / "runs").mkdir()
    latest = ReportFileExporter(tmp_path / "latest.json", indent=None)
    selections = run_selections(12, "reports", also=[per_run, latest])
    assert any(s.error is not None for s in selections)
    for selection in selections:
        written = (tmp_path / "runs" / f"{selection.run_id}.json").read_text(encoding="utf-8")
        assert SelectionReport.from_json(written) == selection.reports["Full"]
    assert SelectionReport.from_json((tmp_path / "latest.json").read_bytes()) == (
        selections[-1].reports["Full"])
    assert per_run.written == latest.written == len(selections)
    assert per_run.failed_exports == latest.failed_exports == 0


def test_a_report_that_cannot_be_written_leaves_the_old_one_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the rename fails, export returns FAILURE, the previous document is intact
    and the temporary file is removed; a missing folder and a {run_id} path without a
    run id are FAILUREs too; nothing raises, and shutdown stops writing."""
    path = tmp_path / "report.json"
    exporter = ReportFileExporter(path)
    old, new = _big_report(3), _big_report(4)
    assert exporter.export(old) is SpanExportResult.SUCCESS

    def refuse(source: object, target: object) -> None:
        raise OSError(30, "Read-only file system")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", refuse)
        assert exporter.export(new) is SpanExportResult.FAILURE
    assert SelectionReport.from_json(path.read_bytes()) == old
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    missing = ReportFileExporter(tmp_path / "nowhere" / "report.json")
    assert missing.export(new) is SpanExportResult.FAILURE
    templated = ReportFileExporter(tmp_path / "{run_id}.json")
    assert templated.export(new) is SpanExportResult.FAILURE
    assert exporter.failed_exports == missing.failed_exports == templated.failed_exports == 1
    exporter.shutdown()
    assert not exporter.is_enabled
    assert exporter.export(new) is SpanExportResult.FAILURE
    assert exporter.force_flush() is True


# -- the event stream -----------------------------------------------------------------------------


def _by_run(path: Path) -> dict[str, SelectionReport]:
    return {run.run_id: run.report for run in read_runs(path)}


def test_event_lines_rebuild_every_run(tmp_path: Path) -> None:
    """As a collector, EventLogExporter writes lines read_runs folds into the
    in-process reports; export() of recorded events does the same into another file,
    a run without its end written at once."""
    live = EventLogExporter(tmp_path / "live.jsonl")
    selections = run_selections(15, "events", also=[live])
    live.shutdown()
    assert _by_run(tmp_path / "live.jsonl") == {
        s.run_id: s.reports["Full"] for s in selections}

    later = EventLogExporter(tmp_path / "later.jsonl")
    recorded = [event for s in selections for event in s.events["Full"]]
    partial = selections[0].events["Full"][:-1]
    assert later.export(recorded) is SpanExportResult.SUCCESS
    assert later.force_flush() is True
    assert _by_run(tmp_path / "later.jsonl") == {
        s.run_id: s.reports["Full"] for s in selections}
    spare = EventLogExporter(tmp_path / "partial.jsonl")
    assert spare.export(partial) is SpanExportResult.SUCCESS
    [run] = read_runs(tmp_path / "partial.jsonl")
    assert not run.finished
    assert run.event_count == len(partial)
    later.shutdown()
    spare.shutdown()
    assert later.audit_log.path == str(tmp_path / "later.jsonl")


def test_event_lines_rotate_as_the_audit_log_does(tmp_path: Path) -> None:
    """The AuditLog options pass through: a small max_bytes rotates into gzipped
    backups, and read_runs of the base name still rebuilds every run."""
    path = tmp_path / "events.jsonl"
    exporter = EventLogExporter(path, max_bytes=4_000, backup_count=50)
    selections = run_selections(15, "rotation", also=[exporter])
    exporter.shutdown()
    assert any(p.name.endswith(".gz") for p in tmp_path.iterdir())
    assert _by_run(path) == {s.run_id: s.reports["Full"] for s in selections}


def test_event_exporter_never_raises_once_open(tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """After shutdown, recording a run's end and exporting fail quietly: counted in
    failed_exports, logged once, the pipeline run itself unchanged."""
    caplog.set_level(logging.WARNING, logger="cupellation")
    exporter = EventLogExporter(tmp_path / "events.jsonl")
    exporter.shutdown()
    items = [ContextItem(f"i{k}", 5) for k in range(5)]
    pipeline = Pipeline(RecencyScorer(), GreedySlice())
    budget = ContextBudget(max_tokens=100, target_tokens=12)
    diagnostics = DiagnosticTraceCollector("Full")
    window = pipeline.run(items, budget, diagnostics)
    recorded = diagnostics.events
    exporter.record(recorded[:1])
    exporter.record(recorded[-1:])
    assert exporter.export(recorded) is SpanExportResult.FAILURE
    assert exporter.failed_exports == 2
    assert window == pipeline.run(items, budget)
    assert len([r for r in caplog.records if r.name == "cupellation"]) == 1
