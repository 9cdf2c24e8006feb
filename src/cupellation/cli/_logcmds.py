"""``cupellation audit``, ``report`` and ``why``: past runs rebuilt from log files."""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from .._model import ContextBudget
from .._report import ExcludedItem, IncludedItem, SelectionReport, build_report
from ..events import PipelineEvent, RunStarted, content_digest
from ..logs import LoggedRun, ReadStats
from ..reasons import (
    CountCapExceeded,
    Deduplicated,
    NegativeTokens,
    PinnedOverride,
    reason_to_dict,
)
from ._common import (
    CliError,
    Output,
    check_file_destination,
    console_class,
    html_for_terminal,
    write_outputs,
)
from ._logread import (
    EXIT_CODES_HELP,
    NOTHING_FOUND,
    OK,
    USAGE,
    UsageError,
    add_log_arguments,
    is_trace_file,
    open_reader,
    safe,
    stats_lines,
)

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
        try:
            with open_reader(args, since=args.since, until=args.until) as reader:
                for run in reader:
                    summary.add(run)
                stats = reader.stats
        except UsageError as exc:
            return _fail("audit", str(exc))
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
            epilog=EXIT_CODES_HELP)
        add_log_arguments(parser)
        parser.add_argument("--run", metavar="RUN_ID",
                            help="the run's id (default: the last run read)")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument("--html", metavar="FILE",
                            help="write the run's report as an HTML page (written whole, "
                                 "through a temporary file)")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        traces = [path for path in args.logs if is_trace_file(path)]
        budget: ContextBudget | None = None
        try:
            if args.html not in (None, "-"):
                _check_html_destination(args.html)
            if traces:
                found = _from_traces(traces, args.run)
                started = None
                if found is not None:
                    run_id, report, budget, count = found
            else:
                with open_reader(args, **({} if args.run is None else {"run_id": args.run})
                                 ) as reader:
                    run, count = None, 0
                    for candidate in reader:
                        run, count = candidate, count + 1
                        if args.run is not None:
                            break
                    stats = reader.stats
                if run is None:
                    what = "no run" if args.run is None else f"run {safe(args.run)} not"
                    print(f"cupellation report: {what} found in {stats.lines} line(s)",
                          file=sys.stderr)
                    for line in stats_lines(stats):
                        print(line, file=sys.stderr)
                    return NOTHING_FOUND
                run_id, report, started, budget = run.run_id, run.report, run, run.budget
                found = (run_id, report, budget, count)
        except UsageError as exc:
            return _fail("report", str(exc))
        if found is None:
            what = "no run" if args.run is None else f"run {safe(args.run)} not"
            print(f"cupellation report: {what} found in the trace file", file=sys.stderr)
            return NOTHING_FOUND
        if args.run is None and count > 1:
            print(f"cupellation report: {count} runs read; showing the last, "
                  f"{safe(run_id)} (choose one with --run)", file=sys.stderr)
        if args.html is not None:
            from ..html import render_html  # noqa: PLC0415

            page = render_html(report, budget=budget, title=f"cupellation run {run_id}")
            if args.html == "-":
                sys.stdout.write(html_for_terminal(page))
                return OK
            try:
                write_outputs([Output(Path(args.html), page, "html")])
            except CliError as exc:
                return _fail("report", exc.message)
        if args.format == "json":
            sys.stdout.write(report.to_json(indent=2) + "\n")
        else:
            _print_report(run_id, report, started, budget)
        return OK


def _check_html_destination(path: str) -> None:
    try:
        check_file_destination("--html", Path(path))
    except CliError as exc:
        raise UsageError(exc.message) from None


def _budget_of(entry: Any) -> ContextBudget | None:
    for event in getattr(entry, "events", ()) or ():
        if isinstance(event, RunStarted):
            return event.budget
    return None


def _from_traces(paths: list[str], run_id: str | None
                 ) -> tuple[str, SelectionReport, ContextBudget | None, int] | None:
    """The run's id, report, budget (when known), and how many runs were read, from
    trace files, through ``cupellation.otel.read_trace_file``. Without ``run_id``: the
    last run."""
    try:
        otel = importlib.import_module("cupellation.otel")  # only for trace files
    except ImportError as exc:
        raise UsageError(f"cannot read trace files: cupellation.otel is not available "
                         f"({exc})") from None
    reader = getattr(otel, "read_trace_file", None)
    if reader is None:
        raise UsageError("cannot read trace files: this version's cupellation.otel has no "
                         "read_trace_file")
    last: tuple[str, SelectionReport, ContextBudget | None, int] | None = None
    count = 0
    for path in paths:
        try:
            result = reader(path)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read the trace file {path}: {exc}") from None
        if run_id is not None:
            report = _report_in(result, run_id)
            if report is not None:
                budget = next((_budget_of(entry) for entry in _entries(result)
                               if getattr(entry, "run_id", None) == run_id), None)
                return run_id, report, budget, 1
            continue
        for entry in _entries(result):
            report = getattr(entry, "report", None)
            found_id = getattr(entry, "run_id", None)
            if isinstance(report, SelectionReport) and isinstance(found_id, str):
                count += 1
                last = (found_id, report, _budget_of(entry), count)
    return last


