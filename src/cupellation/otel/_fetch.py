"""Fetching a run's spans from a trace backend over HTTP(S), for rebuilding.

:func:`fetch_spans` asks Phoenix, MLflow, Jaeger or Tempo for the spans of one trace
(``trace_id``), of one cupellation run (``run_id``: the traces holding spans with
that ``cupel.run.id``, whole) or of the runs since a time (``since``), follows
their pagination, and reads each answer with the product's readers (so the spans
are decoded however they are laid out). It uses only the standard library,
through the bounded client of :mod:`._http` (one deadline for the whole fetch,
bounded answers and request counts, redirects within the origin only, TLS
verified). Headers (credentials) are sent and never repeated in a message. Every
failure is a :class:`BackendError` with one line saying what went wrong and what
to do.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from ..exceptions import (
    BackendError,
    DecodeError,
    FetchLimitError,
    MalformedAnswerError,
    PartialFetchError,
    RedirectRefusedError,
)
from ._decode import parse_trace
from ._http import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_REQUESTS,
    DEFAULT_TIMEOUT,
    Client,
    Limits,
    Stop,
    shown_url,
)
from ._names import RUN_ID
from ._spans import SpanData

__all__ = [
    "BACKENDS",
    "DEFAULT_PHOENIX_PROJECT",
    "BackendError",
    "FetchLimitError",
    "MalformedAnswerError",
    "PartialFetchError",
    "RedirectRefusedError",
    "fetch_spans",
    "parse_since",
]

#: The backends :func:`fetch_spans` reads from.
BACKENDS: Final = ("phoenix", "mlflow", "jaeger", "tempo")
#: The Phoenix project read when none is named: Phoenix's own default project, where
#: spans sent without a project go (docker/'s collector sends there too).
DEFAULT_PHOENIX_PROJECT: Final = "default"
_PAGE: Final = 1000
_TRACE_HEX = re.compile(r"[0-9a-fA-F]{32}")
_RELATIVE = re.compile(r"([0-9]+)\s*(s|m|h|d)")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


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


def _trace_hex(trace_id: str, backend: str) -> str:
    text = trace_id.strip().lower()
    if text.startswith("tr-"):
        text = text[3:]
    if not _TRACE_HEX.fullmatch(text):
        raise BackendError(f"{backend}: --trace {trace_id!r}: expected 32 hex digits"
                           + (" or an MLflow id (tr-<32 hex digits>)"
                              if backend == "mlflow" else ""))
    return text


def _json(client: Client, raw: bytes | None, what: str) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise BackendError(f"{client.backend}: {what} is not JSON (is the URL the "
                           f"{client.backend} server's base URL?)") from None


def _read(raw: bytes, backend: str, what: str) -> list[SpanData]:
    try:
        return parse_trace(raw)
    except DecodeError as exc:
        raise DecodeError(f"{backend} {what}: {exc.field}", exc.value, exc.problem,
                          line=exc.line) from None


# -- Phoenix ------------------------------------------------------------------------------------


def _phoenix(client: Client, progress: _Progress, project: str, trace_id: str | None,
             run_id: str | None, since: datetime | None) -> None:
    path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans/otlpv1"

    def missing(body: str) -> str:
        return (f"phoenix at {shown_url(client.base)} has no project {project!r} "
                "(choose one with --project)")

    def pages(query: dict[str, str], into: list[SpanData], what: str) -> None:
        cursor: Any = None
        number = 0
        while True:  # the request limit bounds the pages
            progress.missing = what if number == 0 else f"{what} after page {number}"
            page_query = {**query, "limit": str(_PAGE)} | ({"cursor": cursor} if cursor else {})
            raw = client.get(path, page_query, missing=missing)
            page = _json(client, raw, "the spans page")
            if not isinstance(page, Mapping) or not isinstance(page.get("data"), list):
                raise BackendError(f"phoenix: {path} did not answer a page of spans "
                                   "(data, next_cursor)")
            if raw is not None and page["data"]:
                into.extend(_read(raw, "phoenix", "spans page"))
            number += 1
            cursor = page.get("next_cursor")
            if not cursor:
                return

    if trace_id is not None:
        hex_id = _trace_hex(trace_id, "phoenix")
        pages({"trace_id": hex_id}, progress.spans, f"the spans of trace {hex_id}")
        return
    query = {} if since is None else {"start_time": since.isoformat()}
    if run_id is None:
        pages(query, progress.spans, "the spans")
        return
    found: list[SpanData] = []
    pages({**query, "attribute": f"{RUN_ID}:{run_id}"}, found, "the search for the run")
    traces = sorted({span.trace_id for span in found if span.trace_id})
    for index, trace in enumerate(traces):
        whole: list[SpanData] = []
        pages({"trace_id": trace}, whole,
              f"{len(traces) - index} of the run's {len(traces)} traces")
        progress.spans.extend(whole)


# -- MLflow ---------------------------------------------------------------------------------


def _mlflow(client: Client, progress: _Progress, experiment: str | None,
            trace_id: str | None, since: datetime | None) -> None:
    if trace_id is not None:
        progress.spans.extend(_mlflow_batch(
            client, [f"tr-{_trace_hex(trace_id, 'mlflow')}"], trace_id))
        return
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
    progress.missing = "the trace search"
    while True:  # the request limit bounds the pages
        answer = _json(client, client.post(
            "/api/3.0/mlflow/traces/search", {**body, **({"page_token": token} if token else {})},
            missing=lambda _: "mlflow: this server has no /api/3.0/mlflow/traces/search "
                              "(MLflow 3 needed)"), "the trace search")
        traces = answer.get("traces", []) if isinstance(answer, Mapping) else None
        if not isinstance(traces, list):
            raise BackendError("mlflow: the trace search did not answer a list of traces")
        ids.extend(str(t.get("trace_id")) for t in traces
                   if isinstance(t, Mapping) and t.get("trace_id"))
        token = answer.get("next_page_token") or None
        if not token:
            break
    for at in range(0, len(ids), 10):
        progress.missing = f"{len(ids) - at} of {len(ids)} traces"
        progress.spans.extend(_mlflow_batch(client, ids[at:at + 10], None))


def _mlflow_experiment(client: Client, experiment: str) -> str:
    if experiment.isdigit():
        return experiment
    answer = _json(client, client.get(
        "/api/2.0/mlflow/experiments/get-by-name", {"experiment_name": experiment},
        missing=lambda _: f"mlflow at {shown_url(client.base)} has no experiment "
                          f"{experiment!r} (give its id or name with --experiment)"),
        "the experiment")
    found = answer.get("experiment", {}) if isinstance(answer, Mapping) else {}
    experiment_id = found.get("experiment_id") if isinstance(found, Mapping) else None
    if not isinstance(experiment_id, str):
        raise BackendError(f"mlflow has no experiment {experiment!r}")
    return experiment_id


def _mlflow_batch(client: Client, ids: list[str], asked: str | None) -> list[SpanData]:
    def missing(body: str) -> str:
        return f"mlflow at {shown_url(client.base)} has no trace {asked or ids[0]!r}"

    query = "&".join("trace_ids=" + urllib.parse.quote(i, safe="") for i in ids)
    raw = client.get("/api/3.0/mlflow/traces/batchGet", query, missing=missing)
    answer = _json(client, raw, "batchGet")
    if not isinstance(answer, Mapping) or not answer.get("traces"):
        if asked is not None:
            raise BackendError(missing(""))
        return []
    assert raw is not None
    return _read(raw, "mlflow", "batchGet")


# -- Jaeger and Tempo -------------------------------------------------------------------------


def _jaeger(client: Client, progress: _Progress, service: str | None, trace_id: str | None,
            run_id: str | None, since: datetime | None) -> None:
    if trace_id is not None:
        hex_id = _trace_hex(trace_id, "jaeger")
        raw = client.get(f"/api/traces/{hex_id}", missing=lambda _: (
            f"jaeger at {shown_url(client.base)} has no trace {hex_id}"))
        assert raw is not None
        progress.spans.extend(_read(raw, "jaeger", "trace"))
        return
    if service is None:
        raise BackendError("jaeger: --run and --since need --service (the service the "
                           "spans were sent as)")
    query = {"service": service, "limit": "1500"}
    if since is not None:
        query["start"] = str(int(since.timestamp() * 1_000_000))
    if run_id is not None:
        query["tags"] = json.dumps({RUN_ID: run_id})
    raw = client.get("/api/traces", query, missing=lambda _: (
        f"jaeger at {shown_url(client.base)} knows no service {service!r}"))
    answer = _json(client, raw, "the trace search")
    if raw is not None and isinstance(answer, Mapping) and answer.get("data"):
        progress.spans.extend(_read(raw, "jaeger", "trace search"))


def _tempo(client: Client, progress: _Progress, trace_id: str | None, run_id: str | None,
           since: datetime | None, service: str | None) -> None:
    def one(hex_id: str) -> list[SpanData]:
        raw = client.get(f"/api/v2/traces/{hex_id}")
        if raw is None:  # an older Tempo: the v1 API
            raw = client.get(f"/api/traces/{hex_id}", missing=lambda _: (
                f"tempo at {shown_url(client.base)} has no trace {hex_id}"))
        assert raw is not None
        return _read(raw, "tempo", "trace")

    if trace_id is not None:
        progress.spans.extend(one(_trace_hex(trace_id, "tempo")))
        return
    tags = [f"{RUN_ID}={run_id}"] if run_id is not None else []
    if service is not None:
        tags.append(f"service.name={service}")
    query = {"limit": "1000"} | ({"tags": " ".join(tags)} if tags else {})
    if since is not None:
        query["start"] = str(int(since.timestamp()))
        query["end"] = str(int(datetime.now(UTC).timestamp()) + 1)
    answer = _json(client, client.get("/api/search", query, missing=lambda _: (
        f"tempo at {shown_url(client.base)} has no /api/search")), "the trace search")
    found = answer.get("traces", []) if isinstance(answer, Mapping) else []
    ids = [t["traceID"] for t in found if isinstance(t, Mapping)
           and isinstance(t.get("traceID"), str)]
    for index, hex_id in enumerate(ids):
        progress.missing = f"{len(ids) - index} of {len(ids)} traces"
        progress.spans.extend(one(hex_id.rjust(32, "0")))


def fetch_spans(backend: str, url: str, *, trace_id: str | None = None,
                run_id: str | None = None, since: datetime | None = None,
                project: str | None = None, experiment: str | None = None,
                service: str | None = None, headers: Mapping[str, str] | None = None,
                timeout: float = DEFAULT_TIMEOUT, verify: bool = True,
                max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                max_requests: int = DEFAULT_MAX_REQUESTS,
                clock: Callable[[], float] | None = None) -> list[SpanData]:
    """The spans ``backend`` (one of :data:`BACKENDS`) at ``url`` (its base URL) holds
    for one trace (``trace_id``: 32 hex digits, or MLflow's ``tr-...``), one run
    (``run_id``: the whole traces holding it) or every run since ``since``.

    Selectors: ``project`` (Phoenix; default ``"default"``), ``experiment`` (MLflow:
    id or name, needed without ``trace_id``), ``service`` (Jaeger: needed without
    ``trace_id``; Tempo: optional). ``headers`` are sent with every request (for
    credentials; never shown in a message) and never to another origin: a redirect
    is followed only within the URL's scheme, host and port (or from ``http`` on
    port 80 to ``https`` on 443 of the same host), at most five times.

    Bounds: ``timeout`` seconds for the whole fetch (every connection, send and
    receive, every page and trace; a large ``since`` read needs a larger one),
    ``max_body_bytes`` per answer, ``max_requests`` per fetch. ``verify=False`` skips
    the TLS certificate check (a test server's self-signed certificate). ``clock``
    (monotonic seconds, default :func:`time.monotonic`) is for tests.

    Returns the spans (possibly none: the caller says nothing was found). Raises
    :class:`BackendError` (one line) for an unreachable backend, a refused request
    (401/403), an unknown project, experiment or trace; its
    :class:`~cupellation.exceptions.RedirectRefusedError` for a redirect elsewhere,
    :class:`~cupellation.exceptions.MalformedAnswerError` for an answer that is not
    well-formed HTTP, :class:`~cupellation.exceptions.FetchLimitError` for a bound
    reached before anything whole was read and
    :class:`~cupellation.exceptions.PartialFetchError` (holding what was read) for
    one reached after; :class:`~cupellation.exceptions.DecodeError` for an answer
    that is not the backend's.

    .. versionadded:: 0.3

    .. versionchanged:: 0.4
       One deadline for the whole fetch, ``max_body_bytes``, ``max_requests``,
       ``verify`` and ``clock``; redirects only within the URL's origin.
    """
    _check_request(backend, url, (trace_id, run_id, since, project, experiment, service))
    _check_limits(backend, timeout, max_body_bytes, max_requests)
    limits = Limits(timeout=timeout, max_body_bytes=max_body_bytes,
                    max_requests=max_requests, verify=bool(verify),
                    clock=clock or time.monotonic)
    client = Client(backend, url, headers or {}, limits)
    progress = _Progress()
    try:
        if backend == "phoenix":
            _phoenix(client, progress, project or DEFAULT_PHOENIX_PROJECT, trace_id, run_id, since)
        elif backend == "mlflow":
            _mlflow(client, progress, experiment, trace_id, since)
        elif backend == "jaeger":
            _jaeger(client, progress, service, trace_id, run_id, since)
        else:
            _tempo(client, progress, trace_id, run_id, since, service)
    except Stop as stop:
        raise _stopped(backend, stop, progress, client.requests,
                       run_id if trace_id is None else None, since) from None
    return _of_run(progress.spans, run_id if trace_id is None else None)


class _Progress:
    """What a fetch has read so far, and what it has not (in words)."""

    def __init__(self) -> None:
        self.spans: list[SpanData] = []
        self.missing = "everything asked for"


def _of_run(spans: list[SpanData], run_id: str | None) -> list[SpanData]:
    """The spans of the traces that hold ``run_id`` (all of them without one)."""
    if run_id is None:
        return spans
    traces = {s.trace_id for s in spans if s.attributes.get(RUN_ID) == run_id}
    return [s for s in spans if s.trace_id in traces]


def _stopped(backend: str, stop: Stop, progress: _Progress, requests: int,
             run_id: str | None, since: datetime | None) -> FetchLimitError:
    """The error for a bound reached: partial when something was read."""
    hint = ("; a large --since read needs a larger --timeout"
            if stop.limit == "timeout" and since is not None else "")
    if not progress.spans:
        return FetchLimitError(f"{backend}: {stop.message}; nothing whole was read "
                               f"({requests} request(s) made){hint}", limit=stop.limit)
    spans = _of_run(progress.spans, run_id)
    return PartialFetchError(
        f"{backend}: {stop.message} after {requests} request(s) and {len(spans)} span(s) "
        f"read; not read: {progress.missing}{hint}", limit=stop.limit, spans=spans,
        missing=progress.missing, requests=requests)


def _check_request(backend: str, url: str, selectors: tuple[Any, ...]) -> None:
    trace_id, run_id, since, project, experiment, service = selectors
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


def _check_limits(backend: str, timeout: float, max_body_bytes: int,
                  max_requests: int) -> None:
    if not timeout > 0 or timeout == float("inf"):
        raise BackendError(f"{backend}: the timeout must be a positive number of seconds")
    for name, value in (("max_body_bytes", max_body_bytes), ("max_requests", max_requests)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BackendError(f"{backend}: {name} must be a positive whole number "
                               f"(got {value!r})")
