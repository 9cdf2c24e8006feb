"""What trace backends hand back, read by cupellation's own readers: Phoenix's REST API
(both endpoints, pages merged however they were saved), MLflow's batchGet JSON, its
``Trace.to_json()`` and its Trace objects (duck-typed), Jaeger's v3 API. Built from
the shapes the backends document and from answers captured from the real servers
(tests/data/backends: Phoenix 20.26.1, MLflow 3.17.2); each rebuilds the in-process
report, and what is not a trace is a DecodeError naming where and what was expected."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer, SelectionReport
from cupellation.events import TraceDetailLevel
from cupellation.exceptions import DecodeError
from cupellation.otel import (
    read_trace,
    read_trace_file,
    runs_from_spans,
    spans_from_mlflow_json,
    spans_from_mlflow_traces,
    spans_from_phoenix_json,
)

from ._support import attrs, make_sdk, otlp_document, run_both

DATA = Path(__file__).resolve().parents[1] / "data" / "backends"
BUDGET = ContextBudget(max_tokens=200, target_tokens=60)
ITEMS = [ContextItem("pinned", 5, pinned=True, tags=("sys",)),
         *(ContextItem(f"message {k}", 7 + k, tags=("t", f"n{k}"),
                       metadata={"k": k, "nested": {"ok": True}}) for k in range(12)),
         ContextItem("message 3", 10), ContextItem("42", 6), ContextItem("neg", -1)]
PIPELINE = Pipeline(scorer=RecencyScorer(), budget=BUDGET)
TIERS = ["StageOnly", "StageAndExclusions", "Full"]


def _runs(tier: str = "Full") -> tuple[tuple[ReadableSpan, ...], list[SelectionReport]]:
    """Two runs' spans (content captured in full) and their in-process reports."""
    sdk = make_sdk()
    collector = sdk.collector(tier)
    reports = [run_both(PIPELINE, ITEMS[:size], BUDGET, collector,
                        TraceDetailLevel.parse(tier)).report for size in (len(ITEMS), 6)]
    return sdk.spans, reports


def _rebuilt(data: str | bytes) -> list[SelectionReport]:
    return [run.report for run in read_trace(data)]


# -- Phoenix -------------------------------------------------------------------------------


