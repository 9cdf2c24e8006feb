"""``cupellation report --from BACKEND URL`` against stand-in servers answering as
Phoenix, MLflow, Jaeger and Tempo document: pages followed and merged, the selectors
and ids each takes, headers sent and never shown, and one line with exit 2 for an
unreachable backend, a refused request, an unknown project, experiment or trace."""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cupellation import SelectionReport
from cupellation.cli import main
from cupellation.exceptions import BackendError
from cupellation.otel import fetch_spans

from ._support import jaeger_document, otlp_document, otlp_proto_bytes
from .test_backend_formats import DATA, _runs, mlflow_batch_get, phoenix_otlpv1_spans

Route = Callable[[str, dict[str, list[str]], bytes], tuple[int, Any]]


class Backend:
    """A stand-in HTTP server: ``routes`` map a path to what it answers (status, JSON
    or bytes); every request is kept (path, query, headers)."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = []
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(parts.query)
                size = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(size) if size else b""
                # Header names as sent, read case-insensitively (lowercased here).
                backend.requests.append((parts.path, query, {
                    name.lower(): value for name, value in self.headers.items()}))
                route = backend.routes.get(parts.path)
                status, payload = route(parts.path, query, body) if route else (404, "nope")
                data = payload if isinstance(payload, bytes) else (
                    payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
                self.send_response(status)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def backend() -> Iterator[Backend]:
    """A stand-in backend on a free port, stopped after the test."""
    server = Backend()
    yield server
    server.close()


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _json_report(out: str) -> SelectionReport:
    return SelectionReport.from_json(out)


def _phoenix_pages(listed: list[dict[str, Any]], size: int) -> Route:
    """Phoenix's otlpv1 endpoint over ``listed``: pages of ``size`` with cursors,
    trace_id and attribute filters, 404 for another project."""
    def route(path: str, query: dict[str, list[str]], body: bytes) -> tuple[int, Any]:
        chosen = listed
        if "trace_id" in query:
            chosen = [s for s in chosen if s["trace_id"] == query["trace_id"][0]]
        if "attribute" in query:
            key, _, value = query["attribute"][0].partition(":")
            chosen = [s for s in chosen if any(
                a["key"] == key and a["value"]["string_value"] == value
                for a in s["attributes"])]
        at = int(query.get("cursor", ["0"])[0])
        page = chosen[at:at + size]
        more = at + size < len(chosen)
        return 200, {"data": page, "next_cursor": str(at + size) if more else None}
    return route


def test_phoenix_pages_are_followed_and_a_run_is_found_by_its_id(
        backend: Backend, capsys: pytest.CaptureFixture[str]) -> None:
    """--since reads every page (cursor after cursor) and shows the last run; --run
    finds the run's traces by its cupel.run.id, then reads them whole; each report
    equals the in-process one; the header goes with every request."""
    spans, reports = _runs("Full")
    backend.routes["/v1/projects/proj/spans/otlpv1"] = _phoenix_pages(
        phoenix_otlpv1_spans(spans), 4)
    code, out, err = _report(["--from", "phoenix", backend.url, "--project", "proj",
                              "--since", "1d", "--format", "json",
                              "--header", "authorization:Bearer s3cret"], capsys)
    assert code == 0, err
    assert _json_report(out) == reports[-1]
    cursors = [q.get("cursor") for p, q, _ in backend.requests]
    assert cursors[0] is None
    assert len(cursors) == -(-len(spans) // 4)
    assert all(h.get("authorization") == "Bearer s3cret" for _, _, h in backend.requests)
    assert "s3cret" not in err
    run_id = reports[0].events and _run_id(spans, 0)
    code, out, err = _report(["--from", "phoenix", backend.url, "--project", "proj",
                              "--run", str(run_id), "--format", "json"], capsys)
    assert code == 0, err
    assert _json_report(out) == reports[0]


def _run_id(spans: Any, index: int) -> str:
    roots = sorted((s for s in spans if s.name == "cupel.pipeline"),
                   key=lambda s: s.start_time)
    return str(roots[index].attributes["cupel.run.id"])


@pytest.mark.parametrize(("status", "expected"), [
    (401, "refused the request (HTTP 401): give its credentials with --header"),
    (403, "refused the request (HTTP 403)"),
    (404, "has no project 'proj' (choose one with --project)"),
    (500, "answered HTTP 500"),
])
def test_a_refusal_or_an_unknown_project_is_one_line_and_exit_2(
        backend: Backend, capsys: pytest.CaptureFixture[str], status: int,
        expected: str) -> None:
    """401/403, an unknown project, a server error: exit 2, one line on standard
    error saying what happened, and the credential never in it."""
    backend.routes["/v1/projects/proj/spans/otlpv1"] = lambda *_: (status, "no")
    code, out, err = _report(["--from", "phoenix", backend.url, "--project", "proj",
                              "--since", "1h", "--header", "api_key=s3cret"], capsys)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert expected in err
    assert "s3cret" not in err


def test_an_unreachable_backend_or_tls_refused_is_one_line_and_exit_2(
        backend: Backend, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing listening, or https:// to a server that speaks plain HTTP (TLS by the
    URL's scheme): exit 2 and one line naming the backend and where."""
    stopped = Backend()
    closed = stopped.url
    stopped.close()
    for url in (closed, backend.url.replace("http://", "https://")):
        code, _, err = _report(["--from", "mlflow", url, "--trace",
                                "0af7651916cd43dd8448eb211c80319c", "--timeout", "2"], capsys)
        assert code == 2
        assert len(err.splitlines()) == 1
        assert "cannot reach mlflow at" in err


