"""Benchmark the log projection: rebuilding runs from an audit log, the reader's
memory as the log grows, and the audit log's cost inside a run.

    python benchmarks/bench_logs.py [--events 1000000] [--repeats 3] [--quick] [--json PATH]

Logs are written by ``AuditLog`` from real pipeline runs of 1,000 candidates
(``make_items``; the bench_pipeline configuration), about 1,014 events a run:

- **recurring**: every run offers the same 1,000 items (an agent's history
  offered again each turn; the reader shares items decoded from the same bytes);
- **unique**: every run has its own 1,000 items (the reader's worst case).

Throughput is events per second of ``list(read_runs(path))`` — every run's
digest checked, every report built (the items inside the reports are built when
read, and nothing reads them here) — the median of ``--repeats`` reads, the two
files read round-robin; beside it, the floor: ``msgspec`` decoding each line
into its typed record and nothing else. Memory is the tracemalloc peak of
reading a log and of one ten times longer. The audit-log cost is the median of
per-pair ratios of interleaved runs with an ``AuditLog`` against runs with no
collector (and, for reference, with a do-nothing Full-level collector: the cost
of the pipeline building its item events at all); the digest's own cost is the
median of per-pair ratios of runs into an ``AuditLog`` against runs into one
whose digest does nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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
from cupellation import (  # noqa: E402
    TraceDetailLevel,
)
from cupellation._events.records import RECORD_DECODER  # noqa: E402
from cupellation.events import PipelineEvent, RunDigest  # noqa: E402
from cupellation.logs import AuditLog, read_runs  # noqa: E402

__all__ = ["main"]

SEED = 20_251_123
ITEMS = 1_000


def write_log(path: Path, events: int, *, unique: bool) -> int:
    """Runs of the module's 1,000 candidates (a pinned one in the middle) logged to
    ``path`` until it holds at least ``events`` events; the count."""
    return write_audit_log(path, audit_log_runs(events, ITEMS), SEED, candidates=ITEMS,
                           pinned_index=ITEMS // 2, unique=unique)


def _read(path: Path) -> int:
    reader = read_runs(path)
    for _ in reader:
        pass
    return reader.stats.records


class _Nop:
    is_enabled = True
    detail_level = TraceDetailLevel.FULL

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """Does nothing."""


def read_floor(path: Path) -> int:
    """Decode each line into its typed record and nothing else (the floor of a read)."""
    decode = RECORD_DECODER.decode
    count = 0
    with path.open("rb") as handle:
        for line in handle:
            try:  # noqa: SIM105 - contextlib.suppress costs more than the floor's own work
                decode(line)
            except ValueError:  # run_started and the like: not a typed record
                pass
            count += 1
    return count


def _hash_nothing(self: RunDigest, data: bytes) -> None:
    """A RunDigest.update that hashes nothing (the digest-off runs of the audit-log cost)."""


class _DigestOff(AuditLog):
    """An AuditLog whose runs' digests cost nothing."""

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        real = RunDigest.update
        RunDigest.update = _hash_nothing  # type: ignore[method-assign]
        try:
            super().record(events)
        finally:
            RunDigest.update = real  # type: ignore[method-assign]


