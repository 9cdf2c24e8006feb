"""Benchmark the OpenTelemetry projection against issue 15's targets: what a
SpanCollector adds to a run, and how fast runs are rebuilt from spans.

    python benchmarks/bench_otel.py [--sizes 1000] [--repeats 15] [--quick] [--json PATH]
                                    [--layout columns|events]

The setting of the targets: the pipeline of ``bench_pipeline.py`` (Composite(Recency
x2, Priority x1), GreedySlice, UShapedPlacer, one pinned item, a target of 40% of the
candidates' tokens) at 1,000 items; a SpanCollector on an SDK TracerProvider with the
SDK's DEFAULT span limits, a SimpleSpanProcessor and an InMemorySpanExporter (cleared
before each run), no meter provider; ``input.value``/``output.value`` included.
Every figure is the median of the per-round ratios traced/untraced, where each round
runs every variant once, in rotating order (so drift in the machine's speed spreads
evenly).

Two modes, printed side by side:

- **loop**: back-to-back runs, as an application calls the pipeline (the targets are
  judged here);
- **harness**: ``gc.collect()`` before each single run, as ``benchmarks/_harness.py``
  does; this evicts the CPU caches and makes short runs slower, so ratios differ.

and two content captures: ``none`` (the spans' default, judged) and ``full``.
``no provider`` is ``SpanCollector()`` with no provider configured (disabled: the run
builds no events for it). ``rebuild`` is ``runs_from_spans`` over the spans of one
Full run (decisions per second: exclusions plus inclusions).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # imported by path (a smoke test) rather than run
    sys.path.insert(0, str(_HERE))

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from _harness import (  # noqa: E402
    budget_for,
    environment,
    format_columns,
    make_items,
    reference_pipeline,
    write_json,
)
from cupellation.otel import SpanCollector, SpanLayout, runs_from_spans  # noqa: E402

__all__ = ["MODE_NAMES", "TIERS", "main"]

SEED = 20_251_123
TIERS: tuple[str, ...] = ("StageOnly", "StageAndExclusions", "Full")
NO_PROVIDER = "no provider configured"
MODE_NAMES: tuple[str, ...] = (*TIERS, NO_PROVIDER)
MODES = ("loop", "harness")
CAPTURES = ("none", "full")
#: Issue 15's targets at 1,000 items (loop mode, capture none): ratio to untraced.
TARGETS: dict[str, float] = {"StageOnly": 1.2, "StageAndExclusions": 2.0, "Full": 3.0,
                             NO_PROVIDER: 1.03}
REBUILD_TARGET = 200_000.0


def _variants(items: list[Any], layout: str
              ) -> dict[tuple[str, str], Callable[[], object]]:
    """(mode name, capture) -> a callable running the pipeline once that way."""
    pipeline = reference_pipeline()
    budget = budget_for(items)
    out: dict[tuple[str, str], Callable[[], object]] = {
        ("untraced", "-"): lambda: pipeline.run(items, budget, None)}
    for capture in CAPTURES:
        for tier in TIERS:
            provider = TracerProvider()  # the SDK's default limits
            exporter = InMemorySpanExporter()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            collector = SpanCollector(tracer_provider=provider, tier=tier,
                                      content_capture=capture, layout=layout)

            def run(collector: SpanCollector = collector,
                    exporter: InMemorySpanExporter = exporter) -> object:
                exporter.clear()
                return pipeline.run(items, budget, collector)

            out[(tier, capture)] = run
    disabled = SpanCollector()
    out[(NO_PROVIDER, "-")] = lambda: pipeline.run(items, budget, disabled)
    return out


#: Back-to-back runs per variant and round in loop mode (after one untimed run).
LOOP_RUNS = 5


def _rounds(variants: dict[tuple[str, str], Callable[[], object]], rounds: int,
            collect: bool) -> dict[tuple[str, str], list[float]]:
    """Seconds per run of each variant; each round takes every variant in rotating
    order. Harness mode: one run after gc.collect(). Loop mode: one untimed run, then
    the mean of LOOP_RUNS back-to-back runs (no collection forced)."""
    keys = list(variants)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in keys}
    for r in range(rounds):
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            fn = variants[key]
            if collect:
                gc.collect()
                start = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - start)
            else:
                fn()
                start = time.perf_counter()
                for _ in range(LOOP_RUNS):
                    fn()
                times[key].append((time.perf_counter() - start) / LOOP_RUNS)
    return times


def _ratio(times: dict[tuple[str, str], list[float]], key: tuple[str, str]) -> float:
    base = times[("untraced", "-")]
    return statistics.median(t / b for t, b in zip(times[key], base, strict=True))


def _rebuild(items: list[Any], layout: str, repeats: int) -> dict[str, Any]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reference_pipeline().run(items, budget_for(items), SpanCollector(
        tracer_provider=provider, tier="Full", content_capture="full", layout=layout))
    spans = exporter.get_finished_spans()
    (run,) = runs_from_spans(spans)
    decisions = len(run.report.included) + len(run.report.excluded)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        runs_from_spans(spans)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    return {"n": len(items), "layout": layout, "spans": len(spans), "decisions": decisions,
            "complete": run.is_complete, "median_ms": median * 1000.0,
            "decisions_per_second": decisions / median}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table; optionally write JSON."""
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--repeats", type=int, default=15, help="rounds per mode")
    parser.add_argument("--quick", action="store_true", help="5 rounds")
    parser.add_argument("--layout", default="columns", choices=[m.value for m in SpanLayout])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rounds = 5 if args.quick else args.repeats
    results: list[dict[str, Any]] = []
    rebuilds: list[dict[str, Any]] = []
    print(f"bench_otel: layout {args.layout}, {rounds} rounds per mode; median of "
          "per-round ratios to the untraced run")
    for n in sizes:
        items = make_items(n, SEED, pinned_index=n // 2)
        variants = _variants(items, args.layout)
        by_mode = {mode: _rounds(variants, rounds, collect=(mode == "harness"))
                   for mode in MODES}
        rebuild = _rebuild(items, args.layout, max(3, rounds // 3))
        rebuilds.append(rebuild)
        body: list[list[str]] = []
        for name in MODE_NAMES:
            captures = ("-",) if name == NO_PROVIDER else CAPTURES
            row: dict[str, Any] = {"name": name, "n": n}
            cells = []
            for mode in MODES:
                for capture in CAPTURES:
                    key = (name, capture if capture in captures else "-")
                    ratio = _ratio(by_mode[mode], key)
                    row[f"{mode}_{capture}"] = ratio
                    cells.append(f"{ratio:.2f}x")
            judged = row["loop_none"]
            target = TARGETS[name]
            status = "n/a" if n != 1000 else ("met" if judged <= target else "MISSED")
            row.update(target=target, status=status,
                       untraced_ms=statistics.median(by_mode["loop"][("untraced", "-")]) * 1e3)
            results.append(row)
            body.append([name, f"<= {target}x", *cells, status])
        rate = rebuild["decisions_per_second"]
        rstatus = "n/a" if n != 1000 else ("met" if rate >= REBUILD_TARGET else "MISSED")
        body.append(["rebuild from spans", f">= {REBUILD_TARGET:,.0f}/s",
                     f"{rate:,.0f} decisions/s", "", "", "", rstatus])
        untraced = statistics.median(by_mode["loop"][("untraced", "-")]) * 1e3
        print(f"\n{n} items (untraced run: {untraced:.2f} ms in loop mode)")
        print(format_columns(["tier", "target", "loop none", "loop full", "harness none",
                              "harness full", "status (loop, none)"], body))
    if args.json is not None:
        write_json(args.json, {"benchmark": "otel", "layout": args.layout,
                               "rounds": rounds, "environment": environment(),
                               "results": results, "rebuild": rebuilds})
    return 0


if __name__ == "__main__":
    sys.exit(main())
