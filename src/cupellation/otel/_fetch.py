"""Fetching a run's spans from a trace backend over HTTP(S), for rebuilding.

:func:`fetch_spans` asks Phoenix, MLflow, Jaeger or Tempo for the spans of one trace
(``trace_id``), of one cupellation run (``run_id``: the traces holding spans with
that ``cupel.run.id``, whole) or of the runs since a time (``since``), follows
their pagination, and reads each answer with the product's readers (so the spans
are decoded however they are laid out). It uses only the standard library
(``urllib``); TLS follows the URL's scheme. Headers (credentials) are sent and
never repeated in a message. Every failure is a :class:`BackendError` with one
line saying what went wrong and what to do.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from ..exceptions import CupelError, DecodeError
from ._decode import parse_trace
from ._names import RUN_ID
from ._spans import SpanData

__all__ = ["BACKENDS", "DEFAULT_PHOENIX_PROJECT", "BackendError", "fetch_spans", "parse_since"]

#: The backends :func:`fetch_spans` reads from.
BACKENDS: Final = ("phoenix", "mlflow", "jaeger", "tempo")
#: The Phoenix project read when none is named: Phoenix's own default project, where
#: spans sent without a project go (docker/'s collector sends there too).
DEFAULT_PHOENIX_PROJECT: Final = "default"
#: How many pages (of up to 1,000 spans or 100 traces) one fetch follows at most.
_MAX_PAGES: Final = 10_000
_PAGE: Final = 1000
_TRACE_HEX = re.compile(r"[0-9a-fA-F]{32}")
_RELATIVE = re.compile(r"([0-9]+)\s*(s|m|h|d)")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


class BackendError(CupelError):
    """A backend could not be asked, or could not answer what was asked (unreachable,
    unauthorised, an unknown project, experiment or trace). The message is one line
    and never holds a header's value."""


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """``text`` as a UTC time: ISO 8601 (``2026-11-26T10:00:00Z``; no offset means
    UTC) or a span back from now (``90s``, ``15m``, ``2h``, ``7d``). Raises
    :class:`BackendError` for anything else."""
    relative = _RELATIVE.fullmatch(text.strip())
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: amount})
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BackendError(f"--since {text!r}: expected an ISO 8601 time "
                           "(2026-11-26T10:00:00Z) or a span back from now (90s, 15m, "
                           "2h, 7d)") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _shown_url(url: str) -> str:
    """``url`` without credentials in it (user:password@) or its query."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class _Client:
    """GETs and POSTs of JSON against one backend, failures as one line."""

    def __init__(self, backend: str, url: str, headers: Mapping[str, str],
                 timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BackendError(f"{backend}: {_shown_url(url)!r} is not an http:// or "
                               "https:// URL")
        self.backend = backend
        self.base = url.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout
        # An opener of this client's own, not urlopen's process-wide one: that one reads
        # the proxy variables once, on its first use, and keeps them for the process;
        # this one follows the environment as it is when the client is made.
        self._opener = urllib.request.build_opener()

    def get(self, path: str, query: Mapping[str, str] | str | None = None, *,
            missing: Callable[[str], str] | None = None) -> bytes | None:
        """The answer's bytes; None for a 404 when ``missing`` is None (else the
        BackendError ``missing(body)`` words)."""
        text = urllib.parse.urlencode(query) if isinstance(query, Mapping) else query
        url = self.base + path + ("?" + text if text else "")
        return self._send(urllib.request.Request(url, headers=self.headers), missing)

    def post(self, path: str, body: Mapping[str, Any], *,
             missing: Callable[[str], str] | None = None) -> bytes | None:
        request = urllib.request.Request(
            self.base + path, data=json.dumps(body).encode("utf-8"), method="POST",
            headers={**self.headers, "Content-Type": "application/json"})
        return self._send(request, missing)

    def _send(self, request: urllib.request.Request,
              missing: Callable[[str], str] | None) -> bytes | None:
        where = _shown_url(request.full_url)
        try:
            with self._opener.open(request, timeout=self.timeout) as answer:
                return bytes(answer.read())
        except urllib.error.HTTPError as error:
            body = _body(error)
            if error.code in (401, 403):
                raise BackendError(
                    f"{self.backend} at {where} refused the request (HTTP {error.code}): "
                    "give its credentials with --header NAME:VALUE") from None
            if error.code == 404:
                if missing is None:
                    return None
                raise BackendError(missing(body)) from None
            raise BackendError(f"{self.backend} at {where} answered HTTP {error.code}"
                               + (f": {body}" if body else "")) from None
        except UnicodeError:
            raise BackendError(f"{self.backend}: a header or the URL holds characters an "
                               "HTTP request cannot carry (headers are not shown)") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            raise BackendError(f"cannot reach {self.backend} at {where}: {reason}") from None

    def json(self, raw: bytes | None, what: str) -> Any:
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise BackendError(f"{self.backend}: {what} is not JSON (is the URL the "
                               f"{self.backend} server's base URL?)") from None


def _body(error: urllib.error.HTTPError) -> str:
    try:
        text = error.read(300).decode("utf-8", "replace")
    except Exception:  # the body is only a hint
        return ""
    return " ".join(text.split())[:200]


def _trace_hex(trace_id: str, backend: str) -> str:
    text = trace_id.strip().lower()
    if text.startswith("tr-"):
        text = text[3:]
    if not _TRACE_HEX.fullmatch(text):
        raise BackendError(f"{backend}: --trace {trace_id!r}: expected 32 hex digits"
                           + (" or an MLflow id (tr-<32 hex digits>)"
                              if backend == "mlflow" else ""))
    return text


def _read(raw: bytes, backend: str, what: str) -> list[SpanData]:
    try:
        return parse_trace(raw)
    except DecodeError as exc:
        raise DecodeError(f"{backend} {what}: {exc.field}", exc.value, exc.problem,
                          line=exc.line) from None


# -- Phoenix ------------------------------------------------------------------------------------


def _phoenix(client: _Client, project: str, trace_id: str | None, run_id: str | None,
             since: datetime | None) -> list[SpanData]:
    path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans/otlpv1"

    def missing(body: str) -> str:
        return (f"phoenix at {_shown_url(client.base)} has no project {project!r} "
                "(choose one with --project)")

    def pages(query: dict[str, str]) -> list[SpanData]:
        spans: list[SpanData] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page_query = {**query, "limit": str(_PAGE)} | ({"cursor": cursor} if cursor else {})
            raw = client.get(path, page_query, missing=missing)
            page = client.json(raw, "the spans page")
            if not isinstance(page, Mapping) or not isinstance(page.get("data"), list):
                raise BackendError(f"phoenix: {path} did not answer a page of spans "
                                   "(data, next_cursor)")
            if raw is not None and page["data"]:
                spans.extend(_read(raw, "phoenix", "spans page"))
            cursor = page.get("next_cursor")
            if not cursor:
                return spans
        raise BackendError(f"phoenix: more than {_MAX_PAGES} pages of spans: narrow it "
                           "with --trace, --run or a later --since")

    if trace_id is not None:
        return pages({"trace_id": _trace_hex(trace_id, "phoenix")})
    query = {} if since is None else {"start_time": since.isoformat()}
    if run_id is None:
        return pages(query)
    spans = pages({**query, "attribute": f"{RUN_ID}:{run_id}"})
    traces = sorted({span.trace_id for span in spans if span.trace_id})
    return [span for trace in traces for span in pages({"trace_id": trace})]


# -- MLflow ---------------------------------------------------------------------------------


def _mlflow(client: _Client, experiment: str | None, trace_id: str | None,
            run_id: str | None, since: datetime | None) -> list[SpanData]:
    if trace_id is not None:
        return _mlflow_batch(client, [f"tr-{_trace_hex(trace_id, 'mlflow')}"], trace_id)
    if experiment is None:
        raise BackendError("mlflow: --run and --since need --experiment (its id or name)")
    experiment_id = _mlflow_experiment(client, experiment)
    body: dict[str, Any] = {"locations": [{"type": "MLFLOW_EXPERIMENT",
                                           "mlflow_experiment": {
                                               "experiment_id": experiment_id}}],
                            "max_results": 100}
    if since is not None:
        body["filter"] = f"trace.timestamp_ms >= {int(since.timestamp() * 1000)}"
    ids: list[str] = []
    token: str | None = None
    for _ in range(_MAX_PAGES):
        answer = client.json(client.post("/api/3.0/mlflow/traces/search",
                                         {**body, **({"page_token": token} if token else {})},
                                         missing=lambda _: "mlflow: this server has no "
                                         "/api/3.0/mlflow/traces/search (MLflow 3 needed)"),
                             "the trace search")
        traces = answer.get("traces", []) if isinstance(answer, Mapping) else None
        if not isinstance(traces, list):
            raise BackendError("mlflow: the trace search did not answer a list of traces")
        ids.extend(str(t.get("trace_id")) for t in traces
                   if isinstance(t, Mapping) and t.get("trace_id"))
        token = answer.get("next_page_token") or None
        if not token:
            break
    spans: list[SpanData] = []
    for at in range(0, len(ids), 10):
        spans.extend(_mlflow_batch(client, ids[at:at + 10], None))
    if run_id is not None:
        traces_of_run = {s.trace_id for s in spans if s.attributes.get(RUN_ID) == run_id}
        spans = [s for s in spans if s.trace_id in traces_of_run]
    return spans


def _mlflow_experiment(client: _Client, experiment: str) -> str:
    if experiment.isdigit():
        return experiment
    answer = client.json(client.get(
        "/api/2.0/mlflow/experiments/get-by-name", {"experiment_name": experiment},
        missing=lambda _: f"mlflow at {_shown_url(client.base)} has no experiment "
                          f"{experiment!r} (give its id or name with --experiment)"),
        "the experiment")
    found = answer.get("experiment", {}) if isinstance(answer, Mapping) else {}
    experiment_id = found.get("experiment_id") if isinstance(found, Mapping) else None
    if not isinstance(experiment_id, str):
        raise BackendError(f"mlflow has no experiment {experiment!r}")
    return experiment_id


def _mlflow_batch(client: _Client, ids: list[str], asked: str | None) -> list[SpanData]:
    def missing(body: str) -> str:
        return f"mlflow at {_shown_url(client.base)} has no trace {asked or ids[0]!r}"

    query = "&".join("trace_ids=" + urllib.parse.quote(i, safe="") for i in ids)
    raw = client.get("/api/3.0/mlflow/traces/batchGet", query, missing=missing)
    answer = client.json(raw, "batchGet")
    if not isinstance(answer, Mapping) or not answer.get("traces"):
        if asked is not None:
            raise BackendError(missing(""))
        return []
    assert raw is not None
    return _read(raw, "mlflow", "batchGet")


# -- Jaeger and Tempo -------------------------------------------------------------------------


def _jaeger(client: _Client, service: str | None, trace_id: str | None, run_id: str | None,
            since: datetime | None) -> list[SpanData]:
    if trace_id is not None:
        hex_id = _trace_hex(trace_id, "jaeger")
        raw = client.get(f"/api/traces/{hex_id}", missing=lambda _: (
            f"jaeger at {_shown_url(client.base)} has no trace {hex_id}"))
        assert raw is not None
        return _read(raw, "jaeger", "trace")
    if service is None:
        raise BackendError("jaeger: --run and --since need --service (the service the "
                           "spans were sent as)")
    query = {"service": service, "limit": "1500"}
    if since is not None:
        query["start"] = str(int(since.timestamp() * 1_000_000))
    if run_id is not None:
        query["tags"] = json.dumps({RUN_ID: run_id})
    raw = client.get("/api/traces", query, missing=lambda _: (
        f"jaeger at {_shown_url(client.base)} knows no service {service!r}"))
    answer = client.json(raw, "the trace search")
    if raw is None or not isinstance(answer, Mapping) or not answer.get("data"):
        return []
    return _read(raw, "jaeger", "trace search")


def _tempo(client: _Client, trace_id: str | None, run_id: str | None,
           since: datetime | None, service: str | None) -> list[SpanData]:
    def one(hex_id: str) -> list[SpanData]:
        raw = client.get(f"/api/v2/traces/{hex_id}")
        if raw is None:  # an older Tempo: the v1 API
            raw = client.get(f"/api/traces/{hex_id}", missing=lambda _: (
                f"tempo at {_shown_url(client.base)} has no trace {hex_id}"))
        assert raw is not None
        return _read(raw, "tempo", "trace")

    if trace_id is not None:
        return one(_trace_hex(trace_id, "tempo"))
    tags = [f"{RUN_ID}={run_id}"] if run_id is not None else []
    if service is not None:
        tags.append(f"service.name={service}")
    query = {"limit": "1000"} | ({"tags": " ".join(tags)} if tags else {})
    if since is not None:
        query["start"] = str(int(since.timestamp()))
        query["end"] = str(int(datetime.now(UTC).timestamp()) + 1)
    answer = client.json(client.get("/api/search", query, missing=lambda _: (
        f"tempo at {_shown_url(client.base)} has no /api/search")), "the trace search")
    found = answer.get("traces", []) if isinstance(answer, Mapping) else []
    ids = [t["traceID"] for t in found if isinstance(t, Mapping)
           and isinstance(t.get("traceID"), str)]
    return [span for hex_id in ids for span in one(hex_id.rjust(32, "0"))]


def fetch_spans(backend: str, url: str, *, trace_id: str | None = None,
                run_id: str | None = None, since: datetime | None = None,
                project: str | None = None, experiment: str | None = None,
                service: str | None = None, headers: Mapping[str, str] | None = None,
                timeout: float = 30.0) -> list[SpanData]:
    """The spans ``backend`` (one of :data:`BACKENDS`) at ``url`` (its base URL) holds
    for one trace (``trace_id``: 32 hex digits, or MLflow's ``tr-...``), one run
    (``run_id``: the whole traces holding it) or every run since ``since``.

    Selectors: ``project`` (Phoenix; default ``"default"``), ``experiment`` (MLflow:
    id or name, needed without ``trace_id``), ``service`` (Jaeger: needed without
    ``trace_id``; Tempo: optional). ``headers`` are sent with every request (for
    credentials; never shown in a message). Returns the spans (possibly none: the
    caller says nothing was found). Raises :class:`BackendError` (one line) for an
    unreachable backend, a refused request (401/403), an unknown project, experiment
    or trace; :class:`~cupellation.exceptions.DecodeError` for an answer that is not
    the backend's.
    """
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}: expected one of "
                           f"{', '.join(BACKENDS)}")
    if sum(x is not None for x in (trace_id, run_id, since)) == 0:
        raise BackendError(f"{backend}: say what to fetch: --trace ID, --run ID or "
                           "--since TIME")
    for name, value in (("--trace", trace_id), ("--run", run_id), ("--project", project),
                        ("--experiment", experiment), ("--service", service), ("URL", url)):
        if value is not None:
            try:
                value.encode("utf-8")
            except UnicodeError:
                raise BackendError(f"{backend}: {name} holds a lone surrogate, which no "
                                   "request can carry") from None
    if not timeout > 0 or timeout == float("inf"):
        raise BackendError(f"{backend}: the timeout must be a positive number of seconds")
    client = _Client(backend, url, headers or {}, timeout)
    if backend == "phoenix":
        return _phoenix(client, project or DEFAULT_PHOENIX_PROJECT, trace_id, run_id, since)
    if backend == "mlflow":
        return _mlflow(client, experiment, trace_id, run_id, since)
    if backend == "jaeger":
        return _jaeger(client, service, trace_id, run_id, since)
    return _tempo(client, trace_id, run_id, since, service)
