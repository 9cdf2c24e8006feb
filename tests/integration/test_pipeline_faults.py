"""A real selection traced through setup_otlp against a backend that is down, slow,
refusing, failing or unavailable: the run returns the same window as untraced, with
a complete report beside it, within a bounded time, and every lost span shows in
the drop count."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Literal

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    GreedySlice,
    Pipeline,
    RecencyScorer,
    UShapedPlacer,
)
from cupellation.otel import SpanCollector
from cupellation_exporters import OtlpProtocol, setup_otlp

from .fake_otlp import Behaviour, FakeGrpcBackend, FakeHttpBackend, refused_endpoint

TIMEOUT = 1.0
"""Export timeout (s) given to setup_otlp; shutdown is bounded by it."""
SHUTDOWN_SLACK = 2.0
RUNS = 20
ITEMS = 300
SPANS_PER_RUN = 6
WORKLOAD_BOUND = 10.0
"""The traced runs take well under a second here; waiting on the backend would take
RUNS x TIMEOUT or more."""

PIPELINE = Pipeline(RecencyScorer(), GreedySlice(), UShapedPlacer())
T0 = datetime(2025, 3, 1, tzinfo=UTC)


def _items(run: int) -> list[ContextItem]:
    return [ContextItem(f"run {run} message {k}: " + "words " * (k % 9), 20 + (k * 7) % 60,
                        kind=("Message", "Document", "ToolOutput")[k % 3],
                        timestamp=T0 + timedelta(minutes=k), tags=(f"t{k % 4}",))
            for k in range(ITEMS)]


BUDGET = ContextBudget(max_tokens=8_000, target_tokens=4_000)


@contextmanager
def _backend(protocol: OtlpProtocol, behaviour: Behaviour | Literal["down"]) -> Iterator[str]:
    if behaviour == "down":
        with refused_endpoint() as endpoint:
            yield endpoint
        return
    fake: FakeHttpBackend | FakeGrpcBackend = (
        FakeGrpcBackend(behaviour, delay=TIMEOUT * 4) if protocol == "grpc"
        else FakeHttpBackend(behaviour, delay=TIMEOUT * 4))
    with fake:
        yield fake.endpoint


CASES = [(protocol, behaviour) for protocol in ("http/protobuf", "grpc")
         for behaviour in ("down", "slow", "refuse", "error", "unavailable", "ok")]


@pytest.mark.parametrize(("protocol", "behaviour"), CASES)
def test_a_traced_selection_is_unaffected_by_a_bad_backend(
        protocol: OtlpProtocol, behaviour: Behaviour | Literal["down"]) -> None:
    """Twenty 300-item runs with FanOutCollector(DiagnosticTraceCollector(Full),
    SpanCollector(tracer_provider=setup_otlp(...).tracer_provider, tier="Full")), over
    HTTP and gRPC, against a backend that is down, slow (answers after 4x the
    timeout), refusing (400), failing (500) or unavailable (503, retried): each run
    returns the window an untraced run returns and a complete report, all runs within
    WORKLOAD_BOUND, shutdown within timeout + 2 s, and every span is counted dropped
    (none delivered). The healthy backend ("ok") is the control: every span
    delivered, none dropped."""
    expected = [PIPELINE.run(_items(run), BUDGET) for run in range(RUNS)]
    with _backend(protocol, behaviour) as endpoint:
        otlp = setup_otlp(protocol=protocol, endpoint=endpoint, timeout=TIMEOUT, metrics=False,
                          max_queue_size=4096 if behaviour == "ok" else 32,
                          max_export_batch_size=16, schedule_delay_millis=20)
        spans = SpanCollector(tracer_provider=otlp.tracer_provider, tier="Full")
        started = time.monotonic()
        for run in range(RUNS):
            diagnostics = DiagnosticTraceCollector("Full")
            window = PIPELINE.run(_items(run), BUDGET, FanOutCollector(diagnostics, spans))
            assert window == expected[run]
            assert diagnostics.build_report().is_complete
        workload = time.monotonic() - started
        started = time.monotonic()
        otlp.shutdown()
        shutdown = time.monotonic() - started
    counter = otlp.span_processor.counter
    assert workload < WORKLOAD_BOUND
    assert shutdown < TIMEOUT + SHUTDOWN_SLACK
    assert counter.submitted == RUNS * SPANS_PER_RUN
    if behaviour == "ok":
        assert (counter.delivered, otlp.dropped_spans) == (RUNS * SPANS_PER_RUN, 0)
    else:
        assert (counter.delivered, otlp.dropped_spans) == (0, RUNS * SPANS_PER_RUN)
