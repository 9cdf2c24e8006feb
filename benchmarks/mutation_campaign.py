"""The mutation campaign: no stored run is ever silently wrong.

    python benchmarks/mutation_campaign.py [--mutations 3000] [--seed 12] [--json PATH]

Real artifacts of demo runs and a larger run — an events JSONL file per run (as the
spine's event-file writer makes it), an audit log of every run (also read as
``replay``'s input: each run re-run from its logged candidates, budget and policy;
and as ``simulate``'s: each run re-run at two budgets),
and the runs' spans as OTLP/JSON, Jaeger's JSON, OTLP protobuf, and as the backends
hand them back (Phoenix's /spans and /spans/otlpv1 pages, MLflow's batchGet with its
JSON-valid strings read as JSON, Jaeger's v3 result, Tempo's v2 trace with base64
ids), and each run's SelectionReport file (the demo's ``report.json``, what ``report
FILE`` and ``diff A B`` read) — are mutated one change at a time:

- **value**: a leaf value swapped for another plausible one (a number nudged or
  taken from elsewhere, a string from another record, a case changed, a bool
  flipped), with scores, contents, kinds, tokens, positions and reason names
  picked more often;
- **key**: a key misspelt, or renamed to another key of the document;
- **line / event**: a line (or a span event, or a span, or a report file's entry)
  deleted, repeated, or swapped with another;
- **byte**: a bit flipped, a byte replaced, deleted or inserted;
- **text**: hostile text in a string (a lone surrogate, U+2028, NUL, a BOM), put in
  whole, or as a same-length JSON escape (``\\ud800``) inside a string of embedded
  JSON such as a column chunk, so that every byte count the spans carry still holds;
- **tamper** (the keyed formats only: an audit log and event files written with a
  digest key, read with it): an attacker without the key changes a score and covers
  it (tests/_tampering.py): the digest stripped, replaced with a plain ``sha256:``
  recomputed over the edited lines, or the run rewritten as schema 2 (issue 22).

Each mutated artifact is decoded (``build_report`` over
``events_from_json_lines`` for an events file, ``read_runs`` for the audit log,
``read_trace`` for spans, ``SelectionReport.from_json`` for a report file) and the
result classified:

- **exact**: every run's report is the original one (a change no decoder can see,
  such as whitespace, is exact);
- **refused**: the decoder raised a ``DecodeError`` (the CLI's exit 2);
- **flagged**: every report that differs from the original (or is new) says what
  is wrong in ``incomplete``;
- **as written** (report files only): the report differs from the original and is
  exactly what the changed file says (a report file carries no digest: a plausible
  score put in its place reads as that score, as the file says; what the reader must
  not do is read anything else, drop or coerce a field);
- **SILENTLY WRONG**: a report differs from the original, or a run vanished, and
  nothing says so;
- **CRASHED**: the decoder raised something other than cupellation's own errors
  (a bug: a decoder names what is wrong, it never lets an exception escape).

The table is printed per format; the exit status is 1 if anything was silently
wrong or crashed (0 silently wrong is the acceptance of issue 12).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import string
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    CountQuotaSlice,
    DiagnosticTraceCollector,
    FanOutCollector,
    GreedySlice,
    KindScorer,
    KnapsackSlice,
    OverflowStrategy,
    Pipeline,
    PriorityScorer,
    RecencyScorer,
    SelectionReport,
    TraceDetailLevel,
    UShapedPlacer,
    build_report,
)
from cupellation.analytics import budget_sweep, replayable
from cupellation.events import ContentCapture, RunLineEncoder, events_from_json_lines
from cupellation.exceptions import CupelError, RunNotReplayableError
from cupellation.logs import AuditLog, read_runs
from cupellation.otel import SpanCollector, read_trace, runs_from_spans, spans_from_otlp_json
from cupellation.slicing import CountQuotaEntry
from cupellation.store import attributes_of, canonical_line, span_from_row

# The Jaeger JSON builder is the tests' own (tests/otel/_support.py), so that the
# campaign mutates the very document the decoder tests read.
_TESTS_DIR = str(Path(__file__).resolve().parents[1] / "tests")
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
from _tampering import MOVES as TAMPER_MOVES  # noqa: E402
from _tampering import run_ids, tamper_lines  # noqa: E402
from otel._support import jaeger_document  # noqa: E402

__all__ = ["FORMATS", "Artifact", "Campaign", "campaign", "main"]

#: The span formats hold the runs in the columns layout (the default); "OTLP/JSON,
#: events layout" holds them as one span event per item. The backends' answers are
#: built from the columns-layout spans.
FORMATS = ("events JSONL", "audit log", "replay input", "simulate input", "store rows",
           "store spans",
           "OTLP/JSON",
           "Jaeger JSON",
           "OTLP protobuf", "OTLP/JSON, events layout", "Phoenix spans", "Phoenix otlpv1",
           "MLflow batchGet", "Jaeger v3", "Tempo v2", "events JSONL, keyed",
           "audit log, keyed", "report file")
#: Formats stored as lines of JSON (mutated line by line).
_LINE_FORMATS = ("events JSONL", "audit log", "replay input", "simulate input",
                 "events JSONL, keyed", "audit log, keyed", "store rows", "store spans")
#: The formats written with a digest key, and read with it (``Artifact.key``).
_KEYED_FORMATS = ("events JSONL, keyed", "audit log, keyed")
#: The writers' and readers' key of the keyed formats.
KEY = b"campaign-digest-key"
OUTCOMES = ("exact", "refused", "flagged", "as written", "SILENTLY WRONG", "CRASHED")
#: Keys a value mutation picks more often: what a report is made of.
_FAVOURED = ("score", "content", "kind", "tokens", "position", "reason", "candidate_index",
             "stage", "seq", "name", "item_tokens", "available_tokens", "duration")
_UNLIMITED = SpanLimits(max_attributes=SpanLimits.UNSET, max_events=SpanLimits.UNSET,
                        max_span_attributes=SpanLimits.UNSET,
                        max_event_attributes=SpanLimits.UNSET,
                        max_attribute_length=SpanLimits.UNSET,
                        max_span_attribute_length=SpanLimits.UNSET)

Reports = dict[str, SelectionReport]


# -- the runs and their artifacts ------------------------------------------------------------


def _demo_items() -> list[ContextItem]:
    text = resources.files("cupellation").joinpath("_data/demo_candidates.json").read_text(
        encoding="utf-8")
    return [ContextItem.from_dict(row) for row in json.loads(text)]


def _larger_items(count: int, seed: int) -> list[ContextItem]:
    """``count`` varied candidates: duplicates, negative tokens, pinned items, metadata,
    tags, timestamps."""
    from datetime import UTC, datetime, timedelta  # noqa: PLC0415

    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "é", "<b>", "tab\there", "x\u2028y"]
    return [ContextItem(
        content=" ".join(rng.choices(words, k=rng.randint(1, 6))) + f" #{rng.randrange(count)}",
        tokens=rng.randint(-3, 120), kind=rng.choice(["Message", "Document", "ToolOutput"]),
        priority=rng.choice([None, rng.randint(0, 9)]),
        tags=rng.sample(["a", "b", "c"], rng.randint(0, 2)),
        metadata=rng.choice([None, {"k": rng.randint(0, 3)}, {"f": 0.5, "n": [1, "two"]}]),
        timestamp=rng.choice([None, datetime(2024, 1, 1, tzinfo=UTC)
                              + timedelta(hours=rng.randint(0, 500))]),
        future_relevance_hint=rng.choice([None, round(rng.random(), 3)]),
        pinned=rng.random() < 0.03) for _ in range(count)]


def _runs(larger: int) -> list[tuple[Pipeline, list[ContextItem], ContextBudget]]:
    """The demo (as the CLI's demo runs it, give or take its policy file), three
    variations that reach the other decisions, and a larger run."""
    demo = _demo_items()
    composite = CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 2.0),
                                 (KindScorer(), 1.0)])
    quota = CountQuotaSlice(GreedySlice(), [CountQuotaEntry("Document", require_count=3,
                                                            cap_count=4)])
    return [
        (Pipeline(composite, GreedySlice(), UShapedPlacer()), demo,
         ContextBudget(max_tokens=1024, target_tokens=400, output_reserve=256)),
        (Pipeline(RecencyScorer(), KnapsackSlice(bucket_size=10)), demo,
         ContextBudget(max_tokens=600, target_tokens=300)),
        (Pipeline(PriorityScorer(), quota, overflow_strategy=OverflowStrategy.PROCEED), demo,
         ContextBudget(max_tokens=900, target_tokens=250, reserved_slots={"Message": 20})),
        (Pipeline(composite, GreedySlice(), overflow_strategy=OverflowStrategy.TRUNCATE),
         _larger_items(larger, 7), ContextBudget(max_tokens=3000, target_tokens=1500)),
    ]


@dataclass(frozen=True)
class Artifact:
    """One stored artifact, its format, and the reports its runs had in process;
    ``key`` is the digest key it was written with, which its reader holds."""

    name: str
    format: str
    data: bytes
    original: Reports
    key: bytes | None = None


def artifacts(larger: int = 150) -> list[Artifact]:
    """Record the runs once, into every sink, and return the artifacts."""
    provider = TracerProvider(span_limits=_UNLIMITED)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = SpanCollector(tracer_provider=provider, tier="Full", content_capture="full")
    events_provider = TracerProvider(span_limits=_UNLIMITED)
    events_exporter = InMemorySpanExporter()
    events_provider.add_span_processor(SimpleSpanProcessor(events_exporter))
    event_spans = SpanCollector(tracer_provider=events_provider, tier="Full",
                                content_capture="full", layout="events")
    event_files: list[tuple[str, bytes, Reports, bytes | None]] = []
    reports: Reports = {}
    with tempfile.TemporaryDirectory(prefix="campaign_") as tmp:
        audit_path = Path(tmp) / "audit.jsonl"
        keyed_path = Path(tmp) / "audit-keyed.jsonl"
        with AuditLog(audit_path) as audit, AuditLog(keyed_path, digest_key=KEY) as keyed:
            for k, (pipeline, items, budget) in enumerate(_runs(larger)):
                diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
                pipeline.run(items, budget, FanOutCollector(diagnostics, audit, keyed, spans))
                report = diagnostics.build_report()
                run_id = diagnostics.events[0].run_id
                reports[run_id] = report
                for key in (None, KEY):
                    writer = RunLineEncoder(ContentCapture.FULL, key)
                    lines = b"".join(writer.lines((event,)) for event in diagnostics.events)
                    event_files.append((f"events-{k}.jsonl", lines, {run_id: report}, key))
        audit_data = audit_path.read_bytes()
        keyed_data = keyed_path.read_bytes()
    # The events layout from runs of its own (two SpanCollectors in one fan-out would
    # detach their contexts out of order).
    event_reports: Reports = {}
    for pipeline, items, budget in _runs(larger):
        diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
        pipeline.run(items, budget, FanOutCollector(diagnostics, event_spans))
        event_reports[diagnostics.events[0].run_id] = diagnostics.build_report()
    finished = exporter.get_finished_spans()
    from cupellation_exporters import otlp_json_document  # noqa: PLC0415

    otlp = json.dumps(otlp_json_document(finished)).encode()
    otlp_events = json.dumps(otlp_json_document(events_exporter.get_finished_spans())).encode()
    proto = encode_spans(finished).SerializeToString()
    jaeger = json.dumps(jaeger_document(finished)).encode()
    document = otlp_json_document(finished)
    backends = {
        "Phoenix spans": {"data": _phoenix_spans(finished), "next_cursor": None},
        "Phoenix otlpv1": {"data": [_snake(span) for span in _otlp_spans(document)],
                           "next_cursor": None},
        "MLflow batchGet": _mlflow_batch_get(document),
        "Jaeger v3": {"result": document},
        "Tempo v2": {"trace": _base64_ids(document)},
    }
    return [*(Artifact(name, "events JSONL" if key is None else "events JSONL, keyed", data,
                       original, key)
              for name, data, original, key in event_files),
            Artifact("audit.jsonl", "audit log", audit_data, reports),
            Artifact("audit-keyed.jsonl", "audit log, keyed", keyed_data, reports, KEY),
            Artifact("audit.jsonl", "replay input", audit_data, _replayed(audit_data)),
            Artifact("audit.jsonl", "simulate input", audit_data, _simulated(audit_data)),
            Artifact("otel_logs.jsonl", "store rows", _store_rows(audit_data), reports),
            Artifact("otel_traces.jsonl", "store spans",
                     _store_spans(otlp_json_document(events_exporter.get_finished_spans())),
                     event_reports),
            *(Artifact(f"report-{k}.json", "report file",
                       report.to_json(indent=2).encode("utf-8"), {run_id: report})
              for k, (run_id, report) in enumerate(reports.items())),
            Artifact("trace.json", "OTLP/JSON", otlp, reports),
            Artifact("jaeger.json", "Jaeger JSON", jaeger, reports),
            Artifact("trace.pb", "OTLP protobuf", proto, reports),
            Artifact("trace-events.json", "OTLP/JSON, events layout", otlp_events,
                     event_reports),
            *(Artifact(f"{fmt}.json", fmt, json.dumps(doc).encode(), reports)
              for fmt, doc in backends.items())]


# -- the backends' shapes -------------------------------------------------------------------


def _otlp_spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for r in document["resourceSpans"] for scope in r["scopeSpans"]
            for span in scope["spans"]]


def _snake_key(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


def _snake(value: Any) -> Any:
    """OTLP/JSON as Phoenix's otlpv1 endpoint writes it: snake_case members, every
    AnyValue member present (null when unset), 64-bit integers as numbers."""
    if isinstance(value, list):
        return [_snake(item) for item in value]
    if not isinstance(value, dict):
        return value
    if any(k in value for k in ("stringValue", "intValue", "doubleValue", "boolValue",
                                "arrayValue")):
        out: dict[str, Any] = dict.fromkeys(("array_value", "bool_value", "bytes_value",
                                             "double_value", "int_value", "kvlist_value",
                                             "string_value"))
        for key, item in value.items():
            out[_snake_key(key)] = int(item) if key == "intValue" else _snake(item)
        return out
    return {_snake_key(key): int(item) if key.endswith("UnixNano") else _snake(item)
            for key, item in value.items()}


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    micros = ns // 1000
    from datetime import UTC, datetime  # noqa: PLC0415

    return datetime.fromtimestamp(micros // 1_000_000, UTC).replace(
        microsecond=micros % 1_000_000).isoformat()


def _flat(attributes: Any) -> dict[str, Any]:
    return {key: list(value) if isinstance(value, tuple) else value
            for key, value in dict(attributes or {}).items()}


def _phoenix_spans(spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
    """The spans as Phoenix's /v1/projects/{p}/spans lists them."""
    return [{"id": f"U3Bhbjo{k}", "name": span.name,
             "context": {"trace_id": format(span.context.trace_id, "032x"),
                         "span_id": format(span.context.span_id, "016x")},
             "span_kind": "CHAIN",
             "parent_id": None if span.parent is None else format(span.parent.span_id, "016x"),
             "start_time": _iso(span.start_time), "end_time": _iso(span.end_time),
             "status_code": "UNSET", "status_message": "", "attributes": _flat(span.attributes),
             "events": [{"name": e.name, "timestamp": _iso(e.timestamp),
                         "attributes": _flat(e.attributes)} for e in span.events]}
            for k, span in enumerate(spans) if span.context is not None]


def _b64(hex_id: str) -> str:
    import base64  # noqa: PLC0415

    return base64.b64encode(bytes.fromhex(hex_id)).decode("ascii")


def _base64_ids(document: dict[str, Any]) -> dict[str, Any]:
    """The document with its ids in base64, as Tempo's API writes them."""
    copy: dict[str, Any] = json.loads(json.dumps(document))
    for span in _otlp_spans(copy):
        for key in ("traceId", "spanId", "parentSpanId"):
            if span.get(key):
                span[key] = _b64(span[key])
    return copy


def _mlflow_value(value: Any) -> Any:
    """An AnyValue as MLflow hands it back: a string that is valid JSON read as JSON."""
    text = value.get("stringValue") if isinstance(value, dict) else None
    if not isinstance(text, str):
        return value
    try:
        parsed = json.loads(text)
    except ValueError:
        return value

    def any_value(item: Any) -> dict[str, Any]:
        if isinstance(item, bool):
            return {"boolValue": item}
        if isinstance(item, int):
            return {"intValue": str(item)}
        if isinstance(item, float):
            return {"doubleValue": item}
        if isinstance(item, str):
            return {"stringValue": item}
        if isinstance(item, list):
            return {"arrayValue": {"values": [any_value(v) for v in item]}}
        if isinstance(item, dict):
            return {"kvlistValue": {"values": [{"key": k, "value": any_value(v)}
                                               for k, v in item.items()]}}
        return {}  # JSON null: an AnyValue with nothing set, as MLflow 3.17.2 returns it

    return any_value(parsed)


def _mlflow_batch_get(document: dict[str, Any]) -> dict[str, Any]:
    """The spans as MLflow's batchGet returns them: one entry per trace, spans in
    snake_case with base64 ids and MLflow's reading of JSON-valid strings."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for original in _otlp_spans(_base64_ids(document)):
        span = dict(original)
        span["attributes"] = [{"key": a["key"], "value": _mlflow_value(a["value"])}
                              for a in span.get("attributes", [])]
        span["events"] = [{**e, "attributes": [{"key": a["key"],
                                                "value": _mlflow_value(a["value"])}
                                               for a in e.get("attributes", [])]}
                          for e in span.get("events", [])]
        snake = {_snake_key(k): v for k, v in span.items()}
        traces.setdefault(span["traceId"], []).append(snake)
    return {"traces": [{"trace_info": {"trace_id": f"tr-{k}"}, "spans": listed}
                       for k, listed in enumerate(traces.values())]}


# -- decoding ---------------------------------------------------------------------------------


def _replayed(data: bytes) -> Reports:
    """``replay``'s input (issue 17): each logged run re-run under its own logged policy
    from its logged candidates, budget and clock, as the re-run's report (stage
    timings left out); a run that cannot be re-run is a report saying why in
    ``incomplete``."""
    out: Reports = {}
    for run in read_runs(_Bytes(data), keep_candidates=True):
        key = run.run_id if run.run_id not in out else run.run_id + "\x00again"
        try:
            rerun = replayable(run)
            report = rerun.logged_pipeline().dry_run(rerun.candidates, rerun.budget)
            out[key] = dataclasses.replace(report, events=())
        except RunNotReplayableError as exc:
            out[key] = SelectionReport(events=(), included=(), excluded=(), total_candidates=0,
                                       total_tokens_considered=0, incomplete=(str(exc),))
    return out


def _simulated(data: bytes) -> Reports:
    """``simulate``'s and ``sensitivity``'s input (issue 24): each logged run re-run as
    a budget sweep (``budget_sweep`` at its own ``max_tokens`` and twice it), one
    report per run and budget; a run that cannot be re-run is a report saying why."""
    out: Reports = {}
    for run in read_runs(_Bytes(data), keep_candidates=True):
        key = run.run_id if f"{run.run_id}@max" not in out else run.run_id + "\x00again"
        try:
            rerun = replayable(run)
            size = rerun.budget.max_tokens
            points = budget_sweep(rerun.logged_pipeline(), rerun.candidates,
                                  [size, 2 * size], budget=rerun.budget)
        except RunNotReplayableError as exc:
            out[f"{key}@max"] = SelectionReport(
                events=(), included=(), excluded=(), total_candidates=0,
                total_tokens_considered=0, incomplete=(str(exc),))
            continue
        for name, point in zip(("max", "twice"), points, strict=True):
            out[f"{key}@{name}"] = (
                dataclasses.replace(point.report, events=()) if point.report is not None
                else SelectionReport(events=(), included=(), excluded=(), total_candidates=0,
                                     total_tokens_considered=0,
                                     incomplete=(f"failed: {point.failure}",)))
    return out


def _store_rows(audit: bytes) -> bytes:
    """The audit log as the fleet store holds it: one ``LogAttributes`` map per event,
    every value a string as the Collector's exporter writes it (Go's ``AsString``),
    one JSON object of strings per line."""
    return b"".join(json.dumps(attributes_of(json.loads(line)), ensure_ascii=False).encode()
                    + b"\n" for line in audit.split(b"\n") if line.strip())


def _seq_or_zero(row: dict[str, str]) -> int:
    """ClickHouse's ``toUInt64OrZero(LogAttributes['seq'])``."""
    text = row.get("seq", "")
    return int(text) if re.fullmatch(r"[0-9]{1,19}", text) and int(text) < 2**64 else 0


