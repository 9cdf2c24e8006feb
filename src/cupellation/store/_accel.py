"""The projections and data-skipping indexes cupellation adds to the Collector's
``otel_logs`` so that fleet questions stay fast at tens of millions of rows. They add
no column: the table's columns stay the exporter's.

Reading one ``LogAttributes['…']`` key reads the whole Map column of every row, which
is what made :func:`~cupellation.store.fleet_stats` take seconds per 100,000 rows. The
aggregate projections below keep, per data part, the few figures the statistics need,
grouped by the keys they filter and group on; ClickHouse answers a query from a
projection when the query's filters and groups are expressions of the projection's
keys and its aggregates are the projection's aggregates, written the same way (so the
SQL in ``_stats.py`` is built from the same text as the projections here).

- :data:`EXCLUSIONS_PROJECTION`: rows counted by hour, service, event type
  (``Body``), reason and item kind (exclusions by reason and kind over time);
- :data:`SOURCES_PROJECTION`: rows counted by hour, service, event type, reason and
  item source (the most excluded sources);
- :data:`RUNS_PROJECTION`: one row per run with its structural checks, the figures
  of its start and end events (runs, failures, utilisation, incomplete runs) and its
  first ``Timestamp`` (``run_ids`` of a content lookup orders the runs it finds by it);
- :data:`CONTENT_INDEXES`: bloom filters on an item's content and on the content
  digests its metadata holds, so ``why``'s content lookups skip the granules without
  it;
- :data:`TEXT_INDEX`: a text (inverted) index on an item's content, so ``why --match``
  (a ``LIKE`` on the content) finds the rows holding the words of its pattern's
  literal without reading every row's content. It needs ClickHouse 26.2 or newer
  (:data:`TEXT_INDEX_SINCE`): on an older server it is left out, and ``--match`` reads
  every row's content instead.

All three are keyed by the hour, so a time window (``--since``/``--until``) is
answered from them for the hours it holds whole, and from the table's rows only for
its two partial hours at the edges (see ``_stats.py``). cupellation creates
``otel_logs`` with all of them; for an existing
table (a fleet's Collector made it) :func:`add_accelerators` adds them with
``ALTER TABLE … ADD PROJECTION/INDEX IF NOT EXISTS`` — only when asked, never
silently — and, with ``materialize=True``, builds them for the parts already written
(``MATERIALIZE PROJECTION/INDEX``: a mutation that rewrites every part, minutes on a
large table; without it only parts written later have them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ._client import StoreSession

__all__ = [
    "CONTENT_INDEXES",
    "HOUR",
    "INDEXED_READ",
    "OURS_KEYS",
    "PROJECTIONS",
    "EXCLUSIONS_PROJECTION",
    "RUNS_PROJECTION",
    "RUN_AGGREGATES",
    "RUN_ID_INDEX",
    "SOURCES_PROJECTION",
    "TEXT_INDEX",
    "TEXT_INDEX_SINCE",
    "TRACE_RUN_ID_INDEX",
    "TRIMMED_DIGESTS",
    "accelerator_ddl",
    "add_accelerators",
    "has_text_index",
]

#: The run id's index (its name and expression), in cupellation's tables since the start.
RUN_ID_INDEX: Final = ("idx_cupel_run_id", "LogAttributes['run_id']")
#: The run id's index on ``otel_traces`` (every span of a run carries ``cupel.run.id``),
#: so reading one run's spans does not scan the table.
TRACE_RUN_ID_INDEX: Final = ("idx_cupel_span_run_id", "SpanAttributes['cupel.run.id']")
#: A row cupellation wrote: a run id and a sequence number (the statistics' filter).
OURS_KEYS: Final = ("notEmpty(LogAttributes['run_id'])", "mapContains(LogAttributes, 'seq')")
#: The hour a row's run started (the finest time bucket the exclusions projection keeps).
HOUR: Final = "toStartOfHour(Timestamp)"


def _a(key: str) -> str:
    return f"LogAttributes['{key}']"


#: The per-run aggregates: (alias, expression). ``fleet_stats`` groups by run with
#: exactly these, so the runs projection answers it.
RUN_AGGREGATES: Final = (
    ("service", "any(ServiceName)"),
    ("row_count", "count()"),
    ("seqs", f"uniqExact({_a('seq')})"),
    ("max_seq", f"max(toUInt64OrZero({_a('seq')}))"),
    ("starts", "countIf(Body = 'run_started')"),
    ("ends", "countIf(Body IN ('run_completed', 'run_failed'))"),
    ("failed", "countIf(Body = 'run_failed')"),
    ("error_type", f"anyIf({_a('error_type')}, Body = 'run_failed')"),
    ("detail", f"anyIf({_a('detail_level')}, Body = 'run_started')"),
    ("max_tokens", f"anyIf(toFloat64OrNull({_a('budget.max_tokens')}), Body = 'run_started')"),
    ("included_tokens",
     f"anyIf(toFloat64OrNull({_a('included_tokens')}), Body = 'run_completed')"),
    ("excluded_declared",
     f"anyIf(toInt64OrNull({_a('excluded_count')}), Body = 'run_completed')"),
    ("included_declared",
     f"anyIf(toInt64OrNull({_a('included_count')}), Body = 'run_completed')"),
    ("excluded_rows", "countIf(Body = 'item_excluded')"),
    ("included_rows", "countIf(Body = 'item_included')"),
    ("overflows", "countIf(Body = 'overflow')"),
    ("first_at", "min(Timestamp)"),
)


def _projection(name: str, keys: tuple[str, ...], aggregates: tuple[str, ...]) -> tuple[
        str, str]:
    group = ", ".join(keys)
    return name, f"SELECT {group}, {', '.join(aggregates)} GROUP BY {group}"


#: Exclusions by hour, service, type, reason and kind.
EXCLUSIONS_PROJECTION: Final = _projection(
    "cupel_exclusions",
    (HOUR, "ServiceName", "Body", _a("reason.name"), _a("item.kind"), *OURS_KEYS),
    ("count()",))
#: Rows by hour, service, type, reason and source.
SOURCES_PROJECTION: Final = _projection(
    "cupel_sources",
    (HOUR, "ServiceName", "Body", _a("item.source"), _a("reason.name"), *OURS_KEYS),
    ("count()",))
#: One row per run (and per "has a seq": the filter) and hour (a run's rows share
#: one hour unless their times scatter; queries without a window group the hours away).
RUNS_PROJECTION: Final = _projection(
    "cupel_runs", (_a("run_id"), OURS_KEYS[1], HOUR),
    tuple(expression for _, expression in RUN_AGGREGATES))
#: The content digests an item's metadata holds (a trimmed item's ``original_digest``):
#: every ``sha256:`` followed by 64 hex digits. A digest found anywhere in the metadata
#: is one of them (``sha256:`` holds no hex digit, so no match can hide another).
TRIMMED_DIGESTS: Final = f"extractAll({_a('item.metadata')}, 'sha256:[0-9a-f]{{64}}')"
#: (name, expression, type, granularity) of the indexes for content lookups: a bloom
#: filter on an item's content, and one on the digests its metadata holds. (An
#: n-gram or token filter on a ``LogAttributes['…']`` value is never consulted by
#: ClickHouse 26.9 — ``EXPLAIN indexes = 1`` lists it for no condition — so a
#: ``LIKE`` on the metadata read every row; a bloom filter on an expression is.)
CONTENT_INDEXES: Final = (
    ("idx_cupel_item_content", _a("item.content"), "bloom_filter(0.01)", 1),
    ("idx_cupel_trimmed_digests", TRIMMED_DIGESTS, "bloom_filter(0.01)", 1),
)
#: (name, expression, type, granularity) of the text index on an item's content.
#: ``splitByNonAlpha`` makes a token of every run of ASCII letters and digits and of
#: bytes past ASCII. ClickHouse answers ``LIKE '%…%'`` on the content through it by
#: itself: the pattern's whole words (bounded by other characters inside it) must all
#: be in a row, so only the rows holding them are read (``EXPLAIN indexes = 1`` names
#: it); a pattern without a whole word (``'%contr%'``) still reads every row.
#: Its granularity is moot: ClickHouse 26.9 keeps one text index block per part
#: (``system.data_skipping_indices`` shows 100,000,000), with postings per row.
TEXT_INDEX: Final = ("idx_cupel_item_text", _a("item.content"),
                     "text(tokenizer = splitByNonAlpha)", 1)
#: The first ClickHouse release with text indexes generally available (chDB 4.4 is 26.9).
TEXT_INDEX_SINCE: Final = (26, 2)
#: Appended to the queries that filter on ``LogAttributes['…']``: ClickHouse would
#: otherwise read the key as a Map subcolumn, an expression no index is built on, and
#: skip none of the indexes above (checked with ``EXPLAIN indexes = 1``).
INDEXED_READ: Final = " SETTINGS optimize_functions_to_subcolumns = 0"
#: Every projection cupellation adds: (name, SELECT).
PROJECTIONS: Final = (EXCLUSIONS_PROJECTION, SOURCES_PROJECTION, RUNS_PROJECTION)


def _indexes(text_index: bool) -> tuple[tuple[str, str, str, int], ...]:
    return (*CONTENT_INDEXES, TEXT_INDEX) if text_index else CONTENT_INDEXES


def has_text_index(version: tuple[int, ...]) -> bool:
    """Whether a server of ``version`` (``(26, 9, ...)``) supports :data:`TEXT_INDEX`."""
    return version[:2] >= TEXT_INDEX_SINCE


def accelerator_ddl(*, text_index: bool = True) -> str:
    """The ``INDEX``/``PROJECTION`` clauses of ``otel_logs``' ``CREATE TABLE`` (each
    line ending with a comma but the last); ``text_index``: include
    :data:`TEXT_INDEX` (the server supports it)."""
    lines = [f"    INDEX {name} {expression} TYPE {kind} GRANULARITY {granularity}"
             for name, expression, kind, granularity in _indexes(text_index)]
    lines += [f"    PROJECTION {name} ({select})" for name, select in PROJECTIONS]
    return ",\n".join(lines)


def add_accelerators(session: StoreSession, table: str, *, materialize: bool = False,
                     traces: str | None = None) -> list[str]:
    """Add the projections and indexes to an existing ``otel_logs`` (``table``: its
    quoted name) and the run id's index to ``otel_traces`` (``traces``, when given)
    when absent; with ``materialize``, build them for the parts already written (a
    mutation: the call waits for it). :data:`TEXT_INDEX` is added when the server
    supports it. Returns the statements run."""
    indexes = _indexes(has_text_index(session.server_version))
    trace_index = ([] if traces is None else [
        f"ALTER TABLE {traces} ADD INDEX IF NOT EXISTS {TRACE_RUN_ID_INDEX[0]} "
        f"{TRACE_RUN_ID_INDEX[1]} TYPE bloom_filter(0.001) GRANULARITY 1"])
    statements = [*trace_index, f"ALTER TABLE {table} ADD INDEX IF NOT EXISTS {RUN_ID_INDEX[0]} "
                  f"{RUN_ID_INDEX[1]} TYPE bloom_filter(0.001) GRANULARITY 1"]
    statements += [f"ALTER TABLE {table} ADD INDEX IF NOT EXISTS {name} {expression} "
                   f"TYPE {kind} GRANULARITY {granularity}"
                   for name, expression, kind, granularity in indexes]
    statements += [f"ALTER TABLE {table} ADD PROJECTION IF NOT EXISTS {name} ({select})"
                   for name, select in PROJECTIONS]
    if materialize:
        names = [RUN_ID_INDEX[0], *(index[0] for index in indexes)]
        statements += [f"ALTER TABLE {table} MATERIALIZE INDEX {name} SETTINGS mutations_sync = 1"
                       for name in names]
        statements += [f"ALTER TABLE {table} MATERIALIZE PROJECTION {name} "
                       "SETTINGS mutations_sync = 1" for name, _ in PROJECTIONS]
        if traces is not None:
            statements.append(f"ALTER TABLE {traces} MATERIALIZE INDEX "
                              f"{TRACE_RUN_ID_INDEX[0]} SETTINGS mutations_sync = 1")
    for statement in statements:
        session.command(statement)
    return statements
