"""Benchmark the fleet store: ``store load`` of an uncompressed audit log into chDB.

    python benchmarks/bench_store.py [--events 1000000] [--log PATH] [--json PATH]

The log is written by ``AuditLog`` from real pipeline runs of 1,000 candidates each
(bench_logs' "unique" workload: every run its own items, about 550 bytes a line), or
read from ``--log``. The store is a fresh embedded one (``chdb://`` in a temporary
folder), opened before the clock starts; the figure is events per second of
``Store.load`` — both of its SQL passes (counting the lines and finding the runs,
then the one INSERT … SELECT) — and beside it the time of one fleet question over
what was loaded (exclusions by reason, in SQL) and of reading one run back through
the reader (``read_runs`` of one run id, digest checked). Wall clock, one repeat:
the issue's target is 400,000 events/s on an idle 2-core machine; the load average
is printed with the figure, since a busy machine moves it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from _harness import environment, write_json  # noqa: E402
from bench_logs import write_log  # noqa: E402
from cupellation.store import RunQuery, open_store  # noqa: E402

__all__ = ["main"]


def measure(log: Path, folder: Path) -> dict[str, float]:
    """Load ``log`` into a fresh store in ``folder``; the figures."""
    with open_store(f"chdb://{folder / 'store'}") as store:
        start = time.perf_counter()
        stats = store.load([log])
        load_s = time.perf_counter() - start
        start = time.perf_counter()
        store.session.rows(f"SELECT LogAttributes['reason.name'], count() FROM "
                           f"{store.logs_table} WHERE LogAttributes['type'] = 'item_excluded' "
                           "GROUP BY 1")
        reasons_s = time.perf_counter() - start
        run_id = store.run_ids(RunQuery())[0][0]
        start = time.perf_counter()
        runs = list(store.read_runs(RunQuery(run_id=run_id)))
        one_run_s = time.perf_counter() - start
    return {"events": stats.loaded, "load_seconds": load_s,
            "events_per_second": stats.loaded / load_s, "reasons_seconds": reasons_s,
            "one_run_seconds": one_run_s, "one_run_events": runs[0].event_count}


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or take) the log, measure, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--log", type=Path, default=None, help="an audit log to load instead")
    parser.add_argument("--json", dest="json_path", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        folder = Path(tmp)
        log = args.log
        if log is None:
            log = folder / "audit.jsonl"
            write_log(log, args.events, unique=True)
        figures = measure(log, folder)
    env = environment()
    print(f"store load: {figures['events']:,} events in {figures['load_seconds']:.1f} s = "
          f"{figures['events_per_second']:,.0f} events/s (target 400,000 on an idle machine; "
          f"load average {env['load_average_1min']:.1f} on {env['cpu_count']} cores)")
    print(f"exclusions by reason over them: {figures['reasons_seconds']:.2f} s; one run "
          f"({figures['one_run_events']:,} events) read back, digest checked: "
          f"{figures['one_run_seconds']:.2f} s")
    if args.json_path is not None:
        write_json(args.json_path, {"environment": env, "figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
