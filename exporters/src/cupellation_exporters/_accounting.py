"""Dropped-span accounting around the OpenTelemetry SDK's batch export.

A span is *dropped* when it never reaches the backend: the bounded queue was full when
it ended (the SDK then evicts the oldest queued span), its batch's export failed
(refused, timed out, connection refused, retries exhausted, or the exporter raised), or
shutdown's time ran out before it was sent (or it ended after shutdown). The SDK only
logs these on its own loggers; the wrappers here count them, expose the count for the
application to read, and log once on the ``cupellation`` logger. Nothing on the
telemetry path raises: an exception from the wrapped exporter or processor becomes a
failed export (and a count), never an error in the application.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from cupellation.exceptions import InvalidTypeError, InvalidValueError
from cupellation.settings import (
    OTLP_BSP_MAX_EXPORT_BATCH_SIZE_ENV_VAR,
    OTLP_BSP_MAX_QUEUE_SIZE_ENV_VAR,
    OTLP_BSP_SCHEDULE_DELAY_ENV_VAR,
    read,
)

__all__ = [
    "DROP_REASONS",
    "EXPORT_FAILED",
    "GRPC_MAX_REQUEST_BYTES",
    "QUEUE_FULL",
    "SHUTDOWN",
    "TOO_LARGE",
    "DropCounter",
    "DropCountingSpanExporter",
    "DropCountingSpanProcessor",
]

_logger = logging.getLogger("cupellation")

QUEUE_FULL: Final = "queue_full"
"""The span ended while the bounded queue was full (the SDK evicted the oldest span)."""
EXPORT_FAILED: Final = "export_failed"
"""The batch holding the span was refused, timed out, or could not be sent."""
SHUTDOWN: Final = "shutdown"
"""Still unsent when shutdown's time ran out, or ended after shutdown."""
TOO_LARGE: Final = "too_large"
"""The span alone is larger than a request the receiver takes (gRPC's 4 MiB)."""
DROP_REASONS: Final = (QUEUE_FULL, EXPORT_FAILED, SHUTDOWN, TOO_LARGE)
#: gRPC receivers refuse a message over 4 MiB by default (Phoenix's and the Collector's
#: included); batches for the gRPC exporter are split to stay under it, with room for
#: gRPC's own framing.
GRPC_MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024 - 1024


