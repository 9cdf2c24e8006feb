"""``report --from`` and :func:`fetch_spans` against hostile loopback servers: each
malformed answer is one line and exit 2 (never 70), a slow drip is cut off by the
one deadline of the fetch, answers and request counts are bounded, a bound reached
after part of the data was read shows that part and exits 3, redirects are followed
only within the origin (a credential never reaches another one), TLS is verified
unless --insecure says otherwise."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _loopback import HttpServer, Recorded, Step, drip, raw_server
from cupellation import SelectionReport
from cupellation.cli import main
from cupellation.exceptions import (
    BackendError,
    FetchLimitError,
    MalformedAnswerError,
    PartialFetchError,
)
from cupellation.otel import fetch_spans
from cupellation.otel._http import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_REQUESTS,
    DEFAULT_TIMEOUT,
    redirect_allowed,
)

from ._support import jaeger_document, otlp_document
from .test_backend_formats import _runs

TRACE = "0af7651916cd43dd8448eb211c80319c"
SECRET = "Bearer s3cret-token"


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _head(status: str = "200 OK", *headers: str) -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *headers]) + "\r\n\r\n").encode()


_MALFORMED: dict[str, bytes] = {
    "bad status line": b"HTTP/1.1 two hundred OK\r\n\r\n{}",
    "HTTP/0.9 body": b'{"data": []}',
    "more than 100 headers": _head("200 OK", *(f"X-{i}: v" for i in range(101)),
                                   "Content-Length: 2") + b"{}",
    "a header line over 64 KiB": _head("200 OK", "X-Long: " + "a" * 70_000,
                                       "Content-Length: 2") + b"{}",
    "a body shorter than its Content-Length": _head("200 OK", "Content-Length: 500")
    + b'{"data": [',
    "a chunk size that is not hexadecimal": _head("200 OK", "Transfer-Encoding: chunked")
    + b"zz\r\n{}\r\n0\r\n\r\n",
    "chunked encoding cut short": _head("200 OK", "Transfer-Encoding: chunked")
    + b"40\r\n{\"data\"",
    "a connection closed without an answer": b"",
}


@pytest.mark.parametrize("backend", ["phoenix", "mlflow", "jaeger", "tempo"])
@pytest.mark.parametrize("case", sorted(_MALFORMED))
def test_each_malformed_answer_is_one_line_and_exit_2_never_70(
        backend: str, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every malformed HTTP answer the hostile probe found (it gave 'internal error'
    and exit 70 on all four backends) is exit 2 with one line naming the backend and
    the server, the credential never in it; a generous --timeout bounds each run."""
    with raw_server(lambda path: [(0.0, _MALFORMED[case])]) as server:
        code, out, err = _report(["--from", backend, server.url, "--trace", TRACE,
                                  "--timeout", "20", "--header", f"Authorization:{SECRET}"],
                                 capsys)
    assert (code, out) == (2, ""), err
    assert len(err.splitlines()) == 1, err
    assert f"{backend} at http://127.0.0.1:" in err
    assert "malformed answer" in err
    assert "s3cret" not in err
    assert "internal error" not in err


def test_the_library_raises_malformed_answer_error_for_a_short_body() -> None:
    """A body shorter than its Content-Length (which http.client's chunked reads let
    through without a word) is a MalformedAnswerError, a BackendError."""
    answer = _MALFORMED["a body shorter than its Content-Length"]
    with raw_server(lambda path: [(0.0, answer)]) as server, \
            pytest.raises(MalformedAnswerError, match="IncompleteRead") as caught:
        fetch_spans("jaeger", server.url, trace_id=TRACE, timeout=20)
    assert isinstance(caught.value, BackendError)


