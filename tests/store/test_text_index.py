"""``why --match`` through the text index on an item's content: the tokens pushed into
``hasAllTokens`` are ones ClickHouse's own tokenizer finds in every text holding the
pattern's literal (so the prefilter never drops a run the file reader keeps), the
index is what the query goes through, and a table without it (a server before 26.2,
a Collector's table) answers the same through ``LIKE`` alone."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cupellation import ContextBudget, ContextItem, GreedySlice, Pipeline, PriorityScorer
from cupellation.logs import AuditLog
from cupellation.store import RunQuery, Store
from cupellation.store._accel import INDEXED_READ, TEXT_INDEX
from cupellation.store._query import _item_rows, literal_tokens, run_selection
from cupellation.store._schema import logs_ddl

#: Letters, digits, separators (``_`` is one for ClickHouse) and characters past ASCII.
_ALPHABET = "ab1Z _-.,é中\u00a0\t"


def test_literal_tokens_are_tokens_clickhouse_finds_in_every_text_holding_the_literal(
        store: Store) -> None:
    """For 3,000 random texts and a random piece of each, every token
    ``literal_tokens`` takes from the piece is one of the tokens ClickHouse's
    ``splitByNonAlpha`` makes of the whole text: the ``hasAllTokens`` prefilter keeps
    every row the literal is in. (Taking the first or last run of the piece as a token
    fails here: the piece usually cuts a longer token.)"""
    rng = random.Random(23)
    texts, pieces = [], []
    for _ in range(3000):
        text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 40)))
        start = rng.randrange(len(text))
        texts.append(text)
        pieces.append(text[start:rng.randint(start + 1, len(text))])
    found = store.session.rows(
        "SELECT tokens(t, 'splitByNonAlpha') FROM (SELECT arrayJoin({texts:Array(String)}) "
        "AS t)", {"texts": texts})
    taken = 0
    for text, piece, (tokens,) in zip(texts, pieces, found, strict=True):
        wanted = literal_tokens(piece)
        taken += len(wanted)
        assert set(wanted) <= set(tokens), (text, piece, wanted, tokens)
    assert taken > 1000  # the check is not vacuous


def test_literal_tokens_leave_out_the_ends_a_longer_token_may_hide() -> None:
    """The first and last runs count only when a separator bounds them inside the
    literal; characters past ASCII are token characters, ``_`` is not."""
    assert literal_tokens("act 42 of the") == ["42", "of"]
    assert literal_tokens(" act 42 ") == ["act", "42"]
    assert literal_tokens("contract") == []
    assert literal_tokens("a_b_c") == ["b"]
    assert literal_tokens("x héllo 中文 y") == ["héllo", "中文"]
    assert literal_tokens("x of the of y") == ["of", "the"]


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


def test_match_goes_through_the_text_index_and_answers_as_like_does(
        store: Store, tmp_path: Path) -> None:
    """On a table cupellation created (chDB is 26.9), a ``match`` query's plan names the
    text index, and for every pattern its runs equal those of the ``LIKE``-only query
    and include every run whose content the pattern finds in the file."""
    path = tmp_path / "fleet.jsonl"
    _write_prose_log(path, seed=11, runs=40)
    store.load([path], service="s")
    holders = _holders(path)
    logs = store.logs_table
    assert store._has_text_index()
    for pattern in _patterns(holders):
        query = RunQuery(match=pattern)
        sql, params = run_selection(query, logs, text_index=True)
        assert "hasAllTokens" in sql
        [(condition,)] = _item_rows(query, params, text_index=True)
        plan = "\n".join(str(row[0]) for row in store.session.rows(
            f"EXPLAIN indexes = 1 SELECT count() FROM {logs} WHERE {condition}"
            + INDEXED_READ, params))
        assert f"Name: {TEXT_INDEX[0]}" in plan, plan
        through_index = {run for run, _ in store.run_ids(query)}
        like_sql, like_params = run_selection(query, logs, text_index=False)
        assert "hasAllTokens" not in like_sql
        like = {str(run) for run, _ in store.session.rows(like_sql, like_params)}
        expected = {run for text, runs in holders.items() if re.search(pattern, text)
                    for run in runs}
        assert through_index == like
        assert expected <= through_index


def test_a_table_without_the_text_index_matches_through_like(store: Store,
                                                             tmp_path: Path) -> None:
    """A server before 26.2 gets no text index in the DDL; a table without it (dropped
    here, as a Collector's table has none) answers a ``match`` with ``LIKE`` alone and
    the same runs; ``add_accelerators`` adds it back and the store uses it at once."""
    assert TEXT_INDEX[0] not in logs_ddl("`d`.`otel_logs`", version=(25, 8, 1))
    assert TEXT_INDEX[0] in logs_ddl("`d`.`otel_logs`", version=(26, 2))
    path = tmp_path / "fleet.jsonl"
    _write_prose_log(path, seed=12, runs=20)
    store.load([path], service="s")
    pattern = _patterns(_holders(path))[0]
    with_index = store.run_ids(RunQuery(match=pattern))
    store.session.command(f"ALTER TABLE {store.logs_table} DROP INDEX {TEXT_INDEX[0]}")
    store._text_index = None  # as a store opened on that table would find it
    assert not store._has_text_index()
    seen: list[str] = []
    original = store.session.rows

    def recording(sql: str, parameters: Mapping[str, Any] | None = None
                  ) -> Sequence[Sequence[Any]]:
        seen.append(sql)
        return original(sql, parameters)

    store.session.rows = recording  # type: ignore[method-assign]
    try:
        assert store.run_ids(RunQuery(match=pattern)) == with_index
    finally:
        store.session.rows = original  # type: ignore[method-assign]
    assert seen
    assert not any("hasAllTokens" in sql for sql in seen)
    store.add_accelerators(materialize=True)
    assert store._has_text_index()
    assert store.run_ids(RunQuery(match=pattern)) == with_index
    assert INDEXED_READ in run_selection(RunQuery(match=pattern), store.logs_table,
                                         text_index=True)[0]
