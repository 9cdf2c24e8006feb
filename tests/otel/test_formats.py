"""Reading traces back from files: OTLP/JSON lines (the collector's file exporter),
Tempo's API (batches, base64 ids), OTLP protobuf and Jaeger's downloaded JSON all
rebuild the in-process reports; anything else is a DecodeError naming the problem."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import SpanLimits

from _mutating import json_paths, replaced_at
from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer, SelectionReport
from cupellation.exceptions import DecodeError
from cupellation.otel import (
    parse_trace,
    read_trace,
    read_trace_file,
    runs_from_spans,
    spans_from_jaeger_json,
    spans_from_otlp_json,
    spans_from_otlp_proto,
)

from ._support import attrs, jaeger_document, make_sdk, otlp_document, otlp_proto_bytes, run_both

BUDGET = ContextBudget(max_tokens=200, target_tokens=60)
ITEMS = [ContextItem("pinned", 5, pinned=True, tags=("sys",)),
         *(ContextItem(f"message {k}", 7 + k, tags=("t", f"n{k}"),
                       metadata={"k": k, "nested": {"ok": True}}) for k in range(12)),
         ContextItem("message 3", 10), ContextItem("neg", -1)]
PIPELINE = Pipeline(scorer=RecencyScorer(), budget=BUDGET)


def _two_runs(limits: Any = "unlimited", layout: str = "columns"
              ) -> tuple[Any, list[SelectionReport]]:
    sdk = make_sdk() if limits == "unlimited" else make_sdk(limits=limits)
    collector = sdk.collector("Full", layout=layout)
    tracer = sdk.tracer_provider.get_tracer("app")
    reports = []
    with tracer.start_as_current_span("agent"):
        for size in (len(ITEMS), 6):
            reports.append(run_both(PIPELINE, ITEMS[:size], BUDGET, collector).report)
    return sdk, reports


def _reports(path: Path) -> list[SelectionReport]:
    return [run.report for run in read_trace_file(path)]


def test_otlp_json_lines_as_the_collector_writes_them(tmp_path: Path) -> None:
    """One OTLP/JSON object per line (hex ids, int64 as strings), the spans of two
    runs spread over lines, a metrics line between them: both reports come back
    equal to the in-process ones."""
    sdk, reports = _two_runs()
    spans = sdk.spans
    lines = [json.dumps(otlp_document(spans[:4])),
             json.dumps({"resourceMetrics": []}),
             "",
             json.dumps(otlp_document(spans[4:]))]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _reports(path) == reports


@pytest.mark.parametrize("shape", ["batches", "trace", "instrumentationLibrarySpans"])
def test_tempo_shapes_with_base64_ids(tmp_path: Path, shape: str) -> None:
    """What Tempo's trace API returns: batches instead of resourceSpans, a trace
    wrapper, the old instrumentationLibrarySpans key, base64 ids."""
    sdk, reports = _two_runs()
    document = otlp_document(sdk.spans, ids="base64",
                             key="batches" if shape == "batches" else "resourceSpans")
    if shape == "trace":
        document = {"trace": document}
    if shape == "instrumentationLibrarySpans":
        resource = document["resourceSpans"][0]
        resource["instrumentationLibrarySpans"] = resource.pop("scopeSpans")
    path = tmp_path / "tempo.json"
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    assert _reports(path) == reports
    assert [r.report for r in runs_from_spans(spans_from_otlp_json(document))] == reports


def test_gzip_trace_files_are_read_as_their_content(tmp_path: Path) -> None:
    """A gzip-compressed OTLP/JSON lines file and a gzip-compressed protobuf file
    rebuild the same reports as the plain files; a truncated gzip file is a
    ``DecodeError`` naming the file, never a raw ``EOFError``."""
    sdk, reports = _two_runs()
    spans = sdk.spans
    path = tmp_path / "traces.jsonl.gz"
    path.write_bytes(gzip.compress(
        (json.dumps(otlp_document(spans[:4])) + "\n" + json.dumps(otlp_document(spans[4:]))
         + "\n").encode()))
    assert _reports(path) == reports
    proto = tmp_path / "traces.pb.gz"
    proto.write_bytes(gzip.compress(otlp_proto_bytes(spans)))
    assert _reports(proto) == reports
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(path.read_bytes()[:40])
    with pytest.raises(DecodeError) as caught:
        read_trace_file(cut)
    assert str(cut) in str(caught.value)
    assert "gzip" in str(caught.value)


def test_otlp_protobuf_single_and_length_prefixed(tmp_path: Path) -> None:
    """OTLP protobuf bytes (a TracesData), and a file of such messages each preceded
    by a 4-byte big-endian length, both rebuild the reports."""
    sdk, reports = _two_runs()
    spans = sdk.spans
    single = otlp_proto_bytes(spans)
    assert [r.report for r in runs_from_spans(spans_from_otlp_proto(single))] == reports
    path = tmp_path / "traces.pb"
    path.write_bytes(single)
    assert _reports(path) == reports
    framed = b"".join(len(chunk).to_bytes(4, "big") + chunk
                      for chunk in (otlp_proto_bytes(spans[:3]), otlp_proto_bytes(spans[3:])))
    path.write_bytes(framed)
    assert _reports(path) == reports


def test_jaeger_download_json(tmp_path: Path) -> None:
    """Jaeger's "Download JSON": tags, logs named by their event field, lists as JSON
    text, microsecond times; the reports (exact stage durations included) come back."""
    sdk, reports = _two_runs()
    document = jaeger_document(sdk.spans)
    path = tmp_path / "jaeger.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert _reports(path) == reports
    single = document["data"][0]
    assert [r.report for r in runs_from_spans(spans_from_jaeger_json(single))] == reports


def test_jaeger_dropped_events_tag_makes_the_report_incomplete(tmp_path: Path) -> None:
    """A span that lost events says so in Jaeger as otel.dropped_events_count: the
    rebuilt report names the loss."""
    sdk, _ = _two_runs(limits=SpanLimits(max_events=3), layout="events")
    path = tmp_path / "jaeger.json"
    path.write_text(json.dumps(jaeger_document(sdk.spans)), encoding="utf-8")
    first = read_trace_file(path)[0]
    assert any("lost" in p and "events" in p for p in first.report.incomplete)


def test_the_rebuilt_run_carries_its_ids_and_events(tmp_path: Path) -> None:
    """read_trace_file gives each run's id, trace id and events beside its report."""
    sdk, _ = _two_runs()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(otlp_document(sdk.spans)), encoding="utf-8")
    runs = read_trace_file(path)
    roots = sorted(sdk.by_name("cupel.pipeline"), key=lambda s: s.start_time or 0)
    assert [r.run_id for r in runs] == [attrs(s)["cupel.run.id"] for s in roots]
    assert {r.trace_id for r in runs} == {format(roots[0].context.trace_id, "032x")}
    assert runs[0].events[0].seq == 0
    assert runs[0].is_complete


