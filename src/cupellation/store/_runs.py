"""The runs a store gives back: those in ``otel_logs`` through the log reader, and those
only in ``otel_traces`` through the span decoder, in one stream, newest first.

**A run in both tables is read from its logs** (the log records carry every event with
its own sequence number; spans may have lost some to a limit): its spans are not read,
and are not compared. A run only in ``otel_traces`` is read from its spans.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, Final

from ..logs import LoggedRun, LogReader, ReadStats
from ._accel import INDEXED_READ
from ._query import RunQuery, batches
from ._traceread import (
    SPAN_COLUMNS,
    in_window,
    keeps_run,
    logged_run,
    read_trace_runs,
)

__all__ = ["StoreRuns", "span_rows", "trace_blocks"]

#: How many runs' spans one query fetches.
_RUNS_PER_FETCH: Final = 200
_LAST: Final = float("inf")

Fetch = Callable[[Sequence[str]], Sequence[Sequence[Any]]]


def trace_blocks(fetch: Fetch, run_ids: Sequence[str], source: str, options: dict[str, Any]
                 ) -> Iterator[LoggedRun]:
    """The runs ``run_ids`` rebuilt from their spans (``fetch``: a batch of run ids ->
    its ``otel_traces`` rows), in the order of ``run_ids``."""
    for batch in batches(run_ids, _RUNS_PER_FETCH):
        rebuilt = {run.run_id: run for run in read_trace_runs(
            fetch(batch), options.get("digest_key"))}
        for run_id in batch:
            if run_id in rebuilt:
                yield logged_run(rebuilt[run_id], source,
                                 keep_events=bool(options.get("keep_events")),
                                 keep_candidates=bool(options.get("keep_candidates")))


def span_rows(session: Any, traces: str) -> Fetch:
    """A ``fetch`` reading the spans of a batch of runs from ``traces``."""
    def fetch(batch: Sequence[str]) -> Sequence[Sequence[Any]]:
        return session.rows(  # type: ignore[no-any-return]
            f"SELECT {', '.join(SPAN_COLUMNS)} FROM {traces} WHERE "
            "SpanAttributes['cupel.run.id'] IN {runs:Array(String)}" + INDEXED_READ,
            {"runs": list(batch)})
    return fetch


class StoreRuns:
    """The runs of a store read as one log reader would give them: iterate for
    :class:`~cupellation.logs.LoggedRun` objects, newest first (or in the order of
    the run ids asked for); ``stats`` is the log reader's, counting the trace runs
    too; ``time_window`` the reader's."""

    def __init__(self, logs: LogReader, traces: Iterator[LoggedRun], order: dict[str, int],
                 query: RunQuery) -> None:
        self._logs = logs
        self._traces = traces
        self._order = order
        self._query = query
        self.stats: ReadStats = logs.stats

    @property
    def time_window(self) -> tuple[datetime | None, datetime | None]:
        """``since`` and ``until`` as read (None where not given)."""
        return self._logs.time_window

    def _kept_traces(self) -> Iterator[LoggedRun]:
        since, until = self._logs.time_window
        for run in self._traces:
            if not in_window(run, since, until):
                continue  # as the log reader leaves a run outside the window uncounted
            self.stats.runs += 1
            if keeps_run(run, self._query):
                yield run
            else:
                self.stats.runs -= 1
                self.stats.runs_filtered_out += 1

    def __iter__(self) -> Iterator[LoggedRun]:
        rank = self._order.get

        def ranked(runs: Iterator[LoggedRun]) -> Iterator[tuple[float, LoggedRun]]:
            for run in runs:
                yield rank(run.run_id, _LAST), run

        merged = heapq.merge(ranked(iter(self._logs)), ranked(self._kept_traces()),
                             key=lambda pair: pair[0])
        for _, run in merged:
            yield run

