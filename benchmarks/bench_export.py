"""Benchmark what an unreachable OTLP backend costs a traced run.

    python benchmarks/bench_export.py [--sizes 1000] [--repeats 21] [--quick] [--json PATH]

The pipeline of ``bench_pipeline.py`` (Composite(Recency x2, Priority x1),
GreedySlice, UShapedPlacer, one pinned item, a target of 40% of the candidates'
tokens), traced by a ``SpanCollector`` at the Full tier (content capture ``none``,
the default). Every traced mode has the same sink: an SDK ``TracerProvider`` (the
SDK's default span limits) with cupellation-exporters' ``DropCountingSpanProcessor``
(the SDK's ``BatchSpanProcessor`` as ``setup_otlp`` builds it: a bounded queue of
2048, batches of 512) with a 100 ms schedule delay instead of the default 5 s, so that
the batch thread is busy exporting (encoding batches, and against the dead backend
connecting and retrying) while the runs are timed, not only at shutdown; only the
exporter behind it differs:

- ``Full, in-memory exporter``: the SDK's ``InMemorySpanExporter`` (cleared before
  each run);
- ``Full, OTLP/HTTP unreachable`` and ``Full, OTLP/gRPC unreachable``: the OTLP
  exporter ``setup_otlp`` would build (``otlp_span_exporter``, 10 s timeout),
  aimed at a 127.0.0.1 port that is bound and never listens, so every connection
  is refused and the batch thread retries with backoff until the timeout.

``untraced`` (``collector=None``) is there for scale. The modes take turns in every
round (``_harness.interleave``: the calling thread's CPU time per call, loop mode by
default, wall clock beside it; the batch thread's own work is on another thread and
is flagged, not counted: what is judged is what the run itself pays); the target is
an unreachable mode over the in-memory mode, per round, at 1,000 items (median and
min-max): the run must not notice that the backend is gone.
Afterwards each provider is shut down (bounded by a 1 s shutdown timeout) and its
span accounting printed: with the backend unreachable every span is counted
dropped, none is delivered.
"""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # imported by path (a smoke test) rather than run
    sys.path.insert(0, str(_HERE))

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from _harness import (  # noqa: E402
    Mode,
    Timing,
    budget_for,
    environment,
    format_columns,
    format_timings,
    header,
    interleave,
    make_items,
    measure,
    parse_args,
    payload,
    reference_pipeline,
    round_ratios,
    write_json,
)
from cupellation import (  # noqa: E402
    ContextBudget,
    ContextItem,
    Pipeline,
)
from cupellation.otel import SpanCollector  # noqa: E402
from cupellation_exporters import (  # noqa: E402
    DropCountingSpanProcessor,
    OtlpProtocol,
    otlp_span_exporter,
)

__all__ = ["MODE_NAMES", "main"]

DEFAULT_SIZES = (1_000,)
DEFAULT_REPEATS = 21
SEED = 20_251_123
EXPORT_TIMEOUT_SECONDS = 10.0
SHUTDOWN_TIMEOUT_MILLIS = 1_000.0
SCHEDULE_DELAY_MILLIS = 100.0

MODE_NONE = "untraced"
MODE_MEMORY = "Full, in-memory exporter"
MODE_HTTP = "Full, OTLP/HTTP unreachable"
MODE_GRPC = "Full, OTLP/gRPC unreachable"
MODE_NAMES: tuple[str, ...] = (MODE_NONE, MODE_MEMORY, MODE_HTTP, MODE_GRPC)
UNREACHABLE: dict[str, OtlpProtocol] = {MODE_HTTP: "http/protobuf", MODE_GRPC: "grpc"}


@contextmanager
def unreachable_endpoint() -> Iterator[str]:
    """A 127.0.0.1 URL where nothing listens: the port stays bound (never listening)
    for the block, so every connection is refused and no one else can take it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


class _Sink:
    """A TracerProvider with the batch processor in front of ``exporter``."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter
        self.processor = DropCountingSpanProcessor(
            exporter, schedule_delay_millis=SCHEDULE_DELAY_MILLIS,
            shutdown_timeout_millis=SHUTDOWN_TIMEOUT_MILLIS)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.processor)

    def collector(self) -> SpanCollector:
        return SpanCollector(tracer_provider=self.provider, tier="Full",
                             content_capture="none")

    def accounting(self) -> dict[str, Any]:
        counter = self.processor.counter
        return {"submitted": counter.submitted, "delivered": counter.delivered,
                "dropped": counter.dropped, "dropped_by_reason": counter.by_reason()}


