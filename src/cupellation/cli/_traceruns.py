"""Trace files read by the commands that read logs (``why``, ``audit``, ``replay``,
``diff``, ``report``): each run of an OTLP/JSON or Jaeger trace file becomes a
:class:`~cupellation.logs.LoggedRun`, its report and digest verification the span
decoder's, so a command takes ``out/demo/trace.jsonl`` as it takes an audit log."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ..exceptions import CupelError
from ..logs import LoggedRun, LogReader, ReadStats
from ._logread import UsageError, safe

__all__ = ["TraceAndLogReader", "trace_runs", "with_trace_files"]


def trace_runs(path: str, *, keep_events: bool = False,
               keep_candidates: bool = False) -> tuple[list[LoggedRun], int]:
    """The runs of the trace file ``path`` as logged runs (one line per file: a trace
    file has no line numbers), and how many spans they were rebuilt from. Raises
    :class:`UsageError` naming the file when it cannot be read."""
    from ..otel import read_trace_file  # noqa: PLC0415 - only for trace files
    from ..store import logged_run  # noqa: PLC0415 - the same conversion as a store's

    try:
        rebuilt = read_trace_file(path)
    except (CupelError, OSError, ValueError, RecursionError) as exc:
        raise UsageError(f"cannot read the trace file {safe(path)}: "
                         f"{safe(str(exc), 300)}") from None
    runs = [logged_run(run, path, keep_events=keep_events, keep_candidates=keep_candidates)
            for run in rebuilt]
    return runs, sum(run.span_count for run in rebuilt)


def _wanted(run: LoggedRun, run_id: str | None, since: datetime | None,
            until: datetime | None) -> bool:
    if run_id is not None and run.run_id != run_id:
        return False
    started = run.started_at
    if (since is not None or until is not None) and started is None:
        return False
    if since is not None and started is not None and started < since:
        return False
    return not (until is not None and started is not None and started > until)


class TraceAndLogReader:
    """The runs of the trace files first, then the log reader's; ``stats`` is the log
    reader's, its ``runs`` counting the trace files' runs too."""

    def __init__(self, traces: list[LoggedRun], reader: LogReader, *,
                 run_id: str | None, files: int, spans: int) -> None:
        since, until = reader.time_window
        self._traces = [run for run in traces if _wanted(run, run_id, since, until)]
        self._reader = reader
        self.stats: ReadStats = reader.stats
        # What was read in the unit it was read in (a trace file has no lines).
        self.stats.trace_files += files
        self.stats.spans += spans

    def __iter__(self) -> Iterator[LoggedRun]:
        for run in self._traces:
            self.stats.runs += 1
            yield run
        yield from self._reader


def with_trace_files(reader: LogReader, paths: list[str], options: dict[str, Any]
                     ) -> TraceAndLogReader:
    """``reader`` with the runs of the trace files ``paths`` first, read with the
    reader's ``options`` (``keep_events``, ``keep_candidates``, ``run_id``)."""
    held: list[LoggedRun] = []
    spans = 0
    for path in paths:
        runs, count = trace_runs(path, keep_events=bool(options.get("keep_events")),
                                 keep_candidates=bool(options.get("keep_candidates")))
        held.extend(runs)
        spans += count
    return TraceAndLogReader(held, reader, run_id=options.get("run_id"), files=len(paths),
                             spans=spans)
