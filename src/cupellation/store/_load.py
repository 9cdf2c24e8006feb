"""``store load``: audit logs and event files into ``otel_logs`` (trace files go to
``otel_traces``: ``_traceload.py``), by ClickHouse's own readers.

Each file is read twice by SQL, never line by line in Python. The first pass counts
its lines (blank, records, damaged, other programs') and finds its runs and their
``started_at``, reading only the envelope's keys (no Map: half the CPU of a full
parse); the second is one ``INSERT … SELECT`` that turns each JSON line into
the row the Collector would write: ``JSONExtract(line, 'Map(String, String)')`` is
the flat mapping with every value a string (strings unescaped, numbers as written,
``true``/``false``, lists as compact JSON), the rows of a run already in the store
(same ``run_id`` and ``seq``) are left out, so loading a file again adds nothing.

- On chDB the lines come from the ``file()`` table function (plain or gzip, by the
  file's name).
- On a server, ``file()`` would read the server's disk (ClickHouse Cloud has none):
  the local file is streamed through clickhouse-connect as ``INSERT … FORMAT
  LineAsString`` into a temporary table of the session, which the same two passes
  read.

Rows hold: ``Timestamp`` the run's ``started_at`` (from the file, else from the run's
``run_started`` row already in the store, else the time of the load), so a time
filter never cuts a run; ``Body`` and ``EventName`` empty and ``LogAttributes['type']`` the
event type; ``Body`` the event type; ``ServiceName`` the record's ``service`` when it
has one, else the ``service`` given to the load, else empty; ``TraceId``/``SpanId``
the record's ``trace_id``/``span_id``; ``SeverityText`` ``INFO`` (``ERROR`` for
``run_failed``) with its number; ``ScopeName`` ``cupellation``.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..exceptions import InvalidValueError, StoreError
from ..logs import DamagedLine
from ._accel import INDEXED_READ
from ._client import StoreSession, short_error
from ._schema import LOGS_TABLE
from ._traceload import is_otlp_trace_file, load_trace_source

__all__ = ["LoadStats", "load_files"]

#: How many damaged lines a load names (all are counted).
MAX_DAMAGED_NAMED: Final = 1000
_CHUNK: Final = 8 << 20
_STAGE: Final = "_cupellation_load"
_RUNS: Final = "_cupellation_load_runs"

#: A line's flat mapping, every value a string (the Collector's LogAttributes).
_ATTRS: Final = "JSONExtract(line, 'Map(String, String)')"
_ENVELOPE: Final = ("run_id", "type", "schema", "seq", "started_at")
_ENVELOPE_TYPE: Final = f"Tuple({', '.join(f'{key} String' for key in _ENVELOPE)})"
#: The counting pass reads only the envelope's keys: one simdjson pass that builds no
#: Map. Their values are converted to strings as in ``_ATTRS``, and a key written twice
#: in a line is read from its first occurrence in both (a Map's ``m['key']`` finds the
#: first), so both passes agree on which lines are records and on their run.
_SCAN_KEYS: Final = f"JSONExtract(line, '{_ENVELOPE_TYPE}')"
#: A record: the envelope present and ``seq`` a non-negative int64.
_VALID: Final = ("(a['run_id'] != '' AND a['type'] != '' AND a['schema'] != '' "
                 "AND match(a['seq'], '^(0|[1-9][0-9]{0,17})$'))")
#: The same test on the counting pass's envelope (a named tuple, not a Map).
_SCAN_VALID: Final = _VALID.replace("a['", "a.").replace("']", "")
#: A line that looks like one of ours (the log reader's markers): damaged, not other.
_OURS: Final = ("(position(line, '\"schema\"') > 0 OR position(line, '\"run_id\"') > 0 "
                "OR position(line, '\"seq\"') > 0 OR position(line, 'cupel.') > 0)")


@dataclass(slots=True)
class LoadStats:
    """What a load did, per line: ``loaded`` rows inserted, ``skipped`` records already
    in the store (a file loaded again), ``damaged`` lines that hold (or look like) a
    record but could not be read (the first :data:`MAX_DAMAGED_NAMED` named in
    ``damaged_lines``), ``other_lines`` from other programs and ``blank_lines``.
    ``lines`` is their sum; ``runs`` counts the runs the files hold. Trace files
    (OTLP/JSON) load spans into ``otel_traces``: ``spans_loaded`` rows inserted,
    ``spans_skipped`` spans already there; their lines are counted as above (a line
    holds many spans)."""

    sources: list[str] = field(default_factory=list)
    lines: int = 0
    loaded: int = 0
    skipped: int = 0
    damaged: int = 0
    other_lines: int = 0
    blank_lines: int = 0
    runs: int = 0
    spans_loaded: int = 0
    spans_skipped: int = 0
    damaged_lines: list[DamagedLine] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The counts as JSON-native values."""
        return {"sources": list(self.sources), "lines": self.lines, "loaded": self.loaded,
                "skipped": self.skipped, "damaged": self.damaged,
                "other_lines": self.other_lines, "blank_lines": self.blank_lines,
                "runs": self.runs, "spans_loaded": self.spans_loaded,
                "spans_skipped": self.spans_skipped,
                "damaged_lines": [str(line) for line in self.damaged_lines]}