@pytest.mark.parametrize("where", ["body", "head"])
def test_a_slow_drip_is_cut_off_by_the_deadline_of_the_whole_fetch(
        where: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A server sending one byte every 0.3 s (each read well within any per-read
    timeout) is cut off when the fetch's --timeout is up: exit 2 (nothing whole was
    read), one line naming the deadline, not after the 20 s the drip would take."""
    body = json.dumps({"data": [], "padding": "x" * 40}).encode()
    head = _head("200 OK", f"Content-Length: {len(body)}")
    steps = drip(head, body, 0.3) if where == "body" else drip(b"", head + body, 0.3)
    with raw_server(lambda path: steps) as server:
        code, out, err = _report(["--from", "jaeger", server.url, "--trace", TRACE,
                                  "--timeout", "2"], capsys)
    assert (code, out) == (2, ""), err
    assert len(err.splitlines()) == 1, err
    assert "ran past its deadline of 2 s (--timeout)" in err
    assert "nothing whole was read" in err


class _Clock:
    """A monotonic clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _tempo_route(spans: Any, *, slow: str | None = None, padded: str | None = None
                 ) -> tuple[Callable[[str], Iterable[Step]], list[str]]:
    """Tempo's search (every trace of ``spans``) and v2 trace answers, as raw steps:
    the trace ``slow`` drips its first bytes (then stops short), the trace ``padded``
    is 200 KB larger."""
    by_trace: dict[str, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(format(span.context.trace_id, "032x"), []).append(span)

    def answer(path: str) -> Iterable[Step]:
        if path.startswith("/api/search"):
            body = json.dumps({"traces": [{"traceID": t} for t in by_trace]}).encode()
        else:
            hex_id = path.rsplit("/", 1)[-1]
            body = json.dumps({"trace": otlp_document(by_trace[hex_id], ids="base64")}
                              ).encode() + (b" " * 200_000 if hex_id == padded else b"")
            if hex_id == slow:  # 60 bytes in 18 s, then the connection is closed
                return drip(_head("200 OK", f"Content-Length: {len(body)}"), body[:60], 0.3)
        return [(0.0, _head("200 OK", f"Content-Length: {len(body)}") + body)]
    return answer, list(by_trace)


def test_the_deadline_after_part_of_the_data_shows_it_and_exits_3(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Tempo: the search and the first trace answer at once, the second drips; past
    --timeout the first run is shown and the command exits 3 with one line saying
    the fetch is not whole and what is missing (1 of 2 traces)."""
    spans, reports = _runs("Full")
    _, traces = _tempo_route(spans)
    slow_answer, _ = _tempo_route(spans, slow=traces[1])
    with raw_server(slow_answer) as server:
        code, out, err = _report(["--from", "tempo", server.url, "--since", "1h",
                                  "--format", "json", "--timeout", "4"], capsys)
    assert code == 3, err
    assert SelectionReport.from_json(out) in reports
    assert err.count("\n") == 1
    assert "not whole" in err
    assert "not read: 1 of 2 traces" in err
    assert "a large --since read needs a larger --timeout" in err


def test_an_injected_clock_ends_the_fetch_between_two_traces() -> None:
    """The library with an injected clock, no timing: the clock jumps past the
    deadline while the second trace is asked for, so PartialFetchError holds the
    first trace's spans, names the limit and says what is missing."""
    spans, _ = _runs("Full")
    fast, traces = _tempo_route(spans)
    clock = _Clock()

    def answer(path: str) -> Iterable[Step]:
        if path.endswith(traces[1]):
            clock.now = 1000.0
        return fast(path)

    with raw_server(answer) as server, pytest.raises(PartialFetchError) as caught:
        fetch_spans("tempo", server.url, since=datetime(2026, 1, 1, tzinfo=UTC),
                    timeout=30, clock=clock)
    error = caught.value
    assert error.limit == "timeout"
    assert error.missing == "1 of 2 traces"
    assert {format(s.trace_id, "032x") if isinstance(s.trace_id, int) else s.trace_id
            for s in error.spans} == {traces[0]}
    assert error.requests == 3
    assert isinstance(error, FetchLimitError)


def test_the_body_limit_refuses_an_answer_before_or_while_reading_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--max-body-bytes: an answer whose Content-Length is over it is refused before
    it is read, an endless chunked one once past it (memory bounded by the limit):
    exit 2, one line naming the option; a trace over it after one was read: exit 3."""
    endless = [(0.0, _head("200 OK", "Transfer-Encoding: chunked"))] + [
        (0.0, b"10000\r\n" + b" " * 0x10000 + b"\r\n")] * 400
    declared = [(0.0, _head("200 OK", "Content-Length: 900000000") + b"{}")]
    for steps in (declared, endless):
        with raw_server(lambda path, s=steps: s) as server:  # type: ignore[misc]
            code, out, err = _report(["--from", "jaeger", server.url, "--trace", TRACE,
                                      "--max-body-bytes", "1000000", "--timeout", "20"],
                                     capsys)
        assert (code, out, err.count("\n")) == (2, "", 1), err
        assert "more than" in err
        assert "1,000,000" in err
        assert "(--max-body-bytes)" in err
    spans, reports = _runs("Full")
    _, traces = _tempo_route(spans)
    padded, _ = _tempo_route(spans, padded=traces[1])
    with raw_server(padded) as server:
        code, out, err = _report(["--from", "tempo", server.url, "--since", "1h",
                                  "--format", "json", "--max-body-bytes", "150000"], capsys)
    assert code == 3, err
    assert SelectionReport.from_json(out) in reports
    assert "not read: 1 of 2 traces" in err
    assert "(--max-body-bytes)" in err


def test_the_request_limit_counts_pages_and_trace_ids(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--max-requests: Phoenix answering a next cursor forever (with no spans) stops
    at the limit, exit 2; Tempo with a limit of one request reads its search and no
    trace (exit 2, one line), with two the first trace, shown (exit 3); the defaults
    are 30 s, 256 MiB and 10,000 requests."""
    spans, _ = _runs("Full")
    def forever(path: str) -> Iterable[Step]:
        body = json.dumps({"data": [], "next_cursor": "again"}).encode()
        return [(0.0, _head("200 OK", f"Content-Length: {len(body)}") + body)]

    with raw_server(forever) as server:
        code, _, err = _report(["--from", "phoenix", server.url, "--since", "1h",
                                "--max-requests", "7"], capsys)
        assert len(server.paths) == 7
    assert (code, err.count("\n")) == (2, 1), err
    assert "more than 7 requests (--max-requests)" in err
    tempo, _ = _tempo_route(spans)
    with raw_server(tempo) as server:
        code, _, err = _report(["--from", "tempo", server.url, "--since", "1h",
                                "--max-requests", "1"], capsys)
        assert len(server.paths) == 1
    assert (code, err.count("\n")) == (2, 1), err
    assert "nothing whole was read" in err
    with raw_server(tempo) as server:
        code, _, err = _report(["--from", "tempo", server.url, "--since", "1h",
                                "--max-requests", "2", "--format", "json"], capsys)
    assert code == 3
    assert "not read: 1 of 2 traces" in err
    assert (DEFAULT_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_REQUESTS) == (
        30.0, 256 * 1024 * 1024, 10_000)


# -- TLS ----------------------------------------------------------------------------------


def test_tls_is_verified_unless_insecure_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """A server with a self-signed certificate is refused (exit 2, one line: not
    trusted, and how to skip the check); with --insecure it is read and standard
    error says the certificate was not checked."""
    spans, reports = _runs("Full")
    body = json.dumps(jaeger_document(spans)).encode()
    log: list[Recorded] = []
    server = HttpServer("tls", lambda path: (200, {}, body), log, tls=True)
    try:
        argv = ["--from", "jaeger", server.url, "--trace",
                format(spans[0].context.trace_id, "032x"), "--format", "json",
                "--timeout", "20"]
        code, out, err = _report(argv, capsys)
        assert (code, out, err.count("\n")) == (2, "", 1), err
        assert "TLS certificate is not trusted" in err
        assert "--insecure" in err
        assert log == []
        code, out, err = _report([*argv, "--insecure"], capsys)
    finally:
        server.close()
    assert code == 0, err
    assert SelectionReport.from_json(out) == reports[-1]
    assert "--insecure: the server's TLS certificate was not checked" in err


# -- redirects -------------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target", "allowed"), [
    ("http://h.example/a", "http://h.example/b", True),
    ("http://h.example/a", "http://H.EXAMPLE:80/b", True),
    ("http://h.example/a", "https://h.example/b", True),
    ("http://h.example:80/a", "https://h.example:443/b", True),
    ("https://h.example/a", "https://h.example:443/b", True),
    ("https://h.example/a", "http://h.example/b", False),
    ("http://h.example:8080/a", "https://h.example:8443/b", False),
    ("http://h.example:8080/a", "https://h.example/b", False),
    ("http://h.example/a", "https://h.example:8443/b", False),
    ("http://h.example/a", "http://other.example/b", False),
    ("http://h.example/a", "http://h.example:81/b", False),
    ("http://127.0.0.1:9/a", "http://localhost:9/b", False),
    ("http://h.example/a", "ftp://h.example/b", False),
    ("http://h.example/a", "file:///etc/passwd", False),
    ("http://h.example/a", "http://h.example:x/b", False),
])
def test_which_redirects_are_followed(source: str, target: str, allowed: bool) -> None:
    """Same scheme, host (case aside) and port, or http:80 to https:443 of the same
    host; nothing else (another host, port or scheme, https to http, ftp, file)."""
    assert redirect_allowed(source, target) is allowed


