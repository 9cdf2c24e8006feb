"""Replay: recorded runs sent to a trace backend as the spans they would have made.

A run recorded as events (an audit log, any log :func:`cupellation.logs.read_runs`
reads, a file of event JSON lines) becomes SDK ``ReadableSpan`` objects built by
:class:`cupellation.otel.SpanCollector` itself: the events are fed, through a
``FanOutCollector`` (which lowers the tier as a live run would), to a SpanCollector
whose tracer records what it is asked to make instead of timing it. The spans then
get the run's own times and ids:

- **Times.** The root starts at ``run_started.started_at`` and lasts the run's
  ``duration_ms``; stages follow one another from the root's start, each lasting
  its recorded ``duration_ms`` (Sort, which has no span, takes its place in the
  sequence); a span event is stamped with the end of the stage that made it, the
  root's own events (inclusions, Sort) with the end of their stage. Every time is
  a whole microsecond (``started_at`` is one; the stage boundaries are rounded),
  which is what Jaeger and Phoenix keep, so a backend stores them exactly; the
  exact durations travel as ``cupel.stage.duration_ms`` and ``cupel.run.duration_ms``.
- **Ids.** Deterministic: the trace id and each span id are derived from the run id
  (and the span's role: ``root``, ``cupel.stage.slice#0``, ...), so replaying the
  same source again sends the same spans. When ``run_started`` carries the
  ``trace_id``/``span_id`` of the span current when the run started, the root is
  made a child of that span, in that trace.

A trace file (OTLP/JSON lines or one object, Jaeger's JSON, OTLP protobuf; gzip
allowed) is re-exported as it is: every span keeps its trace and span ids, its
parent, its times, attributes, events and dropped counts, and its scope, kind and
status where the file gives them as Jaeger tags (the readers keep no resource or
links, and OTLP's own kind and status fields: those are not re-sent).
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import dataclasses
import errno
import gzip
import hashlib
import math
import os
import re
import stat
import sys
import traceback
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.util.types import Attributes

from cupellation import FanOutCollector, TraceDetailLevel
from cupellation.events import (
    ContentCapture,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    StageStarted,
    resolve_capture,
)
from cupellation.exceptions import DecodeError
from cupellation.files import read_prefix
from cupellation.logs import ReadStats, read_runs
from cupellation.otel import SpanCollector, SpanData, parse_trace

from .conventions import PIPELINE_SPAN

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
    "replay_id",
    "spans_from_events",
    "spans_from_trace",
]

DEFAULT_BATCH_SIZE: Final = 512
"""Spans handed to the exporter per ``export`` call, at most."""
DEFAULT_BATCH_EVENTS: Final = 8192
"""Span events per ``export`` call above which a batch goes out early (a Full-tier run
of thousands of candidates is thousands of events: a batch of such spans must stay
under the 4 MiB a gRPC receiver takes by default)."""

_ID_SALT: Final = b"cupellation-replay\x00"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_SNIFF_BYTES: Final = 1 << 16
#: How a trace document begins: its first member is one only traces have (OTLP/JSON,
#: Tempo, Jaeger's download or one Jaeger trace); an event log line begins with
#: "schema" or another event field. "data" must hold a list (a shipper may nest a log
#: record under "data") and "trace" an OTLP document.
_TRACE_START: Final = re.compile(
    rb'\[?\s*\{\s*(?:"(?:resourceSpans|batches|traceID|spans|processes)"\s*:'
    rb'|"data"\s*:\s*\[|"trace"\s*:\s*\{\s*"(?:resourceSpans|batches)"\s*:)')
_GZIP_MAGIC: Final = b"\x1f\x8b"
#: Strictness of content capture: a replay never shows more than was recorded.
_STRICTNESS: Final = {ContentCapture.FULL: 0, ContentCapture.HASH: 1, ContentCapture.NONE: 2}


def replay_id(run_id: str, role: str, bits: int = 64) -> int:
    """The deterministic id (a ``bits``-bit integer, never 0) of the span playing
    ``role`` in run ``run_id`` (``role="trace"`` for the trace id, 128 bits)."""
    digest = hashlib.sha256(_ID_SALT + run_id.encode("utf-8", "surrogatepass") + b"\x00"
                            + role.encode("utf-8", "surrogatepass")).digest()
    value = int.from_bytes(digest[:bits // 8], "big")
    return value or 1


def _ns(moment: datetime) -> int:
    """Nanoseconds since the epoch of an aware datetime (exact: no float on the way)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def _duration_ns(milliseconds: float) -> int:
    if not math.isfinite(milliseconds) or milliseconds <= 0:
        return 0
    return round(milliseconds * 1_000_000)


