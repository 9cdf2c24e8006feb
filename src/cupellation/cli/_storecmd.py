"""``cupellation store load FILE... --into URL``: audit logs and event files into a fleet
store (the Collector's ``otel_logs``), read by ClickHouse itself."""

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
from ._storeread import STORE_HELP

__all__ = ["STORE"]

_EXIT = ("exit status: 0 loaded (lines already in the store are skipped: loading a file "
         "again adds nothing); 2 bad usage, a file that cannot be read, a store that "
         "cannot be opened (one line on standard error); 3 with --strict, a damaged line; "
         "130 interrupted; 141 standard output closed early.")


class _Store:
    """``cupellation store load``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "store", help="load logs into a fleet store (ClickHouse: embedded chDB or a "
                          "server)",
            description="The fleet store: the OpenTelemetry Collector's otel_logs and "
                        "otel_traces tables in ClickHouse, embedded (chdb:///dir) or on a "
                        "server. 'audit', 'report', 'why', 'replay' and 'diff' read it with "
                        "--store URL.", epilog=_EXIT)
        actions = parser.add_subparsers(dest="store_action", metavar="ACTION")
        load = actions.add_parser(
            "load", help="load audit logs and event files",
            description="Load audit logs and event files (JSON lines, plain or gzip) into "
                        "the store's otel_logs, one row per event as the Collector's "
                        "clickhouse exporter writes it. ClickHouse reads the files itself "
                        "(file() on chDB; streamed through the client to a server). Lines "
                        "already in the store (same run and seq) are skipped.",
            epilog=_EXIT)
        load.add_argument("files", nargs="+", metavar="FILE", help="audit logs or event files")
        load.add_argument("--into", required=True, metavar="URL", help=STORE_HELP)
        load.add_argument("--service", default="", metavar="NAME",
                          help="the ServiceName of records that name none")
        load.add_argument("--strict", action="store_true",
                          help="exit 3 when a line is damaged")
        load.add_argument("--format", choices=["text", "json"], default="text")
        load.add_argument("--no-progress", action="store_true",
                          help="never show a progress bar (it shows only on a terminal)")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        if getattr(args, "store_action", None) != "load":
            return fail("store", "an action is required: load (see 'cupellation store "
                                 "--help')")
        for path in args.files:
            if not os.path.isfile(path):
                what = ("no such file" if not os.path.exists(path)
                        else "not a regular file (ClickHouse reads the file itself)")
                return fail("store load", f"cannot read {path}: {what}")
            if is_trace_file(path):
                return fail("store load", f"{path} holds traces: loading OTLP/JSON traces "
                                          "into otel_traces is not supported yet; load logs")
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
            for line in data["damaged_lines"][:10]:
                print(f"  {safe(line)}")
            if stats.damaged > 10:
                print(f"  ... and {stats.damaged - 10} more")
        if args.strict and stats.damaged:
            print(f"cupellation store load: not whole: {stats.damaged} damaged line(s) "
                  "(--strict)", file=sys.stderr)
            return NOT_WHOLE
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
