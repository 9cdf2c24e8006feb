"""Traces in the fleet store: OTLP/JSON trace files load into ``otel_traces`` as the
Collector's ``clickhouse`` exporter writes spans (idempotently), and runs found only
there come back through the span decoder, equal to the runs rebuilt from the files;
a run in both tables is read from its logs."""

from __future__ import annotations

import gzip
import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cupellation.cli import main
from cupellation.events import RunStarted
from cupellation.logs import read_runs
from cupellation.otel import read_trace_file, spans_from_otlp_json
from cupellation.store import (
    RunQuery,
    Store,
    attribute_text,
    fleet_stats,
    keeps_run,
    open_store,
)

from ._traces import write_traced_runs


def _same_text(text: str, value: Any) -> bool:
    """A stored attribute string equals what pdata's AsString writes for ``value``
    (a double as the same number: ClickHouse writes ``1e21`` where Go writes ``1e+21``;
    a list as the same JSON)."""
    if type(value) is float:
        return math.isclose(float(text), value, rel_tol=0, abs_tol=0)
    if isinstance(value, list | tuple):
        return bool(json.loads(text) == list(value))
    return text == attribute_text(value)


def _fleet(tmp_path: Path) -> tuple[list[Path], int]:
    """Two services' trace files, one per layout, the second gzipped too (``.gz`` beside
    it); their span count."""
    columns, events = tmp_path / "columns.jsonl", tmp_path / "events.jsonl"
    count = write_traced_runs(columns, 11, 10, layout="columns", service="svc-a")
    count += write_traced_runs(events, 12, 10, layout="events", service="svc-b")
    zipped = tmp_path / "events.jsonl.gz"
    zipped.write_bytes(gzip.compress(events.read_bytes()))
    return [columns, zipped], count


def _check_rows(store: Store, path: Path, service: str) -> None:
    """Every span of ``path`` (plain or gzip) is one row holding what the exporter
    writes for it."""
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    lines = [line for line in text.splitlines() if line]
    spans = [span for line in lines for span in spans_from_otlp_json(line)]
    rows = {(str(r[0]), str(r[1])): r for r in store.session.rows(
        "SELECT TraceId, SpanId, ParentSpanId, SpanName, SpanKind, ServiceName, ScopeName, "
        "toUnixTimestamp64Nano(Timestamp), Duration, StatusCode, SpanAttributes, "
        "`Events.Name`, `Events.Attributes` FROM " + store.session.table("otel_traces"))}
    for span in spans:
        row = rows[(span.trace_id or "", span.span_id or "")]
        assert row[2:7] == (span.parent_span_id or "", span.name, "SPAN_KIND_INTERNAL",
                            service, "cupellation")
        assert (row[7], row[8]) == (span.start_ns, (span.end_ns or 0) - (span.start_ns or 0))
        failed = span.name == "cupel.pipeline" and span.attributes.get(
            "cupel.run.outcome") == "failed"
        assert row[9] == ("STATUS_CODE_ERROR" if failed else "STATUS_CODE_UNSET")
        stored = dict(row[10])
        assert stored.keys() == span.attributes.keys()
        assert all(_same_text(stored[k], v) for k, v in span.attributes.items()), span.name
        assert list(row[11]) == [event.name for event in span.events]
        for attributes, event in zip(row[12], span.events, strict=True):
            assert all(_same_text(dict(attributes)[k], v) for k, v in event.attributes.items())


def test_trace_files_load_as_the_exporter_writes_spans_and_read_back_equal(
        store: Store, tmp_path: Path) -> None:
    """Both layouts' trace files (one gzipped) load one row per span, as the exporter
    writes them (ids, kind, status, service, times, attributes as AsString strings,
    events); loading them again (streamed, as to a server) adds nothing; and every
    run read back from the store equals the run rebuilt from its file (report and
    digest verification), newest first."""
    files, span_count = _fleet(tmp_path)
    first = store.load(files)
    assert (first.spans_loaded, first.spans_skipped, first.loaded) == (span_count, 0, 0)
    assert (first.runs, first.damaged, first.other_lines) == (20, 0, 0)
    again = store.load(files, stream=True)  # the server's path: streamed through the client
    assert (again.spans_loaded, again.spans_skipped) == (0, span_count)
    _check_rows(store, files[0], "svc-a")
    _check_rows(store, files[1], "svc-b")
    expected = {run.run_id: run for path in (files[0], tmp_path / "events.jsonl")
                for run in read_trace_file(path)}
    got = list(store.read_runs())
    assert sorted(run.run_id for run in got) == sorted(expected)
    for run in got:
        assert run.report == expected[run.run_id].report, run.run_id
        assert run.verification == expected[run.run_id].verification
        assert run.verification.value == "verified"
    starts = [run.started_at for run in got]
    assert starts == sorted(starts, reverse=True)  # type: ignore[type-var]


