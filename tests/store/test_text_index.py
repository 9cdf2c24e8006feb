"""``why --match`` through the text index on an item's content: ClickHouse answers the
``LIKE`` of a pattern's literal through it (the plan names it), the
answers equal those of a table without it (a server before 26.2, a Collector's table),
and the index is left out of the DDL for such a server and added by
``add_accelerators``."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from cupellation import ContextBudget, ContextItem, GreedySlice, Pipeline, PriorityScorer
from cupellation.logs import AuditLog
from cupellation.store import RunQuery, Store
from cupellation.store._accel import INDEXED_READ, TEXT_INDEX
from cupellation.store._query import _item_rows
from cupellation.store._schema import logs_ddl

_WORDS = ("contract", "customer", "renewal", "invoice", "the", "of", "ACME", "Zürich",
          "clause", "42", "tool_output", "retry", "中文", "plan")


def _write_prose_log(path: Path, seed: int, runs: int) -> None:
    """``runs`` runs of 3-8 items whose contents are sentences of a small vocabulary
    (so tokens recur across runs and rows), written by an ``AuditLog``."""
    rng = random.Random(seed)
    pipeline = Pipeline(PriorityScorer(), GreedySlice())
    with AuditLog(str(path)) as audit:
        for _ in range(runs):
            items = [ContextItem(content=" ".join(rng.choice(_WORDS)
                                                  for _ in range(rng.randint(3, 9))),
                                 tokens=rng.randint(1, 40), priority=rng.randint(0, 5))
                     for _ in range(rng.randint(3, 8))]
            pipeline.run(items, ContextBudget(max_tokens=90, target_tokens=90), audit)


def _holders(path: Path) -> dict[str, set[str]]:
    holders: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").split("\n"):
        record = json.loads(line) if line else {}
        if "item.content" in record:
            holders.setdefault(record["item.content"], set()).add(record["run_id"])
    return holders


def _patterns(holders: dict[str, set[str]]) -> list[str]:
    """Patterns whose literal has whole tokens inside: a piece of a content, escaped,
    and the same piece with a regex part around it."""
    patterns = []
    for content in sorted(holders):
        words = content.split(" ")
        if len(words) >= 4:
            piece = " ".join(words[1:4])
            patterns += [re.escape(piece), f"{re.escape(piece)}.*", f"^.*{re.escape(piece)}"]
    assert len(patterns) >= 6
    return patterns[:12]


def test_match_goes_through_the_text_index(store: Store, tmp_path: Path) -> None:
    """On a table cupellation created (chDB is 26.9), the plan of a ``match`` query's
    row condition names the text index (the skipping it brings shows at scale:
    benchmarks/bench_store_fleet.py); the runs found include every run whose content
    the pattern finds in the file."""
    path = tmp_path / "fleet.jsonl"
    _write_prose_log(path, seed=11, runs=40)
    store.load([path], service="s")
    holders = _holders(path)
    logs = store.logs_table
    for pattern in _patterns(holders):
        query = RunQuery(match=pattern)
        params: dict[str, Any] = {}
        [(condition,)] = _item_rows(query, params)
        plan = "\n".join(str(row[0]) for row in store.session.rows(
            f"EXPLAIN indexes = 1 SELECT count() FROM {logs} WHERE {condition}"
            + INDEXED_READ, params))
        assert f"Name: {TEXT_INDEX[0]}" in plan, plan
        expected = {run for text, runs in holders.items() if re.search(pattern, text)
                    for run in runs}
        assert expected <= {run for run, _ in store.run_ids(query)}


def test_a_table_without_the_text_index_matches_through_like(store: Store,
                                                             tmp_path: Path) -> None:
    """A server before 26.2 gets no text index in the DDL; a table without it (dropped
    here, as a Collector's table has none) answers every ``match`` with the same runs;
    ``add_accelerators(materialize=True)`` adds it back and the plans use it again."""
    assert TEXT_INDEX[0] not in logs_ddl("`d`.`otel_logs`", version=(25, 8, 1))
    assert TEXT_INDEX[0] in logs_ddl("`d`.`otel_logs`", version=(26, 2))
    path = tmp_path / "fleet.jsonl"
    _write_prose_log(path, seed=12, runs=20)
    store.load([path], service="s")
    patterns = _patterns(_holders(path))
    with_index = [store.run_ids(RunQuery(match=pattern)) for pattern in patterns]
    store.session.command(f"ALTER TABLE {store.logs_table} DROP INDEX {TEXT_INDEX[0]}")
    assert [store.run_ids(RunQuery(match=pattern)) for pattern in patterns] == with_index
    statements = store.add_accelerators(materialize=True)
    assert any(TEXT_INDEX[0] in statement for statement in statements)
    assert [store.run_ids(RunQuery(match=pattern)) for pattern in patterns] == with_index
    params: dict[str, Any] = {}
    [(condition,)] = _item_rows(RunQuery(match=patterns[0]), params)
    plan = "\n".join(str(row[0]) for row in store.session.rows(
        f"EXPLAIN indexes = 1 SELECT count() FROM {store.logs_table} WHERE {condition}"
        + INDEXED_READ, params))
    assert f"Name: {TEXT_INDEX[0]}" in plan, plan
