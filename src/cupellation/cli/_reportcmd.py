"""``cupellation report``: one run's SelectionReport, rebuilt from log files,
trace files or a backend, as a table, JSON or an HTML page."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._model import ContextBudget
from .._report import SelectionReport
from ..events import RunStarted
from ..exceptions import CupelError
from ..logs import LoggedRun, LogReader, ReadStats
from ._common import (
    NOT_WHOLE,
    CliError,
    Output,
    check_file_destination,
    describe,
    html_for_terminal,
    write_outputs,
)
from ._logcmds import estimated_counter, fail, new_console, when_text
from ._logread import (
    NOTHING_FOUND,
    OK,
    READ_ERRORS,
    UsageError,
    add_log_arguments,
    check_sources,
    open_reader,
    read_failure,
    read_words,
    safe,
    stats_lines,
    unreadable_sources,
)
from ._remote import add_remote_arguments, check_remote_arguments, fetch_runs
from ._runfilters import add_run_filters, filters_given
from ._sources import InputSource, close_sources, open_sources, read_whole
from ._summary import entry_tables, incomplete_headline

__all__ = ["REPORT"]


_REPORT_EXIT = (
    "exit status: 0 success; 1 nothing found (no run in the sources, or not the run "
    "--run names); 2 bad usage or input that cannot be read whole (one line on standard "
    "error: also a refused redirect, an unreachable or malformed --from server, or a "
    "--from bound reached before any run was read); 3 the rebuilt report is incomplete "
    "(a gap in the events, no run_completed, a run not signed with "
    "CUPELLATION_DIGEST_KEY when it is set, a signed run read without it, ...: the "
    "report is still shown, and one line on standard error says so; --allow-incomplete "
    "exits 0 for it), or a --from "
    "bound (--timeout, --max-body-bytes, --max-requests) was reached after part of the "
    "data was read (what was read is shown; one line says what is missing); 130 "
    "interrupted; 141 standard output closed early."
)


class _Report:
    """``cupellation report LOG [--run RUN_ID] [--html FILE]``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "report", help="show one run's SelectionReport from logs or a trace file",
            description="Rebuild one run's SelectionReport from log files (or from a trace "
                        "file: OTLP/JSON lines with resourceSpans, or Jaeger JSON) and print "
                        "it as a table, or as the wire format's JSON with --format json. Without "
                        "--run, the last run read (a note on standard error says how many "
                        "there were; with --store, the newest run). --html FILE also writes "
                        "the run as one self-contained HTML page ('-': the page on standard "
                        "output instead).",
            epilog=_REPORT_EXIT)
        add_log_arguments(parser, service=False)
        parser.add_argument("--run", metavar="RUN_ID",
                            help="the run's id (default: the last run read)")
        add_run_filters(parser)
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument("--html", metavar="FILE",
                            help="write the run's report as an HTML page (written whole, "
                                 "through a temporary file)")
        parser.add_argument("--allow-incomplete", action="store_true",
                            help="exit 0 for a rebuilt report that is incomplete (default: "
                                 "exit 3, with one line on standard error); a --from fetch "
                                 "cut short by one of its bounds still exits 3")
        add_remote_arguments(parser)
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        searched = self._search(args)
        if isinstance(searched, int):
            return searched
        found, count, stats, remote = searched
        if stats is not None:
            broken = unreadable_sources(stats)
            if broken is not None:
                return fail("report", broken)
        if found is None:
            what = "no run" if args.run is None else f"run {safe(args.run)} not"
            where = (f"in {read_words(stats)}" if stats is not None else
                     remote if remote is not None else "in the trace file(s)")
            print(f"cupellation report: {what} found {where}", file=sys.stderr)
            if stats is not None:
                for line in stats_lines(stats):
                    print(line, file=sys.stderr)
            return NOTHING_FOUND
        return self._show(args, found, count)

    @staticmethod
    def _search(args: argparse.Namespace
                ) -> int | tuple[_Found | None, int, ReadStats | None, str | None]:
        """The run to show (the last read, or ``--run``), how many runs were read, the
        log reader's statistics and the backend asked; or the exit status of a failure
        (its one line printed)."""
        found: _Found | None = None
        count = 0
        sources: list[InputSource] = []
        stats: ReadStats | None = None
        reader: LogReader | None = None
        remote: str | None = None
        try:
            if args.html not in (None, "-"):
                _check_html_destination(args.html)
            check_remote_arguments(args)
            if args.from_backend is not None:
                found, count, remote = _from_backend(args)
                return found, count, None, remote
            check_sources(args.logs)
            sources = open_sources(args.logs)
            kinds = {source.kind for source in sources}
            if kinds & {"report", "trace"} and filters_given(args):
                raise UsageError("--session, --user, --conversation, --reason, --kind and "
                                 "--policy choose among logged runs: give log files or "
                                 "--store")
            if kinds == {"report"}:  # a SelectionReport as written (the demo's report.json)
                found, count = _from_reports(sources)
                return found, count, None, None
            if len(kinds) > 1:
                named = ", ".join(f"{s.name} holds {s.kind}s" for s in sources)
                raise UsageError(f"give log files, trace files or report files, one kind "
                                 f"at a time ({named})")
            if kinds == {"trace"}:
                found, count = _from_traces(sources, args.run)
                return found, count, None, None
            options = {} if args.run is None else {"run_id": args.run}
            with open_reader(args, [source.source for source in sources],
                             **options) as reader:
                for run in reader:
                    found, count = _Found(run.run_id, run.report, run.budget, run), count + 1
                    # A store gives its runs newest first: the first is the latest.
                    if args.run is not None or args.store is not None:
                        break
                stats = reader.stats
            return found, count, stats, None
        except UsageError as exc:
            return fail("report", str(exc))
        except CupelError as exc:
            return fail("report", describe(exc))
        except READ_ERRORS as exc:
            return fail("report", read_failure(exc, reader.stats if reader else None))
        finally:
            close_sources(sources)

    def _show(self, args: argparse.Namespace, found: _Found, count: int) -> int:
        """Print the report (text, JSON or HTML as asked); the command's exit status."""
        run_id, report, budget = found.run_id, found.report, found.budget
        if args.html is not None:
            from ..html import render_html  # noqa: PLC0415

            page = render_html(report, budget=budget, title=f"cupellation run {run_id}")
            if args.html == "-":
                sys.stdout.write(html_for_terminal(page))
                sys.stdout.flush()
                return self._status(args, found, count)
            try:
                write_outputs([Output(Path(args.html), page, "html")])
            except CliError as exc:
                return fail("report", exc.message)
            if args.format != "json":  # the page is the answer; the table is not repeated
                headline = incomplete_headline(report)
                if headline is not None:
                    print(safe(headline, 400))
                print(f"Wrote {safe(args.html)}: the report of run {safe(run_id)} as a web "
                      "page (open it in a browser)")
                sys.stdout.flush()
                return self._status(args, found, count)
        if args.format == "json":
            sys.stdout.write(report.to_json(indent=2) + "\n")
        else:
            _print_report(run_id, report, found.logged, budget, found.started)
        sys.stdout.flush()
        return self._status(args, found, count)

    @staticmethod
    def _status(args: argparse.Namespace, found: _Found, count: int) -> int:
        """Once the report is out: a note when several runs were read, then 0 for a
        complete report, 3 (one line on stderr) for an incomplete one unless
        --allow-incomplete."""
        if args.run is None and count > 1:
            print(f"cupellation report: {count} runs read; showed the last, "
                  f"{safe(found.run_id)} (choose one with --run)", file=sys.stderr)
        if found.shortfall is not None:
            # Not whole whatever --allow-incomplete says: the runs not read are not
            # in this report's incomplete, so nothing else would say they are missing.
            print(f"cupellation report: not whole: {safe(found.shortfall, 400)}",
                  file=sys.stderr)
            return NOT_WHOLE
        report = found.report
        if report.is_complete or args.allow_incomplete:
            return OK
        problems = len(report.incomplete)
        print(f"cupellation report: the rebuilt report is incomplete ({problems} "
              f"problem(s): {safe(report.incomplete[0], 200)}{'; ...' if problems > 1 else ''}"
              "); --allow-incomplete exits 0 for it", file=sys.stderr)
        return NOT_WHOLE


