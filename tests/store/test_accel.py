"""The projections and indexes cupellation adds to ``otel_logs``: ``fleet_stats`` is
answered from the projections (checked with ``EXPLAIN``), ``Store.add_accelerators``
adds them to a Collector's table that lacks them (idempotently, columns unchanged,
answers unchanged), and the content prefilter of ``why`` keeps every run it should."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from cupellation.events import content_digest
from cupellation.store import PROJECTIONS, RunQuery, Store, fleet_stats, open_store
from cupellation.store._accel import INDEXED_READ, TRIMMED_DIGESTS
from cupellation.store._query import run_selection
from cupellation.store._schema import logs_ddl

from ._runs import write_random_log


def _plans(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The query plans (``EXPLAIN projections = 1``) of every query ``fleet_stats`` runs
    over ``otel_logs`` alone."""
    seen: list[tuple[str, Mapping[str, Any] | None]] = []
    session = store.session
    original = session.rows

    def recording(sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
        seen.append((sql, parameters))
        return original(sql, parameters)

    monkeypatch.setattr(session, "rows", recording)
    fleet_stats(store, bucket="week", top=3)
    monkeypatch.setattr(session, "rows", original)
    # One query counts the runs only in otel_traces (which holds no projection).
    assert sum("otel_traces" in sql for sql, _ in seen) == 1
    return ["\n".join(str(row[0]) for row in original(f"EXPLAIN projections = 1 {sql}", params))
            for sql, params in seen if "otel_traces" not in sql]


def _loaded(store: Store, tmp_path: Path) -> Path:
    path = tmp_path / "fleet.jsonl"
    write_random_log(path, seed=7, runs=15)
    store.load([path], service="billing-agent")
    return path


def test_fleet_stats_reads_only_the_projections(store: Store, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """On a table cupellation created, every query of ``fleet_stats`` (without a time
    window) reads one of cupellation's projections and never the table's rows: the
    queries are written in forms the projection matcher recognises."""
    _loaded(store, tmp_path)
    plans = _plans(store, monkeypatch)
    assert len(plans) == 5
    names = {name for name, _ in PROJECTIONS}
    for plan in plans:
        read = re.findall(r"ReadFromMergeTree \(([^)]*)\)", plan)
        assert read, plan
        assert set(read) <= names, plan


def _collector_table(store_url: str) -> None:
    """Create the Collector's own ``otel_logs`` (the exporter's DDL, without anything
    cupellation adds) in the URL's database."""
    with open_store(store_url) as opened:
        table = opened.logs_table
        opened.session.command(f"DROP TABLE {table}")
        ddl = "\n".join(line for line in logs_ddl(table).split("\n") if "cupel" not in line)
        opened.session.command(ddl.replace("GRANULARITY 8,\n)", "GRANULARITY 8\n)"))


def test_add_accelerators_to_a_collector_table(store_url: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet's Collector table has no projection: ``fleet_stats`` reads the table.
    ``add_accelerators(materialize=True)`` adds and builds them (the parts already
    written included), running it again changes nothing, the columns stay the same
    and every figure is unchanged."""
    _collector_table(store_url)
    with open_store(store_url) as store:
        columns = store.session.rows(f"DESCRIBE TABLE {store.logs_table}")
        _loaded(store, tmp_path)
        before = fleet_stats(store, bucket="day", top=5).to_dict()
        assert all("ReadFromMergeTree (" + store.logs_table.replace("`", "") + ")" in plan
                   for plan in _plans(store, monkeypatch))
        first = store.add_accelerators(materialize=True)
        assert any("MATERIALIZE PROJECTION" in statement for statement in first)
        store.add_accelerators(materialize=True)
        assert store.session.rows(f"DESCRIBE TABLE {store.logs_table}") == columns
        names = {name for name, _ in PROJECTIONS}
        for plan in _plans(store, monkeypatch):
            assert set(re.findall(r"ReadFromMergeTree \(([^)]*)\)", plan)) <= names, plan
        assert fleet_stats(store, bucket="day", top=5).to_dict() == before


def test_the_content_prefilter_keeps_every_run_with_the_item(store: Store,
                                                              tmp_path: Path) -> None:
    """``run_ids`` with ``content`` or ``match`` (whose rows are first looked up
    through the content indexes) keeps every run the file holds the item in: exactly
    those for ``content``, at least those for ``match`` (a superset, re-checked by the
    reader)."""
    path = _loaded(store, tmp_path)
    holders: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line:
            continue
        record = json.loads(line)
        if "item.content" in record:
            holders.setdefault(record["item.content"], set()).add(record["run_id"])
    contents = sorted(holders)[:5]
    assert contents
    for content in contents:
        assert {run for run, _ in store.run_ids(RunQuery(content=content))} == holders[content]
        expected = {run for text, runs in holders.items() if content in text for run in runs}
        matched = {run for run, _ in store.run_ids(RunQuery(match=re.escape(content)))}
        assert expected <= matched


def test_a_trimmed_items_original_is_found_through_the_digest_index(store: Store) -> None:
    """``run_ids(content=TEXT)`` keeps a run whose item was trimmed from TEXT (its
    metadata holds TEXT's digest, its content does not), and no other run; and each
    condition of the content prefilter is one a data-skipping index answers
    (``EXPLAIN indexes = 1`` names it), so a lookup skips the granules without the item
    instead of reading every row's attributes."""
    original = "the contract of customer 42, in full"
    digest = content_digest(original)
    metadata = json.dumps({"trimmed": [{"original_digest": digest, "tokens": 3}]})
    records: list[dict[str, Any]] = [
        {"run_id": "trimmed-run", "seq": 0, "type": "item_excluded",
         "item.content": "the contract", "item.metadata": metadata},
        {"run_id": "other-run", "seq": 0, "type": "item_excluded",
         "item.content": "something else", "item.metadata": "{}"},
        {"run_id": "exact-run", "seq": 0, "type": "item_included",
         "item.content": original, "item.metadata": "{}"},
    ]
    store.write_records(records, service="s")
    found = {run for run, _ in store.run_ids(RunQuery(content=original))}
    assert found == {"trimmed-run", "exact-run"}
    logs = store.logs_table
    for condition, index in ((f"LogAttributes['item.content'] IN ('{original}')",
                              "idx_cupel_item_content"),
                             (f"has({TRIMMED_DIGESTS}, '{digest}')",
                              "idx_cupel_trimmed_digests")):
        plan = "\n".join(str(row[0]) for row in store.session.rows(
            f"EXPLAIN indexes = 1 SELECT count() FROM {logs} WHERE {condition}"
            + INDEXED_READ))
        assert f"Name: {index}" in plan, plan


def test_a_content_lookup_orders_its_runs_from_the_runs_projection(store: Store,
                                                                  tmp_path: Path) -> None:
    """``run_ids`` of a content lookup with no other row filter reads no row of the
    table for its runs' first ``Timestamp`` (``EXPLAIN projections = 1`` names the runs
    projection only), and its answer is the table's own: every holder of the content,
    newest first, also under ``until``."""
    path = _loaded(store, tmp_path)
    holders: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").split("\n"):
        record = json.loads(line) if line else {}
        if "item.content" in record:
            holders.setdefault(record["item.content"], set()).add(record["run_id"])
    content = max(sorted(holders), key=lambda text: len(holders[text]))
    sql, params = run_selection(RunQuery(content=content), store.logs_table)
    plan = "\n".join(str(row[0]) for row in store.session.rows(
        f"EXPLAIN projections = 1 {sql}", params))
    assert set(re.findall(r"ReadFromMergeTree \(([^)]*)\)", plan)) == {"cupel_runs"}, plan
    firsts: dict[str, datetime] = {str(run): at for run, at in store.session.rows(
        f"SELECT LogAttributes['run_id'], min(Timestamp) FROM {store.logs_table} "
        "GROUP BY 1")}
    expected = sorted(holders[content], key=lambda run: (-firsts[run].timestamp(), run))
    found = store.run_ids(RunQuery(content=content))
    assert [run for run, _ in found] == expected
    until = found[len(found) // 2][1]
    assert [run for run, _ in store.run_ids(RunQuery(content=content, until=until))] == [
        run for run in expected if firsts[run] <= until]