def _paired(fns: dict[str, Callable[[], object]], pairs: int) -> dict[str, list[float]]:
    """Run the functions round-robin ``pairs`` times (after a warm-up); times in ms."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for k in range(pairs):
        for name in order[k % len(order):] + order[:k % len(order)]:
            gc.collect()
            start = time.perf_counter()
            fns[name]()
            times[name].append((time.perf_counter() - start) * 1000.0)
    return times


def _ratio(times: dict[str, list[float]], over: str, under: str) -> float:
    return statistics.median(a / b for a, b in zip(times[over], times[under], strict=True))


def audit_overhead(directory: Path, pairs: int) -> dict[str, float]:
    """Median per-pair ratios: AuditLog vs no collector, Full no-op vs no collector,
    AuditLog vs AuditLog without its digest."""
    pipeline = reference_pipeline()
    items = make_items(ITEMS, SEED, pinned_index=ITEMS // 2)
    budget = budget_for(items)
    audit = AuditLog(directory / "overhead.jsonl")
    plain = _DigestOff(directory / "plain.jsonl")
    nop = _Nop()
    times = _paired({
        "none": lambda: pipeline.run(items, budget),
        "audit": lambda: pipeline.run(items, budget, audit),
        "nop": lambda: pipeline.run(items, budget, nop),
        "no_digest": lambda: pipeline.run(items, budget, plain),
    }, pairs)
    audit.close()
    plain.close()
    return {
        "none_ms": statistics.median(times["none"]),
        "audit_ms": statistics.median(times["audit"]),
        "nop_full_ms": statistics.median(times["nop"]),
        "audit_no_digest_ms": statistics.median(times["no_digest"]),
        "audit_ratio": _ratio(times, "audit", "none"),
        "nop_full_ratio": _ratio(times, "nop", "none"),
        "digest_ratio": _ratio(times, "audit", "no_digest"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks; print the tables and targets; optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=31)
    parser.add_argument("--quick", action="store_true", help="20,000 events, 1 read, 5 pairs")
    parser.add_argument("--json", dest="json_path", type=Path, default=None)
    args = parser.parse_args(argv)
    events, repeats, pairs = ((20_000, 1, 5) if args.quick
                              else (args.events, args.repeats, args.pairs))

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    results: dict[str, Any] = {"environment": environment(), "events": events}
    with tempfile.TemporaryDirectory(prefix="bench_logs_") as tmp:
        directory = Path(tmp)
        files = {}
        for kind in ("recurring", "unique"):
            path = directory / f"{kind}.jsonl"
            log(f"writing the {kind} log ({events} events)...")
            count = write_log(path, events, unique=kind == "unique")
            files[kind] = (path, count, path.stat().st_size)
        times: dict[str, list[float]] = {kind: [] for kind in files}
        floors: dict[str, list[float]] = {kind: [] for kind in files}
        for _ in range(repeats):
            for kind, (path, count, _size) in files.items():
                gc.collect()
                start = time.perf_counter()
                assert _read(path) == count
                times[kind].append(time.perf_counter() - start)
                start = time.perf_counter()
                read_floor(path)
                floors[kind].append(time.perf_counter() - start)
        rows = []
        for kind, (_path, count, size) in files.items():
            median = statistics.median(times[kind])
            floor = statistics.median(floors[kind])
            results[f"read_{kind}"] = {"events": count, "bytes": size, "seconds": times[kind],
                                       "median_s": median, "events_per_s": count / median,
                                       "floor_lines_per_s": count / floor}
            rows.append([kind, str(count), f"{size / 2**20:.0f}",
                         f"{median:.2f}", f"{count / median:,.0f}", f"{count / floor:,.0f}"])
        print(format_columns(["log", "events", "MiB", "median s", "events/s",
                              "floor lines/s"], rows))

        log("memory: a log and one ten times longer...")
        small = directory / "small.jsonl"
        large = directory / "large.jsonl"
        small_events = max(events // 10, 10_000) if not args.quick else 5_000
        write_log(small, small_events, unique=True)
        write_log(large, small_events * 10, unique=True)
        peaks = {"small": peak_bytes(lambda: _read(small)),
                 "large": peak_bytes(lambda: _read(large))}
        results["memory"] = {"small_events": small_events, "large_events": small_events * 10,
                             "small_peak_mib": peaks["small"] / 2**20,
                             "large_peak_mib": peaks["large"] / 2**20}
        print(format_columns(["log", "events", "peak MiB"], [
            ["small", str(small_events), f"{peaks['small'] / 2**20:.1f}"],
            ["10x", str(small_events * 10), f"{peaks['large'] / 2**20:.1f}"]]))

        log("audit-log cost inside a 1,000-item run...")
        overhead = audit_overhead(directory, pairs)
        results["audit_overhead"] = overhead
        print(format_columns(["run", "median ms", "ratio to none"], [
            ["no collector", f"{overhead['none_ms']:.3f}", "1.00"],
            ["Full no-op collector", f"{overhead['nop_full_ms']:.3f}",
             f"{overhead['nop_full_ratio']:.2f}"],
            ["AuditLog (Full)", f"{overhead['audit_ms']:.3f}", f"{overhead['audit_ratio']:.2f}"],
            ["AuditLog (Full), digest off", f"{overhead['audit_no_digest_ms']:.3f}", ""],
        ]))
        print(f"the digest: AuditLog / AuditLog without it = {overhead['digest_ratio']:.3f}")
    targets = [
        # Issue 12: ≥ 300,000 events/s with reused items, ≥ 200,000 with all-new items.
        Target("rebuild recurring log: seconds per 300k events", "s",
               1.0, 300_000 / results["read_recurring"]["events_per_s"]),
        Target("rebuild unique log: seconds per 200k events", "s",
               1.0, 200_000 / results["read_unique"]["events_per_s"]),
        Target("peak memory 10x log / 1x log", "x", 1.5,
               peaks["large"] / max(peaks["small"], 1)),
        Target("AuditLog run / untraced run (1,000 items)", "x", 1.5, overhead["audit_ratio"]),
        Target("the digest: AuditLog run / without its digest", "x", 1.05,
               overhead["digest_ratio"]),
    ]
    print()
    print(format_targets(targets))
    results["targets"] = [{"name": t.name, "unit": t.unit, "limit": t.limit,
                           "measured": t.measured, "status": t.status} for t in targets]
    if args.json_path is not None:
        write_json(args.json_path, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
