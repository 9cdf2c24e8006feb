"""Reading runs back from log files: sources, line accounting and the per-run fold."""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import re
import sys
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import msgspec

from .._model import ContextBudget, check_text
from .._report import ReportBuilder, SelectionReport
from ..events import (
    EVENT_SCHEMA_VERSION,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    RunCompleted,
    RunFailed,
    RunStarted,
    event_from_dict,
)
from ..exceptions import DecodeError, InvalidTypeError, InvalidValueError
from ._decode import FastDecoder, find_record

__all__ = [
    "DamagedLine",
    "LogReader",
    "LoggedRun",
    "ReadStats",
    "Source",
    "expand_rotated",
    "read_runs",
]

Source = str | os.PathLike[str] | IO[bytes] | IO[str]

#: Lines longer than this are not decoded (counted as damaged or other).
MAX_LINE_BYTES = 16 << 20
#: How many damaged lines are kept with their file, line and problem (all are counted).
MAX_DAMAGED_KEPT = 1000
#: How many ended run ids are remembered, to count their late lines instead of
#: starting a second, bogus run.
_ENDED_REMEMBERED = 65_536
_GZIP_MAGIC = b"\x1f\x8b"
_BACKUP = re.compile(r"\.(\d+)(\.gz)?$")
#: Substrings that make an unparsable line look like one of ours (so: damaged).
_OUR_MARKERS = (b'"schema"', b'"run_id"', b'"seq"', b"cupel.")
_PROGRESS_EVERY = 4096
#: Without run_started, how far ahead of the run's next seq an event may be.
_MAX_SEQ_JUMP = 1_000_000


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
    broke off (a truncated or corrupt gzip stream).
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

    ``report`` is the spine's fold of the run's events; its ``incomplete``
    says what was missing or wrong (a gap in ``seq``, no ``run_completed``,
    hashed content, ...). ``started``/``completed``/``failed`` are the run's
    own events when found; ``source`` and ``line`` locate its first line.
    ``events`` holds the run's events in the order read when the reader was
    asked to keep them (``keep_events=True``), else it is empty.
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


class _Run:
    """A run being read: its builder and what the reader notes about it."""

    __slots__ = ("builder", "completed", "count", "events", "failed", "line", "next_seq",
                 "pending", "pending_kind", "source", "started", "wanted")

    def __init__(self, run_id: str, source: str, line: int, keep_events: bool = False) -> None:
        self.builder: ReportBuilder | None = ReportBuilder(run_id)
        self.source = source
        self.line = line
        self.count = 0
        self.events: list[PipelineEvent] | None = [] if keep_events else None
        self.started: RunStarted | None = None
        self.completed: RunCompleted | None = None
        self.failed: RunFailed | None = None
        self.wanted = True
        # Item events that continue the sequence in order are gathered and folded
        # as one ItemEventBatch (the same fold as one by one, for in-order seqs).
        self.next_seq = 0
        self.pending: list[Any] = []
        self.pending_kind: type | None = None

    def flush(self) -> None:
        """Fold the gathered item events."""
        pending = self.pending
        self.pending = []
        builder = self.builder
        if builder is None or not pending:
            return
        if len(pending) == 1:
            builder.add(pending[0])
            return
        first = pending[0]
        excluded = type(first) is ItemExcluded
        builder.add(ItemEventBatch(
            run_id=first.run_id, first_seq=first.seq,
            stage=first.stage if excluded else None,
            candidate_indices=[e.candidate_index for e in pending],
            items=[e.item for e in pending], scores=[e.score for e in pending],
            reasons=[e.reason for e in pending],
            positions=None if excluded else [e.position for e in pending]))


def expand_rotated(path: str) -> list[str]:
    """``path`` preceded by its rotated backups, oldest first.

    Backups are ``<path>.N`` and ``<path>.N.gz`` (N = 1, 2, ...; the highest
    is the oldest). When both forms of one number exist (a rotation stopped
    between compressing and removing), only the ``.gz`` is read.
    """
    directory, base = os.path.split(os.path.abspath(path))
    numbered: dict[int, str] = {}
    try:
        names = os.listdir(directory or ".")
    except OSError:
        names = []
    for name in names:
        if not name.startswith(base + "."):
            continue
        match = _BACKUP.fullmatch(name[len(base):])
        if match is None:
            continue
        number = int(match.group(1))
        if match.group(2) or number not in numbered:
            numbered[number] = os.path.join(directory, name)
    ordered = [numbered[n] for n in sorted(numbered, reverse=True)]
    if os.path.exists(path) or not ordered:
        ordered.append(path)
    return ordered


def _as_datetime(value: datetime | str | None, name: str) -> datetime | None:
    if value is None or isinstance(value, datetime):
        if isinstance(value, datetime) and value.tzinfo is None:
            raise InvalidValueError(name, value, "must be timezone-aware")
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z"))
                                            else text)
        except ValueError:
            raise InvalidValueError(name, value, "is not an ISO 8601 date or time") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed
    raise InvalidTypeError(name, value, "a datetime or ISO 8601 text")


