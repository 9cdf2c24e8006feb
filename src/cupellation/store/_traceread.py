"""Runs read back from ``otel_traces``: the spans of the runs asked for, their attribute
strings typed back, rebuilt by the same span decoder as ``report --from`` a trace file.

The Collector's ``clickhouse`` exporter keeps every span and event attribute as a string
(pdata's ``AsString``). Each is read back by the type of what it carries: an attribute
name maps to a flat key through the span mapping's own inverse (``cupel.run.session_id``
-> ``session_id``, ``cupel.exclusion.item_tokens`` -> ``item.tokens``), and the flat key
has the declared type the log decoder uses (:func:`~cupellation.store.typed_flat`); the
span-only attributes (the integrity checks, the columns layout's counts, utilisation) have
theirs here; an attribute that is not ``cupel.*`` stays text, and a ``cupel.*`` one of no
known key is guessed as the log decoder guesses. The columns layout's chunks are text
(their JSON keeps its own types). The span decoder then checks what it checks on any
trace: the digest, the integrity counts, the parts and the sequence.

Runs are chosen in SQL on the root span (``cupel.pipeline``): its time (``Timestamp``,
the span's start), ``ServiceName``, ``cupel.run.id``, the run information
(``cupel.run.session_id``, ``user_id``, ``conversation_id``) and the pipeline
description (``cupel.run.pipeline.*``). What the spans hide from SQL (the columns
layout's items: reason, kind, content) is checked in Python on each run read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Final

from .._report import ReportBuilder
from ..events import RunCompleted, RunFailed, RunStarted
from ..logs import LoggedRun
from ..otel import RebuiltRun, SpanData, SpanEventData, runs_from_spans
from ..otel._columns import (
    BYTE_COUNT,
    CHUNK_COUNT,
    LAYOUT,
    PART_COUNT,
    PART_INDEX,
    is_chunk_attribute,
)
from ..otel._names import (
    CHECK_COUNT,
    CHECK_TEXT,
    EXCLUSION_COUNT,
    EXCLUSION_EVENT,
    INCLUDED_EVENT,
    LIST_ATTRIBUTES,
    OUTCOME,
    ROOT_SPAN,
    RUN_ID,
    STAGE_EXACT,
    STAGE_PREFIX,
    STAGE_START_SEQ,
    UTILIZATION,
    exclusion_key,
    included_key,
    other_flat,
    run_flat,
    stage_flat,
)
from ._accel import INDEXED_READ
from ._query import EARLIEST_STORED, LATEST_STORED, RunQuery, stored_window
from ._values import Kind, kind_of, typed_text

__all__ = ["SPAN_COLUMNS", "TIME_SLACK", "in_window", "keeps_run", "logged_run",
           "read_trace_runs", "span_from_row", "trace_selection"]

#: How far a root span's start may lie from the run's ``started_at``: the SQL time bounds
#: are widened by it, and each run read is checked on its ``started_at`` (as a file is).
TIME_SLACK: Final = timedelta(minutes=5)
_SPECIAL: Final[Mapping[str, Kind]] = {
    OUTCOME: Kind.TEXT, STAGE_EXACT: Kind.TEXT, LAYOUT: Kind.TEXT,
    CHECK_COUNT: Kind.INT, CHECK_TEXT: Kind.INT, EXCLUSION_COUNT: Kind.INT,
    CHUNK_COUNT: Kind.INT, PART_COUNT: Kind.INT, BYTE_COUNT: Kind.INT, PART_INDEX: Kind.INT,
    UTILIZATION: Kind.FLOAT, **dict.fromkeys(LIST_ATTRIBUTES, Kind.JSON)}
_MARK: Final = object()


def _flat_key(carrier: str, name: str) -> str | None:
    """The flat key attribute ``name`` carries on ``carrier`` (a span or event name),
    found by the span mapping's own inverse."""
    if carrier == EXCLUSION_EVENT:
        return exclusion_key(name)
    if carrier == INCLUDED_EVENT:
        return included_key(name)
    if carrier in (ROOT_SPAN, ROOT_SPAN + ".part"):
        flats = run_flat({name: _MARK, "cupel.run.start_seq": 0})
    elif carrier.startswith(STAGE_PREFIX):
        flats = stage_flat({name: _MARK, STAGE_START_SEQ: 0}, "")
    else:
        flats = [other_flat(carrier, {name: _MARK}, "")]
    return next((key for flat in flats for key, value in flat.items() if value is _MARK),
                None)