_KINDS = ("same", "relative", "loop", "other port", "other host", "https", "ftp")


class _Redirects:
    """Two HTTP servers (A, B) serving redirect chains by id: the request of hop
    ``i`` of chain ``c`` is ``/r/c/...`` (hop 0) or ``/r/c/h/i``."""

    def __init__(self, document: bytes) -> None:
        self.document = document
        self.chains: dict[str, list[tuple[str, int]]] = {}
        self.log: list[Recorded] = []
        self.a = HttpServer("A", self._route, self.log)
        self.b = HttpServer("B", self._route, self.log)

    def _route(self, path: str) -> tuple[int, dict[str, str], bytes]:
        parts = path.split("/")
        chain = self.chains[parts[2]]
        hop = int(parts[4]) if parts[3] == "h" else 0
        if hop >= len(chain):
            return 200, {}, self.document
        kind, status = chain[hop]
        where = f"/r/{parts[2]}/h/{0 if kind == 'loop' else hop + 1}"
        location = {"same": f"{self.a.url}{where}", "relative": where, "loop": where,
                    "other port": f"{self.b.url}{where}",
                    "other host": f"http://localhost:{self.a.port}{where}",
                    "https": f"https://127.0.0.1:{self.a.port}{where}",
                    "ftp": f"ftp://127.0.0.1{where}"}[kind]
        return status, {"Location": location}, b""

    def close(self) -> None:
        self.a.close()
        self.b.close()


