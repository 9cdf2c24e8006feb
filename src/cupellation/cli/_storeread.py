"""``--store URL`` for the log-reading commands: the runs come from a fleet store, chosen
in SQL by the command's own filters, and are read by the same log reader as a file."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..exceptions import CupelError
from ..logs import LogReader, as_datetime
from ._runfilters import filters_given

__all__ = ["STORE_HELP", "add_store_arguments", "is_otlp_lines", "read_store"]

STORE_HELP = ("read the runs from a fleet store instead of log files: chdb:///path/to/dir "
              "(embedded) or http(s)://host:8123/database (credentials from "
              "CUPELLATION_STORE_USER and CUPELLATION_STORE_PASSWORD or "
              "CUPELLATION_STORE_PASSWORD_FILE); the command's filters run in SQL")


def add_store_arguments(parser: argparse.ArgumentParser, *, service: bool = True) -> None:
    """``--store URL`` and, unless the command has its own, ``--service NAME``."""
    parser.add_argument("--store", metavar="URL", help=STORE_HELP)
    if service:
        parser.add_argument("--service", action="append", default=[], metavar="NAME",
                            help="with --store: only runs of this service (the Collector's "
                                 "ServiceName; repeatable)")


def is_otlp_lines(path: str) -> bool:
    """True for a trace file ``store load`` takes: OTLP/JSON lines."""
    from ..store import is_otlp_trace_file  # noqa: PLC0415 - the store's own test

    return is_otlp_trace_file(path)


def _services(args: argparse.Namespace) -> tuple[str, ...]:
    value = getattr(args, "service", None)
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


@contextmanager
def read_store(args: argparse.Namespace, url: str, options: Mapping[str, Any],
               usage: type[Exception]) -> Iterator[LogReader]:
    """The runs the command's filters select from the store at ``url`` (its logs, and
    the runs found only in its traces), read as a :class:`~cupellation.logs.LogReader`
    (``options``: the reader's, plus ``run_ids`` to read exactly those runs, and
    ``select_by_item`` to keep only runs that may hold an item ``--content``/``--match``
    names). A store that cannot be opened or a bad filter is a ``usage`` error (one
    line, exit 2)."""
    try:
        from ..store import RunQuery, open_store  # noqa: PLC0415 - the store extra is optional
    except ImportError:  # pragma: no cover - the extra brings it
        raise usage("--store needs the store extra: pip install 'cupellation[store]'"
                    ) from None
    rest = dict(options)
    run_ids = rest.pop("run_ids", None)
    # Only why selects runs by item content: replay --match replays every run.
    by_item = bool(rest.pop("select_by_item", False))
    try:
        query = RunQuery(since=as_datetime(rest.pop("since", None), "since"),
                         until=as_datetime(rest.pop("until", None), "until"),
                         services=_services(args), run_id=rest.pop("run_id", None),
                         content=getattr(args, "content", None) if by_item else None,
                         match=getattr(args, "match", None) if by_item else None,
                         **filters_given(args))
        store = open_store(url)
    except CupelError as exc:
        raise usage(str(exc)) from None
    try:
        # A StoreRuns reads as a LogReader does (iteration, stats, time_window): its
        # runs come from otel_logs and, for runs found only there, from otel_traces.
        yield store.read_runs(query, run_ids=run_ids, **rest)  # type: ignore[misc]
    finally:
        store.close()
