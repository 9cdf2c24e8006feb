"""``cupellation store load FILE... --into URL``: audit logs and event files into a fleet
store (the Collector's ``otel_logs``) and OTLP/JSON trace files into its ``otel_traces``,
read by ClickHouse itself; ``cupellation store accelerate --into URL``: cupellation's
indexes and projections added to a fleet's own Collector tables."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from ..exceptions import CupelError
from ._common import NOT_WHOLE
from ._logcmds import fail
from ._logread import OK, is_trace_file, safe
from ._storeread import STORE_HELP, is_otlp_lines

__all__ = ["STORE"]

_EXIT = ("exit status: 0 loaded (lines and spans already in the store are skipped: "
         "loading a file again adds nothing); 2 bad usage, a file that cannot be read, a "
         "store that cannot be opened (one line on standard error); 3 with --strict, a "
         "damaged line; 130 interrupted; 141 standard output closed early.")
_ACCEL_EXIT = ("exit status: 0 added (or already there: running it again changes nothing); "
               "2 bad usage, a store that cannot be opened or altered (one line on "
               "standard error); 130 interrupted.")


class _Store:
    """``cupellation store load``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "store", help="load logs and traces into a fleet store (ClickHouse: embedded "
                          "chDB or a server)",
            description="The fleet store: the OpenTelemetry Collector's otel_logs and "
                        "otel_traces tables in ClickHouse, embedded (chdb:///dir) or on a "
                        "server. 'audit', 'report', 'why', 'replay' and 'diff' read it with "
                        "--store URL.", epilog=_EXIT)
        actions = parser.add_subparsers(dest="store_action", metavar="ACTION")
        load = actions.add_parser(
            "load", help="load audit logs, event files and OTLP/JSON traces",
            description="Load audit logs and event files (JSON lines, plain or gzip) into "
                        "the store's otel_logs, one row per event, and OTLP/JSON trace "
                        "files (one resourceSpans object per line, as 'export --to file' "
                        "and the Collector's file exporter write them) into otel_traces, "
                        "one row per span, as the Collector's clickhouse exporter writes "
                        "them. ClickHouse reads the files itself (file() on chDB; streamed "
                        "through the client to a server). Lines already in the store (same "
                        "run and seq) and spans already there (same trace and span id) are "
                        "skipped.", epilog=_EXIT)
        load.add_argument("files", nargs="+", metavar="FILE",
                          help="audit logs, event files or OTLP/JSON trace files")
        load.add_argument("--into", required=True, metavar="URL", help=STORE_HELP)
        load.add_argument("--service", default="", metavar="NAME",
                          help="the ServiceName of records that name none")
        load.add_argument("--strict", action="store_true",
                          help="exit 3 when a line is damaged")
        load.add_argument("--format", choices=["text", "json"], default="text")
        load.add_argument("--no-progress", action="store_true",
                          help="never show a progress bar (it shows only on a terminal)")
        accelerate = actions.add_parser(
            "accelerate", help="add cupellation's indexes and projections to the tables",
            description="Add cupellation's data-skipping indexes and aggregate projections "
                        "to the store's otel_logs (and the run id's index to otel_traces) "
                        "where absent: a fleet's own Collector tables lack them, which "
                        "makes 'stats', 'why --match' and reading one run scan the table. "
                        "Columns are never added or changed. Without --materialize only "
                        "parts written later get them.", epilog=_ACCEL_EXIT)
        accelerate.add_argument("--into", required=True, metavar="URL", help=STORE_HELP)
        accelerate.add_argument("--materialize", action="store_true",
                                help="also build them for the rows already stored (a "
                                     "mutation that rewrites every part: minutes on a "
                                     "large table; waited for)")
        accelerate.add_argument("--format", choices=["text", "json"], default="text")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        action = getattr(args, "store_action", None)
        if action == "accelerate":
            return _accelerate(args)
        if action != "load":
            return fail("store", "an action is required: load or accelerate (see "
                                 "'cupellation store --help')")
        for path in args.files:
            if not os.path.isfile(path):
                what = ("no such file" if not os.path.exists(path)
                        else "not a regular file (ClickHouse reads the file itself)")
                return fail("store load", f"cannot read {safe(path)}: {what}")
            if is_trace_file(path) and not is_otlp_lines(path):
                return fail("store load", f"{safe(path)} holds traces that are not OTLP/JSON "
                                          "lines (one resourceSpans object per line): only "
                                          "those load into otel_traces")
        try:
            from ..store import open_store  # noqa: PLC0415 - the store extra is optional
        except ImportError:  # pragma: no cover - the extra brings it
            return fail("store load", "the store needs: pip install 'cupellation[store]'")
        show = not args.no_progress and sys.stderr.isatty() and sys.stdout.isatty()
        try:
            with open_store(args.into) as store, _progress(show, len(args.files)) as tick:
                stats = store.load(args.files, service=args.service, progress=tick)
        except CupelError as exc:
            return fail("store load", str(exc))
        except OSError as exc:
            return fail("store load", f"cannot read: {exc.strerror or exc}")
        data = stats.to_dict()
        if args.format == "json":
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            print(f"loaded {stats.loaded} event(s), skipped {stats.skipped} already stored, "
                  f"{stats.damaged} damaged line(s), {stats.other_lines} from other "
                  f"programs, {stats.blank_lines} blank; {stats.runs} run(s) in "
                  f"{len(stats.sources)} file(s) into {safe(args.into)}")
            if stats.spans_loaded or stats.spans_skipped:
                print(f"loaded {stats.spans_loaded} span(s) into otel_traces, skipped "
                      f"{stats.spans_skipped} already stored")
            for line in data["damaged_lines"][:10]:
                print(f"  {safe(line)}")
            if stats.damaged > 10:
                print(f"  ... and {stats.damaged - 10} more")
        if args.strict and stats.damaged:
            print(f"cupellation store load: not whole: {stats.damaged} damaged line(s) "
                  "(--strict)", file=sys.stderr)
            return NOT_WHOLE
        return OK


