"""Replay: recorded runs become the spans SpanCollector would have made, with the runs'
own times and deterministic ids; trace files are re-exported as they were."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    GreedySlice,
    Pipeline,
    RecencyScorer,
)
from cupellation.events import (
    PipelineEvent,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    apply_content_capture,
    event_to_dict,
    stamp_service,
)
from cupellation.exceptions import DecodeError
from cupellation.logs import AuditLog
from cupellation.otel import SpanCollector, runs_from_spans
from cupellation_exporters import (
    OtlpJsonFileSpanExporter,
    is_trace_source,
    read_replay_sources,
    replay,
    replay_id,
    spans_from_events,
)
from otel._support import jaeger_document, otlp_proto_bytes

from .selections import TIERS, Selection, run_selections, shifted

UNLIMITED = SpanLimits(max_attributes=SpanLimits.UNSET, max_events=SpanLimits.UNSET,
                       max_span_attributes=SpanLimits.UNSET,
                       max_event_attributes=SpanLimits.UNSET,
                       max_attribute_length=SpanLimits.UNSET,
                       max_span_attribute_length=SpanLimits.UNSET)
LAST_WEEK = timedelta(days=-7)


@pytest.fixture(scope="module")
def selections() -> list[Selection]:
    """Thirty recorded runs, failures included."""
    return run_selections(30, "replay")


def _expected(selection: Selection, tier: str, capture: str) -> Any:
    """The in-process report at ``tier`` of the run as recorded under ``capture``."""
    collector = DiagnosticTraceCollector(tier)
    for event in selection.events[tier]:
        collector.record((apply_content_capture(event, capture),))
    return collector.build_report()


def _ns(selection: Selection) -> int:
    started = selection.started.started_at
    return int(started.timestamp()) * 1_000_000_000 + started.microsecond * 1000


def _whole_us(ns: int) -> int:
    return (ns + 500) // 1000 * 1000


def _stable(attributes: Any) -> dict[str, Any]:
    """An event's attributes but the exception stacktrace (which grows as the exception
    travels up after the live span recorded it)."""
    return {k: v for k, v in dict(attributes or {}).items() if k != "exception.stacktrace"}


def _by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


@pytest.mark.parametrize("capture", ["full", "hash", "none"])
@pytest.mark.parametrize("tier", TIERS)
def test_replayed_spans_rebuild_the_report_of_their_tier(
        selections: list[Selection], tier: str, capture: str) -> None:
    """A run recorded at Full (as an audit log keeps it, under each content capture)
    replayed at each tier rebuilds, through cupellation.otel's decoder, exactly the
    report a collector at that tier folded in process, with nothing lost."""
    for selection in selections:
        recorded = [apply_content_capture(e, capture) for e in selection.events["Full"]]
        spans = spans_from_events(recorded, tier=tier, content_capture=capture)
        [run] = runs_from_spans(spans)
        assert run.problems == ()
        assert run.report == _expected(selection, tier, capture)


def test_replay_never_shows_more_than_was_recorded(selections: list[Selection]) -> None:
    """Asking for full content or the Full tier of a run recorded with hashed content
    at StageAndExclusions gives the hashed contents (not hashes of hashes) at
    StageAndExclusions, and the report says content was hashed."""
    for selection in selections[:10]:
        recorded = [apply_content_capture(e, "hash")
                    for e in selection.events["StageAndExclusions"]]
        spans = spans_from_events(recorded, tier="Full", content_capture="full")
        [run] = runs_from_spans(spans)
        assert run.report == _expected(selection, "StageAndExclusions", "hash")
        root = _by_name(spans)["cupel.pipeline"]
        assert root.attributes is not None
        assert root.attributes["cupel.verbosity"] == "StageAndExclusions"
        assert root.attributes["cupel.run.content_capture"] == "hash"


def test_replay_reads_the_capture_variable_as_every_sink_does(
        selections: list[Selection], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without content_capture=, replay takes CUPELLATION_CAPTURE_CONTENT as the sinks
    do: ``hash`` hashes the contents; a bad value warns (once, naming it) and the
    default, none, applies, instead of passing silently."""
    selection = selections[0]
    monkeypatch.setenv("CUPELLATION_CAPTURE_CONTENT", "hash")
    [run] = runs_from_spans(spans_from_events(selection.events["Full"], tier="Full"))
    assert run.report == _expected(selection, "Full", "hash")
    monkeypatch.setenv("CUPELLATION_CAPTURE_CONTENT", "everything-please")
    with pytest.warns(RuntimeWarning, match="everything-please"):
        spans = spans_from_events(selection.events["Full"], tier="Full")
    [run] = runs_from_spans(spans)
    assert run.report == _expected(selection, "Full", "none")


