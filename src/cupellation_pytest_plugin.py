"""cupellation's pytest plugin (``[project.entry-points.pytest11]``): fixtures that
hand a test what it needs to observe a run, made fresh for each test.

- ``cupellation_collector``: a :class:`~cupellation.DiagnosticTraceCollector` (Item
  detail) to pass to ``Pipeline.run``; ``cupellation_collector.build_report()`` then
  gives the run's SelectionReport, for :func:`cupellation.testing.expect`.
- ``cupellation_spans``: a :class:`~cupellation.testing.CapturedSpans`: a
  SpanCollector wired to a private in-memory tracer provider and meter provider
  (``.collector`` to pass to ``Pipeline.run``, ``.tracer_provider`` for spans of the
  test's own, ``.spans``, ``.reports()``, ``.metrics()``). Needs ``opentelemetry-sdk``.

Nothing global is patched or set: no global tracer provider, no logging
configuration; the providers are shut down when the test ends.

pytest loads this module in every test session of every project that has
cupellation installed, so it imports nothing but pytest when it loads: cupellation
itself (and the OpenTelemetry SDK, which is optional) are imported inside the
fixtures, by the tests that ask for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from cupellation import DiagnosticTraceCollector
    from cupellation.testing import CapturedSpans

__all__ = ["cupellation_collector", "cupellation_spans"]


@pytest.fixture
def cupellation_collector() -> DiagnosticTraceCollector:
    """A fresh DiagnosticTraceCollector at Item detail, for this test only."""
    from cupellation.testing import capture_events  # noqa: PLC0415 - loaded on use

    return capture_events()


@pytest.fixture
def cupellation_spans() -> Iterator[CapturedSpans]:
    """In-memory OpenTelemetry spans and metrics for this test: a SpanCollector (Full
    tier, full content, no span limits) on private SDK providers, shut down after."""
    try:
        import opentelemetry.sdk  # noqa: F401, PLC0415 - the SDK is optional
    except ModuleNotFoundError:
        pytest.fail("the cupellation_spans fixture needs the OpenTelemetry SDK: "
                    "pip install opentelemetry-sdk", pytrace=False)
    from cupellation.testing import capture_spans  # noqa: PLC0415 - loaded on use

    with capture_spans() as captured:
        yield captured
