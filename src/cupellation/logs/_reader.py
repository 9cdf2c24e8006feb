"""Reading runs back from log files: line accounting, the per-run fold and its digest."""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Final

import msgspec

from .._model import check_text, listed
from .._report import ReportBuilder
from ..events import (
    EVENT_SCHEMA_VERSION,
    ContentCapture,
    PipelineEvent,
    RunCompleted,
    RunFailed,
    RunStarted,
    event_from_dict,
)
from ..events._digest import DigestCheck, RunHasher, Verification, digest_verdict
from ..events._lines import LineEncoder
from ..events._records import (
    EXCLUDED_RECORD,
    INCLUDED_RECORD,
    RECORD_CLASSES,
    RUN_COMPLETED_RECORD,
    RUN_FAILED_RECORD,
)
from ..exceptions import DecodeError, InvalidTypeError, InvalidValueError
from ..settings import resolve_digest_key
from ._decode import canonical_bytes, fast_record, find_record
from ._runs import DamagedLine, LoggedRun, ReadStats
from ._sources import (
    MAX_LINE_BYTES,
    Source,
    as_datetime,
    expand_rotated,
    open_source,
    read_blocks,
)

__all__ = ["LogReader", "read_runs"]

#: How many damaged lines are kept with their file, line and problem (all are counted).
MAX_DAMAGED_KEPT: Final = 1000
#: How many ended run ids are remembered, to count their late lines instead of
#: starting a second, bogus run.
_ENDED_REMEMBERED: Final = 65_536
#: Substrings that make an unparsable line look like one of ours (so: damaged).
_OUR_MARKERS: Final = (b'"schema"', b'"run_id"', b'"seq"', b"cupel.")
#: Without run_started, how far ahead of the run's next seq an event may be.
_MAX_SEQ_JUMP: Final = 1_000_000
_ITEM_RECORDS: Final = (EXCLUDED_RECORD, INCLUDED_RECORD)
_END_RECORDS: Final = (RUN_COMPLETED_RECORD, RUN_FAILED_RECORD)
_CURRENT: Final = EVENT_SCHEMA_VERSION
_END_EVENTS: Final = (RunCompleted, RunFailed)
_NONE: Final[tuple[LoggedRun, ...]] = ()


