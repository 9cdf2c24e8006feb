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

**Log record fields.** A record carries the spine's flat mapping
(:func:`~cupellation.events.event_to_dict`): ``schema``, ``type``, ``run_id``,
``seq``, then the event's fields with dotted keys (``item.content``,
``item.tokens``, ``reason.name``, ``reason.item_tokens``, ``budget.max_tokens``,
``pipeline.scorer``, ...), plus ``trace_id`` and ``span_id`` of the current
OpenTelemetry span. No key clashes with a ``logging.LogRecord`` attribute.

**Content capture.** Each sink applies one policy — ``full``, ``hash``
(``sha256:<hex>``, metadata dropped) or ``none`` (a placeholder) — through the
spine's :func:`~cupellation.events.apply_content_capture`, and records it in
``run_started``. The ``content_capture`` parameter wins; without it, the
``CUPELLATION_CAPTURE_CONTENT`` environment variable; without that, ``full``.
"""

from ._audit import AuditLog
from ._decode import ENVELOPE_KEYS
from ._reader import DamagedLine, LoggedRun, LogReader, ReadStats, expand_rotated, read_runs
from ._records import (
    CAPTURE_ENV_VAR,
    RECORD_PREFIX,
    STDLIB_LOGGER_NAME,
    StructlogSink,
    log_record,
    record_name,
)

__all__ = [
    "CAPTURE_ENV_VAR",
    "ENVELOPE_KEYS",
    "RECORD_PREFIX",
    "STDLIB_LOGGER_NAME",
    "AuditLog",
    "DamagedLine",
    "LogReader",
    "LoggedRun",
    "ReadStats",
    "StructlogSink",
    "expand_rotated",
    "log_record",
    "read_runs",
    "record_name",
]
