"""Benchmark the OpenTelemetry projection: what a SpanCollector adds to a run, and how
fast runs are rebuilt from spans.

    python benchmarks/bench_otel.py [--sizes 1000] [--repeats 15] [--quick]
                                    [--mode loop|harness] [--layout columns|events]
                                    [--json PATH]

The setting: the pipeline of ``bench_pipeline.py`` (Composite(Recency x2, Priority
x1), GreedySlice, UShapedPlacer, one pinned item, a target of 40% of the candidates'
tokens) at 1,000 items; a SpanCollector on an SDK TracerProvider with the SDK's
DEFAULT span limits, a SimpleSpanProcessor and an InMemorySpanExporter (cleared
before each run), no meter provider; ``input.value``/``output.value`` included.

Every variant takes its turn in every round (``_harness.interleave``: thread CPU time
per call, loop mode by default); each ratio is taken per round against the same
round's untraced run, then its median and min-max over rounds:

- the three tiers at the spans' default content capture, ``none`` (judged), and at
  capture ``full`` (an extra, labelled line each);
- ``no provider configured``: ``SpanCollector()`` with no provider (disabled: the run
  builds no events for it);
- ``rebuild``: ``runs_from_spans`` over the spans of one Full run made at capture
  ``none`` (judged), with every entry of the rebuilt report read (entries are built
  lazily), as decisions (exclusions plus inclusions) per second of CPU; ``rebuild,
  capture full`` the same over a capture-``full`` run (an extra, labelled line).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
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
    Mode,
    add_common_options,
    budget_for,
    environment,
    format_timings,
    header,
    interleave,
    make_items,
    measure,
    payload,
    reference_pipeline,
    round_ratios,
    touch_report,
    write_json,
)
from cupellation.otel import SpanCollector, SpanLayout, runs_from_spans  # noqa: E402

__all__ = ["CAPTURES", "NO_PROVIDER", "TIERS", "main"]

SEED = 20_251_123
TIERS: tuple[str, ...] = ("StageOnly", "StageAndExclusions", "Full")
NO_PROVIDER = "no provider configured"
UNTRACED = "untraced"
CAPTURES = ("none", "full")
REBUILD = "rebuild"
#: Where the root span records the content capture its run was made with.
CAPTURE_ATTRIBUTE = "cupel.run.content_capture"


def _key(tier: str, capture: str) -> str:
    """A variant's name: the tier alone at the default capture, labelled otherwise."""
    return tier if capture == "none" else f"{tier}, capture full"


def _spans(items: list[Any], layout: str, capture: str) -> tuple[list[Any], int, str]:
    """The spans of one Full run, its decisions (inclusions plus exclusions) and the
    content capture its spans record (raises unless that is ``capture``)."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reference_pipeline().run(items, budget_for(items), SpanCollector(
        tracer_provider=provider, tier="Full", content_capture=capture, layout=layout))
    spans = list(exporter.get_finished_spans())
    recorded = {(span.attributes or {}).get(CAPTURE_ATTRIBUTE) for span in spans} - {None}
    if recorded != {capture}:
        raise AssertionError(f"spans made at capture {capture!r} record {recorded}")
    (run,) = runs_from_spans(spans)
    # Capture none keeps no content, and the rebuilt report says so; nothing else may
    # be missing, or the rate would be that of a lesser rebuild.
    if capture == "full" and not run.is_complete:
        raise AssertionError(f"the rebuilt run is incomplete: {run.report.incomplete}")
    return spans, touch_report(run.report), str(recorded.pop())


def _rebuild(spans: list[Any]) -> int:
    """Rebuild the runs and read every entry of their reports."""
    return sum(touch_report(run.report) for run in runs_from_spans(spans))


def _variants(items: list[Any], layout: str, captures: dict[str, str]
              ) -> tuple[dict[str, Callable[[], object]], int]:
    """Every variant by name, and the decisions a rebuild makes; ``captures`` gets the
    content capture each rebuild's spans record."""
    pipeline = reference_pipeline()
    budget = budget_for(items)
    out: dict[str, Callable[[], object]] = {UNTRACED: lambda: pipeline.run(items, budget, None)}
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

            out[_key(tier, capture)] = run
    disabled = SpanCollector()
    out[NO_PROVIDER] = lambda: pipeline.run(items, budget, disabled)
    decisions = 0
    for capture in CAPTURES:
        spans, decisions, recorded = _spans(items, layout, capture)
        out[_key(REBUILD, capture)] = partial(_rebuild, spans)
        captures[_key(REBUILD, capture)] = recorded
    return out, decisions


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table; optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--repeats", type=int, default=15, help="rounds")
    parser.add_argument("--layout", default="columns", choices=[m.value for m in SpanLayout])
    add_common_options(parser, quick_help="5 rounds (a smoke run)")
    args = parser.parse_args(argv)
    mode: Mode = args.mode
    sizes = [int(s) for s in args.sizes.split(",")]
    rounds = 5 if args.quick else args.repeats
    env = environment()
    ratios: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    tables: dict[str, Any] = {}
    captures: dict[str, str] = {}
    print(header(f"bench_otel: layout {args.layout}, {rounds} rounds; SDK TracerProvider "
                 "(default limits) + SimpleSpanProcessor + InMemorySpanExporter", mode, env))
    for n in sizes:
        items = make_items(n, SEED, pinned_index=n // 2)
        variants, decisions = _variants(items, args.layout, captures)
        timings = interleave(variants, rounds=rounds, mode=mode)
        for name in variants:
            if name != UNTRACED:
                ratios[f"{name}/untraced@{n}"] = measure(
                    round_ratios(timings, name, UNTRACED), "x")
        for capture in CAPTURES:
            rate = timings[_key(REBUILD, capture)].cpu_ms.inverted(decisions * 1000.0)
            suffix = "" if capture == "none" else "_full_capture"
            figures[f"rebuild{suffix}_decisions_per_s@{n}"] = measure(rate, "decisions/s")
        tables[str(n)] = [t.to_dict() for t in timings.values()]
        print(f"\n{n} items ({decisions} decisions per rebuild)")
        print(format_timings(timings, UNTRACED))
        for capture in CAPTURES:
            suffix = "" if capture == "none" else "_full_capture"
            spread = figures[f"rebuild{suffix}_decisions_per_s@{n}"]
            label = ("default capture (none)" if capture == "none"
                     else "capture full (extra line, not judged)")
            print(f"rebuild from spans, {label}, every entry read: {spread['median']:,.0f} "
                  f"decisions/s of CPU ({spread['min']:,.0f}-{spread['max']:,.0f})")
    print("\ntargets: python benchmarks/check.py judges them (benchmarks/targets.toml)")
    if args.json_path is not None:
        write_json(args.json_path, payload(
            "otel", mode=mode, quick=args.quick, env=env, ratios=ratios, figures=figures,
            layout=args.layout, rounds=rounds, timings=tables, rebuild_captures=captures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