def _from_backend(args: argparse.Namespace) -> tuple[_Found | None, int, str]:
    """The run ``--run`` names (without it: the last) among those fetched with --from,
    how many runs were fetched, and where they were looked for."""
    fetched = fetch_runs(args)
    runs = fetched.runs
    if args.run is not None:
        runs = [run for run in runs if run[0] == args.run]
    if not runs:
        return None, 0, fetched.where
    run_id, report, budget, started = runs[-1]
    return (_Found(run_id, report, budget, started=started, shortfall=fetched.shortfall),
            len(runs), fetched.where)


@dataclass(frozen=True, slots=True)
class _Found:
    """The run ``report`` shows: its id, report, budget (when known) and, when it
    was read from logs, the logged run."""

    run_id: str
    report: SelectionReport
    budget: ContextBudget | None
    logged: LoggedRun | None = None
    #: Set when a bound of --from's fetch stopped it: what is missing, in one line.
    shortfall: str | None = None
    started: RunStarted | None = None


def _check_html_destination(path: str) -> None:
    try:
        check_file_destination("--html", Path(path))
    except CliError as exc:
        raise UsageError(exc.message) from None


def _from_reports(sources: list[InputSource]) -> tuple[_Found | None, int]:
    """The last of the SelectionReport files given (named by its file: a report holds
    no run id), and how many were read."""
    last: _Found | None = None
    for source in sources:
        try:
            report = SelectionReport.from_json(read_whole(source).decode("utf-8"))
        except (CupelError, ValueError, RecursionError) as exc:
            raise UsageError(f"cannot read the report file {safe(source.name)}: "
                             f"{describe(exc) if isinstance(exc, CupelError) else exc}"
                             ) from None
        last = _Found(f"(from {source.name})", report, None)
    return last, len(sources)


