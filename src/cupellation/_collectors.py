"""Trace collectors (``spec/src/diagnostics/trace-collector.md``), extended for
the event stream.

The pipeline asks a collector two questions before building anything —
``is_enabled`` and ``detail_level`` — so that with :data:`NULL_COLLECTOR` no
event object is ever constructed, and at ``Stage`` level no item event is.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from ._events import ItemEventBatch, PipelineEvent
from ._report import SelectionReport, build_report
from .exceptions import InvalidTypeError, InvalidValueError

__all__ = [
    "NULL_COLLECTOR",
    "check_collector",
    "DiagnosticTraceCollector",
    "EventObserver",
    "FanOutCollector",
    "NullTraceCollector",
    "TraceCollector",
    "TraceDetailLevel",
]

_logger = logging.getLogger("cupellation")

#: A callable told of each recorded event, synchronously, as the run goes.
EventObserver = Callable[[PipelineEvent], object]


class TraceDetailLevel(enum.IntEnum):
    """How much a collector records: ``STAGE`` (run- and stage-level events) or
    ``ITEM`` (those plus one event per candidate decision)."""

    STAGE = 0
    ITEM = 1


@runtime_checkable
class TraceCollector(Protocol):
    """What the pipeline calls while it runs.

    ``record_stage_event`` receives run- and stage-level events (run started,
    stage completed, overflow, shortfall, run completed or failed);
    ``record_item_event`` receives per-candidate decisions and is only called
    when ``detail_level`` is ``ITEM``. Neither may raise into the pipeline:
    the built-in collectors catch and log what their observers raise.

    A collector may also define ``record_item_events(events)``: the pipeline
    then hands it each stage's item events in one call (in order, before that
    stage's ``StageCompleted``) instead of one call per event.
    """

    @property
    def is_enabled(self) -> bool: ...

    @property
    def detail_level(self) -> TraceDetailLevel: ...

    def record_stage_event(self, event: PipelineEvent, /) -> None: ...

    def record_item_event(self, event: PipelineEvent, /) -> None: ...


class NullTraceCollector:
    """The disabled collector: records nothing, and the pipeline builds no events for it."""

    __slots__ = ()

    @property
    def is_enabled(self) -> bool:
        return False

    @property
    def detail_level(self) -> TraceDetailLevel:
        return TraceDetailLevel.STAGE

    def record_stage_event(self, event: PipelineEvent, /) -> None:
        """Does nothing."""

    def record_item_event(self, event: PipelineEvent, /) -> None:
        """Does nothing."""

    def __repr__(self) -> str:
        return "NullTraceCollector()"


#: The shared disabled collector; ``Pipeline.run`` uses it when given none.
NULL_COLLECTOR = NullTraceCollector()


def _notify(observer: EventObserver, event: PipelineEvent) -> None:
    try:
        observer(event)
    except Exception:
        # Diagnostics must never break the run they observe.
        _logger.exception(
            "cupellation: event observer %r raised on a %s event; the run continues",
            observer, event.type,
        )


class DiagnosticTraceCollector:
    """Buffers events in order; ``build_report()`` folds them into a SelectionReport.

    ``observer``, when given, is called synchronously with each recorded
    event; if it raises, the failure is logged on the ``cupellation`` logger
    and the run carries on. One collector serves one run: use a fresh one per
    ``Pipeline.run`` call.
    """

    __slots__ = ("_detail_level", "_events", "_items", "_observer")

    def __init__(
        self,
        detail_level: TraceDetailLevel = TraceDetailLevel.STAGE,
        *,
        observer: EventObserver | None = None,
    ) -> None:
        if isinstance(detail_level, bool) or detail_level not in (
                TraceDetailLevel.STAGE, TraceDetailLevel.ITEM):
            raise InvalidValueError("detail_level", detail_level,
                                    "must be TraceDetailLevel.STAGE or TraceDetailLevel.ITEM")
        if observer is not None and not callable(observer):
            raise InvalidTypeError("observer", observer, "a callable taking one event, or None")
        self._detail_level = TraceDetailLevel(detail_level)
        self._items = self._detail_level >= TraceDetailLevel.ITEM
        # Events, and whole stages of item events kept as ItemEventBatch columns
        # (expanded only when read): a report needs no per-item event object.
        self._events: list[PipelineEvent | ItemEventBatch] = []
        self._observer = observer

    @property
    def is_enabled(self) -> bool:
        return True

    @property
    def detail_level(self) -> TraceDetailLevel:
        return self._detail_level

    @property
    def events(self) -> tuple[PipelineEvent, ...]:
        """Every recorded event, in insertion order."""
        flat: list[PipelineEvent] = []
        for entry in self._events:
            if type(entry) is ItemEventBatch:
                flat.extend(entry)
            else:
                flat.append(entry)  # type: ignore[arg-type]
        return tuple(flat)

    def record_stage_event(self, event: PipelineEvent, /) -> None:
        self._events.append(event)
        if self._observer is not None:
            _notify(self._observer, event)

    def record_item_event(self, event: PipelineEvent, /) -> None:
        if not self._items:
            return
        self._events.append(event)
        if self._observer is not None:
            _notify(self._observer, event)

    def record_item_events(self, events: Sequence[PipelineEvent], /) -> None:
        """Record a batch of item events (one stage's), in order."""
        if not self._items:
            return
        if type(events) is ItemEventBatch:
            self._events.append(events)
        else:
            self._events.extend(events)
        if self._observer is not None:
            for event in events:
                _notify(self._observer, event)

    def build_report(self) -> SelectionReport:
        """The SelectionReport folded from the recorded events."""
        return build_report(self._events)  # the fold reads batches column-wise

    def __repr__(self) -> str:
        return (f"DiagnosticTraceCollector(detail_level={self._detail_level.name}, "
                f"events={len(self._events)})")


class FanOutCollector:
    """Feeds one run's events to several collectors (a report, spans and logs at once).

    Enabled when any child is; its detail level is the highest of the enabled
    children, and item events reach only the children that want them. A child
    that raises is logged and skipped for that event; the others still get it.
    """

    __slots__ = ("_children", "_item_children", "_level")

    def __init__(self, *collectors: TraceCollector) -> None:
        for position, collector in enumerate(collectors):
            check_collector(f"collectors[{position}]", collector)
        enabled = [c for c in collectors if c.is_enabled]
        self._children: tuple[TraceCollector, ...] = tuple(enabled)
        self._item_children = tuple(
            c for c in enabled if c.detail_level >= TraceDetailLevel.ITEM
        )
        self._level = (TraceDetailLevel.ITEM if self._item_children
                       else TraceDetailLevel.STAGE)

    @property
    def collectors(self) -> tuple[TraceCollector, ...]:
        """The enabled children, in the order given."""
        return self._children

    @property
    def is_enabled(self) -> bool:
        return bool(self._children)

    @property
    def detail_level(self) -> TraceDetailLevel:
        return self._level

    def record_stage_event(self, event: PipelineEvent, /) -> None:
        _forward(self._children, "record_stage_event", event)

    def record_item_event(self, event: PipelineEvent, /) -> None:
        _forward(self._item_children, "record_item_event", event)

    def record_item_events(self, events: Sequence[PipelineEvent], /) -> None:
        """Forward a batch, in one call to each child that accepts batches."""
        for child in self._item_children:
            many = getattr(child, "record_item_events", None)
            if many is None:
                for event in events:
                    _forward((child,), "record_item_event", event)
                continue
            try:
                many(events)
            except Exception:
                _logger.exception(
                    "cupellation: collector %r raised on a batch of %d item events; "
                    "the run continues", child, len(events),
                )

    def __repr__(self) -> str:
        return f"FanOutCollector({', '.join(map(repr, self._children))})"


def check_collector(field: str, collector: object) -> None:
    """Raise unless ``collector`` has the TraceCollector members."""
    if isinstance(collector, type) or not all(
            hasattr(collector, name) for name in
            ("is_enabled", "detail_level", "record_stage_event", "record_item_event")):
        hint = f" (pass an instance: {collector.__name__}())" if isinstance(collector, type) else ""
        raise InvalidTypeError(field, collector, "a TraceCollector" + hint)


def _forward(children: Iterable[TraceCollector], method: str, event: PipelineEvent) -> None:
    for child in children:
        try:
            getattr(child, method)(event)
        except Exception:
            _logger.exception(
                "cupellation: collector %r raised on a %s event; the run continues",
                child, event.type,
            )
