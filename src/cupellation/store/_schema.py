"""The tables: the OpenTelemetry Collector's ``otel_logs`` and ``otel_traces``, exactly as
its ``clickhouse`` exporter creates them in its default (Map) mode.

The DDL follows ``exporter/clickhouseexporter/internal/sqltemplates/logs_table.sql`` and
``traces_table.sql`` of ``open-telemetry/opentelemetry-collector-contrib`` in their
``{{ident .Database}}`` text/template form (v0.152.0 and later), the bloom-filter branch
(``HasFullTextSearch`` false: the ``text`` index needs ClickHouse 26.2 or later on every
server of a fleet), with ``ENGINE = MergeTree`` and no TTL, as the exporter's defaults
render them. cupellation adds data-skipping indexes (on ``LogAttributes['run_id']``
and ``SpanAttributes['cupel.run.id']``, so that reading one run does not scan the
table, and on an item's content and metadata) and aggregate projections for the fleet
statistics (see ``_accel.py``); it adds no column and no table.

Tables that already exist are read as they are (an older exporter's ``otel_logs``, with
``TimestampTime`` and a ``PRIMARY KEY``, reads the same): only the columns cupellation
reads are checked. The exporter's JSON mode (attributes in ``JSON`` columns) is refused
with :class:`~cupellation.exceptions.StoreSchemaError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..exceptions import StoreSchemaError
from ._accel import (
    RUN_ID_INDEX,
    TEXT_INDEX_SINCE,
    TRACE_RUN_ID_INDEX,
    accelerator_ddl,
    has_text_index,
)

__all__ = [
    "EXPORTER_TEMPLATES",
    "LOGS_TABLE",
    "RUN_ID_INDEX",
    "TRACES_TABLE",
    "check_columns",
    "logs_ddl",
    "traces_ddl",
]

LOGS_TABLE: Final = "otel_logs"
TRACES_TABLE: Final = "otel_traces"
#: What the DDL below follows, for the docs and the decisions record.
EXPORTER_TEMPLATES: Final = (
    "open-telemetry/opentelemetry-collector-contrib "
    "exporter/clickhouseexporter/internal/sqltemplates/{logs,traces}_table.sql, "
    "text/template form (v0.152.0 and later), bloom-filter branch, Map mode")

_LOGS_DDL: Final = """CREATE TABLE IF NOT EXISTS {table} (
    `Timestamp` DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    `TraceId` String CODEC(ZSTD(1)),
    `SpanId` String CODEC(ZSTD(1)),
    `TraceFlags` UInt8,
    `SeverityText` LowCardinality(String) CODEC(ZSTD(1)),
    `SeverityNumber` UInt8,
    `ServiceName` LowCardinality(String) CODEC(ZSTD(1)),
    `Body` String CODEC(ZSTD(1)),
    `ResourceSchemaUrl` LowCardinality(String) CODEC(ZSTD(1)),
    `ResourceAttributes` Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    `ScopeSchemaUrl` LowCardinality(String) CODEC(ZSTD(1)),
    `ScopeName` String CODEC(ZSTD(1)),
    `ScopeVersion` LowCardinality(String) CODEC(ZSTD(1)),
    `ScopeAttributes` Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    `LogAttributes` Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    `EventName` String CODEC(ZSTD(1)),
{materialized}
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_key mapKeys(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_scope_attr_value mapValues(ScopeAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_log_attr_key mapKeys(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_log_attr_value mapValues(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_lower_body lower(Body) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8,
    INDEX {run_index} {run_expression} TYPE bloom_filter(0.001) GRANULARITY 1,
{accelerators}
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (toStartOfFiveMinutes(Timestamp), ServiceName, Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1"""

_TRACES_DDL: Final = """CREATE TABLE IF NOT EXISTS {table} (
    `Timestamp` DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    `TraceId` String CODEC(ZSTD(1)),
    `SpanId` String CODEC(ZSTD(1)),
    `ParentSpanId` String CODEC(ZSTD(1)),
    `TraceState` String CODEC(ZSTD(1)),
    `SpanName` LowCardinality(String) CODEC(ZSTD(1)),
    `SpanKind` LowCardinality(String) CODEC(ZSTD(1)),
    `ServiceName` LowCardinality(String) CODEC(ZSTD(1)),
    `ResourceAttributes` Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    `ScopeName` String CODEC(ZSTD(1)),
    `ScopeVersion` String CODEC(ZSTD(1)),
    `SpanAttributes` Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    `Duration` UInt64 CODEC(T64, ZSTD(1)),
    `StatusCode` LowCardinality(String) CODEC(ZSTD(1)),
    `StatusMessage` String CODEC(ZSTD(1)),
    `Events` Nested (
        `Timestamp` DateTime64(9),
        `Name` LowCardinality(String),
        `Attributes` Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    `Links` Nested (
        `TraceId` String,
        `SpanId` String,
        `TraceState` String,
        `Attributes` Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    `ResourceAttributeItems` Array(String) ALIAS {resource_items},
    `SpanAttributeItems` Array(String) ALIAS {span_items},
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8,
    INDEX {run_index} {run_expression} TYPE bloom_filter(0.001) GRANULARITY 1
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1"""

#: The columns cupellation reads, and the types it reads them as (a Map's key may be
#: LowCardinality or not).
_MAP_TYPES: Final = frozenset({"Map(LowCardinality(String), String)", "Map(String, String)"})
_STRING_TYPES: Final = frozenset({"String", "LowCardinality(String)"})
_READ_COLUMNS: Final[Mapping[str, Mapping[str, frozenset[str]]]] = {
    LOGS_TABLE: {
        "Timestamp": frozenset({"DateTime64(9)"}),
        "TraceId": _STRING_TYPES, "SpanId": _STRING_TYPES,
        "ServiceName": _STRING_TYPES, "Body": _STRING_TYPES,
        "LogAttributes": _MAP_TYPES, "ResourceAttributes": _MAP_TYPES,
    },
    TRACES_TABLE: {
        "Timestamp": frozenset({"DateTime64(9)"}),
        "TraceId": _STRING_TYPES, "SpanId": _STRING_TYPES, "ServiceName": _STRING_TYPES,
        "SpanName": _STRING_TYPES, "SpanAttributes": _MAP_TYPES,
    },
}


#: The resource attributes the exporter materialises as columns of ``otel_logs``.
_MATERIALIZED: Final = ("k8s.cluster.name", "k8s.container.name", "k8s.deployment.name",
                        "k8s.namespace.name", "k8s.node.name", "k8s.pod.name", "k8s.pod.uid",
                        "deployment.environment.name")


def _items(column: str) -> str:
    return (f"arrayMap(kv -> concat(kv.1, '=', kv.2), CAST({column}, "
            "'Array(Tuple(String, String))'))")


def logs_ddl(qualified: str, *, version: tuple[int, ...] = TEXT_INDEX_SINCE) -> str:
    """The ``CREATE TABLE IF NOT EXISTS`` of ``otel_logs`` (``qualified``: the quoted
    ``database.table``) for a server of ``version`` (the text index needs 26.2)."""
    materialized = "\n".join(
        f"    `__otel_materialized_{name}` LowCardinality(String) MATERIALIZED "
        f"ResourceAttributes['{name}'] CODEC(ZSTD(1))," for name in _MATERIALIZED)
    return _LOGS_DDL.format(table=qualified, run_index=RUN_ID_INDEX[0],
                            run_expression=RUN_ID_INDEX[1], materialized=materialized,
                            accelerators=accelerator_ddl(
                                text_index=has_text_index(version)))


def traces_ddl(qualified: str) -> str:
    """The ``CREATE TABLE IF NOT EXISTS`` of ``otel_traces``."""
    return _TRACES_DDL.format(table=qualified, resource_items=_items("ResourceAttributes"),
                              span_items=_items("SpanAttributes"),
                              run_index=TRACE_RUN_ID_INDEX[0],
                              run_expression=TRACE_RUN_ID_INDEX[1])


def check_columns(table: str, columns: Sequence[tuple[str, str]],
                  on_missing: Callable[[str], Any] | None = None) -> None:
    """Refuse a table whose columns are not the Map mode's (``columns``: (name, type)
    as ``system.columns`` gives them): :class:`StoreSchemaError` naming the column."""
    types = dict(columns)
    for column, accepted in _READ_COLUMNS[table].items():
        found = types.get(column)
        if found is None:
            raise StoreSchemaError(table, column, "is missing: not the Collector's "
                                   "clickhouse exporter table")
        if found.startswith("JSON"):
            raise StoreSchemaError(table, column, f"is {found}: the exporter's JSON mode, "
                                   "which cupellation does not read (use the default Map "
                                   "mode: json: false)")
        if found not in accepted:
            raise StoreSchemaError(table, column, f"is {found}, not "
                                   f"{' or '.join(sorted(accepted))}")