def _from_traces(sources: list[InputSource], run_id: str | None
                 ) -> tuple[_Found | None, int]:
    """The run ``run_id`` (without it: the last run) in trace files, and how many
    runs were read."""
    from ..otel import read_trace  # noqa: PLC0415 - only for trace files

    last: _Found | None = None
    count = 0
    for source in sources:
        data = read_whole(source)
        try:
            runs = read_trace(data)
        except CupelError as exc:
            raise UsageError(f"cannot read the trace file {source.name}: "
                             f"{describe(exc)}") from None
        except (ValueError, RecursionError) as exc:
            raise UsageError(f"cannot read the trace file {source.name}: "
                             f"{type(exc).__name__}: {exc}") from None
        for entry in runs:
            started = next((event for event in entry.events
                            if isinstance(event, RunStarted)), None)
            budget = None if started is None else started.budget
            if run_id is not None:
                if entry.run_id == run_id:
                    return _Found(entry.run_id, entry.report, budget, started=started), 1
                continue
            count += 1
            last = _Found(entry.run_id, entry.report, budget, started=started)
    return last, count


def _print_report(run_id: str, report: SelectionReport, run: LoggedRun | None,
                  budget: ContextBudget | None = None,
                  started: RunStarted | None = None) -> None:
    console = new_console()
    if started is None and run is not None:
        started = run.started
    held = report.total_candidates
    announced = None if started is None else started.candidate_count
    headline = incomplete_headline(report)  # the loss first, with its cause and fix
    if headline is not None and announced is not None and held * 2 < announced:
        # One first line: that most of the run is missing, then the loss's cause and fix.
        headline = (f"INCOMPLETE: most of this run is missing (the report holds {held:,} "
                    f"of the {announced:,} candidates the run announced): "
                    + headline.split(": ", 2)[-1])
    if headline is not None:
        console.print(headline)
    head = f"Run {safe(run_id)}"
    if run is not None and run.started is not None:
        budget = run.started.budget
        head += (f", started {when_text(run.started_at)}; budget: max {budget.max_tokens}, "
                 f"target {budget.target_tokens}, output reserve {budget.output_reserve}")
    elif budget is not None:
        head += (f"; budget: max {budget.max_tokens}, target {budget.target_tokens}, "
                 f"output reserve {budget.output_reserve}")
    console.print(head)
    if run is not None and run.started is not None:
        pipeline = ", ".join(f"{k}={safe(str(v), 80)}" for k, v in run.started.pipeline.items())
        console.print(f"Pipeline: {pipeline}")
    _print_totals(console, report, started)
    counter = estimated_counter(report, None if run is None else run.started)
    if counter is not None:
        console.print(f"Token counts are estimates ({safe(counter)}), not exact counts")
    included, excluded = entry_tables(report, content_width=100)
    console.print(included)
    console.print(excluded)
    stages = ", ".join(f"{event.stage} {event.duration_ms:.3f} ms ({event.item_count} in)"
                       for event in report.events)
    console.print(f"Stages (ms, items in): {stages or '-'}")
    for shortfall in report.count_requirement_shortfalls:
        console.print(f"Count shortfall: {safe(shortfall.kind.value)} required "
                      f"{shortfall.required_count}, got {shortfall.satisfied_count}")
    if report.overflow is not None:
        console.print(f"Overflow: {report.overflow.tokens_over_budget} tokens over budget")
    if report.incomplete:
        console.print("Incomplete:")
        for problem in report.incomplete:
            console.print(f"  - {safe(problem, 300)}")


def _print_totals(console: Any, report: SelectionReport, started: RunStarted | None) -> None:
    """The totals: over the items the report holds (the specification's), and, when the
    report is not whole, what the run announced, on a line of its own."""
    used = sum(entry.item.tokens for entry in report.included)
    if report.is_complete:
        console.print(f"Selected {len(report.included)} of {report.total_candidates} "
                      f"candidates: {used} of {report.total_tokens_considered} tokens "
                      "considered")
        return
    console.print(f"In this report (incomplete): {len(report.included):,} selected and "
                  f"{len(report.excluded):,} left out of the {report.total_candidates:,} "
                  f"candidates it holds; tokens over those items: {used:,} selected, "
                  f"{report.total_tokens_considered:,} in all")
    if started is not None:
        console.print(f"Announced by the run: {started.candidate_count:,} candidates, "
                      f"{started.candidate_tokens:,} tokens")


REPORT = _Report()