def _scan_sql(source: str) -> str:
    return f"""
SELECT count(), countIf(blank), countIf(valid), countIf(NOT blank AND NOT valid AND ours),
       groupArrayIf({MAX_DAMAGED_NAMED})((n, substring(line, 1, 80)),
                                         NOT blank AND NOT valid AND ours),
       groupUniqArrayIf(a.run_id, valid),
       groupArrayIf((a.run_id, a.started_at), valid AND a.type = 'run_started')
FROM (SELECT n, line, {_SCAN_KEYS} AS a, trimBoth(line) = '' AS blank, {_SCAN_VALID} AS valid,
             {_OURS} AS ours FROM {source})"""


def _insert_sql(session: StoreSession, source: str, fresh: bool) -> str:
    """The INSERT … SELECT of a file's records (``fresh``: none of its runs is stored
    yet, so no row needs checking against the store)."""
    logs, runs = session.table(LOGS_TABLE), _RUNS
    # The check against stored rows reads LogAttributes['run_id']: ClickHouse uses the
    # run-id index only when that lookup is not rewritten into a subcolumn read (see
    # store/_accel.py's INDEXED_READ), hence the setting on a load that checks.
    present = "" if fresh else f"""
WHERE (a['run_id'], a['seq']) NOT IN (
    SELECT LogAttributes['run_id'], LogAttributes['seq'] FROM {logs}
    WHERE LogAttributes['run_id'] IN (SELECT run_id FROM {runs}))"""
    return f"""
INSERT INTO {logs} (Timestamp, TraceId, SpanId, TraceFlags, SeverityText, SeverityNumber,
                    ServiceName, Body, ScopeName, LogAttributes)
SELECT ifNull(r.started, now64(9)), a['trace_id'], a['span_id'], 0,
       if(a['type'] = 'run_failed', 'ERROR', 'INFO'), if(a['type'] = 'run_failed', 17, 9),
       if(a['service'] != '', a['service'], {{service:String}}), a['type'], 'cupellation', a
FROM (SELECT {_ATTRS} AS a FROM {source} WHERE {_VALID}) AS l
LEFT JOIN (SELECT run_id, max(started) AS started FROM {runs} GROUP BY run_id) AS r
    ON r.run_id = l.a['run_id']{present}
SETTINGS join_use_nulls = 1{"" if fresh else ", optimize_functions_to_subcolumns = 0"}"""


def _present_count(session: StoreSession) -> int:
    rows = session.rows(f"SELECT count() FROM {session.table(LOGS_TABLE)} WHERE "
                        f"LogAttributes['run_id'] IN (SELECT run_id FROM {_RUNS}){INDEXED_READ}")
    return int(rows[0][0])


def _stage_runs(session: StoreSession, run_ids: Sequence[str],
                starts: Sequence[tuple[str, str]]) -> None:
    """The file's runs and their start, in a temporary table of the session (a start
    already in the store counts when the file has none)."""
    session.command(f"CREATE TEMPORARY TABLE IF NOT EXISTS {_RUNS} "
                    "(run_id String, started Nullable(DateTime64(9, 'UTC'))) ENGINE = Memory")
    session.command(f"TRUNCATE TABLE {_RUNS}")
    known = dict(starts)
    rows = [(run_id, known.get(run_id, "")) for run_id in run_ids]
    if rows:
        session.command(
            f"INSERT INTO {_RUNS} SELECT t.1, parseDateTime64BestEffortOrNull(t.2, 9, 'UTC') "
            "FROM (SELECT arrayJoin({rows:Array(Tuple(String, String))}) AS t)",
            {"rows": rows})
    stored = session.rows(
        f"SELECT LogAttributes['run_id'], min(Timestamp) FROM {session.table(LOGS_TABLE)} "
        f"WHERE Body = 'run_started' AND LogAttributes['run_id'] IN "
        f"(SELECT run_id FROM {_RUNS} WHERE started IS NULL) GROUP BY 1{INDEXED_READ}")
    if stored:
        session.command(
            f"INSERT INTO {_RUNS} SELECT t.1, t.2 FROM (SELECT arrayJoin("
            "{rows:Array(Tuple(String, DateTime64(9, 'UTC')))}) AS t)",
            {"rows": [(str(run_id), started) for run_id, started in stored]})


