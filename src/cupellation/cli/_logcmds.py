"""``cupellation audit``, ``report`` and ``why``: past runs rebuilt from log files."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .._model import ContextBudget, ContextItem
from .._report import ExcludedItem, IncludedItem, SelectionReport
from ..events import RunStarted, content_digest
from ..exceptions import CupelError
from ..logs import LoggedRun, LogReader, ReadStats
from ..reasons import (
    CountCapExceeded,
    Deduplicated,
    NegativeTokens,
    PinnedOverride,
    reason_to_dict,
)
from ._analytics import NextQuestions, add_why_options, next_lines
from ._common import (
    NOT_WHOLE,
    CliError,
    Output,
    check_file_destination,
    console_class,
    describe,
    html_for_terminal,
    write_outputs,
)
from ._logread import (
    EXIT_CODES_HELP,
    NOTHING_FOUND,
    OK,
    READ_ERRORS,
    USAGE,
    UsageError,
    add_log_arguments,
    check_sources,
    open_reader,
    read_failure,
    safe,
    stats_lines,
    unreadable_sources,
)
from ._remote import add_remote_arguments, check_remote_arguments, fetch_runs
from ._sources import InputSource, close_sources, open_sources, read_whole
from ._summary import incomplete_headline

__all__ = ["AUDIT", "REPORT", "WHY"]

#: Utilisation histogram: 1% bins from 0% to 200%, and one for everything above.
_BINS = 201


def _fail(command: str, message: str) -> int:
    print(f"cupellation {command}: error: {safe(message)}", file=sys.stderr)
    return USAGE


def _console() -> Any:
    return console_class()(file=sys.stdout, highlight=False, markup=False, emoji=False,
                           soft_wrap=not sys.stdout.isatty())


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.isoformat().replace("+00:00", "Z")


def _reason_text(wire: Mapping[str, Any]) -> str:
    data = ", ".join(f"{k}={safe(str(v), 60)}" for k, v in wire.items() if k != "reason")
    return f"{wire['reason']}({data})" if data else str(wire["reason"])


def _read(command: str, args: argparse.Namespace,
          consume: Callable[[LoggedRun], object], **options: Any) -> ReadStats | int:
    """Feed every run in ``args.logs`` (within --since/--until) to ``consume``; the
    read's stats, or exit status 2 (one line said) when a source could not be read
    whole: a missing file, a corrupt or truncated gzip stream, a closed stdin."""
    reader: LogReader | None = None
    try:
        with open_reader(args, since=args.since, until=args.until, **options) as reader:
            for run in reader:
                consume(run)
            stats = reader.stats
    except UsageError as exc:
        return _fail(command, str(exc))
    except CupelError as exc:
        return _fail(command, describe(exc))
    except READ_ERRORS as exc:
        return _fail(command, read_failure(exc, reader.stats if reader else None))
    broken = unreadable_sources(stats)
    if broken is not None:
        return _fail(command, broken)
    return stats


# -- audit ------------------------------------------------------------------------------


class _Summary:
    """Streaming totals over runs: memory independent of how many runs there are."""

    def __init__(self) -> None:
        self.runs = self.complete = self.failed = 0
        self.candidates = self.included = self.excluded = 0
        self.included_tokens = self.excluded_tokens = 0
        self.reasons: Counter[str] = Counter()
        self.reason_tokens: Counter[str] = Counter()
        self.bins = [0] * (_BINS + 1)
        self.utilisation_sum = 0.0
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
            self.utilisation_sum += utilisation
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
                     "first_started_at": _when(self.first) if self.first else None,
                     "last_started_at": _when(self.last) if self.last else None},
            "candidates": {"considered": self.candidates, "included": self.included,
                           "excluded": self.excluded, "included_tokens": self.included_tokens,
                           "excluded_tokens": self.excluded_tokens},
            "exclusion_reasons": [
                {"reason": name, "count": n, "tokens": self.reason_tokens[name]}
                for name, n in sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))],
            "utilisation": {
                "runs": count,
                "mean": self.utilisation_sum / count if count else None,
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
            epilog=EXIT_CODES_HELP)
        add_log_arguments(parser)
        parser.add_argument("--since", metavar="TIME",
                            help="only runs started at or after TIME (ISO 8601; no offset "
                                 "means UTC)")
        parser.add_argument("--until", metavar="TIME",
                            help="only runs started at or before TIME (ISO 8601)")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        summary = _Summary()
        stats = _read("audit", args, summary.add)
        if isinstance(stats, int):
            return stats
        data = summary.to_dict(stats)
        if args.format == "json":
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            _print_audit(data, stats)
        if summary.runs == 0:
            print("cupellation audit: no runs found" + (
                " in that time window" if args.since or args.until else ""), file=sys.stderr)
            return NOTHING_FOUND
        return OK


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _print_audit(data: dict[str, Any], stats: ReadStats) -> None:
    from rich.table import Table  # noqa: PLC0415 - rich is the cli extra's

    console = _console()
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
    console.print(f"Lines: {stats.lines} read, {stats.records} records, "
                  f"{stats.other_lines} from other programs, {stats.damaged_lines} damaged")
    for line in stats_lines(stats):
        console.print(line)


# -- report ---------------------------------------------------------------------------


_REPORT_EXIT = (
    "exit status: 0 success; 1 nothing found (no run in the sources, or not the run "
    "--run names); 2 bad usage or input that cannot be read whole (one line on standard "
    "error); 3 the rebuilt report is incomplete (a gap in the events, no run_completed, "
    "...: the report is still shown, and one line on standard error says so; "
    "--allow-incomplete exits 0 for it); 130 interrupted; 141 standard output closed "
    "early."
)


class _Report:
    """``cupellation report LOG [--run RUN_ID] [--html FILE]``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "report", help="show one run's SelectionReport from logs or a trace file",
            description="Rebuild one run's SelectionReport from log files (or from a trace "
                        "file: OTLP/JSON lines with resourceSpans, or Jaeger JSON) and print "
                        "it as a table, or as the seeds' JSON with --format json. Without "
                        "--run, the last run read (a note on standard error says how many "
                        "there were). --html FILE also writes the run as one self-contained "
                        "HTML page ('-': the page on standard output instead).",
            epilog=_REPORT_EXIT)
        add_log_arguments(parser)
        parser.add_argument("--run", metavar="RUN_ID",
                            help="the run's id (default: the last run read)")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument("--html", metavar="FILE",
                            help="write the run's report as an HTML page (written whole, "
                                 "through a temporary file)")
        parser.add_argument("--allow-incomplete", action="store_true",
                            help="exit 0 for a rebuilt report that is incomplete (default: "
                                 "exit 3, with one line on standard error)")
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
                return _fail("report", broken)
        if found is None:
            what = "no run" if args.run is None else f"run {safe(args.run)} not"
            where = (f"in {stats.lines} line(s)" if stats is not None else
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
            if kinds == {"log", "trace"}:
                traces = ", ".join(s.name for s in sources if s.kind == "trace")
                raise UsageError(f"give log files or trace files, not both ({traces} "
                                 "holds traces)")
            if kinds == {"trace"}:
                found, count = _from_traces(sources, args.run)
                return found, count, None, None
            options = {} if args.run is None else {"run_id": args.run}
            with open_reader(args, [source.source for source in sources],
                             **options) as reader:
                for run in reader:
                    found, count = _Found(run.run_id, run.report, run.budget, run), count + 1
                    if args.run is not None:
                        break
                stats = reader.stats
            return found, count, stats, None
        except UsageError as exc:
            return _fail("report", str(exc))
        except CupelError as exc:
            return _fail("report", describe(exc))
        except READ_ERRORS as exc:
            return _fail("report", read_failure(exc, reader.stats if reader else None))
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
                return _fail("report", exc.message)
        if args.format == "json":
            sys.stdout.write(report.to_json(indent=2) + "\n")
        else:
            _print_report(run_id, report, found.logged, budget)
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
    runs, where = fetch_runs(args)
    if args.run is not None:
        runs = [run for run in runs if run[0] == args.run]
    if not runs:
        return None, 0, where
    return _Found(*runs[-1]), len(runs), where


@dataclass(frozen=True, slots=True)
class _Found:
    """The run ``report`` shows: its id, report, budget (when known) and, when it
    was read from logs, the logged run."""

    run_id: str
    report: SelectionReport
    budget: ContextBudget | None
    logged: LoggedRun | None = None


def _check_html_destination(path: str) -> None:
    try:
        check_file_destination("--html", Path(path))
    except CliError as exc:
        raise UsageError(exc.message) from None


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
            budget = next((event.budget for event in entry.events
                           if isinstance(event, RunStarted)), None)
            if run_id is not None:
                if entry.run_id == run_id:
                    return _Found(entry.run_id, entry.report, budget), 1
                continue
            count += 1
            last = _Found(entry.run_id, entry.report, budget)
    return last, count


def _print_report(run_id: str, report: SelectionReport, run: LoggedRun | None,
                  budget: ContextBudget | None = None) -> None:
    from rich.table import Table  # noqa: PLC0415 - rich is the cli extra's

    console = _console()
    headline = incomplete_headline(report)  # the loss first, with its cause and fix
    if headline is not None:
        console.print(headline)
    head = f"Run {safe(run_id)}"
    if run is not None and run.started is not None:
        budget = run.started.budget
        head += (f", started {_when(run.started_at)}; budget: max {budget.max_tokens}, "
                 f"target {budget.target_tokens}, output reserve {budget.output_reserve}")
    elif budget is not None:
        head += (f"; budget: max {budget.max_tokens}, target {budget.target_tokens}, "
                 f"output reserve {budget.output_reserve}")
    console.print(head)
    if run is not None and run.started is not None:
        pipeline = ", ".join(f"{k}={safe(str(v), 80)}" for k, v in run.started.pipeline.items())
        console.print(f"Pipeline: {pipeline}")
    used = sum(entry.item.tokens for entry in report.included)
    console.print(f"Selected {len(report.included)} of {report.total_candidates} candidates: "
                  f"{used} of {report.total_tokens_considered} tokens considered")
    counter = estimated_counter(report, None if run is None else run.started)
    if counter is not None:
        console.print(f"Token counts are estimates ({safe(counter)}), not exact counts")
    included = Table(title="Included, in placed order")
    for column in ("#", "score", "tokens", "kind", "reason", "content"):
        included.add_column(column, overflow="fold")
    for position, entry in enumerate(report.included):
        included.add_row(str(position), f"{entry.score:.4f}", _tokens_cell(entry.item),
                         safe(entry.item.kind.value, 20), safe(entry.reason.name),
                         safe(entry.item.content, 100))
    console.print(included)
    excluded = Table(title="Excluded, highest score first")
    for column in ("score", "tokens", "kind", "reason", "content"):
        excluded.add_column(column, overflow="fold")
    for left_out in report.excluded:
        excluded.add_row(f"{left_out.score:.4f}", _tokens_cell(left_out.item),
                         safe(left_out.item.kind.value, 20),
                         _reason_text(reason_to_dict(left_out.reason)),
                         safe(left_out.item.content, 100))
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


def _tokens_cell(item: ContextItem) -> str:
    """The tokens, and the original size of an item trimmed before selection."""
    if item.original_tokens is None or item.original_tokens == item.tokens:
        return str(item.tokens)
    return f"{item.tokens} (trimmed from {item.original_tokens:,})"


# -- why --------------------------------------------------------------------------------

_BEATEN_SHOWN = 5


def _beaten_by(entry: ExcludedItem, report: SelectionReport) -> dict[str, Any]:
    """What took the excluded item's place, as data."""
    reason = entry.reason

    def described(items: list[IncludedItem]) -> list[dict[str, Any]]:
        return [{"content": i.item.content, "score": i.score, "tokens": i.item.tokens,
                 "reason": i.reason.name} for i in items[:_BEATEN_SHOWN]]

    if isinstance(reason, PinnedOverride):
        pinned = [i for i in report.included if i.item.content == reason.displaced_by]
        return {"kind": "pinned", "count": 1, "tokens": sum(i.item.tokens for i in pinned),
                "items": described(pinned) or [{"content": reason.displaced_by}]}
    if isinstance(reason, Deduplicated):
        kept = [i for i in report.included if i.item.content == reason.deduplicated_against]
        return {"kind": "duplicate", "count": 1, "tokens": 0,
                "items": described(kept) or [{"content": reason.deduplicated_against}]}
    if isinstance(reason, NegativeTokens):
        return {"kind": "none", "count": 0, "tokens": 0, "items": []}
    higher = [i for i in report.included
              if i.reason.name == "Scored" and i.score >= entry.score]
    if isinstance(reason, CountCapExceeded):
        higher = [i for i in higher if i.item.kind == reason.kind]
    higher.sort(key=lambda i: -i.score)
    return {"kind": "same kind, higher score" if isinstance(reason, CountCapExceeded)
            else "higher score", "count": len(higher),
            "tokens": sum(i.item.tokens for i in higher), "items": described(higher)}


def _matches(run: LoggedRun, content: str | None, pattern: re.Pattern[str] | None
             ) -> list[IncludedItem | ExcludedItem]:
    capture = run.started.content_capture if run.started is not None else "full"
    wanted: set[str] = set()
    if content is not None:
        wanted.add(content)
        if capture == "hash":
            wanted.add(content_digest(content))
    original = content_digest(content) if content is not None else None
    found: list[IncludedItem | ExcludedItem] = []
    entries: list[IncludedItem | ExcludedItem] = [*run.report.included, *run.report.excluded]
    for entry in entries:
        text = entry.item.content
        if (content is not None and text in wanted) or (
                pattern is not None and pattern.search(text)) or (
                original is not None and original in _trimmed_digests(entry.item)):
            found.append(entry)
    return found


def _trimmed_digests(item: ContextItem) -> list[str]:
    """The digests of the originals an item was trimmed from (its ``trimmed`` record)."""
    record = item.metadata.get("trimmed")
    if not isinstance(record, tuple | list):
        return []
    return [entry.get("original_digest") for entry in record
            if hasattr(entry, "get") and isinstance(entry.get("original_digest"), str)]


class _Why:
    """``cupellation why LOG --content TEXT | --match REGEX``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "why", help="say why an item was or was not selected, run by run",
            description="For every run that considered a matching item: whether it was "
                        "included and, if not, its reason with data and what beat it (the "
                        "higher-scored items that took the budget, the pinned item that "
                        "displaced it, or the copy that was kept), and whether it was "
                        "trimmed before selection ('trimmed from 1,450 to 800 tokens'). "
                        "--content matches the whole content (also its sha256 digest in "
                        "runs logged with hash capture, and the original of a trimmed "
                        "item); --match searches it with a regular expression. For an "
                        "excluded item of a run logged at Full detail, it also says at what "
                        "larger budget it would have been included and, per --against, "
                        "whether another policy would have (or why the run cannot be "
                        "re-run).",
            epilog=EXIT_CODES_HELP)
        add_log_arguments(parser)
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--content", metavar="TEXT", help="the item's exact content")
        group.add_argument("--match", metavar="REGEX", help="a regular expression to search")
        parser.add_argument("--since", metavar="TIME", help="only runs started at or after TIME")
        parser.add_argument("--until", metavar="TIME", help="only runs started at or before TIME")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        add_why_options(parser)
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        try:
            questions = NextQuestions(args)
        except UsageError as exc:
            return _fail("why", str(exc))
        pattern = None
        if args.match is not None:
            try:
                pattern = re.compile(args.match)
            except (re.error, OverflowError, RecursionError, ValueError) as exc:
                return _fail("why", f"--match is not a valid regular expression: {exc}")
        answers: list[dict[str, Any]] = []

        def consider(run: LoggedRun) -> None:
            for entry in _matches(run, args.content, pattern):
                answer = _answer(run, entry)
                if isinstance(entry, ExcludedItem):
                    answer["next"] = questions.answer(run, entry)
                answers.append(answer)

        stats = _read("why", args, consider, keep_candidates=True)
        if isinstance(stats, int):
            return stats
        if args.format == "json":
            sys.stdout.write(json.dumps({"matches": answers,
                                         "lines": {"read": stats.lines,
                                                   "damaged": stats.damaged_lines}},
                                        indent=2) + "\n")
        else:
            _print_why(answers, stats)
        if not answers:
            print("cupellation why: no run considered a matching item", file=sys.stderr)
            return NOTHING_FOUND
        return OK


def _answer(run: LoggedRun, entry: IncludedItem | ExcludedItem) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "run_id": run.run_id, "started_at": _when(run.started_at) if run.started_at else None,
        "content": entry.item.content, "tokens": entry.item.tokens, "score": entry.score,
        "included": isinstance(entry, IncludedItem), "reason": reason_to_dict(entry.reason),
        "run_complete": run.is_complete,
    }
    if entry.item.original_tokens is not None:
        answer["original_tokens"] = entry.item.original_tokens
    counter = estimated_counter(run.report, run.started)
    if counter is not None:
        answer["token_estimates"] = counter
    if isinstance(entry, IncludedItem):
        answer["position"] = run.report.included.index(entry)
    else:
        answer["beaten_by"] = _beaten_by(entry, run.report)
    return answer


def trimmed_note(tokens: int, original: int | None) -> str:
    """``trimmed from 1,450 to 800 tokens`` for an item trimmed before selection."""
    if original is None or original == tokens:
        return ""
    return f"trimmed from {original:,} to {tokens:,} tokens"


def estimated_counter(report: SelectionReport, started: RunStarted | None = None
                      ) -> str | None:
    """The estimating counter of a run, or None when its counts are not known to be
    estimates: what its ``run_started`` records (``token_counter`` with
    ``token_estimates``), else what its items name (metadata ``chat.tokens``, such as
    ``estimate:chars/4``, for runs logged before ``run_started`` carried it)."""
    if started is not None and started.token_estimates:
        return started.token_counter or "estimate"
    items = [entry.item for entry in report.included] + [entry.item for entry in report.excluded]
    for item in items:
        counter = item.metadata.get("chat.tokens")
        if isinstance(counter, str) and counter.startswith("estimate"):
            return counter
    return None


def _print_why(answers: list[dict[str, Any]], stats: ReadStats) -> None:
    console = _console()
    for answer in answers:
        where = f"run {safe(answer['run_id'])} (started {answer['started_at'] or '-'})"
        trimmed = trimmed_note(answer["tokens"], answer.get("original_tokens"))
        item = (f"{safe(answer['content'], 80)!s} [{answer['tokens']} tokens"
                f"{', ' + trimmed if trimmed else ''}, score {answer['score']:.4f}]")
        if answer["included"]:
            console.print(f"{where}: INCLUDED at position {answer['position']} as "
                          f"{answer['reason']['reason']}: {item}")
            continue
        console.print(f"{where}: EXCLUDED, {_reason_text(answer['reason'])}: {item}")
        beaten = answer["beaten_by"]
        if beaten["kind"] == "pinned":
            console.print(f"    displaced by the pinned item: "
                          f"{safe(str(beaten['items'][0]['content']), 80)}")
        elif beaten["kind"] == "duplicate":
            console.print(f"    a copy was kept: {safe(str(beaten['items'][0]['content']), 80)}")
        elif beaten["count"]:
            console.print(f"    {beaten['count']} included item(s) scored at least as high "
                          f"({beaten['kind']}), taking {beaten['tokens']} tokens; the top:")
            for other in beaten["items"]:
                console.print(f"      score {other['score']:.4f}  {other['tokens']:>6} tok  "
                              f"{safe(str(other['content']), 70)}")
        for line in next_lines(answer["next"]):
            console.print(f"    {line}")
        if not answer["run_complete"]:
            console.print("    (this run's record is incomplete: see 'cupellation report')")
        if answer.get("token_estimates"):
            console.print(f"    (token counts in this run are estimates: "
                          f"{safe(answer['token_estimates'])})")
    for line in stats_lines(stats):
        console.print(line)


AUDIT = _Audit()
REPORT = _Report()
WHY = _Why()