class LogReader(Iterator[LoggedRun]):
    """An iterator over the runs found in log sources (see :func:`read_runs`).

    ``stats`` (a :class:`ReadStats`) is updated as lines are read and is final
    once the iterator is exhausted.
    """

    def __init__(self, sources: Iterable[Source], *, run_id: str | None = None,
                 since: datetime | str | None = None, until: datetime | str | None = None,
                 rotated: bool = True, max_open_runs: int = 100_000,
                 progress: Callable[[ReadStats], object] | None = None,
                 keep_events: bool = False) -> None:
        self.stats = ReadStats()
        self._keep_events = bool(keep_events)
        if run_id is not None:
            if not isinstance(run_id, str):
                raise InvalidTypeError("run_id", run_id, "a string or None")
            check_text("run_id", run_id)
        self._run_id = run_id
        self._since = _as_datetime(since, "since")
        self._until = _as_datetime(until, "until")
        if type(max_open_runs) is not int or max_open_runs < 1:
            raise InvalidValueError("max_open_runs", max_open_runs, "must be a positive integer")
        self._max_open = max_open_runs
        self._progress = progress
        self._sources = self._expand(list(sources), rotated)
        self._open: OrderedDict[str, _Run] = OrderedDict()
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._iterator = self._runs()

    @property
    def filtering_by_time(self) -> bool:
        """True when ``since`` or ``until`` was given."""
        return self._since is not None or self._until is not None

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

    # -- sources ----------------------------------------------------------------------

    def _lines(self, source: Source) -> Iterator[tuple[str, int, bytes | None]]:
        """(source name, line number, line) for every line; a None line marks an
        overlong line that was not read whole."""
        name, handle, owned = self._open_source(source)
        if handle is None:
            return
        stats = self.stats
        stats.sources.append(name)
        raw = handle
        try:
            head = handle.peek(2)[:2] if hasattr(handle, "peek") else b""
            stream: Any = handle
            if head == _GZIP_MAGIC:
                stream = gzip.GzipFile(fileobj=handle, mode="rb")
            number = 0
            position = raw.tell() if raw.seekable() else 0
            readline = stream.readline
            while True:
                line = readline(MAX_LINE_BYTES)
                if not line:
                    break
                number += 1
                if len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n"):
                    while True:  # skip the rest of an overlong line
                        rest = readline(MAX_LINE_BYTES)
                        if not rest or rest.endswith(b"\n"):
                            break
                    yield name, number, None
                    continue
                if self._progress is not None and number % _PROGRESS_EVERY == 0:
                    now = raw.tell() if raw.seekable() else position
                    stats.bytes_read += now - position
                    position = now
                    self._progress(stats)
                yield name, number, line
            if raw.seekable():
                stats.bytes_read += raw.tell() - position
        except (OSError, EOFError, zlib.error) as exc:
            stats.source_errors.append(f"{name}: stopped reading: {_describe(exc)}")
        finally:
            if owned:
                handle.close()
            if self._progress is not None:
                self._progress(stats)

    def _open_source(self, source: Source) -> tuple[str, Any, bool]:
        if isinstance(source, str | os.PathLike):
            path = os.fspath(source)
            if path == "-":
                return "<stdin>", _binary(sys.stdin), False
            try:
                return path, open(path, "rb"), True
            except OSError as exc:
                self.stats.source_errors.append(f"{path}: cannot open: {_describe(exc)}")
                return path, None, False
        name = str(getattr(source, "name", "<stream>"))
        return name, _binary(source), False

    # -- the fold -----------------------------------------------------------------------

    def _runs(self) -> Iterator[LoggedRun]:
        stats = self.stats
        wanted = None if self._run_id is None else self._run_id.encode()
        open_runs, ended = self._open, self._ended
        fast, slow = FastDecoder().event, self._slow
        for source in self._sources:
            for name, number, line in self._lines(source):
                stats.lines += 1
                if line is None:
                    self._damaged(name, number, f"longer than {MAX_LINE_BYTES} bytes")
                    continue
                if wanted is not None and wanted not in line:
                    stats.skipped_lines += 1
                    continue
                event = fast(line)
                if event is None:
                    event = slow(name, number, line)
                    if event is None:
                        continue
                stats.records += 1
                run_id = event.run_id
                if wanted is not None and run_id != self._run_id:
                    continue
                run = open_runs.get(run_id)
                if run is None:
                    if run_id in ended:
                        stats.late_records += 1
                        continue
                    run = open_runs[run_id] = _Run(run_id, name, number, self._keep_events)
                    if len(open_runs) > self._max_open:
                        evicted = self._evict()
                        if evicted is not None:
                            yield evicted
                if event.seq > run.next_seq + self._seq_jump(run):
                    # The fold keeps every skipped seq to report the gap: a corrupt,
                    # huge seq would cost memory in proportion to it.
                    stats.records -= 1
                    self._damaged(name, number, f"seq {event.seq} is implausibly far past "
                                  f"this run's {run.next_seq} (not folded)")
                    continue
                run.count += 1
                if run.events is not None:
                    run.events.append(event)
                kind = type(event)
                if kind is ItemExcluded or kind is ItemIncluded:
                    seq = event.seq
                    pending = run.pending
                    stage = getattr(event, "stage", None)
                    if pending and seq == run.next_seq and kind is run.pending_kind and (
                            kind is ItemIncluded or stage == pending[0].stage):
                        pending.append(event)
                        run.next_seq = seq + 1
                        continue
                    if pending:
                        run.flush()
                    if seq == run.next_seq:
                        run.pending = [event]
                        run.pending_kind = kind
                        run.next_seq = seq + 1
                        continue
                elif run.pending:
                    run.flush()
                if event.seq >= run.next_seq:
                    run.next_seq = event.seq + 1
                if kind is RunStarted:
                    assert isinstance(event, RunStarted)
                    if run.started is None:
                        run.started = event
                        if not self._in_window(event.started_at):
                            run.wanted = False
                            run.builder = None
                elif kind is RunCompleted or kind is RunFailed:
                    if kind is RunCompleted:
                        run.completed = event  # type: ignore[assignment]
                    else:
                        run.failed = event  # type: ignore[assignment]
                    if run.builder is not None:
                        run.builder.add(event)
                    del open_runs[run_id]
                    self._remember(run_id)
                    finished = self._finish(run_id, run)
                    if finished is not None:
                        yield finished
                    continue
                if run.builder is not None:
                    run.builder.add(event)
        while open_runs:
            run_id, run = open_runs.popitem(last=False)
            finished = self._finish(run_id, run)
            if finished is not None:
                yield finished

    @staticmethod
    def _seq_jump(run: _Run) -> int:
        """How far past the next expected seq an event may be: a run has about one
        event per candidate plus a few dozen."""
        started = run.started
        return _MAX_SEQ_JUMP if started is None else 2 * started.candidate_count + 1024

    def _slow(self, name: str, number: int, line: bytes) -> PipelineEvent | None:
        stats = self.stats
        text = line.strip()
        if not text:
            stats.blank_lines += 1
            return None
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
                    stats.other_lines += 1
                return None
        record = find_record(value)
        if record is None:
            stats.other_lines += 1
            return None
        schema = record.get("schema")
        if type(schema) is int and schema > EVENT_SCHEMA_VERSION:
            stats.future_schema_lines += 1
            return None
        try:
            return event_from_dict(record, line=number)
        except DecodeError as exc:
            self._damaged(name, number, f"{exc.field}: {exc.problem} (got {_short(exc.value)})")
            return None
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            self._damaged(name, number, f"cannot be decoded ({type(exc).__name__}: {exc})")
            return None

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
        report = run.builder.result()
        if note is not None:
            report = dataclasses.replace(report, incomplete=(*report.incomplete, note))
        self.stats.runs += 1
        return LoggedRun(run_id=run_id, report=report, started=run.started,
                         completed=run.completed, failed=run.failed, source=run.source,
                         line=run.line, event_count=run.count,
                         events=() if run.events is None else tuple(run.events))


