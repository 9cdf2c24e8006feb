"""The fleet store: runs audited in ClickHouse, in the OpenTelemetry Collector's own
tables, embedded (chDB) or on a server — ``pip install 'cupellation[store]'``.

::

    from cupellation.store import RunQuery, open_store

    with open_store("chdb:///var/lib/cupellation/store") as store:
        print(store.load(["audit.jsonl", "audit.jsonl.1.gz"], service="support-agent"))
        for run in store.read_runs(RunQuery(reason="BudgetExceeded", kind="ToolOutput")):
            print(run.run_id, run.verification, len(run.report.excluded))

**One client, two places.** ``chdb:///path/to/dir`` runs ClickHouse's engine inside
this process (clickhouse-connect's chDB backend): no server, no network, the
default for local archives and for tests. ``http(s)://host:8123/database`` is a
ClickHouse server, a cluster behind a load balancer or ClickHouse Cloud; the user
and password come from ``CUPELLATION_STORE_USER`` and ``CUPELLATION_STORE_PASSWORD``
(or the file ``CUPELLATION_STORE_PASSWORD_FILE`` names), never from a URL or the
command line. **chDB runs one engine per process**: while a ``chdb://`` store is
open, opening another path raises :class:`~cupellation.exceptions.StoreInUseError`
(the same path may be opened again); close stores when done.

**The Collector's tables.** ``otel_logs`` and ``otel_traces`` as the ``clickhouse``
exporter creates them in its default Map mode (:data:`EXPORTER_TEMPLATES`), created
when absent, with data-skipping indexes (``LogAttributes['run_id']``, an item's
content and metadata) and three aggregate projections (:data:`PROJECTIONS`:
exclusions by hour, service, type, reason and kind; excluded sources; one row per
run with its structural checks) added — no column. :func:`fleet_stats` is answered
from the projections, ``why``'s content lookups and the read of one run from the
indexes. A fleet's own Collector table lacks them: :meth:`Store.add_accelerators`
adds them (``ALTER TABLE … ADD PROJECTION/INDEX IF NOT EXISTS``; with
``materialize=True`` also for the rows already written), only when called. The
exporter's JSON mode is refused (:class:`~cupellation.exceptions.StoreSchemaError`).

**Rows are the Collector's.** One log record per event: ``LogAttributes`` the flat
mapping (:func:`~cupellation.events.event_to_dict`) with every value a string as
Go's ``AsString`` writes it (:func:`attribute_text`); ``Body`` the event type;
``ServiceName`` the run's service; ``TraceId``/``SpanId`` the record's
``trace_id``/``span_id``; ``Timestamp`` the run's ``started_at`` for rows written
by :meth:`Store.load` and :meth:`Store.write_events` (a time filter never cuts a
run). The reader types each string back by its key's declared type, so the run's
digest verifies whichever path wrote the row.

**The database selects, the reader decides.** :meth:`Store.read_runs` narrows the
runs in SQL (:class:`RunQuery`: time, service, run, session, user, conversation,
reason, kind, content, a literal a regular expression requires, strategy — bound
as parameters) and reads them through the same :class:`~cupellation.logs.LogReader`
as a file: the same fold, digest check and integrity rules. A run partly present
(missing rows, no end) comes back incomplete, never folded silently.

**Traces too.** :meth:`Store.load` takes OTLP/JSON trace files into ``otel_traces``
(one row per span, as the exporter writes spans, computed by ClickHouse's JSON
functions), and :meth:`Store.read_runs` also gives the runs found only in
``otel_traces`` (a fleet exporting spans through the Collector), rebuilt by the span
decoder (:func:`~cupellation.otel.runs_from_spans`) from the rows' strings typed back
(:func:`span_from_row`). A run in both tables is read from its logs.

.. versionadded:: 0.4
"""

from ._accel import CONTENT_INDEXES, PROJECTIONS
from ._client import StoreLocation, parse_store_url
from ._load import MAX_DAMAGED_NAMED, LoadStats
from ._query import RunQuery, required_literal
from ._runs import StoreRuns
from ._schema import EXPORTER_TEMPLATES, LOGS_TABLE, RUN_ID_INDEX, TRACES_TABLE
from ._stats import (
    BUCKETS,
    ExclusionCount,
    FailureCount,
    FleetStats,
    SourceCount,
    UtilizationStats,
    exact_low_quantile,
    fleet_stats,
)
from ._store import Store, open_store
from ._traceload import is_otlp_trace_file
from ._traceread import SPAN_COLUMNS, keeps_run, logged_run, span_from_row
from ._values import attribute_text, attributes_of, canonical_line, go_float, typed_flat

__all__ = [
    "BUCKETS",
    "CONTENT_INDEXES",
    "EXPORTER_TEMPLATES",
    "LOGS_TABLE",
    "MAX_DAMAGED_NAMED",
    "PROJECTIONS",
    "RUN_ID_INDEX",
    "SPAN_COLUMNS",
    "TRACES_TABLE",
    "ExclusionCount",
    "FailureCount",
    "FleetStats",
    "LoadStats",
    "RunQuery",
    "Store",
    "StoreRuns",
    "SourceCount",
    "StoreLocation",
    "UtilizationStats",
    "attribute_text",
    "attributes_of",
    "canonical_line",
    "exact_low_quantile",
    "fleet_stats",
    "go_float",
    "is_otlp_trace_file",
    "keeps_run",
    "logged_run",
    "open_store",
    "parse_store_url",
    "required_literal",
    "span_from_row",
    "typed_flat",
]
