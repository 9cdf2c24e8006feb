"""A/B of issue 26's fourth pass, in one process: traced runs with and without the
stage path's built-in positions, and span rebuilds with and without column blocks.

    python benchmarks/ab_positions.py [--rounds 12] [--items 1000]

**Positions.** A traced run's Slice stage takes exactly ``GreedySlice``'s selection
as positions, and its Place stage exactly ``UShapedPlacer``'s order
(``cupellation._run``). The "protocols" variant rebinds the two names ``_run``
compares the strategies' types against to a class no strategy is, so the stages go
through ``slice_with_details`` and ``place`` with the identity map back, as before
the pass; the names are restored after its calls. Variants: a Full-tier collector
that does nothing with the events, a DiagnosticTraceCollector with ``build_report``,
an AuditLog, and the SpanCollector's three tiers (columns, capture none, the SDK's
in-memory exporter), on the reference pipeline (``_harness.reference_pipeline``).

**Column blocks.** The span reader decodes a span's column block column by column
(``cupellation.otel._blocks``) when every row is clean. The "rows" variant makes the
block path decline (``block_events`` patched to return None), so every row goes
through the row path. Both rebuild the spans of one Full run (capture none, then
full) and read every entry of the rebuilt report.

Every round times each variant of both pairs (the starting one alternating), by
per-call thread CPU time in loop mode (back-to-back calls, collection left on, one
untimed lead-in call). Reported: medians with min-max over rounds, each round's
new/old ratio, and each traced variant over the untraced run of the same round.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

import cupellation._run as run_module  # noqa: E402
import cupellation.otel._spandecode as spandecode_module  # noqa: E402
from _harness import (  # noqa: E402
    Mode,
    Spread,
    budget_for,
    calls_for,
    make_items,
    reference_pipeline,
    time_calls,
    touch_report,
)
from cupellation import DiagnosticTraceCollector, TraceDetailLevel  # noqa: E402
from cupellation.events import PipelineEvent  # noqa: E402
from cupellation.logs import AuditLog  # noqa: E402
from cupellation.otel import SpanCollector, runs_from_spans  # noqa: E402

__all__ = ["main"]

SEED = 20_251_123
#: CPU seconds of calls per variant and round.
ROUND_SECONDS = 0.05
TIERS = ("StageOnly", "StageAndExclusions", "Full")


class _NoStrategy:
    """A type no strategy is: ``_run``'s comparisons against it never hold."""


class _DoNothing:
    """A Full-tier collector that does nothing with the events it is given."""

    is_enabled = True
    detail_level = TraceDetailLevel.FULL

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """Does nothing."""


#: The names ``cupellation._run`` compares a strategy's type against, and the name
#: the span reader decodes a column block by.
_STRATEGY_NAMES = ("GreedySlice", "UShapedPlacer")
_BLOCKS = "block_events"


@contextmanager
def _swapped(module: Any, replacements: dict[str, Any]) -> Iterator[None]:
    """``module``'s names rebound to ``replacements`` inside the block, restored after."""
    saved = {name: getattr(module, name) for name in replacements}
    for name, value in replacements.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _protocols() -> Any:
    """The stage path without the built-in positions (as before the pass)."""
    return _swapped(run_module, dict.fromkeys(_STRATEGY_NAMES, _NoStrategy))


def _rows() -> Any:
    """The span reader without column blocks (every row through the row path)."""
    return _swapped(spandecode_module, {_BLOCKS: lambda *_args: None})


def _traced_variants(items: list[Any], directory: Path) -> dict[str, Callable[[], object]]:
    pipeline = reference_pipeline()
    budget = budget_for(items)
    nothing = _DoNothing()
    audit = AuditLog(directory / "audit.jsonl")

    def full_report() -> object:
        collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
        pipeline.run(items, budget, collector)
        return collector.build_report()

    variants: dict[str, Callable[[], object]] = {
        "untraced": partial(pipeline.run, items, budget, None),
        "Full, do-nothing collector": partial(pipeline.run, items, budget, nothing),
        "full report": full_report,
        "AuditLog": partial(pipeline.run, items, budget, audit)}
    for tier in TIERS:
        provider = TracerProvider()
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        collector = SpanCollector(tracer_provider=provider, tier=tier, content_capture="none")

        def spans(collector: SpanCollector = collector,
                  exporter: InMemorySpanExporter = exporter) -> object:
            exporter.clear()
            return pipeline.run(items, budget, collector)

        variants[f"spans {tier}"] = spans
    return variants


def _rebuild_variants(items: list[Any]) -> dict[str, Callable[[], object]]:
    pipeline = reference_pipeline()
    out: dict[str, Callable[[], object]] = {}
    for capture in ("none", "full"):
        provider = TracerProvider()
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        pipeline.run(items, budget_for(items), SpanCollector(
            tracer_provider=provider, tier="Full", content_capture=capture))
        spans = list(exporter.get_finished_spans())
        out[f"rebuild, capture {capture}"] = partial(_rebuild, spans)
    return out


def _rebuild(spans: list[Any]) -> int:
    return sum(touch_report(run.report) for run in runs_from_spans(spans))


def _timed(fn: Callable[[], object], calls: int) -> float:
    fn()  # lead-in
    return time_calls(fn, calls, mode=Mode.LOOP)[0] * 1e6


def measure(items: int, rounds: int) -> dict[tuple[str, str], list[float]]:
    """µs per call of every (pair side, variant), per round."""
    candidates = make_items(items, SEED, pinned_index=items // 2)
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="ab_positions_") as tmp:
        traced = _traced_variants(candidates, Path(tmp))
        rebuilds = _rebuild_variants(candidates)
        counts = {name: calls_for(fn, ROUND_SECONDS) for name, fn in
                  [*traced.items(), *rebuilds.items()]}
        for round_ in range(rounds):
            sides = ("new", "old") if round_ % 2 == 0 else ("old", "new")
            for side in sides:
                with _protocols() if side == "old" else _nothing():
                    for name, fn in traced.items():
                        times.setdefault((side, name), []).append(_timed(fn, counts[name]))
                with _rows() if side == "old" else _nothing():
                    for name, fn in rebuilds.items():
                        times.setdefault((side, name), []).append(_timed(fn, counts[name]))
    return times


def _nothing() -> Any:
    """No change (the new side)."""
    return _swapped(run_module, {})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B and print its table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--items", type=int, default=1000)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    times = measure(args.items, args.rounds)
    load_after = os.getloadavg()[0]
    print(f"issue 26, fourth pass: {args.items} items, {args.rounds} rounds; "
          f"load average {load_before:.2f} -> {load_after:.2f}")
    print("old: the stage path through the protocols / every span row through the row path")
    names = list(dict.fromkeys(name for _, name in times))
    for name in names:
        old, new = times[("old", name)], times[("new", name)]
        ratio = Spread.of([n / o for n, o in zip(new, old, strict=True)])
        line = (f"  {name}: old {Spread.of(old).text(1, ' us')}, new "
                f"{Spread.of(new).text(1, ' us')}, new/old {ratio.text(3, 'x')}")
        if not name.startswith("rebuild") and name != "untraced":
            over = {side: Spread.of([t / u for t, u in zip(
                times[(side, name)], times[(side, "untraced")], strict=True)])
                for side in ("old", "new")}
            line += (f"; over untraced {over['old'].text(2, 'x')} -> "
                     f"{over['new'].text(2, 'x')}")
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
