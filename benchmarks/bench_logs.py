"""Benchmark the log projection: rebuilding runs from an audit log, the reader's
memory as the log grows, and the audit log's cost inside a run.

    python benchmarks/bench_logs.py [--events 1000000] [--repeats 3] [--pairs 31]
                                    [--quick] [--mode loop|harness] [--json PATH]

Logs are written by ``AuditLog`` from real pipeline runs of 1,000 candidates
(``make_items``; the bench_pipeline configuration), about 1,014 events a run:

- **recurring**: every run offers the same 1,000 items (an agent's history
  offered again each turn; the reader shares items decoded from the same bytes);
- **unique**: every run has its own 1,000 items (the reader's worst case).

Throughput is events per second of thread CPU of reading a log with ``read_runs`` —
every run's digest checked, every report built, and **every entry of every report
read** (its item's content and tokens, its score and reason: the reader builds
entries lazily, so a rate that never reads them measures less than a reader gets).
The reads take turns with the floor, ``msgspec`` decoding each line into its typed
record and nothing else, round by round (``_harness.interleave``); the read over the
floor is a per-round ratio. An extra, labelled line reads the recurring log without
touching the entries. Memory is the tracemalloc peak of reading a log and of one ten
times longer. The audit-log cost: runs with an ``AuditLog`` against runs with no
collector, taking turns with a do-nothing Full-level collector (the cost of the
pipeline building its item events at all) and an ``AuditLog`` whose digest does
nothing (the digest's own cost); each ratio per round, median and min-max.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from _harness import (  # noqa: E402
    Mode,
    Spread,
    Timing,
    add_common_options,
    audit_log_runs,
    budget_for,
    environment,
    format_columns,
    format_timings,
    header,
    interleave,
    make_items,
    measure,
    payload,
    peak_bytes,
    reference_pipeline,
    round_ratios,
    touch_report,
    write_audit_log,
    write_json,
)
from cupellation import (  # noqa: E402
    TraceDetailLevel,
)
from cupellation.events import PipelineEvent, RunDigest  # noqa: E402
from cupellation.events._records import RECORD_DECODER  # noqa: E402
from cupellation.logs import AuditLog, read_runs  # noqa: E402

__all__ = ["main"]

SEED = 20_251_123
ITEMS = 1_000


def write_log(path: Path, events: int, *, unique: bool) -> int:
    """Runs of the module's 1,000 candidates (a pinned one in the middle) logged to
    ``path`` until it holds at least ``events`` events; the count."""
    return write_audit_log(path, audit_log_runs(events, ITEMS), SEED, candidates=ITEMS,
                           pinned_index=ITEMS // 2, unique=unique)


#: The extra line: the recurring log read without reading the reports' entries.
UNTOUCHED = "read.recurring, entries never read (not judged)"


def _read(path: Path, expected: int, *, touch: bool = True) -> int:
    """Read every run of ``path`` (and, with ``touch``, every entry of its report);
    check the reader saw ``expected`` records. Returns the entries read."""
    reader = read_runs(path)
    entries = 0
    for run in reader:
        if touch:
            entries += touch_report(run.report)
    if reader.stats.records != expected:
        raise AssertionError(f"{path.name}: read {reader.stats.records} records, "
                             f"wrote {expected}")
    return entries


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


def audit_overhead(directory: Path, rounds: int, mode: Mode) -> dict[str, Timing]:
    """The four variants of the audit-log cost, timed in turns."""
    pipeline = reference_pipeline()
    items = make_items(ITEMS, SEED, pinned_index=ITEMS // 2)
    budget = budget_for(items)
    audit = AuditLog(directory / "overhead.jsonl")
    plain = _DigestOff(directory / "plain.jsonl")
    nop = _Nop()
    try:
        return interleave({
            "untraced": lambda: pipeline.run(items, budget),
            "audit": lambda: pipeline.run(items, budget, audit),
            "nop_full": lambda: pipeline.run(items, budget, nop),
            "audit_no_digest": lambda: pipeline.run(items, budget, plain),
        }, rounds=rounds, mode=mode)
    finally:
        audit.close()
        plain.close()


def _read_variants(files: dict[str, tuple[Path, int, int]]
                   ) -> dict[str, Callable[[], object]]:
    variants: dict[str, Callable[[], object]] = {}
    for kind, (path, count, _size) in files.items():
        variants[f"read.{kind}"] = partial(_read, path, count)
        variants[f"floor.{kind}"] = partial(read_floor, path)
    recurring, count, _ = files["recurring"]
    variants[UNTOUCHED] = partial(_read, recurring, count, touch=False)
    return variants


def _memory(directory: Path, events: int, quick: bool) -> dict[str, Any]:
    small = directory / "small.jsonl"
    large = directory / "large.jsonl"
    small_events = 1_000 if quick else max(events // 10, 10_000)
    small_count = write_log(small, small_events, unique=True)
    large_count = write_log(large, small_events * 10, unique=True)
    peaks = {"small": peak_bytes(lambda: _read(small, small_count)),
             "large": peak_bytes(lambda: _read(large, large_count))}
    return {"small_events": small_count, "large_events": large_count,
            "small_peak_mib": peaks["small"] / 2**20, "large_peak_mib": peaks["large"] / 2**20,
            "ratio": peaks["large"] / max(peaks["small"], 1)}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks; print the tables; optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of reading")
    parser.add_argument("--pairs", type=int, default=31, help="rounds of the audit-log cost")
    add_common_options(parser, quick_help="5,000 events, 3 rounds of each, a smaller memory check")
    args = parser.parse_args(argv)
    events, repeats, pairs = ((5_000, 3, 3) if args.quick
                              else (args.events, args.repeats, args.pairs))
    mode: Mode = args.mode

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    env = environment()
    ratios: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    print(header(f"bench_logs: logs of {events:,} events, {repeats} rounds of reading, "
                 f"{pairs} rounds of the audit-log cost", mode, env))
    with tempfile.TemporaryDirectory(prefix="bench_logs_") as tmp:
        directory = Path(tmp)
        files = {}
        for kind in ("recurring", "unique"):
            path = directory / f"{kind}.jsonl"
            log(f"writing the {kind} log ({events} events)...")
            count = write_log(path, events, unique=kind == "unique")
            files[kind] = (path, count, path.stat().st_size)
        variants = _read_variants(files)
        # What one timed read reads: every entry of every run's report.
        entries_read = {kind: variants[f"read.{kind}"]() for kind in files}
        reads = interleave(variants, rounds=repeats, mode=mode, calls=1)
        rows = []
        for kind, (_path, count, size) in files.items():
            rate = reads[f"read.{kind}"].cpu_ms.inverted(count * 1000.0)
            figures[f"rebuild_events_per_s.{kind}"] = measure(rate, "events/s")
            ratios[f"read.{kind}/floor"] = measure(
                round_ratios(reads, f"read.{kind}", f"floor.{kind}"), "x")
            floor = reads[f"floor.{kind}"].cpu_ms.inverted(count * 1000.0)
            rows.append([kind, str(count), f"{size / 2**20:.1f}", rate.text(0),
                         f"{floor.median:,.0f}"])
        untouched = reads[UNTOUCHED].cpu_ms.inverted(files["recurring"][1] * 1000.0)
        figures["rebuild_events_per_s.recurring_untouched"] = measure(untouched, "events/s")
        print("\nrebuild from an audit log, every report entry read (events/s of CPU)")
        print(format_columns(["log", "events", "MiB", "events/s median (min-max)",
                              "floor lines/s"], rows))
        print(f"{UNTOUCHED}: {untouched.text(0)} events/s")
        print(format_timings(reads))

        log("memory: a log and one ten times longer...")
        memory = _memory(directory, events, args.quick)
        figures["memory_10x/1x"] = measure(Spread.of([memory["ratio"]]), "x")
        print(f"\nreader memory: {memory['small_events']} events {memory['small_peak_mib']:.1f} "
              f"MiB, {memory['large_events']} events {memory['large_peak_mib']:.1f} MiB "
              f"(x{memory['ratio']:.2f})")

        log("audit-log cost inside a 1,000-item run...")
        overhead = audit_overhead(directory, pairs, mode)
        for name in ("audit", "nop_full"):
            ratios[f"{name}/untraced@{ITEMS}"] = measure(
                round_ratios(overhead, name, "untraced"), "x")
        ratios[f"audit/audit_no_digest@{ITEMS}"] = measure(
            round_ratios(overhead, "audit", "audit_no_digest"), "x")
        print(f"\nthe audit log's cost inside a {ITEMS:,}-item run")
        print(format_timings(overhead, "untraced"))
        print("the digest: AuditLog / AuditLog without it = "
              + round_ratios(overhead, "audit", "audit_no_digest").text(3, "x"))
    print("\ntargets: python benchmarks/check.py judges them (benchmarks/targets.toml)")
    if args.json_path is not None:
        write_json(args.json_path, payload(
            "logs", mode=mode, quick=args.quick, env=env, ratios=ratios, figures=figures,
            events=events, memory=memory, entries_read=entries_read,
            runs_per_log=audit_log_runs(events, ITEMS), candidates_per_run=ITEMS,
            timings={"reads": [t.to_dict() for t in reads.values()],
                     "audit": [t.to_dict() for t in overhead.values()]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
