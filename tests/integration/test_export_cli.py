"""``cupellation export``: the command line over replay, to a file and to OTLP
backends (fake ones here; Phoenix in test_phoenix_pipeline.py), with its exit
statuses."""

from __future__ import annotations

import argparse
import json
import time
from datetime import timedelta
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from cupellation.cli import _export, main
from cupellation.logs import AuditLog
from cupellation.otel import read_trace_file, spans_from_otlp_json
from cupellation_exporters import spans_from_events

from .fake_otlp import FakeGrpcBackend, FakeHttpBackend, refused_endpoint
from .selections import Selection, run_selections, shifted


def _parser() -> argparse.ArgumentParser:
    """A top-level parser with only the export subcommand, wired as the CLI wires
    subcommand modules (``add_parser(subparsers)``, ``run(args)``)."""
    parser = argparse.ArgumentParser(prog="cupellation")
    subparsers = parser.add_subparsers(dest="command")
    _export.add_parser(subparsers).set_defaults(_run=_export.run)
    return parser


def _export_cli(*argv: str) -> int:
    """``cupellation export ARGV`` through the command's own entry, ``main``."""
    return main(["export", *argv])


@pytest.fixture(scope="module")
def selections() -> list[Selection]:
    """Twelve recorded runs, one failed."""
    return run_selections(12, "export-cli")


@pytest.fixture
def audit(tmp_path: Path, selections: list[Selection]) -> Path:
    """An audit log of the runs, started a week ago."""
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        for selection in selections:
            log.record(shifted(selection.events["Full"], timedelta(days=-7)))
    return path


def _received_spans(fake: FakeHttpBackend | FakeGrpcBackend) -> list[ProtoSpan]:
    return [span for item in fake.received
            for resource in item.trace_request().resource_spans
            for scope in resource.scope_spans for span in scope.spans]


def test_the_module_offers_what_the_cli_table_expects() -> None:
    """add_parser/run are the add_export_parser/run_export the brief names, and the
    parser is registered under "export"."""
    assert _export.add_parser is _export.add_export_parser
    assert _export.run is _export.run_export
    args = _parser().parse_args(["export", "x.jsonl", "--to", "otlp"])
    assert args.command == "export"
    assert (args.tier, args.protocol, args.endpoint, args.content_capture) == (
        "Full", None, None, None)


def test_to_a_file_and_back(audit: Path, tmp_path: Path, selections: list[Selection],
                            capsys: pytest.CaptureFixture[str]) -> None:
    """--to file writes OTLP/JSON lines from which cupellation.otel rebuilds every run's
    report; re-exporting that file (a trace file) to another gives the same spans,
    ids and times included; the summary goes to standard error."""
    out = tmp_path / "traces.jsonl"
    assert _export_cli(str(audit), "--to", "file", "--out", str(out),
                       "--content-capture", "full") == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"exported {len(selections)} run(s)" in captured.err
    runs = read_trace_file(out)
    assert [run.run_id for run in runs] == [s.run_id for s in selections]
    for run, selection in zip(runs, selections, strict=True):
        assert run.report == selection.reports["Full"]
    again = tmp_path / "again.jsonl"
    assert _export_cli(str(out), "--to", "file", "--out", str(again)) == 0
    assert "1 trace file(s)" in capsys.readouterr().err

    def identities(path: Path) -> list[tuple[object, ...]]:
        return sorted((s.trace_id, s.span_id, s.parent_span_id, s.start_ns, s.end_ns,
                       dict(s.attributes))
                      for s in spans_from_otlp_json(path.read_text(encoding="utf-8")))

    assert identities(again) == identities(out)


