"""Trace files for the store tests: random runs recorded by a SpanCollector (either
layout, Full tier, full content capture, limits large enough to keep everything) and
written as OTLP/JSON lines, several spans a line, as the file exporters write them."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cupellation import FanOutCollector, RunInfo
from cupellation.logs import AuditLog
from cupellation.otel import SpanCollector
from cupellation_exporters import otlp_json_line
from logs._workload import random_budget, random_items, random_pipeline

__all__ = ["write_traced_runs"]

_LIMITS = SpanLimits(max_span_attributes=10_000, max_events=10_000,
                     max_event_attributes=10_000, max_attributes=10_000)


def write_traced_runs(path: Path, seed: int, runs: int, *, layout: str, service: str,
                      audit: Path | None = None) -> int:
    """``runs`` random runs (failed ones too; one in three with session ``s-1``) as
    OTLP/JSON lines at ``path``, from a provider whose resource names ``service``; with
    ``audit``, the same runs' audit log too. Returns the number of spans written."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}),
                              span_limits=_LIMITS)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = SpanCollector(tracer_provider=provider, tier="Full", content_capture="full",
                          layout=layout)
    rng = random.Random(seed)
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(AuditLog(str(audit))) if audit is not None else None
        collector = spans if log is None else FanOutCollector(spans, log)
        for k in range(runs):
            info = RunInfo(session_id="s-1") if k % 3 == 0 else None
            with contextlib.suppress(Exception):  # a failed run is recorded too
                random_pipeline(rng).run(random_items(rng, rng.randint(0, 14)),
                                         random_budget(rng), collector, run_info=info)
    finished = exporter.get_finished_spans()
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, len(finished), 7):
            out.write(otlp_json_line(finished[start:start + 7]))
    provider.shutdown()
    return len(finished)
