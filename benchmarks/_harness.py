"""Shared machinery of the benchmark scripts: deterministic candidate items, the
timing and memory measurement, the command line and the printed tables.

Not a test helper and not part of the library: the scripts in this folder
import it as a sibling module.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

import cupellation
from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    ContextKind,
    GreedySlice,
    Pipeline,
    PriorityScorer,
    RecencyScorer,
    UShapedPlacer,
)
from cupellation.logs import AuditLog

#: The target budget as a share of the candidates' tokens (max_tokens is twice it).
TARGET_FRACTION = 0.4

__all__ = [
    "BASE_TIME",
    "CLOCK_NOW",
    "TAG_VOCABULARY",
    "TARGET_FRACTION",
    "BenchmarkArgs",
    "Measurement",
    "Target",
    "environment",
    "format_columns",
    "format_table",
    "budget_for",
    "format_targets",
    "make_items",
    "reference_pipeline",
    "measure",
    "measure_interleaved",
    "parse_args",
    "parse_sizes",
    "peak_bytes",
    "timed_runs",
    "audit_log_runs",
    "write_audit_log",
    "write_json",
]

MIB = 1024.0 * 1024.0

#: The earliest candidate timestamp; every timestamp lies within the year after it.
BASE_TIME = datetime(2025, 1, 1, tzinfo=UTC)
#: The fixed "now" of the decay scorer: a day after the last possible timestamp.
CLOCK_NOW = BASE_TIME + timedelta(days=366)
_YEAR_SECONDS = 365 * 24 * 3600

_KINDS = (
    ContextKind.MESSAGE,
    ContextKind.DOCUMENT,
    ContextKind.TOOL_OUTPUT,
    ContextKind.MEMORY,
    ContextKind.SYSTEM_PROMPT,
)
_TOPICS = (
    "billing", "refund", "invoice", "login", "password", "outage", "latency", "deploy",
    "rollback", "schema", "migration", "index", "cache", "queue", "retry", "timeout",
    "quota", "pricing", "contract", "renewal", "onboarding", "sso", "oauth", "webhook",
    "export", "import", "backup", "restore", "audit", "compliance", "gdpr", "security",
    "incident", "alert", "metrics", "tracing", "logging", "search", "ranking", "embedding",
    "summary", "feedback", "bug", "feature", "roadmap", "release", "mobile", "desktop",
    "api", "sdk",
)
#: The tag vocabulary: 50 topics, some capitalised (tags compare case-insensitively).
TAG_VOCABULARY: tuple[str, ...] = tuple(
    topic.capitalize() if k % 7 == 0 else topic for k, topic in enumerate(_TOPICS)
)
_CHANNELS = ("email", "chat", "docs", "ticket")
_WORDS = (
    "the", "customer", "reported", "that", "their", "invoice", "was", "charged", "twice",
    "after", "upgrading", "plan", "we", "checked", "logs", "and", "found", "a", "retry",
    "loop", "in", "webhook", "handler", "which", "sent", "duplicate", "requests", "to",
    "payment", "provider", "fix", "is", "deployed", "please", "confirm", "with", "user",
)


def make_items(n: int, seed: int, *, pinned_index: int | None = None) -> list[ContextItem]:
    """``n`` realistic candidate items, the same for the same ``(n, seed)``.

    Unique content of 20-200 characters; tokens uniform in 10..400; kinds from
    the five well-known ones; priority None for 20% else 0..100; timestamps
    spread over a year, about one in ten equal to an earlier item's;
    future-relevance hint None for 30%; 0-3 tags from a 50-tag vocabulary;
    metadata with a ``channel`` and, for half the items, ``cupel:trust`` as a
    decimal string. The item at ``pinned_index`` (if any) is a pinned system
    prompt.
    """
    rng = random.Random(seed)
    text = " ".join(rng.choice(_WORDS) for _ in range(4000))
    text_span = len(text) - 200
    items: list[ContextItem] = []
    used_times: list[datetime] = []
    for index in range(n):
        prefix = f"#{index} "
        length = rng.randint(20, 200)
        start = rng.randrange(text_span)
        content = prefix + text[start:start + length - len(prefix)]
        tokens = rng.randint(10, 400)
        kind = rng.choice(_KINDS)
        priority = None if rng.random() < 0.2 else rng.randint(0, 100)
        if used_times and rng.random() < 0.1:
            timestamp = rng.choice(used_times)
        else:
            timestamp = BASE_TIME + timedelta(seconds=rng.randrange(_YEAR_SECONDS))
            used_times.append(timestamp)
        hint = None if rng.random() < 0.3 else round(rng.random(), 3)
        tags = tuple(rng.sample(TAG_VOCABULARY, rng.randint(0, 3)))
        metadata: dict[str, Any] = {"channel": rng.choice(_CHANNELS)}
        if rng.random() < 0.5:
            metadata["cupel:trust"] = f"{rng.random():.2f}"
        pinned = index == pinned_index
        items.append(ContextItem(
            content,
            tokens,
            kind=ContextKind.SYSTEM_PROMPT if pinned else kind,
            priority=priority,
            tags=tags,
            metadata=metadata,
            timestamp=timestamp,
            future_relevance_hint=hint,
            pinned=pinned,
        ))
    return items


# -- measurement ------------------------------------------------------------------


@dataclass(slots=True)
class Measurement:
    """The timings (milliseconds) and traced memory peak (bytes) of one benchmark at one size."""

    name: str
    group: str
    n: int
    times_ms: list[float]
    peak_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median_ms(self) -> float:
        """The median of the timed runs."""
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        """The fastest timed run."""
        return min(self.times_ms)

    @property
    def peak_mib(self) -> float | None:
        """The traced memory peak in MiB, None when not measured."""
        return None if self.peak_bytes is None else self.peak_bytes / MIB

    def to_dict(self) -> dict[str, Any]:
        """The measurement as JSON-native values."""
        return {
            "name": self.name,
            "group": self.group,
            "n": self.n,
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "peak_mib": self.peak_mib,
            "times_ms": self.times_ms,
            **self.extra,
        }


def timed_runs(fn: Callable[[], object], repeats: int) -> list[float]:
    """Wall-clock milliseconds of ``repeats`` calls of ``fn``, a full collection before each.

    The garbage collector stays enabled during a call: collections triggered
    by the call's own allocations are part of its real cost.
    """
    times: list[float] = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        del result
        times.append(elapsed * 1000.0)
    return times


def peak_bytes(fn: Callable[[], object]) -> int:
    """The tracemalloc peak (bytes allocated and not yet freed) during one call of ``fn``.

    Run apart from the timed calls, since tracing slows allocation severalfold.
    Memory that existed before the call (its inputs) is not counted.
    """
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return peak


def measure_interleaved(names: Sequence[str], group: str, n: int,
                        fns: Sequence[Callable[[], object]], repeats: int) -> list[Measurement]:
    """Time several variants round-robin (the starting one rotating each round), then
    trace each one's memory peak in one more call.

    Interleaving spreads any drift of the machine's speed (other processes,
    frequency changes) evenly over the variants, so their ratios stay fair.
    """
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    count = len(fns)
    for round_ in range(repeats):
        for offset in range(count):
            k = (round_ + offset) % count
            times[k].extend(timed_runs(fns[k], 1))
    return [Measurement(name, group, n, runs, peak_bytes(fn))
            for name, fn, runs in zip(names, fns, times, strict=True)]


def measure(name: str, group: str, n: int, fn: Callable[[], object],
            repeats: int) -> Measurement:
    """Time ``fn`` ``repeats`` times, then trace its memory peak in one more call."""
    fn()  # warm-up: first-call costs (imports, caches) are not what is measured
    times = timed_runs(fn, repeats)
    return Measurement(name, group, n, times, peak_bytes(fn))


# -- targets ----------------------------------------------------------------------


@dataclass(slots=True)
class Target:
    """One performance target: a measured value against a limit (lower is better)."""

    name: str
    unit: str
    limit: float
    measured: float | None  # None: not measured in this run (e.g. --quick)
    note: str = ""

    @property
    def status(self) -> str:
        """PASS, MISS or n/a (not measured)."""
        if self.measured is None:
            return "n/a"
        return "PASS" if self.measured <= self.limit else "MISS"

    def to_dict(self) -> dict[str, Any]:
        """The target as JSON-native values."""
        return {"name": self.name, "unit": self.unit, "limit": self.limit,
                "measured": self.measured, "status": self.status, "note": self.note}


# -- command line and output ------------------------------------------------------


@dataclass(slots=True)
class BenchmarkArgs:
    """The parsed command line."""

    sizes: list[int]
    repeats: int
    quick: bool
    json_path: Path | None
    extra: argparse.Namespace


def parse_sizes(text: str) -> list[int]:
    """A comma-separated list of positive integers (``--sizes``)."""
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}") from None
    if not sizes or any(size <= 0 for size in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be positive integers: {text!r}")
    return sizes


def parse_args(
    description: str,
    argv: Sequence[str] | None,
    *,
    default_sizes: Sequence[int],
    quick_sizes: Sequence[int] = (100, 1000),
    add_options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> BenchmarkArgs:
    """Parse the options every benchmark script shares (and any ``add_options`` adds)."""
    parser = argparse.ArgumentParser(description=description)
    default_text = ",".join(str(size) for size in default_sizes)
    parser.add_argument("--sizes", type=parse_sizes, default=None,
                        help=f"comma-separated candidate counts (default {default_text})")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed runs per benchmark; the median is reported (default 7)")
    parser.add_argument("--quick", action="store_true",
                        help="sizes " + ",".join(map(str, quick_sizes))
                        + " and 3 repeats (a smoke run)")
    parser.add_argument("--json", dest="json_path", type=Path, default=None, metavar="PATH",
                        help="also write the results as JSON to PATH")
    if add_options is not None:
        add_options(parser)
    ns = parser.parse_args(None if argv is None else list(argv))
    if ns.quick:
        sizes = ns.sizes or list(quick_sizes)
        repeats = ns.repeats or 3
    else:
        sizes = ns.sizes or list(default_sizes)
        repeats = ns.repeats or 7
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    return BenchmarkArgs(sizes, repeats, ns.quick, ns.json_path, ns)


def environment() -> dict[str, Any]:
    """Where the figures were measured."""
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "numpy": np.__version__,
        "cupellation": cupellation.__version__,
        "cpu_count": os.cpu_count(),
        # Other processes on a small machine move the figures: say how busy it was.
        "load_average_1min": os.getloadavg()[0],
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(rows: Sequence[Measurement], *, extra_columns: Sequence[tuple[
        str, Callable[[Measurement], str]]] = ()) -> str:
    """The plain-text table: name, N, median ms, min ms, peak MiB (and extra columns)."""
    headers = ["name", "N", "median ms", "min ms", "peak MiB", *[h for h, _ in extra_columns]]
    body = [
        [row.name, str(row.n), _fmt(row.median_ms, 3), _fmt(row.min_ms, 3),
         _fmt(row.peak_mib, 2), *[render(row) for _, render in extra_columns]]
        for row in rows
    ]
    return _render(headers, body, left_columns=1)


def format_targets(targets: Sequence[Target]) -> str:
    """The targets section: measured against limit, PASS/MISS."""
    headers = ["target", "measured", "limit", "status"]
    body = [
        [t.name + (f" ({t.note})" if t.note else ""),
         "-" if t.measured is None else f"{t.measured:.3f} {t.unit}".rstrip(),
         f"{t.limit:g} {t.unit}".rstrip(), t.status]
        for t in targets
    ]
    return _render(headers, body, left_columns=1)


def format_columns(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A plain-text table of right-aligned columns."""
    return _render(headers, body, left_columns=0)


