"""``--otlp``: spans and metrics sent over OTLP/HTTP to the endpoint the standard
environment variables name (here a local receiver), the providers shut down before
exit, one line when the export fails, and exit 2 without cupellation-exporters."""

from __future__ import annotations

import gzip
import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli_support import BUDGET, Result, assert_one_line_error, cli

from cupellation import SelectionReport
from cupellation.cli._tracelinks import trace_lines
from cupellation.otel import reports_from_spans, spans_from_otlp_proto

ITEMS = json.dumps([{"content": "sys", "tokens": 3, "kind": "SystemPrompt", "pinned": True},
                    {"content": "question", "tokens": 4, "timestamp": "2024-01-01T00:00:00Z"},
                    {"content": "too big", "tokens": 900}])


class _Receiver(http.server.BaseHTTPRequestHandler):
    """Records every OTLP request body by path and answers 200."""

    bodies: dict[str, list[bytes]]

    def do_POST(self) -> None:
        """Keep the (decompressed) body."""
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.bodies.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def receiver() -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    """A local OTLP/HTTP receiver: its base URL and the bodies it got, by path."""
    bodies: dict[str, list[bytes]] = {}
    handler = type("Handler", (_Receiver,), {"bodies": bodies})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_select_otlp_sends_the_run_to_the_configured_endpoint(
        tmp_path: Path, receiver: tuple[str, dict[str, list[bytes]]]) -> None:
    """With OTEL_EXPORTER_OTLP_ENDPOINT set, ``select --otlp`` exports its spans
    (Full tier, content by CUPELLATION_CAPTURE_CONTENT=full) before it exits, and
    metrics only when OTEL_METRICS_EXPORTER names otlp; the spans rebuild to the report
    it wrote."""
    url, bodies = receiver
    source = tmp_path / "items.json"
    source.write_text(ITEMS)
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "CUPELLATION_CAPTURE_CONTENT": "full",
           "OTEL_SERVICE_NAME": "cli-test"}
    result = cli("select", source, *BUDGET, "--policy", "rag", "--otlp", "--report",
                 tmp_path / "r.json", env=env)
    assert result.code == 0, result.err
    assert "/v1/traces" in bodies
    assert "/v1/metrics" not in bodies
    spans = [span for body in bodies["/v1/traces"] for span in spans_from_otlp_proto(body)]
    assert {span.name for span in spans} >= {"cupel.pipeline", "cupel.stage.slice"}
    written = SelectionReport.from_json((tmp_path / "r.json").read_text())
    assert reports_from_spans(spans) == [written]
    (root,) = (span for span in spans if span.name == "cupel.pipeline")
    trace_id = root.trace_id
    assert result.err_lines == [
        f"cupellation: sent run {root.attributes['cupel.run.id']} as trace {trace_id} to "
        f"{url}",
        "  read it back: cupellation report --from phoenix|mlflow|jaeger|tempo URL "
        f"--trace {trace_id}  (URL: the backend's base URL)"]
    result = cli("select", source, *BUDGET, "--policy", "rag", "--otlp",
                 env={**env, "OTEL_METRICS_EXPORTER": "otlp"})
    assert result.code == 0, result.err
    assert "/v1/metrics" in bodies


def test_demo_otlp_sends_too(tmp_path: Path,
                             receiver: tuple[str, dict[str, list[bytes]]]) -> None:
    """``demo --otlp`` sends its run as well as writing its trace file."""
    url, bodies = receiver
    result = cli("demo", "--quiet", "--otlp", "--out", tmp_path,
                 env={"OTEL_EXPORTER_OTLP_ENDPOINT": url})
    assert result.code == 0, result.err
    spans = [span for body in bodies["/v1/traces"] for span in spans_from_otlp_proto(body)]
    assert sum(span.name == "cupel.pipeline" for span in spans) == 1


