"""``cupellation audit``: streaming totals over the runs of log files."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from datetime import datetime
from typing import Any

from ..analytics import add_exact
from ..logs import LoggedRun, ReadStats
from ._common import NOT_WHOLE
from ._logcmds import new_console, read_each, when_text
from ._logread import EXIT_CODES_HELP, NOTHING_FOUND, OK, add_log_arguments, safe, stats_lines
from ._runfilters import add_run_filters, narrowed_by

__all__ = ["AUDIT"]

#: Utilisation histogram: 1% bins from 0% to 200%, and one for everything above.
_BINS = 201

class _Summary:
    """Streaming totals over runs: memory independent of how many runs there are."""

    def __init__(self) -> None:
        self.runs = self.complete = self.failed = 0
        self.candidates = self.included = self.excluded = 0
        self.included_tokens = self.excluded_tokens = 0
        self.reasons: Counter[str] = Counter()
        self.reason_tokens: Counter[str] = Counter()
        self.bins = [0] * (_BINS + 1)
        # Exact partial sums (Shewchuk's, as math.fsum keeps them): the mean does not
        # depend on the order runs are read in (a store returns them newest first).
        self.utilisation_partials: list[float] = []
        self.utilisation_count = 0
        self.utilisation_min: float | None = None
        self.utilisation_max: float | None = None
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.incomplete: list[dict[str, Any]] = []
        self.incomplete_count = 0

    def add(self, run: LoggedRun) -> None:
        report = run.report
        self.runs += 1
        self.complete += report.is_complete
        self.failed += run.failed is not None
        self.candidates += report.total_candidates
        self.included += len(report.included)
        self.excluded += len(report.excluded)
        self.included_tokens += run.included_tokens
        for entry in report.excluded:
            self.reasons[entry.reason.name] += 1
            self.reason_tokens[entry.reason.name] += entry.item.tokens
            self.excluded_tokens += entry.item.tokens
        started = run.started_at
        if started is not None:
            self.first = started if self.first is None else min(self.first, started)
            self.last = started if self.last is None else max(self.last, started)
        utilisation = run.utilisation
        if utilisation is not None:
            self.bins[min(int(utilisation * 100), _BINS)] += 1
            add_exact(self.utilisation_partials, utilisation)
            self.utilisation_count += 1
            self.utilisation_min = (utilisation if self.utilisation_min is None
                                    else min(self.utilisation_min, utilisation))
            self.utilisation_max = (utilisation if self.utilisation_max is None
                                    else max(self.utilisation_max, utilisation))
        if not report.is_complete:
            self.incomplete_count += 1
            if len(self.incomplete) < 50:
                self.incomplete.append({"run_id": run.run_id, "source": run.source,
                                        "line": run.line, "problems": list(report.incomplete)})

    def percentile(self, fraction: float) -> float | None:
        """The utilisation at ``fraction`` of the runs (to the 1% bin's lower edge)."""
        if not self.utilisation_count:
            return None
        rank = fraction * (self.utilisation_count - 1)
        seen = 0
        for index, count in enumerate(self.bins):
            seen += count
            if seen > rank:
                return index / 100
        return _BINS / 100

    def to_dict(self, stats: ReadStats) -> dict[str, Any]:
        count = self.utilisation_count
        return {
            "runs": {"total": self.runs, "complete": self.complete,
                     "incomplete": self.runs - self.complete, "failed": self.failed,
                     "first_started_at": when_text(self.first) if self.first else None,
                     "last_started_at": when_text(self.last) if self.last else None},
            "candidates": {"considered": self.candidates, "included": self.included,
                           "excluded": self.excluded, "included_tokens": self.included_tokens,
                           "excluded_tokens": self.excluded_tokens},
            "exclusion_reasons": [
                {"reason": name, "count": n, "tokens": self.reason_tokens[name]}
                for name, n in sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))],
            "utilisation": {
                "runs": count,
                "mean": math.fsum(self.utilisation_partials) / count if count else None,
                "min": self.utilisation_min, "p10": self.percentile(0.1),
                "p50": self.percentile(0.5), "p90": self.percentile(0.9),
                "max": self.utilisation_max,
                "histogram": self._histogram(),
            },
            "incomplete_runs": self.incomplete,
            "lines": {"read": stats.lines, "records": stats.records,
                      "other": stats.other_lines, "blank": stats.blank_lines,
                      "damaged": stats.damaged_lines,
                      "future_schema": stats.future_schema_lines,
                      "late_records": stats.late_records},
            "traces": {"files": stats.trace_files, "spans": stats.spans},
            "damaged_lines": [{"source": d.source, "line": d.line, "problem": d.problem}
                              for d in stats.damaged],
            "source_errors": list(stats.source_errors),
        }

    def _histogram(self) -> list[dict[str, Any]]:
        """Utilisation in 10% buckets up to 100%, then one above."""
        buckets = [sum(self.bins[k * 10:(k + 1) * 10]) for k in range(10)]
        buckets.append(sum(self.bins[100:]))
        labels = [f"{k * 10}-{k * 10 + 10}%" for k in range(10)] + [">=100%"]
        return [{"range": label, "runs": n} for label, n in zip(labels, buckets, strict=True)]