def _parse_hex(value: str | None, digits: int) -> int | None:
    if not value or len(value) != digits:
        return None
    try:
        number = int(value, 16)
    except ValueError:
        return None
    return number or None


# -- a tracer that records what SpanCollector makes ---------------------------------------------


class _Clock:
    """The replay's notion of now (nanoseconds), set before each delivery."""

    __slots__ = ("now",)

    def __init__(self, now: int) -> None:
        self.now = now


class _RecordedSpan(trace.Span):
    """A span that keeps what it is told, stamped by the replay's clock."""

    def __init__(self, recorder: _Recorder, name: str, context: SpanContext,
                 parent: SpanContext | None, attributes: Attributes,
                 scope: InstrumentationScope) -> None:
        self._recorder = recorder
        self.name = name
        self.context = context
        self.parent = parent
        self.scope = scope
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.events: list[Event] = []
        self.status = Status(StatusCode.UNSET)
        self.start_time = recorder.clock.now
        self.end_time: int | None = None

    def get_span_context(self) -> SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self.end_time is None:
            self.attributes.update(attributes)

    def set_attribute(self, key: str, value: Any) -> None:
        if self.end_time is None:
            self.attributes[key] = value

    def add_event(self, name: str, attributes: Attributes = None,
                  timestamp: int | None = None) -> None:
        if self.end_time is None:
            self.events.append(Event(name, _attributes(attributes),
                                     self._recorder.clock.now if timestamp is None
                                     else timestamp))

    def update_name(self, name: str) -> None:
        if self.end_time is None:
            self.name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self.end_time is None:
            self.status = (status if isinstance(status, Status)
                           else Status(status, description))

    def record_exception(self, exception: BaseException, attributes: Attributes = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        """As the SDK does: an ``exception`` event with type, message and stacktrace."""
        stack = "".join(traceback.format_exception(exception))
        module = type(exception).__module__
        qualname = type(exception).__qualname__
        self.add_event("exception", {
            "exception.type": (f"{module}.{qualname}" if module and module != "builtins"
                               else qualname),
            "exception.message": str(exception),
            "exception.stacktrace": stack,
            "exception.escaped": str(escaped),
            **dict(attributes or {}),
        }, timestamp)

    def end(self, end_time: int | None = None) -> None:
        # The replay's timeline decides every time (whole microseconds, as recorded): a
        # time the collector computes from a stage's duration is not used.
        del end_time
        if self.end_time is None:
            self.end_time = self._recorder.clock.now

    def finish(self, when: int) -> None:
        """End the span if nothing did (a run whose end was never recorded)."""
        if self.end_time is None:
            self.end_time = max(when, self.start_time)


class _Recorder(trace.Tracer):
    """The tracer SpanCollector is given: spans get the run's derived ids."""

    def __init__(self, run_id: str, trace_id: int, clock: _Clock) -> None:
        self.run_id = run_id
        self.trace_id = trace_id
        self.clock = clock
        self.scope = InstrumentationScope("cupellation")
        self.spans: list[_RecordedSpan] = []
        self._roles: dict[str, int] = {}

    def _span_id(self, name: str) -> int:
        ordinal = self._roles.get(name, 0)
        self._roles[name] = ordinal + 1
        role = "root" if name == PIPELINE_SPAN and ordinal == 0 else f"{name}#{ordinal}"
        return replay_id(self.run_id, role)

    def start_span(self, name: str, context: otel_context.Context | None = None,
                   kind: SpanKind = SpanKind.INTERNAL, attributes: Attributes = None,
                   links: Any = None, start_time: int | None = None,
                   record_exception: bool = True,
                   set_status_on_exception: bool = True) -> trace.Span:
        parent = trace.get_current_span(context).get_span_context()
        trace_id = parent.trace_id if parent.is_valid else self.trace_id
        span_context = SpanContext(trace_id, self._span_id(name), is_remote=False,
                                   trace_flags=_SAMPLED)
        span = _RecordedSpan(self, name, span_context, parent if parent.is_valid else None,
                             attributes, self.scope)
        if start_time is not None:
            span.start_time = start_time
        self.spans.append(span)
        return span

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError("SpanCollector starts spans with start_span only")


class _RecorderProvider(trace.TracerProvider):
    def __init__(self, recorder: _Recorder) -> None:
        self._recorder = recorder

    def get_tracer(self, instrumenting_module_name: str,
                   instrumenting_library_version: str | None = None,
                   schema_url: str | None = None,
                   attributes: Attributes = None) -> trace.Tracer:
        self._recorder.scope = InstrumentationScope(
            instrumenting_module_name, instrumenting_library_version, schema_url)
        return self._recorder


def _attributes(values: Attributes | Mapping[str, Any], dropped: int = 0) -> BoundedAttributes:
    """Attributes as the SDK holds them (lists become tuples, invalid values are
    dropped), unbounded, with ``dropped`` carried over."""
    bounded = BoundedAttributes(maxlen=None, attributes=dict(values or {}), immutable=True,
                                max_value_len=None)
    bounded.dropped += dropped
    return bounded


# -- events -> spans ------------------------------------------------------------------------------


def _effective_capture(recorded: str, wanted: ContentCapture) -> ContentCapture:
    """The capture SpanCollector applies so that the spans show ``wanted`` at most, of
    content that was recorded as ``recorded`` (hashing a hash would be wrong)."""
    try:
        was = ContentCapture.parse(recorded)
    except Exception:
        was = ContentCapture.NONE
    if was is ContentCapture.NONE:
        return ContentCapture.NONE  # idempotent: the placeholder again, left out of spans
    if _STRICTNESS[wanted] > _STRICTNESS[was]:
        return wanted
    return ContentCapture.FULL  # show what was recorded, as it was recorded


def _deliveries(events: Sequence[PipelineEvent]
                ) -> list[tuple[Sequence[PipelineEvent], int]]:
    """The events as the pipeline delivers them: one-event tuples, and runs of item
    events of one kind (and stage) with consecutive seqs as ItemEventBatch; each with
    the position of its first event in ``events``."""
    out: list[tuple[Sequence[PipelineEvent], int]] = []
    pending: list[Any] = []
    first_at = 0

    def flush() -> None:
        if not pending:
            return
        first = pending[0]
        excluded = isinstance(first, ItemExcluded)
        out.append((ItemEventBatch(
            run_id=first.run_id, first_seq=first.seq, stage=first.stage if excluded else None,
            candidate_indices=[e.candidate_index for e in pending],
            items=[e.item for e in pending], scores=[e.score for e in pending],
            reasons=[e.reason for e in pending],
            positions=None if excluded else [e.position for e in pending]), first_at))
        pending.clear()

    for position, event in enumerate(events):
        if isinstance(event, ItemExcluded | ItemIncluded):
            if pending:
                last = pending[-1]
                if (type(last) is not type(event) or event.seq != last.seq + 1
                        or getattr(last, "stage", None) != getattr(event, "stage", None)):
                    flush()
            if not pending:
                first_at = position
            pending.append(event)
            continue
        flush()
        out.append(((event,), position))
    flush()
    return out


@dataclass(slots=True)
class _Window:
    start: int
    end: int | None = None


def _timeline(events: Sequence[PipelineEvent], start: int
              ) -> tuple[list[int], int]:
    """The clock value to set before each event (by position) and the run's end."""
    cursor = start
    windows: list[_Window] = []
    window_of: list[_Window | None] = []
    run_end: int | None = None
    open_window: _Window | None = None
    for event in events:
        if isinstance(event, StageStarted):
            open_window = _Window(cursor)
            windows.append(open_window)
        elif isinstance(event, StageCompleted):
            if open_window is None:
                open_window = _Window(cursor)
                windows.append(open_window)
            open_window.end = open_window.start + _duration_ns(event.duration_ms)
            cursor = open_window.end
            window_of.append(open_window)
            open_window = None
            continue
        elif isinstance(event, RunCompleted | RunFailed):
            run_end = start + _duration_ns(event.duration_ms)
        window_of.append(open_window)
    end = max(run_end if run_end is not None else cursor, cursor)
    for open_one in windows:
        if open_one.end is None:
            open_one.end = end
    stamps: list[int] = []
    last = start
    for event, window in zip(events, window_of, strict=True):
        if isinstance(event, RunStarted):
            stamp = start
        elif isinstance(event, RunCompleted | RunFailed):
            stamp = end
        elif isinstance(event, StageStarted) and window is not None:
            stamp = window.start
        elif window is not None:
            assert window.end is not None
            stamp = window.end
        else:
            stamp = last
        stamps.append(stamp)
        last = max(last, stamp)
    return [_whole_us(stamp) for stamp in stamps], _whole_us(end)


def _whole_us(ns: int) -> int:
    """``ns`` rounded to a whole microsecond (what Jaeger and Phoenix keep)."""
    return (ns + 500) // 1000 * 1000


def _parent(started: RunStarted) -> tuple[int | None, SpanContext | None]:
    """The trace id and the remote parent span that ``run_started`` names, if any."""
    trace_id = _parse_hex(started.trace_id, 32)
    span_id = _parse_hex(started.span_id, 16)
    if trace_id is None:
        return None, None
    if span_id is None:
        return trace_id, None
    return trace_id, SpanContext(trace_id, span_id, is_remote=True, trace_flags=_SAMPLED)


def spans_from_events(events: Iterable[PipelineEvent], *,
                      tier: TraceDetailLevel | str = TraceDetailLevel.FULL,
                      content_capture: ContentCapture | str | None = None,
                      resource: Resource | None = None) -> list[ReadableSpan]:
    """The spans one run's recorded events make, as SDK ``ReadableSpan`` objects with
    the run's own times and deterministic ids (see the module documentation).

    ``events`` are one run's (any order: they are sorted by ``seq``); ``tier`` is
    the tier to replay at, lowered to the one the run was recorded at;
    ``content_capture`` (default: ``CUPELLATION_CAPTURE_CONTENT``, else ``none``, as
    for SpanCollector) never shows more than was recorded. Returns [] for a run
    whose ``run_started`` is missing (nothing says when it ran, or at what tier).
    """
    ordered = sorted(events, key=lambda e: e.seq)
    started = next((e for e in ordered if isinstance(e, RunStarted)), None)
    if started is None:
        return []
    wanted_tier = TraceDetailLevel.parse(tier)
    try:
        recorded_tier = TraceDetailLevel.parse(started.detail_level)
    except Exception:
        recorded_tier = TraceDetailLevel.FULL
    # The parameter, else CUPELLATION_CAPTURE_CONTENT (a bad value warns once, as every
    # sink does), else none.
    wanted_capture = resolve_capture(content_capture, ContentCapture.NONE)
    run_id = started.run_id
    parent_trace, parent = _parent(started)
    start = _ns(started.started_at)
    stamps, end = _timeline(ordered, start)
    clock = _Clock(start)
    recorder = _Recorder(run_id, parent_trace if parent_trace is not None
                         else replay_id(run_id, "trace", 128), clock)
    collector = SpanCollector(
        tracer_provider=_RecorderProvider(recorder),
        meter_provider=otel_metrics.NoOpMeterProvider(),
        tier=min(wanted_tier, recorded_tier),
        content_capture=_effective_capture(started.content_capture, wanted_capture))
    fan_out = FanOutCollector(collector)

    def feed() -> None:
        if parent is not None:
            otel_context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
        for delivery, position in _deliveries(ordered):
            clock.now = stamps[position]
            fan_out.record(delivery)

    # A copy of the context: whatever the collector attaches (and, for a run whose end
    # was never recorded, leaves attached) stays there.
    contextvars.copy_context().run(feed)
    resource = resource if resource is not None else Resource.create({})
    out = []
    for span in recorder.spans:
        span.finish(end)
        out.append(ReadableSpan(
            name=span.name, context=span.context, parent=span.parent, resource=resource,
            attributes=_attributes(span.attributes), events=tuple(span.events),
            kind=SpanKind.INTERNAL, status=span.status, start_time=span.start_time,
            end_time=span.end_time, instrumentation_scope=span.scope))
    return out


# -- trace files -> spans -----------------------------------------------------------------------


_KINDS: Final = {kind.name.lower(): kind for kind in SpanKind}
_STATUS: Final = {"ok": StatusCode.OK, "error": StatusCode.ERROR, "unset": StatusCode.UNSET}


def _jaeger_fields(attributes: Mapping[str, Any]
                   ) -> tuple[dict[str, Any], InstrumentationScope, SpanKind, Status]:
    """The span's attributes without the tags Jaeger uses for OTLP's own fields (scope,
    kind, status), and those fields (the defaults for a span without such tags)."""
    rest = dict(attributes)
    name = rest.pop("otel.scope.name", None) or rest.pop("otel.library.name", None)
    version = rest.pop("otel.scope.version", None) or rest.pop("otel.library.version", None)
    scope = InstrumentationScope(name if isinstance(name, str) else "cupellation",
                                 version if isinstance(version, str) else None)
    kind_tag = rest.pop("span.kind", None)
    kind = _KINDS.get(kind_tag.lower(), SpanKind.INTERNAL) if isinstance(
        kind_tag, str) else SpanKind.INTERNAL
    code = rest.pop("otel.status_code", None)
    description = rest.pop("otel.status_description", None)
    status_code = _STATUS.get(code.lower(), StatusCode.UNSET) if isinstance(
        code, str) else StatusCode.UNSET
    status = Status(status_code, description if isinstance(description, str)
                    and status_code is StatusCode.ERROR else None)
    return rest, scope, kind, status


def spans_from_trace(spans: Iterable[SpanData], *, resource: Resource | None = None
                     ) -> list[ReadableSpan]:
    """Spans read from a trace (``cupellation.otel.parse_trace``) as SDK
    ``ReadableSpan`` objects to re-export: ids, parents, times, attributes, events and
    dropped counts as they were (Jaeger's tags for the scope, kind and status become
    those fields again). A span read without ids gets ids derived from its name,
    start and place in the input, the same each time."""
    resource = resource if resource is not None else Resource.create({})
    out = []
    for position, span in enumerate(spans):
        anonymous = f"{span.name}\x00{span.start_ns}\x00{position}"
        trace_id = (_parse_hex(span.trace_id, 32)
                    or replay_id(anonymous, "trace", 128))
        span_id = _parse_hex(span.span_id, 16) or replay_id(anonymous, "span")
        parent_id = _parse_hex(span.parent_span_id, 16)
        events: BoundedList[Event] = BoundedList.from_seq(None, [
            Event(event.name, _attributes(event.attributes, event.dropped_attributes),
                  event.timestamp_ns if event.timestamp_ns is not None else span.start_ns)
            for event in span.events])
        events.dropped = span.dropped_events
        attributes, scope, kind, status = _jaeger_fields(span.attributes)
        out.append(ReadableSpan(
            name=span.name,
            context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED),
            parent=None if parent_id is None else SpanContext(
                trace_id, parent_id, is_remote=False, trace_flags=_SAMPLED),
            resource=resource,
            attributes=_attributes(attributes, span.dropped_attributes),
            events=events, kind=kind, status=status, start_time=span.start_ns,
            end_time=span.end_ns if span.end_ns is not None else span.start_ns,
            instrumentation_scope=scope))
    return out


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
                                          resource=resource)
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