def _binary(stream: Any) -> Any:
    if isinstance(stream, io.TextIOBase) or hasattr(stream, "buffer"):
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            return buffer
        return io.BytesIO(stream.read().encode("utf-8", "surrogateescape"))
    if not hasattr(stream, "peek"):
        return io.BufferedReader(stream) if hasattr(stream, "readinto") else stream
    return stream


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, EOFError):
        return "the compressed stream ends early (truncated gzip)"
    return f"{type(exc).__name__}: {exc}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_runs(*sources: Source, run_id: str | None = None,
              since: datetime | str | None = None, until: datetime | str | None = None,
              rotated: bool = True, max_open_runs: int = 100_000,
              progress: Callable[[ReadStats], object] | None = None,
              keep_events: bool = False) -> LogReader:
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
    (``{"log": "{\\"schema\\": 2, ...}"}``), up to three levels deep.

    Events are grouped by ``run_id`` whatever their interleaving and folded by
    the spine's :class:`~cupellation.ReportBuilder`; a run is yielded when its
    ``run_completed`` or ``run_failed`` is read, and its state is dropped, so
    memory follows the number of runs open at once, not the file's size. Runs
    still open at the end of the input are yielded then, incomplete; past
    ``max_open_runs`` open runs, the oldest is yielded early as incomplete.

    ``run_id`` keeps one run (other lines are skipped unread); ``since`` and
    ``until`` (datetimes or ISO 8601 text; naive means UTC) keep runs that
    started in that window, which excludes runs whose ``run_started`` was not
    read. Damaged lines never raise: they are counted in ``reader.stats``
    with their file and line. Nothing is read until the first run is asked for.

    ``keep_events=True`` also keeps each run's events (``LoggedRun.events``, in
    the order read), for a consumer that needs the stream itself (replaying a run
    as spans); memory then follows the size of the runs open at once.
    """
    return LogReader(sources, run_id=run_id, since=since, until=until, rotated=rotated,
                     max_open_runs=max_open_runs, progress=progress, keep_events=keep_events)
