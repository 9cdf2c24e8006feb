"""Structured logs and log-based audit: every decision as a log record, every
past run rebuilt from log files.

Three pieces, all projections of the one event stream:

- :class:`StructlogSink` — a collector that writes one structured record per
  event (``cupel.item_excluded`` ...) through structlog, or through stdlib
  ``logging`` for an application that uses only that. The library configures
  neither and writes nothing until the application passes a sink to a run.
- :class:`AuditLog` — a collector that appends the event stream to a JSON-lines
  file (one ``event_to_json`` line per event), whole lines only, safe for many
  threads and processes, with size-based rotation and gzip.
- :func:`read_runs` — streams log files (JSON lines, gzip, rotated sets,
  standard input, lines wrapped by structlog, stdlib JSON formatters or log
  shippers) and yields one :class:`LoggedRun`, with its SelectionReport, per
  run, counting every damaged line in :class:`ReadStats`.

::

    from cupellation.logs import AuditLog, read_runs

    with AuditLog("audit.jsonl", max_bytes=50_000_000) as audit:
        pipeline.run(candidates, budget, audit)

    reader = read_runs("audit.jsonl")
    for run in reader:
        print(run.run_id, run.report.is_complete, len(run.report.excluded))
    print(reader.stats.damaged_lines)

**Log record fields.** A record carries the events' flat mapping
(:func:`~cupellation.events.event_to_dict`): ``schema``, ``type``, ``run_id``,
``seq``, then the event's fields with dotted keys (``item.content``,
``item.tokens``, ``reason.name``, ``reason.item_tokens``, ``budget.max_tokens``,
``pipeline.scorer``, ...), plus ``trace_id`` and ``span_id`` of the current
OpenTelemetry span. No key clashes with a ``logging.LogRecord`` attribute.

**Content capture.** Each sink applies one policy — ``full``, ``hash``
(``sha256:<hex>``, metadata dropped) or ``none`` (a placeholder) — through the
events module's :func:`~cupellation.events.apply_content_capture`, and records it in
``run_started``. The ``content_capture`` parameter wins; without it, the
``CUPELLATION_CAPTURE_CONTENT`` environment variable (an invalid value warns
once, and the default applies); without that, ``full``.

**The run digest.** Both sinks write each run's digest into its
``run_completed``/``run_failed`` record, and :func:`read_runs` recomputes it:
``LoggedRun.verification`` says ``verified``, ``unverified`` (logs written
before schema 3), ``mismatch`` (also listed in the report's ``incomplete``),
``key missing`` or ``unkeyed``. The plain ``sha256:`` digest detects
corruption; it is not tamper-proof (whoever can edit the file can recompute
it). A key (``digest_key=``, or ``CUPELLATION_DIGEST_KEY``) makes it an
``hmac-sha256:`` digest, which also detects tampering by anyone without the key.
A reader holding a key lists a run that is not signed with it (no digest, a plain
one, schema-2 lines) in ``incomplete``; a reader without a key lists a keyed run as
"signature not checked" (see ``digest_verdict`` (the one digest rule)).
"""

from ._audit import AuditLog
from ._decode import ENVELOPE_KEYS
from ._reader import LogReader, read_runs
from ._records import RECORD_PREFIX, STDLIB_LOGGER_NAME, StructlogSink, log_record, record_name
from ._runs import DamagedLine, LoggedRun, ReadStats
from ._sources import as_datetime, expand_rotated

__all__ = [
    "ENVELOPE_KEYS",
    "RECORD_PREFIX",
    "STDLIB_LOGGER_NAME",
    "AuditLog",
    "DamagedLine",
    "LogReader",
    "LoggedRun",
    "ReadStats",
    "StructlogSink",
    "as_datetime",
    "expand_rotated",
    "log_record",
    "read_runs",
    "record_name",
]