class DropCounter:
    """A thread-safe tally of spans submitted, delivered and dropped (by reason).

    One counter is shared by a :class:`DropCountingSpanProcessor` and the
    :class:`DropCountingSpanExporter` inside it. The first drop is logged once, as a
    warning on the ``cupellation`` logger; later drops are only counted.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):  # a lock held by another thread at fork
            reinit = weakref.WeakMethod(self._reinit_lock)  # would never be released

            def after_in_child() -> None:
                if (method := reinit()) is not None:
                    method()

            os.register_at_fork(after_in_child=after_in_child)
        self._submitted = 0
        self._delivered = 0
        self._dropped = dict.fromkeys(DROP_REASONS, 0)
        self._settled = False
        self._logged = False

    @property
    def dropped(self) -> int:
        """Spans that never reached the backend, all reasons together."""
        with self._lock:
            return sum(self._dropped.values())

    @property
    def delivered(self) -> int:
        """Spans whose batch the backend accepted."""
        with self._lock:
            return self._delivered

    @property
    def submitted(self) -> int:
        """Sampled spans handed to the batch processor (ended before shutdown)."""
        with self._lock:
            return self._submitted

    def by_reason(self) -> dict[str, int]:
        """A copy of the dropped counts keyed by reason (see ``DROP_REASONS``)."""
        with self._lock:
            return dict(self._dropped)

    def add_submitted(self, count: int) -> None:
        """Count spans entering the batch processor."""
        with self._lock:
            self._submitted += count

    def add_dropped(self, reason: str, count: int) -> None:
        """Count ``count`` spans dropped for ``reason``; log the very first drop."""
        with self._lock:
            first = self._add_dropped_locked(reason, count)
        if first:
            _log_first_drop(reason, count)

    def add_export_result(self, count: int, *, delivered: bool,
                          reason: str = EXPORT_FAILED) -> None:
        """Count the outcome of a batch that reached the exporter (``reason`` says why
        it was not delivered), unless shutdown already settled the books: the batches
        of a shutdown that ran out of time were counted then, and are not twice."""
        with self._lock:
            if self._settled:
                return
            if delivered:
                self._delivered += count
                return
            first = self._add_dropped_locked(reason, count)
        if first:
            _log_first_drop(reason, count)

    def settle(self, *, complete: bool) -> None:
        """Close the books at shutdown so that delivered + dropped == submitted.

        ``complete``: the batch processor finished, so every submitted span went
        through the exporter or was evicted from the queue, and the remainder are the
        queue evictions (this corrects the live estimate, which can race with the
        export thread). Otherwise shutdown's time ran out, and whatever is not yet
        accounted for counts as dropped at shutdown.
        """
        with self._lock:
            if self._settled:
                return
            self._settled = True
            others = self._delivered + self._dropped[EXPORT_FAILED] + self._dropped[SHUTDOWN]
            if complete:
                reason = QUEUE_FULL
                evicted = max(0, self._submitted - others)
                newly = evicted - self._dropped[QUEUE_FULL]
                self._dropped[QUEUE_FULL] = evicted
            else:
                reason = SHUTDOWN
                newly = max(0, self._submitted - others - self._dropped[QUEUE_FULL])
                self._dropped[SHUTDOWN] += newly
            first = newly > 0 and not self._logged
            self._logged = self._logged or first
        if first:
            _log_first_drop(reason, newly)

    def _reinit_lock(self) -> None:
        self._lock = threading.Lock()

    def _add_dropped_locked(self, reason: str, count: int) -> bool:
        """Add under the lock; True if this is the first drop (to be logged)."""
        if count <= 0:
            return False
        self._dropped[reason] = self._dropped.get(reason, 0) + count
        first = not self._logged
        self._logged = True
        return first


def _log_first_drop(reason: str, count: int) -> None:
    with contextlib.suppress(Exception):  # a broken log handler must not break telemetry
        _logger.warning(
            "OpenTelemetry export is dropping spans (first %d, reason: %s); further drops "
            "are counted in dropped_spans and not logged again", count, reason)


class DropCountingSpanExporter(SpanExporter):
    """Wraps a ``SpanExporter``: counts the spans of every failed export, turns an
    exception into ``SpanExportResult.FAILURE``, and never raises.

    ``dropped_spans`` is the number of spans whose export did not succeed.
    """

    def __init__(self, exporter: SpanExporter, *, counter: DropCounter | None = None,
                 max_request_bytes: int | None = None) -> None:
        self._exporter = exporter
        self._counter = counter if counter is not None else DropCounter()
        if max_request_bytes is None and _is_grpc(exporter):
            max_request_bytes = GRPC_MAX_REQUEST_BYTES
        self.max_request_bytes: Final = max_request_bytes
        """Batches are split to keep each request's OTLP message under this many bytes
        (the gRPC exporter's default: :data:`GRPC_MAX_REQUEST_BYTES`); a span larger on
        its own is dropped and counted as ``too_large``. None: no splitting."""
        self._deadline: float | None = None
        self._lock = threading.Lock()
        self._shut_down = False

    @property
    def exporter(self) -> SpanExporter:
        """The wrapped exporter."""
        return self._exporter

    @property
    def counter(self) -> DropCounter:
        """The tally this wrapper writes to."""
        return self._counter

    @property
    def dropped_spans(self) -> int:
        """Spans that never reached the backend."""
        return self._counter.dropped

    def stop_exporting_at(self, deadline: float) -> None:
        """From ``deadline`` (a ``time.monotonic()`` value) on, drop batches instead of
        sending them: a shutdown in progress must not wait for one timeout per batch."""
        self._deadline = deadline

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send ``spans`` through the wrapped exporter and count a failure."""
        count = len(spans)
        deadline = self._deadline
        if deadline is not None and time.monotonic() >= deadline:
            self._counter.add_export_result(count, delivered=False, reason=SHUTDOWN)
            return SpanExportResult.FAILURE
        if self.max_request_bytes is None:
            return self._send(spans)
        chunks, too_large = _by_size(spans, self.max_request_bytes)
        if too_large:
            self._counter.add_export_result(too_large, delivered=False, reason=TOO_LARGE)
        results = [self._send(chunk) for chunk in chunks]
        failed = too_large or any(r is not SpanExportResult.SUCCESS for r in results)
        return SpanExportResult.FAILURE if failed else SpanExportResult.SUCCESS

    def _send(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        count = len(spans)
        try:
            result = self._exporter.export(spans)
        except Exception:
            _logger.debug("span exporter raised; batch counted as dropped", exc_info=True)
            result = SpanExportResult.FAILURE
        delivered = result is SpanExportResult.SUCCESS
        self._counter.add_export_result(count, delivered=delivered)
        return SpanExportResult.SUCCESS if delivered else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        """Shut the wrapped exporter down once (later calls do nothing)."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        try:
            self._exporter.shutdown()
        except Exception:
            _logger.debug("span exporter shutdown raised", exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the wrapped exporter; False if it failed or raised."""
        try:
            return bool(self._exporter.force_flush(timeout_millis))
        except Exception:
            _logger.debug("span exporter force_flush raised", exc_info=True)
            return False


def _is_grpc(exporter: SpanExporter) -> bool:
    return type(exporter).__module__.startswith("opentelemetry.exporter.otlp.proto.grpc")


def _request_bytes(spans: Sequence[ReadableSpan]) -> int:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import (  # noqa: PLC0415
        encode_spans,
    )

    return int(encode_spans(spans).ByteSize())


def _by_size(spans: Sequence[ReadableSpan], limit: int
             ) -> tuple[list[Sequence[ReadableSpan]], int]:
    """``spans`` in consecutive chunks whose OTLP request stays within ``limit`` bytes,
    and how many spans are over it on their own (left out). A batch that fits is one
    chunk; otherwise each span is measured as a request of its own (resource and
    scope included, so the sum over-counts: the chunks stay under the limit)."""
    if not spans:
        return [], 0
    try:
        if _request_bytes(spans) <= limit:
            return [spans], 0
        sizes = [_request_bytes([span]) for span in spans]
    except Exception:  # a span the encoder refuses: the exporter reports the failure
        _logger.debug("measuring a batch's size raised; sent as it is", exc_info=True)
        return [spans], 0
    chunks: list[Sequence[ReadableSpan]] = []
    chunk: list[ReadableSpan] = []
    used = too_large = 0
    for span, size in zip(spans, sizes, strict=True):
        if size > limit:
            too_large += 1
            continue
        if chunk and used + size > limit:
            chunks.append(chunk)
            chunk, used = [], 0
        chunk.append(span)
        used += size
    if chunk:
        chunks.append(chunk)
    return chunks, too_large


def _env_int(name: str, default: int) -> int:
    raw = (read(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        _logger.warning("ignoring %s=%r: not an integer; using %d", name, raw, default)
        return default
    return value if value > 0 else default


DEFAULT_MAX_QUEUE_SIZE: Final = 2048
DEFAULT_MAX_EXPORT_BATCH_SIZE: Final = 512
DEFAULT_SCHEDULE_DELAY_MILLIS: Final = 5000
DEFAULT_SHUTDOWN_TIMEOUT_MILLIS: Final = 10_000


class DropCountingSpanProcessor(SpanProcessor):
    """The SDK's ``BatchSpanProcessor`` with a bounded queue, dropped-span accounting,
    and bounded ``force_flush`` and ``shutdown``.

    - ``on_end`` never blocks nor raises: it appends to the bounded queue; when the
      queue is full the SDK evicts the oldest span and this counts it.
    - every failed export counts its spans (through a :class:`DropCountingSpanExporter`
      wrapped around ``exporter``).
    - ``force_flush(timeout_millis)`` returns within the timeout (the SDK's own flush
      ignores it); the flush goes on in the background if the backend is slow.
    - ``shutdown()`` returns within ``shutdown_timeout_millis``: batches that would start
      after that deadline are dropped unsent, and an export still in flight then is
      abandoned. Afterwards ``delivered + dropped_spans == submitted``.

    Batch settings left as None come from ``OTEL_BSP_MAX_QUEUE_SIZE``,
    ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` and ``OTEL_BSP_SCHEDULE_DELAY``, else the SDK's
    defaults (2048, 512, 5000 ms); the batch size never exceeds the queue size.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        max_queue_size: int | None = None,
        max_export_batch_size: int | None = None,
        schedule_delay_millis: float | None = None,
        shutdown_timeout_millis: float = DEFAULT_SHUTDOWN_TIMEOUT_MILLIS,
    ) -> None:
        for name, value in (("max_queue_size", max_queue_size),
                            ("max_export_batch_size", max_export_batch_size)):
            if value is not None and (type(value) is not int or value < 1):
                raise InvalidValueError(name, value, "must be a positive integer or None")
        for name, millis in (("schedule_delay_millis", schedule_delay_millis),
                             ("shutdown_timeout_millis", shutdown_timeout_millis)):
            if millis is None and name == "schedule_delay_millis":
                continue
            if isinstance(millis, bool) or not isinstance(millis, int | float):
                raise InvalidTypeError(name, millis, "a number of milliseconds")
            if not math.isfinite(millis) or millis <= 0:
                raise InvalidValueError(name, millis, "must be a positive, finite number")
        if isinstance(exporter, DropCountingSpanExporter):
            self._exporter = exporter
        else:
            self._exporter = DropCountingSpanExporter(exporter)
        self._counter = self._exporter.counter
        queue_size = max_queue_size or _env_int(OTLP_BSP_MAX_QUEUE_SIZE_ENV_VAR,
                                                DEFAULT_MAX_QUEUE_SIZE)
        batch_size = max_export_batch_size or min(
            queue_size,
            _env_int(OTLP_BSP_MAX_EXPORT_BATCH_SIZE_ENV_VAR, DEFAULT_MAX_EXPORT_BATCH_SIZE))
        if batch_size > queue_size:
            raise InvalidValueError("max_export_batch_size", batch_size,
                                    f"must be at most max_queue_size ({queue_size})")
        delay = schedule_delay_millis or _env_int(OTLP_BSP_SCHEDULE_DELAY_ENV_VAR,
                                                  DEFAULT_SCHEDULE_DELAY_MILLIS)
        self.max_queue_size: Final = queue_size
        self.max_export_batch_size: Final = batch_size
        self.schedule_delay_millis: Final = float(delay)
        self.shutdown_timeout_millis: Final = float(shutdown_timeout_millis)
        self._processor = BatchSpanProcessor(
            self._exporter,
            max_queue_size=queue_size,
            max_export_batch_size=batch_size,
            schedule_delay_millis=float(delay),
        )
        self._queue = _sdk_queue(self._processor)
        self._lock = threading.Lock()
        self._shut_down = False

    @property
    def counter(self) -> DropCounter:
        """The tally of submitted, delivered and dropped spans."""
        return self._counter

    @property
    def dropped_spans(self) -> int:
        """Spans that never reached the backend (queue full, export failed, shutdown)."""
        return self._counter.dropped

    @property
    def exporter(self) -> DropCountingSpanExporter:
        """The counting exporter the batches go through."""
        return self._exporter

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts (batching happens at its end)."""

    def on_end(self, span: ReadableSpan) -> None:
        """Queue a sampled span for export; count it if the queue was full."""
        try:
            context = span.context
            if context is None or not context.trace_flags.sampled:
                return
            if self._shut_down:
                self._counter.add_dropped(SHUTDOWN, 1)
                return
            self._counter.add_submitted(1)
            queue = self._queue
            if queue is not None and len(queue) >= self.max_queue_size:
                self._counter.add_dropped(QUEUE_FULL, 1)
            self._processor.on_end(span)
        except Exception:
            _logger.debug("span processor on_end raised", exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export what is queued; True if that finished within ``timeout_millis``."""
        if self._shut_down:
            return False
        outcome: list[bool] = []

        def flush() -> None:
            try:
                outcome.append(bool(self._processor.force_flush(timeout_millis)))
            except Exception:
                _logger.debug("span processor force_flush raised", exc_info=True)
                outcome.append(False)

        finished = _run_bounded(flush, "cupellation-otlp-flush", timeout_millis / 1000)
        return finished and all(outcome)

    def shutdown(self) -> None:
        """Flush and stop, within ``shutdown_timeout_millis``; later calls do nothing."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        timeout = self.shutdown_timeout_millis / 1000
        self._exporter.stop_exporting_at(time.monotonic() + timeout)

        processor_shutdown: Callable[[], None] = self._processor.shutdown

        def stop() -> None:
            try:
                processor_shutdown()
            except Exception:
                _logger.debug("span processor shutdown raised", exc_info=True)

        finished = _run_bounded(stop, "cupellation-otlp-shutdown", timeout)
        self._counter.settle(complete=finished)
        if not finished:
            # Cut the retries of the export still in flight; it finishes in the
            # background and its outcome is no longer counted.
            self._exporter.shutdown()


def _run_bounded(target: Callable[[], None], name: str, timeout: float) -> bool:
    """Run ``target`` in a daemon thread; True if it returned within ``timeout`` s."""
    done = threading.Event()

    def run() -> None:
        try:
            target()
        finally:
            done.set()

    try:
        threading.Thread(target=run, name=name, daemon=True).start()
    except RuntimeError:  # pragma: no cover - interpreter shutting down: no threads
        run()
        return True
    return done.wait(max(timeout, 0.0))


def _sdk_queue(processor: BatchSpanProcessor) -> deque[object] | None:
    """The SDK batch processor's bounded queue, read to see it full before a span is
    evicted (the SDK counts evictions only in its opt-in internal metrics). None if
    this SDK version keeps it elsewhere: evictions are then found at shutdown."""
    inner = getattr(processor, "_batch_processor", None)
    queue = getattr(inner, "_queue", None)
    if isinstance(queue, deque) and queue.maxlen is not None:
        return queue
    return None