class _Audit:
    """``cupellation audit LOG...``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "audit", help="summarise the runs recorded in audit logs",
            description="Summarise the runs in log files: runs, candidates considered and "
                        "excluded, exclusion reasons by count and tokens, the utilisation "
                        "of the target budget, incomplete runs and damaged lines.",
            epilog=EXIT_CODES_HELP + " With --strict: 3 when a run is incomplete or a line "
                                     "is damaged (the summary is printed all the same); a "
                                     "run not signed with CUPELLATION_DIGEST_KEY when it is "
                                     "set, or signed with a key while it is not, is "
                                     "incomplete.")
        add_log_arguments(parser)
        parser.add_argument("--since", metavar="TIME",
                            help="only runs started at or after TIME (ISO 8601; no offset "
                                 "means UTC)")
        parser.add_argument("--until", metavar="TIME",
                            help="only runs started at or before TIME (ISO 8601)")
        add_run_filters(parser)
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument("--strict", action="store_true",
                            help="exit 3 when any run is incomplete or any line damaged "
                                 "(for a CI check over stored logs)")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        summary = _Summary()
        stats = read_each("audit", args, summary.add)
        if isinstance(stats, int):
            return stats
        data = summary.to_dict(stats)
        if args.format == "json":
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            _print_audit(data, stats)
        if summary.runs == 0:
            print(f"cupellation audit: no runs found{narrowed_by(args)}", file=sys.stderr)
            return NOTHING_FOUND
        if args.strict and (summary.runs > summary.complete or stats.damaged_lines
                            or stats.source_errors):
            print(f"cupellation audit: not whole: {summary.runs - summary.complete} "
                  f"incomplete run(s), {stats.damaged_lines} damaged line(s), "
                  f"{len(stats.source_errors)} unreadable source(s) (--strict)",
                  file=sys.stderr)
            return NOT_WHOLE
        return OK


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _print_audit(data: dict[str, Any], stats: ReadStats) -> None:
    from rich.table import Table  # noqa: PLC0415 - rich is the cli extra's

    console = new_console()
    runs, cands, util = data["runs"], data["candidates"], data["utilisation"]
    console.print(f"Runs: {runs['total']} ({runs['complete']} complete, "
                  f"{runs['incomplete']} incomplete, {runs['failed']} failed), started "
                  f"{runs['first_started_at'] or '-'} .. {runs['last_started_at'] or '-'}")
    console.print(f"Candidates: {cands['considered']} considered, {cands['included']} "
                  f"included ({cands['included_tokens']} tokens), {cands['excluded']} "
                  f"excluded ({cands['excluded_tokens']} tokens)")
    if data["exclusion_reasons"]:
        table = Table(title="Exclusion reasons")
        for column in ("reason", "count", "tokens"):
            table.add_column(column, justify="left" if column == "reason" else "right")
        for row in data["exclusion_reasons"]:
            table.add_row(safe(row["reason"]), str(row["count"]), str(row["tokens"]))
        console.print(table)
    console.print(f"Utilisation of target tokens over {util['runs']} runs: mean "
                  f"{_pct(util['mean'])}, min {_pct(util['min'])}, p10 {_pct(util['p10'])}, "
                  f"p50 {_pct(util['p50'])}, p90 {_pct(util['p90'])}, max {_pct(util['max'])}")
    widest = max((b["runs"] for b in util["histogram"]), default=0)
    if widest:
        for bucket in util["histogram"]:
            bar = "#" * round(30 * bucket["runs"] / widest)
            console.print(f"  {bucket['range']:>8} {bucket['runs']:>7} {bar}")
    if data["incomplete_runs"]:
        console.print(f"Incomplete runs ({data['runs']['incomplete']}):")
        for entry in data["incomplete_runs"][:10]:
            console.print(f"  {safe(entry['run_id'])} ({safe(entry['source'])}:{entry['line']}): "
                          f"{safe('; '.join(entry['problems']), 200)}")
    for line in _read_lines(stats):
        console.print(line)


def _read_lines(stats: ReadStats) -> list[str]:
    """What was read, in the unit it was read in (a trace file has no lines to count)."""
    lines = []
    if stats.trace_files:
        lines.append(f"Trace files: {stats.trace_files} read, {stats.spans} spans")
    if stats.lines or not stats.trace_files:
        lines.append(f"Lines: {stats.lines} read, {stats.records} records, "
                     f"{stats.other_lines} from other programs, "
                     f"{stats.damaged_lines} damaged")
    return [*lines, *stats_lines(stats)]



AUDIT = _Audit()