def _traced(pipeline: Pipeline, items: list[ContextItem], budget: ContextBudget,
            collector: SpanCollector, memory: InMemorySpanExporter | None) -> object:
    if memory is not None:
        memory.clear()
    return pipeline.run(items, budget, collector)


def _fns(pipeline: Pipeline, sinks: dict[str, _Sink], n: int
         ) -> dict[str, Callable[[], object]]:
    items = make_items(n, SEED + n, pinned_index=n // 2)
    budget = budget_for(items)
    fns: dict[str, Callable[[], object]] = {MODE_NONE: partial(pipeline.run, items, budget,
                                                               None)}
    for mode in MODE_NAMES[1:]:
        sink = sinks[mode]
        memory = (sink.exporter if isinstance(sink.exporter, InMemorySpanExporter) else None)
        fns[mode] = partial(_traced, pipeline, items, budget, sink.collector(), memory)
    return fns


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table and the span accounting."""
    args = parse_args("Benchmark a traced run against an unreachable OTLP backend.", argv,
                      default_sizes=DEFAULT_SIZES, quick_sizes=(100, 1000))
    repeats = args.repeats if (args.quick or args.extra.repeats) else DEFAULT_REPEATS
    env = environment()
    # The SDK exporters log every refused attempt; the accounting below tells the story.
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    pipeline = reference_pipeline()
    by_size: dict[int, dict[str, Timing]] = {}
    accounting: list[dict[str, Any]] = []
    ratios: dict[str, Any] = {}
    with unreachable_endpoint() as endpoint:
        sinks: dict[str, _Sink] = {MODE_MEMORY: _Sink(InMemorySpanExporter())}
        for mode, protocol in UNREACHABLE.items():
            sinks[mode] = _Sink(otlp_span_exporter(protocol=protocol, endpoint=endpoint,
                                                   timeout=EXPORT_TIMEOUT_SECONDS))
        try:
            for n in args.sizes:
                print(f"N={n}: {repeats} rounds of each mode", file=sys.stderr)
                timings = by_size[n] = interleave(_fns(pipeline, sinks, n), rounds=repeats,
                                                  mode=args.mode)
                for mode in UNREACHABLE:
                    ratios[f"{mode}/in-memory@{n}"] = measure(
                        round_ratios(timings, mode, MODE_MEMORY), "x")
                ratios[f"in-memory/untraced@{n}"] = measure(
                    round_ratios(timings, MODE_MEMORY, MODE_NONE), "x")
        finally:
            for mode, sink in sinks.items():
                sink.provider.shutdown()
                accounting.append({"mode": mode, "endpoint": endpoint if mode in UNREACHABLE
                                   else None, **sink.accounting()})
    _print(repeats, args.mode, env, by_size, accounting)
    if args.json_path is not None:
        write_json(args.json_path, payload(
            "export", mode=args.mode, quick=args.quick, env=env, ratios=ratios, figures={},
            sizes=args.sizes, rounds=repeats, accounting=accounting,
            timings={str(n): [t.to_dict() for t in timings.values()]
                     for n, timings in by_size.items()}))
    return 0


def _print(repeats: int, mode: Mode, env: dict[str, Any], by_size: dict[int, dict[str, Timing]],
           accounting: Sequence[dict[str, Any]]) -> None:
    print(header(f"cupellation export benchmark: {repeats} rounds", mode, env))
    print("SpanCollector(tier=Full) -> TracerProvider (default span limits) -> "
          "DropCountingSpanProcessor (batch: queue 2048, batches of 512, "
          f"{SCHEDULE_DELAY_MILLIS:g} ms delay) -> the row's exporter")
    for n, timings in by_size.items():
        print(f"\n{n} items")
        print(format_timings(timings, MODE_MEMORY))
    print()
    print("span accounting after shutdown")
    print(format_columns(
        ["exporter", "submitted", "delivered", "dropped"],
        [[entry["mode"], str(entry["submitted"]), str(entry["delivered"]),
          str(entry["dropped"])] for entry in accounting]))
    print("\ntargets: python benchmarks/check.py judges them (benchmarks/targets.toml)")


if __name__ == "__main__":
    sys.exit(main())