def _render(headers: Sequence[str], body: Sequence[Sequence[str]], *, left_columns: int) -> str:
    widths = [max(len(headers[c]), *(len(r[c]) for r in body)) if body else len(headers[c])
              for c in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        parts = [cell.ljust(widths[c]) if c < left_columns else cell.rjust(widths[c])
                 for c, cell in enumerate(cells)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in body)])


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` as indented JSON, creating the parent folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def reference_pipeline() -> Pipeline:
    """The configuration the .NET implementation benchmarks, used by every pipeline-level
    script here: Composite(Recency x2, Priority x1), GreedySlice, UShapedPlacer."""
    return Pipeline(CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
                    GreedySlice(), UShapedPlacer())


def budget_for(items: Sequence[ContextItem]) -> ContextBudget:
    """A target of TARGET_FRACTION of the candidates' tokens, max_tokens twice that."""
    target = int(sum(item.tokens for item in items) * TARGET_FRACTION)
    return ContextBudget(max_tokens=2 * target, target_tokens=target)


def audit_log_runs(events: int, candidates: int) -> int:
    """How many runs of ``candidates`` candidates an audit log needs to hold at least
    ``events`` events (at least one run): a run logs one event per candidate and 14
    more."""
    return max(1, -(-events // (candidates + 14)))


def write_audit_log(path: Path, runs: int, seed: int, *, candidates: int,
                    pinned_index: int | None = None, unique: bool = False) -> int:
    """``runs`` runs of the reference pipeline (``budget_for`` its candidates) recorded
    by an ``AuditLog`` at ``path``: every run offers ``make_items(candidates, seed,
    pinned_index=...)``, or, with ``unique``, run k its own items of seed ``seed + k``.
    Returns the number of lines (events) the log holds."""
    pipeline = reference_pipeline()
    items = make_items(candidates, seed, pinned_index=pinned_index)
    with AuditLog(path) as audit:
        for run in range(runs):
            if unique and run:
                items = make_items(candidates, seed + run, pinned_index=pinned_index)
            pipeline.run(items, budget_for(items), audit)
    with path.open("rb") as handle:
        return sum(1 for _ in handle)
