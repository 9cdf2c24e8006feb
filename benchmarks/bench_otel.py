"""Benchmark the OpenTelemetry projection: what a SpanCollector adds to a run, and how
fast runs are rebuilt from spans.

    python benchmarks/bench_otel.py [--sizes 1000] [--repeats 7] [--quick] [--json PATH]

The pipeline of ``bench_pipeline.py`` (Composite(Recency x2, Priority x1),
GreedySlice, UShapedPlacer, one pinned item, a target of 40% of the candidates'
tokens). Each size is run, round-robin so that drift in the machine's speed
spreads evenly:

- ``untraced``: ``run(collector=None)``;
- ``StageOnly`` / ``StageAndExclusions`` / ``Full``: a SpanCollector at that tier
  on an SDK TracerProvider with a SimpleSpanProcessor and an InMemorySpanExporter
  (the SDK's default span limits; the exporter is cleared before each run), no
  meter provider;
- ``Full, no-op spans``: the same Full collector on a tracer whose spans record
  nothing, so the row is cupellation's own share (encoding the events), the rest
  of the Full row being the SDK's.

With no provider configured at all, ``SpanCollector()`` is disabled and the run
builds no events for it: that overhead is measured separately by many interleaved
pairs (its ratio is the median of the per-pair ratios). The rebuild rate is
``runs_from_spans`` over the spans of one Full run with unlimited span limits.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # imported by path (a smoke test) rather than run
    sys.path.insert(0, str(_HERE))

from opentelemetry import context as otel_context  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import SpanLimits, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.util.types import Attributes  # noqa: E402

from _harness import (  # noqa: E402
    Measurement,
    Target,
    budget_for,
    environment,
    format_columns,
    format_table,
    format_targets,
    make_items,
    measure_interleaved,
    parse_args,
    reference_pipeline,
    write_json,
)
from cupellation import (  # noqa: E402
    ContextBudget,
    ContextItem,
    Pipeline,
)
from cupellation.otel import SpanCollector, runs_from_spans  # noqa: E402

__all__ = ["MODE_NAMES", "main"]

DEFAULT_SIZES = (1_000,)
SEED = 20_251_123

MODE_NONE = "untraced"
MODE_STAGE = "StageOnly"
MODE_EXCLUSIONS = "StageAndExclusions"
MODE_FULL = "Full"
MODE_OWN = "Full, no-op spans"
MODE_NAMES: tuple[str, ...] = (MODE_NONE, MODE_STAGE, MODE_EXCLUSIONS, MODE_FULL, MODE_OWN)
LIMITS = {MODE_STAGE: 1.15, MODE_EXCLUSIONS: 1.5, MODE_FULL: 3.0}
UNCONFIGURED_LIMIT = 1.03


class _QuietSpan(trace.Span):
    """A span that says it records and keeps nothing: the cost of a run traced
    through it is cupellation's alone."""

    def __init__(self) -> None:
        self._context = trace.SpanContext(1, 1, is_remote=False,
                                          trace_flags=trace.TraceFlags(1))

    def get_span_context(self) -> trace.SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return True

    def end(self, end_time: int | None = None) -> None:
        pass

    def set_attributes(self, attributes: Any) -> None:
        pass

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def add_event(self, name: str, attributes: Attributes = None,
                  timestamp: int | None = None) -> None:
        pass

    def update_name(self, name: str) -> None:
        pass

    def set_status(self, status: Any, description: str | None = None) -> None:
        pass

    def record_exception(self, exception: BaseException, attributes: Attributes = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        pass


class _QuietTracer(trace.Tracer):
    def start_span(self, name: str, context: otel_context.Context | None = None,
                   *args: Any, **kwargs: Any) -> trace.Span:
        return _QuietSpan()

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class _QuietProvider(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _QuietTracer()


def _sdk(limits: SpanLimits | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    provider = TracerProvider(span_limits=limits) if limits else TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _traced(pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget,
            collector: SpanCollector, exporter: InMemorySpanExporter | None) -> object:
    if exporter is not None:
        exporter.clear()
    return pipeline.run(items, budget, collector)


def _paired(fn_a: Callable[[], object], fn_b: Callable[[], object], runs: int
            ) -> tuple[list[float], list[float]]:
    """``runs`` timed calls of each, alternating which goes first, a collection before each."""
    times_a: list[float] = []
    times_b: list[float] = []
    fn_a()
    fn_b()
    for k in range(runs):
        pair = ((fn_a, times_a), (fn_b, times_b))
        for fn, times in (pair if k % 2 == 0 else pair[::-1]):
            gc.collect()
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000.0)
    return times_a, times_b


def _rebuild_rate(pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget,
                  repeats: int) -> dict[str, Any]:
    unlimited = SpanLimits(max_events=SpanLimits.UNSET, max_attributes=SpanLimits.UNSET,
                           max_span_attributes=SpanLimits.UNSET,
                           max_event_attributes=SpanLimits.UNSET)
    provider, exporter = _sdk(unlimited)
    pipeline.run(items, budget, SpanCollector(tracer_provider=provider, tier="Full",
                                              content_capture="full"))
    spans = exporter.get_finished_spans()
    events = sum(len(span.events) for span in spans)
    runs_from_spans(spans)  # warm-up
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        (run,) = runs_from_spans(spans)
        times.append(time.perf_counter() - start)
        assert run.is_complete
    median = statistics.median(times)
    return {"n": len(items), "spans": len(spans), "span_events": events,
            "median_ms": median * 1000.0, "spans_per_second": len(spans) / median,
            "span_events_per_second": events / median}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the tables and targets; optionally write JSON."""
    args = parse_args("Benchmark the OpenTelemetry projection (SpanCollector tiers, "
                      "rebuilding from spans).", argv, default_sizes=DEFAULT_SIZES,
                      quick_sizes=(100, 1000))
    pairs = 9 if args.quick else 51
    env = environment()
    pipeline = reference_pipeline()
    rows: list[Measurement] = []
    unconfigured: list[dict[str, Any]] = []
    rebuild: list[dict[str, Any]] = []
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider), (
        "the benchmark needs no global tracer provider set")
    for n in args.sizes:
        items = make_items(n, SEED + n, pinned_index=n // 2)
        budget = budget_for(items)
        fns: list[Callable[[], object]] = [partial(pipeline.run, items, budget, None)]
        for tier in (MODE_STAGE, MODE_EXCLUSIONS, MODE_FULL):
            provider, exporter = _sdk()
            collector = SpanCollector(tracer_provider=provider, tier=tier)
            fns.append(partial(_traced, pipeline, items, budget, collector, exporter))
        quiet = SpanCollector(tracer_provider=_QuietProvider(), tier="Full")
        fns.append(partial(_traced, pipeline, items, budget, quiet, None))
        print(f"N={n}: {args.repeats} interleaved repeats of each mode", file=sys.stderr)
        measured = measure_interleaved(MODE_NAMES, "otel", n, fns, args.repeats)
        base = measured[0].median_ms
        for row in measured:
            row.extra["vs_untraced"] = row.median_ms / base
        rows.extend(measured)

        idle = SpanCollector()  # no provider anywhere: disabled
        assert not idle.is_enabled
        times_none, times_idle = _paired(partial(pipeline.run, items, budget, None),
                                         partial(pipeline.run, items, budget, idle), pairs)
        unconfigured.append({
            "n": n, "runs": pairs,
            "untraced_median_ms": statistics.median(times_none),
            "unconfigured_median_ms": statistics.median(times_idle),
            "paired_ratio_median": statistics.median(
                b / a for a, b in zip(times_none, times_idle, strict=True)),
        })
        rebuild.append(_rebuild_rate(pipeline, items, budget, args.repeats))

    targets = _targets(rows, unconfigured)
    _print(args.repeats, env, rows, unconfigured, rebuild, targets)
    if args.json_path is not None:
        write_json(args.json_path, {
            "benchmark": "otel",
            "environment": env,
            "sizes": args.sizes,
            "repeats": args.repeats,
            "load_average_1min_end": os.getloadavg()[0],
            "results": [row.to_dict() for row in rows],
            "unconfigured_overhead": unconfigured,
            "rebuild": rebuild,
            "targets": [target.to_dict() for target in targets],
        })
    return 0


def _targets(rows: Sequence[Measurement], unconfigured: Sequence[dict[str, Any]]
             ) -> list[Target]:
    targets = []
    for row in rows:
        limit = LIMITS.get(row.name)
        if limit is not None and row.n == 1_000:
            targets.append(Target(f"{row.name} / untraced at 1,000 items", "x", limit,
                                  row.extra["vs_untraced"]))
    if not targets:
        targets = [Target(f"{name} / untraced at 1,000 items", "x", limit, None)
                   for name, limit in LIMITS.items()]
    at_1000 = [entry for entry in unconfigured if entry["n"] == 1_000]
    targets.append(Target(
        "no provider configured / untraced at 1,000 items", "x", UNCONFIGURED_LIMIT,
        at_1000[0]["paired_ratio_median"] if at_1000 else None,
        f"median of {at_1000[0]['runs']} paired runs" if at_1000 else ""))
    return targets


def _print(repeats: int, env: dict[str, Any], rows: Sequence[Measurement],
           unconfigured: Sequence[dict[str, Any]], rebuild: Sequence[dict[str, Any]],
           targets: Sequence[Target]) -> None:
    print(f"cupellation OpenTelemetry benchmark — {repeats} timed runs per row (median, min), "
          f"peak = tracemalloc peak of one extra run")
    print(f"Python {env['python']} on {env['platform']}, {env['cpu_count']} CPUs, 1-min load "
          f"average {env['load_average_1min']:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    print("SDK TracerProvider + SimpleSpanProcessor + InMemorySpanExporter, default span "
          "limits (128 events per span), no meter provider")
    print()
    print(format_table(rows, extra_columns=[
        ("x untraced", lambda row: f"{row.extra['vs_untraced']:.3f}")]))
    print()
    print("no provider configured (SpanCollector() disabled) vs untraced, interleaved pairs")
    print(format_columns(
        ["N", "runs", "untraced median ms", "unconfigured median ms", "paired ratio"],
        [[f"{u['n']}", f"{u['runs']}", f"{u['untraced_median_ms']:.3f}",
          f"{u['unconfigured_median_ms']:.3f}", f"{u['paired_ratio_median']:.4f}"]
         for u in unconfigured]))
    print()
    print("rebuilding a Full run from its spans (runs_from_spans, unlimited span limits)")
    print(format_columns(
        ["N", "spans", "span events", "median ms", "spans/s", "span events/s"],
        [[f"{r['n']}", f"{r['spans']}", f"{r['span_events']}", f"{r['median_ms']:.2f}",
          f"{r['spans_per_second']:,.0f}", f"{r['span_events_per_second']:,.0f}"]
         for r in rebuild]))
    print()
    print("targets")
    print(format_targets(targets))


if __name__ == "__main__":
    sys.exit(main())
