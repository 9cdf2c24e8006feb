"""Benchmark the analytics: ``find_min_budget_for`` on the harness workload, and
``cupellation replay``'s engine over a large audit log.

    python benchmarks/bench_analytics.py [--items 10000] [--events 1000000] [--repeats 5]
                                          [--quick] [--json PATH]

- **find_min_budget_for**: ``make_items(--items)`` with the reference pipeline and
  ``budget_for`` (the bench_pipeline workload), a search ceiling of 2**19. The target
  items are the last ones a dry run at the ceiling includes (the search's worst case:
  it must narrow the whole range) and items excluded at every budget up to it. Each
  call is timed whole (the one Score/Deduplicate/Sort included), with its dry runs
  counted; every target item takes its turn in each of ``--repeats`` rounds
  (``_harness.interleave``: thread CPU time per call, loop mode by default), median and
  min-max over all calls.
- **replay**: an ``AuditLog`` of runs of 1,000 candidates (about 1,014 events a run)
  up to ``--events`` events, replayed under the Chat preset with ``ReplaySummary``
  over ``read_runs(..., keep_candidates=True)`` — what ``cupellation replay`` does,
  minus printing; events per second of CPU, median and min-max of ``--repeats``
  passes. Memory is
  the tracemalloc peak of replaying a log of 20 runs and one of 200 runs: the ratio
  stays near 1 when memory does not grow with the number of runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from _harness import (  # noqa: E402
    Mode,
    Spread,
    add_common_options,
    audit_log_runs,
    budget_for,
    environment,
    header,
    interleave,
    make_items,
    measure,
    payload,
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


def bench_find_min(n: int, repeats: int, mode: Mode) -> dict[str, Any]:
    """Time the budget search for each target item, in turns."""
    items = make_items(n, 17)
    pipeline = reference_pipeline()
    budget = budget_for(items)
    searches: dict[str, Any] = {}

    def search(target: ContextItem, key: str) -> None:
        searches[key] = search_min_budget(pipeline, items, target, CEILING, budget=budget)

    variants = {f"target {k}": partial(search, target, f"target {k}")
                for k, target in enumerate(_targets(pipeline, items))}
    timings = interleave(variants, rounds=repeats, mode=mode, calls=1)
    cpu_ms = Spread.of([t * 1000.0 for timing in timings.values() for t in timing.cpu])
    return {"items": n, "cpu_ms": cpu_ms,
            "max_dry_runs": max(s.dry_runs for s in searches.values()),
            "budgets_found": sorted({s.budget for s in searches.values()}, key=str)}


def _write_log(path: Path, runs: int) -> int:
    return write_audit_log(path, runs, 5, candidates=RUN_CANDIDATES)


def _replay(path: Path) -> ReplaySummary:
    summary = ReplaySummary(get_preset("chat"), "chat")
    for run in read_runs(path, keep_candidates=True):
        summary.add(run)
    return summary


def bench_replay(events: int, repeats: int, folder: Path, mode: Mode) -> dict[str, Any]:
    """Replay a log of at least ``events`` events; and the memory of 20 and 200 runs."""
    runs = audit_log_runs(events, RUN_CANDIDATES)  # at least --events events
    path = folder / "replay.jsonl"
    lines = _write_log(path, runs)
    summaries: list[ReplaySummary] = []
    timing = interleave({"replay": lambda: summaries.append(_replay(path))},
                        rounds=repeats, mode=mode, calls=1)["replay"]
    replayed = summaries[-1].to_dict()["runs"]
    small, large = folder / "small.jsonl", folder / "large.jsonl"
    _write_log(small, 20)
    _write_log(large, 200)
    peak_small = peak_bytes(lambda: _replay(small))
    peak_large = peak_bytes(lambda: _replay(large))
    return {"events": lines, "runs": runs, "replayed": replayed,
            "events_per_s": timing.cpu_ms.inverted(lines * 1000.0),
            "peak_20_runs_mib": peak_small / 2**20, "peak_200_runs_mib": peak_large / 2**20,
            "peak_ratio": peak_large / peak_small}


def main(argv: list[str] | None = None) -> int:
    """Run both benchmarks; print them; optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    add_common_options(parser, quick_help="1,000 items and 30,000 events, one round")
    args = parser.parse_args(argv)
    if args.quick:
        args.items, args.events, args.repeats = 1000, 30_000, 1
    env = environment()
    search = bench_find_min(args.items, args.repeats, args.mode)
    with tempfile.TemporaryDirectory() as folder:
        replay = bench_replay(args.events, max(1, min(args.repeats, 3)), Path(folder),
                              args.mode)
    print(header("bench_analytics", args.mode, env))
    print(f"find_min_budget_for, {search['items']} items, ceiling 2**19: CPU ms "
          f"{search['cpu_ms'].text(1)}, at most {search['max_dry_runs']} dry runs")
    rate: Spread = replay["events_per_s"]
    print(f"replay under Chat, {replay['events']} events in {replay['runs']} runs: "
          f"{rate.text(0)} events/s of CPU; peak {replay['peak_20_runs_mib']:.1f} MiB for 20 "
          f"runs, {replay['peak_200_runs_mib']:.1f} MiB for 200 (x{replay['peak_ratio']:.2f})")
    print("\ntargets: python benchmarks/check.py judges them (benchmarks/targets.toml)")
    figures = {
        f"find_min_cpu_ms@{args.items}": measure(search["cpu_ms"], "ms"),
        "find_min_dry_runs": measure(Spread.of([search["max_dry_runs"]]), "runs"),
        f"replay_events_per_s@{args.events}": measure(rate, "events/s"),
        "replay_peak_200/20": measure(Spread.of([replay["peak_ratio"]]), "x"),
    }
    if args.json_path is not None:
        write_json(args.json_path, payload(
            "analytics", mode=args.mode, quick=args.quick, env=env, ratios={},
            figures=figures,
            find_min_budget_for={**search, "cpu_ms": search["cpu_ms"].to_dict()},
            replay={**replay, "events_per_s": rate.to_dict()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