def test_mlflow_by_trace_id_hex_or_its_own_and_by_experiment_name(
        backend: Backend, capsys: pytest.CaptureFixture[str]) -> None:
    """MLflow: --trace as 32 hex digits or tr-..., batchGet asked for tr-<hex>;
    --experiment NAME resolved to its id, the search paged, --run picks the run;
    an unknown trace is one line and exit 2."""
    spans, reports = _runs("StageAndExclusions")
    document = mlflow_batch_get(spans)
    by_id = {t["trace_info"]["trace_id"]: t for t in document["traces"]}

    def batch_get(path: str, query: dict[str, list[str]], body: bytes) -> tuple[int, Any]:
        found = [by_id[i] for i in query.get("trace_ids", []) if i in by_id]
        return (200, {"traces": found}) if found else (404, "not found")

    def search(path: str, query: dict[str, list[str]], body: bytes) -> tuple[int, Any]:
        asked = json.loads(body)
        assert asked["locations"][0]["mlflow_experiment"]["experiment_id"] == "7"
        ids = sorted(by_id)
        if asked.get("page_token"):
            return 200, {"traces": [{"trace_id": i} for i in ids[1:]]}
        return 200, {"traces": [{"trace_id": ids[0]}], "next_page_token": "t2"}

    backend.routes["/api/3.0/mlflow/traces/batchGet"] = batch_get
    backend.routes["/api/3.0/mlflow/traces/search"] = search
    backend.routes["/api/2.0/mlflow/experiments/get-by-name"] = lambda p, q, b: (
        (200, {"experiment": {"experiment_id": "7"}}) if q["experiment_name"] == ["cupel"]
        else (404, "RESOURCE_DOES_NOT_EXIST"))
    trace_hex = next(iter(by_id))[3:]
    for given in (trace_hex, f"tr-{trace_hex}"):
        code, out, err = _report(["--from", "mlflow", backend.url, "--trace", given,
                                  "--format", "json", "--allow-incomplete"], capsys)
        assert code == 0, err
    run_id = _run_id(spans, 0)
    code, out, err = _report(["--from", "mlflow", backend.url, "--experiment", "cupel",
                              "--run", run_id, "--format", "json", "--allow-incomplete"],
                             capsys)
    assert code == 0, err
    assert _json_report(out) == reports[0]
    code, _, err = _report(["--from", "mlflow", backend.url, "--trace", "1" * 32], capsys)
    assert (code, err.count("\n")) == (2, 1)
    assert f"has no trace '{'1' * 32}'" in err
    code, _, err = _report(["--from", "mlflow", backend.url, "--experiment", "other",
                            "--since", "2h"], capsys)
    assert (code, err.count("\n")) == (2, 1)
    assert "has no experiment 'other'" in err