def _stored(data: bytes) -> Reports:
    """Read the store's rows as ``Store.read_runs`` does: ordered by run and seq, each
    typed back (``canonical_line``) and folded by the log reader. A line that is no
    map of strings cannot be a row of a Map column: it is a row lost."""
    rows: list[dict[str, str]] = []
    for line in data.split(b"\n"):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and all(isinstance(v, str) for v in row.values()):
            rows.append(row)
    first: dict[str, int] = {}
    for row in rows:
        first.setdefault(row.get("run_id", ""), len(first))
    rows = [row for row in rows if row.get("run_id", "") != ""]
    rows.sort(key=lambda row: (first[row["run_id"]], _seq_or_zero(row)))
    out: Reports = {}
    for run in read_runs(_Bytes(b"".join(canonical_line(row) for row in rows))):
        out[run.run_id if run.run_id not in out else run.run_id + "\x00again"] = run.report
    return out


def _store_spans(document: dict[str, Any]) -> bytes:
    """The spans (events layout) as ``otel_traces`` holds them: one row per span, one
    JSON object per line, its attributes and its events' attributes strings as the
    Collector's exporter writes them (Go's ``AsString``)."""
    return b"".join(json.dumps({
        "TraceId": span.trace_id or "", "SpanId": span.span_id or "",
        "ParentSpanId": span.parent_span_id or "", "SpanName": span.name,
        "Start": span.start_ns or 0, "Duration": (span.end_ns or 0) - (span.start_ns or 0),
        "SpanAttributes": attributes_of(span.attributes),
        "Events": [[event.name, event.timestamp_ns or 0, attributes_of(event.attributes)]
                   for event in span.events]}, ensure_ascii=False).encode() + b"\n"
        for span in spans_from_otlp_json(document))