def _without_trace_ids(span: ReadableSpan) -> dict[str, Any]:
    """The span's attributes with its trace id, where a value names it, made neutral."""
    trace_id = f"{span.context.trace_id:032x}" if span.context is not None else None
    return {key: value.replace(trace_id, "<trace>")
            if isinstance(value, str) and trace_id else value
            for key, value in (span.attributes or {}).items()}


def test_replayed_spans_are_the_live_spans_but_for_times_and_ids(
        selections: list[Selection]) -> None:
    """Replaying a run gives the spans a live SpanCollector made of it: the same names,
    tree, attributes and events (names, attributes, order; a failed run's exception
    too), the same status; only ids and timestamps differ."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(span_limits=UNLIMITED)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    live_collector = SpanCollector(tracer_provider=provider, tier="Full",
                                   content_capture="full")
    again = run_selections(20, "replay-live", also=[live_collector])
    live_by_run: dict[str, list[ReadableSpan]] = {}
    for span in memory.get_finished_spans():
        assert span.attributes is not None
        live_by_run.setdefault(str(span.attributes["cupel.run.id"]), []).append(span)
    for selection in again:
        live = sorted(live_by_run[selection.run_id], key=lambda s: s.name)
        replayed = sorted(spans_from_events(selection.events["Full"], content_capture="full"),
                          key=lambda s: s.name)
        assert [s.name for s in live] == [s.name for s in replayed]
        live_names = {s.context.span_id: s.name for s in live if s.context is not None}
        replayed_names = {s.context.span_id: s.name for s in replayed if s.context is not None}
        for one, other in zip(live, replayed, strict=True):
            # The summaries' read-back hint names the trace: an id, so it differs.
            assert _without_trace_ids(one) == _without_trace_ids(other)
            assert [(e.name, _stable(e.attributes)) for e in one.events] == [
                (e.name, _stable(e.attributes)) for e in other.events]
            assert one.status.status_code == other.status.status_code
            assert (None if one.parent is None else live_names[one.parent.span_id]) == (
                None if other.parent is None else replayed_names[other.parent.span_id])


def test_replay_is_deterministic_and_ids_come_from_the_run_id(
        selections: list[Selection]) -> None:
    """Replaying the same events twice gives identical spans (ids, parents, times,
    attributes, events); the trace id and span ids are replay_id(run_id, role), and
    different runs get different traces."""
    traces = set()
    for selection in selections:
        first = spans_from_events(selection.events["Full"], content_capture="full")
        second = spans_from_events(list(reversed(selection.events["Full"])),
                                   content_capture="full")
        assert [(s.name, s.context, s.parent, s.start_time, s.end_time, dict(s.attributes or {}),
                 [(e.name, e.timestamp, dict(e.attributes or {})) for e in s.events])
                for s in first] == [
                (s.name, s.context, s.parent, s.start_time, s.end_time, dict(s.attributes or {}),
                 [(e.name, e.timestamp, dict(e.attributes or {})) for e in s.events])
                for s in second]
        root = _by_name(first)["cupel.pipeline"]
        assert root.context is not None
        assert root.context.trace_id == replay_id(selection.run_id, "trace", 128)
        assert root.context.span_id == replay_id(selection.run_id, "root")
        assert root.parent is None
        for span in first:
            assert span.context is not None
            assert span.context.trace_id == root.context.trace_id
            if span is not root:
                assert span.parent is not None
                assert span.parent.span_id == root.context.span_id
                assert span.context.span_id == replay_id(selection.run_id, f"{span.name}#0")
        traces.add(root.context.trace_id)
    assert len(traces) == len(selections)


def test_spans_keep_the_recorded_times(selections: list[Selection]) -> None:
    """The root starts at run_started.started_at exactly and lasts the run's
    duration_ms; stages follow one another from the root's start, each lasting its
    stage_completed.duration_ms (Sort, spanless, in its place), every boundary
    rounded to the nearest whole microsecond; every span event lies within its
    span."""
    for selection in selections:
        events = shifted(selection.events["Full"], LAST_WEEK)
        spans = _by_name(spans_from_events(events, content_capture="full"))
        root = spans["cupel.pipeline"]
        assert root.start_time == _ns(selection) + LAST_WEEK // timedelta(microseconds=1) * 1000
        end = events[-1]
        assert isinstance(end, RunCompleted | RunFailed)
        assert root.end_time is not None
        cursor = root.start_time
        for event in events:
            if isinstance(event, StageCompleted):
                length = round(event.duration_ms * 1_000_000)
                name = f"cupel.stage.{str(event.stage).lower()}"
                if name in spans:
                    assert spans[name].start_time == _whole_us(cursor)
                    assert spans[name].end_time == _whole_us(cursor + length)
                cursor += length
        assert root.end_time == _whole_us(
            max(root.start_time + round(end.duration_ms * 1_000_000), cursor))
        for span in spans.values():
            assert span.start_time is not None
            assert span.end_time is not None
            assert span.start_time % 1000 == span.end_time % 1000 == 0
            assert span.start_time <= span.end_time <= root.end_time
            for span_event in span.events:
                assert span.start_time <= span_event.timestamp <= span.end_time


def test_the_replayed_root_is_a_child_of_the_recorded_caller_span() -> None:
    """A run that started inside an application span records its trace and span ids in
    run_started; the replayed root is that span's child, in that trace (a remote
    parent), and the stages are the root's children."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("app").start_as_current_span("agent step") as caller:
        [selection] = run_selections(1, "caller")
    context = caller.get_span_context()
    assert selection.started.trace_id == format(context.trace_id, "032x")
    spans = spans_from_events(selection.events["Full"], content_capture="full")
    root = _by_name(spans)["cupel.pipeline"]
    assert root.parent is not None
    assert root.parent.span_id == context.span_id
    assert root.parent.is_remote
    assert root.context is not None
    assert root.context.span_id == replay_id(selection.run_id, "root")
    for span in spans:
        assert span.context is not None
        assert span.context.trace_id == context.trace_id
    [run] = runs_from_spans(spans)
    assert run.report == selection.reports["Full"]


