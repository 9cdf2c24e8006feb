"""``cupellation stats`` and :func:`~cupellation.store.fleet_stats`: every figure computed
in SQL equals the same count computed in Python from the files that were loaded, for a
generated fleet of several services, days and policies; runs the store holds only in
part are counted as structurally incomplete, by cause."""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation.cli import main
from cupellation.store import (
    PROJECTIONS,
    Store,
    _stats,
    exact_low_quantile,
    fleet_stats,
    open_store,
)

from ._runs import write_random_log

_SERVICES = ("billing-agent", "search-agent", "triage-agent")
_DAY0 = datetime(2026, 11, 20, tzinfo=UTC)


def _shifted(path: Path, day: int, seed: int) -> list[dict[str, Any]]:
    """Move every run of the log at ``path`` to ``day`` days after the first day (a
    random hour each), rewriting ``started_at``; returns the log's records."""
    rng = random.Random(seed)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]
    for record in records:
        if record["type"] == "run_started":
            moment = _DAY0 + timedelta(days=day, hours=rng.randrange(24),
                                       seconds=rng.randrange(3600))
            record["started_at"] = moment.isoformat().replace("+00:00", "Z")
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return records


def _fleet(store: Store, tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    """Three services' logs over three days (random policies, failed runs, overflows),
    loaded into ``store``; the records per service."""
    fleet: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for number, (service, day) in enumerate((s, d) for s in _SERVICES for d in range(3)):
        path = tmp_path / f"{service}-{day}.jsonl"
        write_random_log(path, seed=100 + number, runs=12)
        fleet[service] += _shifted(path, day, seed=number)
        store.load([path], service=service)
    return fleet


def _started(records: list[dict[str, Any]]) -> dict[str, datetime]:
    return {r["run_id"]: datetime.fromisoformat(r["started_at"].replace("Z", "+00:00"))
            for r in records if r["type"] == "run_started"}


def test_every_figure_equals_the_count_from_the_files(store: Store, tmp_path: Path) -> None:
    """Exclusions by day, service, reason and kind; utilisation quantiles per service;
    failures by error; overflow events; the top sources: all equal what Python counts
    from the same files, and an intact fleet has no incomplete run."""
    fleet = _fleet(store, tmp_path)
    stats = fleet_stats(store, bucket="day", top=5)

    exclusions: Counter[tuple[datetime, str, str, str]] = Counter()
    utilisation: dict[str, list[float]] = defaultdict(list)
    failures: Counter[tuple[str, str]] = Counter()
    sources: Counter[str] = Counter()
    source_reasons: dict[str, Counter[str]] = defaultdict(Counter)
    runs = overflows = 0
    for service, records in fleet.items():
        started = _started(records)
        budgets = {r["run_id"]: r["budget.max_tokens"] for r in records
                   if r["type"] == "run_started"}
        runs += len(started)
        for record in records:
            kind = record["type"]
            if kind == "item_excluded":
                day = started[record["run_id"]].replace(hour=0, minute=0, second=0,
                                                        microsecond=0)
                exclusions[(day, service, record["reason.name"],
                            record.get("item.kind", ""))] += 1
                sources[record.get("item.source", "")] += 1
                source_reasons[record.get("item.source", "")][record["reason.name"]] += 1
            elif kind == "run_completed" and budgets[record["run_id"]] > 0:
                utilisation[service].append(
                    record["included_tokens"] / budgets[record["run_id"]])
            elif kind == "run_failed":
                failures[(service, record["error_type"])] += 1
            elif kind == "overflow":
                overflows += 1

    assert stats.runs == runs
    assert stats.incomplete_runs == 0
    assert not stats.incomplete_causes
    assert stats.digests_checked is False
    assert stats.failed_runs == sum(failures.values())
    assert stats.overflow_events == overflows
    assert {(e.bucket, e.service, e.reason, e.kind): e.count
            for e in stats.exclusions} == dict(exclusions)
    assert {(f.service, f.error_type): f.runs for f in stats.failures} == dict(failures)
    for row in stats.utilization:
        values = utilisation[row.service]
        assert row.runs == len(values)
        assert (row.p50, row.p90, row.p99) == tuple(
            exact_low_quantile(values, level) for level in (0.5, 0.9, 0.99))
        assert (row.minimum, row.maximum) == (min(values), max(values))
    assert {u.service for u in stats.utilization} == set(utilisation)
    expected_top = sorted(sources.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert [(s.source, s.count) for s in stats.top_sources] == expected_top
    for source in stats.top_sources:
        counts = source_reasons[source.source]
        assert source.top_reason == max(counts, key=lambda name: (counts[name], name))


def test_filters_narrow_to_a_service_and_a_day(store: Store, tmp_path: Path) -> None:
    """``services`` and ``since``/``until`` keep only the runs of that service started in
    the window (a run's rows carry its start), and hour buckets split a day."""
    fleet = _fleet(store, tmp_path)
    since, until = _DAY0 + timedelta(days=1), _DAY0 + timedelta(days=2) - timedelta(seconds=1)
    stats = fleet_stats(store, services=["search-agent"], since=since, until=until,
                        bucket="hour")
    started = _started(fleet["search-agent"])
    chosen = {run for run, at in started.items() if since <= at <= until}
    assert stats.runs == len(chosen) > 0
    excluded = [r for r in fleet["search-agent"]
                if r["type"] == "item_excluded" and r["run_id"] in chosen]
    assert sum(e.count for e in stats.exclusions) == len(excluded)
    assert {e.service for e in stats.exclusions} <= {"search-agent"}
    hours = {started[r["run_id"]].replace(minute=0, second=0, microsecond=0)
             for r in excluded}
    assert {e.bucket for e in stats.exclusions} == hours


def test_runs_held_in_part_are_counted_incomplete_by_cause(store: Store,
                                                            tmp_path: Path) -> None:
    """A run missing a middle row (a gap), one missing its end, one with a repeated row
    and one whose exclusion rows disagree with its end event's count are each counted
    as structurally incomplete, under their cause; the others are not."""
    path = tmp_path / "fleet.jsonl"
    write_random_log(path, seed=7, runs=30)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_run[record["run_id"]].append(record)
    long_runs = [run for run, rows in by_run.items()
                 if len(rows) > 6 and rows[-1]["type"] == "run_completed"]
    with_exclusion = [run for run in long_runs
                      if any(r["type"] == "item_excluded" for r in by_run[run])]
    gap, no_end, repeated = long_runs[:3]
    disagree = next(run for run in with_exclusion if run not in (gap, no_end, repeated))
    def stage_row(run: str) -> int:  # a row whose loss or repeat changes no item count
        return next(i for i, r in enumerate(by_run[run]) if r["type"] == "stage_completed")

    by_run[gap].pop(stage_row(gap))
    by_run[no_end].pop()
    rows = by_run[disagree]
    rows.remove(next(r for r in rows if r["type"] == "item_excluded"))
    for seq, row in enumerate(rows):  # renumbered: no gap, only the count disagrees
        row["seq"] = seq
    path.write_text("".join(json.dumps(r) + "\n" for rows in by_run.values() for r in rows),
                    encoding="utf-8")
    store.load([path], service="svc")
    # The live path (as the Collector) does not skip a repeated row.
    store.write_records([by_run[repeated][stage_row(repeated)]], service="svc")

    stats = fleet_stats(store)
    assert stats.runs == 30
    assert stats.incomplete_runs == 4
    assert dict(stats.incomplete_causes) == {
        "sequence gap or repeat": 2, "no end event": 1,
        "item rows disagree with the end event": 1}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=4, allow_nan=False), min_size=1,
                max_size=40))
