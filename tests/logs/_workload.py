"""Random pipeline runs written to an audit log, for the concurrency, rotation and
crash tests; also a script, so that real subprocesses can write the same log:

    python tests/logs/_workload.py LOG REPORTS SEED RUNS THREADS [MAX_BYTES]

Each run goes to a DiagnosticTraceCollector and the AuditLog at once; the
in-process reports are appended to REPORTS as JSON lines
(``{"run_id": ..., "report": ...}``) so the test can compare them with the
reports rebuilt from the log.
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cupellation import (
    ContextBudget,
    ContextItem,
    CountQuotaSlice,
    DiagnosticTraceCollector,
    FanOutCollector,
    GreedySlice,
    KnapsackSlice,
    OverflowStrategy,
    Pipeline,
    PriorityScorer,
    RecencyScorer,
    SelectionReport,
    TraceDetailLevel,
    UShapedPlacer,
)
from cupellation.logs import AuditLog
from cupellation.slicing import CountQuotaEntry, Slicer

T0 = datetime(2024, 1, 1, tzinfo=UTC)
_CONTENTS = ("a", "b", "c", "d", "<b>&", "é\u2028x", "tab\there", "line\nbreak")


def random_items(rng: random.Random, count: int) -> list[ContextItem]:
    """``count`` candidates: duplicates, negative tokens, pinned items, metadata."""
    return [ContextItem(
        content=rng.choice(_CONTENTS) + str(rng.randrange(count + 3)),
        tokens=rng.randint(-2, 60),
        kind=rng.choice(["Message", "Document", "ToolOutput"]),
        priority=rng.choice([None, rng.randint(-3, 3)]),
        tags=rng.sample(["x", "Y", "z"], rng.randint(0, 2)),
        metadata=rng.choice([None, {"k": rng.randint(0, 3)}, {"f": 0.5, "n": [1, "two"]}]),
        timestamp=rng.choice([None, T0 + timedelta(days=rng.randint(0, 50))]),
        pinned=rng.random() < 0.1,
    ) for _ in range(count)]


def random_pipeline(rng: random.Random) -> Pipeline:
    """One of the configurations that exercise every decision kind."""
    slicers: list[Slicer] = [
        GreedySlice(), KnapsackSlice(bucket_size=5),
        CountQuotaSlice(GreedySlice(), [CountQuotaEntry("ToolOutput", require_count=1,
                                                        cap_count=1)]),
    ]
    slicer = rng.choice(slicers)
    return Pipeline(scorer=rng.choice([RecencyScorer(), PriorityScorer()]), slicer=slicer,
                    placer=rng.choice([None, UShapedPlacer()]),
                    deduplication=rng.random() < 0.7,
                    overflow_strategy=rng.choice([OverflowStrategy.PROCEED,
                                                  OverflowStrategy.TRUNCATE]))


def random_budget(rng: random.Random) -> ContextBudget:
    """A budget with room for some of the candidates."""
    target = rng.randint(0, 200)
    reserve = rng.randint(0, 20)
    return ContextBudget(max_tokens=target + rng.randint(0, 100) + reserve,
                         target_tokens=target, output_reserve=reserve)


def run_once(rng: random.Random, audit: AuditLog, count: int | None = None
             ) -> tuple[str, SelectionReport]:
    """One random run into ``audit``; its run id and in-process report."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    items = random_items(rng, rng.randint(0, 14) if count is None else count)
    with contextlib.suppress(Exception):  # a failed run is recorded too (run_failed)
        random_pipeline(rng).run(items, random_budget(rng), FanOutCollector(collector, audit))
    events = collector.events
    return events[0].run_id, collector.build_report()


def main(argv: list[str]) -> int:
    """The script: runs from several threads into one log."""
    log, reports, seed, runs, threads = argv[:5]
    max_bytes = int(argv[5]) if len(argv) > 5 else 0
    audit = AuditLog(log, max_bytes=max_bytes, backup_count=50)
    lock = threading.Lock()
    out: list[str] = []

    def work(k: int) -> None:
        rng = random.Random(f"{seed}-{k}")
        for _ in range(int(runs)):
            run_id, report = run_once(rng, audit)
            with lock:
                out.append(json.dumps({"run_id": run_id, "report": report.to_json()}))

    workers = [threading.Thread(target=work, args=(k,)) for k in range(int(threads))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    audit.close()
    with Path(reports).open("a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