def test_to_standard_output_at_a_lower_tier(audit: Path, selections: list[Selection],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """--out - writes the lines to standard output; --tier StageOnly leaves out every
    item event; without --content-capture (and CUPELLATION_CAPTURE_CONTENT) item
    content is not sent."""
    assert _export_cli(str(audit), "--to", "file", "--out", "-", "--tier", "StageOnly") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines
    spans = [span for line in lines for span in spans_from_otlp_json(line)]
    assert len(spans) == sum(len(spans_from_events(s.events["Full"], tier="StageOnly"))
                             for s in selections)
    assert all(event.name not in ("cupel.exclusion", "cupel.item.included")
               for span in spans for event in span.events)
    roots = [span for span in spans if span.name == "cupel.pipeline"]
    assert {root.attributes["cupel.verbosity"] for root in roots} == {"StageOnly"}


def test_content_is_left_out_unless_asked_for(audit: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """By default (as for SpanCollector) no item content leaves the process;
    CUPELLATION_CAPTURE_CONTENT=hash sends digests."""
    out = tmp_path / "none.jsonl"
    assert _export_cli(str(audit), "--to", "file", "--out", str(out), "--quiet") == 0
    text = out.read_text(encoding="utf-8")
    assert "cupel.item.content" not in text  # neither an attribute nor a column
    monkeypatch.setenv("CUPELLATION_CAPTURE_CONTENT", "hash")
    hashed = tmp_path / "hash.jsonl"
    assert _export_cli(str(audit), "--to", "file", "--out", str(hashed), "--quiet") == 0
    # The columns' JSON text (and output.value) hold each content's digest.
    assert '\\"cupel.item.content\\":[\\"sha256:' in hashed.read_text(encoding="utf-8")


def test_to_an_otlp_http_backend(audit: Path, selections: list[Selection],
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--to otlp over HTTP sends every span (the endpoint from
    OTEL_EXPORTER_OTLP_ENDPOINT, a --header, the --service-name), with the runs'
    own start times; exit 0; standard error names each run's trace."""
    with FakeHttpBackend() as fake:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", fake.endpoint)
        assert _export_cli(str(audit), "--to", "otlp", "--header", "X-Project-Name=replay",
                           "--service-name", "replayer", "--content-capture", "full") == 0
        spans = _received_spans(fake)
        request = fake.received[0]
    assert request.headers["x-project-name"] == "replay"
    resource = {kv.key: kv.value.string_value
                for kv in request.trace_request().resource_spans[0].resource.attributes}
    assert resource["service.name"] == "replayer"
    roots = {span.trace_id.hex(): span for span in spans if span.name == "cupel.pipeline"}
    assert len(roots) == len(selections)
    starts = sorted(root.start_time_unix_nano for root in roots.values())
    week_ago = [int((s.started.started_at - timedelta(days=7)).timestamp() * 1e6) * 1000
                for s in selections]
    assert all(abs(a - b) <= 1000 for a, b in zip(starts, sorted(week_ago), strict=True))
    err = capsys.readouterr().err
    assert f"to {fake.endpoint} (http/protobuf)" in err
    # From the command to each trace: its id, the run's, and the command reading it back
    # (the header named, its value not shown).
    for trace_id, root in list(roots.items())[:5]:
        run_id = next(kv.value.string_value for kv in root.attributes
                      if kv.key == "cupel.run.id")
        assert f"cupellation: sent run {run_id} as trace {trace_id} to " in err
        assert f"URL --trace {trace_id}" in err
    assert "headers (x-project-name," in err
    assert "=replay" not in err


def test_to_an_otlp_grpc_backend(audit: Path, selections: list[Selection]) -> None:
    """--protocol grpc --endpoint URL sends every span over gRPC."""
    with FakeGrpcBackend() as fake:
        assert _export_cli(str(audit), "--to", "otlp", "--protocol", "grpc",
                           "--endpoint", fake.endpoint, "--quiet") == 0
        spans = _received_spans(fake)
    assert sum(1 for span in spans if span.name == "cupel.pipeline") == len(selections)


@pytest.mark.parametrize("behaviour", ["refuse", "error", "down"])
def test_a_backend_that_does_not_take_the_spans_is_exit_3(
        audit: Path, behaviour: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A backend that refuses (400), fails (500) or is down makes the command say how
    many spans were not taken and exit 3, within the export timeout."""
    started = time.monotonic()
    if behaviour == "down":
        with refused_endpoint() as endpoint:
            status = _export_cli(str(audit), "--to", "otlp", "--endpoint", endpoint,
                                 "--timeout", "1", "--quiet")
    else:
        with FakeHttpBackend(behaviour) as fake:  # type: ignore[arg-type]
            status = _export_cli(str(audit), "--to", "otlp", "--endpoint", fake.endpoint,
                                 "--timeout", "1", "--quiet")
    assert status == _export.EXPORT_FAILED == 3
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    # The SDK gives up on its own (the count of spans not taken), or, on a loaded
    # machine, its retries outlast --timeout and the command gives up first.
    assert "NOT taken" in err or (
        "did not finish within --timeout 1 s" in err and "not every span was taken" in err)


def test_nothing_to_export_is_exit_1(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A log with no cupellation run exits 1 and says so."""
    other = tmp_path / "app.log"
    other.write_text("starting\n{\"level\": \"info\"}\n", encoding="utf-8")
    assert _export_cli(str(other), "--to", "file", "--out", str(tmp_path / "o.jsonl")) == 1
    assert "no run found" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["--to", "file"], "--out"),
    (["--to", "file", "--out", "o.jsonl", "--protocol", "grpc"], "--to otlp only"),
    (["--to", "otlp", "--out", "o.jsonl"], "--to file only"),
    (["--to", "otlp", "--header", "novalue"], "KEY=VALUE"),
    (["--to", "otlp", "--timeout", "0"], "--timeout"),
    (["--to", "otlp", "--timeout", "-1"], "--timeout"),
    (["--to", "otlp", "--timeout", "inf"], "--timeout"),
    (["--to", "otlp", "--timeout", "nan"], "--timeout"),
    (["--to", "otlp", "--timeout", "1e-300"], "--timeout"),
    (["--to", "otlp", "--timeout", "86401"], "--timeout"),
    (["--to", "otlp", "--timeout", "soon"], "--timeout"),
])
def test_usage_errors_are_exit_2(audit: Path, argv: list[str], message: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Inconsistent options are one line on standard error and exit 2."""
    assert _export_cli(str(audit), *argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_unreadable_sources_are_exit_2(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A missing file, a folder and a broken trace file exit 2 naming the file."""
    out = str(tmp_path / "o.jsonl")
    assert _export_cli(str(tmp_path / "missing.jsonl"), "--to", "file", "--out", out) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    assert _export_cli(str(tmp_path), "--to", "file", "--out", out) == 2
    assert "directory" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "not hex", "spanId": "00"}]}]}]}), encoding="utf-8")
    assert _export_cli(str(broken), "--to", "file", "--out", out) == 2
    assert "broken.json" in capsys.readouterr().err
    assert _export_cli(str(broken), "--to", "file", "--out",
                       str(tmp_path / "no" / "dir.jsonl")) == 2
    assert "cannot write" in capsys.readouterr().err