@lru_cache(maxsize=8192)
def _kind(carrier: str, name: str) -> Kind:
    special = _SPECIAL.get(name)
    if special is not None:
        return special
    if not name.startswith("cupel.") or is_chunk_attribute(name) is not None:
        return Kind.TEXT
    key = _flat_key(carrier, name)
    return Kind.GUESS if key is None else kind_of(key)


def _typed(carrier: str, attributes: Mapping[str, str]) -> dict[str, Any]:
    return {name: typed_text(_kind(carrier, name), text) for name, text in attributes.items()}


def _as_dict(value: Any) -> Mapping[str, str]:
    return value if isinstance(value, Mapping) else dict(value)


#: The columns :func:`span_from_row` reads, in its order.
SPAN_COLUMNS: Final = ("TraceId", "SpanId", "ParentSpanId", "SpanName",
                       "toUnixTimestamp64Nano(Timestamp)", "Duration", "SpanAttributes",
                       "`Events.Name`", "arrayMap(t -> toUnixTimestamp64Nano(t), "
                       "`Events.Timestamp`)", "`Events.Attributes`")


def span_from_row(row: Sequence[Any]) -> SpanData:
    """One ``otel_traces`` row (:data:`SPAN_COLUMNS`) as the decoder's span."""
    trace_id, span_id, parent, name, start, duration, attributes, names, times, event_attrs = row
    carrier = str(name)
    span_carrier = carrier if not carrier.startswith(STAGE_PREFIX) else STAGE_PREFIX
    events = tuple(
        SpanEventData(name=str(event), attributes=_typed(
            STAGE_PREFIX if str(event).startswith(STAGE_PREFIX) else str(event),
            _as_dict(values)), timestamp_ns=int(at))
        for event, at, values in zip(names, times, event_attrs, strict=False))
    return SpanData(name=carrier, attributes=_typed(span_carrier, _as_dict(attributes)),
                    events=events, trace_id=str(trace_id) or None,
                    span_id=str(span_id) or None, parent_span_id=str(parent) or None,
                    start_ns=int(start), end_ns=int(start) + int(duration))


def _attr(key: str) -> str:
    return f"SpanAttributes['{key}']"


def _widened_window(query: RunQuery) -> tuple[datetime | None, datetime | None, bool]:
    """The query's window as :func:`~._query.stored_window` gives it, less a bound
    whose widening by :data:`TIME_SLACK` would leave DateTime64's span: that is no
    bound (this selection is a superset, each run is checked after)."""
    since, until, empty = stored_window(query.since, query.until)
    if since is not None and since <= EARLIEST_STORED + TIME_SLACK:
        since = None
    if until is not None and until > LATEST_STORED - TIME_SLACK:
        until = None
    return since, until, empty


