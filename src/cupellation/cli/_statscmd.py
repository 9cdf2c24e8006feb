"""``cupellation stats --store URL``: fleet questions answered in SQL (exclusions by
reason, kind and service over time; budget utilisation percentiles; failures and
overflows; the sources most often left out) as a table, JSON, CSV or an HTML page."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..exceptions import CupelError
from ..logs import as_datetime
from ._logread import NOTHING_FOUND, OK, USAGE, safe
from ._storeread import STORE_HELP

if TYPE_CHECKING:
    from ..store import FleetStats

__all__ = ["CSV_TABLES", "STATS", "headline", "stats_cells", "stats_csv"]

_EXIT = ("exit status: 0 the statistics were computed; 1 no run in the store matches the "
         "filters; 2 bad usage or a store that cannot be opened (one line on standard "
         "error); 3 with --strict, some runs are structurally incomplete; 130 interrupted; "
         "141 standard output closed early. Statistics are computed in SQL and read no "
         "digest: use 'audit --store' to check each run's digest.")
_NOT_WHOLE = 3
#: The CSV tables ``--table`` chooses from.
CSV_TABLES = ("exclusions", "utilization", "failures", "sources")


def stats_csv(stats: FleetStats, table: str) -> str:
    """One of the statistics' tables (:data:`CSV_TABLES`) as CSV text with a header."""
    data = stats.to_dict()
    key = {"exclusions": "exclusions", "utilization": "utilization",
           "failures": "failures", "sources": "top_sources"}[table]
    rows = data[key]
    out = io.StringIO()
    columns = {"exclusions": ["bucket", "service", "reason", "kind", "count"],
               "utilization": ["service", "runs", "p50", "p90", "p99", "min", "max"],
               "failures": ["service", "error_type", "runs"],
               "sources": ["source", "count", "top_reason"]}[table]
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({column: "" if row[column] is None else row[column]
                         for column in columns})
    return out.getvalue()