def test_a_run_cut_short_is_replayed_as_far_as_it_went(selections: list[Selection]) -> None:
    """Without its end (a process killed mid-run) a run still makes spans, all ended,
    and the rebuilt report says the end is missing; without run_started it makes
    none (nothing says when it ran)."""
    selection = next(s for s in selections if s.error is None)
    events = selection.events["Full"]
    cut = [e for e in events if not isinstance(e, RunCompleted)][:-3]
    spans = spans_from_events(cut, content_capture="full")
    assert spans
    assert all(s.end_time is not None for s in spans)
    [run] = runs_from_spans(spans)
    assert not run.is_complete
    assert any("run_completed" in problem for problem in run.report.incomplete)
    assert spans_from_events([e for e in events if not isinstance(e, RunStarted)]) == []


def _audit(path: Path, selections: Sequence[Selection], **options: Any) -> None:
    with AuditLog(path, **options) as audit:
        for selection in selections:
            audit.record(shifted(selection.events["Full"], LAST_WEEK))


def test_logs_of_every_kind_are_sources(tmp_path: Path, selections: list[Selection]) -> None:
    """An audit log rotated into gzipped backups (read from its base name), a log of
    container lines (a prefix before each record) and a file whose run lost its
    run_started all replay: every whole run once, and the headless run reported as
    skipped with the reason."""
    rotated = tmp_path / "audit.jsonl"
    _audit(rotated, selections[:12], max_bytes=6_000, backup_count=50)
    assert any(p.name.endswith(".gz") for p in tmp_path.iterdir())
    plain = tmp_path / "plain.jsonl"
    _audit(plain, selections[12:20])
    container = tmp_path / "container.log"
    lines = plain.read_text(encoding="utf-8").split("\n")[:-1]  # U+2028 is not a line end
    container.write_text("".join(f"2025-01-01T00:00:00Z stdout F {line}\n" for line in lines),
                         encoding="utf-8")
    plain.unlink()
    headless = tmp_path / "headless.jsonl"
    _audit(headless, selections[20:21])
    data = headless.read_bytes()
    headless.write_bytes(data[data.index(b"\n") + 1:])
    runs = list(read_replay_sources([rotated, container, headless], content_capture="full"))
    assert [r.run_id for r in runs if r.spans] == [s.run_id for s in selections[:20]]
    [skipped] = [r for r in runs if not r.spans]
    assert skipped.run_id == selections[20].run_id
    assert skipped.problem is not None
    assert "run_started" in skipped.problem
    for run, selection in zip(runs, selections[:20], strict=False):
        [rebuilt] = runs_from_spans(run.spans)
        assert rebuilt.report == selection.reports["Full"]
        assert run.complete == selection.reports["Full"].is_complete


