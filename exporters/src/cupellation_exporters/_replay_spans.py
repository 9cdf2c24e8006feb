"""Recorded runs and trace files made into SDK ``ReadableSpan`` objects, for
:mod:`cupellation_exporters._replay` to send.

A run recorded as events becomes the spans :class:`cupellation.otel.SpanCollector`
itself makes: the events are fed, through a ``FanOutCollector`` (which lowers the
tier as a live run would), to a SpanCollector whose tracer records what it is asked
to make instead of timing it. The spans then get the run's own times and ids:

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

A trace file's spans keep their trace and span ids, parents, times, attributes,
events and dropped counts, and their scope, kind and status where the file gives
them as Jaeger tags.
"""

from __future__ import annotations

import contextvars
import hashlib
import math
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
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
from cupellation.otel import SpanCollector, SpanData

from .conventions import PIPELINE_SPAN

__all__ = ["replay_id", "spans_from_events", "spans_from_trace"]

_ID_SALT: Final = b"cupellation-replay\x00"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
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
                      resource: Resource | None = None,
                      digest_key: bytes | str | None = None) -> list[ReadableSpan]:
    """The spans one run's recorded events make, as SDK ``ReadableSpan`` objects with
    the run's own times and deterministic ids (see the module documentation).

    ``events`` are one run's (any order: they are sorted by ``seq``); ``tier`` is
    the tier to replay at, lowered to the one the run was recorded at;
    ``content_capture`` (default: ``CUPELLATION_CAPTURE_CONTENT``, else ``none``, as
    for SpanCollector) never shows more than was recorded. Returns [] for a run
    whose ``run_started`` is missing (nothing says when it ran, or at what tier).
    The root's digest is keyed with ``digest_key`` (default: ``CUPELLATION_DIGEST_KEY``;
    ``b""``: plain, whatever the environment says).
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
    resource = resource if resource is not None else Resource.create({})
    # A run that recorded no service gets the resource's, as a live SpanCollector on a
    # provider with this resource records it.
    named = resource.attributes.get(SERVICE_NAME)
    collector = SpanCollector(
        tracer_provider=_RecorderProvider(recorder),
        meter_provider=otel_metrics.NoOpMeterProvider(),
        tier=min(wanted_tier, recorded_tier),
        content_capture=_effective_capture(started.content_capture, wanted_capture),
        digest_key=digest_key,
        service=named if isinstance(named, str) and named else None)

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
