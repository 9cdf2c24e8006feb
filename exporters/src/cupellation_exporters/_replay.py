"""Replay: recorded runs sent to a trace backend as the spans they would have made.

A run recorded as events (an audit log, any log :func:`cupellation.logs.read_runs`
reads, a file of event JSON lines) becomes SDK ``ReadableSpan`` objects built by
:class:`cupellation.otel.SpanCollector` itself, with the run's own times and
deterministic ids (how: :mod:`cupellation_exporters._replay_spans`, which makes
them); this module reads the sources, tells trace files from logs, and sends the
spans in batches.

A trace file (OTLP/JSON lines or one object, Jaeger's JSON, OTLP protobuf; gzip
allowed) is re-exported as it is: every span keeps its trace and span ids, its
parent, its times, attributes, events and dropped counts, and its scope, kind and
status where the file gives them as Jaeger tags (the readers keep no resource or
links, and OTLP's own kind and status fields: those are not re-sent).
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import errno
import gzip
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from cupellation import TraceDetailLevel
from cupellation.events import ContentCapture, Verification
from cupellation.exceptions import DecodeError
from cupellation.files import read_prefix
from cupellation.logs import LoggedRun, ReadStats, read_runs
from cupellation.otel import parse_trace
from cupellation.settings import resolve_digest_key

from ._replay_spans import spans_from_events, spans_from_trace

__all__ = [
    "DEFAULT_BATCH_EVENTS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_GIVE_UP_AFTER",
    "ReplayResult",
    "ReplaySource",
    "ReplayedRun",
    "is_trace_source",
    "read_replay_sources",
    "replay",
]

DEFAULT_BATCH_SIZE: Final = 512
"""Spans handed to the exporter per ``export`` call, at most."""
DEFAULT_BATCH_EVENTS: Final = 8192
"""Span events per ``export`` call above which a batch goes out early (a Full-tier run
of thousands of candidates is thousands of events: a batch of such spans must stay
under the 4 MiB a gRPC receiver takes by default)."""

_SNIFF_BYTES: Final = 1 << 16
#: How a trace document begins: its first member is one only traces have (OTLP/JSON,
#: Tempo, Jaeger's download or one Jaeger trace); an event log line begins with
#: "schema" or another event field. "data" must hold a list (a shipper may nest a log
#: record under "data") and "trace" an OTLP document.
_TRACE_START: Final = re.compile(
    rb'\[?\s*\{\s*(?:"(?:resourceSpans|batches|traceID|spans|processes)"\s*:'
    rb'|"data"\s*:\s*\[|"trace"\s*:\s*\{\s*"(?:resourceSpans|batches)"\s*:)')
_GZIP_MAGIC: Final = b"\x1f\x8b"


# -- sources ------------------------------------------------------------------------------------


#: What ``replay`` reads: a path (``"-"``: standard input) or an open binary stream.
ReplaySource = str | os.PathLike[str] | IO[bytes]


def _unzipped_head(head: bytes) -> bytes:
    """The start of the data a gzip prefix holds (b"" when it is corrupt: the log
    reader or the trace reader then says what is wrong)."""
    try:
        return zlib.decompressobj(wbits=31).decompress(head, _SNIFF_BYTES)
    except zlib.error:
        return b""


def _is_trace_head(head: bytes) -> bool:
    if head[:2] == _GZIP_MAGIC:
        head = _unzipped_head(head)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return False
    if text[:1] in (b"{", b"["):
        first = text.split(b"\n", 1)[0]
        if b'"resourceSpans"' in first or b'"batches"' in first:
            return True
        return _TRACE_START.match(text) is not None
    try:
        codecs.getincrementaldecoder("utf-8")().decode(text, final=False)
    except UnicodeDecodeError:
        return True  # binary, not gzip: OTLP protobuf (parse_trace says if it is not)
    return False


def is_trace_source(path: str | os.PathLike[str]) -> bool:
    """True when the file holds traces (OTLP/JSON, Jaeger's JSON, OTLP protobuf; plain
    or gzip) rather than log lines; ``"-"`` (standard input) is read as a log, and so
    is anything that is not a regular file (reading a pipe to look at it would use
    it up: :func:`read_replay_sources` looks at such sources once, as it reads them)."""
    name = os.fspath(path)
    if name == "-":
        return False
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):
            return False
        with open(name, "rb") as raw:
            head = raw.read(_SNIFF_BYTES)
    except OSError:
        return False
    return _is_trace_head(head)


def _gunzip(data: bytes, name: str) -> bytes:
    """``data``, unzipped when it is gzip; a DecodeError naming ``name`` when the
    gzip data is corrupt or cut short."""
    if data[:2] != _GZIP_MAGIC:
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        problem = ("ends early (truncated gzip)" if isinstance(exc, EOFError)
                   else f"is not valid gzip data ({exc})")
        raise DecodeError(name, f"{len(data)} bytes", problem) from None


def _open_once(source: ReplaySource) -> tuple[str, IO[bytes] | None, bool]:
    """The source's name, and the stream to read it from once (None for a regular
    file, or a missing one with rotated backups: the log reader opens those by
    name), and whether this function opened that stream."""
    if not isinstance(source, str | os.PathLike):
        return str(getattr(source, "name", "<stream>")), source, False
    name = os.fspath(source)
    if name == "-":
        stdin = sys.stdin
        buffer = getattr(stdin, "buffer", None) if stdin is not None else None
        if buffer is None:
            raise OSError(errno.EBADF, "standard input is closed", "<stdin>")
        return "<stdin>", buffer, False
    try:
        regular = stat.S_ISREG(os.stat(name).st_mode)
    except FileNotFoundError:
        return name, None, False
    if regular:
        return name, None, False
    return name, open(name, "rb"), True  # a pipe, a FIFO, a device: opened once


@dataclass(frozen=True, slots=True)
class ReplayedRun:
    """One recorded run (or one trace file's spans) ready to send.

    ``run_id`` is the run's (for a trace file: its path, and ``trace_file`` is
    True); ``spans`` the SDK spans; ``trace_ids`` the traces they belong to
    (lowercase hex); ``source`` where it was read; ``problem`` why nothing could be
    replayed (then ``spans`` is empty). ``complete`` is True when the recorded run
    was whole (its report complete).
    """

    run_id: str
    source: str
    spans: tuple[ReadableSpan, ...]
    trace_ids: tuple[str, ...] = ()
    complete: bool = True
    problem: str | None = None
    trace_file: bool = False


def _trace_ids(spans: Sequence[ReadableSpan]) -> tuple[str, ...]:
    found = dict.fromkeys(format(s.context.trace_id, "032x") for s in spans
                          if s.context is not None)
    return tuple(found)


def read_replay_sources(sources: Sequence[ReplaySource], *,
                        tier: TraceDetailLevel | str = TraceDetailLevel.FULL,
                        content_capture: ContentCapture | str | None = None,
                        resource: Resource | None = None, rotated: bool = True,
                        stats: ReadStats | None = None) -> Iterator[ReplayedRun]:
    """The runs of ``sources`` as spans, one :class:`ReplayedRun` per run (per trace
    file), in the order read: trace files first to last, then the logs (read
    together, so a run spread over a rotated set is one run).

    A source is a path (``"-"``: standard input) or an open binary stream. Each is
    read once: a pipe (``<(cat events.jsonl)``), a FIFO, standard input or a stream
    is told apart (trace or log) from its first bytes, kept for the reader.

    Raises :class:`~cupellation.exceptions.DecodeError` naming the file for a trace
    file that cannot be read (its gzip data corrupt or cut short included),
    ``OSError`` for a file that cannot be opened. Log
    lines that cannot be read are counted in ``stats`` (a
    :class:`~cupellation.logs.ReadStats` to fill), never raised; so is a log that
    breaks off (``stats.source_errors``).
    """
    logs: list[str | IO[bytes]] = []
    opened: list[IO[bytes]] = []
    try:
        for source in sources:
            name, stream, owned = _open_once(source)
            if stream is None:
                if not is_trace_source(name):
                    logs.append(name)
                    continue
                data = _gunzip(Path(name).read_bytes(), name)
            else:
                if owned:
                    opened.append(stream)
                head, replayed = read_prefix(stream, _SNIFF_BYTES, close=False)
                if not _is_trace_head(head):
                    logs.append(replayed)
                    continue
                data = _gunzip(replayed.read(), name)
            try:
                parsed = parse_trace(data)
            except DecodeError as exc:
                field_name = name if exc.field == "trace" else f"{name}: {exc.field}"
                raise DecodeError(field_name, exc.value, exc.problem, line=exc.line) \
                    from None
            spans = spans_from_trace(parsed, resource=resource)
            yield ReplayedRun(run_id=name, source=name, spans=tuple(spans),
                              trace_ids=_trace_ids(spans), trace_file=True,
                              problem=None if spans else "the trace holds no spans")
        if not logs:
            return
        reader = read_runs(*logs, rotated=rotated, keep_events=True)
        key = resolve_digest_key(None)
        try:
            for run in reader:
                if run.started is None:
                    yield ReplayedRun(run_id=run.run_id, source=run.source, spans=(),
                                      complete=False,
                                      problem="its run_started was not found: when it ran "
                                              "and at what tier are unknown")
                    continue
                spans = spans_from_events(run.events, tier=tier,
                                          content_capture=content_capture,
                                          resource=resource, digest_key=_signing_key(run, key))
                yield ReplayedRun(run_id=run.run_id, source=run.source, spans=tuple(spans),
                                  trace_ids=_trace_ids(spans), complete=run.is_complete)
        finally:
            if stats is not None:
                for member in dataclasses.fields(ReadStats):
                    setattr(stats, member.name, getattr(reader.stats, member.name))
    finally:
        for stream in opened:
            with contextlib.suppress(OSError):
                stream.close()


def _signing_key(run: LoggedRun, key: bytes | None) -> bytes:
    """The key a replayed run's spans are signed with: the key in force, only for a run
    whose own keyed digest verified with it; otherwise none (``b""``: a plain digest),
    so that re-sending a run never signs what the key's holder did not (a run whose
    digest was stripped or downgraded stays "not signed" for a reader with the key)."""
    if key is not None and run.verification is Verification.VERIFIED and (
            run.digest or "").startswith("hmac-"):
        return key
    return b""


# -- sending --------------------------------------------------------------------------------------


#: How many run ids a ReplayResult lists by kind (all are counted).
_LISTED: Final = 1000
#: Consecutive failed batches after which replay stops sending (the backend is gone).
DEFAULT_GIVE_UP_AFTER: Final = 3


@dataclass(slots=True)
class ReplayResult:
    """What :func:`replay` sent and how the exporter took it.

    ``runs`` counts the logged runs that made spans and ``trace_files`` the trace
    files re-sent; ``spans`` every span made, ``delivered`` those the exporter took,
    ``failed`` those it did not (refused, failed, raised, or never sent after
    ``gave_up``). ``skipped`` lists the runs that made no span (their ``problem``
    says why); ``incomplete`` the ids of runs that were incomplete in the log and
    were sent as recorded (both lists stop at 1,000 entries; ``skipped_count`` and
    ``incomplete_count`` count them all). Per-run details go to ``on_run``.
    """

    runs: int = 0
    trace_files: int = 0
    spans: int = 0
    delivered: int = 0
    failed: int = 0
    gave_up: bool = False
    skipped: list[ReplayedRun] = field(default_factory=list)
    skipped_count: int = 0
    incomplete: list[str] = field(default_factory=list)
    incomplete_count: int = 0
    stats: ReadStats = field(default_factory=ReadStats)


def _weight(span: ReadableSpan) -> int:
    """A span's weight in a batch: its events, and its column chunks (each up to 2,048
    bytes of item decisions, as an event of the events layout would carry one)."""
    chunks = (span.attributes or {}).get("cupel.columns.chunk_count", 0)
    return len(span.events) + (chunks if isinstance(chunks, int) else 0)


def replay(sources: Sequence[ReplaySource], exporter: SpanExporter, *,
           tier: TraceDetailLevel | str = TraceDetailLevel.FULL,
           content_capture: ContentCapture | str | None = None,
           resource: Resource | None = None, rotated: bool = True,
           batch_size: int = DEFAULT_BATCH_SIZE,
           batch_events: int = DEFAULT_BATCH_EVENTS,
           give_up_after: int | None = DEFAULT_GIVE_UP_AFTER,
           on_run: Callable[[ReplayedRun], object] | None = None) -> ReplayResult:
    """Send the runs recorded in ``sources`` (see :func:`read_replay_sources`) to
    ``exporter`` directly, as they are read: ``batch_size`` spans per ``export`` call,
    fewer when the next run's spans would take the batch past ``batch_events`` span
    events. Memory follows the batch and the runs open in the logs, not the sources'
    size. The exporter is not shut down.

    An ``export`` that fails (or raises) counts its spans in ``failed``; after
    ``give_up_after`` failed batches in a row (None: never) nothing more is sent and
    the remaining spans are counted failed (``gave_up``), so a backend that is down
    costs a few export timeouts, not one per batch. Raises what
    :func:`read_replay_sources` raises.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    result = ReplayResult()
    pending: list[ReadableSpan] = []
    pending_events = 0
    failures = 0

    def send() -> None:
        nonlocal failures, pending_events
        batch = list(pending)
        pending.clear()
        pending_events = 0
        if result.gave_up:
            result.failed += len(batch)
            return
        try:
            outcome = exporter.export(batch)
        except Exception:
            outcome = SpanExportResult.FAILURE
        if outcome is SpanExportResult.SUCCESS:
            result.delivered += len(batch)
            failures = 0
            return
        result.failed += len(batch)
        failures += 1
        if give_up_after is not None and failures >= give_up_after:
            result.gave_up = True

    for run in read_replay_sources(sources, tier=tier, content_capture=content_capture,
                                   resource=resource, rotated=rotated, stats=result.stats):
        if on_run is not None:
            on_run(run)
        if not run.spans:
            result.skipped_count += 1
            if len(result.skipped) < _LISTED:
                result.skipped.append(run)
            continue
        if run.trace_file:
            result.trace_files += 1
        else:
            result.runs += 1
            if not run.complete:
                result.incomplete_count += 1
                if len(result.incomplete) < _LISTED:
                    result.incomplete.append(run.run_id)
        result.spans += len(run.spans)
        weight = sum(_weight(s) for s in run.spans)
        if pending and pending_events + weight > batch_events:
            send()  # this run's spans would make the batch too large: send what is there
        pending.extend(run.spans)
        pending_events += weight
        while len(pending) >= batch_size:
            rest = pending[batch_size:]
            del pending[batch_size:]
            send()
            pending.extend(rest)
            pending_events = sum(len(s.events) for s in rest)
    if pending:
        send()
    return result