def test_jaeger_and_tempo_by_trace_id(backend: Backend,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Jaeger's /api/traces/{id} (v1 JSON); Tempo's /api/v2/traces/{id}, and its
    /api/traces/{id} when v2 answers 404 (an older Tempo); each equals the
    in-process report."""
    spans, reports = _runs("Full")
    trace_hex = format(spans[0].context.trace_id, "032x")
    backend.routes[f"/api/traces/{trace_hex}"] = lambda *_: (200, jaeger_document(spans))
    code, out, err = _report(["--from", "jaeger", backend.url, "--trace", trace_hex,
                              "--format", "json"], capsys)
    assert code == 0, err
    assert _json_report(out) == reports[-1]
    backend.routes[f"/api/traces/{trace_hex}"] = lambda *_: (
        200, otlp_document(spans, ids="base64", key="batches"))
    code, out, err = _report(["--from", "tempo", backend.url, "--trace", trace_hex,
                              "--format", "json"], capsys)
    assert code == 0, err
    assert _json_report(out) == reports[-1]
    assert [p for p, _, _ in backend.requests][-2:] == [f"/api/v2/traces/{trace_hex}",
                                                         f"/api/traces/{trace_hex}"]
    backend.routes[f"/api/v2/traces/{trace_hex}"] = lambda *_: (
        200, {"trace": otlp_document(spans, ids="base64")})
    code, out, err = _report(["--from", "tempo", backend.url, "--trace", trace_hex,
                              "--format", "json"], capsys)
    assert code == 0, err
    assert _json_report(out) == reports[-1]


@pytest.mark.parametrize(("argv", "expected"), [
    (["--from", "phoenix", "http://127.0.0.1:9"], "say what to fetch"),
    (["--from", "phoenix", "a", "b", "--since", "1h"], "takes one URL (got 2"),
    (["x.jsonl", "--trace", "ab"], "--trace needs --from BACKEND URL"),
    (["--from", "jaeger", "http://127.0.0.1:9", "--run", "r"], "need --service"),
    (["--from", "mlflow", "http://127.0.0.1:9", "--since", "2h"], "need --experiment"),
    (["--from", "tempo", "http://127.0.0.1:9", "--trace", "xyz"], "expected 32 hex digits"),
    (["--from", "phoenix", "http://127.0.0.1:9", "--since", "soon"], "--since 'soon'"),
    (["--from", "phoenix", "ftp://h", "--since", "1h"], "is not an http:// or https://"),
    (["--from", "phoenix", "http://127.0.0.1:9", "--since", "1h", "--header", "s3cret"],
     "--header #1: expected NAME:VALUE"),
])
def test_usage_errors_are_one_line_and_exit_2(argv: list[str], expected: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """What cannot be asked: exit 2 and one line saying what to give (a malformed
    header is named by its position, its text never shown)."""
    code, _, err = _report(argv, capsys)
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert expected in err
    assert "s3cret" not in err


def test_fetch_spans_needs_a_known_backend_and_something_to_fetch() -> None:
    """The library call refuses an unknown backend and a request with no selector."""
    with pytest.raises(BackendError, match="unknown backend 'zipkin'"):
        fetch_spans("zipkin", "http://127.0.0.1:9", trace_id="0" * 32)
    with pytest.raises(BackendError, match="say what to fetch"):
        fetch_spans("tempo", "http://127.0.0.1:9")


def test_report_reads_every_saved_backend_answer_as_a_trace_file(
        tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``cupellation report FILE`` recognises each saved answer as a trace (not as a
    log): Phoenix's pages, MLflow's batchGet and Trace.to_json(), Tempo's v2, Jaeger's
    v3 and OTLP protobuf; each shows the in-process report."""
    spans, reports = _runs("Full")
    files: dict[str, bytes] = {
        "phoenix.jsonl": "\n".join(json.dumps({"data": [s], "next_cursor": None})
                                   for s in phoenix_otlpv1_spans(spans)).encode(),
        "mlflow.json": json.dumps(mlflow_batch_get(spans)).encode(),
        "mlflow-list.json": json.dumps([mlflow_batch_get(spans)]).encode(),
        "tempo-v2.json": json.dumps({"trace": otlp_document(spans, ids="base64")}).encode(),
        "jaeger-v3.json": json.dumps({"result": otlp_document(spans)}).encode(),
        "traces.pb": otlp_proto_bytes(spans),
    }
    for name, data in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        code, out, err = _report([str(path), "--format", "json"], capsys)
        assert code == 0, (name, err)
        assert _json_report(out) == reports[-1], name
    for name in ("mlflow-3.17.2-trace-to-json.json", "phoenix-20.26.1-spans-pages.jsonl"):
        code, out, err = _report([str(DATA / name), "--format", "json"], capsys)
        assert code == 0, (name, err)


def test_jaeger_and_tempo_find_a_run_by_its_id(backend: Backend,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """--run: Jaeger's /api/traces search with the service and the run id as a tag
    (its answer holds the traces); Tempo's /api/search with the run id as a tag, then
    each trace found read whole. Each shows the run's in-process report; a search that
    finds nothing exits 1 saying where it looked."""
    spans, reports = _runs("Full")
    run_id = _run_id(spans, 0)
    trace_hex = format(spans[0].context.trace_id, "032x")

    def jaeger_search(path: str, query: dict[str, list[str]], body: bytes) -> tuple[int, Any]:
        assert query["service"] == ["svc"]
        wanted = json.loads(query["tags"][0])["cupel.run.id"]
        return 200, jaeger_document(spans) if wanted == run_id else {"data": []}

    backend.routes["/api/traces"] = jaeger_search
    code, out, err = _report(["--from", "jaeger", backend.url, "--service", "svc", "--run",
                              run_id, "--format", "json"], capsys)
    assert code == 0, err
    assert _json_report(out) == reports[0]
    code, _, err = _report(["--from", "jaeger", backend.url, "--service", "svc", "--run",
                            "f" * 32], capsys)
    assert code == 1
    assert f"in jaeger service svc for run {'f' * 32}" in err

    def tempo_search(path: str, query: dict[str, list[str]], body: bytes) -> tuple[int, Any]:
        assert query["tags"] == [f"cupel.run.id={run_id}"]
        return 200, {"traces": [{"traceID": trace_hex.lstrip("0")}]}

    backend.routes["/api/search"] = tempo_search
    backend.routes[f"/api/v2/traces/{trace_hex}"] = lambda *_: (
        200, {"trace": otlp_document(spans, ids="base64")})
    code, out, err = _report(["--from", "tempo", backend.url, "--run", run_id,
                              "--format", "json"], capsys)
    assert code == 0, err
    assert _json_report(out) == reports[0]


def test_the_proxy_variables_are_read_at_each_fetch(
        backend: Backend, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetch follows the proxy variables as they are when it runs: one made while
    HTTP_PROXY names a closed port fails in one line, and one made after the variable
    is gone reaches the backend (urlopen's process-wide opener would keep the first
    proxy it saw for the rest of the process)."""
    spans, reports = _runs("Full")
    trace_hex = format(spans[0].context.trace_id, "032x")
    backend.routes[f"/api/traces/{trace_hex}"] = lambda *_: (200, jaeger_document(spans))
    argv = ["--from", "jaeger", backend.url, "--trace", trace_hex, "--format", "json"]
    with socket.socket() as closed:  # bound, never listening
        closed.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{closed.getsockname()[1]}"
        with monkeypatch.context() as patch:
            for name in ("HTTP_PROXY", "http_proxy"):
                patch.setenv(name, proxy)
            for name in ("NO_PROXY", "no_proxy"):
                patch.delenv(name, raising=False)
            code, _out, err = _report(argv, capsys)
            assert code == 2
            assert err.startswith("cupellation report: error: cannot reach jaeger")
    code, out, err = _report(argv, capsys)
    assert code == 0, err
    assert _json_report(out) == reports[-1]