def _expected(chain: list[tuple[str, int]]) -> int:
    """The rule: a chain ending within five followed hops, every one within the
    origin, is read (0); anything else is refused (2)."""
    hop, followed = 0, 0
    while hop < len(chain):
        kind = chain[hop][0]
        if kind not in ("same", "relative", "loop") or followed == 5:
            return 2
        followed += 1
        hop = 0 if kind == "loop" else hop + 1
    return 0


@pytest.fixture(scope="module")
def redirects() -> Iterator[_Redirects]:
    """The two redirect servers, for the module."""
    spans, _ = _runs("Full")
    servers = _Redirects(json.dumps(jaeger_document(spans)).encode())
    yield servers
    servers.close()


@pytest.mark.slow
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain=st.lists(st.tuples(st.sampled_from(_KINDS),
                                st.sampled_from([301, 302, 303, 307, 308])), max_size=8),
       number=st.integers(0, 10**12))
def test_a_credential_never_reaches_another_origin_over_generated_redirect_chains(
        redirects: _Redirects, chain: list[tuple[str, int]], number: int) -> None:
    """Over generated chains of redirects (same origin, relative, loops, another port,
    localhost for 127.0.0.1, https on the http port, ftp, more than five hops): no
    request to another origin than the URL's (server B, or a Host other than the
    URL's) carries the credential, and the outcome follows the rule: read whole (0)
    or refused in one line naming the target (2)."""
    chain_id = f"c{number}-{len(redirects.chains)}"
    redirects.chains[chain_id] = chain
    start = len(redirects.log)
    code = main(["report", "--from", "jaeger", f"{redirects.a.url}/r/{chain_id}",
                 "--trace", TRACE, "--format", "json", "--timeout", "20",
                 "--header", f"Authorization:{SECRET}"])
    origin = f"127.0.0.1:{redirects.a.port}"
    seen = redirects.log[start:]
    leaked = [r for r in seen if (r.server != "A" or r.host != origin)
              and SECRET in r.headers.values()]
    assert leaked == []
    assert all(r.server == "A" and r.host == origin for r in seen)
    assert code == _expected(chain)


def test_a_refused_redirect_names_its_target(
        redirects: _Redirects, capsys: pytest.CaptureFixture[str]) -> None:
    """A redirect to another port, to ftp:// or past the fifth hop: exit 2 and one
    line naming where it pointed (no query, no credential)."""
    for chain, expected in (
            ([("other port", 302)], f"redirected to {redirects.b.url}/r/t1/h/1: refused"),
            ([("ftp", 307)], "redirected to ftp://127.0.0.1/r/t2/h/1: refused"),
            ([("same", 302)] * 6, "redirected more than 5 times (the last to "
                                  f"{redirects.a.url}/r/t3/h/6): refused")):
        name = expected.split("/r/")[1].split("/")[0]
        redirects.chains[name] = chain
        code, out, err = _report(["--from", "jaeger", f"{redirects.a.url}/r/{name}",
                                  "--trace", TRACE, "--header", f"Authorization:{SECRET}"],
                                 capsys)
        assert (code, out, err.count("\n")) == (2, "", 1), err
        assert expected in err
        assert "s3cret" not in err


def test_a_fetch_cut_short_before_the_run_asked_for_is_exit_2_not_nothing_found(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--run names the run of the trace the request limit kept from being read: the
    command cannot say the run is not there (exit 1 would be silently wrong), so it
    exits 2 with one line naming the bound and what was not read; the run of the
    trace that was read is shown with exit 3."""
    spans, reports = _runs("Full")
    tempo, traces = _tempo_route(spans)
    run_of = {format(s.context.trace_id, "032x"): str(s.attributes["cupel.run.id"])
              for s in spans if s.name == "cupel.pipeline" and s.attributes}
    with raw_server(tempo) as server:
        argv = ["--from", "tempo", server.url, "--max-requests", "2", "--format", "json"]
        code, out, err = _report([*argv, "--run", run_of[traces[1]]], capsys)
        assert (code, out, err.count("\n")) == (2, "", 1), err
        assert "not read: 1 of 2 traces" in err
        assert "no run read in tempo for run" in err
        code, out, err = _report([*argv, "--run", run_of[traces[0]]], capsys)
    assert code == 3, err
    assert SelectionReport.from_json(out) in reports