def test_unreachable_endpoint_is_one_warning_line(tmp_path: Path) -> None:
    """Nothing listening: the selection still succeeds (status 0, items on stdout) and
    stderr has one warning naming the endpoint and the dropped spans, no traceback."""
    source = tmp_path / "items.json"
    source.write_text(ITEMS)
    result = cli("select", source, *BUDGET, "--policy", "rag", "--otlp",
                 env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                      "OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
    assert result.code == 0
    assert json.loads(result.out)
    assert "Traceback" not in result.err
    assert len(result.err_lines) == 1, result.err
    assert result.err_lines[0].startswith("cupellation: warning: --otlp: export to "
                                          "http://127.0.0.1:9 failed (")


def test_otlp_without_cupellation_exporters_exits_2_with_the_install_line(
        tmp_path: Path) -> None:
    """When cupellation_exporters cannot be imported, ``--otlp`` exits 2 with one line
    saying how to install it, before reading the input or writing anything."""
    source = tmp_path / "items.json"
    source.write_text(ITEMS)
    code = ("import sys; sys.modules['cupellation_exporters'] = None; "
            "from cupellation.cli import main; raise SystemExit(main(sys.argv[1:]))")
    for argv in (["select", str(source), *BUDGET, "--otlp", "--out", str(tmp_path / "o")],
                 ["demo", "--otlp", "--out", str(tmp_path / "o")]):
        done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                              text=True, check=False)
        assert_one_line_error(Result(done.returncode, done.stdout, done.stderr), 2,
                              "pip install cupellation-exporters")
    assert not (tmp_path / "o").exists()


def test_bad_otlp_environment_is_one_warning_line(
        tmp_path: Path, receiver: tuple[str, dict[str, list[bytes]]]) -> None:
    """An OTLP setting the SDK rejects while setting up (an unknown compression) does
    not fail the selection: one warning line naming it, nothing printed raw."""
    url, _ = receiver
    source = tmp_path / "items.json"
    source.write_text(ITEMS)
    result = cli("select", source, *BUDGET, "--policy", "rag", "--otlp",
                 env={"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd-ish",
                      "OTEL_EXPORTER_OTLP_ENDPOINT": url})
    assert result.code == 0, result.err
    assert len(result.err_lines) == 1, result.err
    assert result.err_lines[0].startswith("cupellation: warning: --otlp:")
    assert "zstd-ish" in result.err_lines[0]


def test_trace_lines_name_the_backend_its_page_and_never_a_credential() -> None:
    """After sending: Phoenix (port 6006) gets its report --from command (with the
    project the resource names) and its /redirects/traces page; MLflow (its experiment
    header) gets --experiment and its traces page; a credential header is named, its
    value never printed; more than five runs are counted, not listed."""
    trace = "0af7651916cd43dd8448eb211c80319c"
    phoenix = trace_lines("http://localhost:6006/v1/traces", [(trace, "run-1")], environ={
        "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=agents",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20s3cret"})
    assert phoenix[:3] == [
        f"cupellation: sent run run-1 as trace {trace} to http://localhost:6006/v1/traces",
        f"  read it back: cupellation report --from phoenix http://localhost:6006 --trace "
        f"{trace} --project agents",
        f"  open it:      http://localhost:6006/redirects/traces/{trace}"]
    assert "authorization" in phoenix[3]
    assert "s3cret" not in "\n".join(phoenix)
    mlflow = trace_lines("http://127.0.0.1:5000/v1/traces", [(trace, "run-2")],
                         headers={"x-mlflow-experiment-id": "7"}, environ={})
    assert mlflow[1:] == [
        f"  read it back: cupellation report --from mlflow http://127.0.0.1:5000 --trace "
        f"{trace} --experiment 7",
        f"  open it:      http://127.0.0.1:5000/#/experiments/7/traces"
        f"?selectedEvaluationId=tr-{trace}"]
    many = trace_lines("http://h:4318", [(trace, f"r{k}") for k in range(7)], environ={})
    assert many[-1] == "cupellation: ... and 2 more run(s)"
    assert sum(line.startswith("cupellation: sent run") for line in many) == 5
