"""setup_otlp's span pipeline against backends that are down, slow, refusing or
failing: the traced workload never blocks nor raises, every lost span is counted,
the first loss is logged once, and shutdown returns within its bound."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import pytest

from cupellation_exporters import (
    EXPORT_FAILED,
    QUEUE_FULL,
    SHUTDOWN,
    TOO_LARGE,
    OtlpProtocol,
    setup_otlp,
)

from .fake_otlp import Behaviour, FakeGrpcBackend, FakeHttpBackend, refused_endpoint
from .workload import run_selections

TIMEOUT = 1.0
"""Export timeout (s) given to setup_otlp; shutdown is bounded by it too."""
SHUTDOWN_SLACK = 2.0
"""A correctness bound on top of TIMEOUT, not a speed target."""
WORKLOAD_BOUND = 5.0
"""The workload alone takes ~0.1 s here; blocking on the backend would take minutes."""
RUNS = 200
QUEUE = 64
BATCH = 32


@contextmanager
def _backend(protocol: OtlpProtocol, behaviour: Behaviour | Literal["down"]) -> Iterator[str]:
    """The endpoint of a fake backend behaving as told ("down": nothing listens)."""
    if behaviour == "down":
        with refused_endpoint() as endpoint:
            yield endpoint
        return
    fake: FakeHttpBackend | FakeGrpcBackend = (
        FakeGrpcBackend(behaviour, delay=TIMEOUT * 4) if protocol == "grpc"
        else FakeHttpBackend(behaviour, delay=TIMEOUT * 4))
    with fake:
        yield fake.endpoint


BEHAVIOURS: tuple[Behaviour | Literal["down"], ...] = (
    "down", "slow", "refuse", "error", "unavailable")
CASES = [(protocol, behaviour) for protocol in ("http/protobuf", "grpc")
         for behaviour in BEHAVIOURS]


@pytest.mark.parametrize(("protocol", "behaviour"), CASES)
def test_a_bad_backend_never_blocks_the_workload_and_every_lost_span_is_counted(
        protocol: OtlpProtocol, behaviour: Behaviour | Literal["down"],
        caplog: pytest.LogCaptureFixture) -> None:
    """Against a backend that is down (connection refused), slow (answers after
    4x the timeout), refusing (400 / INVALID_ARGUMENT), failing (500 / INTERNAL) or
    unavailable (503 / UNAVAILABLE, retried), over HTTP and gRPC: the workload runs
    without raising in well under WORKLOAD_BOUND, nothing is delivered, every span is
    counted dropped (delivered + dropped == submitted), the first drop is logged exactly
    once on the ``cupellation`` logger, and shutdown returns within timeout + 2 s."""
    caplog.set_level(logging.WARNING, logger="cupellation")
    with _backend(protocol, behaviour) as endpoint:
        otlp = setup_otlp(protocol=protocol, endpoint=endpoint, timeout=TIMEOUT,
                          metrics=False, max_queue_size=QUEUE, max_export_batch_size=BATCH,
                          schedule_delay_millis=50)
        started = time.monotonic()
        ended = run_selections(otlp.tracer_provider, RUNS)
        workload_seconds = time.monotonic() - started

        started = time.monotonic()
        otlp.shutdown()
        shutdown_seconds = time.monotonic() - started

    counter = otlp.span_processor.counter
    assert workload_seconds < WORKLOAD_BOUND
    assert shutdown_seconds < TIMEOUT + SHUTDOWN_SLACK
    assert counter.submitted == ended
    assert counter.delivered == 0
    assert otlp.dropped_spans == ended
    reasons = counter.by_reason()
    assert sum(reasons.values()) == ended
    assert set(reasons) == {QUEUE_FULL, EXPORT_FAILED, SHUTDOWN, TOO_LARGE}
    assert reasons[TOO_LARGE] == 0
    if behaviour == "slow":  # the export thread sits in one request: the queue overflows
        assert reasons[QUEUE_FULL] > 0
    drop_logs = [record for record in caplog.records
                 if record.name == "cupellation" and "dropping spans" in record.getMessage()]
    assert len(drop_logs) == 1


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_healthy_backend_gets_every_span_and_nothing_is_counted_dropped(
        protocol: OtlpProtocol, caplog: pytest.LogCaptureFixture) -> None:
    """The control for the test above: with a backend that answers at once and a
    queue large enough for the burst, every span arrives, none is counted dropped and
    nothing is logged."""
    caplog.set_level(logging.WARNING, logger="cupellation")
    fake: FakeHttpBackend | FakeGrpcBackend = (
        FakeGrpcBackend() if protocol == "grpc" else FakeHttpBackend())
    with fake:
        otlp = setup_otlp(protocol=protocol, endpoint=fake.endpoint, timeout=5,
                          metrics=False, max_queue_size=4096)
        ended = run_selections(otlp.tracer_provider, RUNS)
        otlp.shutdown()
        names = fake.span_names()
    assert len(names) == ended
    assert otlp.span_processor.counter.delivered == ended
    assert otlp.dropped_spans == 0
    assert [r for r in caplog.records if r.name == "cupellation"] == []


def test_shutdown_bound_holds_with_many_batches_queued_behind_a_slow_backend() -> None:
    """With 10 batches queued and each export taking the full timeout, shutdown still
    returns within timeout + 2 s (batches due after its deadline are dropped unsent,
    not sent one timeout each) and counts them all."""
    with FakeHttpBackend("slow", delay=TIMEOUT * 4) as fake:
        otlp = setup_otlp(endpoint=fake.endpoint, timeout=TIMEOUT, metrics=False,
                          max_queue_size=BATCH * 10, max_export_batch_size=BATCH,
                          schedule_delay_millis=10_000)
        ended = run_selections(otlp.tracer_provider, BATCH * 10 // 6)
        started = time.monotonic()
        otlp.shutdown()
        elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT + SHUTDOWN_SLACK
    assert otlp.dropped_spans == ended
    assert otlp.span_processor.counter.by_reason()[SHUTDOWN] > 0


def test_force_flush_returns_within_its_timeout_against_a_slow_backend() -> None:
    """force_flush(timeout) returns False within timeout + 2 s while the slow backend
    holds the export (the SDK's own flush would wait for every batch)."""
    with FakeHttpBackend("slow", delay=TIMEOUT * 4) as fake:
        otlp = setup_otlp(endpoint=fake.endpoint, timeout=TIMEOUT * 3, metrics=False,
                          schedule_delay_millis=10_000)
        run_selections(otlp.tracer_provider, 10)
        started = time.monotonic()
        flushed = otlp.force_flush(timeout_seconds=0.5)
        elapsed = time.monotonic() - started
        otlp.shutdown()
    assert flushed is False
    assert elapsed < 0.5 + SHUTDOWN_SLACK
