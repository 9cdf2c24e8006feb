"""Fleet statistics answered in SQL: exclusions by reason, kind and service over time,
budget utilisation percentiles, failures and overflows, the sources most often left out.

Unlike ``audit``, ``report`` or ``why``, :func:`fleet_stats` never brings a run back
to Python: ClickHouse counts the Collector's ``otel_logs`` rows where they are. So it
cannot check digests (that needs every line of a run, canonically encoded) and says
so (:attr:`FleetStats.digests_checked` is always False). What SQL *can* check, it
does, per run: one ``run_started`` and one end event, sequence numbers without gaps
or repeats, and item rows that agree with the counts the end event announced. Runs
that fail a check are counted in :attr:`FleetStats.incomplete_runs` (by cause in
:attr:`FleetStats.incomplete_causes`); their rows still count in the figures, as they
are the rows the store holds, and the command's first line says how many there are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from ..exceptions import InvalidValueError
from ..otel._names import RUN_ID
from ._accel import HOUR, INDEXED_READ, OURS_KEYS, RUN_AGGREGATES
from ._query import stored_window
from ._schema import TRACES_TABLE

if TYPE_CHECKING:
    from ._store import Store

__all__ = [
    "BUCKETS",
    "ExclusionCount",
    "FailureCount",
    "FleetStats",
    "SourceCount",
    "UtilizationStats",
    "fleet_stats",
]

#: The time buckets :func:`fleet_stats` groups exclusions by (``none``: one bucket).
BUCKETS: Final = ("hour", "day", "week", "none")
Bucket = Literal["hour", "day", "week", "none"]
#: Each bucket computed from the hour (the exclusions projection's time key).
_BUCKET_SQL: Final = {"hour": HOUR, "day": f"toStartOfDay({HOUR})",
                      "week": f"toMonday({HOUR})", "none": "toDateTime(0)"}
#: The quantiles of budget utilisation reported, as (label, level).
QUANTILES: Final = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
#: Detail levels whose runs log one row per exclusion / per inclusion.
_EXCLUSION_LEVELS: Final = ("StageAndExclusions", "Full")


def _attr(key: str) -> str:
    return f"LogAttributes['{key}']"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExclusionCount:
    """How many items were left out for ``reason`` of ``kind`` by ``service`` in the
    time bucket starting at ``bucket`` (None when not bucketed)."""

    bucket: datetime | None
    service: str
    reason: str
    kind: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UtilizationStats:
    """Budget utilisation (included tokens over ``budget.max_tokens``, the
    specification's ``BudgetUtilization``) over a service's completed runs:
    exact quantiles (ClickHouse's ``quantilesExactLow``, as :func:`exact_low_quantile`
    computes them), minimum and maximum."""

    service: str
    runs: int
    p50: float
    p90: float
    p99: float
    minimum: float
    maximum: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureCount:
    """Runs of ``service`` that failed with ``error_type`` (``PinnedBudgetError``: the
    pinned items alone were over budget; ``BudgetOverflowError``: overflow under the
    Throw strategy)."""

    service: str
    error_type: str
    runs: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceCount:
    """An item source left out ``count`` times, most often for ``top_reason``."""

    source: str
    count: int
    top_reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetStats:
    """What :func:`fleet_stats` found. ``runs`` counts the runs with rows in the
    window; ``incomplete_runs`` those failing a structural check (causes in
    ``incomplete_causes``, as (cause, runs) pairs: ``no run_started``, ``no end
    event``, ``sequence gap or repeat``, ``item rows disagree with the end event``; a
    run may have several).
    ``overflow_events`` counts Truncate-strategy overflows (the run went on).
    ``digests_checked`` is always False: statistics read no digest.
    ``trace_only_runs`` counts the runs in the window that ``otel_traces`` holds and
    ``otel_logs`` does not (a fleet exporting spans only): the statistics, computed
    over the logs' rows, do not count them; ``audit --store`` reads them."""

    bucket: Bucket
    runs: int
    completed_runs: int
    failed_runs: int
    incomplete_runs: int
    incomplete_causes: tuple[tuple[str, int], ...]
    overflow_events: int
    exclusions: tuple[ExclusionCount, ...]
    utilization: tuple[UtilizationStats, ...]
    failures: tuple[FailureCount, ...]
    top_sources: tuple[SourceCount, ...]
    digests_checked: bool = False
    trace_only_runs: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (times as ISO 8601 text)."""
        return {
            "bucket": self.bucket, "runs": self.runs, "completed_runs": self.completed_runs,
            "failed_runs": self.failed_runs, "incomplete_runs": self.incomplete_runs,
            "incomplete_causes": dict(self.incomplete_causes),
            "overflow_events": self.overflow_events, "digests_checked": self.digests_checked,
            "trace_only_runs": self.trace_only_runs,
            "exclusions": [{"bucket": None if e.bucket is None else e.bucket.isoformat(),
                            "service": e.service, "reason": e.reason, "kind": e.kind,
                            "count": e.count} for e in self.exclusions],
            "utilization": [{"service": u.service, "runs": u.runs, "p50": u.p50,
                             "p90": u.p90, "p99": u.p99, "min": u.minimum,
                             "max": u.maximum} for u in self.utilization],
            "failures": [{"service": f.service, "error_type": f.error_type, "runs": f.runs}
                         for f in self.failures],
            "top_sources": [{"source": s.source, "count": s.count,
                             "top_reason": s.top_reason} for s in self.top_sources],
        }


def exact_low_quantile(values: Sequence[float], level: float) -> float:
    """ClickHouse's ``quantileExactLow(level)``, which :func:`fleet_stats` asks for, so a
    file-side check computes the very same figure: of the n sorted values, the lower
    median for level 0.5 (index ``(n - 1) // 2``), else the one at ``floor(level * n)``
    (the last for level 1)."""
    ordered = sorted(values)
    if level == 0.5:
        return ordered[(len(ordered) - 1) // 2]
    return ordered[min(int(level * len(ordered)), len(ordered) - 1)]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Rows:
    """Which rows a statistic counts, as SQL conditions whose union is exactly the
    rows of the window: ``whole`` the hours the window holds whole (which the
    projections, keyed by the hour, answer), ``edges`` the rest of the window (its
    partial first and last hours, read from the table; None without a window)."""

    whole: str
    edges: str | None
    params: dict[str, Any]

    @property
    def parts(self) -> tuple[str, ...]:
        """The conditions, each one SELECT's WHERE (their rows never overlap)."""
        return (self.whole,) if self.edges is None else (self.whole, self.edges)


def _where(since: datetime | None, until: datetime | None, services: Sequence[str]
           ) -> _Rows:
    """The row filter: cupellation's rows (a run id and a sequence number) in the time
    window (a row's ``Timestamp`` is its run's start) of the given services. Written
    as the projections' keys (``_accel.py``) so that ClickHouse answers from them: an
    hour whose rows all fall in the window is selected by the hour alone. Its last
    row is at most 1 ns before the next hour, and ``until`` (a Python datetime) is a
    whole number of microseconds, so ``hour <= until - 1 h`` is exactly "the hour
    ends by ``until``"."""
    keys = list(OURS_KEYS)
    params: dict[str, Any] = {}
    if services:
        keys.append("ServiceName IN {services:Array(String)}")
        params["services"] = list(services)
    since, until, empty = stored_window(since, until)
    if empty:
        keys.append("0")
    if since is None and until is None:
        return _Rows(whole=" AND ".join(keys), edges=None, params=params)
    hours: list[str] = []
    window: list[str] = []
    if since is not None:
        hours.append(f"{HOUR} >= {{since:DateTime64(9, 'UTC')}}")
        window.append("Timestamp >= {since:DateTime64(9, 'UTC')}")
        params["since"] = since
    if until is not None:
        hours.append(f"{HOUR} <= {{last_hour:DateTime64(9, 'UTC')}}")
        window.append("Timestamp <= {until:DateTime64(9, 'UTC')}")
        params["until"], params["last_hour"] = until, _hour_before(until)
    whole = " AND ".join((*keys, *hours))
    edges = " AND ".join((*keys, *window, f"NOT ({' AND '.join(hours)})"))
    return _Rows(whole=whole, edges=edges, params=params)


def _hour_before(until: datetime) -> datetime:
    """``until`` less one hour; within the first hour of year 1 (``--until 0001-01-01``)
    ``until`` itself: ClickHouse's DateTime64 starts in 1900, so no stored row is that
    early and the bound selects nothing either way."""
    try:
        return until - timedelta(hours=1)
    except OverflowError:
        return until


def _run_table(logs: str, rows: _Rows) -> str:
    """One row per run: its service, structure checks and the figures of its start and
    end events (the runs projection's aggregates; the event type is ``Body``, which
    every writer sets to it). In a window, each run's rows are first grouped by hour
    (whole hours from the projection, the edges from the table): a run whose rows
    in the window share one hour (every run ``store load`` wrote) is that group;
    the few others are grouped again from the table's rows, as aggregates such as
    ``uniqExact`` cannot be added up across groups."""
    columns = ", ".join(f"{expression} AS {alias}" for alias, expression in RUN_AGGREGATES)
    run, seq = _attr("run_id"), OURS_KEYS[1]
    if rows.edges is None:
        return (f"SELECT {run} AS run_id, {columns} FROM {logs} WHERE {rows.whole} "
                f"GROUP BY {run}, {seq}")
    groups = " UNION ALL ".join(
        f"SELECT {run} AS run_id, {seq} AS has_seq, {columns} FROM {logs} WHERE {part} "
        f"GROUP BY {run}, {seq}, {HOUR}" for part in rows.parts)
    single = ", ".join(f"any({alias}) AS {alias}" for alias, _ in RUN_AGGREGATES)
    window = " OR ".join(f"({part})" for part in rows.parts)
    return (f"SELECT run_id, {single} FROM ({groups}) GROUP BY run_id, has_seq "
            "HAVING count() = 1 UNION ALL "
            f"SELECT {run} AS run_id, {columns} FROM {logs} WHERE ({window}) AND ({run}, {seq}) "
            f"IN (SELECT run_id, has_seq FROM ({groups}) GROUP BY run_id, has_seq "
            f"HAVING count() > 1) GROUP BY {run}, {seq}")


_CAUSES: Final = (
    ("no run_started", "starts != 1"),
    ("no end event", "ends != 1"),
    ("sequence gap or repeat", "seqs != row_count OR max_seq + 1 != row_count"),
    ("item rows disagree with the end event",
     f"ends = 1 AND failed = 0 AND ((detail IN {_EXCLUSION_LEVELS!r} AND "
     "ifNull(excluded_declared, -1) != excluded_rows) OR (detail = 'Full' AND "
     "ifNull(included_declared, -1) != included_rows))"),
)


def fleet_stats(store: Store, *, since: datetime | None = None,
                until: datetime | None = None, services: Sequence[str] = (),
                bucket: Bucket = "day", top: int = 10) -> FleetStats:
    """Fleet statistics over the store's ``otel_logs``, computed in SQL (see the
    module docstring for what is and is not checked). ``since``/``until`` bound a
    run's start (its rows' ``Timestamp``), ``services`` the ``ServiceName``;
    ``bucket`` groups exclusions by hour, day, week or not at all; ``top`` is how many
    excluded sources to list."""
    if bucket not in BUCKETS:
        raise InvalidValueError("bucket", bucket, f"must be one of {', '.join(BUCKETS)}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise InvalidValueError("top", top, "must be an integer >= 0")
    logs = store.logs_table
    rows = _where(since, until, services)
    params = rows.params
    runs_sql = _run_table(logs, rows)
    session = store.session
    cause_sql = ", ".join(f"countIf({test})" for _, test in _CAUSES)
    any_cause = " OR ".join(f"({test})" for _, test in _CAUSES)
    totals = session.rows(
        f"SELECT count(), countIf(ends = 1 AND failed = 0), countIf(failed > 0), "
        f"countIf({any_cause}), sum(overflows), {cause_sql} FROM ({runs_sql})", params)[0]
    runs, completed, failed, incomplete, overflows = (int(v or 0) for v in totals[:5])
    causes = tuple((name, int(count))
                   for (name, _), count in zip(_CAUSES, totals[5:], strict=True) if count)
    return FleetStats(
        bucket=bucket, runs=runs, completed_runs=completed, failed_runs=failed,
        incomplete_runs=incomplete, incomplete_causes=causes,
        overflow_events=overflows,
        exclusions=_exclusions(store, rows, bucket),
        utilization=_utilization(store, runs_sql, params),
        failures=tuple(FailureCount(service=str(service), error_type=str(error), runs=int(n))
                       for service, error, n in session.rows(
                           f"SELECT service, error_type, count() AS n FROM ({runs_sql}) "
                           "WHERE failed > 0 GROUP BY service, error_type "
                           "ORDER BY n DESC, service, error_type", params)),
        top_sources=_sources(store, rows, top),
        trace_only_runs=_trace_only_runs(store, since, until, services))


def _trace_only_runs(store: Store, since: datetime | None, until: datetime | None,
                     services: Sequence[str]) -> int:
    """The runs whose first span (in ``otel_traces``) starts in the window, of the
    services, that have no row in ``otel_logs``."""
    since, until, empty = stored_window(since, until)
    if empty:
        return 0
    run = f"SpanAttributes['{RUN_ID}']"
    where, having = [f"{run} != ''"], ["1"]
    params: dict[str, Any] = {}
    if services:
        where.append("ServiceName IN {services:Array(String)}")
        params["services"] = list(services)
    if since is not None:
        having.append("at >= {since:DateTime64(9, 'UTC')}")
        params["since"] = since
    if until is not None:
        having.append("at <= {until:DateTime64(9, 'UTC')}")
        params["until"] = until
    runs = (f"SELECT {run} AS run, min(Timestamp) AS at FROM "
            f"{store.session.table(TRACES_TABLE)} WHERE {' AND '.join(where)} "
            f"GROUP BY run HAVING {' AND '.join(having)}")
    found = store.session.rows(
        f"SELECT count() FROM ({runs}) WHERE run NOT IN (SELECT LogAttributes['run_id'] "
        f"FROM {store.logs_table} WHERE LogAttributes['run_id'] IN (SELECT run FROM "
        f"({runs})))" + INDEXED_READ, params)
    return int(found[0][0])


def _counted(store: Store, rows: _Rows, keys: tuple[tuple[str, str], ...]) -> str:
    """``item_excluded`` rows counted (``n``) by ``keys`` ((alias, expression) pairs),
    over every part of ``rows`` (a count adds up across them)."""
    select = ", ".join(f"{expression} AS {alias}" for alias, expression in keys)
    group = ", ".join(alias for alias, _ in keys)
    parts = " UNION ALL ".join(
        f"SELECT {select}, count() AS n FROM {store.logs_table} "
        f"WHERE {part} AND Body = 'item_excluded' GROUP BY {group}" for part in rows.parts)
    return f"SELECT {group}, sum(n) AS n FROM ({parts}) GROUP BY {group}"


def _exclusions(store: Store, rows: _Rows, bucket: Bucket) -> tuple[ExclusionCount, ...]:
    counted = _counted(store, rows, (
        ("bucket", _BUCKET_SQL[bucket]), ("service", "ServiceName"),
        ("reason", _attr("reason.name")), ("kind", _attr("item.kind"))))
    found = store.session.rows(
        f"{counted} ORDER BY bucket, service, n DESC, reason, kind", rows.params)
    return tuple(ExclusionCount(bucket=None if bucket == "none" else _utc(at),
                                service=str(service), reason=str(reason), kind=str(kind),
                                count=int(n)) for at, service, reason, kind, n in found)


def _utilization(store: Store, runs_sql: str, params: Mapping[str, Any]
                 ) -> tuple[UtilizationStats, ...]:
    levels = ", ".join(str(level) for _, level in QUANTILES)
    rows = store.session.rows(
        f"SELECT service, count() AS n, quantilesExactLow({levels})(u), min(u), max(u) FROM "
        f"(SELECT service, included_tokens / max_tokens AS u FROM ({runs_sql}) "
        "WHERE ends = 1 AND failed = 0 AND max_tokens > 0 AND included_tokens IS NOT NULL) "
        "GROUP BY service ORDER BY service", params)
    return tuple(UtilizationStats(service=str(service), runs=int(n), p50=float(q[0]),
                                  p90=float(q[1]), p99=float(q[2]), minimum=float(low),
                                  maximum=float(high)) for service, n, q, low, high in rows)


def _sources(store: Store, rows: _Rows, top: int) -> tuple[SourceCount, ...]:
    if top == 0:
        return ()
    counted = _counted(store, rows, (("source", _attr("item.source")),
                                     ("reason", _attr("reason.name"))))
    # The top reason is the most frequent, ties to the greatest name: argMax over
    # (count, reason) makes it exact and deterministic (topK is approximate).
    found = store.session.rows(
        f"SELECT source, sum(n) AS total, argMax(reason, (n, reason)) FROM ({counted}) "
        "GROUP BY source ORDER BY total DESC, source LIMIT {top:UInt32}",
        {**rows.params, "top": top})
    return tuple(SourceCount(source=str(source), count=int(n), top_reason=str(reason))
                 for source, n, reason in found)


def _utc(moment: Any) -> datetime:
    """A bucket's start as an aware UTC datetime (the client may give a naive one)."""
    if isinstance(moment, datetime):
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    if isinstance(moment, date):  # toMonday of the hour is a Date
        return datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
    return datetime.fromtimestamp(float(moment), UTC)