def test_a_run_in_both_tables_is_read_from_its_logs_and_filters_hold_on_trace_runs(
        store: Store, tmp_path: Path) -> None:
    """Runs logged and traced are read from otel_logs (a row deleted from the logs
    makes that run incomplete although its spans are whole); runs only traced come
    from otel_traces; the run filters keep from the store exactly the runs they keep
    from the files (session, reason, kind and policy; the service)."""
    audit, both, only = tmp_path / "audit.jsonl", tmp_path / "both.jsonl", tmp_path / "only.jsonl"
    write_traced_runs(both, 21, 8, layout="columns", service="both", audit=audit)
    write_traced_runs(only, 22, 8, layout="events", service="traces-only")
    whole = {run.run_id: run for run in read_runs(str(audit))}
    victim = next(run_id for run_id, run in whole.items() if run.report.excluded)
    lines = audit.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(k for k, line in enumerate(lines) if victim in line and "item_excluded" in line)
    audit.write_text("".join(lines[:cut] + lines[cut + 1:]), encoding="utf-8")
    store.load([audit, both, only])
    logged = list(read_runs(str(audit)))
    traced = {run.run_id: run for run in read_trace_file(only)}
    read = {run.run_id: run for run in store.read_runs()}
    assert read.keys() == {run.run_id for run in logged} | traced.keys()
    from_spans = {run.run_id: run for run in read_trace_file(both)}[victim]
    assert from_spans.report == whole[victim].report  # the spans hold the whole run
    assert not read[victim].report.is_complete  # but its logs are read
    assert all(read[run.run_id].report == run.report for run in logged)
    assert all(read[run_id].report == run.report for run_id, run in traced.items())
    files = logged + [read[run_id] for run_id in traced]
    for query in (RunQuery(session_id="s-1"), RunQuery(reason="BudgetExceeded"),
                  RunQuery(kind="Document"), RunQuery(strategy="greedy")):
        wanted = {run.run_id for run in files if keeps_run(run, query)}
        found = {run.run_id for run in store.read_runs(query)}
        assert found == wanted, query
        assert wanted & traced.keys(), query  # the trace runs are put to the test
    assert {run.run_id for run in store.read_runs(RunQuery(services=("traces-only",)))} == (
        traced.keys())
    stats = fleet_stats(store)
    assert stats.runs == len(logged)
    assert stats.trace_only_runs == len(traced)  # said, not silently left out
    assert fleet_stats(store, services=("both",)).trace_only_runs == 0
    starts = sorted(next(event.started_at for event in run.events
                         if isinstance(event, RunStarted)) for run in traced.values())
    middle = starts[2] + (starts[3] - starts[2]) / 2
    assert starts[3] - starts[2] > timedelta(milliseconds=1), starts
    assert fleet_stats(store, since=middle).trace_only_runs == len(traced) - 3
    assert fleet_stats(store, until=middle).trace_only_runs == 3


@pytest.mark.slow
def test_store_load_and_accelerate_on_the_command_line(
        store_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``store load`` takes a trace file (JSON counts of spans), ``report --store --run``
    prints the report ``report TRACEFILE --run`` prints, ``store accelerate`` adds the
    run id's index to otel_traces and exits 0 again when all is there; a trace that is
    not OTLP/JSON lines is refused in one line (exit 2)."""
    url = f"chdb://{store_dir}?database=cli_traces"
    trace = tmp_path / "trace.jsonl"
    write_traced_runs(trace, 31, 3, layout="columns", service="cli")
    run_id = read_trace_file(trace)[-1].run_id
    assert main(["store", "load", str(trace), "--into", url, "--format", "json"]) == 0
    loaded = json.loads(capsys.readouterr().out)
    assert loaded["spans_loaded"] > 0
    assert loaded["runs"] == 3
    assert main(["report", str(trace), "--run", run_id, "--format", "json"]) == 0
    from_file = capsys.readouterr().out
    assert main(["report", "--store", url, "--run", run_id, "--format", "json"]) == 0
    assert capsys.readouterr().out == from_file
    with open_store(url) as opened:
        opened.session.command(f"ALTER TABLE {opened.session.table('otel_traces')} "
                               "DROP INDEX idx_cupel_span_run_id")
    assert main(["store", "accelerate", "--into", url, "--format", "json"]) == 0
    statements = json.loads(capsys.readouterr().out)["statements"]
    assert any("idx_cupel_span_run_id" in statement for statement in statements)
    assert main(["store", "accelerate", "--into", url]) == 0  # again: nothing to do
    capsys.readouterr()
    with open_store(url) as opened:
        assert ("idx_cupel_span_run_id",) in opened.session.rows(
            "SELECT name FROM system.data_skipping_indices WHERE database = 'cli_traces' "
            "AND table = 'otel_traces'")
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(trace.read_text().splitlines()[0]), indent=1))
    assert main(["store", "load", str(pretty), "--into", url]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "not OTLP/JSON lines" in err[0]
