"""Helpers for testing code that uses cupellation: capture a run's events or
spans, and assert on its SelectionReport with the Cupel.Testing vocabulary.

    from cupellation.testing import capture_events, expect

    events = capture_events()
    pipeline.run(candidates, budget, events)
    report = events.build_report()
    (expect(report)
        .include_item_with_kind("SystemPrompt")
        .exclude_item_matching_with_reason(lambda item: item.content == "old tool output",
                                           "BudgetExceeded"))

:func:`expect` gives the vocabulary's 13 assertions (``spec/src/testing/vocabulary.md``)
with the specification's failure messages; :func:`assert_included` and
:func:`assert_excluded` are shorthands by content. The pytest plugin
(``cupellation_pytest_plugin``, registered by entry point) hands a test a fresh
collector (``cupellation_collector``) and in-memory span providers
(``cupellation_spans``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._collectors import DiagnosticTraceCollector, TraceDetailLevel
from .._report import ExcludedItem, IncludedItem, SelectionReport
from ..reasons import reason_to_dict
from ._vocabulary import (
    ReasonLike,
    SelectionReportAssertionChain,
    SelectionReportAssertionError,
    expect,
    should,
)

__all__ = [
    "ReasonLike",
    "SelectionReportAssertionChain",
    "SelectionReportAssertionError",
    "assert_excluded",
    "assert_included",
    "assert_report_consistent",
    "capture_events",
    "expect",
    "should",
]


def capture_events(detail_level: TraceDetailLevel = TraceDetailLevel.ITEM
                   ) -> DiagnosticTraceCollector:
    """A collector that records every event of one run (Item level by default)."""
    return DiagnosticTraceCollector(detail_level)


def _contents(entries: tuple[IncludedItem, ...] | tuple[ExcludedItem, ...]) -> list[str]:
    return [entry.item.content for entry in entries]


def assert_included(report: SelectionReport, content: str, *, reason: str | None = None,
                    position: int | None = None) -> IncludedItem:
    """Assert the item with ``content`` was included (optionally with ``reason``
    and at ``position`` in placed order); returns its entry."""
    for at, entry in enumerate(report.included):
        if entry.item.content == content:
            if reason is not None and entry.reason.name != reason:
                raise AssertionError(
                    f"{content!r} was included as {entry.reason.name}, not {reason}"
                )
            if position is not None and at != position:
                raise AssertionError(f"{content!r} was placed at {at}, not {position}")
            return entry
    raise AssertionError(f"{content!r} was not included; included: {_contents(report.included)}")


def assert_excluded(report: SelectionReport, content: str, *, reason: str | None = None,
                    **fields: Any) -> ExcludedItem:
    """Assert the item with ``content`` was excluded, optionally for ``reason``
    with the given reason fields (``item_tokens=400``); returns its entry."""
    for entry in report.excluded:
        if entry.item.content == content:
            wire = reason_to_dict(entry.reason)
            if reason is not None and wire["reason"] != reason:
                raise AssertionError(f"{content!r} was excluded as {wire['reason']}, not {reason}")
            for key, value in fields.items():
                if wire.get(key) != value:
                    raise AssertionError(
                        f"{content!r}: reason field {key} is {wire.get(key)!r}, not {value!r}"
                    )
            return entry
    raise AssertionError(f"{content!r} was not excluded; excluded: {_contents(report.excluded)}")


def assert_report_consistent(report: SelectionReport) -> None:
    """Assert the SelectionReport invariants of the specification and the wire format:
    the totals add up, ``excluded`` is sorted by score descending, and every
    score is finite."""
    if report.total_candidates != len(report.included) + len(report.excluded):
        raise AssertionError(
            f"total_candidates {report.total_candidates} != "
            f"{len(report.included)} included + {len(report.excluded)} excluded"
        )
    tokens = (sum(e.item.tokens for e in report.included)
              + sum(e.item.tokens for e in report.excluded))
    if report.total_tokens_considered != tokens:
        raise AssertionError(
            f"total_tokens_considered {report.total_tokens_considered} != {tokens}"
        )
    scores = [e.score for e in report.excluded]
    if any(a < b for a, b in itertools.pairwise(scores)):
        raise AssertionError(f"excluded is not sorted by score descending: {scores}")
    for content, score in [(e.item.content, e.score) for e in report.included] + [
            (e.item.content, e.score) for e in report.excluded]:
        if not math.isfinite(score):
            raise AssertionError(f"{content!r} has a non-finite score {score}")


# -- OpenTelemetry spans ----------------------------------------------------------------
#
# The core depends on opentelemetry-api only: the SDK is imported when these helpers
# are used, never when this module is.

__all__ += ["CapturedSpans", "capture_spans"]


class CapturedSpans:
    """What :func:`capture_spans` recorded: a SpanCollector wired to private SDK
    providers, the finished spans and the metrics.

    ``collector`` is the SpanCollector to pass to ``Pipeline.run`` (alone or in a
    ``FanOutCollector``); ``tracer_provider`` makes spans of your own in the same
    trace (an agent step around the run). ``spans`` are the finished spans,
    ``runs()`` and ``reports()`` rebuild the runs from them and ``metrics()``
    reads the metric points by instrument name.
    """

    def __init__(self, collector: Any, tracer_provider: Any, meter_provider: Any,
                 exporter: Any, metric_reader: Any) -> None:
        self.collector = collector
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.exporter = exporter
        self.metric_reader = metric_reader

    @property
    def spans(self) -> tuple[Any, ...]:
        """Every span finished so far (SDK ``ReadableSpan`` objects), in end order."""
        return tuple(self.exporter.get_finished_spans())

    def runs(self) -> list[Any]:
        """The runs rebuilt from :attr:`spans` (``cupellation.otel.RebuiltRun``)."""
        from ..otel import runs_from_spans  # noqa: PLC0415 - keeps this module light

        return runs_from_spans(self.spans)

    def reports(self) -> list[SelectionReport]:
        """The SelectionReport of each run rebuilt from :attr:`spans`, in start order."""
        return [run.report for run in self.runs()]

    def metrics(self) -> dict[str, list[Any]]:
        """The metric data points collected now, by instrument name (SDK point objects:
        ``.attributes`` and ``.value`` for counters, ``.count`` and ``.sum`` for
        histograms)."""
        data = self.metric_reader.get_metrics_data()
        points: dict[str, list[Any]] = {}
        if data is None:
            return points
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
        return points

    def clear(self) -> None:
        """Forget the spans recorded so far."""
        self.exporter.clear()


@contextmanager
def capture_spans(tier: TraceDetailLevel | str = TraceDetailLevel.FULL, *,
                  content_capture: str = "full", span_limits: Any = None,
                  layout: str = "columns") -> Iterator[CapturedSpans]:
    """Record runs as OpenTelemetry spans and metrics in memory, like the SDK's
    ``InMemorySpanExporter``, for tests::

        with capture_spans() as captured:
            pipeline.run(candidates, budget, captured.collector)
        (report,) = captured.reports()

    The Full tier and ``full`` content capture by default, so a rebuilt report
    equals the in-process one; span limits are lifted (no event or attribute
    count limit) unless ``span_limits`` (an SDK ``SpanLimits``) says otherwise.
    ``layout`` is the collector's :class:`~cupellation.otel.SpanLayout`
    (``"columns"``, the default, or ``"events"``).
    Needs the ``opentelemetry-sdk`` package. Nothing global is touched: the
    providers are private to the block and shut down at its end.
    """
    from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415 - the SDK is optional
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: PLC0415
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: PLC0415
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: PLC0415
        InMemorySpanExporter,
    )

    from ..otel import SpanCollector  # noqa: PLC0415

    if span_limits is None:
        unset = SpanLimits.UNSET
        span_limits = SpanLimits(max_attributes=unset, max_events=unset,
                                 max_span_attributes=unset, max_event_attributes=unset,
                                 max_attribute_length=unset, max_span_attribute_length=unset)
    tracer_provider = TracerProvider(span_limits=span_limits)
    exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    collector = SpanCollector(tracer_provider=tracer_provider, meter_provider=meter_provider,
                              tier=tier, content_capture=content_capture, layout=layout)
    try:
        yield CapturedSpans(collector, tracer_provider, meter_provider, exporter, reader)
    finally:
        meter_provider.shutdown()
        tracer_provider.shutdown()
