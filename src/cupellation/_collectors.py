"""Trace collectors (``spec/src/diagnostics/trace-collector.md``), extended for
the event stream.

There is one way for a collector to receive events: ``record(events)``. The
pipeline calls it, in order, with either a one-event tuple (a run- or
stage-level event) or an :class:`~cupellation.events.ItemEventBatch` holding
one stage's item decisions. A collector that wants events one by one
subclasses :class:`EventCollector` and implements ``on_event``.

Before building anything the pipeline asks ``is_enabled`` and
``detail_level``: with :data:`NULL_COLLECTOR` no event object is built, and
below ``FULL`` no inclusion (below ``STAGE_AND_EXCLUSIONS`` no exclusion) is.
Every call into a collector is guarded by the pipeline; see
:meth:`~cupellation.Pipeline.run`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import msgspec

from ._report import SelectionReport, build_report
from .events import (
    ItemEventBatch,
    PipelineEvent,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    TraceDetailLevel,
)
from .exceptions import InvalidTypeError

__all__ = [
    "NULL_COLLECTOR",
    "DiagnosticTraceCollector",
    "EventCollector",
    "EventObserver",
    "FanOutCollector",
    "NullTraceCollector",
    "TraceCollector",
    "TraceDetailLevel",
    "check_collector",
]

_logger = logging.getLogger("cupellation")

#: A callable told of each recorded event, synchronously, as the run goes.
EventObserver = Callable[[PipelineEvent], object]


@runtime_checkable
class TraceCollector(Protocol):
    """What the pipeline calls while it runs.

    ``record`` receives the run's events in order, each call a sequence: a
    one-event tuple for run- and stage-level events, or an
    :class:`~cupellation.events.ItemEventBatch` with one stage's item
    decisions (delivered before that stage's ``stage_completed``). It is
    called only when ``is_enabled``; item batches only as ``detail_level``
    asks. If it raises, the pipeline logs the failure once on the
    ``cupellation`` logger and sends that collector nothing more from the run;
    the run's own result or exception is unchanged.

    **The sink contract** adds two methods, which every sink of the library has
    (:class:`EventCollector` gives no-op defaults) and :class:`FanOutCollector`
    passes on: ``flush()`` hands on whatever the sink holds back (lines of runs
    that have not ended); ``close()`` flushes, then releases what the sink holds
    (files, open spans) — a closed sink is no longer enabled, and closing twice
    does nothing. They are not part of this protocol's required members, so a
    collector written with only the three above still type-checks and runs: the
    pipeline never calls them, and :class:`FanOutCollector` calls them only where
    they exist.
    """

    @property
    def is_enabled(self) -> bool: ...

    @property
    def detail_level(self) -> TraceDetailLevel: ...

    def record(self, events: Sequence[PipelineEvent], /) -> None: ...


class EventCollector:
    """A base for collectors that take events one at a time.

    Subclasses implement :meth:`on_event`; ``record`` expands item batches
    into single events for them::

        class PrintingCollector(EventCollector):
            def on_event(self, event):
                print(event.type, event.seq)
    """

    def __init__(self, detail_level: TraceDetailLevel | str | int = TraceDetailLevel.FULL
                 ) -> None:
        self._detail_level = TraceDetailLevel.parse(detail_level)

    @property
    def is_enabled(self) -> bool:
        return True

    @property
    def detail_level(self) -> TraceDetailLevel:
        return self._detail_level

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """Pass each event to :meth:`on_event`, in order."""
        for event in events:
            self.on_event(event)

    def on_event(self, event: PipelineEvent, /) -> None:
        """Handle one event."""
        raise NotImplementedError

    def flush(self) -> None:
        """Nothing is held back here; a subclass that buffers overrides it."""

    def close(self) -> None:
        """Nothing to release here; a subclass that holds resources overrides it."""


class NullTraceCollector:
    """The disabled collector: records nothing, and the pipeline builds no events for it."""

    __slots__ = ()

    @property
    def is_enabled(self) -> bool:
        return False

    @property
    def detail_level(self) -> TraceDetailLevel:
        return TraceDetailLevel.STAGE_ONLY

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """Does nothing."""

    def flush(self) -> None:
        """Does nothing."""

    def close(self) -> None:
        """Does nothing (the shared disabled collector stays as it is)."""

    def __repr__(self) -> str:
        return "NullTraceCollector()"


#: The shared disabled collector; ``Pipeline.run`` uses it when given none.
NULL_COLLECTOR = NullTraceCollector()


class DiagnosticTraceCollector:
    """Buffers a run's events; ``build_report()`` folds them into its SelectionReport.

    ``observer``, when given, is called synchronously with each event; if it
    raises, the failure is logged once on the ``cupellation`` logger and the
    observer is told nothing more, while the collector goes on recording. One
    collector serves one run: use a fresh one per ``Pipeline.run`` call.
    """

    __slots__ = ("_detail_level", "_entries", "_observer")

    def __init__(
        self,
        detail_level: TraceDetailLevel | str | int = TraceDetailLevel.STAGE_ONLY,
        *,
        observer: EventObserver | None = None,
    ) -> None:
        if observer is not None and not callable(observer):
            raise InvalidTypeError("observer", observer, "a callable taking one event, or None")
        self._detail_level = TraceDetailLevel.parse(detail_level)
        # Run and stage events, and whole stages of item events kept as
        # ItemEventBatch columns (expanded only when read).
        self._entries: list[PipelineEvent | ItemEventBatch] = []
        self._observer = observer

    @property
    def is_enabled(self) -> bool:
        return True

    @property
    def detail_level(self) -> TraceDetailLevel:
        return self._detail_level

    @property
    def events(self) -> tuple[PipelineEvent, ...]:
        """Every recorded event, in order."""
        flat: list[PipelineEvent] = []
        for entry in self._entries:
            if isinstance(entry, ItemEventBatch):
                flat.extend(entry)
            else:
                flat.append(entry)
        return tuple(flat)

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        if isinstance(events, ItemEventBatch):
            # A collector discards the item events its level does not record
            # (trace-collector.md), even when they are handed to it directly.
            if self._detail_level < (TraceDetailLevel.STAGE_AND_EXCLUSIONS if events.excluded
                                     else TraceDetailLevel.FULL):
                return
            self._entries.append(events)
        else:
            self._entries.extend(events)
        if self._observer is not None:
            for event in events:
                try:
                    self._observer(event)
                except Exception:
                    _logger.exception(
                        "cupellation: event observer %r raised on a %s event; it is told "
                        "nothing more", self._observer, event.type)
                    self._observer = None
                    break

    def flush(self) -> None:
        """Nothing is held back: every event is kept as it arrives."""

    def close(self) -> None:
        """Nothing to release: the recorded events stay readable."""

    def build_report(self) -> SelectionReport:
        """The SelectionReport folded from the recorded events."""
        return build_report(self._entries)

    def __repr__(self) -> str:
        return (f"DiagnosticTraceCollector(detail_level={self._detail_level.name}, "
                f"entries={len(self._entries)})")


class FanOutCollector:
    """Feeds one run's events to several collectors (a report, spans and logs at once).

    Enabled when any child is; its detail level is the highest of the enabled
    children's, and each child gets only what its own level asks for. Each child
    sees the stream its own level would have produced: its ``run_started`` names
    its level, and its events are numbered ``seq`` 0, 1, 2, ... without the gaps
    left by the item events it does not get. A child that raises is logged once
    and gets nothing more from that run; the others carry on.
    """

    __slots__ = ("_active", "_children", "_level", "_skipped")

    def __init__(self, *collectors: TraceCollector) -> None:
        for position, collector in enumerate(collectors):
            check_collector(f"collectors[{position}]", collector)
        self._children: tuple[TraceCollector, ...] = tuple(
            c for c in collectors if c.is_enabled)
        self._level = max((c.detail_level for c in self._children),
                          default=TraceDetailLevel.STAGE_ONLY)
        self._active: list[TraceCollector] = list(self._children)
        # Per child (by position), how many events of this run it did not get.
        self._skipped: list[int] = [0] * len(self._children)

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

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        if isinstance(events, ItemEventBatch):
            needed = (TraceDetailLevel.STAGE_AND_EXCLUSIONS if events.excluded
                      else TraceDetailLevel.FULL)
            for position, child in enumerate(self._children):
                if child not in self._active:
                    continue
                if child.detail_level < needed:
                    self._skipped[position] += len(events)
                    continue
                skipped = self._skipped[position]
                self._send(child, events if not skipped else ItemEventBatch(
                    run_id=events.run_id, first_seq=events.first_seq - skipped,
                    stage=events.stage, candidate_indices=events.candidate_indices,
                    items=events.items, scores=events.scores, reasons=events.reasons,
                    positions=events.positions))
            return
        first = events[0] if len(events) == 1 else None
        if isinstance(first, RunStarted):
            # A new run: every child again, each with its own level and numbering.
            self._active = list(self._children)
            self._skipped = [0] * len(self._children)
            for child in self._children:
                self._send(child, (msgspec.structs.replace(
                    first, detail_level=child.detail_level.tier),))
            return
        # What closes (a stage, the run) goes to the children in reverse order, so that
        # contexts they attached when it opened are detached last-in first-out (two span
        # collectors would otherwise leave one's span current after the run).
        order = list(enumerate(self._children))
        if isinstance(first, StageCompleted | RunCompleted | RunFailed):
            order.reverse()
        for position, child in order:
            if child not in self._active:
                continue
            skipped = self._skipped[position]
            self._send(child, events if not skipped else tuple(
                msgspec.structs.replace(event, seq=event.seq - skipped) for event in events))

    def flush(self) -> None:
        """Flush every child that can be flushed; one that raises is logged and the
        others are still flushed."""
        self._each("flush")

    def close(self) -> None:
        """Close every child that can be closed (each once, even if another raises)."""
        self._each("close")

    def _each(self, method: str) -> None:
        for child in self._children:
            call = getattr(child, method, None)
            if call is None:
                continue
            try:
                call()
            except Exception:
                _logger.exception("cupellation: collector %r raised in %s()", child, method)

    def _send(self, child: TraceCollector, events: Sequence[PipelineEvent]) -> None:
        try:
            child.record(events)
        except Exception:
            _logger.exception(
                "cupellation: collector %r raised on %s; it gets nothing more from run %s",
                child, events[0].type if events else "an empty batch",
                events[0].run_id if events else "?")
            self._active.remove(child)

    def __repr__(self) -> str:
        return f"FanOutCollector({', '.join(map(repr, self._children))})"


def check_collector(field: str, collector: object) -> None:
    """Raise unless ``collector`` has the TraceCollector members."""
    # Looked up without calling anything: a property that raises is the run's
    # problem to guard against, not a reason to refuse the collector.
    if isinstance(collector, type) or not all(
            hasattr(type(collector), name) or name in getattr(collector, "__dict__", ())
            for name in ("is_enabled", "detail_level", "record")):
        hint = (f" (pass an instance: {collector.__name__}())" if isinstance(collector, type)
                else " (is_enabled, detail_level and record(events))")
        raise InvalidTypeError(field, collector, "a TraceCollector" + hint)