def _strings(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str)
                                           for k, v in value.items())


def _span_row(row: Any) -> tuple[Any, ...] | None:
    """A line as the ``otel_traces`` row it stands for (the columns ``span_from_row``
    reads), or None for one no row of the table can hold (a Map of strings, UInt64
    times): a row lost."""
    if not isinstance(row, dict):
        return None
    texts = [row.get(k) for k in ("TraceId", "SpanId", "ParentSpanId", "SpanName")]
    times = [row.get("Start"), row.get("Duration")]
    events = row.get("Events")
    if (not all(isinstance(t, str) for t in texts)
            or not all(type(t) is int and 0 <= t < 2**63 for t in times)
            or not _strings(row.get("SpanAttributes")) or not isinstance(events, list)
            or not all(isinstance(e, list) and len(e) == 3 and isinstance(e[0], str)
                       and type(e[1]) is int and 0 <= e[1] < 2**63 and _strings(e[2])
                       for e in events)):
        return None
    return (*texts, *times, row["SpanAttributes"], [e[0] for e in events],
            [e[1] for e in events], [e[2] for e in events])


def _stored_spans(data: bytes) -> Reports:
    """Read the rows as ``Store.read_runs`` reads a run found only in ``otel_traces``:
    each row a span (``span_from_row``: strings typed back), rebuilt by the span
    decoder."""
    rows = []
    for line in data.split(b"\n"):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        shaped = _span_row(row)
        if shaped is not None:
            rows.append(shaped)
    out: Reports = {}
    for run in runs_from_spans([span_from_row(row) for row in rows]):
        out[run.run_id if run.run_id not in out else run.run_id + "\x00again"] = run.report
    return out