def _load_one(session: StoreSession, name: str, source: tuple[str, dict[str, Any]],
              service: str, stats: LoadStats) -> None:
    sql, bound = source
    lines, blank, valid, damaged, named, run_ids, starts = session.rows(
        _scan_sql(sql), bound)[0]
    stats.sources.append(name)
    stats.lines += int(lines)
    stats.blank_lines += int(blank)
    stats.damaged += int(damaged)
    stats.other_lines += int(lines) - int(blank) - int(valid) - int(damaged)
    stats.runs += len(run_ids)
    room = MAX_DAMAGED_NAMED - len(stats.damaged_lines)
    stats.damaged_lines.extend(
        DamagedLine(name, int(number), "not a readable record (not JSON, or no "
                    f"run_id/type/schema/seq): {str(text)!r}")
        for number, text in sorted(named)[:max(0, room)])
    if not valid:
        return
    _stage_runs(session, list(run_ids), [(str(r), str(s)) for r, s in starts])
    before = _present_count(session)
    session.command(_insert_sql(session, sql, fresh=not before), {**bound, "service": service})
    # A first load of these runs (the usual case) inserts every record: counting the
    # rows again would read the whole Map column of what was just written.
    added = _present_count(session) - before if before else int(valid)
    stats.loaded += added
    stats.skipped += int(valid) - added


#: chDB reads the file itself (``{path:String}`` bound by the engine).
_FILE_SOURCE: Final = ("(SELECT _row_number + 1 AS n, line FROM file({path:String}, "
                       "'LineAsString', 'line String'))")


def _chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as raw:
        head = raw.read(2)
        raw.seek(0)
        stream: Any = gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw
        while True:
            block = stream.read(_CHUNK)
            if not block:
                return
            yield block


def _stream_source(session: StoreSession, path: str) -> tuple[str, dict[str, Any]]:
    """Stream a local file into the session's temporary staging table."""
    session.command(f"CREATE TEMPORARY TABLE IF NOT EXISTS {_STAGE} (line String) "
                    "ENGINE = Memory")
    session.command(f"TRUNCATE TABLE {_STAGE}")
    try:
        session.client.raw_insert(_STAGE, ["line"], insert_block=_chunks(path),
                                  fmt="LineAsString")
    except Exception as exc:
        raise StoreError(f"{session.location.url}: loading {path}: {short_error(exc)}") from None
    return (f"(SELECT rowNumberInAllBlocks() + 1 AS n, line FROM {_STAGE} "
            "SETTINGS max_threads = 1)"), {}


def load_files(session: StoreSession, paths: Sequence[str | os.PathLike[str]], *,
               service: str = "", stream: bool | None = None,
               progress: Callable[[LoadStats], object] | None = None) -> LoadStats:
    """Load audit logs and event files (plain or gzip) into ``otel_logs`` and OTLP/JSON
    trace files into ``otel_traces`` (see ``_traceload.py``); see the module's
    docstring. ``stream`` forces the server path (the file streamed through
    the client) on chDB too; by default chDB reads the file with ``file()``."""
    stats = LoadStats()
    streaming = (not session.location.embedded) if stream is None else stream
    for entry in paths:
        path = os.path.abspath(os.fspath(entry))
        if not os.path.isfile(path):
            raise InvalidValueError("paths", os.fspath(entry), "is not a readable file")
        source = (_stream_source(session, path) if streaming
                  else (_FILE_SOURCE, {"path": path}))
        if is_otlp_trace_file(path):
            load_trace_source(session, os.fspath(entry), source, stats)
        else:
            _load_one(session, os.fspath(entry), source, service, stats)
        if progress is not None:
            progress(stats)
    return stats