class _Run:
    """A run being read: its builder, its digest so far, and what the reader notes."""

    __slots__ = ("builder", "completed", "count", "digest", "events", "failed", "hasher",
                 "line", "max_seq_jump", "next_seq", "old_schema", "pending", "pending_kind",
                 "pending_stage", "seen", "source", "started", "update", "wanted")

    def __init__(self, run_id: str, source: str, line: int, keep_events: bool) -> None:
        self.builder: ReportBuilder | None = ReportBuilder(run_id)
        self.source = source
        self.line = line
        self.count = 0
        self.events: list[PipelineEvent] | None = [] if keep_events else None
        self.started: RunStarted | None = None
        self.completed: RunCompleted | None = None
        self.failed: RunFailed | None = None
        self.wanted = True
        self.hasher: RunHasher | None = None
        self.digest: str | None = None
        #: The oldest schema before the current one among the run's lines (None: none).
        self.old_schema: int | None = None
        # Schema-3 records and events in the order read, to hash their canonical
        # lines again should the lines as read not match the digest (reformatted).
        self.seen: list[Any] = []
        self.max_seq_jump = _MAX_SEQ_JUMP
        # Item records that continue the sequence in order are gathered and folded
        # together (the same fold as one by one, for in-order seqs).
        self.next_seq = 0
        self.pending: list[Any] = []
        # What the next line must be to join the pending records without a call:
        # the same record type (None: no line may), and for exclusions the same stage.
        self.pending_kind: Any = None
        self.pending_stage: str | None = None
        self.update: Callable[[bytes], None] = _no_hash

    def flush(self) -> None:
        """Fold the gathered item records."""
        pending = self.pending
        self.pending_kind = None
        if pending:
            self.pending = []
            if self.builder is not None:
                self.builder.add_records(pending)

    def add_record(self, record: Any) -> None:
        """Gather an item record (or fold it, when it does not continue the batch)."""
        seq = record.seq
        kind = type(record)
        if seq == self.next_seq:
            self.next_seq = seq + 1
            stage = None if kind is INCLUDED_RECORD else record.stage
            if not (self.pending and kind is type(self.pending[0])
                    and stage == self.pending_stage):
                self.flush()
            self.pending.append(record)
            self.pending_stage = stage
            # Later lines join here without a call only when each is hashed as read.
            self.pending_kind = kind if (self.events is None and self.hasher is not None
                                         and self.builder is not None) else None
            return
        self.flush()
        if self.builder is not None:
            self.builder.add_records([record])
        if seq > self.next_seq:
            self.next_seq = seq + 1

    def add_event(self, event: PipelineEvent) -> None:
        """Fold an event (after what is gathered)."""
        self.flush()
        if event.seq >= self.next_seq:
            self.next_seq = event.seq + 1
        if self.builder is not None:
            self.builder.add(event)

    def hash(self, item: Any, line: bytes | None, key: bytes | None) -> None:
        """Add a schema-3 record (``line``: the line read) or event to the digest: the
        line as read, which is canonical when the log is as written, or the canonical
        line of an end event (without its digest) or of an event the slow path made."""
        if line is not None:  # a record
            if type(item) in _END_RECORDS:
                self.digest = None if item.digest is msgspec.UNSET else item.digest
                line = canonical_bytes(item)
            elif line[-1:] != b"\n":
                line += b"\n"
        else:
            if isinstance(item, _END_EVENTS):
                self.digest = item.digest
            line = _canonical_event_line(item)
        if self.hasher is None:
            self.hasher = RunHasher(key)
            self.update = self.hasher.update
        self.update(line)
        self.seen.append(item)

    def digest_check(self, key: bytes | None) -> DigestCheck:
        """What the run's digest says about what was read, judged by the one policy
        (``digest_verdict`` (the one digest rule))."""
        return digest_verdict(self._compared(key), self.digest, key_present=key is not None,
                              old_schema=self.old_schema)

    def _compared(self, key: bytes | None) -> DigestCheck:
        """The lines as read are hashed first; if they do not match (a log reformatted
        on the way), the canonical lines of what they decoded to."""
        if self.hasher is None:
            return DigestCheck(Verification.UNVERIFIED)
        check = self.hasher.check(self.digest)
        if check.status is not Verification.MISMATCH:
            return check
        again = RunHasher(key)
        for item in self.seen:
            again.update(canonical_bytes(item) if type(item) in RECORD_CLASSES
                         else _canonical_event_line(item))
        return again.check(self.digest)


_EVENT_LINES: Final = LineEncoder(ContentCapture.FULL)
_NEWLINE: Final = 10


def _no_hash(data: bytes) -> None:
    """The digest of a run not hashed (schema 2, or filtered out)."""


def _canonical_event_line(event: PipelineEvent) -> bytes:
    """A decoded event's canonical line (an end event's without its digest)."""
    if isinstance(event, _END_EVENTS):
        event = msgspec.structs.replace(event, digest=None)
    return _EVENT_LINES.event_line(event)