def _accelerate(args: argparse.Namespace) -> int:
    """``store accelerate --into URL``: the store's ``add_accelerators``."""
    try:
        from ..store import open_store  # noqa: PLC0415 - the store extra is optional
    except ImportError:  # pragma: no cover - the extra brings it
        return fail("store accelerate", "the store needs: pip install 'cupellation[store]'")
    try:
        with open_store(args.into) as store:
            statements = store.add_accelerators(materialize=args.materialize)
    except CupelError as exc:
        return fail("store accelerate", str(exc))
    if args.format == "json":
        sys.stdout.write(json.dumps({"store": args.into, "materialized": args.materialize,
                                     "statements": statements}, indent=2) + "\n")
    else:
        built = " and built for the rows stored" if args.materialize else ""
        print(f"{safe(args.into)}: cupellation's indexes and projections are in place "
              f"({len(statements)} statement(s), each a no-op when already done){built}")
    return OK


class _NoProgress:
    def __enter__(self) -> Callable[[Any], None]:
        return lambda stats: None

    def __exit__(self, *exc: object) -> None:
        return None


class _Bar:
    """A rich progress bar over the files loaded (on stderr)."""

    def __init__(self, total: int) -> None:
        from rich.console import Console  # noqa: PLC0415 - only on a terminal
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # noqa: PLC0415

        self.progress = Progress(TextColumn("loading files"), BarColumn(), MofNCompleteColumn(),
                                 console=Console(stderr=True), transient=True)
        self.task = self.progress.add_task("load", total=total)

    def __enter__(self) -> Callable[[Any], None]:
        self.progress.start()

        def tick(stats: Any) -> None:
            self.progress.update(self.task, completed=len(stats.sources))
        return tick

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def _progress(show: bool, total: int) -> _NoProgress | _Bar:
    return _Bar(total) if show else _NoProgress()


STORE = _Store()