def _spans_to_file(path: Path, count: int, limits: SpanLimits | None
                   ) -> tuple[list[ReadableSpan], list[Selection]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits) if limits else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    exporter = OtlpJsonFileSpanExporter(path)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    collector = SpanCollector(tracer_provider=provider, tier="Full", content_capture="full",
                              layout="events")  # the events layout loses events past 128
    selections = run_selections(count, "trace-files", also=[collector])
    if limits is None:  # one run with more exclusions than the SDK's 128 events a span
        items = [ContextItem(f"candidate {k}", 20 + k % 7) for k in range(300)]
        Pipeline(RecencyScorer(), GreedySlice()).run(
            items, ContextBudget(max_tokens=2_000, target_tokens=1_000), collector)
    provider.shutdown()
    return list(memory.get_finished_spans()), selections


def _identity(span: ReadableSpan) -> tuple[Any, ...]:
    assert span.context is not None
    return (format(span.context.trace_id, "032x"), format(span.context.span_id, "016x"),
            None if span.parent is None else format(span.parent.span_id, "016x"),
            span.name, span.start_time, span.end_time, dict(span.attributes or {}),
            [(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events],
            span.dropped_events)


@pytest.mark.parametrize("form", ["otlp-json", "otlp-json-gzip", "jaeger", "otlp-proto"])
def test_trace_files_are_re_exported_as_they_were(tmp_path: Path, form: str) -> None:
    """A trace file (OTLP/JSON lines, gzipped too, Jaeger's JSON, OTLP protobuf) is
    re-exported with every span's trace, span and parent ids, times (Jaeger's to the
    microsecond), attributes, events and dropped-event count; spans that lost events
    to the SDK's limit still say so, and the reports rebuilt from the re-exported
    spans are those of the file."""
    source = tmp_path / "traces.jsonl"
    live, _selections = _spans_to_file(source, 4, None)
    assert any(span.dropped_events for span in live)
    if form == "otlp-json-gzip":
        path = tmp_path / "traces.jsonl.gz"
        path.write_bytes(gzip.compress(source.read_bytes()))
    elif form == "jaeger":
        path = tmp_path / "jaeger.json"
        path.write_text(json.dumps(jaeger_document(live), indent=2), encoding="utf-8")
    elif form == "otlp-proto":
        path = tmp_path / "traces.pb"
        path.write_bytes(otlp_proto_bytes(live))
    else:
        path = source
    assert is_trace_source(path)
    [replayed] = list(read_replay_sources([path]))
    assert replayed.trace_file
    expected = sorted(map(_identity, live), key=lambda t: t[1])
    got = sorted(map(_identity, replayed.spans), key=lambda t: t[1])
    if form == "jaeger":  # microseconds: a start and a duration
        expected = [(*e[:4], e[4] // 1000, e[4] // 1000 + (e[5] - e[4]) // 1000, e[6],
                     [(n, t // 1000, a) for n, t, a in e[7]], e[8]) for e in expected]
        got = [(*g[:4], g[4] // 1000, g[5] // 1000, g[6],
                [(n, t // 1000, a) for n, t, a in g[7]], g[8]) for g in got]
    assert got == expected
    assert [r.report for r in runs_from_spans(replayed.spans)] == [
        r.report for r in runs_from_spans(live)]
    assert any(not r.is_complete for r in runs_from_spans(replayed.spans))


def test_sources_are_told_apart(tmp_path: Path, selections: list[Selection]) -> None:
    """Trace files are recognised by their content (OTLP/JSON lines or one pretty
    object, Tempo's batches, Jaeger's JSON, protobuf, gzip of these); audit logs
    (gzipped too), records a shipper nested under "data" (which replay reads as a
    log), empty files, missing files and standard input are not traces."""
    source = tmp_path / "t.jsonl"
    live, _ = _spans_to_file(source, 1, UNLIMITED)
    document = json.loads(source.read_text(encoding="utf-8").splitlines()[0])
    traces = {
        "pretty.json": json.dumps(document, indent=2),
        "batches.json": json.dumps({"batches": document["resourceSpans"]}),
        "jaeger.json": json.dumps(jaeger_document(live), indent=4),
        "jaeger-compact.json": json.dumps(jaeger_document(live)),
    }
    for name, text in traces.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert is_trace_source(tmp_path / name), name
    (tmp_path / "t.pb").write_bytes(otlp_proto_bytes(live))
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(source.read_bytes()))
    assert is_trace_source(source)
    assert is_trace_source(tmp_path / "t.pb")
    assert is_trace_source(tmp_path / "t.jsonl.gz")
    audit = tmp_path / "audit.jsonl"
    _audit(audit, selections[:2])
    (tmp_path / "audit.jsonl.gz").write_bytes(gzip.compress(audit.read_bytes()))
    (tmp_path / "empty.log").write_text("", encoding="utf-8")
    shipped = tmp_path / "shipped.jsonl"  # each record nested under "data" by a shipper
    shipped.write_text("".join(json.dumps({"data": json.loads(line)}) + "\n" for line in
                               audit.read_text(encoding="utf-8").split("\n")[:-1]),
                       encoding="utf-8")
    for name in ("audit.jsonl", "audit.jsonl.gz", "empty.log", "missing.log", "shipped.jsonl"):
        assert not is_trace_source(tmp_path / name), name
    assert not is_trace_source("-")
    runs = list(read_replay_sources([shipped], content_capture="full"))
    assert [run.run_id for run in runs] == [s.run_id for s in selections[:2]]


def test_a_broken_trace_file_is_a_decode_error_naming_it(tmp_path: Path) -> None:
    """A file that looks like OTLP/JSON but is cut off raises DecodeError naming the
    file (the CLI turns it into exit status 2)."""
    path = tmp_path / "cut.jsonl"
    path.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab', "utf-8")
    with pytest.raises(DecodeError, match=r"cut\.jsonl"):
        list(read_replay_sources([path]))


class _Flaky(SpanExporter):
    """Takes batches, refuses the second and raises on the third (or refuses them all
    with ``always=True``)."""

    def __init__(self, *, always: bool = False) -> None:
        self.batches: list[int] = []
        self.always = always

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches.append(len(spans))
        if self.always or len(self.batches) == 2:
            return SpanExportResult.FAILURE
        if len(self.batches) == 3:
            raise RuntimeError("exporter bug")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered."""
        return True


def test_replay_sends_batches_and_counts_what_was_not_taken(
        tmp_path: Path, selections: list[Selection]) -> None:
    """replay() hands the exporter batch_size spans at a time (the rest at the end),
    counts the spans of a refused batch and of one whose export raised as failed,
    tells each run to on_run, and never raises itself."""
    audit = tmp_path / "audit.jsonl"
    _audit(audit, selections[:10])
    exporter = _Flaky()
    seen: list[str] = []
    result = replay([audit], exporter, batch_size=7, content_capture="full",
                    on_run=lambda run: seen.append(run.run_id))
    total = sum(len(spans_from_events(s.events["Full"])) for s in selections[:10])
    assert result.spans == total == sum(exporter.batches)
    assert exporter.batches[:-1] == [7] * (len(exporter.batches) - 1)
    assert 0 < exporter.batches[-1] <= 7
    assert result.failed == 14
    assert result.delivered == total - 14
    assert not result.gave_up
    assert seen == [s.run_id for s in selections[:10]]
    assert (result.runs, result.trace_files, result.skipped_count) == (10, 0, 0)
    assert result.incomplete == [s.run_id for s in selections[:10]
                                 if not s.reports["Full"].is_complete]
    assert result.incomplete_count == len(result.incomplete) > 0
    assert result.stats.runs == 10


def test_a_batch_goes_out_before_it_holds_too_many_span_events(
        tmp_path: Path, selections: list[Selection]) -> None:
    """With batch_events=1 every run's spans go out in a batch of their own (a batch
    never grows past the limit by taking another run), and all of them arrive."""
    audit = tmp_path / "audit.jsonl"
    _audit(audit, selections[:8])
    exporter = _Flaky(always=False)
    exporter.batches = [0, 0, 0]  # past the refusing and raising calls
    result = replay([audit], exporter, batch_events=1, content_capture="full")
    per_run = [len(spans_from_events(s.events["Full"])) for s in selections[:8]]
    assert exporter.batches[3:] == per_run
    assert result.delivered == sum(per_run)


def test_replay_gives_up_on_a_backend_that_takes_nothing(
        tmp_path: Path, selections: list[Selection]) -> None:
    """After three failed batches in a row nothing more is sent (a dead backend costs
    three export timeouts, not one per batch) and every span is counted failed;
    give_up_after=None keeps trying every batch."""
    audit = tmp_path / "audit.jsonl"
    _audit(audit, selections[:10])
    stubborn, patient = _Flaky(always=True), _Flaky(always=True)
    result = replay([audit], stubborn, batch_size=5)
    assert stubborn.batches == [5, 5, 5]
    assert result.gave_up
    assert result.failed == result.spans > 15
    assert result.delivered == 0
    everything = replay([audit], patient, batch_size=5, give_up_after=None)
    assert sum(patient.batches) == everything.spans == everything.failed
    assert not everything.gave_up
    with pytest.raises(ValueError, match="batch_size"):
        replay([audit], patient, batch_size=0)


def test_replaying_keeps_the_run_s_events_as_the_log_had_them(
        tmp_path: Path, selections: list[Selection]) -> None:
    """read_runs(keep_events=True) (the reader change replay needs) gives each run's
    events as written, and no events without it."""
    from cupellation.logs import read_runs  # noqa: PLC0415

    audit = tmp_path / "audit.jsonl"
    _audit(audit, selections[:5])
    kept = list(read_runs(audit, keep_events=True))
    assert [_flat(run.events) for run in kept] == [
        _flat(shifted(s.events["Full"], LAST_WEEK)) for s in selections[:5]]
    assert all(run.events == () for run in read_runs(audit))
    assert all(len(run.events) == run.event_count for run in kept)


def _flat(events: Sequence[PipelineEvent]) -> list[dict[str, Any]]:
    """Events in their flat form (an in-process run_failed also holds the exception
    object, which no projection carries), without the run digest a sink writes into
    the end event (the in-process events have none)."""
    flat = [event_to_dict(event) for event in events]
    for event in flat:
        event.pop("digest", None)
    return flat


def _events_of(spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
    [run] = runs_from_spans(spans)
    return _flat(run.events)


def test_fan_out_lowering_matches_a_live_lower_tier(selections: list[Selection]) -> None:
    """Replaying at StageOnly gives the events a live StageOnly collector got (seqs
    renumbered without the item events, run_started naming the tier), with the
    service of the replay's resource (the default one here) recorded as a live
    SpanCollector on that resource records it."""
    service = str(Resource.create({}).attributes["service.name"])
    for selection in selections[:10]:
        spans = spans_from_events(selection.events["Full"], tier="StageOnly",
                                  content_capture="full")
        assert _events_of(spans) == _flat(
            stamp_service(selection.events["StageOnly"], lambda: service))