def _entries(result: Any) -> list[Any]:
    if isinstance(result, SelectionReport | Mapping) or not isinstance(result, Iterable):
        return []
    return list(result)


def _report_in(result: Any, run_id: str) -> SelectionReport | None:
    """Find run ``run_id`` in what ``read_trace_file`` returned: a mapping of run ids
    to reports, objects with ``run_id`` and ``report``, (run id, report) pairs, or
    events to fold."""
    if isinstance(result, SelectionReport):
        return result
    if isinstance(result, Mapping):
        found = result.get(run_id)
        return found if isinstance(found, SelectionReport) else None
    events: list[PipelineEvent] = []
    for entry in result if isinstance(result, Iterable) else ():
        if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == run_id:
            return entry[1] if isinstance(entry[1], SelectionReport) else None
        if getattr(entry, "run_id", None) == run_id:
            report = getattr(entry, "report", None)
            if isinstance(report, SelectionReport):
                return report
            events.append(entry)
    return build_report(events) if events else None


def _print_report(run_id: str, report: SelectionReport, run: LoggedRun | None,
                  budget: ContextBudget | None = None) -> None:
    from rich.table import Table  # noqa: PLC0415 - rich is the cli extra's

    console = _console()
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
    included = Table(title="Included, in placed order")
    for column in ("#", "score", "tokens", "kind", "reason", "content"):
        included.add_column(column, overflow="fold")
    for position, entry in enumerate(report.included):
        included.add_row(str(position), f"{entry.score:.4f}", str(entry.item.tokens),
                         safe(entry.item.kind.value, 20), safe(entry.reason.name),
                         safe(entry.item.content, 100))
    console.print(included)
    excluded = Table(title="Excluded, highest score first")
    for column in ("score", "tokens", "kind", "reason", "content"):
        excluded.add_column(column, overflow="fold")
    for left_out in report.excluded:
        excluded.add_row(f"{left_out.score:.4f}", str(left_out.item.tokens),
                         safe(left_out.item.kind.value, 20),
                         _reason_text(reason_to_dict(left_out.reason)),
                         safe(left_out.item.content, 100))
    console.print(excluded)
    stages = ", ".join(f"{event.stage} {event.duration_ms:.3f} ms ({event.item_count} items)"
                       for event in report.events)
    console.print(f"Stages: {stages or '-'}")
    for shortfall in report.count_requirement_shortfalls:
        console.print(f"Count shortfall: {safe(shortfall.kind.value)} required "
                      f"{shortfall.required_count}, got {shortfall.satisfied_count}")
    if report.overflow is not None:
        console.print(f"Overflow: {report.overflow.tokens_over_budget} tokens over budget")
    if report.incomplete:
        console.print("Incomplete:")
        for problem in report.incomplete:
            console.print(f"  - {safe(problem, 300)}")


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
    found: list[IncludedItem | ExcludedItem] = []
    entries: list[IncludedItem | ExcludedItem] = [*run.report.included, *run.report.excluded]
    for entry in entries:
        text = entry.item.content
        if (content is not None and text in wanted) or (
                pattern is not None and pattern.search(text)):
            found.append(entry)
    return found


class _Why:
    """``cupellation why LOG --content TEXT | --match REGEX``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "why", help="say why an item was or was not selected, run by run",
            description="For every run that considered a matching item: whether it was "
                        "included and, if not, its reason with data and what beat it (the "
                        "higher-scored items that took the budget, the pinned item that "
                        "displaced it, or the copy that was kept). --content matches the "
                        "whole content (also its sha256 digest in runs logged with hash "
                        "capture); --match searches it with a regular expression.",
            epilog=EXIT_CODES_HELP)
        add_log_arguments(parser)
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--content", metavar="TEXT", help="the item's exact content")
        group.add_argument("--match", metavar="REGEX", help="a regular expression to search")
        parser.add_argument("--since", metavar="TIME", help="only runs started at or after TIME")
        parser.add_argument("--until", metavar="TIME", help="only runs started at or before TIME")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        pattern = None
        if args.match is not None:
            try:
                pattern = re.compile(args.match)
            except re.error as exc:
                return _fail("why", f"--match is not a valid regular expression: {exc}")
        answers: list[dict[str, Any]] = []
        try:
            with open_reader(args, since=args.since, until=args.until) as reader:
                for run in reader:
                    for entry in _matches(run, args.content, pattern):
                        answers.append(_answer(run, entry))
                stats = reader.stats
        except UsageError as exc:
            return _fail("why", str(exc))
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
    if isinstance(entry, IncludedItem):
        answer["position"] = run.report.included.index(entry)
    else:
        answer["beaten_by"] = _beaten_by(entry, run.report)
    return answer


def _print_why(answers: list[dict[str, Any]], stats: ReadStats) -> None:
    console = _console()
    for answer in answers:
        where = f"run {safe(answer['run_id'])} (started {answer['started_at'] or '-'})"
        item = (f"{safe(answer['content'], 80)!s} [{answer['tokens']} tokens, score "
                f"{answer['score']:.4f}]")
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
        if not answer["run_complete"]:
            console.print("    (this run's record is incomplete: see 'cupellation report')")
    for line in stats_lines(stats):
        console.print(line)


AUDIT = _Audit()
REPORT = _Report()
WHY = _Why()