class LogReader(Iterator[LoggedRun]):
    """An iterator over the runs found in log sources (see :func:`read_runs`).

    ``stats`` (a :class:`ReadStats`) is updated as lines are read and is final
    once the iterator is exhausted.
    """

    def __init__(self, sources: Iterable[Source], *, run_id: str | None = None,
                 since: datetime | str | None = None, until: datetime | str | None = None,
                 rotated: bool = True, max_open_runs: int = 100_000,
                 progress: Callable[[ReadStats], object] | None = None,
                 keep_events: bool = False, digest_key: bytes | str | None = None,
                 keep_candidates: bool = False) -> None:
        self.stats = ReadStats()
        self._keep_events = bool(keep_events)
        self._keep_candidates = bool(keep_candidates)
        if run_id is not None:
            if not isinstance(run_id, str):
                raise InvalidTypeError("run_id", run_id, "a string or None")
            check_text("run_id", run_id)
        self._run_id = run_id
        self._since = as_datetime(since, "since")
        self._until = as_datetime(until, "until")
        if type(max_open_runs) is not int or max_open_runs < 1:
            raise InvalidValueError("max_open_runs", max_open_runs, "must be a positive integer")
        self._max_open = max_open_runs
        self._progress = progress
        self._key = resolve_digest_key(digest_key)
        self._sources = self._expand(listed("sources", sources, "an iterable of sources"),
                                     rotated)
        self._open: OrderedDict[str, _Run] = OrderedDict()
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._iterator = self._runs()

    @property
    def filtering_by_time(self) -> bool:
        """True when ``since`` or ``until`` was given."""
        return self._since is not None or self._until is not None

    @property
    def time_window(self) -> tuple[datetime | None, datetime | None]:
        """``since`` and ``until`` as read (None where not given)."""
        return self._since, self._until

    def _expand(self, sources: list[Source], rotated: bool) -> list[Source]:
        expanded: list[Source] = []
        seen: set[str] = set()
        total: int | None = 0
        for source in sources:
            if isinstance(source, str | os.PathLike) and os.fspath(source) != "-":
                path = os.fspath(source)
                for name in (expand_rotated(path) if rotated else [path]):
                    key = os.path.realpath(name)
                    if key in seen:
                        continue
                    seen.add(key)
                    expanded.append(name)
                    try:
                        if total is not None:
                            total += os.path.getsize(name)
                    except OSError:
                        pass
            elif isinstance(source, str | os.PathLike) or hasattr(source, "read"):
                expanded.append(source)
                total = None
            else:
                raise InvalidTypeError("sources", source, "a path, '-' or a file object")
        self.stats.total_bytes = total
        return expanded

    def __iter__(self) -> LogReader:
        return self

    def __next__(self) -> LoggedRun:
        return next(self._iterator)

    # -- the fold -----------------------------------------------------------------------

    def _runs(self) -> Iterator[LoggedRun]:
        for source in self._sources:
            name, handle, owned = open_source(source, self.stats)
            if handle is None:
                continue
            try:
                yield from self._read(name, handle)
            finally:
                if owned:
                    handle.close()
        open_runs = self._open
        while open_runs:
            run_id, run = open_runs.popitem(last=False)
            finished = self._finish(run_id, run)
            if finished is not None:
                yield finished

    def _read(self, name: str, handle: Any) -> Iterator[LoggedRun]:
        stats = self.stats
        wanted = None if self._run_id is None else self._run_id.encode()
        slow, fold, open_runs = self._slow, self._fold, self._open
        number = 0
        for lines in read_blocks(name, handle, stats, self._progress):
            for line in lines:
                number += 1
                stats.lines += 1
                if line is None or (wanted is not None and wanted not in line):
                    self._not_read(name, number, line)
                    continue
                record: Any = fast_record(line)
                if record is None:
                    found = slow(name, number, line)
                    finished = _NONE if found is None else fold(found[0], None, found[1],
                                                                name, number)
                else:
                    # The usual line: the next item decision of a run being gathered,
                    # in a log as written. Folded here, without a call per line.
                    run = open_runs.get(record.run_id)
                    if (run is not None and type(record) is run.pending_kind
                            and record.seq == run.next_seq and record.schema == _CURRENT
                            and line[-1] == _NEWLINE and (
                                run.pending_stage is None
                                or record.stage == run.pending_stage)):
                        stats.records += 1
                        run.count += 1
                        run.update(line)
                        run.seen.append(record)
                        run.pending.append(record)
                        run.next_seq += 1
                        continue
                    finished = fold(record, line, record.schema, name, number)
                if finished:
                    yield from finished

    def _not_read(self, name: str, number: int, line: bytes | None) -> None:
        """Count a line that is not decoded: overlong, or filtered out by ``run_id``."""
        if line is None:
            self._damaged(name, number, f"longer than {MAX_LINE_BYTES} bytes")
        else:
            self.stats.skipped_lines += 1

    def _fold(self, item: Any, line: bytes | None, schema: Any, name: str, number: int
              ) -> tuple[LoggedRun, ...]:
        """Fold one record (``line``: the line it was read from) or slow-path event into
        its run (``schema``: the schema its line names; the current one carries a
        digest); the runs this finishes (its own, or one evicted to make room)."""
        self.stats.records += 1
        run_id = item.run_id
        if self._run_id is not None and run_id != self._run_id:
            return _NONE
        run = self._open.get(run_id)
        finished = _NONE
        if run is None:
            if run_id in self._ended:
                self.stats.late_records += 1
                return _NONE
            run, finished = self._open_run(run_id, name, number)
        if item.seq > run.next_seq + run.max_seq_jump:
            # The fold keeps every skipped seq to report the gap: a corrupt, huge
            # seq would cost memory in proportion to it.
            self.stats.records -= 1
            self._damaged(name, number, f"seq {item.seq} is implausibly far past "
                          f"this run's {run.next_seq} (not folded)")
            return finished
        run.count += 1
        is_record = type(item) in RECORD_CLASSES
        if schema == _CURRENT:
            if run.builder is not None:
                run.hash(item, line, self._key)
        elif type(schema) is int and (run.old_schema is None or schema < run.old_schema):
            run.old_schema = schema
        if run.events is not None:
            run.events.append(item.event() if is_record else item)
        if type(item) in _ITEM_RECORDS:
            run.add_record(item)
            return finished
        ended = self._take_event(run_id, run, item.event() if is_record else item)
        return (*finished, ended) if ended is not None else finished

    def _take_event(self, run_id: str, run: _Run, event: PipelineEvent) -> LoggedRun | None:
        """Fold a run-level, stage-level or slow-path item event; the run, if it ended."""
        if isinstance(event, RunStarted):
            if run.started is None:
                run.started = event
                run.max_seq_jump = 2 * event.candidate_count + 1024
                if not self._in_window(event.started_at):
                    run.wanted = False
                    run.builder = None
        elif isinstance(event, _END_EVENTS):
            if isinstance(event, RunCompleted):
                run.completed = event
            else:
                run.failed = event
            run.add_event(event)
            del self._open[run_id]
            self._remember(run_id)
            return self._finish(run_id, run)
        run.add_event(event)
        return None

    def _open_run(self, run_id: str, name: str, number: int
                  ) -> tuple[_Run, tuple[LoggedRun, ...]]:
        run = self._open[run_id] = _Run(run_id, name, number, self._keep_events)
        if len(self._open) > self._max_open:
            evicted = self._evict()
            if evicted is not None:
                return run, (evicted,)
        return run, _NONE

    def _slow(self, name: str, number: int, line: bytes) -> tuple[PipelineEvent, Any] | None:
        """The event of a line the fast path did not decide, and the schema its line
        names; or None with the line counted as blank, other, future or damaged."""
        stats = self.stats
        text = line.strip()
        if not text:
            stats.blank_lines += 1
            return None
        record = self._record_of(name, number, text)
        if record is None:
            return None
        schema = record.get("schema")
        if type(schema) is int and schema > EVENT_SCHEMA_VERSION:
            stats.future_schema_lines += 1
            return None
        try:
            event = event_from_dict(record, line=number)
        except DecodeError as exc:
            self._damaged(name, number, f"{exc.field}: {exc.problem} (got {_short(exc.value)})")
            return None
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            self._damaged(name, number, f"cannot be decoded ({type(exc).__name__}: {exc})")
            return None
        return event, schema

    def _record_of(self, name: str, number: int, text: bytes) -> dict[str, Any] | None:
        """The record a line holds (found as :func:`find_record` finds it), or None
        with the line counted as other or damaged."""
        try:
            value = msgspec.json.decode(text)
        except (ValueError, RecursionError) as exc:
            # msgspec.DecodeError, UnicodeDecodeError, or arrays and objects nested
            # past Python's recursion limit.
            value = None
            brace = text.find(b"{")
            if brace > 0:
                try:
                    value = msgspec.json.decode(text[brace:])
                except (ValueError, RecursionError):
                    value = None
            if value is None:
                if any(marker in text for marker in _OUR_MARKERS):
                    self._damaged(name, number, f"not valid JSON ({exc})")
                else:
                    self.stats.other_lines += 1
                return None
        record = find_record(value)
        if record is None:
            self.stats.other_lines += 1
        return record

    def _damaged(self, name: str, number: int, problem: str) -> None:
        stats = self.stats
        stats.damaged_lines += 1
        if len(stats.damaged) < MAX_DAMAGED_KEPT:
            stats.damaged.append(DamagedLine(name, number, problem))

    def _remember(self, run_id: str) -> None:
        ended = self._ended
        ended[run_id] = None
        if len(ended) > _ENDED_REMEMBERED:
            ended.popitem(last=False)

    def _evict(self) -> LoggedRun | None:
        run_id, run = self._open.popitem(last=False)
        self._remember(run_id)
        return self._finish(run_id, run, note=(
            f"the reader stopped waiting for this run's end: more than {self._max_open} "
            "runs were open at once"))

    def _in_window(self, started_at: datetime | None) -> bool:
        if not self.filtering_by_time:
            return True
        if started_at is None:
            return False
        if self._since is not None and started_at < self._since:
            return False
        return not (self._until is not None and started_at > self._until)

    def _finish(self, run_id: str, run: _Run, note: str | None = None) -> LoggedRun | None:
        run.flush()
        if run.started is None and self.filtering_by_time:
            run.wanted = False
        if not run.wanted or run.builder is None:
            self.stats.runs_filtered_out += 1
            return None
        check = run.digest_check(self._key)
        run.builder.set_digest_check(check)
        report = run.builder.result()
        if note is not None:
            report = dataclasses.replace(report, incomplete=(*report.incomplete, note))
        self.stats.runs += 1
        return LoggedRun(run_id=run_id, report=report, started=run.started,
                         completed=run.completed, failed=run.failed, source=run.source,
                         line=run.line, event_count=run.count,
                         events=() if run.events is None else tuple(run.events),
                         verification=check.status, digest=run.digest,
                         candidates=tuple(run.builder.candidates())
                         if self._keep_candidates else ())


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_runs(*sources: Source, run_id: str | None = None,
              since: datetime | str | None = None, until: datetime | str | None = None,
              rotated: bool = True, max_open_runs: int = 100_000,
              progress: Callable[[ReadStats], object] | None = None,
              keep_events: bool = False, digest_key: bytes | str | None = None,
              keep_candidates: bool = False) -> LogReader:
    """Stream the runs recorded in log files, one :class:`LoggedRun` per run.

    ``sources`` are paths, ``"-"`` for standard input, or open file objects
    (binary or text). A file may be plain JSON lines or gzip (recognised by
    its magic bytes, whatever its name); a path also brings in its rotated
    backups (``<path>.N[.gz]``, oldest first) unless ``rotated=False``.

    Records are picked out among any other lines: a flat record at the top
    level of a JSON object (an audit-log line; a structlog ``JSONRenderer``
    line, whose ``event`` is ``cupel.<type>``; a stdlib JSON formatter line
    with the fields as extras), text before the first ``{`` (a timestamp, a
    ``stdout F`` container-runtime prefix), and a record nested by a shipper
    under ``log``, ``record``, ``message``, ``msg``, ``event``, ``json``,
    ``jsonPayload``, ``fields``, ``data``, ``body``, ``payload``,
    ``structured`` or ``attributes`` — as an object or as JSON text
    (``{"log": "{\\"schema\\": 3, ...}"}``), up to three levels deep.

    Events are grouped by ``run_id`` whatever their interleaving and folded by
    :class:`~cupellation.ReportBuilder`; a run is yielded when its
    ``run_completed`` or ``run_failed`` is read, and its state is dropped, so
    memory follows the number of runs open at once, not the file's size. Runs
    still open at the end of the input are yielded then, incomplete; past
    ``max_open_runs`` open runs, the oldest is yielded early as incomplete.

    Each run's digest is recomputed from the lines read and compared with the
    one its end recorded (``LoggedRun.verification``); a mismatch is also listed
    in the report's ``incomplete``. ``digest_key`` (or the
    ``CUPELLATION_DIGEST_KEY`` environment variable) checks keyed digests.

    ``run_id`` keeps one run (other lines are skipped unread); ``since`` and
    ``until`` (datetimes or ISO 8601 text; naive means UTC) keep runs that
    started in that window, which excludes runs whose ``run_started`` was not
    read. Damaged lines never raise: they are counted in ``reader.stats``
    with their file and line. Nothing is read until the first run is asked for.

    ``keep_events=True`` also keeps each run's events (``LoggedRun.events``, in
    the order read), for a consumer that needs the stream itself (replaying a run
    as spans); memory then follows the size of the runs open at once.
    ``keep_candidates=True`` keeps, more cheaply, each run's decided candidates
    (``LoggedRun.candidates``: index, item, outcome), what a re-run needs.
    """
    return LogReader(sources, run_id=run_id, since=since, until=until, rotated=rotated,
                     max_open_runs=max_open_runs, progress=progress, keep_events=keep_events,
                     keep_candidates=keep_candidates,
                     digest_key=digest_key)