def test_the_python_quantile_is_clickhouses(store_for_quantiles: Store,
                                            values: list[float]) -> None:
    """:func:`exact_low_quantile` computes what ClickHouse's ``quantilesExactLow`` does,
    so the file-side checks above compare like with like."""
    row = store_for_quantiles.session.rows(
        "SELECT quantilesExactLow(0.5, 0.9, 0.99)(x) FROM "
        "(SELECT arrayJoin({v:Array(Float64)}) AS x)", {"v": values})[0][0]
    assert list(row) == [exact_low_quantile(values, level) for level in (0.5, 0.9, 0.99)]


@pytest.fixture(scope="module")
def store_for_quantiles(store_dir: Path) -> Any:
    """A store kept open for the module's property test (Hypothesis reruns the test
    function, not its function-scoped fixtures)."""
    opened = open_store(f"chdb://{store_dir}?database=quantiles")
    try:
        yield opened
    finally:
        opened.close()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_command_prints_what_the_library_computes(
        store: Store, store_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``stats --format json`` is the library's value; ``--format csv`` its tables; the
    text output starts with the incomplete count and says digests were not checked;
    ``--html`` writes a page and says so; ``--strict`` exits 3 on an incomplete run."""
    _fleet(store, tmp_path)
    url = store.url
    code, out, _ = _cli(capsys, "stats", "--store", url, "--format", "json", "--top", "3")
    assert code == 0
    assert json.loads(out) == fleet_stats(store, top=3).to_dict()

    code, out, _ = _cli(capsys, "stats", "--store", url, "--format", "csv",
                        "--table", "failures")
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "service,error_type,runs"
    assert sum(int(line.rsplit(",", 1)[1]) for line in lines[1:]) == \
        fleet_stats(store).failed_runs

    page = tmp_path / "stats.html"
    code, out, err = _cli(capsys, "stats", "--store", url, "--html", str(page))
    assert code == 0
    assert f"wrote {page}" in err
    assert out.splitlines()[0].startswith(f"{fleet_stats(store).runs} run(s)")
    assert "digests not checked" in out.splitlines()[0]
    assert "<svg" in page.read_text(encoding="utf-8")

    first = next(iter(fleet_stats(store).exclusions))
    store.session.command(
        f"ALTER TABLE {store.logs_table} DELETE WHERE LogAttributes['type'] = "
        "'run_started' AND ServiceName = {s:String} SETTINGS mutations_sync = 1",
        {"s": first.service})
    code, out, err = _cli(capsys, "stats", "--store", url, "--strict")
    assert code == 3
    assert "not whole" in err
    assert "no run_started" in out.splitlines()[0]


def test_exit_codes_for_nothing_and_bad_input(store: Store,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """An empty store exits 1 ("no runs found"); a bad URL, a negative ``--top`` and a
    bad time exit 2 with one line, never a traceback."""
    code, _, err = _cli(capsys, "stats", "--store", store.url)
    assert code == 1
    assert "no runs found" in err
    for argv in (["--store", "ftp://nowhere/x"], ["--store", store.url, "--top", "-1"],
                 ["--store", store.url, "--since", "yesterday-ish"]):
        code, _out, err = _cli(capsys, "stats", *argv)
        assert code == 2, argv
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err


def test_a_window_reads_whole_hours_from_the_projections_and_equals_the_rows(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``since``/``until`` inside hours, every figure equals the one computed from
    the table's rows of the window alone (the plain filter, no projection), runs whose
    rows scatter over several hours (one with a sequence number repeated in another
    hour) included; and every query reads one of the projections, for the hours the
    window holds whole."""
    _fleet(store, tmp_path)
    logs = store.logs_table
    scattered = "mapUpdate(LogAttributes, map('run_id', concat(LogAttributes['run_id'], '-s')))"
    store.session.command(
        f"INSERT INTO {logs} (Timestamp, ServiceName, Body, LogAttributes) SELECT "
        "Timestamp + toIntervalMinute(toUInt64OrZero(LogAttributes['seq']) * 7), "
        f"ServiceName, Body, {scattered} FROM {logs}")
    store.session.command(
        f"INSERT INTO {logs} (Timestamp, ServiceName, Body, LogAttributes) SELECT "
        "Timestamp + toIntervalHour(2), ServiceName, Body, LogAttributes FROM "
        f"{logs} WHERE endsWith(LogAttributes['run_id'], '-s') AND LogAttributes['seq'] = '3'")
    since = _DAY0 + timedelta(days=1, hours=5, minutes=17, microseconds=3)
    until = _DAY0 + timedelta(days=2, hours=3, seconds=59)
    queries: list[tuple[str, Any]] = []
    original = store.session.rows

    def recording(sql: str, parameters: Any = None) -> Any:
        queries.append((sql, parameters))
        return original(sql, parameters)

    monkeypatch.setattr(store.session, "rows", recording)
    windowed = fleet_stats(store, since=since, until=until, bucket="hour", top=5)
    monkeypatch.setattr(store.session, "rows", original)
    for sql, parameters in queries:
        if "otel_traces" in sql:  # the count of runs only traced: no projection there
            continue
        plan = "\n".join(str(row[0]) for row in original(
            f"EXPLAIN projections = 1 {sql}", parameters))
        assert {name for name, _ in PROJECTIONS} & set(
            re.findall(r"ReadFromMergeTree \(([^)]*)\)", plan)), plan

    plain = _stats._where

    def rows_only(since: Any, until: Any, services: Any) -> Any:
        where = plain(None, None, services)
        return replace(where, whole=where.whole + " AND Timestamp >= {since:DateTime64(9, "
                       "'UTC')} AND Timestamp <= {until:DateTime64(9, 'UTC')}",
                       params={**where.params, "since": since, "until": until})

    monkeypatch.setattr(_stats, "_where", rows_only)
    expected = fleet_stats(store, since=since, until=until, bucket="hour", top=5)
    assert windowed.runs > 0
    assert dict(windowed.incomplete_causes).get("sequence gap or repeat", 0) > 0
    assert windowed.to_dict() == expected.to_dict()
