"""Benchmark the analytics: ``find_min_budget_for`` on the harness workload, and
``cupellation replay``'s engine over a large audit log.

    python benchmarks/bench_analytics.py [--items 10000] [--events 1000000] [--repeats 5]
                                          [--quick] [--json PATH]

- **find_min_budget_for**: ``make_items(--items)`` with the reference pipeline and
  ``budget_for`` (the bench_pipeline workload), a search ceiling of 2**19. The target
  items are the last ones a dry run at the ceiling includes (the search's worst case:
  it must narrow the whole range) and items excluded at every budget up to it. Each
  call is timed whole (the one Score/Deduplicate/Sort included), with its dry runs
  counted; the median of ``--repeats`` calls, the items taken round-robin.
- **replay**: an ``AuditLog`` of runs of 1,000 candidates (about 1,014 events a run)
  up to ``--events`` events, replayed under the Chat preset with ``ReplaySummary``
  over ``read_runs(..., keep_candidates=True)`` — what ``cupellation replay`` does,
  minus printing; events per second, the median of ``--repeats`` passes. Memory is
  the tracemalloc peak of replaying a log of 20 runs and one of 200 runs: the ratio
  stays near 1 when memory does not grow with the number of runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from _harness import (  # noqa: E402
    Target,
    audit_log_runs,
    budget_for,
    environment,
    format_columns,
    format_targets,
    make_items,
    peak_bytes,
    reference_pipeline,
    write_audit_log,
    write_json,
)
from cupellation import ContextItem, Pipeline  # noqa: E402
from cupellation.analytics import ReplaySummary, scaled_budget, search_min_budget  # noqa: E402
from cupellation.logs import read_runs  # noqa: E402
from cupellation.policy import get_preset  # noqa: E402

__all__ = ["main"]

CEILING = 2**19
RUN_CANDIDATES = 1000


def _targets(pipeline: Pipeline, items: list[ContextItem]) -> list[ContextItem]:
    """The last three items a run at the ceiling includes, and one it never does."""
    budget = budget_for(items)
    chosen = pipeline.prepare(items).select(scaled_budget(budget, CEILING))
    picked = {id(item) for item in chosen}
    never = [item for item in items if id(item) not in picked]
    return [*chosen[-3:], *never[:1]]


def bench_find_min(n: int, repeats: int) -> dict[str, object]:
    items = make_items(n, 17)
    pipeline = reference_pipeline()
    budget = budget_for(items)
    targets = _targets(pipeline, items)
    times: list[float] = []
    runs: list[int] = []
    found: list[int | None] = []
    for k in range(repeats * len(targets)):
        target = targets[k % len(targets)]
        start = time.perf_counter()
        search = search_min_budget(pipeline, items, target, CEILING, budget=budget)
        times.append((time.perf_counter() - start) * 1000)
        runs.append(search.dry_runs)
        found.append(search.budget)
    return {"items": n, "median_ms": statistics.median(times), "max_ms": max(times),
            "max_dry_runs": max(runs), "budgets_found": sorted(set(found), key=str)}


def _write_log(path: Path, runs: int) -> int:
    return write_audit_log(path, runs, 5, candidates=RUN_CANDIDATES)


def _replay(path: Path) -> ReplaySummary:
    summary = ReplaySummary(get_preset("chat"), "chat")
    for run in read_runs(path, keep_candidates=True):
        summary.add(run)
    return summary


def bench_replay(events: int, repeats: int, folder: Path) -> dict[str, object]:
    runs = audit_log_runs(events, RUN_CANDIDATES)  # at least --events events
    path = folder / "replay.jsonl"
    lines = _write_log(path, runs)
    rates: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        summary = _replay(path)
        elapsed = time.perf_counter() - start
        rates.append(lines / elapsed)
    replayed = summary.to_dict()["runs"]
    small, large = folder / "small.jsonl", folder / "large.jsonl"
    _write_log(small, 20)
    _write_log(large, 200)
    peak_small = peak_bytes(lambda: _replay(small))
    peak_large = peak_bytes(lambda: _replay(large))
    return {"events": lines, "runs": runs, "replayed": replayed,
            "median_events_per_s": statistics.median(rates), "rates": rates,
            "peak_20_runs_mib": peak_small / 2**20, "peak_200_runs_mib": peak_large / 2**20,
            "peak_ratio": peak_large / peak_small}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="1,000 items and 30,000 events, one repeat")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        args.items, args.events, args.repeats = 1000, 30_000, 1
    search = bench_find_min(args.items, args.repeats)
    with tempfile.TemporaryDirectory() as folder:
        replay = bench_replay(args.events, max(1, min(args.repeats, 3)), Path(folder))
    print(f"find_min_budget_for, {search['items']} items, ceiling 2**19:")
    print(format_columns(["median ms", "max ms", "max dry runs"],
                         [[f"{search['median_ms']:.1f}", f"{search['max_ms']:.1f}",
                           str(search["max_dry_runs"])]]))
    print(f"replay under Chat, {replay['events']} events in {replay['runs']} runs:")
    print(format_columns(["median events/s", "peak MiB, 20 runs", "peak MiB, 200 runs",
                          "ratio"],
                         [[f"{replay['median_events_per_s']:,.0f}",
                           f"{replay['peak_20_runs_mib']:.1f}",
                           f"{replay['peak_200_runs_mib']:.1f}",
                           f"{replay['peak_ratio']:.2f}"]]))
    rate = float(replay["median_events_per_s"])  # type: ignore[arg-type]
    targets = [
        Target("find_min_budget_for at 10,000 items, ceiling 2**19", "ms", 200.0,
               float(search["median_ms"]) if args.items == 10_000 else None,  # type: ignore[arg-type]
               "median"),
        Target("find_min_budget_for dry runs", "runs", 20.0,
               float(search["max_dry_runs"])),  # type: ignore[arg-type]
        Target("replay time per logged event (50,000 events/s)", "us", 20.0,
               1e6 / rate if args.events >= 1_000_000 else None, "median, 1M events"),
        Target("replay memory, 200 runs / 20 runs", "x", 1.5,
               float(replay["peak_ratio"])),  # type: ignore[arg-type]
    ]
    print(format_targets(targets))
    if args.json is not None:
        write_json(args.json, {"environment": environment(), "find_min_budget_for": search,
                               "replay": replay, "targets": [t.to_dict() for t in targets]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