class _Stats:
    """``cupellation stats``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "stats", help="fleet statistics from a store, computed in SQL",
            description="Fleet statistics over a store's otel_logs, computed in the "
                        "database: exclusions by reason, kind and service per time "
                        "bucket; budget utilisation percentiles per service; failed runs "
                        "by error (PinnedBudgetError: pinned items over budget) and "
                        "overflows; the item sources most often left out. Runs that are "
                        "structurally incomplete (a sequence gap, no end event, item rows "
                        "that disagree with the end event) are counted and named first.",
            epilog=_EXIT)
        parser.add_argument("--store", required=True, metavar="URL", help=STORE_HELP)
        parser.add_argument("--since", metavar="TIME",
                            help="only runs started at or after TIME (ISO 8601; no offset "
                                 "means UTC)")
        parser.add_argument("--until", metavar="TIME",
                            help="only runs started at or before TIME (ISO 8601)")
        parser.add_argument("--service", action="append", default=[], metavar="NAME",
                            help="only runs of this service (the Collector's ServiceName; "
                                 "repeatable)")
        parser.add_argument("--bucket", choices=["hour", "day", "week", "none"],
                            default="day", help="time bucket of the exclusion counts "
                                                "(default: day)")
        parser.add_argument("--top", type=int, default=10, metavar="N",
                            help="how many excluded sources to list (default 10)")
        parser.add_argument("--format", choices=["text", "json", "csv"], default="text")
        parser.add_argument("--table", choices=CSV_TABLES, default="exclusions",
                            help="with --format csv: which table (default exclusions)")
        parser.add_argument("--html", metavar="FILE",
                            help="also write an HTML page with charts to FILE")
        parser.add_argument("--strict", action="store_true",
                            help="exit 3 when any run is structurally incomplete")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        try:
            from ..store import fleet_stats, open_store  # noqa: PLC0415 - optional extra
        except ImportError:  # pragma: no cover - the extra brings it
            print("cupellation stats: --store needs the store extra: pip install "
                  "'cupellation[store]'", file=sys.stderr)
            return USAGE
        if args.top < 0:
            print(f"cupellation stats: --top {args.top}: must be >= 0", file=sys.stderr)
            return USAGE
        try:
            since = as_datetime(args.since, "since")
            until = as_datetime(args.until, "until")
            with open_store(args.store) as store:
                stats = fleet_stats(store, since=since, until=until,
                                    services=tuple(args.service), bucket=args.bucket,
                                    top=args.top)
        except CupelError as exc:
            print(f"cupellation stats: {safe(str(exc), 400)}", file=sys.stderr)
            return USAGE
        if args.html:
            from ._statspage import stats_page  # noqa: PLC0415 - only for --html

            try:
                Path(args.html).write_text(stats_page(stats), encoding="utf-8")
            except OSError as exc:
                print(f"cupellation stats: --html {safe(args.html)}: {exc.strerror}",
                      file=sys.stderr)
                return USAGE
            print(f"cupellation stats: wrote {safe(args.html)}", file=sys.stderr)
        if args.format == "json":
            sys.stdout.write(json.dumps(stats.to_dict(), indent=2) + "\n")
        elif args.format == "csv":
            sys.stdout.write(stats_csv(stats, args.table))
        else:
            _print_stats(stats)
        if stats.runs == 0:
            print("cupellation stats: no runs found", file=sys.stderr)
            return NOTHING_FOUND
        if args.strict and stats.incomplete_runs:
            print(f"cupellation stats: not whole: {stats.incomplete_runs} structurally "
                  "incomplete run(s) (--strict)", file=sys.stderr)
            return _NOT_WHOLE
        return OK


def headline(stats: FleetStats) -> str:
    """The first line: how many runs, how many incomplete, and that no digest was read."""
    causes = ", ".join(f"{n} {cause}" for cause, n in stats.incomplete_causes)
    return (f"{stats.runs} run(s): {stats.completed_runs} completed, {stats.failed_runs} "
            f"failed; {stats.incomplete_runs} structurally incomplete"
            + (f" ({causes})" if causes else "")
            + "; digests not checked (statistics are computed in SQL: use 'audit --store' "
              "to verify runs)"
            + (f"; {stats.trace_only_runs} run(s) only in otel_traces not counted (read them "
               "with 'audit --store')" if stats.trace_only_runs else ""))


def stats_cells(stats: FleetStats, bucket_format: str
                ) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Each table of the statistics (exclusions, utilization, failures, sources) as its
    column names and rows of text cells, as the terminal and the HTML page show them
    (``bucket_format``: how a bucket's start is written; "all" when not bucketed)."""
    return {
        "exclusions": (["bucket", "service", "reason", "kind", "count"],
                       [[e.bucket.strftime(bucket_format) if e.bucket else "all",
                         e.service, e.reason, e.kind, str(e.count)]
                        for e in stats.exclusions]),
        "utilization": (["service", "runs", "p50", "p90", "p99", "min", "max"],
                        [[u.service, str(u.runs), *(f"{v * 100:.1f}%" for v in
                                                    (u.p50, u.p90, u.p99, u.minimum,
                                                     u.maximum))]
                         for u in stats.utilization]),
        "failures": (["service", "error", "runs"],
                     [[f.service, f.error_type, str(f.runs)] for f in stats.failures]),
        "sources": (["source", "excluded", "top reason"],
                    [[s.source, str(s.count), s.top_reason] for s in stats.top_sources]),
    }


def _print_stats(stats: FleetStats) -> None:
    from rich.table import Table  # noqa: PLC0415 - rich is the cli extra's

    from ._logcmds import new_console  # noqa: PLC0415 - keeps the command's import light

    console = new_console()
    console.print(safe(headline(stats)), markup=False)
    console.print(f"Overflow events (Truncate): {stats.overflow_events}", markup=False)
    cells = stats_cells(stats, "%Y-%m-%d %H:%M")
    tables = [(title, *cells[name]) for name, title in (
        ("exclusions", "Exclusions"),
        ("utilization", "Budget utilisation (included / max tokens)"),
        ("failures", "Failed runs"), ("sources", "Sources most often left out"))]
    for title, columns, rows in tables:
        if not rows:
            continue
        table = Table(title=title)
        for index, column in enumerate(columns):
            table.add_column(column, justify="left" if index == 0 or not rows[0][index]
                             .replace(".", "").rstrip("%").isdigit() else "right")
        for row in rows:
            table.add_row(*(safe(cell) for cell in row))
        console.print(table)


STATS = _Stats()