@pytest.mark.parametrize(("content", "message"), [
    (b"", "is empty"),
    (b"   \n", "is empty"),
    (b'{"foo": 1}', "is not a trace: expected OTLP/JSON"),
    (b'[{"foo": 1}]', "is not a trace: expected OTLP/JSON"),
    (b'{"data": {"spans": []}}', "must be a JSON array"),
    (b'{"data": [{"foo": 1}]}', "has no spans"),
    (b'{"data": [{"traceID": "1", "spans": [{"operationName": "x", "tags": 3}]}]}',
     "data[0].spans[0].tags"),
    (b'{"data": [{"traceID": "1", "spans": [{"operationName": "x", "tags": [{"key": "a",'
     b' "type": "int64", "value": "x"}]}]}]}', "must be an integer"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]}', "spans[0].name"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "a", "traceId": "zz"}]}]}]}',
     "traceId"),
    (b'{"resourceSpans": []}\n{"resourceSpans": [}\n', "line 2"),
    (b'{"resourceSpans": []}\n[1]\n', "line 2"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "GET /"}]}]}]}',
     "hold no cupellation run"),
    (b"hello, world", "not OTLP protobuf"),
    (b"\xff\xfe\x00garbage", "not OTLP protobuf"),
])
def test_files_that_are_not_traces_are_refused_with_the_reason(
        tmp_path: Path, content: bytes, message: str) -> None:
    """Empty files, other JSON, Jaeger or OTLP of another shape, a bad line, no
    cupellation spans, bytes that are not OTLP: each a DecodeError saying why."""
    path = tmp_path / "bad.trace"
    path.write_bytes(content)
    with pytest.raises(DecodeError, match=message.replace("[", r"\[").replace(".", r"\.")):
        read_trace_file(path)


def test_without_opentelemetry_proto_the_error_names_the_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading protobuf without the opentelemetry-proto package: an ImportError (and,
    through parse_trace, a DecodeError) naming pip install 'cupellation[otlp]'."""
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.trace.v1", None)
    with pytest.raises(ImportError, match=r"cupellation\[otlp\]"):
        spans_from_otlp_proto(b"\x0a\x00")
    with pytest.raises(DecodeError, match=r"cupellation\[otlp\]"):
        parse_trace(b"\x0a\x00\xff")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_give_a_decode_error_and_nothing_else(data: bytes) -> None:
    """Random bytes are never mistaken for a trace and never raise anything but a
    DecodeError."""
    with pytest.raises(DecodeError):
        read_trace(data)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6)


@pytest.fixture(scope="module")
def documents() -> dict[str, Any]:
    """One small traced run as OTLP/JSON and as Jaeger JSON."""
    sdk = make_sdk()
    run_both(PIPELINE, ITEMS[:5], BUDGET, sdk.collector("Full"))
    return {"otlp": otlp_document(sdk.spans), "jaeger": jaeger_document(sdk.spans)}


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["otlp", "jaeger"]), st.data())
def test_damaged_documents_decode_or_fail_cleanly(documents: dict[str, Any], kind: str,
                                                  data: st.DataObject) -> None:
    """A real trace with any one node replaced by arbitrary JSON: decoding gives runs
    (complete or saying what is missing) or a DecodeError, never another exception."""
    document = documents[kind]
    paths = json_paths(document)
    path = data.draw(st.sampled_from(paths))
    damaged = replaced_at(document, path, data.draw(_JSON))
    try:
        runs = runs_from_spans(parse_trace(json.dumps(damaged)))
    except DecodeError:
        return
    for run in runs:
        assert isinstance(run.report, SelectionReport)