def decode(artifact: Artifact, data: bytes) -> Reports:
    """The reports the artifact's decoder rebuilds from ``data``, by run id (a run id
    seen twice keeps a marker that can equal no original report)."""
    out: Reports = {}
    if artifact.format == "replay input":
        return _replayed(data)
    if artifact.format == "simulate input":
        return _simulated(data)
    if artifact.format == "store rows":
        return _stored(data)
    if artifact.format == "store spans":
        return _stored_spans(data)
    if artifact.format == "report file":  # (it holds no run id: named by its file)
        (run_id,) = artifact.original
        return {run_id: SelectionReport.from_json(data)}
    if artifact.format.startswith("events JSONL"):
        events = list(events_from_json_lines(data))
        for run_id in {event.run_id for event in events}:
            out[run_id] = build_report(events, run_id=run_id, digest_key=artifact.key)
        return out
    runs: list[Any] = (list(read_runs(_Bytes(data), digest_key=artifact.key))
                       if artifact.format.startswith("audit log")
                       else read_trace(data, digest_key=artifact.key))
    for run in runs:
        out[run.run_id if run.run_id not in out else run.run_id + "\x00again"] = run.report
    return out


class _Bytes:
    """An in-memory binary stream read_runs reads like a file."""

    def __init__(self, data: bytes) -> None:
        import io  # noqa: PLC0415

        self._stream = io.BufferedReader(io.BytesIO(data))
        self.name = "<mutated>"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def classify(artifact: Artifact, data: bytes) -> str:
    """exact, refused, flagged, SILENTLY WRONG or CRASHED (see the module's note)."""
    try:
        rebuilt = decode(artifact, data)
    except CupelError:
        return "refused"
    except Exception:  # a decoder let something else escape: a bug, counted as such
        return "CRASHED"
    original = artifact.original
    if rebuilt == original:
        return "exact"
    differing = [run_id for run_id, report in rebuilt.items()
                 if original.get(run_id) != report]
    vanished = [run_id for run_id in original if run_id not in rebuilt]
    if not differing and vanished:
        return "SILENTLY WRONG"  # a run is gone and no rebuilt report says anything
    flagged = all(len(rebuilt[run_id].incomplete) > len(
        original[run_id].incomplete if run_id in original else ()) for run_id in differing)
    if not flagged and artifact.format == "report file" and _as_written(rebuilt, data):
        return "as written"
    return "flagged" if flagged else "SILENTLY WRONG"