def trace_selection(query: RunQuery, traces: str) -> tuple[str, dict[str, Any]]:
    """The SQL (and parameters) of the runs in ``traces`` that ``query`` may keep:
    ``(run_id, first span start)``, newest first. A superset: item filters (reason,
    kind, content, match) are left to the check on each run read."""
    root = f"SpanName = '{ROOT_SPAN}'"
    where = [f"{_attr(RUN_ID)} != ''"]
    having: list[str] = []
    params: dict[str, Any] = {"slack": int(TIME_SLACK.total_seconds())}
    since, until, empty = _widened_window(query)
    if empty:
        where.append("0")
    if since is not None:
        where.append("Timestamp >= {since:DateTime64(9, 'UTC')} - toIntervalSecond({slack:Int64})")
        params["since"] = since
    if until is not None:
        having.append("min(Timestamp) <= {until:DateTime64(9, 'UTC')} + "
                      "toIntervalSecond({slack:Int64})")
        params["until"] = until
    if query.services:
        where.append("ServiceName IN {services:Array(String)}")
        params["services"] = list(query.services)
    if query.run_id is not None:
        where.append(f"{_attr(RUN_ID)} = {{run_id:String}}")
        params["run_id"] = query.run_id
    for field in ("session_id", "user_id", "conversation_id"):
        value = getattr(query, field)
        if value is not None:
            having.append(f"countIf({root} AND {_attr('cupel.run.' + field)} = "
                          f"{{{field}:String}}) > 0")
            params[field] = value
    if query.strategy is not None:
        having.append(f"countIf({root} AND arrayExists((k, v) -> startsWith(k, "
                      "'cupel.run.pipeline.') AND positionCaseInsensitiveUTF8(v, "
                      "{strategy:String}) > 0, mapKeys(SpanAttributes), "
                      "mapValues(SpanAttributes))) > 0")
        params["strategy"] = query.strategy
    sql = (f"SELECT {_attr(RUN_ID)} AS run, min(Timestamp) AS at FROM {traces} "
           f"WHERE {' AND '.join(where)} GROUP BY run"
           + (f" HAVING {' AND '.join(having)}" if having else "")
           + " ORDER BY at DESC, run" + INDEXED_READ)
    return sql, params


def read_trace_runs(rows: Iterable[Sequence[Any]], digest_key: bytes | str | None
                    ) -> list[RebuiltRun]:
    """The runs of ``rows`` (``otel_traces`` rows as :data:`SPAN_COLUMNS`), rebuilt by
    the span decoder."""
    spans = [span_from_row(row) for row in rows]
    return runs_from_spans(spans, digest_key=digest_key) if spans else []


def _first(events: tuple[Any, ...], kind: type) -> Any:
    return next((event for event in events if isinstance(event, kind)), None)


def logged_run(run: RebuiltRun, source: str, *, keep_events: bool = False,
               keep_candidates: bool = False) -> LoggedRun:
    """A run rebuilt from spans as the log reader's :class:`~cupellation.logs.LoggedRun`
    (its report and verification the span decoder's; ``line`` 1: spans have no line)."""
    events = run.events
    candidates: tuple[Any, ...] = ()
    if keep_candidates:
        builder = ReportBuilder()
        for event in events:
            builder.add(event)
        candidates = tuple(builder.candidates())
    return LoggedRun(
        run_id=run.run_id, report=run.report, started=_first(events, RunStarted),
        completed=_first(events, RunCompleted), failed=_first(events, RunFailed),
        source=source, line=1, event_count=len(events),
        events=events if keep_events else (), verification=run.verification,
        digest=run.digest, candidates=candidates)


def in_window(run: LoggedRun, since: datetime | None, until: datetime | None) -> bool:
    """True when the run's ``started_at`` lies within ``since``/``until`` (as the log
    reader decides it: a run with no start is outside any window)."""
    if since is None and until is None:
        return True
    started = run.started_at
    if started is None:
        return False
    return not ((since is not None and started < since)
                or (until is not None and started > until))


def _text(value: Any) -> str:
    # As the store holds it: the Collector writes a bool with Go's AsString.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def keeps_run(run: LoggedRun, query: RunQuery) -> bool:
    """True when ``run`` passes the query's run filters (session, user, conversation,
    reason, kind, strategy) as the store's SQL decides them on logged rows: the
    session, user and conversation ``run_started``'s (exact); a reason an exclusion's
    name; a kind an included or excluded item's kind as written; the strategy text
    found, ignoring case, in a ``pipeline.*`` value."""
    started = run.started
    for field in ("session_id", "user_id", "conversation_id"):
        wanted = getattr(query, field)
        if wanted is not None and (started is None or getattr(started, field) != wanted):
            return False
    if query.reason is not None and not any(entry.reason.name == query.reason
                                            for entry in run.report.excluded):
        return False
    kind = query.kind
    if kind is not None and not (
            any(str(entry.item.kind) == kind for entry in run.report.included)
            or any(str(entry.item.kind) == kind for entry in run.report.excluded)):
        return False
    if query.strategy is not None:
        needle = query.strategy.lower()
        values = () if started is None else started.pipeline.values()
        if not any(needle in _text(value).lower() for value in values):
            return False
    return True
