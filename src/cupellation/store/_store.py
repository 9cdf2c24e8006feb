"""The :class:`Store`: one object per open store, its loading, its writing of rows as the
Collector writes them, and its reading of runs through the log reader."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Final

from ..logs import LogReader
from ._accel import INDEXED_READ, add_accelerators
from ._client import StoreLocation, StoreSession, open_session
from ._load import LoadStats, load_files
from ._query import RunQuery, batches, run_selection
from ._runs import StoreRuns, span_rows, trace_blocks
from ._schema import LOGS_TABLE, TRACES_TABLE
from ._traceread import trace_selection
from ._values import attributes_of, canonical_line

__all__ = ["Store", "open_store"]

#: How many runs' rows one query fetches.
_RUNS_PER_FETCH: Final = 200
_LOG_COLUMNS: Final = ("Timestamp", "TraceId", "SpanId", "TraceFlags", "SeverityText",
                       "SeverityNumber", "ServiceName", "Body", "ScopeName", "LogAttributes")


class _Lines(io.RawIOBase):
    """A read-only binary stream over an iterator of byte blocks (the log reader's
    input, fed by queries as it reads)."""

    def __init__(self, blocks: Iterator[bytes], name: str) -> None:
        super().__init__()
        self.name = name  # what the reader calls the source
        self._blocks = blocks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            block = next(self._blocks, None)
            if block is None:
                return 0
            self._pending = block
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


class Store:
    """An open fleet store: the Collector's ``otel_logs``/``otel_traces`` in ClickHouse,
    embedded (chDB) or on a server. Build it with :func:`open_store`; close it (or use
    it as a context manager). ``session`` runs SQL (``session.rows``,
    ``session.command``, parameters bound by the server)."""

    def __init__(self, session: StoreSession) -> None:
        self.session = session

    @property
    def location(self) -> StoreLocation:
        """Where the store is."""
        return self.session.location

    @property
    def url(self) -> str:
        """The store's URL as given (never with a password)."""
        return self.session.location.url

    @property
    def logs_table(self) -> str:
        """The quoted ``database.otel_logs``."""
        return self.session.table(LOGS_TABLE)

    def close(self) -> None:
        """Close the store (an embedded one frees the process's chDB engine)."""
        self.session.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # -- getting data in ------------------------------------------------------------

    def load(self, paths: Sequence[str | os.PathLike[str]], *, service: str = "",
             stream: bool | None = None,
             progress: Callable[[LoadStats], object] | None = None) -> LoadStats:
        """Load audit logs or event files (plain or gzip) with ClickHouse's readers;
        loading a file again adds nothing. See :mod:`cupellation.store`."""
        return load_files(self.session, paths, service=service, stream=stream,
                          progress=progress)

    def write_records(self, records: Iterable[Mapping[str, Any]], *, service: str = "",
                      timestamp: datetime | None = None) -> int:
        """Insert log records (each a flat mapping, as :class:`~cupellation.logs.StructlogSink`
        and the OTLP log exporter emit them, digests included) as the Collector's
        ``clickhouse`` exporter writes them: ``LogAttributes`` every value a string (Go's
        ``AsString``), ``Body`` the event type, ``ServiceName`` the record's ``service`` or
        else ``service``, ``Timestamp`` ``timestamp`` or else the run's ``started_at``
        (when its ``run_started`` is among ``records``). Returns the row count. Rows are
        not checked for being new (this is the live path, as the Collector's)."""
        flats = [dict(record) for record in records]
        starts: dict[Any, datetime] = {
            flat.get("run_id"): datetime.fromisoformat(str(flat["started_at"]).replace(
                "Z", "+00:00")) for flat in flats
            if flat.get("type") == "run_started" and "started_at" in flat}
        rows: list[list[Any]] = []
        for flat in flats:
            attributes = attributes_of(flat)
            when = timestamp or starts.get(flat.get("run_id")) or datetime.now().astimezone()
            failed = flat.get("type") == "run_failed"
            rows.append([when, attributes.get("trace_id", ""), attributes.get("span_id", ""),
                         0, "ERROR" if failed else "INFO", 17 if failed else 9,
                         attributes.get("service", service), attributes.get("type", ""),
                         "cupellation", attributes])
        if rows:
            self.session.insert(LOGS_TABLE, rows, _LOG_COLUMNS)
        return len(rows)

    # -- reading --------------------------------------------------------------------

    def add_accelerators(self, *, materialize: bool = False) -> list[str]:
        """Add cupellation's projections and data-skipping indexes to ``otel_logs`` (and
        the run id's index to ``otel_traces``) when absent (a table cupellation created
        has them; a fleet's Collector made its own without): ``ALTER TABLE … ADD
        PROJECTION/INDEX IF NOT EXISTS``, so running it again changes nothing. Parts
        written later get them; ``materialize`` also builds them for the parts already
        written (``MATERIALIZE …``: a mutation that rewrites every part, waited for).
        Returns the statements run. See ``cupellation/store/_accel.py`` for what each
        is for."""
        return add_accelerators(self.session, self.logs_table, materialize=materialize,
                                traces=self.session.table(TRACES_TABLE))

    def run_ids(self, query: RunQuery | None = None) -> list[tuple[str, datetime]]:
        """The runs ``query`` may keep, newest first: ``(run_id, first Timestamp)``. A
        superset of what the reader keeps (see :mod:`cupellation.store`)."""
        sql, params = run_selection(query or RunQuery(), self.logs_table)
        return [(str(run), at) for run, at in self.session.rows(sql, params)]

    def trace_run_ids(self, query: RunQuery | None = None) -> list[tuple[str, datetime]]:
        """The runs in ``otel_traces`` that ``query`` may keep, newest first: ``(run_id,
        first span start)`` (a superset: see ``_traceread.py``)."""
        sql, params = trace_selection(query or RunQuery(), self.session.table(TRACES_TABLE))
        return [(str(run), at) for run, at in self.session.rows(sql, params)]

    def _logged(self, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` have rows in ``otel_logs``."""
        found: set[str] = set()
        for batch in batches(run_ids, _RUNS_PER_FETCH):
            found.update(str(row[0]) for row in self.session.rows(
                f"SELECT DISTINCT LogAttributes['run_id'] FROM {self.logs_table} WHERE "
                "LogAttributes['run_id'] IN {runs:Array(String)}" + INDEXED_READ,
                {"runs": batch}))
        return found

    def _blocks(self, run_ids: Sequence[str]) -> Iterator[bytes]:
        for batch in batches(run_ids, _RUNS_PER_FETCH):
            rows = self.session.rows(
                f"SELECT LogAttributes FROM {self.logs_table} WHERE LogAttributes['run_id'] "
                "IN {runs:Array(String)} ORDER BY indexOf({runs:Array(String)}, "
                "LogAttributes['run_id']), toUInt64OrZero(LogAttributes['seq'])" + INDEXED_READ,
                {"runs": batch})
            yield b"".join(canonical_line(_as_mapping(row[0])) for row in rows)

    def read_runs(self, query: RunQuery | None = None, *,
                  run_ids: Sequence[str] | None = None, **reader: Any) -> StoreRuns:
        """The runs ``query`` selects (or exactly ``run_ids``), newest first, read as a
        log file is: the same :class:`~cupellation.logs.LogReader` (its options in
        ``reader``: ``keep_events``, ``keep_candidates``, ``digest_key``, ...), the same
        fold, digest check and integrity rules. ``since``/``until``/``run_id`` of the
        query are also given to the reader, so its answer is the file reader's.

        Runs found only in ``otel_traces`` (a fleet exporting spans through the
        Collector, or trace files loaded) come in the same stream, rebuilt by the span
        decoder (``report --from``'s); a run in both tables is read from its logs."""
        query = query or RunQuery()
        if run_ids is not None:
            chosen = list(dict.fromkeys(run_ids))
            logged = self._logged(chosen)
            log_ids = [run for run in chosen if run in logged]
            trace_ids = [run for run in chosen if run not in logged]
            order = {run: k for k, run in enumerate(chosen)}
        else:
            log_runs = self.run_ids(query)
            log_ids = [run for run, _ in log_runs]
            logged = set(log_ids)
            trace_runs = [(run, at) for run, at in self.trace_run_ids(query)
                          if run not in logged]
            trace_ids = [run for run, _ in trace_runs]
            # at DESC, run: the log selection's order (a stable sort keeps the runs'
            # order among equal times)
            newest = sorted(sorted(log_runs + trace_runs, key=lambda pair: pair[0]),
                            key=lambda pair: pair[1], reverse=True)
            order = {run: k for k, (run, _) in enumerate(newest)}
        stream = io.BufferedReader(_Lines(self._blocks(log_ids), self.url))
        reader.setdefault("since", query.since)
        reader.setdefault("until", query.until)
        reader.setdefault("run_id", query.run_id)
        logs = LogReader([stream], rotated=False, **reader)
        traces = trace_blocks(span_rows(self.session, self.session.table(TRACES_TABLE)),
                              trace_ids, self.url, reader)
        return StoreRuns(logs, traces, order, query)


def _as_mapping(value: Any) -> Mapping[str, str]:
    return value if isinstance(value, Mapping) else dict(value)


def open_store(url: str, *, database: str | None = None) -> Store:
    """Open the store at ``url`` — ``chdb:///path/to/dir`` (embedded, in this process)
    or ``http(s)://host:8123/database`` (a ClickHouse server; credentials from
    ``CUPELLATION_STORE_USER`` and ``CUPELLATION_STORE_PASSWORD`` or
    ``CUPELLATION_STORE_PASSWORD_FILE``) — creating ``otel_logs``/``otel_traces``
    when absent. ``database`` wins over the URL's.

    chDB runs one engine per process: opening a second embedded path while one is
    open raises :class:`~cupellation.exceptions.StoreInUseError` (the same path may
    be opened again). Raises :class:`~cupellation.exceptions.StoreSchemaError` for
    tables in the exporter's JSON mode, :class:`~cupellation.exceptions.StoreError`
    when the store cannot be reached, and
    :class:`~cupellation.exceptions.InvalidValueError` for a bad URL (one with a
    password included)."""
    return Store(open_session(url, database=database))