def _shown(value: Any) -> Any:
    """A report document with the fields a writer leaves out at their defaults (null,
    false, empty) left out, so a file and its re-encoding compare by what they say."""
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items()
                if not (v is None or v is False or v in ([], {}))}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


def _as_written(rebuilt: Reports, data: bytes) -> bool:
    """True when the one report read from a report file says exactly what the file
    says (no field dropped, coerced or invented by the reader)."""
    (report,) = rebuilt.values()
    try:
        written = json.loads(data)
    except ValueError:
        return False
    return bool(_shown(json.loads(report.to_json())) == _shown(written))


# -- mutations -------------------------------------------------------------------------------

Mutation = Callable[[random.Random, bytes, str], tuple[str, bytes] | None]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _byte(rng: random.Random, data: bytes, fmt: str) -> tuple[str, bytes] | None:
    if not data:
        return None
    at = rng.randrange(len(data))
    kind = rng.choice(["flip", "set", "delete", "insert"])
    if kind == "flip":
        changed = data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]
    elif kind == "set":
        changed = data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
    elif kind == "delete":
        changed = data[:at] + data[at + 1:]
    else:
        changed = data[:at] + bytes([rng.choice(b' 0"{},:9aZ\\\n')]) + data[at:]
    return f"byte {kind} at {at}", changed


