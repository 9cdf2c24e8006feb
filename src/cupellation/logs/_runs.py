"""What a read of log files yields: the runs, and the accounting of every line."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._model import ContextBudget, ContextItem
from .._report import SelectionReport
from ..events import PipelineEvent, RunCompleted, RunFailed, RunStarted, Verification

__all__ = ["DamagedLine", "LoggedRun", "ReadStats"]


@dataclass(frozen=True, slots=True)
class DamagedLine:
    """A line that held (or seemed to hold) a record but could not be read."""

    source: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.problem}"


@dataclass(slots=True)
class ReadStats:
    """What a read found, line by line; updated as the reader goes.

    Every line read is counted once in exactly one of ``blank_lines``,
    ``records`` (decoded events), ``other_lines`` (lines from other programs:
    no record in them), ``damaged_lines`` (a record, or what looks like one,
    that could not be decoded), ``future_schema_lines`` (records of a newer
    schema version than this library reads) and ``skipped_lines`` (not
    examined: filtered out by ``run_id``), so ``lines`` is their sum.
    ``late_records`` counts records (already in ``records``) of a run that had
    already ended. ``source_errors`` lists sources that could not be opened or
    broke off (a truncated or corrupt gzip stream). ``trace_files`` and ``spans`` count
    the trace files (OTLP/JSON, Jaeger) a command read beside its logs and the spans
    its runs were rebuilt from: a trace file has no lines to count.
    """

    sources: list[str] = field(default_factory=list)
    lines: int = 0
    blank_lines: int = 0
    records: int = 0
    other_lines: int = 0
    damaged_lines: int = 0
    future_schema_lines: int = 0
    skipped_lines: int = 0
    late_records: int = 0
    runs: int = 0
    runs_filtered_out: int = 0
    damaged: list[DamagedLine] = field(default_factory=list)
    source_errors: list[str] = field(default_factory=list)
    bytes_read: int = 0
    total_bytes: int | None = None
    trace_files: int = 0
    spans: int = 0

    @property
    def accounted(self) -> int:
        """The sum of the per-kind counters (equal to ``lines``)."""
        return (self.blank_lines + self.records + self.other_lines + self.damaged_lines
                + self.future_schema_lines + self.skipped_lines)

    def to_dict(self) -> dict[str, Any]:
        """The counters as JSON-native values."""
        out = dataclasses.asdict(self)
        out["damaged"] = [dataclasses.asdict(d) for d in self.damaged]
        return out


@dataclass(frozen=True, slots=True)
class LoggedRun:
    """One run rebuilt from log lines: its SelectionReport and what framed it.

    ``report`` is the report fold of the run's events; its ``incomplete``
    says what was missing or wrong (a gap in ``seq``, no ``run_completed``,
    hashed content, ...). ``started``/``completed``/``failed`` are the run's
    own events when found; ``source`` and ``line`` locate its first line.
    ``events`` holds the run's events in the order read when the reader was
    asked to keep them (``keep_events=True``), else it is empty.

    ``verification`` says what checking the run's digest found (see
    :class:`~cupellation.events.Verification`): ``verified``, ``unverified`` (no
    digest: written before schema 3, or its end is missing), ``mismatch`` (the
    report's ``incomplete`` says so too), ``key missing`` (an HMAC digest read
    without the key) or ``unkeyed`` (a plain digest read with a key); ``digest``
    is the digest the run recorded. Whether that leaves the run clean depends on
    the reader's key (a reader holding one accepts only ``verified`` keyed
    digests): what is not clean is listed in the report's ``incomplete``.
    """

    run_id: str
    report: SelectionReport
    started: RunStarted | None
    completed: RunCompleted | None
    failed: RunFailed | None
    source: str
    line: int
    event_count: int
    events: tuple[PipelineEvent, ...] = ()
    verification: Verification = Verification.UNVERIFIED
    digest: str | None = None
    #: With ``keep_candidates=True``: every decided candidate as ``(candidate_index,
    #: item, outcome)`` (``"Included"`` or the exclusion reason's name).
    candidates: tuple[tuple[int, ContextItem, str], ...] = ()

    @property
    def started_at(self) -> datetime | None:
        """When the run began (from ``run_started``), if known."""
        return None if self.started is None else self.started.started_at

    @property
    def finished(self) -> bool:
        """True when the run's end (completed or failed) was read."""
        return self.completed is not None or self.failed is not None

    @property
    def is_complete(self) -> bool:
        """True when the report is the whole truth of a finished run."""
        return self.report.is_complete

    @property
    def budget(self) -> ContextBudget | None:
        """The run's budget (from ``run_started``), if known."""
        return None if self.started is None else self.started.budget

    @property
    def included_tokens(self) -> int:
        """Tokens of the included items."""
        return sum(entry.item.tokens for entry in self.report.included)

    @property
    def utilisation(self) -> float | None:
        """Included tokens over the budget's ``target_tokens`` (None when unknown)."""
        budget = self.budget
        if budget is None or budget.target_tokens <= 0:
            return None
        return self.included_tokens / budget.target_tokens