def _iso(ns: int | None) -> str | None:
    """A time as Phoenix writes it: ISO 8601, microseconds, +00:00."""
    if ns is None:
        return None
    return datetime.fromtimestamp(ns // 1000 / 1e6, UTC).replace(
        microsecond=(ns // 1000) % 1_000_000).isoformat()


def _snake(value: Any) -> Any:
    """OTLP/JSON as Phoenix's otlpv1 endpoint writes it: snake_case, every AnyValue
    member present (null when unset), ints as numbers."""
    if isinstance(value, dict):
        if "stringValue" in value or "intValue" in value or "doubleValue" in value or (
                "boolValue" in value or "arrayValue" in value):
            out: dict[str, Any] = dict.fromkeys((
                "array_value", "bool_value", "bytes_value", "double_value", "int_value",
                "kvlist_value", "string_value"))
            for key, item in value.items():
                snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
                out[snake] = int(item) if key == "intValue" else _snake(item)
            return out
        return {"".join("_" + c.lower() if c.isupper() else c for c in key): _snake(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_snake(item) for item in value]
    return value


def phoenix_otlpv1_spans(spans: tuple[ReadableSpan, ...]) -> list[dict[str, Any]]:
    """The spans as ``GET /v1/projects/{p}/spans/otlpv1`` lists them."""
    document = otlp_document(spans)
    listed = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    out = []
    for span in listed:
        entry = _snake(span)
        entry["start_time_unix_nano"] = int(entry["start_time_unix_nano"])
        entry["end_time_unix_nano"] = int(entry["end_time_unix_nano"])
        for event in entry["events"]:
            event["time_unix_nano"] = int(event["time_unix_nano"])
        entry.setdefault("parent_span_id", None)
        entry.update(dropped_attributes_count=None, dropped_events_count=None, flags=None,
                     links=None, trace_state=None, kind="SPAN_KIND_INTERNAL")
        out.append(entry)
    return out


def phoenix_spans(spans: tuple[ReadableSpan, ...]) -> list[dict[str, Any]]:
    """The spans as ``GET /v1/projects/{p}/spans`` lists them: context, parent_id,
    ISO times with microseconds, flat attribute objects."""
    return [{
        "id": f"U3Bhbjo{k}", "name": span.name,
        "context": {"trace_id": format(span.context.trace_id, "032x"),
                    "span_id": format(span.context.span_id, "016x")},
        "span_kind": "CHAIN",
        "parent_id": None if span.parent is None else format(span.parent.span_id, "016x"),
        "start_time": _iso(span.start_time), "end_time": _iso(span.end_time),
        "status_code": "UNSET", "status_message": "",
        "attributes": {key: list(value) if isinstance(value, tuple) else value
                       for key, value in attrs(span).items()},
        "events": [{"name": event.name, "timestamp": _iso(event.timestamp),
                    "attributes": {key: list(value) if isinstance(value, tuple) else value
                                   for key, value in attrs(event).items()}}
                   for event in span.events],
    } for k, span in enumerate(spans)]


def _pages(listed: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """``listed`` in pages of ``size``, newest first as Phoenix pages them."""
    listed = listed[::-1]
    chunks = [listed[at:at + size] for at in range(0, len(listed), size)]
    return [{"data": chunk, "next_cursor": f"U3Bhbjo{k}" if k + 1 < len(chunks) else None}
            for k, chunk in enumerate(chunks)]


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("endpoint", ["spans", "otlpv1"])
@pytest.mark.parametrize("saved", ["one page", "array of pages", "json lines",
                                   "back to back", "overlapping pages"])
def test_phoenix_pages_however_saved_rebuild_the_reports(tier: str, endpoint: str,
                                                         saved: str) -> None:
    """Either endpoint's pages, saved as one page, a JSON array, JSON lines, documents
    back to back or with a page saved twice: each run comes back equal to the
    in-process report (Phoenix's microsecond times do not touch it)."""
    spans, reports = _runs(tier)
    listed = phoenix_spans(spans) if endpoint == "spans" else phoenix_otlpv1_spans(spans)
    pages = _pages(listed, len(listed) if saved == "one page" else 3)
    if saved == "overlapping pages":
        pages = [*pages, pages[1], pages[0]]
    texts = [json.dumps(page) for page in pages]
    data = {"one page": texts[0], "array of pages": json.dumps(pages),
            "json lines": "\n".join(texts) + "\n", "back to back": "".join(texts),
            "overlapping pages": "\n".join(texts)}[saved]
    assert _rebuilt(data) == reports
    assert [run.report for run in runs_from_spans(spans_from_phoenix_json(data))] == reports


def test_a_missing_phoenix_page_is_reported_not_hidden() -> None:
    """A run split across pages with one page not saved: the report says it is
    incomplete, never a smaller run that looks whole."""
    spans, reports = _runs("Full")
    pages = _pages(phoenix_spans(spans), 2)
    runs = read_trace("\n".join(json.dumps(page) for page in pages[1:]))
    assert runs
    assert all(not run.is_complete for run in runs if run.report != reports[0]
               and run.report != reports[1])
    assert any(not run.is_complete for run in runs)


def test_real_phoenix_answers_rebuild_the_report_they_were_sent_from() -> None:
    """Captured from Phoenix 20.26.1: the otlpv1 endpoint in one page, and the spans
    endpoint in three pages of two spans saved as JSON lines."""
    report = (DATA / "phoenix-20.26.1-report.json").read_text(encoding="utf-8")
    for name in ("phoenix-20.26.1-otlpv1.json", "phoenix-20.26.1-spans-pages.jsonl"):
        (run,) = read_trace_file(DATA / name)
        assert run.report.to_json() == report, name
        assert run.verification.value == "verified"


@pytest.mark.parametrize(("document", "where", "problem"), [
    ({"data": [{"context": {"trace_id": "xyz", "span_id": "00"}, "name": "a"}],
      "next_cursor": None}, "trace.data[0].context.trace_id", "must be 32 hex digits"),
    ({"data": [{"context": {}, "name": "a", "start_time": "yesterday"}],
      "next_cursor": None}, "trace.data[0].start_time", "ISO 8601"),
    ({"data": [{"context": {}, "name": "a", "attributes": {"k": {"x": None}}}],
      "next_cursor": None}, "trace.data[0].attributes", "must be text, a number"),
    ({"data": [{"foo": 1}], "next_cursor": None}, "trace.data[0]", "is not a Phoenix span"),
    ({"data": [{"span_id": "00", "trace_id": 7, "name": "a"}], "next_cursor": None},
     "trace.data[0].traceId", "must be an id string"),
])
def test_a_broken_phoenix_page_names_where_and_what_was_expected(
        document: dict[str, Any], where: str, problem: str) -> None:
    """A Phoenix page with a wrong member: DecodeError naming the member and the
    expected shape."""
    with pytest.raises(DecodeError, match=problem) as caught:
        read_trace(json.dumps(document))
    assert caught.value.field.startswith(where)


def test_a_non_phoenix_line_among_pages_is_named_by_its_line() -> None:
    """Pages as JSON lines with a line that is no page: the error names line 2 and
    says what a trace may be."""
    spans, _ = _runs("StageOnly")
    page = json.dumps(_pages(phoenix_spans(spans), 100)[0])
    with pytest.raises(DecodeError, match="line 2: trace: is not a trace: expected") as caught:
        read_trace(page + "\n" + json.dumps({"foo": 1}) + "\n")
    assert "Phoenix" in str(caught.value)
    assert "MLflow" in str(caught.value)


# -- MLflow -------------------------------------------------------------------------------


def _mlflow_stored(value: Any) -> Any:
    """A value as MLflow keeps it: a string that is valid JSON is read as that JSON."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return list(value) if isinstance(value, tuple) else value


def _mlflow_any(value: Any) -> dict[str, Any]:
    if value is None:  # MLflow leaves the AnyValue empty
        return {}
    if isinstance(value, bool):
        return {"bool_value": value}
    if isinstance(value, int):
        return {"int_value": value}
    if isinstance(value, float):
        return {"double_value": value}
    if isinstance(value, str):
        return {"string_value": value}
    if isinstance(value, list):
        return {"array_value": {"values": [_mlflow_any(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlist_value": {"values": [{"key": k, "value": _mlflow_any(v)}
                                            for k, v in value.items()]}}
    raise TypeError(value)


def _b64(value: int, size: int) -> str:
    return base64.b64encode(value.to_bytes(size, "big")).decode("ascii")


def mlflow_batch_get(spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """The spans as ``GET /api/3.0/mlflow/traces/batchGet`` returns them: OTLP spans
    in snake_case, base64 ids, values as MLflow keeps them."""
    traces: dict[int, list[dict[str, Any]]] = {}
    for span in spans:
        entry: dict[str, Any] = {
            "trace_id": _b64(span.context.trace_id, 16),
            "span_id": _b64(span.context.span_id, 8),
            "name": span.name, "start_time_unix_nano": span.start_time,
            "end_time_unix_nano": span.end_time,
            "attributes": [{"key": k, "value": _mlflow_any(_mlflow_stored(v))}
                           for k, v in attrs(span).items()],
            "events": [{"time_unix_nano": e.timestamp, "name": e.name,
                        "attributes": [{"key": k, "value": _mlflow_any(_mlflow_stored(v))}
                                       for k, v in attrs(e).items()]} for e in span.events],
            "status": {}}
        if span.parent is not None:
            entry["parent_span_id"] = _b64(span.parent.span_id, 8)
        traces.setdefault(span.context.trace_id, []).append(entry)
    return {"traces": [{"trace_info": {"trace_id": f"tr-{trace_id:032x}", "state": "OK"},
                        "spans": listed} for trace_id, listed in traces.items()]}


def mlflow_to_json(spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """The spans as ``Trace.to_json()`` writes one trace: snake_case members, base64
    ids, the span's attributes JSON-encoded, its events' attributes plain."""
    return {"info": {"trace_id": "tr-0"}, "data": {"spans": [{
        "trace_id": _b64(span.context.trace_id, 16),
        "span_id": _b64(span.context.span_id, 8),
        "parent_span_id": None if span.parent is None else _b64(span.parent.span_id, 8),
        "name": span.name, "start_time_unix_nano": span.start_time,
        "end_time_unix_nano": span.end_time,
        "events": [{"name": e.name, "time_unix_nano": e.timestamp,
                    "attributes": {k: _mlflow_stored(v) for k, v in attrs(e).items()}}
                   for e in span.events],
        "status": {"code": "STATUS_CODE_UNSET", "message": ""},
        "attributes": {k: json.dumps(_mlflow_stored(v)) for k, v in attrs(span).items()},
        "links": []} for span in spans]}}


@dataclass
class _Event:
    name: str
    timestamp: int
    attributes: dict[str, Any]


@dataclass
class _Span:
    """Stands in for ``mlflow.entities.Span``: the members the reader uses."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    start_time_ns: int
    end_time_ns: int
    attributes: dict[str, Any]
    events: list[_Event] = field(default_factory=list)


@dataclass
class _Data:
    spans: list[_Span]


@dataclass
class _Trace:
    data: _Data


def mlflow_trace_objects(spans: tuple[ReadableSpan, ...]) -> list[_Trace]:
    """The spans as ``mlflow.search_traces(return_type="list")`` gives them: Trace
    objects whose spans hold MLflow's decoded attribute values and ``tr-`` trace ids."""
    traces: dict[int, list[_Span]] = {}
    for span in spans:
        assert span.start_time is not None
        assert span.end_time is not None
        traces.setdefault(span.context.trace_id, []).append(_Span(
            name=span.name, trace_id=f"tr-{span.context.trace_id:032x}",
            span_id=format(span.context.span_id, "016x"),
            parent_id=None if span.parent is None else format(span.parent.span_id, "016x"),
            start_time_ns=span.start_time, end_time_ns=span.end_time,
            attributes={k: _mlflow_stored(v) for k, v in attrs(span).items()},
            events=[_Event(e.name, e.timestamp, {k: _mlflow_stored(v)
                                                 for k, v in attrs(e).items()})
                    for e in span.events]))
    return [_Trace(_Data(listed)) for listed in traces.values()]


@pytest.mark.parametrize("tier", TIERS)
def test_mlflow_batch_get_to_json_and_trace_objects_rebuild_the_reports(tier: str) -> None:
    """MLflow's three forms (batchGet JSON, Trace.to_json(), Trace objects), with
    what MLflow does to values (JSON-valid strings read as JSON, the to_json
    attributes JSON-encoded): each run equals the in-process report, except where
    MLflow turned an item's text into a number (the content "42" at Full), which the
    digest catches and the report names."""
    spans, reports = _runs(tier)
    forms = {
        "batchGet": read_trace(json.dumps(mlflow_batch_get(spans))),
        "batchGet (library)": runs_from_spans(spans_from_mlflow_json(
            json.dumps(mlflow_batch_get(spans)))),
        "to_json": read_trace(json.dumps(mlflow_to_json(spans))),
        "objects": runs_from_spans(spans_from_mlflow_traces(mlflow_trace_objects(spans))),
    }
    for form, runs in forms.items():
        assert len(runs) == len(reports), form
        for run, report in zip(runs, reports, strict=True):
            if run.report != report:
                assert tier == "Full", (form, run.report.incomplete)
                assert not run.is_complete, form
                assert any("digest" in problem for problem in run.report.incomplete), form
            else:
                assert run.verification.value == "verified", form
    assert [run.report for run in forms["batchGet"]][1] == reports[1]  # no "42" in it


def test_real_mlflow_answers_rebuild_the_report_they_were_sent_from() -> None:
    """Captured from MLflow 3.17.2: batchGet's JSON and Trace.to_json()."""
    report = (DATA / "mlflow-3.17.2-report.json").read_text(encoding="utf-8")
    for name in ("mlflow-3.17.2-batchget.json", "mlflow-3.17.2-trace-to-json.json"):
        (run,) = read_trace_file(DATA / name)
        assert run.report.to_json() == report, name
        assert run.verification.value == "verified"


@pytest.mark.parametrize(("document", "problem"), [
    ({"info": {}, "data": {"spans": [{"name": "a", "attributes": {"k": "not json"}}]}},
     r"trace.data.spans\[0\].attributes\['k'\]: must be JSON text"),
    ({"traces": [{"trace_info": {}, "spans": [{"name": "a", "span_id": "??"}]}]},
     r"trace.traces\[0\].spans\[0\].spanId: is neither 16 hex digits"),
    ({"traces": [{"trace_info": {}, "spans": 3}]}, r"trace.traces\[0\].spans: must be a JSON"),
])
def test_broken_mlflow_json_names_where_and_what_was_expected(document: dict[str, Any],
                                                              problem: str) -> None:
    """MLflow JSON with a wrong member: DecodeError naming it."""
    with pytest.raises(DecodeError, match=problem):
        read_trace(json.dumps(document))


def test_an_object_that_is_not_an_mlflow_trace_is_refused() -> None:
    """spans_from_mlflow_traces names the object that has no data.spans."""
    with pytest.raises(DecodeError, match=r"traces\[0\]: is not an mlflow Trace"):
        spans_from_mlflow_traces([object()])


# -- Jaeger v3 -------------------------------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("ids", ["hex", "base64"])
def test_jaeger_v3_results_one_or_streamed_rebuild_the_reports(tier: str, ids: str) -> None:
    """``GET /api/v3/traces/{id}``: ``{"result": OTLP/JSON}``, one object or a stream
    of them (one per line), hex or base64 ids."""
    spans, reports = _runs(tier)
    whole = json.dumps({"result": otlp_document(spans, ids=ids)})
    streamed = "\n".join(json.dumps({"result": otlp_document(spans[at:at + 4], ids=ids)})
                         for at in range(0, len(spans), 4))
    assert _rebuilt(whole) == reports
    assert _rebuilt(streamed) == reports