def _line(rng: random.Random, data: bytes, fmt: str) -> tuple[str, bytes] | None:
    lines = _lines(data)
    content = [k for k, line in enumerate(lines) if line.strip()]
    if len(content) < 2:
        return None
    a, b = rng.sample(content, 2)
    kind = rng.choice(["delete", "duplicate", "swap", "swap-next"])
    if kind == "delete":
        del lines[a]
    elif kind == "duplicate":
        lines.insert(rng.randrange(len(lines)), lines[a])
    elif kind == "swap":
        lines[a], lines[b] = lines[b], lines[a]
    else:
        nxt = min(a + 1, len(lines) - 1)
        lines[a], lines[nxt] = lines[nxt], lines[a]
    return f"line {kind} {a}", b"\n".join(lines)


def _walk(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, leaf) of decoded JSON, and every (path + ("<key>", key), key)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*path, "<key>", key), key
            yield from _walk(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _walk(inner, (*path, index))
    else:
        yield path, value


def _other_number(rng: random.Random, value: float, pool: list[Any]) -> Any:
    choices = [p for p in pool if type(p) is type(value) and p != value]
    step = rng.choice(["+1", "-1", "x2", "zero", "pool", "pool"])
    if step == "pool" and choices:
        return rng.choice(choices)
    if isinstance(value, int):
        return {"+1": value + 1, "-1": value - 1, "x2": value * 2}.get(step, 0)
    return {"+1": value + 0.1, "-1": value - 0.1, "x2": value * 2}.get(step, 0.0)


def _other_text(rng: random.Random, value: str, pool: list[Any]) -> str:
    choices = [p for p in pool if isinstance(p, str) and p != value]
    step = rng.choice(["pool", "pool", "case", "char", "drop"])
    if step == "pool" and choices:
        return rng.choice(choices)
    if step == "case" and value.lower() != value.upper():
        return value.upper() if value != value.upper() else value.lower()
    if step == "drop" and len(value) > 1:
        at = rng.randrange(len(value))
        return value[:at] + value[at + 1:]
    at = rng.randrange(len(value) + 1)
    return value[:at] + rng.choice(string.ascii_letters) + value[at:]


def _set(document: Any, path: tuple[Any, ...], new: Any) -> None:
    *parents, last = path
    target = document
    if len(parents) >= 1 and parents[-1] == "<key>":  # renaming a key
        holder: Any = document
        for step in parents[:-1]:
            holder = holder[step]
        items = list(holder.items())
        holder.clear()
        holder.update((new if k == last else k, v) for k, v in items)
        return
    for step in parents:
        target = target[step]
    target[last] = new


def _mutate_json(rng: random.Random, document: Any, keys: bool) -> str | None:
    """Change one leaf (or one key) of a decoded JSON document in place."""
    leaves = list(_walk(document))
    if keys:
        leaves = [(p, v) for p, v in leaves if len(p) >= 2 and p[-2] == "<key>"]
    else:
        leaves = [(p, v) for p, v in leaves if not (len(p) >= 2 and p[-2] == "<key>")]
        favoured = [(p, v) for p, v in leaves if any(
            word in str(p[-1]) or word in str(p[-2] if len(p) > 1 else "") or (
                isinstance(v, str) and word in v) for word in _FAVOURED)]
        if favoured and rng.random() < 0.6:
            leaves = favoured
    if not leaves:
        return None
    path, value = rng.choice(leaves)
    pool = [v for p, v in _walk(document) if p[-1] == path[-1] or (
        len(p) > 1 and len(path) > 1 and p[-2] == path[-2])]
    if keys:
        names = [v for p, v in _walk(document) if len(p) >= 2 and p[-2] == "<key>"]
        new: Any = _other_text(rng, value, names)
    elif isinstance(value, bool):
        new = not value
    elif isinstance(value, int | float):
        new = _other_number(rng, value, pool)
    elif isinstance(value, str):
        new = _other_text(rng, value, pool) if value else "x"
    else:
        new = rng.choice([0, "", False])
    _set(document, path, new)
    return f"{'key' if keys else 'value'} {'/'.join(map(str, path))}: {value!r} -> {new!r}"


def _rewritten(rng: random.Random, data: bytes, fmt: str,
               change: Callable[[Any], str | None], *, ascii_lines: bool = False
               ) -> tuple[str, bytes] | None:
    """``data`` decoded (one line of it, for the line formats), changed in place by
    ``change`` (which says how, or None for no change), and written back as ``fmt``
    writes it; None when nothing changed or the result cannot be written as ``fmt``.
    ``ascii_lines`` writes a changed line with JSON escapes (``\\ud800``), as a
    hostile writer would, instead of raw UTF-8."""
    if fmt == "OTLP protobuf":
        message = trace_pb2.TracesData()
        message.ParseFromString(data)
        document = json_format.MessageToDict(message)
        what = change(document)
        if what is None:
            return None
        try:
            changed = json_format.ParseDict(document, trace_pb2.TracesData())
        except (json_format.ParseError, ValueError, TypeError, SystemError):
            # Not a protobuf message any more (a byte mutation covers that); upb raises
            # SystemError on a lone surrogate, which protobuf's UTF-8 strings cannot hold.
            return None
        return what, changed.SerializeToString()
    if fmt in _LINE_FORMATS:
        lines = _lines(data)
        k = rng.choice([k for k, line in enumerate(lines) if line.strip()])
        record = json.loads(lines[k])
        what = change(record)
        if what is None:
            return None
        lines[k] = json.dumps(record, ensure_ascii=ascii_lines, separators=(",", ":")).encode()
        return f"line {k} {what}", b"\n".join(lines)
    document = json.loads(data)
    what = change(document)
    return None if what is None else (what, json.dumps(document).encode())


def _value(rng: random.Random, data: bytes, fmt: str, keys: bool = False
           ) -> tuple[str, bytes] | None:
    return _rewritten(rng, data, fmt, lambda document: _mutate_json(rng, document, keys))


#: Text no output can hold (a lone surrogate), or that splits lines or hides: put into a
#: string whole, or as a same-length JSON escape inside a string of embedded JSON (a
#: column chunk), which keeps every byte count the spans carry.
_HOSTILE_TEXTS = ("\ud800", "\udfff", "\u2028", "\x00", "\ufeff")
_ESCAPED_RUN = re.compile(r'(?<=[\[,:])"([A-Za-z0-9_. ]{6})')  # a value, not a key


def _hostile_text(rng: random.Random, value: str) -> str:
    """``value`` with hostile text in it: a same-length ``\\ud800``-style escape
    replacing six characters of a string inside embedded JSON when it holds one, else
    one hostile character put in (or replacing it)."""
    runs = list(_ESCAPED_RUN.finditer(value)) if value[:1] in "{[" else []
    if runs:
        run = rng.choice(runs)
        escape = rng.choice(["\\ud800", "\\udfff", "\\u2028", "\\u0000"])
        return value[:run.start(1)] + escape + value[run.start(1) + 6:]
    hostile = rng.choice(_HOSTILE_TEXTS)
    at = rng.randrange(len(value) + 1)
    return rng.choice([hostile, value[:at] + hostile + value[at:]])


def _text(rng: random.Random, data: bytes, fmt: str) -> tuple[str, bytes] | None:
    """Put hostile text into one string value (see _hostile_text)."""
    def put(document: Any) -> str | None:
        texts = [(path, value) for path, value in _walk(document) if isinstance(value, str)
                 and not (len(path) >= 2 and path[-2] == "<key>")]
        if not texts:
            return None
        embedded = [(p, v) for p, v in texts if v[:1] in "{[" and _ESCAPED_RUN.search(v)]
        path, value = rng.choice(embedded if embedded and rng.random() < 0.5 else texts)
        new = _hostile_text(rng, value)
        _set(document, path, new)
        return f"text {'/'.join(map(str, path))}: {value[:40]!r} -> {new[:40]!r}"

    return _rewritten(rng, data, fmt, put, ascii_lines=True)


def _key(rng: random.Random, data: bytes, fmt: str) -> tuple[str, bytes] | None:
    return _value(rng, data, fmt, keys=True)


def _tamper(rng: random.Random, data: bytes, fmt: str) -> tuple[str, bytes] | None:
    """An attacker without the key covering a changed score (keyed formats only)."""
    if fmt not in _KEYED_FORMATS:
        return None
    move = rng.choice(TAMPER_MOVES)
    run_id = rng.choice(run_ids(data))
    try:
        return f"tamper {move} {run_id}", tamper_lines(data, move, run_id)
    except ValueError:  # a run without an item line or an end to cover
        return None


def _span_events(rng: random.Random, data: bytes, fmt: str) -> tuple[str, bytes] | None:
    """Delete, repeat or swap a span event (a Jaeger log), or a whole span."""
    if fmt in _LINE_FORMATS:
        return _line(rng, data, fmt)
    proto = fmt == "OTLP protobuf"
    if proto:
        message = trace_pb2.TracesData()
        message.ParseFromString(data)
        document = json_format.MessageToDict(message)
    else:
        document = json.loads(data)
    holders = _holders(document, fmt)
    spans = [s for holder in holders for s in holder]
    events_key = "logs" if fmt == "Jaeger JSON" else "events"
    span = rng.choice(spans)
    events = span.get(events_key) or []
    kind = rng.choice(["delete", "duplicate", "swap", "delete-span"] if events
                      else ["delete-span"])
    if kind == "delete-span":
        for holder in holders:
            if any(s is span for s in holder):
                holder.remove(span)
    elif kind == "delete":
        events.pop(rng.randrange(len(events)))
    elif kind == "duplicate":
        events.insert(rng.randrange(len(events) + 1), rng.choice(events))
    elif len(events) > 1:
        a, b = rng.sample(range(len(events)), 2)
        events[a], events[b] = events[b], events[a]
    what = f"span {span.get('name', span.get('operationName'))} event {kind}"
    if proto:
        return what, json_format.ParseDict(document, trace_pb2.TracesData()).SerializeToString()
    return what, json.dumps(document).encode()


def _holders(document: Any, fmt: str) -> list[list[dict[str, Any]]]:
    """The lists holding the document's spans."""
    if fmt == "Jaeger JSON":
        return [t["spans"] for t in document["data"]]
    if fmt in ("Phoenix spans", "Phoenix otlpv1"):
        return [document["data"]]
    if fmt == "MLflow batchGet":
        return [t["spans"] for t in document["traces"]]
    if fmt == "report file":  # its entries, each removed whole ("delete-span")
        return [document[key] for key in ("included", "excluded", "events")]
    otlp = (document["result"] if fmt == "Jaeger v3" else document["trace"]
            if fmt == "Tempo v2" else document)
    return [scope["spans"] for r in otlp["resourceSpans"] for scope in r["scopeSpans"]]


#: Each mutation kind and its share of the campaign.
MUTATIONS: tuple[tuple[str, Mutation, float], ...] = (
    ("value", _value, 0.4),
    ("key", _key, 0.15),
    ("line/event", _span_events, 0.2),
    ("byte", _byte, 0.15),
    ("text", _text, 0.1),
    ("tamper", _tamper, 0.15),
)


# -- the campaign -----------------------------------------------------------------------------


@dataclass
class Campaign:
    """The outcome counts per format and mutation kind, and the silent cases."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    by_kind: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)
    silent: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def silently_wrong(self) -> int:
        """How many mutations rebuilt a wrong report with nothing flagged, or crashed."""
        return sum(counter["SILENTLY WRONG"] + counter["CRASHED"]
                   for counter in self.counts.values())

    def table(self) -> str:
        """The counts per format, as a text table."""
        header = ["format", "mutations", *OUTCOMES]
        rows = [[fmt, str(sum(c.values())), *(str(c[o]) for o in OUTCOMES)]
                for fmt, c in self.counts.items()]
        widths = [max(len(row[k]) for row in [header, *rows]) for k in range(len(header))]
        lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))
                 for row in [header, *rows]]
        lines.insert(1, "  ".join("-" * width for width in widths))
        return "\n".join(lines)


def campaign(mutations: int, seed: int = 12, larger: int = 150,
             formats: Sequence[str] = FORMATS) -> Campaign:
    """Run ``mutations`` mutations per format (spread over that format's artifacts)."""
    start = time.perf_counter()
    rng = random.Random(seed)
    stored = [a for a in artifacts(larger) if a.format in formats]
    result = Campaign()
    kinds = [name for name, _, _ in MUTATIONS]
    weights = [share for _, _, share in MUTATIONS]
    functions = {name: function for name, function, _ in MUTATIONS}
    for fmt in formats:
        own = [a for a in stored if a.format == fmt]
        counter = result.counts.setdefault(fmt, Counter())
        while sum(counter.values()) < mutations:
            artifact = rng.choice(own)
            kind = rng.choices(kinds, weights)[0]
            mutated = functions[kind](rng, artifact.data, fmt)
            if mutated is None or mutated[1] == artifact.data:
                continue
            outcome = classify(artifact, mutated[1])
            counter[outcome] += 1
            result.by_kind.setdefault((fmt, kind), Counter())[outcome] += 1
            if outcome in ("SILENTLY WRONG", "CRASHED"):
                result.silent.append(f"{outcome} {fmt} {artifact.name}: {mutated[0]}")
    result.seconds = time.perf_counter() - start
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the campaign; print the table; exit 1 on anything silently wrong."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--mutations", type=int, default=3000, help="per format")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--larger", type=int, default=150, help="candidates of the larger run")
    parser.add_argument("--json", dest="json_path", type=Path, default=None)
    args = parser.parse_args(argv)
    result = campaign(args.mutations, args.seed, args.larger)
    print(result.table())
    print(f"\n{args.mutations} mutations per format, seed {args.seed}, "
          f"{result.seconds:.0f} s; silently wrong or crashed: {result.silently_wrong}")
    for line in result.silent[:20]:
        print(" ", line)
    if args.json_path is not None:
        args.json_path.write_text(json.dumps({
            "mutations": args.mutations, "seed": args.seed,
            "counts": {fmt: dict(c) for fmt, c in result.counts.items()},
            "by_kind": {f"{fmt} / {kind}": dict(c) for (fmt, kind), c in result.by_kind.items()},
            "silent": result.silent}, indent=2), encoding="utf-8")
    return 1 if result.silently_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
