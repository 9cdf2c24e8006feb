"""``cupellation report --from BACKEND URL``: a run rebuilt from what a trace backend
holds, fetched over HTTP(S) with :func:`cupellation.otel.fetch_spans`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..events import RunStarted
from ._logread import UsageError, safe

__all__ = ["Fetched", "add_remote_arguments", "check_remote_arguments", "fetch_runs",
           "headers_of"]

#: The options that only mean something with --from.
_REMOTE_ONLY = ("trace", "since", "project", "experiment", "service", "header", "timeout",
                "max_body_bytes", "max_requests", "insecure")


def add_remote_arguments(parser: argparse.ArgumentParser) -> None:
    """The --from options of ``report``."""
    from ..otel._fetch import BACKENDS, DEFAULT_PHOENIX_PROJECT  # noqa: PLC0415 - start-up

    group = parser.add_argument_group(
        "from a trace backend", "--from BACKEND with one URL (the backend's base URL, "
        "http:// or https://) instead of files: fetch one trace (--trace), one run (--run) "
        "or the runs since a time (--since) and rebuild them")
    group.add_argument("--from", dest="from_backend", choices=BACKENDS, metavar="BACKEND",
                       help=f"the backend the URL is: {', '.join(BACKENDS)}")
    group.add_argument("--trace", metavar="ID",
                       help="the trace's id (32 hex digits; MLflow's tr-... too)")
    group.add_argument("--since", metavar="TIME",
                       help="the runs since TIME: ISO 8601 (2026-11-26T10:00:00Z) or a span "
                            "back from now (90s, 15m, 2h, 7d)")
    group.add_argument("--project", help=f"Phoenix: the project (default: "
                                         f"{DEFAULT_PHOENIX_PROJECT}, where docker/'s collector "
                                         "sends)")
    group.add_argument("--experiment", help="MLflow: the experiment's id or name (needed "
                                            "with --run or --since)")
    group.add_argument("--service", help="Jaeger: the service the spans were sent as "
                                         "(needed with --run or --since); Tempo: optional")
    group.add_argument("--header", action="append", default=[], metavar="NAME:VALUE",
                       help="send this header with every request, e.g. credentials "
                            "(NAME=VALUE too; repeatable; never shown in a message)")
    group.add_argument("--timeout", type=float, metavar="SECONDS",
                       help="seconds for the whole fetch: connecting, every request, page "
                            "and trace (default 30); a large --since read needs a larger "
                            "--timeout. Past it, what was read is shown and the command "
                            "exits 3 saying what is missing")
    group.add_argument("--max-body-bytes", type=int, metavar="BYTES",
                       help="the largest answer read (default 268435456, 256 MiB)")
    group.add_argument("--max-requests", type=int, metavar="COUNT",
                       help="the most requests one fetch makes: pages, trace ids, "
                            "redirects (default 10000)")
    group.add_argument("--insecure", action="store_true", default=None,
                       help="do not check the server's TLS certificate (a test server "
                            "with a self-signed one); says so on standard error")


def check_remote_arguments(args: argparse.Namespace) -> None:
    """Usage errors: --from without exactly one URL; its options without --from."""
    if args.from_backend is None:
        # With --store, --service picks the Collector's ServiceName instead.
        given = [name for name in _REMOTE_ONLY
                 if getattr(args, name) not in (None, [])
                 and not (name == "service" and getattr(args, "store", None))]
        if given:
            raise UsageError(f"--{given[0]} needs --from BACKEND URL")
        return
    if len(args.logs) != 1:
        raise UsageError(f"--from {args.from_backend} takes one URL (got {len(args.logs)} "
                         "arguments)")
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout: must be a positive number of seconds (got "
                         f"{args.timeout})")
    for name in ("max_body_bytes", "max_requests"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')}: must be a positive whole number "
                             f"(got {value})")


def headers_of(values: Sequence[str]) -> dict[str, str]:
    """``NAME:VALUE`` options as headers. A malformed one is named by its position
    and name only: its value may be a credential."""
    headers = {}
    for position, text in enumerate(values, start=1):
        cut = min((at for at in (text.find(":"), text.find("=")) if at >= 0), default=-1)
        name, value = (text[:cut], text[cut + 1:]) if cut >= 0 else (text, "")
        if cut < 0 or not name.strip() or any(c in name.strip() for c in " \r\n\t"):
            raise UsageError(f"--header #{position}: expected NAME:VALUE or NAME=VALUE (the "
                             "value is not shown)")
        if any(c in value for c in "\r\n"):
            raise UsageError(f"--header #{position} ({safe(name.strip())}): its value must "
                             "be one line (the value is not shown)")
        headers[name.strip()] = value.strip()
    return headers


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetched:
    """What ``report --from`` fetched: the runs as (run id, report, budget, its
    run_started event or None) in the order they started, a phrase saying where they
    were looked for, and, when a bound of the fetch (deadline, body size, request
    count) stopped it after part of the data was read, one line saying what is
    missing (else None)."""

    runs: list[tuple[str, Any, Any, Any]]
    where: str
    shortfall: str | None = None


def fetch_runs(args: argparse.Namespace) -> Fetched:
    """The runs the backend holds for the request (see :class:`Fetched`). A bound
    reached before any run was read is a one-line error (exit 2)."""
    from ..exceptions import PartialFetchError  # noqa: PLC0415
    from ..otel import runs_from_spans  # noqa: PLC0415
    from ..otel._fetch import fetch_spans, parse_since  # noqa: PLC0415

    since = parse_since(args.since) if args.since is not None else None
    if args.trace is None and args.run is None and since is None:
        raise UsageError(f"--from {args.from_backend}: say what to fetch: --trace ID, "
                         "--run RUN_ID or --since TIME")
    headers = headers_of(args.header)
    options: dict[str, Any] = {
        name: getattr(args, name) for name in ("max_body_bytes", "max_requests", "timeout")
        if getattr(args, name) is not None}
    shortfall = None
    try:
        spans = fetch_spans(
            args.from_backend, args.logs[0], trace_id=args.trace,
            run_id=args.run if args.trace is None else None, since=since,
            project=args.project, experiment=args.experiment, service=args.service,
            headers=headers, verify=not args.insecure, **options)
    except PartialFetchError as partial:
        spans, shortfall = list(partial.spans), str(partial)
    where = _where(args)
    runs = []
    for run in runs_from_spans(spans) if spans else []:
        started = next((event for event in run.events if isinstance(event, RunStarted)),
                       None)
        runs.append((run.run_id, run.report, None if started is None else started.budget,
                     started))
    if shortfall is not None and not any(args.run in (None, run[0]) for run in runs):
        # Nothing to show: the run asked for may be in what was not read.
        raise UsageError(f"{shortfall} (no run read {safe(where)})")
    if args.insecure:
        # Said once something was read over it (a failure stays one line).
        print("cupellation report: warning: --insecure: the server's TLS certificate was "
              "not checked (whoever answered in its place got the headers)", file=sys.stderr)
    return Fetched(runs=runs, where=where, shortfall=shortfall)


def _where(args: argparse.Namespace) -> str:
    """Where the runs were looked for, in words."""
    from ..otel._fetch import DEFAULT_PHOENIX_PROJECT  # noqa: PLC0415 - start-up

    selector = (f"project {args.project or DEFAULT_PHOENIX_PROJECT}"
                if args.from_backend == "phoenix"
                else f"experiment {args.experiment}" if args.experiment
                else f"service {args.service}" if args.service else "")
    asked = (f"trace {args.trace}" if args.trace else f"run {args.run}" if args.run
             else f"since {args.since}")
    return f"in {args.from_backend}" + (f" {safe(selector)}" if selector else "") + \
        f" for {safe(asked)}"
